#!/usr/bin/env python3
"""Reference NVFP4 / FP8 weight quantisation in the NVIDIA ModelOpt checkpoint layout (stdlib only).

    python3 tools/reference/modelopt_quant.py quantize IN_DIR OUT_DIR --format nvfp4|fp8 [--exclude PAT]...
    python3 tools/reference/modelopt_quant.py compare DIR_A DIR_B
    python3 tools/reference/modelopt_quant.py dequantize IN_DIR OUT_DIR
    python3 tools/reference/modelopt_quant.py make-exact IN_DIR OUT_QUANT_DIR OUT_TWIN_DIR --format nvfp4|fp8

An independent pure-Python implementation of the weight quantisation that `spark-quantize` (C++)
performs, written from the same spec, so the test suite can check that tool byte for byte
(`quantize` + `compare`), and build hand-made checkpoints (`make-exact`, `dequantize`).

The numerics follow NVIDIA Model-Optimizer (github.com/NVIDIA/Model-Optimizer, formerly
TensorRT-Model-Optimizer), modelopt/torch/quantization/qtensor/nvfp4_tensor.py at commit
211c6b3413c52b2fd7a671eda3ce8b2139a4fedd (NVFP4QTensor: get_weights_scaling_factor_2, the dynamic
weight path get_weights_scaling_factor, _cast_fp4, packing) and fp8_tensor.py (FP8QTensor, per-tensor
scale amax/448), and the checkpoint layout its HF export writes (`X.weight` packed U8 / F8_E4M3,
`X.weight_scale`, `X.weight_scale_2`, `quantization_config` in config.json, hf_quant_config.json):

  NVFP4, per module with weight W [out, in] (in % 16 == 0), all arithmetic in IEEE float32:
    s2      = f32(amax(|W|) / 2688)                        (2688 = 6 * 448)
    bs      = f32(amax(|block of 16|) / f32(6 * s2));  bs == 0 -> 1
    bs      = max(bs, 2^-9)                            (the smallest e4m3 subnormal, byte 0x01)
    scale_b = e4m3fn(bs)                               (round to nearest even, saturate at 448)
    x       = f32(w / f32(decode(scale_b) * s2))
    code    = nearest E2M1 {0, .5, 1, 1.5, 2, 3, 4, 6} to |x|, ties to the even code; |x| > 6 -> 6;
              sign bit 8 iff w < 0; two codes per byte, element 2j in the low nibble.
  FP8 (per tensor): s = f32(amax / 448); q = e4m3fn(f32(w / s)) (saturating at +-448).

The clamp is that commit's
    per_block_scale[per_block_scale == 0] = 1.0
    per_block_scale = per_block_scale.clamp_(min=2**-9).to(torch.float8_e4m3fn)
applied after the zero -> 1 replacement and before the e4m3 cast: a block scale never rounds to 0
(a block whose unclamped scale is at most 2^-10 gets byte 0x01, not 0x00), so the division by
decode(scale_b) * s2 always has a non-zero denominator.

All-zero tensors (amax == 0):
  * NVFP4: we use s2 = 1 (every block scale is then 0 -> 1, byte 0x38, and every code 0).
    This does not match ModelOpt: its get_weights_scaling_factor_2 gives s2 = 0 there, and then
    (reading that code) its block scales would be 0 / 0 = NaN, which the == 0 replacement does not
    catch. Ours is a deliberate difference; it dequantises to exactly the input's zeros.
  * FP8: s = 1, which matches ModelOpt: its export takes the scale from the quantizer's
    export_amax(), which maps amax 0 to the max bound 448, so the exported scale is 448 / 448 = 1
    and nothing is divided by zero.

Float32 is emulated exactly: every operation is done on Python floats (IEEE double) and then rounded
to float32 (struct '<f' round trip, or array('f') for whole lists, which is the same C cast). For
+, *, / of float32 operands, double rounding through double is innocuous (53 >= 2*24 + 2), so this
equals float32 arithmetic, subnormals included.

Safetensors files are read and written with struct/json only. The writer aligns the data: the JSON
header is padded with spaces so that 8 + header length is a multiple of 16, and the tensors are laid
out in the order (byte size % 16 != 0, element size descending, name), so every tensor starts at a
file offset that is a multiple of its element size, and of 16 when its byte size is a multiple of
16. Output files keep the input's file names, tensor->file assignment and per-file __metadata__
(written first in the header); a quantised module's extra tensors go to its weight's file.
`compare` does not look at the layout.

Exit status: 0 success, 1 `compare` found a difference, 2 error (message on stderr naming the file or
tensor).
"""

from __future__ import annotations

import argparse
import bisect
import fnmatch
import json
import re
import math
import os
import shutil
import struct
import sys
import time
from array import array

# ----------------------------------------------------------------------------------------------
# float32 emulation

_F32 = struct.Struct("<f")
_BIG_ENDIAN = sys.byteorder == "big"


def f32(x: float) -> float:
    """Rounds a Python float to the nearest float32 (ties to even). Raises OverflowError if out of
    float32 range."""
    return _F32.unpack(_F32.pack(x))[0]


def f32_list(values) -> list:
    """f32() of every element at once (array('f') performs the same C double->float cast)."""
    return array("f", values).tolist()


def bits_to_f32_list(raw: bytes) -> list:
    """Little-endian F32 bytes -> list of floats."""
    a = array("f")
    a.frombytes(raw)
    if _BIG_ENDIAN:
        a.byteswap()
    return a.tolist()


def f32_list_to_bytes(values) -> bytes:
    """List of float32-exact floats -> little-endian F32 bytes."""
    a = array("f", values)
    if _BIG_ENDIAN:
        a.byteswap()
    return a.tobytes()


def bf16_to_f32_list(raw: bytes) -> list:
    """Little-endian BF16 bytes -> list of floats (exact: bf16 is the top half of a float32)."""
    n = len(raw) // 2
    buf = bytearray(4 * n)
    buf[2::4] = raw[0::2]
    buf[3::4] = raw[1::2]
    return bits_to_f32_list(bytes(buf))


def f32_list_to_bf16_exact(values, what: str) -> bytes:
    """Float32-exact values -> BF16 bytes; raises QuantError unless every value is exactly a bf16."""
    raw = f32_list_to_bytes(values)
    n = len(raw) // 4
    low = raw[0::4] + raw[1::4]
    if low.count(0) != len(low):
        for i in range(n):
            if raw[4 * i] or raw[4 * i + 1]:
                raise QuantError(f"{what}: element {i} = {values[i]!r} is not exactly representable "
                                 f"in bf16")
    out = bytearray(2 * n)
    out[0::2] = raw[2::4]
    out[1::2] = raw[3::4]
    return bytes(out)


# ----------------------------------------------------------------------------------------------
# float8 e4m3fn: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits; subnormal step 2^-9;
# max finite 448 (0x7E); 0x7F / 0xFF are NaN; no infinities.

E4M3_MAX = 448.0


def _e4m3_decode_bits(code: int) -> float:
    sign = -1.0 if code & 0x80 else 1.0
    exp = (code >> 3) & 0xF
    man = code & 0x7
    if exp == 0xF and man == 0x7:
        return math.nan
    if exp == 0:
        return sign * math.ldexp(man, -9)           # subnormal: man * 2^-9
    return sign * math.ldexp(8 + man, exp - 7 - 3)  # (1 + man/8) * 2^(exp-7)


E4M3_VALUES = tuple(_e4m3_decode_bits(c) for c in range(256))  # decode table (NaN at 0x7F, 0xFF)

# Positive finite codes 0x00..0x7E are increasing in value, so rounding |v| to the nearest code is a
# search among the midpoints between consecutive values. _E4M3_MID[i] is the midpoint between codes
# i and i+1; the last one (464) lies between 448 and the non-existent 480, so anything above 448
# ends at code 126 after the clamp (saturation).
_E4M3_MID = tuple((E4M3_VALUES[i] + E4M3_VALUES[i + 1]) / 2 for i in range(126)) + (464.0,)


def e4m3fn_encode(v: float) -> int:
    """Nearest e4m3fn code of v, ties to even (even mantissa = even code); |v| > 448 saturates to
    +-448 (0x7E / 0xFE); magnitudes that round below 2^-9 become (signed) zero. The sign bit is the
    sign of v (so -0.0 -> 0x80, as torch's float8 cast). NaN raises ValueError."""
    if v != v:
        raise ValueError("e4m3fn_encode(NaN)")
    a = abs(v)
    i = bisect.bisect_left(_E4M3_MID, a)  # number of midpoints < a
    if i < 127 and a == _E4M3_MID[i] and (i & 1):
        i += 1  # exact tie between codes i (odd) and i+1 (even): take the even one
    if i > 126:
        i = 126
    return i | 0x80 if math.copysign(1.0, v) < 0 else i


def e4m3fn_decode(code: int) -> float:
    return E4M3_VALUES[code]


# ----------------------------------------------------------------------------------------------
# E2M1 (FP4): codes 0..7 = 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 8 = sign.

E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_SIGNED = E2M1_VALUES + tuple(-v for v in E2M1_VALUES)  # index = 4-bit code (8 = -0.0)
# Midpoints between consecutive magnitudes. The number of midpoints below |x| is the nearest code;
# at an exact midpoint the even code is the upper one for 0.75, 1.75, 3.5 and the lower one for
# 0.25, 1.25, 2.5, 5 (ModelOpt _cast_fp4: searchsorted + "round up at odd-index bounds").
_E2M1_BOUNDS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
_E2M1_TIE_UP = frozenset((0.75, 1.75, 3.5))


def e2m1_code(x: float, negative: bool | None = None) -> int:
    """4-bit E2M1 code of x: nearest magnitude, ties to the even code, |x| > 6 -> 7. The sign bit is
    set iff `negative` (default: x < 0, so -0.0 -> 0)."""
    if x != x:
        raise ValueError("e2m1_code(NaN)")
    a = abs(x)
    c = bisect.bisect_left(_E2M1_BOUNDS, a)
    if a in _E2M1_TIE_UP:
        c += 1
    if (x < 0) if negative is None else negative:
        c |= 8
    return c


def pack_nibbles(codes) -> bytes:
    """Byte j = codes[2j] | codes[2j+1] << 4 (element 2j in the low nibble), as ModelOpt packs."""
    lo = codes[0::2]
    hi = codes[1::2]
    return bytes(a | (b << 4) for a, b in zip(lo, hi))


def unpack_nibbles(packed: bytes) -> list:
    out = [0] * (2 * len(packed))
    out[0::2] = [b & 0xF for b in packed]
    out[1::2] = [b >> 4 for b in packed]
    return out


# ----------------------------------------------------------------------------------------------
# Per-tensor scales

NVFP4_BLOCK = 16
NVFP4_SCALE_DIV = 6.0 * 448.0  # 2688
NVFP4_MIN_BLOCK_SCALE = 2.0 ** -9  # lower clamp of the block scale (smallest e4m3 subnormal, 0x01)


def nvfp4_scale_2(amax: float) -> float:
    """ModelOpt weights_scaling_factor_2 = amax / (6 * 448) in f32; 1.0 for amax == 0."""
    return f32(amax / NVFP4_SCALE_DIV) if amax != 0.0 else 1.0


def fp8_scale(amax: float) -> float:
    """ModelOpt FP8 per-tensor scale amax / 448 in f32; 1.0 for amax == 0."""
    return f32(amax / E4M3_MAX) if amax != 0.0 else 1.0


def pow2_scale(amax: float, div: float) -> float:
    """The smallest power of two >= amax / div, i.e. 2^ceil(log2(amax / div)), decided exactly
    (div * 2^k is exact in double); 1.0 for amax == 0. Used by make-exact."""
    if amax == 0.0:
        return 1.0
    k = math.frexp(amax / div)[1]  # first guess: 2^(k-1) <= amax/div (rounded) < 2^k
    while math.ldexp(div, k - 1) >= amax:
        k -= 1
    while math.ldexp(div, k) < amax:
        k += 1
    s = math.ldexp(1.0, k)
    if f32(s) != s:
        raise QuantError(f"per-tensor scale 2^{k} is not a float32")
    return s


# ----------------------------------------------------------------------------------------------
# Quantisation kernels on flat row-major lists of float32-exact floats


def nvfp4_quantize(w: list, rows: int, cols: int, s2: float | None = None):
    """NVFP4-quantises W [rows, cols] (cols % 16 == 0). Returns (packed U8 bytes [rows, cols/2],
    scale bytes F8_E4M3 [rows, cols/16], s2). `s2` overrides the per-tensor scale (make-exact)."""
    assert cols % NVFP4_BLOCK == 0 and len(w) == rows * cols
    amax = max(map(abs, w), default=0.0)
    if s2 is None:
        s2 = nvfp4_scale_2(amax)
    d = f32(6.0 * s2)
    nblocks = len(w) // NVFP4_BLOCK  # row-major, cols % 16 == 0: block b = row b // (cols/16)
    scales = bytearray(nblocks)
    codes = [0] * len(w)
    bounds, tie_up, bl = _E2M1_BOUNDS, _E2M1_TIE_UP, bisect.bisect_left
    for b in range(nblocks):
        lo = b * NVFP4_BLOCK
        blk = w[lo:lo + NVFP4_BLOCK]
        bs = f32(max(map(abs, blk)) / d)
        if bs == 0.0:
            bs = 1.0
        if bs < NVFP4_MIN_BLOCK_SCALE:
            bs = NVFP4_MIN_BLOCK_SCALE  # ModelOpt clamp_(min=2**-9): never scale byte 0x00
        sc = e4m3fn_encode(bs)
        scales[b] = sc
        den = f32(E4M3_VALUES[sc] * s2)  # decode(sc) >= 2^-9 and s2 > 0, so den > 0 unless the
        if den == 0.0:  # product underflows f32, which bf16 weights cannot reach (defensive)
            raise QuantError(f"block {b}: block scale {E4M3_VALUES[sc]!r} * per-tensor scale "
                             f"{s2!r} underflows float32")
        xs = f32_list([v / den for v in blk])
        for i in range(NVFP4_BLOCK):
            a = abs(xs[i])
            c = bl(bounds, a)
            if a in tie_up:
                c += 1
            if blk[i] < 0:
                c |= 8
            codes[lo + i] = c
    return pack_nibbles(codes), bytes(scales), s2


def nvfp4_dequantize(packed: bytes, scales: bytes, s2: float, rows: int, cols: int) -> list:
    """e2m1(code) * f32(decode(scale_b) * s2), each product rounded to f32. cols = unpacked width."""
    nblk = cols // NVFP4_BLOCK
    assert len(packed) * 2 == rows * cols and len(scales) == rows * nblk
    codes = unpack_nibbles(packed)
    out = [0.0] * (rows * cols)
    for b in range(rows * nblk):
        den = f32(E4M3_VALUES[scales[b]] * s2)
        table = f32_list([v * den for v in E2M1_SIGNED])
        lo = b * NVFP4_BLOCK
        out[lo:lo + NVFP4_BLOCK] = [table[c] for c in codes[lo:lo + NVFP4_BLOCK]]
    return out


def fp8_quantize(w: list, s: float | None = None):
    """FP8 per-tensor: returns (F8_E4M3 bytes, s)."""
    amax = max(map(abs, w), default=0.0)
    if s is None:
        s = fp8_scale(amax)
    xs = f32_list([v / s for v in w])
    return bytes(e4m3fn_encode(x) for x in xs), s


def fp8_dequantize(q: bytes, scales: list, rows: int) -> list:
    """f32(decode(q) * s); `scales` has one element (per tensor) or `rows` (per output channel)."""
    n = len(q)
    if len(scales) == 1:
        table = f32_list([v * scales[0] for v in E4M3_VALUES])
        return [table[c] for c in q]
    cols = n // rows
    out = []
    for r in range(rows):
        table = f32_list([v * scales[r] for v in E4M3_VALUES])
        out.extend(table[c] for c in q[r * cols:(r + 1) * cols])
    return out


# ----------------------------------------------------------------------------------------------
# safetensors I/O

DTYPE_SIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I16": 2,
              "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8,
              "F64": 8}
INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"


class QuantError(Exception):
    """A user-facing error (bad input, inconsistent checkpoint); the CLI prints it and exits 2."""


def numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class TensorRef:
    """A tensor inside a safetensors file, read on demand."""

    def __init__(self, name, dtype, shape, path, begin, end):
        self.name, self.dtype, self.shape, self.path = name, dtype, list(shape), path
        self.begin, self.end = begin, end

    @property
    def nbytes(self) -> int:
        return self.end - self.begin

    def read(self) -> bytes:
        with open(self.path, "rb") as f:
            f.seek(self.begin)
            data = f.read(self.nbytes)
        if len(data) != self.nbytes:
            raise QuantError(f"{self.path}: tensor {self.name}: file truncated")
        return data


def read_safetensors_header(path: str):
    """Returns ({name: TensorRef}, __metadata__ or None), validating the header."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise QuantError(f"{path}: not a safetensors file (too short)")
        (n,) = struct.unpack("<Q", head)
        if n > size - 8 or n > (1 << 30):
            raise QuantError(f"{path}: bad header length {n}")
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise QuantError(f"{path}: header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise QuantError(f"{path}: header is not a JSON object")
    meta = header.pop("__metadata__", None)
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        try:
            dtype, shape, (b, e) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise QuantError(f"{path}: tensor {name}: malformed header entry {info!r}") from None
        if dtype not in DTYPE_SIZE:
            raise QuantError(f"{path}: tensor {name}: unknown dtype {dtype!r}")
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise QuantError(f"{path}: tensor {name}: bad shape {shape!r}")
        if not (isinstance(b, int) and isinstance(e, int) and 0 <= b <= e <= size - base):
            raise QuantError(f"{path}: tensor {name}: data_offsets {[b, e]} outside the data")
        if e - b != numel(shape) * DTYPE_SIZE[dtype]:
            raise QuantError(f"{path}: tensor {name}: {e - b} bytes for {dtype} {shape}")
        tensors[name] = TensorRef(name, dtype, shape, path, base + b, base + e)
    return tensors, meta


def tensor_order_key(name: str, dtype: str, nbytes: int):
    """Data layout order of write_safetensors: tensors whose byte size is a multiple of 16 first,
    then by element size descending, then by name. Starting 16-aligned, the first group keeps every
    offset a multiple of 16; after it, the element sizes (powers of two, at most 8) only decrease
    and each tensor's byte size is a multiple of its own, so each begins at a multiple of its
    element size."""
    return (nbytes % 16 != 0, -DTYPE_SIZE[dtype], name)


def write_safetensors(path: str, tensors: dict, metadata=None) -> int:
    """tensors: {name: (dtype, shape, bytes)}; `metadata` (the input's __metadata__) goes first in
    the header when given. The header is space-padded so that 8 + its length is a multiple of 16,
    and the data laid out in tensor_order_key order, so every tensor's file offset is a multiple of
    its element size, and of 16 when its byte size is. Returns the number of data bytes."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, data) in tensors.items():
        if len(data) != numel(shape) * DTYPE_SIZE[dtype]:
            raise AssertionError(f"{name}: {len(data)} bytes for {dtype} {shape}")
    names = sorted(tensors, key=lambda n: tensor_order_key(n, tensors[n][0], len(tensors[n][2])))
    off = 0
    for name in names:
        dtype, shape, data = tensors[name]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * (-(8 + len(hb)) % 16)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for name in names:
            f.write(tensors[name][2])
    return off


class Checkpoint:
    """A checkpoint directory: model.safetensors, or shards listed by model.safetensors.index.json."""

    def __init__(self, directory: str):
        self.dir = directory
        if not os.path.isdir(directory):
            raise QuantError(f"{directory}: not a directory")
        index_path = os.path.join(directory, INDEX_NAME)
        self.index = None  # the parsed index.json, if sharded
        if os.path.exists(index_path):
            with open(index_path, encoding="utf-8") as f:
                self.index = json.load(f)
            wm = self.index.get("weight_map") if isinstance(self.index, dict) else None
            if not isinstance(wm, dict):
                raise QuantError(f"{index_path}: no weight_map object")
            self.files = sorted(set(wm.values()))
        elif os.path.exists(os.path.join(directory, SINGLE_NAME)):
            wm = None
            self.files = [SINGLE_NAME]
        else:
            raise QuantError(f"{directory}: neither {SINGLE_NAME} nor {INDEX_NAME}")
        self.tensors = {}    # name -> TensorRef
        self.file_of = {}    # name -> file name
        self.file_meta = {}  # file name -> __metadata__ (or None)
        for fn in self.files:
            if os.path.basename(fn) != fn:
                raise QuantError(f"{index_path}: shard name {fn!r} is not a plain file name")
            path = os.path.join(directory, fn)
            if not os.path.exists(path):
                raise QuantError(f"{path}: listed in {INDEX_NAME} but missing")
            ts, meta = read_safetensors_header(path)
            self.file_meta[fn] = meta
            for name, t in ts.items():
                if name in self.tensors:
                    raise QuantError(f"tensor {name} is in both {self.file_of[name]} and {fn}")
                if wm is not None and wm.get(name) != fn:
                    raise QuantError(f"{path}: tensor {name} is not mapped to {fn} in {INDEX_NAME}")
                self.tensors[name] = t
                self.file_of[name] = fn
        if wm is not None:
            for name, fn in wm.items():
                if name not in self.tensors:
                    raise QuantError(f"{INDEX_NAME}: tensor {name} is not in {fn}")

    def config(self):
        path = os.path.join(self.dir, "config.json")
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    def names_in(self, fn):
        return sorted(n for n, f in self.file_of.items() if f == fn)


def prepare_out_dir(out_dir: str, in_dirs, create=True):
    """Refuses an output directory that is an input or is not empty; creates it if `create`."""
    for d in in_dirs:
        if os.path.realpath(d) == os.path.realpath(out_dir):
            raise QuantError(f"{out_dir}: output directory is the input directory")
    if os.path.isdir(out_dir) and os.listdir(out_dir):
        raise QuantError(f"{out_dir}: output directory exists and is not empty")
    if create:
        os.makedirs(out_dir, exist_ok=True)


def write_json(path: str, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def copy_side_files(ck: Checkpoint, out_dir: str, skip=()):
    """Copies every regular non-safetensors file of the input directory unchanged, except the index
    and the names in `skip`. Other *.safetensors files (goldens beside a model) are not copied."""
    skipped = []
    for fn in sorted(os.listdir(ck.dir)):
        src = os.path.join(ck.dir, fn)
        if not os.path.isfile(src) or fn == INDEX_NAME or fn in skip:
            continue
        if fn.endswith(".safetensors"):
            if fn not in ck.files:
                skipped.append(fn)
            continue
        shutil.copyfile(src, os.path.join(out_dir, fn))
    if skipped:
        print(f"note: not copied (safetensors files outside the checkpoint): {', '.join(skipped)}")


def write_checkpoint(ck: Checkpoint, out_dir: str, tensors: dict, file_of: dict):
    """Writes {name: (dtype, shape, bytes)} into the input's file names (tensor -> file as given),
    plus an index.json iff the input had one. Returns the total tensor bytes."""
    total = 0
    for fn in ck.files:
        part = {n: tensors[n] for n in tensors if file_of[n] == fn}
        total += write_safetensors(os.path.join(out_dir, fn), part, ck.file_meta.get(fn))
    if ck.index is not None:
        index = dict(ck.index)
        meta = dict(index.get("metadata") or {})
        meta["total_size"] = total
        index["metadata"] = meta
        index["weight_map"] = {n: file_of[n] for n in sorted(tensors)}
        write_json(os.path.join(out_dir, INDEX_NAME), index)
    return total


# ----------------------------------------------------------------------------------------------
# Which tensors are quantised

QUANT_MODULES = frozenset(("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
                           "per_layer_input_gate", "per_layer_projection", "per_layer_model_projection"))
DEFAULT_EXCLUDES = ("lm_head", "*embed_tokens*", "*router*", "*vision*", "*audio*")
FORMATS = {"nvfp4": "NVFP4", "fp8": "FP8"}


def classify(name: str, dtype: str, shape, fmt: str, excludes) -> str:
    """'quantize', 'copy', or 'exclude-shape' (NVFP4 only: would be quantised but in % 16 != 0, so
    it stays bf16 and its module name is added to the exclude list). Patterns match module names."""
    if dtype != "BF16" or len(shape) != 2 or not name.endswith(".weight"):
        return "copy"
    module = name[: -len(".weight")]
    parts = module.split(".")
    if parts[-1] not in QUANT_MODULES or "router" in parts:
        return "copy"
    if "vision" in module or "audio" in module:
        return "copy"
    if any(fnmatch.fnmatchcase(module, p) for p in excludes):
        return "copy"
    if fmt == "nvfp4" and shape[1] % NVFP4_BLOCK != 0:
        return "exclude-shape"
    return "quantize"


def expert_linears(name: str, dtype: str, shape):
    """The per-expert linears of a fused bf16 MoE expert tensor, ModelOpt's layout:
    `<experts>.gate_up_proj` [E, 2I, H] -> `<experts>.<e>.gate_proj.weight` and `up_proj` [I, H]
    (expert by expert, gate first), `<experts>.down_proj` [E, H, I] -> `<experts>.<e>.down_proj.weight`
    [H, I]; as (name, shape, byte offset, byte count) in the fused tensor's order, or [] for any
    other tensor."""
    gate_up = name.endswith(".experts.gate_up_proj")
    if (not gate_up and not name.endswith(".experts.down_proj")) or dtype != "BF16" \
            or len(shape) != 3 or (gate_up and shape[1] % 2):
        return []
    experts = name.rsplit(".", 1)[0]
    count, rows, cols = shape[0], shape[1] // 2 if gate_up else shape[1], shape[2]
    projections = ("gate_proj", "up_proj") if gate_up else ("down_proj",)
    size = rows * cols * 2
    out = []
    for e in range(count):
        for p, proj in enumerate(projections):
            out.append((f"{experts}.{e}.{proj}.weight", [rows, cols],
                        (e * len(projections) + p) * size, size))
    return out


def quant_configs(fmt: str, excludes: list):
    algo = FORMATS[fmt]
    qc = {"quant_method": "modelopt", "quant_algo": algo}
    hq = {"quant_algo": algo, "kv_cache_quant_algo": None}
    if fmt == "nvfp4":
        qc["group_size"] = NVFP4_BLOCK
        hq["group_size"] = NVFP4_BLOCK
    qc["ignore"] = list(excludes)
    qc["producer"] = {"name": "spark-quantize"}
    hq["exclude_modules"] = list(excludes)
    return qc, {"producer": {"name": "spark-quantize"}, "quantization": hq}


def _is_quantized_config(cfg) -> bool:
    if not isinstance(cfg, dict):
        return False
    if "quantization_config" in cfg:
        return True
    tc = cfg.get("text_config")
    return isinstance(tc, dict) and "quantization_config" in tc


# ----------------------------------------------------------------------------------------------
# quantize / make-exact


def quantize_checkpoint(in_dir, out_dir, fmt, user_excludes=(), exact=False, twin_dir=None,
                        verbose=True):
    """`quantize` (exact=False) and `make-exact` (exact=True: power-of-two per-tensor scales, and a
    bf16 twin in twin_dir). Returns a summary dict."""
    if fmt not in FORMATS:
        raise QuantError(f"unknown format {fmt!r} (nvfp4 or fp8)")
    ck = Checkpoint(in_dir)
    cfg = ck.config()
    if cfg is None:
        raise QuantError(f"{in_dir}: config.json not found")
    if _is_quantized_config(cfg) or os.path.exists(os.path.join(in_dir, "hf_quant_config.json")):
        raise QuantError(f"{in_dir}: checkpoint is already quantized")
    # checked now, created once everything is computed (an error leaves no output behind)
    prepare_out_dir(out_dir, [in_dir], create=False)
    if twin_dir is not None:
        prepare_out_dir(twin_dir, [in_dir, out_dir], create=False)
    excludes = list(DEFAULT_EXCLUDES) + list(user_excludes)

    out, out_file = {}, {}     # quantised checkpoint
    twin = {}                  # bf16 twin (make-exact)
    shape_excluded = []
    n_quant = 0
    # The work list: (name, dtype, shape, raw bytes, file, fused expert tensor or None). Fused
    # expert tensors become their per-expert linears when every one of them is quantised (else
    # the fused tensor is copied; some but not all: refused, as spark-quantize does).
    work = []
    for name in sorted(ck.tensors):
        t = ck.tensors[name]
        fn = ck.file_of[name]
        linears = expert_linears(name, t.dtype, t.shape)
        kinds = {classify(n, "BF16", sh, fmt, excludes) for n, sh, _, _ in linears}
        if not linears or kinds <= {"copy"} or kinds == {"exclude-shape"}:
            if kinds == {"exclude-shape"}:
                experts = name.rsplit(".", 1)[0]
                projections = ("gate_proj", "up_proj") if name.endswith("gate_up_proj") \
                    else ("down_proj",)
                shape_excluded += [f"{experts}.*.{p}" for p in projections]
            work.append((name, t.dtype, t.shape, t.read(), fn, None))
            continue
        if kinds != {"quantize"}:
            n_quantized = sum(classify(n, "BF16", sh, fmt, excludes) == "quantize"
                              for n, sh, _, _ in linears)
            raise QuantError(f"--exclude keeps some of the linears of {name} in bf16 but not all "
                             f"({n_quantized} of {len(linears)} would be quantized): Spark runs "
                             f"every expert's projection in one format; exclude all of them "
                             f"(e.g. \"*experts*\") or none")
        raw = t.read()
        for n, sh, off, size in linears:
            work.append((n, "BF16", sh, raw[off:off + size], fn, name))
    work.sort(key=lambda w: w[0])
    fused_twin = {}  # fused expert tensor -> {linear name: dequantised bf16 bytes}
    for name, dtype, shape, raw, fn, fused in work:
        t = TensorRef(name, dtype, shape, "", 0, len(raw))
        kind = classify(name, t.dtype, t.shape, fmt, excludes)
        if kind != "quantize":
            if kind == "exclude-shape":
                shape_excluded.append(name[: -len(".weight")])
            out[name] = (t.dtype, t.shape, raw)
            out_file[name] = fn
            twin[name] = (t.dtype, t.shape, raw)
            continue
        module = name[: -len(".weight")]
        rows, cols = t.shape
        w = bf16_to_f32_list(raw)
        if not all(map(math.isfinite, w)):
            bad = next(i for i, v in enumerate(w) if not math.isfinite(v))
            raise QuantError(f"tensor {name}: element {bad} is {w[bad]} (cannot quantize)")
        amax = max(map(abs, w), default=0.0)
        new = {}
        if fmt == "nvfp4":
            s2 = pow2_scale(amax, NVFP4_SCALE_DIV) if exact else None
            try:
                packed, scales, s2 = nvfp4_quantize(w, rows, cols, s2)
            except QuantError as e:
                raise QuantError(f"tensor {name}: {e}") from None
            new[name] = ("U8", [rows, cols // 2], packed)
            new[module + ".weight_scale"] = ("F8_E4M3", [rows, cols // NVFP4_BLOCK], scales)
            new[module + ".weight_scale_2"] = ("F32", [], _F32.pack(s2))
            if exact:
                deq = nvfp4_dequantize(packed, scales, s2, rows, cols)
        else:
            s = pow2_scale(amax, E4M3_MAX) if exact else None
            q, s = fp8_quantize(w, s)
            new[name] = ("F8_E4M3", [rows, cols], q)
            new[module + ".weight_scale"] = ("F32", [], _F32.pack(s))
            if exact:
                deq = fp8_dequantize(q, [s], rows)
        for n2 in new:
            if n2 != name and n2 in ck.tensors:
                raise QuantError(f"tensor {n2} already exists in the input (quantized checkpoint?)")
            out[n2] = new[n2]
            out_file[n2] = fn
        if exact:
            tiny = [v for v in deq if v != 0.0 and abs(v) < 2.0 ** -126]
            if tiny:
                raise QuantError(f"tensor {name}: dequantized value {tiny[0]!r} is below bf16's "
                                 f"normal range")
            twin_bytes = f32_list_to_bf16_exact(deq, f"tensor {name}")
            if fused is None:
                twin[name] = ("BF16", t.shape, twin_bytes)
            else:  # the twin keeps the fused layout (a bf16 checkpoint transformers reads)
                fused_twin.setdefault(fused, {})[name] = twin_bytes
        n_quant += 1
    for fused, parts in fused_twin.items():
        t = ck.tensors[fused]
        order = [n for n, _, _, _ in expert_linears(fused, t.dtype, t.shape)]
        twin[fused] = ("BF16", t.shape, b"".join(parts[n] for n in order))

    excludes += sorted(shape_excluded)
    qc, hq = quant_configs(fmt, excludes)
    cfg_q = dict(cfg)
    cfg_q["quantization_config"] = qc
    prepare_out_dir(out_dir, [in_dir])
    if twin_dir is not None:
        prepare_out_dir(twin_dir, [in_dir, out_dir])
    total = write_checkpoint(ck, out_dir, out, out_file)
    copy_side_files(ck, out_dir, skip=("config.json",))
    write_json(os.path.join(out_dir, "config.json"), cfg_q)
    write_json(os.path.join(out_dir, "hf_quant_config.json"), hq)
    if twin_dir is not None:
        write_checkpoint(ck, twin_dir, twin, dict(ck.file_of))
        copy_side_files(ck, twin_dir)  # config.json unchanged
    summary = {"quantized": n_quant, "tensors_in": len(ck.tensors), "tensors_out": len(out),
               "bytes_out": total, "shape_excluded": sorted(shape_excluded)}
    if verbose:
        what = "make-exact" if exact else "quantize"
        print(f"{what} {FORMATS[fmt]}: {n_quant} linears quantized ({len(ck.tensors)} tensors in), "
              f"{len(out)} tensors / {total} bytes written to {out_dir}"
              + (f"; bf16 twin in {twin_dir}" if twin_dir else "")
              + (f"; kept bf16 (in % 16 != 0): {', '.join(sorted(shape_excluded))}"
                 if shape_excluded else ""))
    return summary


# ----------------------------------------------------------------------------------------------
# dequantize


def _need(ck, name, owner):
    t = ck.tensors.get(name)
    if t is None:
        raise QuantError(f"tensor {owner}: missing scale tensor {name}")
    return t


def _check_dtype(t, dtype):
    if t.dtype != dtype:
        raise QuantError(f"tensor {t.name}: dtype {t.dtype}, expected {dtype}")


def _finite_f32(t):
    vals = bits_to_f32_list(t.read())
    for i, v in enumerate(vals):
        if not math.isfinite(v):
            raise QuantError(f"tensor {t.name}: scale element {i} is {v} (NaN/Inf scale)")
    return vals


def plan_dequantize(ck: Checkpoint):
    """Finds the quantised modules and validates their tensors (dtype, shape, presence, NaN/Inf
    scales) before anything is written. Returns {weight name: (kind, module)} and the consumed
    scale tensor names."""
    modules, consumed = {}, set()
    for name in sorted(ck.tensors):
        t = ck.tensors[name]
        if not name.endswith(".weight") or t.dtype not in ("U8", "F8_E4M3"):
            continue
        module = name[: -len(".weight")]
        ws = _need(ck, module + ".weight_scale", name)
        if t.dtype == "U8":  # NVFP4: packed [out, in/2], F8_E4M3 scales [out, in/16], F32 s2
            ws2 = _need(ck, module + ".weight_scale_2", name)
            _check_dtype(ws, "F8_E4M3")
            _check_dtype(ws2, "F32")
            if len(t.shape) != 2:
                raise QuantError(f"tensor {name}: packed NVFP4 weight must be 2-D, shape {t.shape}")
            rows, half = t.shape
            expect = [rows, half * 2 // NVFP4_BLOCK]
            if (half * 2) % NVFP4_BLOCK or ws.shape != expect:
                raise QuantError(f"tensor {name}: packed shape {t.shape} disagrees with "
                                 f"{ws.name} shape {ws.shape} (expected {expect})")
            if ws2.shape not in ([], [1]):
                raise QuantError(f"tensor {ws2.name}: shape {ws2.shape}, expected [] or [1]")
            _finite_f32(ws2)
            bad = [i for i, c in enumerate(ws.read()) if c in (0x7F, 0xFF)]
            if bad:
                raise QuantError(f"tensor {ws.name}: element {bad[0]} is NaN (NaN/Inf scale)")
            modules[name] = ("nvfp4", module)
            consumed.update((ws.name, ws2.name))
        else:  # FP8: F8_E4M3 weight, F32 scale per tensor ([] / [1]) or per channel ([out] / [out, 1])
            _check_dtype(ws, "F32")
            rows = t.shape[0] if t.shape else 1
            if ws.shape not in ([], [1]) and not (len(t.shape) == 2 and ws.shape in ([rows], [rows, 1])):
                raise QuantError(f"tensor {name}: shape {t.shape} disagrees with {ws.name} shape "
                                 f"{ws.shape} (expected [], [1], [{rows}] or [{rows}, 1])")
            _finite_f32(ws)
            bad = [i for i, c in enumerate(t.read()) if c in (0x7F, 0xFF)]
            if bad:
                raise QuantError(f"tensor {name}: element {bad[0]} is an e4m3 NaN")
            modules[name] = ("fp8", module)
            consumed.add(ws.name)
        if module + ".input_scale" in ck.tensors:
            consumed.add(module + ".input_scale")  # activation scale: meaningless unquantised
    for name in sorted(ck.tensors):
        if name.endswith((".weight_scale", ".weight_scale_2")) and name not in consumed:
            raise QuantError(f"tensor {name}: scale tensor without a quantized weight")
    return modules, consumed


_EXPERT_LINEAR = re.compile(r"^(.*\.experts)\.(\d+)\.(gate|up|down)_proj\.weight$")


def fuse_experts(out: dict, out_file: dict):
    """Per-expert linears (`<experts>.<e>.{gate,up,down}_proj.weight`, ModelOpt's layout) back into
    the fused tensors a bf16 Gemma 4 checkpoint has (`<experts>.gate_up_proj` [E, 2I, H], gate rows
    first, and `<experts>.down_proj` [E, H, I]), which transformers loads. In place."""
    groups = {}
    for name in list(out):
        m = _EXPERT_LINEAR.match(name)
        if m:
            groups.setdefault((m.group(1), m.group(3) == "down"), {})[(int(m.group(2)), m.group(3))] = name
    for (experts, down), linears in sorted(groups.items()):
        count = 1 + max(e for e, _ in linears)
        projections = ("down",) if down else ("gate", "up")
        names = []
        for e in range(count):
            for p in projections:
                if (e, p) not in linears:
                    raise QuantError(f"{experts}: expert {e} has no {p}_proj.weight")
                names.append(linears[(e, p)])
        dtypes = {out[n][0] for n in names}
        shapes = {tuple(out[n][1]) for n in names}
        if len(dtypes) != 1 or len(shapes) != 1:
            raise QuantError(f"{experts}: the experts' {'/'.join(projections)} projections differ "
                             f"in dtype or shape ({sorted(dtypes)}, {sorted(shapes)})")
        rows, cols = next(iter(shapes))
        fused = f"{experts}.{'down_proj' if down else 'gate_up_proj'}"
        out[fused] = (next(iter(dtypes)), [count, rows * len(projections), cols],
                      b"".join(out[n][2] for n in names))
        out_file[fused] = out_file[names[0]]
        for n in names:
            del out[n]
            del out_file[n]


def dequantize_checkpoint(in_dir, out_dir, verbose=True):
    ck = Checkpoint(in_dir)
    modules, consumed = plan_dequantize(ck)
    prepare_out_dir(out_dir, [in_dir])
    out, out_file = {}, {}
    for name in sorted(ck.tensors):
        if name in consumed:
            continue
        t = ck.tensors[name]
        out_file[name] = ck.file_of[name]
        if name not in modules:
            out[name] = (t.dtype, t.shape, t.read())
            continue
        kind, module = modules[name]
        if kind == "nvfp4":
            rows, cols = t.shape[0], t.shape[1] * 2
            s2 = bits_to_f32_list(ck.tensors[module + ".weight_scale_2"].read())[0]
            vals = nvfp4_dequantize(t.read(), ck.tensors[module + ".weight_scale"].read(), s2, rows,
                                    cols)
            out[name] = ("F32", [rows, cols], f32_list_to_bytes(vals))
        else:
            rows = t.shape[0] if t.shape else 1
            scales = bits_to_f32_list(ck.tensors[module + ".weight_scale"].read())
            vals = fp8_dequantize(t.read(), scales, rows)
            out[name] = ("F32", list(t.shape), f32_list_to_bytes(vals))
    fuse_experts(out, out_file)
    total = write_checkpoint(ck, out_dir, out, out_file)
    copy_side_files(ck, out_dir, skip=("config.json", "hf_quant_config.json"))
    cfg = ck.config()
    if cfg is not None:
        cfg = dict(cfg)
        cfg.pop("quantization_config", None)
        if isinstance(cfg.get("text_config"), dict):
            cfg["text_config"] = dict(cfg["text_config"])
            cfg["text_config"].pop("quantization_config", None)
        write_json(os.path.join(out_dir, "config.json"), cfg)
    if verbose:
        nv = sum(1 for k, _ in modules.values() if k == "nvfp4")
        print(f"dequantize: {nv} NVFP4 + {len(modules) - nv} FP8 weights -> F32, "
              f"{len(out)} tensors / {total} bytes written to {out_dir}")
    return modules


# ----------------------------------------------------------------------------------------------
# compare


def _element(dtype, raw, i):
    size = DTYPE_SIZE[dtype]
    b = raw[i * size:(i + 1) * size]
    if dtype == "BF16":
        return f"{bf16_to_f32_list(b)[0]!r} (0x{int.from_bytes(b, 'little'):04x})"
    if dtype == "F32":
        return f"{bits_to_f32_list(b)[0]!r} (0x{int.from_bytes(b, 'little'):08x})"
    if dtype == "F8_E4M3":
        return f"0x{b[0]:02x} = {E4M3_VALUES[b[0]]!r}"
    if dtype == "U8":
        return (f"0x{b[0]:02x} (nibbles lo {E2M1_SIGNED[b[0] & 15]!r}, "
                f"hi {E2M1_SIGNED[b[0] >> 4]!r})")
    return "0x" + b.hex()


def _unravel(i, shape):
    idx = []
    for d in reversed(shape):
        idx.append(i % d if d else 0)
        i //= d if d else 1
    return list(reversed(idx))


def _json_file(path):
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def compare_checkpoints(dir_a, dir_b, max_report=20, out=sys.stdout) -> bool:
    """True iff both checkpoints hold the same tensors (name, dtype, shape, bytes; file layout aside)
    and equal quantization_config and hf_quant_config.json. Prints the first differences."""
    a, b = Checkpoint(dir_a), Checkpoint(dir_b)
    diffs = []  # the configs first: a config difference usually explains the tensor ones
    ca, cb = a.config() or {}, b.config() or {}
    qa, qb = ca.get("quantization_config"), cb.get("quantization_config")
    if qa != qb:
        diffs.append(f"config.json quantization_config: {json.dumps(qa)} vs {json.dumps(qb)}")
    ha = _json_file(os.path.join(dir_a, "hf_quant_config.json"))
    hb = _json_file(os.path.join(dir_b, "hf_quant_config.json"))
    if ha != hb:
        diffs.append(f"hf_quant_config.json: {json.dumps(ha)} vs {json.dumps(hb)}")
    for n in sorted(set(a.tensors) - set(b.tensors)):
        diffs.append(f"tensor {n}: only in {dir_a}")
    for n in sorted(set(b.tensors) - set(a.tensors)):
        diffs.append(f"tensor {n}: only in {dir_b}")
    nbytes = 0
    for n in sorted(set(a.tensors) & set(b.tensors)):
        ta, tb = a.tensors[n], b.tensors[n]
        if ta.dtype != tb.dtype or ta.shape != tb.shape:
            diffs.append(f"tensor {n}: {ta.dtype} {ta.shape} vs {tb.dtype} {tb.shape}")
            continue
        ra, rb = ta.read(), tb.read()
        nbytes += len(ra)
        if ra != rb:
            size = DTYPE_SIZE[ta.dtype]
            first = next(i for i in range(len(ra)) if ra[i] != rb[i]) // size
            count = sum(1 for i in range(len(ra) // size)
                        if ra[i * size:(i + 1) * size] != rb[i * size:(i + 1) * size])
            diffs.append(f"tensor {n} ({ta.dtype} {ta.shape}): {count} elements differ; first at "
                         f"element {first} {_unravel(first, ta.shape)}: "
                         f"{_element(ta.dtype, ra, first)} vs {_element(ta.dtype, rb, first)}")
    rest_a = {k: v for k, v in ca.items() if k != "quantization_config"}
    rest_b = {k: v for k, v in cb.items() if k != "quantization_config"}
    if rest_a != rest_b:  # not part of the check, but worth knowing
        keys = sorted(k for k in set(rest_a) | set(rest_b) if rest_a.get(k) != rest_b.get(k))
        print(f"note: config.json differs outside quantization_config in: {', '.join(keys)}",
              file=out)
    if diffs:
        for d in diffs[:max_report]:
            print("DIFF " + d, file=out)
        if len(diffs) > max_report:
            print(f"... and {len(diffs) - max_report} more differences", file=out)
        print(f"compare: {len(diffs)} difference(s) between {dir_a} and {dir_b}", file=out)
        return False
    print(f"compare: {len(a.tensors)} tensors ({nbytes} bytes), quantization_config and "
          f"hf_quant_config.json identical", file=out)
    return True


# ----------------------------------------------------------------------------------------------
# CLI


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("quantize", help="expected output of spark-quantize")
    q.add_argument("in_dir")
    q.add_argument("out_dir")
    q.add_argument("--format", required=True, choices=sorted(FORMATS))
    q.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                   help="fnmatch pattern on module names (repeatable), appended to the defaults")
    c = sub.add_parser("compare", help="same tensors and quantization configs (exit 1 if not)")
    c.add_argument("dir_a")
    c.add_argument("dir_b")
    d = sub.add_parser("dequantize", help="ModelOpt NVFP4/FP8 checkpoint -> F32 weights")
    d.add_argument("in_dir")
    d.add_argument("out_dir")
    m = sub.add_parser("make-exact", help="quantized checkpoint with power-of-two per-tensor scales "
                                          "+ its exactly equal bf16 twin")
    m.add_argument("in_dir")
    m.add_argument("out_quant_dir")
    m.add_argument("out_twin_dir")
    m.add_argument("--format", required=True, choices=sorted(FORMATS))
    args = p.parse_args(argv)
    t0 = time.time()
    try:
        if args.cmd == "quantize":
            quantize_checkpoint(args.in_dir, args.out_dir, args.format, args.exclude)
        elif args.cmd == "make-exact":
            quantize_checkpoint(args.in_dir, args.out_quant_dir, args.format, exact=True,
                                twin_dir=args.out_twin_dir)
        elif args.cmd == "dequantize":
            dequantize_checkpoint(args.in_dir, args.out_dir)
        else:
            return 0 if compare_checkpoints(args.dir_a, args.dir_b) else 1
    except QuantError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"({time.time() - t0:.2f} s)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # e.g. `compare ... | head`
        os._exit(1)
