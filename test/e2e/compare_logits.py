#!/usr/bin/env python3
"""Compares logits written by `spark-run --logits-out` with a golden file from
tools/reference/make_tiny_models.py. Pure Python (no numpy), so it runs in CI.

  compare_logits.py SPARK.safetensors GOLDEN.safetensors [--golden-tensor logits] [--rtol 1e-3]
                    [--tokens "1 2 3" | --tokens-file IDS.txt] [--golden-ids greedy_ids]
                    [--margin-aware] [--spark-first-row K]

For every row r of the golden tensor: max|spark - golden| / max|golden| <= rtol (a row-relative
error). Prints the worst row, and the first failing row with its top-1 tokens, and exits 1 on
failure. With --tokens (or --tokens-file, a file holding spark-run's stdout: the ids on one line,
for shells without command substitution such as lit's internal one), also checks the generated
ids equal the golden ids tensor. With --margin-aware (for runs checked at a looser tolerance,
e.g. bf16): the ids must equal the golden ones before the first step whose golden top-1/top-2
margin (`top2_margin`) is below 2 x rtol x max|golden logit| of its row (two logits each off by
up to the tolerance can swap there); from that step on an id may differ, and once one does, the
logits rows after it (computed from another context) are not compared.
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
    ap.add_argument("--spark-first-row", type=int, default=0,
                    help="the spark row golden row 0 is compared with (golden greedy_logits that "
                         "hold only the generated steps' rows: the prompt length - 1)")
    ap.add_argument("--margin-aware", action="store_true",
                    help="compare ids only up to the first step with a golden margin below rtol")
    args = ap.parse_args()
    if args.tokens_file is not None:
        with open(args.tokens_file) as f:
            args.tokens = f.read()

    spark = read_safetensors(args.spark)
    golden = read_safetensors(args.golden)
    s_shape, s = spark["logits"]
    g_shape, g = golden[args.golden_tensor]
    rows, vocab = g_shape
    off = args.spark_first_row
    if s_shape[1] != vocab or s_shape[0] < rows + off:
        print(f"FAIL: spark logits {s_shape} cannot cover golden {args.golden_tensor} {g_shape}")
        return 1
    ids = want = None
    rows_checked = rows
    status = 0
    if args.tokens is not None:
        ids = [int(t) for t in args.tokens.split()]
        want = list(golden[args.golden_ids][1])
        if len(ids) != len(want):
            print(f"FAIL: generated {len(ids)} ids, golden has {len(want)}")
            return 1
    # --margin-aware: step i was taken from row P - 1 + i (P = rows - len(want) + 1); the first
    # step whose golden margin is within 2 x rtol x max|logit| may pick another id, and every row
    # after the step that did (its context differs from the golden's) is not compared.
    allowed_from, tolerated = None, False
    if args.margin_aware and ids is not None:
        first_row = rows - len(want) + 1
        margins = golden["top2_margin"][1]
        for i in range(len(want)):
            r = first_row - 1 + i
            scale = max(abs(x) for x in g[r * vocab:(r + 1) * vocab]) or 1.0
            if margins[r] < 2 * args.rtol * scale:
                allowed_from = i
                print(f"tokens: step {i} has golden margin {margins[r]:.3e} < 2 x rtol x "
                      f"max|logit| = {2 * args.rtol * scale:.3e}: from it on, an id may differ")
                break
        diverged = next((i for i in range(len(want)) if ids[i] != want[i]), None)
        if diverged is not None and allowed_from is not None and diverged >= allowed_from:
            tolerated = True
            rows_checked = first_row + diverged
            print(f"tokens: step {diverged} picked {ids[diverged]}, golden {want[diverged]} "
                  f"(within the tolerance); logits rows from {rows_checked} on (if any) have "
                  f"another context and are not compared")
    worst, worst_row, first_bad = 0.0, -1, None
    for r in range(rows_checked):
        gr = g[r * vocab:(r + 1) * vocab]
        sr = s[(r + off) * vocab:(r + off + 1) * vocab]
        scale = max(abs(x) for x in gr) or 1.0
        err = max(abs(a - b) for a, b in zip(sr, gr)) / scale
        if err > worst:
            worst, worst_row = err, r
        if err > args.rtol and first_bad is None:
            first_bad = (r, err, max(range(vocab), key=lambda i: sr[i]),
                         max(range(vocab), key=lambda i: gr[i]))
    print(f"{args.golden_tensor}: {rows_checked} rows x {vocab}, worst row-relative error "
          f"{worst:.3e} (row {worst_row}), tolerance {args.rtol:g}")
    if first_bad:
        r, err, st, gt = first_bad
        print(f"FAIL: first diverging position {r}: error {err:.3e}, spark top-1 {st}, "
              f"golden top-1 {gt} (run spark-run --dump DIR to find the first diverging layer)")
        status = 1
    if ids is not None:
        if ids == want:
            print(f"tokens: {len(ids)} generated ids equal the golden {args.golden_ids}")
        elif tolerated:
            print(f"tokens: generated {ids}, golden {want}: equal up to the tolerated step")
        else:
            print(f"FAIL: generated {ids}, golden {want}")
            status = 1
    if status == 0:
        print("PASS")
    return status


if __name__ == "__main__":
    sys.exit(main())
