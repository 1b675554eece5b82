"""Renders DIR/chat_template.jinja over a messages file with Python jinja2 the way transformers'
apply_chat_template does (tools/reference/render_chat_template.py's environment), for comparing
with spark-tokenize --apply-chat-template byte for byte.

usage: render_with_jinja2.py DIR MESSAGES.json OUT [--add-generation-prompt] [--enable-thinking]
                             [--tools TOOLS.json]
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..",
                                "tools", "reference"))
import render_chat_template  # noqa: E402


def main():
    directory, messages_path, out = sys.argv[1:4]
    flags = sys.argv[4:]
    with open(os.path.join(directory, "chat_template.jinja"), encoding="utf-8") as f:
        template = render_chat_template.make_environment().from_string(f.read())
    with open(os.path.join(directory, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    special = {}
    for key in ("bos_token", "eos_token"):
        value = config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if value is not None:
            special[key] = value
    with open(messages_path, encoding="utf-8") as f:
        kwargs = {"messages": json.load(f),
                  "add_generation_prompt": "--add-generation-prompt" in flags,
                  "enable_thinking": "--enable-thinking" in flags}
    if "--tools" in flags:
        with open(flags[flags.index("--tools") + 1], encoding="utf-8") as f:
            kwargs["tools"] = json.load(f)
    result = render_chat_template.render(template, kwargs, special)
    if "text" not in result:
        sys.exit("jinja2 failed: " + result["error"])
    with open(out, "w", encoding="utf-8", newline="") as f:
        f.write(result["text"])


if __name__ == "__main__":
    main()
