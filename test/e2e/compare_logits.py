#!/usr/bin/env python3
"""Compares logits written by `spark-run --logits-out` with a golden file from
tools/reference/make_tiny_models.py. Pure Python (no numpy), so it runs in CI.

  compare_logits.py SPARK.safetensors GOLDEN.safetensors [--golden-tensor logits] [--rtol 1e-3]
                    [--tokens "1 2 3" | --tokens-file IDS.txt] [--golden-ids greedy_ids]

For every row r of the golden tensor: max|spark - golden| / max|golden| <= rtol (a row-relative
error). Prints the worst row, and the first failing row with its top-1 tokens, and exits 1 on
failure. With --tokens (or --tokens-file, a file holding spark-run's stdout: the ids on one line,
for shells without command substitution such as lit's internal one), also checks the generated
ids equal the golden ids tensor.
"""
import argparse
import array
import sys

from safetensors_io import read_raw


def read_safetensors(path):
    """{name: (shape, array)} for the F32 / I64 / I32 tensors of the file."""
    tensors = {}
    for name, (dtype, shape, raw) in read_raw(path).items():
        code = {"F32": "f", "I64": "q", "I32": "i"}.get(dtype)
        if code is None:
            continue
        values = array.array(code)
        values.frombytes(raw)
        tensors[name] = (shape, values)
    return tensors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spark")
    ap.add_argument("golden")
    ap.add_argument("--golden-tensor", default="logits")
    ap.add_argument("--rtol", type=float, default=1e-3)
    tokens = ap.add_mutually_exclusive_group()
    tokens.add_argument("--tokens", help="space-separated ids spark-run printed")
    tokens.add_argument("--tokens-file", help="file with the space-separated ids spark-run printed")
    ap.add_argument("--golden-ids", default="greedy_ids")
    args = ap.parse_args()
    if args.tokens_file is not None:
        with open(args.tokens_file) as f:
            args.tokens = f.read()

    spark = read_safetensors(args.spark)
    golden = read_safetensors(args.golden)
    s_shape, s = spark["logits"]
    g_shape, g = golden[args.golden_tensor]
    rows, vocab = g_shape
    if s_shape[1] != vocab or s_shape[0] < rows:
        print(f"FAIL: spark logits {s_shape} cannot cover golden {args.golden_tensor} {g_shape}")
        return 1
    worst, worst_row, first_bad = 0.0, -1, None
    for r in range(rows):
        gr = g[r * vocab:(r + 1) * vocab]
        sr = s[r * vocab:(r + 1) * vocab]
        scale = max(abs(x) for x in gr) or 1.0
        err = max(abs(a - b) for a, b in zip(sr, gr)) / scale
        if err > worst:
            worst, worst_row = err, r
        if err > args.rtol and first_bad is None:
            first_bad = (r, err, max(range(vocab), key=lambda i: sr[i]),
                         max(range(vocab), key=lambda i: gr[i]))
    print(f"{args.golden_tensor}: {rows} rows x {vocab}, worst row-relative error {worst:.3e} "
          f"(row {worst_row}), tolerance {args.rtol:g}")
    status = 0
    if first_bad:
        r, err, st, gt = first_bad
        print(f"FAIL: first diverging position {r}: error {err:.3e}, spark top-1 {st}, "
              f"golden top-1 {gt} (run spark-run --dump DIR to find the first diverging layer)")
        status = 1
    if args.tokens is not None:
        ids = [int(t) for t in args.tokens.split()]
        _, want = golden[args.golden_ids]
        want = list(want)
        if ids != want[:len(ids)] or len(ids) != len(want):
            print(f"FAIL: generated {ids}, golden {want}")
            status = 1
        else:
            print(f"tokens: {len(ids)} generated ids equal the golden {args.golden_ids}")
    if status == 0:
        print("PASS")
    return status


if __name__ == "__main__":
    sys.exit(main())
