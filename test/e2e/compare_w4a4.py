"""fp4-activations.test: the W4A4 run's logits against the W4A16 run's on the same checkpoint.

   compare_w4a4.py W4A4_LOGITS W4A16_LOGITS   (spark-run --logits-out files)

Quantizing the activations to 4 bits must change the logits (else nothing ran in W4A4), keep them
finite, and stay within the logits' own scale (a wrong scale or layout gives differences of many
times the logits). Prints one line for FileCheck; exits 1 otherwise.
"""
import array
import math
import sys

from safetensors_io import read_raw


def logits(path):
    out = {}
    for name, (dtype, shape, raw) in read_raw(path).items():
        if dtype != "F32":
            raise SystemExit(f"{path}: {name} is {dtype}, expected F32")
        out[name] = (shape, array.array("f", raw))
    return out


def main():
    a4, a16 = logits(sys.argv[1]), logits(sys.argv[2])
    worst = 0.0
    for name, (shape, values) in a16.items():
        got = a4[name][1]
        cols = shape[-1]
        for r in range(len(values) // cols):
            row16, row4 = values[r * cols:(r + 1) * cols], got[r * cols:(r + 1) * cols]
            if not all(math.isfinite(v) for v in row4):
                print(f"{name} row {r}: a W4A4 logit is not finite")
                return 1
            scale = max(abs(v) for v in row16) or 1.0
            worst = max(worst, max(abs(u - v) for u, v in zip(row4, row16)) / scale)
    if not 1e-4 < worst < 2.0:
        print(f"W4A4 against W4A16: row-relative difference {worst:.3e}, outside (1e-4, 2)")
        return 1
    print(f"W4A4 against W4A16: every logit finite, row-relative difference in (1e-4, 2): "
          f"{worst:.3e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
