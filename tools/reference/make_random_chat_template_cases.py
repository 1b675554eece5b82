#!/usr/bin/env python3
"""Writes test/data/chat_templates/constructs_random.json: seeded random expressions and statements
over the Jinja subset Spark implements (literals, variables of a chat-like context, operators,
filters, tests, methods, loops), a differential test against jinja2: render_chat_template.py
renders them into goldens/constructs_random.json and SparkTextTests compares the C++ rendering.
Run from test/data/chat_templates/:  make_random_chat_template_cases.py [COUNT] [SEED]"""
import json
import os
import random
import re
import sys

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 19)

CONTEXT = {
    "s": "Hello, Wörld  ", "e": "", "n": 7, "m": -3, "f": 2.5, "z": 0, "t": True, "no": None,
    "l": [3, 1, 2], "ls": ["b", "A", "c", "a"], "d": {"k": "v", "B": 2, "a": [1, {"x": None}]},
    "msgs": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
             {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f",
              "arguments": {"q": 1}}}]}],
}
ATOMS = ["s", "e", "n", "m", "f", "z", "t", "no", "l", "ls", "d", "msgs", "missing", "d.k", "d.B",
         "d['a']", "d.nope", "msgs[1].content", "msgs[-1].tool_calls[0].function.name", "l[0]",
         "ls[1:3]", "s[::-1]", "s[2:]", "'x'", "'it''s'", "\"q\\\"\"", "1", "0", "-2", "3.5", "1e3",
         "true", "false", "none", "[]", "[1, 'a']", "{}", "{'p': 1, 'q': [2]}", "(1, 2)"]
# jinja2's lazy filters (map, select, ...) return generators, which print as an address: here they
# are always followed by `| list` (constructs.json tests generators themselves).
FILTERS = ["trim", "upper", "lower", "length", "list", "first", "last", "string", "int", "float",
           "abs", "reverse | list", "sort", "unique | list", "tojson", "dictsort", "items | list",
           "join", "join(', ')", "default('D')", "default('D', true)", "replace('l', 'L')",
           "title", "capitalize", "indent(2)", "round", "select | list", "reject | list",
           "map('string') | list", "map('upper') | list",
           "selectattr('role', 'equalto', 'user') | list", "map(attribute='role') | list",
           "tojson(indent=1)", "sort(reverse=true)"]  # no `e`: Markup's escaping `+` is not modelled
TESTS = ["defined", "undefined", "none", "string", "mapping", "iterable", "sequence", "number",
         "integer", "float", "boolean", "true", "false", "odd", "even", "equalto 7", "in [1, 7]",
         "callable", "lower", "upper"]
METHODS = ["strip()", "split()", "split(',')", "startswith('H')", "endswith(' ')", "upper()",
           "lower()", "replace('o', '0')", "lstrip()", "rstrip()", "items()", "keys()",
           "values()", "get('k')", "get('zz', 1)", "find('l')", "count('l')"]
BINOPS = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">=", "in", "not in", "and", "or"]


def expr(depth):
    r = rng.random()
    if depth <= 0 or r < 0.25:
        return rng.choice(ATOMS)
    if r < 0.45:
        return f"{expr(depth - 1)} | {rng.choice(FILTERS)}"
    if r < 0.55:
        neg = rng.choice(["", "not "])
        return f"{expr(depth - 1)} is {neg}{rng.choice(TESTS)}"
    if r < 0.65:
        return f"({expr(depth - 1)}).{rng.choice(METHODS)}"
    if r < 0.72:
        return f"{expr(depth - 1)} if {expr(depth - 1)} else {expr(depth - 1)}"
    if r < 0.77:
        return f"not {expr(depth - 1)}"
    if r < 0.82:
        return f"[{expr(depth - 1)}, {expr(depth - 1)}]"
    return f"({expr(depth - 1)} {rng.choice(BINOPS)} {expr(depth - 1)})"


def statement():
    r = rng.random()
    if r < 0.6:
        return "{{ " + expr(rng.randint(1, 3)) + " }}"
    if r < 0.75:
        return ("{% for x in " + expr(2) + " %}[{{ loop.index }}{{ x }}" +
                ("{{ ',' if not loop.last }}" if rng.random() < 0.5 else "") + "]{% endfor %}")
    if r < 0.9:
        return "{% if " + expr(2) + " %}Y{% elif " + expr(2) + " %}E{% else %}N{% endif %}"
    return "{% set v = " + expr(2) + " %}({{ v }})"


# Cases whose jinja2 output holds an object's address (a printed generator) are not reproducible:
# they are skipped (Spark refuses to print generators).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import render_chat_template  # noqa: E402

env = render_chat_template.make_environment()
cases = []
while len(cases) < COUNT:
    body = " ".join(statement() for _ in range(rng.randint(1, 2)))
    try:
        text = env.from_string(body).render(messages=[], **json.loads(json.dumps(CONTEXT)))
    except Exception:  # noqa: BLE001 - errors are part of the test
        text = ""
    if re.search(r" at 0x[0-9a-f]+", text, re.IGNORECASE):
        continue
    cases.append({"name": f"random_{len(cases):03d}", "template": body})
# One context for all cases: {"context": ..., "cases": [{"name", "template"}, ...]}.
with open("constructs_random.json", "w", encoding="utf-8") as f:
    json.dump({"context": CONTEXT, "cases": cases}, f, ensure_ascii=False, indent=1)
    f.write("\n")
print(len(cases))
