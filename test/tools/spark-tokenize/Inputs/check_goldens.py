#!/usr/bin/env python3
"""Runs spark-tokenize over a goldens-*.jsonl file of tools/reference/make_tokenizer_goldens.py
and compares with HF's ids and texts: encode (--jsonl, with and without --no-special) and decode
(--decode --jsonl, with and without --skip-special). Prints one summary line; exit 1 on any
difference.  check_goldens.py SPARK_TOKENIZE TOKENIZER GOLDENS
"""
import json
import subprocess
import sys


def run(tool, tokenizer, args, lines):
    p = subprocess.run([tool, "--tokenizer", tokenizer] + args,
                       input=("\n".join(lines) + "\n").encode("utf-8"), capture_output=True)
    if p.returncode != 0:
        sys.exit("spark-tokenize %s failed: %s" % (" ".join(args), p.stderr.decode()))
    return [json.loads(line) for line in p.stdout.decode("utf-8").split("\n") if line]


def main():
    tool, tokenizer, goldens = sys.argv[1:4]
    rows = [json.loads(line) for line in open(goldens, encoding="utf-8")]
    rows = [r for r in rows if "meta" not in r]
    bad = 0
    texts = [r for r in rows if "text" in r]
    if texts:
        lines = [json.dumps(r["text"], ensure_ascii=False) for r in texts]
        for args, key in [([], "ids"), (["--no-special"], "ids_no_special")]:
            for r, got in zip(texts, run(tool, tokenizer, ["--jsonl"] + args, lines)):
                if got != r[key]:
                    bad += 1
                    print("encode %s differs for %r" % (key, r["text"][:60]))
    lines = [json.dumps(r["ids"]) for r in rows]
    for args, key in [([], "decode"), (["--skip-special"], "decode_skip")]:
        for r, got in zip(rows, run(tool, tokenizer, ["--decode", "--jsonl"] + args, lines)):
            if got != r[key]:
                bad += 1
                print("%s differs for %r" % (key, r["ids"][:20]))
    print("rows %d texts %d differences %d" % (len(rows), len(texts), bad))
    sys.exit(1 if bad or not rows else 0)


if __name__ == "__main__":
    main()
