"""Prints a plan's programs (docs/plan-format.md "Programs") for programs.test, from the plan's
JSON (spark-run MODEL --dump-plan)."""
import json
import sys

plan = json.load(open(sys.argv[1]))
steps, programs, max_tokens = plan["steps"], plan["programs"], plan["max_tokens"]
print("steps", len(steps), "max_tokens", max_tokens)


def short(source):
    return source.split(".")[-1] if source.startswith("layers") else source


def blocks(rule, tokens):
    work = max(tokens * rule["per_token"], rule["fixed"])
    return min(max(-(-work // rule["divisor"]), 1), 2048)


for p in programs:
    line = f"program {p['name']} {p['min_tokens']}-{p['max_tokens']} soft={p.get('soft_tokens', False)} steps {len(p['steps'])}"
    assert p["steps"] == sorted(set(p["steps"]))
    if p["name"] == "decode":
        out = sorted({short(steps[i]["source"]) for i in range(len(steps)) if i not in set(p["steps"])})
        line += f" left out {out}"
    print(line)

covered = True
for soft in (False, True):
    for t in range(1, max_tokens + 1):
        n = sum(1 for p in programs if p.get("soft_tokens", False) == soft and p["min_tokens"] <= t <= p["max_tokens"])
        covered &= n == 1
print("every call size has one program:", covered)
decode = [i for p in programs if p["name"] == "decode" for i in p["steps"]]
le = all(blocks(steps[i]["grid"], 1) <= blocks(steps[i]["grid"], max_tokens) for i in decode)
fewer = sum(blocks(steps[i]["grid"], 1) < blocks(steps[i]["grid"], max_tokens) for i in decode)
print(f"decode blocks <= prefill blocks: {le}, fewer for most steps: {fewer > len(decode) // 2}")
