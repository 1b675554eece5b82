#!/usr/bin/env python3
"""Renders every (chat template, conversation) pair of test/data/chat_templates/ with Python jinja2
the way transformers' apply_chat_template does, and writes the goldens that Spark's C++ renderer
(runtime/src/text/chat_template.cc) must reproduce byte for byte.

  render_chat_template.py [--data DIR] [--out DIR]

DIR (default: test/data/chat_templates next to this script's repository) holds:
  templates.json      {"FILE.jinja": {"bos_token": ..., "eos_token": ...}, ...}: the templates to
                      render and the special tokens transformers passes with them;
  conversations.json  [{"name": ..., "messages": [...], "tools": [...]?, "add_generation_prompt":
                      bool?, other keyword arguments (enable_thinking, ...)}, ...].
  constructs.json     [{"name": ..., "template": "...", "context": {...}}, ...]: small templates,
                      one per construct of the Jinja subset (the C++ unit tests render each);
  constructs_random.json  seeded random templates (make_random_chat_template_cases.py) sharing one
                      context: {"context": {...}, "cases": [{"name": ..., "template": ...}, ...]}.
One golden per template is written to OUT (default: DIR/goldens): goldens/FILE.json, a JSON object
{conversation name: {"text": rendered} or {"error": message, "error_type": class}}; and
goldens/constructs.json and goldens/constructs_random.json, {construct name: the same}. A template jinja2 cannot compile is an
error of type TemplateSyntaxError.

The environment mirrors transformers (utils/chat_template_utils.py, _compile_jinja_template and
render_jinja_template): ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[AssistantTracker, loopcontrols]) (AssistantTracker's {% generation %} block as it
renders without an assistant mask: GenerationTag below), the `tojson` filter replaced by json.dumps with
ensure_ascii=False, globals raise_exception (TemplateError) and strftime_now; render keyword
arguments messages, tools (None when absent), documents (None), add_generation_prompt (False when
absent), the special tokens, then the conversation's other keys. strftime_now uses a fixed clock
(FIXED_NOW) so that goldens are reproducible; the C++ tests set the same clock.
"""
import argparse
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

FIXED_NOW = datetime.datetime(2026, 7, 15, 12, 34, 56)


class GenerationTag(jinja2.ext.Extension):
    """transformers' AssistantTracker as it renders when no assistant mask is requested: the
    {% generation %}...{% endgeneration %} block is a call block that returns its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def make_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return FIXED_NOW.strftime(format)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(template, kwargs, special_tokens):
    """kwargs: the conversation without its "name" (or a construct's context)."""
    if isinstance(template, Exception):
        return {"error": str(template), "error_type": type(template).__name__}
    kwargs = dict(kwargs)
    context = {
        "messages": kwargs.pop("messages"),
        "tools": kwargs.pop("tools", None),
        "documents": kwargs.pop("documents", None),
        "add_generation_prompt": kwargs.pop("add_generation_prompt", False),
    }
    context.update(special_tokens)
    context.update(kwargs)
    try:
        return {"text": template.render(**context)}
    except Exception as error:  # noqa: BLE001 - every failure is part of the golden
        return {"error": str(error), "error_type": type(error).__name__}


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=os.path.join(root, "test", "data", "chat_templates"))
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    out = args.out or os.path.join(args.data, "goldens")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(args.data, "templates.json"), encoding="utf-8") as f:
        templates = json.load(f)
    with open(os.path.join(args.data, "conversations.json"), encoding="utf-8") as f:
        conversations = json.load(f)
    env = make_environment()
    def write(name, results):
        with open(os.path.join(out, name), "w", encoding="utf-8", newline="\n") as f:
            json.dump(results, f, ensure_ascii=False, indent=1)
            f.write("\n")

    for fixture in ("constructs.json", "constructs_random.json"):
        with open(os.path.join(args.data, fixture), encoding="utf-8") as f:
            constructs = json.load(f)
        if isinstance(constructs, dict):  # {"context": shared, "cases": [{name, template}]}
            # A copy per case: a filter such as indent mutates a list in place (list += str).
            constructs = [{**c, "context": json.loads(json.dumps(constructs["context"]))}
                          for c in constructs["cases"]]
        results = {}
        for construct in constructs:
            try:
                template = env.from_string(construct["template"])
            except jinja2.exceptions.TemplateError as error:
                template = error
            conversation = {"messages": [], **construct["context"]}
            results[construct["name"]] = render(template, conversation, {})
        write(fixture, results)
    for name, special_tokens in templates.items():
        with open(os.path.join(args.data, name), encoding="utf-8", newline="") as f:
            template = env.from_string(f.read())
        results = {c["name"]: render(template, {k: v for k, v in c.items() if k != "name"},
                                     special_tokens)
                   for c in conversations}
        write(os.path.splitext(name)[0] + ".json", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
