"""Compares spark-run --chat --json output with a transformers chat golden (make_chat_golden.py):
the generated ids and the answer's text must be equal; prints what it compared.

usage: compare_chat.py SPARK_JSON GOLDEN_JSON [--streamed STDOUT_FILE]
--streamed: also require the text spark-run streamed (without --json) to be the golden text.
"""
import json
import sys


def main():
    spark = json.load(open(sys.argv[1], encoding="utf-8"))
    golden = json.load(open(sys.argv[2], encoding="utf-8"))
    failures = []
    if spark["ids"] != golden["ids"]:
        failures.append(f"ids {spark['ids']} != golden {golden['ids']}")
    if spark["text"] != golden["text"]:
        failures.append(f"text {spark['text']!r} != golden {golden['text']!r}")
    if spark["stopped_at_eos"] != golden["stopped_at_eos"]:
        failures.append("stopped_at_eos differs")
    if len(sys.argv) > 4 and sys.argv[3] == "--streamed":
        streamed = open(sys.argv[4], encoding="utf-8", newline="").read()
        if streamed != golden["text"] + "\n":
            failures.append(f"streamed {streamed!r} != golden text + newline")
    if failures:
        sys.exit("chat: " + "; ".join(failures))
    print(f"chat: {len(golden['ids'])} ids and the text equal transformers' ({golden['transformers']})")


if __name__ == "__main__":
    main()
