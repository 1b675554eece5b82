#!/usr/bin/env python3
"""Compares one F32 tensor of two safetensors files row by row. Pure Python (no numpy), for CI.

  compare_tensors.py A.safetensors NAME_A B.safetensors NAME_B [--rtol 1e-3]

NAME_A "raw": A is a raw little-endian float32 file (spark-image --dump-pixels) of B's row width.

Both tensors must have the same number of elements and are read as rows of their last dimension;
for every row: max|a - b| / max|b| <= rtol (row-relative, as compare_logits.py). Prints the shape,
the worst row and PASS, or FAIL with the first failing row (exit 1).
"""
import argparse
import array
import sys

from safetensors_io import read_raw


def load(path, name):
    dtype, shape, raw = read_raw(path)[name]
    if dtype != "F32":
        sys.exit(f"{path}: {name} is {dtype}, expected F32")
    values = array.array("f")
    values.frombytes(raw)
    return shape, values


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("name_a")
    ap.add_argument("b")
    ap.add_argument("name_b")
    ap.add_argument("--rtol", type=float, default=1e-3)
    args = ap.parse_args()
    if args.name_a == "raw":
        a = array.array("f")
        with open(args.a, "rb") as f:
            a.frombytes(f.read())
        sa = [len(a)]
    else:
        sa, a = load(args.a, args.name_a)
    sb, b = load(args.b, args.name_b)
    if len(a) != len(b) or (args.name_a != "raw" and sa[-1] != sb[-1]):
        print(f"FAIL: {args.name_a} {sa} and {args.name_b} {sb} differ in size")
        return 1
    cols = sb[-1]
    worst, worst_row, bad = 0.0, -1, None
    for r in range(len(b) // cols):
        ra, rb = a[r * cols:(r + 1) * cols], b[r * cols:(r + 1) * cols]
        scale = max(abs(x) for x in rb) or 1.0
        err = max(abs(x - y) for x, y in zip(ra, rb)) / scale
        if err > worst:
            worst, worst_row = err, r
        if err > args.rtol and bad is None:
            bad = (r, err)
    print(f"{args.name_a} vs {args.name_b}: {len(b) // cols} rows x {cols}, worst row-relative "
          f"error {worst:.3e} (row {worst_row}), tolerance {args.rtol:g}")
    if bad:
        print(f"FAIL: row {bad[0]}: error {bad[1]:.3e}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
