#!/usr/bin/env python3
"""Writes small safetensors files for the spark-run tests. Pure Python (no numpy), like
compare_logits.py.

  write_safetensors.py OUT [--copy SRC.safetensors] [--drop NAME]... [--tensor NAME:DTYPE:SHAPE[:VALUE]]...

--copy starts from every tensor of SRC (bytes unchanged); each --drop removes one; each --tensor
then adds a tensor, or replaces the one of that name, filled with VALUE (default 0; "nan" and
"inf" are floats too). DTYPE is F32, I64, I32, BF16, U8 or F8_E4M3 (VALUE the raw byte of the
last two, e.g. 127 for an e4m3 NaN); SHAPE is dimensions joined by 'x' ("2x7"; "0x64" for no
rows; "" for a scalar).

  write_safetensors.py %t.st --tensor embeddings:F32:2x7 --tensor positions:I64:2:3
  write_safetensors.py %t.st --copy model.safetensors --tensor model.norm.weight:BF16:65:1
"""
import argparse
import struct
import sys

from safetensors_io import read_raw as read_safetensors, write_raw

FORMATS = {"F32": ("<f", 4), "I64": ("<q", 8), "I32": ("<i", 4), "BF16": (None, 2),
           "U8": ("<B", 1), "F8_E4M3": ("<B", 1)}


def filled(dtype, shape, value):
    count = 1
    for d in shape:
        count *= d
    fmt, _ = FORMATS[dtype]
    if fmt is None:  # bf16: the high half of the f32 bit pattern
        one = struct.pack("<f", float(value))[2:]
    else:
        integer = dtype in ("I64", "I32", "U8", "F8_E4M3")
        one = struct.pack(fmt, int(value) if integer else float(value))
    return one * count


def parse_tensor(spec):
    parts = spec.split(":")
    if len(parts) not in (3, 4) or parts[1] not in FORMATS:
        sys.exit(f"bad --tensor {spec!r}: expected NAME:DTYPE:SHAPE[:VALUE], DTYPE one of "
                 f"{', '.join(FORMATS)}")
    name, dtype, shape_text = parts[:3]
    shape = [int(d) for d in shape_text.split("x")] if shape_text else []
    value = parts[3] if len(parts) == 4 else "0"
    return name, (dtype, shape, filled(dtype, shape, value))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--copy")
    ap.add_argument("--drop", action="append", default=[])
    ap.add_argument("--tensor", action="append", default=[])
    args = ap.parse_args()
    tensors = read_safetensors(args.copy) if args.copy else {}
    for name in args.drop:
        if tensors.pop(name, None) is None:
            sys.exit(f"--drop {name}: no such tensor")
    for spec in args.tensor:
        name, tensor = parse_tensor(spec)
        tensors[name] = tensor
    write_raw(args.out, tensors)
    return 0


if __name__ == "__main__":
    sys.exit(main())
