"""Checks spark-run --json's "startup" (cold start) object: the load phases in the order
OpenModel runs them, then the first prefill and the rest, each a non-negative time, and together
the time from process start to the first token. Prints OK or what is wrong."""
import json
import sys

out = json.loads(open(sys.argv[1]).read().splitlines()[-1])
startup = out["startup"]
names = [p["phase"] for p in startup["phases"]]
expected = sys.argv[2].split("|")
problems = []
if names != expected:
    problems.append(f"phases {names}, expected {expected}")
if any(p["seconds"] < 0 for p in startup["phases"]):
    problems.append("a negative time")
total = sum(p["seconds"] for p in startup["phases"])
if not 0 < startup["to_first_token_seconds"] <= total + 1e-9:
    problems.append(f"to_first_token_seconds {startup['to_first_token_seconds']} against phases summing to {total}")
if abs(total - startup["to_first_token_seconds"]) > 1e-6 and startup["phases"][-1]["seconds"] > 0:
    problems.append(f"the phases sum to {total}, not to_first_token_seconds")
weights = [p for p in startup["phases"] if p["phase"].startswith("weights")]
if not weights or weights[0].get("bytes", 0) <= 0:
    problems.append("no weights phase with bytes")
print("\n".join(problems) if problems else "OK")
