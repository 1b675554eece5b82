#!/usr/bin/env python3
"""Checks modelopt_quant.py (reference NVFP4 / FP8 quantisation in the ModelOpt layout) against
hand-computed expectations (including ModelOpt's block-scale clamp at 2^-9, commit 211c6b34) and an
independent exact-rational (fractions.Fraction) oracle, and its quantize / dequantize / make-exact /
compare commands on test/data/models/tiny-dense (error bounds, sharded input, corrupt checkpoints) and
the safetensors layout they write on tiny-dense and tiny-e2b (aligned tensors, __metadata__ kept).
Pure Python (stdlib only), about 10 s.

    python3 tools/reference/test_modelopt_quant.py

Prints one line per group of checks; exits 1 if any check fails.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import modelopt_quant as mq  # noqa: E402

TOOL = str(HERE / "modelopt_quant.py")
TINY = HERE.parent.parent / "test" / "data" / "models" / "tiny-dense"
TINY_E2B = HERE.parent.parent / "test" / "data" / "models" / "tiny-e2b"

FAILURES = []
COUNT = [0]


def check(cond, what):
    COUNT[0] += 1
    if not cond:
        FAILURES.append(what)
        print(f"  FAIL {what}")
    return cond


def eq(got, want, what):
    return check(got == want, f"{what}: got {got!r}, want {want!r}")


def run_tool(*args):
    t0 = time.time()
    r = subprocess.run([sys.executable, TOOL, *map(str, args)], capture_output=True, text=True)
    return r, time.time() - t0


def f32b(x):
    return struct.pack("<f", x)


def bf16_bytes(values):
    return mq.f32_list_to_bf16_exact(values, "test data")


def load(directory):
    """{name: (dtype, shape, bytes)} of a checkpoint."""
    ck = mq.Checkpoint(str(directory))
    return {n: (t.dtype, t.shape, t.read()) for n, t in ck.tensors.items()}


def values_of(entry):
    dtype, _, raw = entry
    if dtype == "BF16":
        return mq.bf16_to_f32_list(raw)
    if dtype == "F32":
        return mq.bits_to_f32_list(raw)
    raise AssertionError(dtype)


def bits(values):
    return mq.f32_list_to_bytes(values)


def make_ckpt(directory, tensors, config=None, shards=None):
    """Writes a checkpoint: one model.safetensors, or shards {file: [names]} + index.json."""
    os.makedirs(directory, exist_ok=True)
    mq.write_json(os.path.join(directory, "config.json"), config or {"model_type": "test"})
    if shards is None:
        mq.write_safetensors(os.path.join(directory, "model.safetensors"), tensors, {"format": "pt"})
        return
    wm, total = {}, 0
    for fn, names in shards.items():
        total += mq.write_safetensors(os.path.join(directory, fn), {n: tensors[n] for n in names},
                                      {"format": "pt"})
        wm.update({n: fn for n in names})
    mq.write_json(os.path.join(directory, mq.INDEX_NAME),
                  {"metadata": {"total_size": total}, "weight_map": dict(sorted(wm.items()))})


# ----------------------------------------------------------------------------------------------


def test_f32():
    f32 = mq.f32
    eq(f32(0.1), 0.100000001490116119384765625, "f32(0.1)")
    eq(f32(1 + 2.0 ** -24), 1.0, "f32(1+2^-24) tie to even (down)")
    eq(f32(1 + 3 * 2.0 ** -24), 1 + 2.0 ** -22, "f32(1+3*2^-24) tie to even (up)")
    eq(f32(1 + 2.0 ** -24 + 2.0 ** -40), 1 + 2.0 ** -23, "f32 just above a tie")
    eq(f32(2.0 ** -150), 0.0, "f32(2^-150) subnormal tie to even -> 0")
    eq(f32(3 * 2.0 ** -150), 2.0 ** -148, "f32(3*2^-150) subnormal tie to even -> 2^-148")
    eq(f32(2.0 ** -149), 2.0 ** -149, "f32 smallest subnormal")
    eq(f32(1.0 / 3.0), 0.3333333432674408, "f32(1/3)")
    eq(f32(f32(6.0 * f32(21.0 / 2688.0))), 0.046875, "f32(6 * f32(21/2688))")
    rng = random.Random(1)
    xs = [rng.uniform(1, 2) * 2.0 ** rng.randint(-155, 100) * rng.choice((1, -1)) for _ in range(20000)]
    xs += [(1 + (2 * k + 1) * 2.0 ** -24) * 2.0 ** rng.randint(-120, 100) for k in range(2000)]  # ties
    eq(mq.f32_list(xs), [f32(x) for x in xs], "f32_list == f32 on 22000 values (ties, subnormals)")
    eq(mq.bf16_to_f32_list(bytes([0x80, 0x3F, 0x00, 0xC0, 0x00, 0x80, 0x01, 0x00])),
       [1.0, -2.0, -0.0, 2.0 ** -133], "bf16 -> f32 (1, -2, -0, smallest subnormal)")
    check(math.copysign(1, mq.bf16_to_f32_list(b"\x00\x80")[0]) < 0, "bf16 0x8000 is -0.0")
    eq(bf16_bytes([1.0, -2.0, 0.0078125]), bytes([0x80, 0x3F, 0x00, 0xC0, 0x00, 0x3C]),
       "f32 -> bf16 exact")
    try:
        bf16_bytes([1.0 + 2.0 ** -10])
        check(False, "f32 -> bf16 of an inexact value raises")
    except mq.QuantError as e:
        check("element 0" in str(e), "f32 -> bf16 inexact error names the element")
    print("f32 emulation: RNE ties, subnormals, bulk == scalar, bf16 <-> f32")


def test_e2m1():
    cases = [(0.25, 0), (0.75, 2), (1.25, 2), (1.75, 4), (2.5, 4), (3.5, 6), (5.0, 6),  # ties
             (0.0, 0), (-0.0, 0), (0.3, 1), (5.9, 7), (6.0, 7), (7.0, 7), (1e30, 7), (-0.1, 8),
             (-0.25, 8), (-0.75, 10), (-5.0, 14), (-6.5, 15), (0.74, 1), (0.76, 2), (2.49, 4),
             (2.51, 5), (4.99, 6), (5.01, 7), (1.0, 2), (1.5, 3), (3.0, 5), (4.0, 6)]
    for x, code in cases:
        eq(mq.e2m1_code(x), code, f"e2m1_code({x})")
    eq(mq.E2M1_SIGNED[15], -6.0, "E2M1 code 15 = -6")
    check(math.copysign(1, mq.E2M1_SIGNED[8]) < 0, "E2M1 code 8 = -0.0")
    eq(mq.pack_nibbles([1, 2, 3, 4]), bytes([0x21, 0x43]), "pack: element 2j in the low nibble")
    eq(mq.pack_nibbles([15, 0, 0, 8]), bytes([0x0F, 0x80]), "pack [15,0,0,8]")
    eq(mq.unpack_nibbles(bytes([0x21, 0x43, 0xF0])), [1, 2, 3, 4, 0, 15], "unpack")
    print(f"e2m1: {len(cases)} values incl. every tie (0.25..5 -> even code), sign of -0.1 / -0.0, "
          f"nibble order")


def _e4m3_brute(v):
    """Independent e4m3fn rounding: nearest of all 127 non-negative finite values, tie -> even
    code, saturate at 448."""
    a = abs(v)
    best = None
    for c in range(127):
        val = mq.E4M3_VALUES[c]
        key = (abs(val - a), c & 1)
        if best is None or key < best[0]:
            best = (key, c)
    c = best[1]
    return c | 0x80 if math.copysign(1, v) < 0 else c


def test_e4m3():
    enc, dec = mq.e4m3fn_encode, mq.e4m3fn_decode
    cases = [(0.0, 0x00), (-0.0, 0x80), (2.0 ** -9, 0x01), (2.0 ** -10, 0x00),
             (1.5 * 2.0 ** -9, 0x02), (2.5 * 2.0 ** -9, 0x02), (3.5 * 2.0 ** -9, 0x04),
             (1.2 * 2.0 ** -10, 0x01), (0.9 * 2.0 ** -10, 0x00), (0.015625, 0x08), (1.0, 0x38), (-1.0, 0xB8), (448.0, 0x7E),
             (500.0, 0x7E), (464.0, 0x7E), (480.0, 0x7E), (-1000.0, 0xFE), (math.inf, 0x7E),
             (0.1, 0x1D), (21.333334, 0x5B), (336.0, 0x7A), (3.0, 0x44), (1.0625, 0x38),
             (1.0625 + 2.0 ** -20, 0x39), (1.1875, 0x3A)]
    for v, code in cases:
        eq(enc(v), code, f"e4m3fn_encode({v})")
    eq(dec(0x1D), 0.1015625, "decode 0x1D")
    eq(dec(0x01), 2.0 ** -9, "decode 0x01")
    eq(dec(0x07), 7 * 2.0 ** -9, "decode 0x07 (largest subnormal)")
    eq(dec(0x08), 2.0 ** -6, "decode 0x08")
    eq(dec(0x38), 1.0, "decode 0x38")
    eq(dec(0x7E), 448.0, "decode 0x7E")
    eq(dec(0xFE), -448.0, "decode 0xFE")
    check(math.isnan(dec(0x7F)) and math.isnan(dec(0xFF)), "0x7F / 0xFF are NaN")
    finite = [c for c in range(256) if c not in (0x7F, 0xFF)]
    eq(len(finite), 254, "254 finite codes")
    eq([enc(dec(c)) for c in finite], finite, "round trip of all 254 finite codes")
    rng = random.Random(2)
    vals = [rng.uniform(0, 1) * 2.0 ** rng.randint(-12, 9) * rng.choice((1, -1)) for _ in range(3000)]
    vals += [(mq.E4M3_VALUES[c] + mq.E4M3_VALUES[c + 1]) / 2 for c in range(126)]  # every tie
    bad = [v for v in vals if enc(v) != _e4m3_brute(v)]
    check(not bad, f"e4m3fn_encode == brute-force nearest-even on {len(vals)} values ({bad[:3]})")
    print("e4m3fn: hand values (0, 2^-9, 2^-10 tie, 1.5*2^-9, 2^-6, 1, 448, 500, 464, 0.1), "
          "254-code round trip, brute force on 3126 values incl. every tie")


def test_pow2():
    eq(mq.pow2_scale(2688.0, 2688.0), 1.0, "pow2(2688/2688)")
    eq(mq.pow2_scale(2688.5, 2688.0), 2.0, "pow2(2688.5/2688)")
    eq(mq.pow2_scale(2687.0, 2688.0), 1.0, "pow2(2687/2688)")
    eq(mq.pow2_scale(1.0, 2688.0), 2.0 ** -11, "pow2(1/2688)")
    eq(mq.pow2_scale(21.0, 2688.0), 2.0 ** -7, "pow2(21/2688)")
    eq(mq.pow2_scale(21.0, 448.0), 2.0 ** -4, "pow2(21/448)")
    eq(mq.pow2_scale(0.0, 448.0), 1.0, "pow2(0) = 1")
    print("power-of-two scales (make-exact): 2^ceil(log2(amax/div)) at and around the boundaries")


# The 2x32 hand matrix. Row 0: tensor amax 21 -> s2 = 21/2688 = 2^-7, d = 6*s2 = 0.046875.
#   block 0: amax 21 -> bs = 448 -> 0x7E, den = 448 * 2^-7 = 3.5; x = w / 3.5 hits every E2M1 tie.
#   block 1: amax 1 -> bs = 21.33 -> e4m3 22 (0x5B), den = 22/128 = 0.171875.
# Row 1: block 0: amax 4P = 2^-16 -> bs = 2^-16 / (3 * 2^-6) = 2^-10/3, in (0, 2^-10]: e4m3 would
#   round it to 0x00, but ModelOpt's clamp_(min=2**-9) (commit 211c6b34) makes it 2^-9 = 0x01,
#   den = f32(2^-9 * 2^-7) = 2^-16 = 4P, x = w / 4P: 4P -> 1 (code 2), -2P -> -0.5 (code 9),
#   0 -> 0 (code 0), P -> 0.25 = tie between 0 and 0.5 -> even code 0; the 12 zeros -> code 0;
#   block 1: amax 2^-12 -> bs = 2^-6/3 = 2.67 * 2^-9 -> subnormal 3 (0x03), den = 3 * 2^-16.
P = 2.0 ** -18
HAND = [
    # row 0, block 0 (x = w / 3.5)
    21.0, 0.875, 2.625, 4.375, 6.125, 8.75, 12.25, 17.5,            # x = 6 .25 .75 1.25 1.75 2.5 3.5 5
    -21.0, -0.875, -2.625, -0.25, 0.87890625, 10.5, 3.5, -14.0,     # x = -6 -.25 -.75 -.07 .2511 3 1 -4
    # row 0, block 1 (x = w / 0.171875 = 5.8181 w)
    1.0, 0.5, -0.25, 0.0625, 0.0, -0.0, -1.0, 0.125,                # x = 5.82 2.91 -1.45 .36 0 -0 -5.82 .73
    0.1875, 0.375, 0.75, 0.875, -0.625, 0.25, 0.0390625, -0.5,      # x = 1.09 2.18 4.36 5.09 -3.64 1.45 .23 -2.91
    # row 1, block 0 (bs = 2^-10/3 clamped to 2^-9: x = w / 2^-16 = w / (4 P))
    4 * P, -2 * P, 0.0, P] + [0.0] * 12 + [                         # x = 1 -.5 0 .25 (tie -> 0)
    # row 1, block 1 (x = w / (3 * 2^-16) = w / (12 P))
    64 * P, -32 * P, 16 * P, 8 * P, 4 * P, 2 * P, 12 * P, -24 * P,  # x = 5.33 -2.67 1.33 .67 .33 .17 1 -2
    48 * P, 18 * P, 6 * P, 3 * P, 9 * P, 15 * P, 21 * P, 30 * P,    # x = 4 1.5 .5 .25 .75 1.25 1.75 2.5
]
# codes  row0 b0: 7 0 2 2 4 4 6 6 | 15 8 10 8 1 5 2 14
#        row0 b1: 7 5 11 1 0 0 15 1 | 2 4 6 7 14 3 0 13
#        row1 b0: 2 9 0 0 | 0 x 12;  row1 b1: 7 13 3 1 1 0 2 12 | 6 3 1 0 2 2 4 4
# (packed byte = even element | odd element << 4: row1 b0 = 0x92, then 0x00 x 7)
HAND_NVFP4_PACKED = bytes([0x07, 0x22, 0x44, 0x66, 0x8F, 0x8A, 0x51, 0xE2,
                           0x57, 0x1B, 0x00, 0x1F, 0x42, 0x76, 0x3E, 0xD0,
                           0x92, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                           0xD7, 0x13, 0x01, 0xC2, 0x36, 0x01, 0x22, 0x44])
HAND_NVFP4_SCALES = bytes([0x7E, 0x5B, 0x01, 0x03])
HAND_NVFP4_DEQ_ROW0 = [21.0, 0.0, 3.5, 3.5, 7.0, 7.0, 14.0, 14.0,
                       -21.0, -0.0, -3.5, -0.0, 1.75, 10.5, 3.5, -14.0,
                       1.03125, 0.515625, -0.2578125, 0.0859375, 0.0, 0.0, -1.03125, 0.0859375,
                       0.171875, 0.34375, 0.6875, 1.03125, -0.6875, 0.2578125, 0.0, -0.515625]
# FP8: s = 21/448 = 0.046875, x = w / s = 21.33 w
HAND_FP8 = bytes([0x7E, 0x59, 0x66, 0x6C, 0x70, 0x74, 0x78, 0x7C,   # 448 18 56 96 128 192 256 384
                  0xFE, 0xD9, 0xE6, 0xCB, 0x59, 0x76, 0x69, 0xF9,   # -448 -18 -56 -5.5 18 224 72 -288
                  0x5B, 0x53, 0xCB, 0x3B, 0x00, 0x80, 0xDB, 0x43,   # 22 11 -5.5 1.375 0 -0 -22 2.75
                  0x48, 0x50, 0x58, 0x59, 0xD5, 0x4B, 0x35, 0xD3,   # 4 8 16 18 -13 5.5 .8125 -11
                  0x00, 0x80, 0x00, 0x00] + [0x00] * 12 + [         # 2^-10/3 -> 0; -2^-11/3 -> -0
                  0x03, 0x81, 0x01, 0x00, 0x00, 0x00, 0x00, 0x81,   # units of 2^-9: 2.67 -1.33 .67 .33 .17 .08 .5(tie) -1
                  0x02, 0x01, 0x00, 0x00, 0x00, 0x01, 0x01, 0x01])  # 2 .75 .25 .125 .375 .625 .875 1.25


def test_hand_matrix():
    w = mq.bf16_to_f32_list(bf16_bytes(HAND))  # all bf16-exact
    eq(w, HAND, "hand matrix is bf16-exact")
    packed, scales, s2 = mq.nvfp4_quantize(w, 2, 32)
    eq(s2, 2.0 ** -7, "NVFP4 s2 = 21/2688 = 2^-7")
    eq(scales.hex(" "), HAND_NVFP4_SCALES.hex(" "), "NVFP4 block scales")
    eq(packed.hex(" "), HAND_NVFP4_PACKED.hex(" "), "NVFP4 packed codes")
    deq = mq.nvfp4_dequantize(packed, scales, s2, 2, 32)
    eq(bits(deq[:32]), bits(HAND_NVFP4_DEQ_ROW0), "NVFP4 dequantised row 0 (bitwise, -0.0 kept)")
    # row 1 block 0: codes 2 9 0 0 ... times den = 2^-16 = 4P: 4P, -2P, 0, 0 (P rounded to 0), 0 ...
    eq(bits(deq[32:48]), bits([4 * P, -2 * P] + [0.0] * 14),
       "NVFP4 clamped-scale (0x01) block dequantised")
    eq(deq[48:64], [c * 3 * 2.0 ** -16 for c in (6, -3, 1.5, .5, .5, 0, 1, -2, 4, 1.5, .5, 0, 1, 1, 2, 2)],
       "NVFP4 subnormal-scale block dequantised")
    q, s = mq.fp8_quantize(w)
    eq(s, 0.046875, "FP8 s = 21/448")
    eq(q.hex(" "), HAND_FP8.hex(" "), "FP8 codes")
    eq(mq.fp8_dequantize(q, [s], 2)[:4], [21.0, 18 * s, 56 * s, 96 * s], "FP8 dequantised")
    # make-exact scales: NVFP4 2^ceil(log2(21/2688)) = 2^-7 (the same), FP8 2^ceil(log2(21/448)) = 2^-4
    eq(mq.nvfp4_quantize(w, 2, 32, mq.pow2_scale(21.0, mq.NVFP4_SCALE_DIV)), (packed, scales, s2),
       "NVFP4 make-exact on the hand matrix = quantize (s2 already 2^-7)")
    q2, s_2 = mq.fp8_quantize(w, mq.pow2_scale(21.0, mq.E4M3_MAX))
    eq((s_2, q2[0], q2[1]), (0.0625, 0x7A, 0x56), "FP8 pow2 s = 2^-4: 21*16 = 336 tie -> 320, 14 -> 0x56")
    # all-zero block / tensor: s2 = 1, bs 0 -> 1 (0x38), codes 0 (-0.0 too)
    z = [0.0, -0.0] * 8
    eq(mq.nvfp4_quantize(z, 1, 16), (bytes(8), bytes([0x38]), 1.0), "NVFP4 all-zero tensor")
    eq(mq.fp8_quantize(z), (bytes([0x00, 0x80] * 8), 1.0), "FP8 all-zero tensor (-0.0 -> 0x80)")
    print("hand 2x32 matrix: NVFP4 (ties, scale 0x7E / 0x5B / clamped 0x01 / subnormal 0x03) and "
          "FP8 codes, dequantised values, zero tensors, pow2 scales")


# The block-scale clamp (ModelOpt commit 211c6b34, get_weights_scaling_factor: bs == 0 -> 1, then
# clamp_(min=2**-9) before the e4m3 cast). A 1x64 tensor, U = 2^-16:
#   block 0: [21, 0 x 15]: tensor amax 21 -> s2 = 2^-7, d = f32(6 * s2) = 3 * 2^-6; bs = 21 / d = 448
#            -> 0x7E, den = 448 * 2^-7 = 3.5, x = 21 / 3.5 = 6 -> code 7, zeros -> 0.
#   block 1: amax 3U -> bs = 3 * 2^-16 / (3 * 2^-6) = 2^-10 exactly: unclamped, the e4m3 tie between
#            0 (0x00, even) and 2^-9 (0x01) would give 0x00; clamped: 2^-9 -> 0x01,
#            den = f32(2^-9 * 2^-7) = 2^-16 = U, so x = w / U (at most 6 * bs / 2^-9 = 3, so the
#            saturation at 6 is never reached in a clamped block):
#              3U -> 3 (5), -U -> -1 (10), .5U -> .5 (1), 1.5U -> 1.5 (3), 2.5U -> tie 2|3 -> 2 (4),
#              .25U -> tie 0|.5 -> 0 (0), .75U -> tie .5|1 -> 1 (2), -1.75U -> tie 1.5|2 -> -2 (12),
#              1.25U -> tie 1|1.5 -> 1 (2), -0.0 -> 0 (0: sign bit only for w < 0),
#              -.125U -> -0 (8), 2.75U -> 3 (5), .375U -> .5 (1), -3U -> -3 (13), U -> 1 (2), 2U -> 2 (4)
#   block 2: amax 2^-24 -> bs = 2^-24 / (3 * 2^-6) = 2^-18 / 3 (deep inside (0, 2^-10]; unclamped it
#            rounds to 0x00) -> clamped 0x01, den = U: 2^-24 -> 2^-8 -> 0 (0), -2^-24 -> -0 (8),
#            -2^-30 -> -0 (8), zeros -> 0. (The old "scale 0 -> all codes 0" rule gave 0 0 0.)
#   block 3: amax 6U -> bs = 6U / (3 * 2^-6) = 2^-9 exactly: no clamp needed, 0x01, den = U:
#            6U -> 6 (7), -5U -> tie 4|6 -> -4 (14), 3.5U -> tie 3|4 -> 4 (6), zeros -> 0.
U = 2.0 ** -16
CLAMP_W = ([21.0] + [0.0] * 15
           + [3 * U, -U, .5 * U, 1.5 * U, 2.5 * U, .25 * U, .75 * U, -1.75 * U,
              1.25 * U, -0.0, -.125 * U, 2.75 * U, .375 * U, -3 * U, U, 2 * U]
           + [2.0 ** -24, -2.0 ** -24, -2.0 ** -30] + [0.0] * 13
           + [6 * U, -5 * U, 3.5 * U] + [0.0] * 13)
CLAMP_SCALES = bytes([0x7E, 0x01, 0x01, 0x01])
CLAMP_CODES = ([7] + [0] * 15
               + [5, 10, 1, 3, 4, 0, 2, 12, 2, 0, 8, 5, 1, 13, 2, 4]
               + [0, 8, 8] + [0] * 13
               + [7, 14, 6] + [0] * 13)
# packed: byte j = code[2j] | code[2j+1] << 4
CLAMP_PACKED = bytes([0x07] + [0x00] * 7
                     + [0xA5, 0x31, 0x04, 0xC2, 0x02, 0x58, 0xD1, 0x42]
                     + [0x80, 0x08] + [0x00] * 6
                     + [0xE7, 0x06] + [0x00] * 6)


def test_block_scale_clamp():
    w = mq.bf16_to_f32_list(bf16_bytes(CLAMP_W))
    eq(bits(w), bits(CLAMP_W), "clamp tensor is bf16-exact")
    eq(mq.pack_nibbles(CLAMP_CODES), CLAMP_PACKED, "clamp case: hand codes pack to the hand bytes")
    # what the e4m3 cast alone would do with the unclamped block scales
    eq((mq.e4m3fn_encode(2.0 ** -10), mq.e4m3fn_encode(2.0 ** -18 / 3)), (0x00, 0x00),
       "unclamped block scales 2^-10 and 2^-18/3 would round to e4m3 0x00")
    packed, scales, s2 = mq.nvfp4_quantize(w, 1, 64)
    eq(s2, 2.0 ** -7, "clamp case: s2 = 21/2688 = 2^-7")
    eq(scales.hex(" "), CLAMP_SCALES.hex(" "), "clamp case: block scales (bs <= 2^-10 -> 0x01)")
    eq(packed.hex(" "), CLAMP_PACKED.hex(" "), "clamp case: packed codes")
    eq(mq.unpack_nibbles(packed), CLAMP_CODES, "clamp case: codes")
    # the rule stated directly: codes = nearest E2M1 of f32(w / f32(2^-9 * s2)), saturating at 6
    den = mq.f32(2.0 ** -9 * s2)
    eq(den, U, "clamp case: den = 2^-9 * 2^-7 = 2^-16")
    direct = [mq.e2m1_code(mq.f32(v / den), v < 0) for v in w[16:64]]  # e2m1_code saturates at 6
    eq(mq.unpack_nibbles(packed)[16:], direct, "clamp case: codes = e2m1(w / (2^-9 * s2))")
    deq = mq.nvfp4_dequantize(packed, scales, s2, 1, 64)
    eq(bits(deq[16:32]), bits([c * U for c in (3, -1, .5, 1.5, 2, 0, 1, -2, 1, 0, -0.0, 3, .5, -3, 1, 2)]),
       "clamp case: block 1 dequantised")
    eq(bits(deq[32:48]), bits([0.0, -0.0, -0.0] + [0.0] * 13), "clamp case: block 2 dequantises to +-0")
    eq(oracle_nvfp4(w, 64), (CLAMP_PACKED, CLAMP_SCALES, Fraction(1, 128)), "clamp case: oracle")
    # random: a tensor with a non-power-of-two s2 (amax 1.3125) whose other blocks are scaled down
    # so far that their unclamped bs lies in (0, 2^-10]; each must get 0x01 and codes e2m1(w / den)
    rng = random.Random(5)
    t = [1.3125] + [0.0] * 15
    for b in range(15):
        # block amax < 2 * 2^-20 = 2^-19 < 2^-10 * 6 * s2 = 2^-10 * 1.3125 / 448 (about 2^-18.4);
        # 8-bit integers / 128 * 2^-k are bf16-exact; the first element is non-zero (bs > 0)
        k = rng.randint(20, 40)
        t += [rng.choice((1, -1)) * rng.randint(i == 0, 255) / 128.0 * 2.0 ** -k for i in range(16)]
    t = mq.bf16_to_f32_list(bf16_bytes(mq.f32_list(t)))
    packed, scales, s2 = mq.nvfp4_quantize(t, 1, len(t))
    d = mq.f32(6.0 * s2)
    unclamped = [mq.f32(max(map(abs, t[16 * b:16 * b + 16])) / d) for b in range(1, 16)]
    check(all(0.0 < u <= 2.0 ** -10 for u in unclamped),
          f"random clamp case: unclamped block scales in (0, 2^-10] ({max(unclamped)!r})")
    eq(scales[1:], bytes([0x01] * 15), "random clamp case: every tiny block scale is 0x01")
    den = mq.f32(2.0 ** -9 * s2)
    direct = [mq.e2m1_code(mq.f32(v / den), v < 0) for v in t[16:]]
    eq(mq.unpack_nibbles(packed)[16:], direct, "random clamp case: codes = e2m1(w / (2^-9 * s2))")
    eq((packed, scales, Fraction(s2)), oracle_nvfp4(t, len(t)), "random clamp case == oracle")
    print("block-scale clamp: bs = 2^-10 (e4m3 tie to 0x00) and 2^-18/3 -> 0x01, codes of "
          "w / (2^-9 * s2) incl. ties and signed zeros, bs = 2^-9 exactly, 15 random tiny blocks")


# ----------------------------------------------------------------------------------------------
# An independent exact-rational oracle (fractions.Fraction): the spec's formulas with an explicit
# round-to-nearest-even to float32 after every operation, sharing no code with modelopt_quant's
# struct/array emulation or its bisect tables. `skip` leaves named roundings out, to show that the
# f32-sensitive cases below really depend on each rounding.


def rne(q, prec, emin):
    """q rounded to `prec` significant bits, ties to even, with gradual underflow below 2^emin."""
    if q == 0:
        return Fraction(0)
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    ulp = Fraction(2) ** (max(e, emin) - prec + 1)
    n = a / ulp
    k = math.floor(n)
    if n - k > Fraction(1, 2) or (n - k == Fraction(1, 2) and k % 2):
        k += 1
    return (k * ulp) if q > 0 else -(k * ulp)


def rf32(q):
    return rne(q, 24, -126)


E4M3_BY_VALUE = {Fraction(mq.E4M3_VALUES[c]): c for c in range(127)}


def oracle_e4m3(q, negative):
    v = min(rne(abs(q), 4, -6), Fraction(448))
    c = E4M3_BY_VALUE[v]
    return c | 0x80 if negative else c


def oracle_e2m1(x, negative):
    a = abs(x)
    vals = [Fraction(v) for v in (0, 0.5, 1, 1.5, 2, 3, 4, 6)]
    c = min(range(8), key=lambda i: (abs(vals[i] - a), i & 1))  # nearest, ties to the even code
    return c | 8 if negative else c


def oracle_nvfp4(w, cols, skip=()):
    R = (lambda k, q: q if k in skip else rf32(q))
    W = [Fraction(v) for v in w]
    amax = max(map(abs, W))
    s2 = R("s2", amax / 2688) if amax else Fraction(1)
    d = R("d", 6 * s2)
    scales, codes = [], []
    for b in range(len(W) // 16):
        blk = W[16 * b:16 * b + 16]
        bs = R("bs", max(map(abs, blk)) / d) or Fraction(1)
        bs = max(bs, Fraction(1, 512))  # ModelOpt clamp_(min=2**-9) before the e4m3 cast
        sc = oracle_e4m3(bs, False)
        scales.append(sc)
        S = Fraction(mq.E4M3_VALUES[sc])
        assert S >= Fraction(1, 512), sc  # so den > 0: no zero-scale case
        den = R("den", S * s2)
        codes += [oracle_e2m1(R("x", v / den), v < 0) for v in blk]
    packed = bytes(codes[i] | (codes[i + 1] << 4) for i in range(0, len(codes), 2))
    return packed, bytes(scales), s2


def oracle_fp8(w, skip=()):
    R = (lambda k, q: q if k in skip else rf32(q))
    amax = max(abs(Fraction(v)) for v in w)
    s = R("s", amax / 448) if amax else Fraction(1)
    return bytes(oracle_e4m3(R("x", Fraction(v) / s), math.copysign(1, v) < 0) for v in w), s


# Inputs (found by a search) where one f32 rounding of the spec changes a byte. NVFP4: a 1x32 tensor
# [amax, 0 x 15 | ab, w, 0 x 14]; the expected block-1 scale byte and codes of (ab, w) under f32
# semantics, and which rounding the case depends on.
F32_CASES_NVFP4 = [  # (rounding, amax, ab, w, scale byte, (code ab, code w))
    ("s2", 1.90625, 0.005584716796875, 0.002685546875, 0x3B, (7, 5)),
    ("d", 1.109375, 0.01300048828125, 0.01019287109375, 0x4B, (7, 6)),
    ("bs", 1.328125, 0.0311279296875, 0.019287109375, 0x52, (7, 6)),
    ("den", 1.1875, 0.02294921875, 0.0069580078125, 0x51, (7, 3)),
    ("x", 1.171875, 0.00341796875, 0.00095367431640625, 0x3A, (7, 4)),
]
F32_CASES_FP8 = [  # (rounding, amax, w, code of w)
    ("s", 1.9375, 0.022705078125, 0x4B),
    ("x", 1.234375, 0.00022602081298828125, 0x1A),
]


def test_oracle():
    w = mq.bf16_to_f32_list(bf16_bytes(HAND))
    eq(oracle_nvfp4(w, 32), (HAND_NVFP4_PACKED, HAND_NVFP4_SCALES, Fraction(1, 128)),
       "oracle NVFP4 on the hand matrix = hand bytes")
    eq(oracle_fp8(w), (HAND_FP8, Fraction(3, 64)), "oracle FP8 on the hand matrix = hand bytes")
    for rounding, amax, ab, x, sc, codes in F32_CASES_NVFP4:
        t = [amax] + [0.0] * 15 + [ab, x] + [0.0] * 14
        eq(mq.bf16_to_f32_list(bf16_bytes(t)), t, f"f32 case {rounding}: inputs are bf16")
        packed, scales, _ = mq.nvfp4_quantize(t, 1, 32)
        got = (scales[1], (packed[8] & 15, packed[8] >> 4))
        eq(got, (sc, codes), f"NVFP4 f32 case ({rounding} rounding)")
        exact = oracle_nvfp4(t, 32)
        eq((packed, scales), exact[:2], f"NVFP4 f32 case ({rounding}) == oracle")
        check(oracle_nvfp4(t, 32, skip=(rounding,))[:2] != exact[:2],
              f"NVFP4 f32 case ({rounding}): without that rounding the bytes differ")
    for rounding, amax, x, code in F32_CASES_FP8:
        q, _ = mq.fp8_quantize([amax, x])
        eq(q[1], code, f"FP8 f32 case ({rounding} rounding)")
        exact = oracle_fp8([amax, x])[0]
        eq(q, exact, f"FP8 f32 case ({rounding}) == oracle")
        check(oracle_fp8([amax, x], skip=(rounding,))[0] != exact,
              f"FP8 f32 case ({rounding}): without that rounding the code differs")
    rng = random.Random(4)
    for rows, cols, spread in ((4, 64, 12), (2, 48, 40), (3, 32, 2)):
        t = mq.bf16_to_f32_list(bytes(rng.randrange(256) if i % 2 == 0 else
                                      rng.choice((0x00, 0x80)) | (0x3F - rng.randrange(spread) // 2)
                                      for i in range(2 * rows * cols)))
        t[rng.randrange(len(t))] = -0.0
        packed, scales, s2 = mq.nvfp4_quantize(t, rows, cols)
        eq((packed, scales, Fraction(s2)), oracle_nvfp4(t, cols), f"NVFP4 random {rows}x{cols} == oracle")
        q, s = mq.fp8_quantize(t)
        eq((q, Fraction(s)), oracle_fp8(t), f"FP8 random {rows}x{cols} == oracle")
    print(f"exact-rational oracle: hand matrix, {len(F32_CASES_NVFP4)} NVFP4 + {len(F32_CASES_FP8)} FP8 "
          f"cases that each f32 rounding (s2, d, bs, den, x / s, x) decides, 3 random matrices")


# ----------------------------------------------------------------------------------------------
# The safetensors layout written by modelopt_quant (read here from the raw bytes, not through mq).


def raw_header(path):
    """(header length, header bytes, parsed header with its key order) of a safetensors file."""
    with open(path, "rb") as f:
        (hn,) = struct.unpack("<Q", f.read(8))
        hdr = f.read(hn)
    return hn, hdr, json.loads(hdr)


def check_layout(path, want_meta, what):
    """One file's layout: 8 + header length a multiple of 16 (space padding); `__metadata__` first
    and equal to want_meta (absent if None); the data contiguous, in the order (byte size % 16 != 0,
    element size descending, name); every tensor's absolute offset 8 + header length + begin a
    multiple of its element size, and of 16 when its byte size is a multiple of 16. Returns the
    number of tensors."""
    size = os.path.getsize(path)
    hn, hdr, h = raw_header(path)
    check((8 + hn) % 16 == 0 and hdr.rstrip(b" ").endswith(b"}")
          and set(hdr[len(hdr.rstrip(b" ")):]) <= {0x20},
          f"{what}: 8 + header length {hn} is a multiple of 16, space padded")
    keys = list(h)
    if want_meta is None:
        check("__metadata__" not in h, f"{what}: no __metadata__ (the input had none)")
    else:
        check(keys[:1] == ["__metadata__"] and h["__metadata__"] == want_meta,
              f"{what}: __metadata__ first and carried over: {h.get('__metadata__')!r} "
              f"(first key {keys[:1]}), want {want_meta!r}")
    h.pop("__metadata__", None)
    sizes = {n: (mq.DTYPE_SIZE[i["dtype"]], i["data_offsets"][1] - i["data_offsets"][0])
             for n, i in h.items()}
    misaligned = []
    for n, info in h.items():
        es, nbytes = sizes[n]
        a = 8 + hn + info["data_offsets"][0]  # absolute file offset
        if a % es or (nbytes % 16 == 0 and a % 16):
            misaligned.append(f"{n} ({info['dtype']}, {nbytes} bytes) at file offset {a}")
    check(not misaligned, f"{what}: {len(misaligned)} tensors not aligned to their element size "
                          f"(16 for byte sizes % 16 == 0): {misaligned[:3]}")
    order = sorted(h, key=lambda n: (sizes[n][1] % 16 != 0, -sizes[n][0], n))
    off, wrong = 0, []
    for n in order:
        b, e = h[n]["data_offsets"]
        if b != off:
            wrong.append(f"{n} begins at {b}, expected {off} (position {order.index(n)})")
        off = e
    check(not wrong and 8 + hn + off == size,
          f"{what}: data contiguous in the order (size % 16 != 0, element size desc, name): "
          f"{wrong[:3]}; data end {8 + hn + off} vs file size {size}")
    return len(h)


def check_dir_layout(out_dir, in_dir, what):
    """check_layout on every safetensors file of out_dir, each __metadata__ being that of the
    same-named file of in_dir. Returns (files, tensors)."""
    ck = mq.Checkpoint(str(out_dir))
    nt = 0
    for fn in ck.files:
        meta = raw_header(os.path.join(in_dir, fn))[2].get("__metadata__")
        nt += check_layout(os.path.join(out_dir, fn), meta, f"{what} {fn}")
    return len(ck.files), nt


def write_raw_layout(path, tensors):
    """A valid safetensors file in a layout modelopt_quant never writes: reverse name order, header
    padded to 8 only, no __metadata__ (so `compare` must not care)."""
    header, off = {}, 0
    for n in sorted(tensors, reverse=True):
        dtype, shape, raw = tensors[n]
        header[n] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb)
        for n in sorted(tensors, reverse=True):
            f.write(tensors[n][2])


def test_layout(tmp):
    models = {"tiny-dense": TINY, "tiny-e2b": TINY_E2B}
    nf = nt = 0
    # quantize (both formats) and make-exact (both formats) of tiny-dense and tiny-e2b; the
    # tiny-dense quantize / dequantize / make-exact outputs of the earlier tests are reused
    for m, src in models.items():
        for fmt in ("nvfp4", "fp8"):
            dirs = []  # (output, its input)
            if m == "tiny-dense":
                q, x, tw = (os.path.join(tmp, d) for d in (f"td-{fmt}", f"ex-{fmt}-q", f"ex-{fmt}-twin"))
                dirs += [(os.path.join(tmp, f"td-{fmt}-deq"), q), (os.path.join(tmp, f"ex-{fmt}-deq"), x)]
                if not check(all(os.path.isdir(d) for d in (q, x, tw) + tuple(o for o, _ in dirs)),
                             f"layout {m} {fmt}: outputs of the earlier tests exist"):
                    continue
            else:
                q, x, tw = (os.path.join(tmp, f"e2b-{fmt}-{k}") for k in ("q", "x", "twin"))
                r, _ = run_tool("quantize", src, q, "--format", fmt)
                if not check(r.returncode == 0, f"quantize {m} {fmt}: {r.stderr}"):
                    continue
                r, _ = run_tool("make-exact", src, x, tw, "--format", fmt)
                if not check(r.returncode == 0, f"make-exact {m} {fmt}: {r.stderr}"):
                    continue
            dirs = [(q, src), (x, src), (tw, src)] + dirs
            for out, inp in dirs:
                f, t = check_dir_layout(out, inp, f"{m} {os.path.basename(out)}")
                nf, nt = nf + f, nt + t
    sh = os.path.join(tmp, "td-sharded")
    if check(os.path.isdir(sh + "-nvfp4"), "layout: sharded output of the earlier test exists"):
        f, t = check_dir_layout(sh + "-nvfp4", sh, "sharded")
        nf, nt = nf + f, nt + t

    # a hand checkpoint of every element size, odd byte sizes and an empty tensor, with a richer
    # __metadata__, and the same without __metadata__
    T = {"a.q_proj.weight": ("BF16", [16, 32], bf16_bytes([(i % 7 - 3) / 8 for i in range(512)])),
         "b.bias": ("BF16", [3], bf16_bytes([1.0, 2.0, 3.0])),          # 6 bytes
         "c.f32": ("F32", [3], bits([1.0, 2.0, 3.0])),                   # 12 bytes
         "d.i64": ("I64", [3], struct.pack("<3q", 1, -2, 3)),           # 24 bytes
         "e.u8": ("U8", [5], bytes(range(5))),                           # 5 bytes
         "f.f16": ("F16", [8], bytes(16)),                               # 16 bytes
         "g.empty": ("F32", [0], b""),
         "h.i32": ("I32", [1], struct.pack("<i", 7))}                    # 4 bytes
    for meta in ({"format": "pt", "note": "kept"}, None):
        src = os.path.join(tmp, "lay-" + ("meta" if meta else "nometa"))
        os.makedirs(src)
        mq.write_json(os.path.join(src, "config.json"), {"model_type": "test"})
        if meta is None:  # an input in another layout, without __metadata__
            write_raw_layout(os.path.join(src, "model.safetensors"), T)
        else:
            mq.write_safetensors(os.path.join(src, "model.safetensors"), T, meta)
        for fmt in ("nvfp4", "fp8"):
            out = f"{src}-{fmt}"
            r, _ = run_tool("quantize", src, out, "--format", fmt)
            if check(r.returncode == 0, f"quantize {src} {fmt}: {r.stderr}"):
                check_layout(os.path.join(out, "model.safetensors"), meta, f"hand {fmt} meta={meta}")
                dq = out + "-deq"
                r, _ = run_tool("dequantize", out, dq)
                if check(r.returncode == 0, f"dequantize {out}: {r.stderr}"):
                    check_layout(os.path.join(dq, "model.safetensors"), meta,
                                 f"hand {fmt} dequantized meta={meta}")
                    eq(load(dq)["d.i64"], T["d.i64"], "hand: I64 tensor copied through")

    # compare ignores the layout: the tiny-dense NVFP4 output rewritten in another layout
    a = os.path.join(tmp, "td-nvfp4")
    if os.path.isdir(a):
        b = os.path.join(tmp, "td-nvfp4-relaid")
        shutil.copytree(a, b)
        write_raw_layout(os.path.join(b, "model.safetensors"), load(a))
        check(raw_header(os.path.join(b, "model.safetensors"))[0] % 16 != 0
              or list(raw_header(os.path.join(b, "model.safetensors"))[2])[0] != "__metadata__",
              "relaid copy really has another layout")
        r, _ = run_tool("compare", a, b)
        check(r.returncode == 0 and "identical" in r.stdout,
              f"compare is layout-agnostic: {r.stdout}{r.stderr}")
    print(f"layout: {nf} files / {nt} tensors of quantize, make-exact (+ twin), dequantize on "
          f"tiny-dense, tiny-e2b, sharded: header end at 16, every tensor aligned to its element "
          f"size (16 for sizes % 16 == 0), __metadata__ carried; hand dtypes; compare layout-agnostic")


def test_selection(tmp):
    rng = random.Random(3)

    def bf(shape):
        n = mq.numel(shape)
        return ("BF16", shape, bf16_bytes([rng.choice((1, -1)) * rng.randint(1, 255) / 64.0
                                           for _ in range(n)]))

    T = {
        "model.layers.0.self_attn.q_proj.weight": bf([16, 32]),          # quantised
        "model.layers.0.self_attn.k_proj.weight": bf([16, 24]),          # NVFP4: 24 % 16 -> kept
        "model.layers.0.mlp.gate_proj.bias": bf([16]),
        "model.layers.0.mlp.up_proj.weight": ("F32", [16, 32], bytes(16 * 32 * 4)),  # not bf16
        "model.layers.0.mlp.down_proj.weight": bf([2, 16, 16]),          # 3-D
        "model.layers.0.mlp.fc.weight": bf([16, 32]),                    # not a listed module
        "model.layers.0.router.gate_proj.weight": bf([16, 32]),          # router component
        "model.vision_tower.layers.0.q_proj.weight": bf([16, 32]),       # vision
        "model.audio_tower.layers.0.down_proj.weight": bf([16, 32]),     # audio
        "model.layers.2.experts.gate_up_proj": bf([2, 32, 32]),          # fused experts:
        "model.layers.2.experts.down_proj": bf([2, 32, 16]),             # per-expert linears
        "model.layers.1.mlp.down_proj.weight": bf([16, 32]),             # user --exclude
        "model.layers.1.per_layer_input_gate.weight": bf([16, 32]),      # quantised
        "model.per_layer_model_projection.weight": bf([32, 16]),         # quantised
        "lm_head.weight": bf([16, 32]),
        "model.embed_tokens.weight": bf([16, 32]),
    }
    src = os.path.join(tmp, "sel")
    make_ckpt(src, T)
    with open(os.path.join(src, "tokenizer.json"), "w") as f:
        f.write('{"x": 1}')
    experts = [f"model.layers.2.experts.{e}.{p}_proj" for e in range(2) for p in ("down", "gate", "up")]
    quantized = {"nvfp4": sorted(["model.layers.0.self_attn.q_proj",
                                  "model.layers.1.per_layer_input_gate",
                                  "model.per_layer_model_projection"] + experts)}
    quantized["fp8"] = sorted(quantized["nvfp4"] + ["model.layers.0.self_attn.k_proj"])
    for fmt in ("nvfp4", "fp8"):
        out = os.path.join(tmp, "sel-" + fmt)
        r, _ = run_tool("quantize", src, out, "--format", fmt, "--exclude", "*layers.1.mlp*")
        if not check(r.returncode == 0, f"quantize {fmt} selection checkpoint: {r.stderr}"):
            continue
        got = load(out)
        mods = sorted(n[: -len(".weight_scale")] for n in got if n.endswith(".weight_scale"))
        eq(mods, quantized[fmt], f"{fmt}: quantised modules")
        for n, t in T.items():
            if ".experts." in n:
                check(n not in got, f"{fmt}: fused {n} replaced by its per-expert linears")
            elif n[: -len(".weight")] not in quantized[fmt]:
                eq(got.get(n), t, f"{fmt}: {n} copied unchanged")
        # the experts' slices: expert 1's up_proj is rows 16..31 of expert 1 in gate_up_proj
        gu = T["model.layers.2.experts.gate_up_proj"][2]
        if fmt == "fp8":
            w = mq.bf16_to_f32_list(gu[(1 * 32 + 16) * 32 * 2:(2 * 32) * 32 * 2])
            s_ = struct.unpack("<f", got["model.layers.2.experts.1.up_proj.weight_scale"][2])[0]
            deq = [mq.e4m3fn_decode(c) * s_ for c in got["model.layers.2.experts.1.up_proj.weight"][2]]
            check(max(abs(a - b) for a, b in zip(w, deq)) <= max(map(abs, w)) / 8,
                  "fp8: expert 1's up_proj is its slice of gate_up_proj")
        ignore = list(mq.DEFAULT_EXCLUDES) + ["*layers.1.mlp*"]
        if fmt == "nvfp4":
            ignore.append("model.layers.0.self_attn.k_proj")
        cfg = json.load(open(os.path.join(out, "config.json")))
        hq = json.load(open(os.path.join(out, "hf_quant_config.json")))
        qc = {"quant_method": "modelopt", "quant_algo": fmt.upper(), "ignore": ignore,
              "producer": {"name": "spark-quantize"}}
        hqq = {"quant_algo": fmt.upper(), "kv_cache_quant_algo": None, "exclude_modules": ignore}
        if fmt == "nvfp4":
            qc["group_size"] = hqq["group_size"] = 16
        eq(cfg, {"model_type": "test", "quantization_config": qc}, f"{fmt}: config.json")
        eq(hq, {"producer": {"name": "spark-quantize"}, "quantization": hqq},
           f"{fmt}: hf_quant_config.json")
        eq(open(os.path.join(out, "tokenizer.json")).read(), '{"x": 1}', f"{fmt}: side file copied")
        n = "model.per_layer_model_projection"
        if fmt == "nvfp4":
            eq([got[n + s][:2] for s in (".weight", ".weight_scale", ".weight_scale_2")],
               [("U8", [32, 8]), ("F8_E4M3", [32, 1]), ("F32", [])], "nvfp4: tensor dtypes/shapes")
        else:
            eq([got[n + s][:2] for s in (".weight", ".weight_scale")],
               [("F8_E4M3", [32, 16]), ("F32", [])], "fp8: tensor dtypes/shapes")
        check(not any(k.endswith("input_scale") for k in got), f"{fmt}: no input_scale written")
        # the raw file layout (16-byte header end, aligned tensors, __metadata__ first)
        check_layout(os.path.join(out, "model.safetensors"), {"format": "pt"}, f"selection {fmt}")
    # a non-finite input weight is an error naming the tensor, and nothing is written
    inf = os.path.join(tmp, "sel-inf")
    make_ckpt(inf, {"m.q_proj.weight": ("BF16", [1, 16], bf16_bytes([1.0] * 15) + b"\x80\x7f")})
    r, _ = run_tool("quantize", inf, inf + "-q", "--format", "nvfp4")
    check(r.returncode == 2 and "m.q_proj.weight: element 15 is inf" in r.stderr
          and not os.path.exists(inf + "-q"), f"quantize refuses an inf weight: {r.stderr}")
    # refusing an already quantised input
    r, _ = run_tool("quantize", os.path.join(tmp, "sel-fp8"), os.path.join(tmp, "x"), "--format", "fp8")
    check(r.returncode == 2 and "already quantized" in r.stderr, "quantize refuses a quantized input")
    # some but not all of a fused expert tensor's linears excluded: refused
    r, _ = run_tool("quantize", src, os.path.join(tmp, "sel-mixed"), "--format", "fp8",
                    "--exclude", "*experts.1.*")
    check(r.returncode == 2 and "keeps some of the linears of model.layers.2.experts" in r.stderr
          and not os.path.exists(os.path.join(tmp, "sel-mixed")),
          f"quantize refuses partly excluded experts: {r.stderr}")
    print("selection: module list, bf16/2-D/.weight, router/vision/audio/lm_head/embed, fused "
          "experts unfused per expert, "
          "--exclude, NVFP4 in % 16 -> kept + ignore list, configs, aligned file layout")


def _block_bound_nvfp4(src, deq_dir, qdir):
    """Asserts the NVFP4 error bound element by element; returns (n elements, worst err/den).

    S = decode(scale_b) is never 0: the block scale is clamped to >= 2^-9 before the e4m3 cast
    (ModelOpt commit 211c6b34), so S >= 2^-9 (byte 0x01 for every block whose unclamped scale is
    below 2^-9). With den = f32(S * s2), x = f32(w / den) and c the chosen code:
      |x| <= 6: |w - deq| <= h(|x|) * den, h = half the E2M1 spacing around |x|: 0.25 on [0, 2],
                0.5 on (2, 4], 1.0 on (4, 6] (spacings 0.5, 1, 2);
      |x| > 6:  |w - deq| <= (|x| - 6) * den (clipped), and |x| <= 6 * bs / S: this only happens
                when the e4m3 rounding of the block scale bs went down (<= 16/15 for normal S, so
                |x| <= 6.4) or, for a subnormal S, by up to its coarser relative step (a clamped
                block, S = 2^-9 > bs, has |x| <= 6 * bs / S < 6);
    plus 2^-22 * (|w| + |deq|) for the two f32 roundings (x, and e2m1 * den).
    Also returns the number of clamped blocks (unclamped bs < 2^-9).
    """
    f32 = mq.f32
    orig, deq, q = load(src), load(deq_dir), load(qdir)
    n_el, worst, n_clamped = 0, 0.0, 0
    for name in sorted(n for n in q if n.endswith(".weight_scale_2")):
        mod = name[: -len(".weight_scale_2")]
        w = values_of(orig[mod + ".weight"])
        d = values_of(deq[mod + ".weight"])
        scales = q[mod + ".weight_scale"][2]
        s2 = mq.bits_to_f32_list(q[name][2])[0]
        dd = f32(6.0 * s2)
        for b, sc in enumerate(scales):
            S = mq.E4M3_VALUES[sc]
            blk = w[16 * b:16 * b + 16]
            out = d[16 * b:16 * b + 16]
            if not S > 0.0:
                check(False, f"{mod} block {b}: scale byte 0x{sc:02x} = {S} (the clamp forbids 0)")
                return n_el, worst, n_clamped
            bs = f32(max(map(abs, blk)) / dd) or 1.0
            if bs < 2.0 ** -9:
                n_clamped += 1
                if sc != 0x01:
                    check(False, f"{mod} block {b}: bs {bs} < 2^-9 but scale byte 0x{sc:02x}")
                    return n_el, worst, n_clamped
            den = f32(S * s2)
            for wi, di in zip(blk, out):
                x = abs(f32(wi / den))
                h = 0.25 if x <= 2 else 0.5 if x <= 4 else 1.0 if x <= 6 else x - 6
                err = abs(wi - di)
                n_el += 1
                worst = max(worst, err / den)
                if not (err <= h * den + 2.0 ** -22 * (abs(wi) + abs(di)) + 2.0 ** -149):
                    check(False, f"{mod} block {b}: |{wi} - {di}| > {h} * {den}")
                    return n_el, worst, n_clamped
                if x > 6 and not (x <= 6 * bs / S * (1 + 2.0 ** -20)
                                  and (S < 2.0 ** -6 or x <= 6.4 * (1 + 2.0 ** -20))):
                    check(False, f"{mod} block {b}: |x| = {x} beyond the scale rounding")
                    return n_el, worst, n_clamped
    check(n_el > 0, "NVFP4 bound: elements checked")
    return n_el, worst, n_clamped


def _bound_fp8(src, deq_dir, qdir):
    """FP8: x = f32(w / s); |w - deq| <= e * s + 2^-22 (|w| + |deq|), e = half an e4m3 step at |x|:
    2^-4 * |x| for |x| >= 2^-6 (3 mantissa bits), 2^-10 below (subnormal step 2^-9); |x| never
    exceeds 448 (1 + 2^-20) since s = f32(amax / 448)."""
    f32 = mq.f32
    orig, deq, q = load(src), load(deq_dir), load(qdir)
    n_el, worst = 0, 0.0
    for name in sorted(n for n in q if n.endswith(".weight_scale")):
        mod = name[: -len(".weight_scale")]
        s = mq.bits_to_f32_list(q[name][2])[0]
        for wi, di in zip(values_of(orig[mod + ".weight"]), values_of(deq[mod + ".weight"])):
            x = abs(f32(wi / s))
            e = 2.0 ** -4 * x if x >= 2.0 ** -6 else 2.0 ** -10
            err = abs(wi - di)
            n_el += 1
            worst = max(worst, err / (e * s) if e else 0)
            if not (x <= 448 * (1 + 2.0 ** -20) and err <= e * s + 2.0 ** -22 * (abs(wi) + abs(di))):
                check(False, f"{mod}: |{wi} - {di}| > {e} * {s}")
                return n_el, worst
    check(n_el > 0, "FP8 bound: elements checked")
    return n_el, worst


def test_tiny_dense(tmp):
    times = {}
    outs = {}
    for fmt in ("nvfp4", "fp8"):
        out = os.path.join(tmp, "td-" + fmt)
        r, dt = run_tool("quantize", TINY, out, "--format", fmt)
        times[fmt] = dt
        if not check(r.returncode == 0, f"quantize tiny-dense {fmt}: {r.stderr}"):
            return
        outs[fmt] = out
        eq(r.stdout.count("33 linears quantized (70 tensors in)"), 1, f"{fmt}: 33 linears quantized")
        check(dt < 30, f"quantize tiny-dense {fmt} took {dt:.2f} s (< 30 s)")
        r, _ = run_tool("compare", out, out)
        check(r.returncode == 0 and "identical" in r.stdout, f"compare {fmt} with itself")
        dq = os.path.join(tmp, "td-" + fmt + "-deq")
        r, _ = run_tool("dequantize", out, dq)
        if not check(r.returncode == 0, f"dequantize tiny-dense {fmt}: {r.stderr}"):
            return
        cfg = json.load(open(os.path.join(dq, "config.json")))
        eq(cfg, json.load(open(TINY / "config.json")), f"{fmt}: dequantized config.json = original")
        check(not os.path.exists(os.path.join(dq, "hf_quant_config.json")),
              f"{fmt}: no hf_quant_config.json after dequantize")
        d, o = load(dq), load(TINY)
        eq(sorted(d), sorted(o), f"{fmt}: dequantized tensor names = original")
        eq(sorted(n for n in d if d[n][0] == "F32"),
           sorted(n for n in o if mq.classify(n, o[n][0], o[n][1], fmt, mq.DEFAULT_EXCLUDES) == "quantize"),
           f"{fmt}: F32 exactly for the quantised weights")
        check(all(d[n] == o[n] for n in d if d[n][0] != "F32"), f"{fmt}: other tensors unchanged")
        if fmt == "nvfp4":
            n_el, worst, n_clamped = _block_bound_nvfp4(str(TINY), dq, out)
            print(f"  nvfp4 round trip: {n_el} elements within the per-block bound "
                  f"(max |w - deq| / den = {worst:.4f}, bound 1.0 inside |x| <= 6; "
                  f"{n_clamped} clamped blocks)")
        else:
            n_el, worst = _bound_fp8(str(TINY), dq, out)
            print(f"  fp8 round trip: {n_el} elements within half an e4m3 step "
                  f"(max err / bound = {worst:.4f})")

    # sharded input: same tensors, same file assignment, index rewritten; compare == unsharded
    o = load(TINY)
    names = sorted(o)
    shards = {"model-00001-of-00002.safetensors": names[:40],
              "model-00002-of-00002.safetensors": names[40:]}
    sh = os.path.join(tmp, "td-sharded")
    make_ckpt(sh, o, json.load(open(TINY / "config.json")), shards)
    out = os.path.join(tmp, "td-sharded-nvfp4")
    r, _ = run_tool("quantize", sh, out, "--format", "nvfp4")
    if check(r.returncode == 0, f"quantize sharded: {r.stderr}"):
        idx = json.load(open(os.path.join(out, mq.INDEX_NAME)))
        ck = mq.Checkpoint(out)
        eq(sorted(ck.files), sorted(shards), "sharded: same file names")
        want = {}
        for fn, ns in shards.items():
            for n in ns:
                want[n] = fn
                if n.endswith(".weight") and n[:-7] + ".weight_scale" in ck.tensors:
                    want[n[:-7] + ".weight_scale"] = want[n[:-7] + ".weight_scale_2"] = fn
        eq(idx["weight_map"], want, "sharded: tensor -> file kept, scales beside their weight")
        eq(idx["metadata"]["total_size"], sum(t.nbytes for t in ck.tensors.values()),
           "sharded: metadata.total_size")
        r, _ = run_tool("compare", outs["nvfp4"], out)
        check(r.returncode == 0, f"compare sharded vs single-file output: {r.stdout}")
        check(not os.path.exists(os.path.join(outs["nvfp4"], mq.INDEX_NAME)),
              "single-file input -> no index.json")

    # compare finds differences
    bad = os.path.join(tmp, "td-nvfp4-bad")
    shutil.copytree(outs["nvfp4"], bad)
    T = load(bad)
    n = "model.layers.2.mlp.up_proj.weight"
    dt_, sh_, raw = T[n]
    T[n] = (dt_, sh_, raw[:100] + bytes([raw[100] ^ 0x10]) + raw[101:])
    mq.write_safetensors(os.path.join(bad, "model.safetensors"), T)
    r, _ = run_tool("compare", outs["nvfp4"], bad)
    check(r.returncode == 1 and n in r.stdout and "element 100 [3, 4]" in r.stdout,
          f"compare reports a flipped byte: {r.stdout}")
    hq = json.load(open(os.path.join(bad, "hf_quant_config.json")))
    hq["quantization"]["exclude_modules"].append("x")
    mq.write_json(os.path.join(bad, "hf_quant_config.json"), hq)
    r, _ = run_tool("compare", outs["nvfp4"], bad)
    check(r.returncode == 1 and "hf_quant_config.json" in r.stdout, "compare reports hf_quant_config")
    r, _ = run_tool("compare", outs["nvfp4"], outs["fp8"])
    check(r.returncode == 1 and "quantization_config" in r.stdout, "compare nvfp4 vs fp8 differs")
    print(f"tiny-dense: quantize nvfp4 {times['nvfp4']:.2f} s, fp8 {times['fp8']:.2f} s (subprocess "
          f"wall time); dequantize bounds, sharded input, compare")
    return outs


def test_make_exact(tmp):
    o = load(TINY)
    cfg_in = json.load(open(TINY / "config.json"))
    for fmt in ("nvfp4", "fp8"):
        qd, tw, dq = (os.path.join(tmp, f"ex-{fmt}-{k}") for k in ("q", "twin", "deq"))
        r, dt = run_tool("make-exact", TINY, qd, tw, "--format", fmt)
        if not check(r.returncode == 0, f"make-exact {fmt}: {r.stderr}"):
            continue
        r, _ = run_tool("dequantize", qd, dq)
        if not check(r.returncode == 0, f"dequantize make-exact {fmt}: {r.stderr}"):
            continue
        q, t, d = load(qd), load(tw), load(dq)
        eq(sorted(t), sorted(o), f"{fmt}: twin has the input's tensors")
        eq(json.load(open(os.path.join(tw, "config.json"))), cfg_in, f"{fmt}: twin config unchanged")
        check(not os.path.exists(os.path.join(tw, "hf_quant_config.json")), f"{fmt}: twin unquantised")
        nq, changed = 0, 0
        for n in sorted(o):
            if d[n][0] == "F32":
                nq += 1
                eq(t[n][:2], ("BF16", o[n][1]), f"{fmt}: twin {n} is bf16")
                if bits(values_of(t[n])) != d[n][2]:
                    check(False, f"{fmt}: twin {n} == dequantised quantised weight")
                changed += t[n][2] != o[n][2]
            else:
                check(t[n] == o[n] and d[n] == o[n], f"{fmt}: {n} unchanged in twin and quant")
        eq(nq, 33, f"{fmt}: 33 twin weights compared bitwise with the dequantised checkpoint")
        check(changed == nq, f"{fmt}: every quantised weight changed by the rounding ({changed})")
        key = ".weight_scale_2" if fmt == "nvfp4" else ".weight_scale"
        sc = [mq.bits_to_f32_list(q[n][2])[0] for n in q if n.endswith(key)]
        check(len(sc) == 33 and all(math.frexp(s)[0] == 0.5 for s in sc),
              f"{fmt}: per-tensor scales are powers of two")
        print(f"  make-exact {fmt}: {nq} twin bf16 weights bitwise equal to the dequantised "
              f"checkpoint ({dt:.2f} s)")
    print("make-exact: twin == dequantize(quant) bitwise, pow2 scales, other tensors and config "
          "unchanged")


def test_dequantize_paths(tmp, outs):
    # per-channel FP8 and input_scale (hand checkpoint)
    src = os.path.join(tmp, "fp8-pc")
    w = bytes([0x38, 0x40, 0xB8, 0x00])  # 1, 2, -1, 0
    for shape in ([2], [2, 1]):
        make_ckpt(src, {"a.q_proj.weight": ("F8_E4M3", [2, 2], w),
                        "a.q_proj.weight_scale": ("F32", shape, f32b(0.5) + f32b(2.0)),
                        "a.q_proj.input_scale": ("F32", [], f32b(3.0)),
                        "a.norm.weight": ("BF16", [2], bf16_bytes([1.0, 2.0]))},
                  {"model_type": "test", "quantization_config": {"quant_method": "modelopt"}})
        mq.write_json(os.path.join(src, "hf_quant_config.json"), {})
        out = src + "-deq"
        r, _ = run_tool("dequantize", src, out)
        if check(r.returncode == 0, f"dequantize per-channel {shape}: {r.stderr}"):
            d = load(out)
            eq(sorted(d), ["a.norm.weight", "a.q_proj.weight"], "scales / input_scale consumed")
            eq(values_of(d["a.q_proj.weight"]), [0.5, 1.0, -2.0, 0.0], f"FP8 per-channel {shape}")
            eq(json.load(open(os.path.join(out, "config.json"))), {"model_type": "test"},
               "quantization_config removed")
            check(not os.path.exists(os.path.join(out, "hf_quant_config.json")), "no hf_quant_config")
        shutil.rmtree(src)
        shutil.rmtree(out, ignore_errors=True)

    def corrupt(fmt, label, mutate, expect):
        bad = os.path.join(tmp, f"bad-{fmt}-{label}")
        shutil.copytree(outs[fmt], bad)
        T = load(bad)
        mutate(T)
        mq.write_safetensors(os.path.join(bad, "model.safetensors"), T, {"format": "pt"})
        r, _ = run_tool("dequantize", bad, bad + "-deq")
        check(r.returncode != 0 and expect in r.stderr and "Traceback" not in r.stderr,
              f"dequantize {fmt} {label}: exit {r.returncode}, want {expect!r} in {r.stderr!r}")
        check(not os.path.exists(bad + "-deq"), f"dequantize {fmt} {label}: nothing written")
        shutil.rmtree(bad)

    m = "model.layers.1.mlp.up_proj"

    def set_byte(name, i, v):
        def f(T):
            dt, sh, raw = T[name]
            T[name] = (dt, sh, raw[:i] + bytes([v]) + raw[i + 1:])
        return f

    def replace(name, entry):
        def f(T):
            T[name] = entry(T[name])
        return f

    def delete(name):
        return lambda T: T.pop(name)

    cases = [
        ("nvfp4", "nan-block-scale", set_byte(m + ".weight_scale", 5, 0x7F), m + ".weight_scale"),
        ("nvfp4", "nan-scale_2", replace(m + ".weight_scale_2", lambda e: ("F32", [], f32b(math.nan))),
         m + ".weight_scale_2"),
        ("nvfp4", "inf-scale_2", replace(m + ".weight_scale_2", lambda e: ("F32", [], f32b(math.inf))),
         m + ".weight_scale_2"),
        ("nvfp4", "missing-scale_2", delete(m + ".weight_scale_2"), m + ".weight_scale_2"),
        ("nvfp4", "missing-scale", delete(m + ".weight_scale"), m + ".weight_scale"),
        ("nvfp4", "scale-shape", replace(m + ".weight_scale",
                                         lambda e: (e[0], [e[1][0], e[1][1] - 1], e[2][:e[1][0] * (e[1][1] - 1)])),
         m + ".weight"),
        ("nvfp4", "weight-shape", replace(m + ".weight",
                                          lambda e: (e[0], [e[1][0] // 2, e[1][1] * 2], e[2])),
         m + ".weight"),
        ("nvfp4", "scale-dtype", replace(m + ".weight_scale", lambda e: ("U8", e[1], e[2])),
         m + ".weight_scale"),
        ("nvfp4", "scale_2-dtype", replace(m + ".weight_scale_2", lambda e: ("BF16", [2], e[2])),
         m + ".weight_scale_2"),
        ("fp8", "nan-scale", replace(m + ".weight_scale", lambda e: ("F32", [], f32b(math.nan))),
         m + ".weight_scale"),
        ("fp8", "missing-scale", delete(m + ".weight_scale"), m + ".weight_scale"),
        ("fp8", "scale-dtype", replace(m + ".weight_scale", lambda e: ("BF16", [2], e[2])),
         m + ".weight_scale"),
        ("fp8", "scale-shape", replace(m + ".weight_scale", lambda e: ("F32", [3], e[2] * 3)),
         m + ".weight"),
    ]
    for fmt, label, mutate, expect in cases:
        corrupt(fmt, label, mutate, expect)
    print(f"dequantize: FP8 per-channel [out] / [out, 1], input_scale dropped; {len(cases)} corrupt "
          f"checkpoints (NaN/Inf scale, missing scale, wrong shape, wrong dtype) exit non-zero naming "
          f"the tensor")


def main():
    t0 = time.time()
    for m in (TINY, TINY_E2B):
        if not (m / "model.safetensors").exists():
            print(f"missing {m}")
            return 1
    tmp = tempfile.mkdtemp(prefix="modelopt_quant_test_")
    try:
        for test in (test_f32, test_e2m1, test_e4m3, test_pow2, test_hand_matrix,
                     test_block_scale_clamp, test_oracle):
            try:
                test()
            except Exception:
                check(False, f"{test.__name__} raised:\n{traceback.format_exc()}")
        outs = None
        for test in (test_selection, test_tiny_dense, test_make_exact, test_layout,
                     test_dequantize_paths):
            try:
                if test is test_dequantize_paths:
                    if outs:
                        test(tmp, outs)
                    else:
                        check(False, "dequantize error paths skipped (no tiny-dense output)")
                elif test is test_tiny_dense:
                    outs = test(tmp)
                else:
                    test(tmp)
            except Exception:
                check(False, f"{test.__name__} raised:\n{traceback.format_exc()}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{COUNT[0] - len(FAILURES)} of {COUNT[0]} checks passed in {time.time() - t0:.1f} s"
          + (f"; {len(FAILURES)} FAILED" if FAILURES else ""))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
