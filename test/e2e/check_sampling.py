#!/usr/bin/env python3
"""Checks tokens that spark-run drew with sampling options against an independent Python
implementation of the sample op's rule (docs/plan-format.md, kernel_ops.def `sample`), applied
to the logits rows spark-run wrote with --logits-out. Pure Python (no numpy), so it runs in CI.

  check_sampling.py LOGITS.safetensors IDS_FILE --prompt-length N --temperature T
                    [--top-k K] [--top-p P] [--seed S]

Row prompt_length - 1 + k of the logits produced generated token k, drawn with the counter
prompt_length + k (the position the token takes). The weights are computed in float32 as the
host reference does (floor(exp((l - max) / T) * 2^bits)); an exp that rounds differently from
the C library's could move a draw that lands within a few parts in 10^7 of a boundary, which the
fixed seeds here do not. Prints the number of tokens checked and how many distinct ones there
were, or exits 1 naming the first token that differs.
"""
import argparse
import math
import struct
import sys

from safetensors_io import read_raw

MASK64 = (1 << 64) - 1


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def key(logit):
    bits = struct.unpack("<I", struct.pack("<f", logit))[0]
    if (bits & 0x7FFFFFFF) > 0x7F800000:
        return 0
    return (~bits & 0xFFFFFFFF) if bits & 0x80000000 else bits | 0x80000000


def draw(seed, counter):
    z = (seed + (counter + 1) * 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def weight_bits(vocab):
    log2 = 0
    while log2 < 31 and (1 << log2) < vocab:
        log2 += 1
    return 62 - log2


def sample(row, temperature, top_k, top_p, seed, counter):
    vocab = len(row)
    keys = [key(v) for v in row]
    best = max(range(vocab), key=lambda i: (keys[i], -i))
    top = row[best]
    if temperature <= 0 or top_k == 1 or not math.isfinite(top):
        return best
    ranked = sorted(range(vocab), key=lambda i: (-keys[i], i))
    if 0 < top_k < vocab:
        ranked = ranked[:top_k]
    bits = weight_bits(vocab)

    def weight(i):
        if keys[i] == 0:
            return 0
        w = f32(math.exp(f32(f32(row[i] - top) / temperature)))
        return min(int(w * 2.0 ** bits), 1 << bits)

    total = sum(weight(i) for i in ranked)
    if top_p < 1:
        want = float(f32(top_p)) * float(total)
        need = total if not want < total else max(1, min(total, math.ceil(want)))
        kept, mass = [], 0
        for i in ranked:
            if mass >= need:
                break
            kept.append(i)
            mass += weight(i)
        ranked, total = kept, mass
    target = (total * draw(seed, counter)) >> 64
    running = 0
    for i in sorted(ranked):
        running += weight(i)
        if running > target:
            return i
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("logits")
    parser.add_argument("ids")
    parser.add_argument("--prompt-length", type=int, required=True)
    parser.add_argument("--temperature", type=float, required=True)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    dtype, shape, raw = read_raw(args.logits)["logits"]
    assert dtype == "F32" and len(shape) == 2, (dtype, shape)
    rows, vocab = shape
    values = struct.unpack("<%df" % (rows * vocab), raw)
    ids = [int(t) for t in open(args.ids).read().split()]
    temperature = f32(args.temperature)
    for k, token in enumerate(ids):
        r = args.prompt_length - 1 + k
        if r >= rows:
            break
        row = list(values[r * vocab:(r + 1) * vocab])
        want = sample(row, temperature, args.top_k, args.top_p, args.seed,
                      args.prompt_length + k)
        if want != token:
            print("token %d: spark-run drew %d, the rule gives %d" % (k, token, want))
            sys.exit(1)
    print("sampled: %d tokens follow the rule, %d distinct" % (len(ids), len(set(ids))))


if __name__ == "__main__":
    main()
