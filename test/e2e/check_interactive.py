"""Checks spark-run --interactive --json output (one JSON object per turn) against independent
single-shot runs: for every turn, the conversation so far (system, the user lines, the answers
spark-run printed) is rendered with spark-tokenize --apply-chat-template, tokenized, and generated
by spark-run --prompt-ids in a fresh process; the ids must be the turn's. Turns after the first
must have reused the cache of the conversation (reused_tokens > 0), and prefilled only the rest.

usage: check_interactive.py TURNS_JSONL USER_LINES_FILE SYSTEM CUBIN WEIGHTS TOKENIZER MAX_NEW_TOKENS
"""
import json
import os
import subprocess
import sys
import tempfile


def run(args, stdin=None):
    return subprocess.run(args, input=stdin, capture_output=True, text=True, check=True).stdout


def main():
    turns_file, lines_file, system, cubin, weights, tokenizer, max_new = sys.argv[1:8]
    turns = [json.loads(line) for line in open(turns_file, encoding="utf-8") if line.strip()]
    users = [line.rstrip("\n") for line in open(lines_file, encoding="utf-8") if line.strip()]
    if len(turns) != len(users):
        sys.exit(f"interactive: {len(turns)} turns for {len(users)} user lines")
    messages = [{"role": "system", "content": system}]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (turn, user) in enumerate(zip(turns, users)):
            messages.append({"role": "user", "content": user})
            path = os.path.join(tmp, f"messages{i}.json")
            json.dump(messages, open(path, "w", encoding="utf-8"))
            rendered = run(["spark-tokenize", "--tokenizer", tokenizer, "--apply-chat-template", path,
                            "--add-generation-prompt"])
            ids = run(["spark-tokenize", "--tokenizer", tokenizer, "--no-special"], rendered).split()
            out = json.loads(run(["spark-run", cubin, "--weights", weights, "--device", "host",
                                  "--prompt-ids", ",".join(ids),
                                  "--max-new-tokens", max_new, "--json"]))
            # --prompt-ids applies no generation_config stop ids: cut at the first one the chat
            # run stopped at.
            expected = out["ids"][: len(turn["ids"])]
            if turn["ids"] != expected:
                failures.append(f"turn {i + 1}: ids {turn['ids']} != fresh run {out['ids']}")
            prefill = turn["timings"]["prefill_tokens"]
            reused = turn.get("reused_tokens", 0)
            if i > 0 and reused == 0:
                failures.append(f"turn {i + 1}: nothing reused from the cache")
            if reused + prefill != len(ids):
                failures.append(f"turn {i + 1}: reused {reused} + prefilled {prefill} != prompt {len(ids)}")
            messages.append({"role": "assistant", "content": turn["text"]})
    if failures:
        sys.exit("interactive: " + "; ".join(failures))
    print(f"interactive: {len(turns)} turns equal fresh single-shot runs; later turns reused the cache")


if __name__ == "__main__":
    main()
