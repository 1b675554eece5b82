#!/usr/bin/env python3
"""Compares the pixel values Spark computes for an image (spark-image --dump-pixels: raw float32
[patches, 768]) with the processor's (test/data/images/vision_processed_*.safetensors, both
backends' values as bytes). Pure Python (no numpy), for CI.

  compare_pixels.py SPARK.bin PROCESSED.safetensors {pil|torchvision} {a|b} [--max 1/255]

Prints the worst difference (as a multiple of 1/255) and how many values differ by more than 1e-6;
exits 1 when the worst difference is above --max (a fraction of 1, default 1/255: the issue's
bound) or the sizes differ.
"""
import argparse
import array
import sys

from safetensors_io import read_raw


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spark")
    ap.add_argument("processed")
    ap.add_argument("backend", choices=("pil", "torchvision"))
    ap.add_argument("image")
    ap.add_argument("--max", type=float, default=1.0 / 255.0)
    args = ap.parse_args()
    values = array.array("f")
    with open(args.spark, "rb") as f:
        values.frombytes(f.read())
    _, shape, raw = read_raw(args.processed)[f"{args.backend}_pixel_bytes_{args.image}"]
    if len(raw) != len(values):
        print(f"FAIL: spark has {len(values)} values, the {args.backend} processor {len(raw)} ({shape})")
        return 1
    worst, differing = 0.0, 0
    for v, b in zip(values, raw):
        d = abs(v - b / 255.0)
        worst = max(worst, d)
        differing += d > 1e-6
    print(f"{args.backend} {args.image}: {len(values)} values, worst |spark - processor| "
          f"{worst * 255:.4f}/255, {differing} differ by more than 1e-6")
    if worst > args.max + 1e-7:
        print(f"FAIL: above {args.max * 255:.4f}/255")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
