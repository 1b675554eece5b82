#!/usr/bin/env python3
"""Writes one image's processor output as spark-run --image reads it (a safetensors file of
`pixel_values` F32 [T, 768] and `image_position_ids` I64 [T, 2]) from
test/data/images/vision_processed_*.safetensors, which holds both backends' pixels as bytes.
Pure Python (no numpy), so it runs in CI.

  image_patches.py PROCESSED.safetensors {torchvision|pil} {a|b} OUT.safetensors

The pixel values are what each backend computes from the bytes: torchvision
float32(b) * float32(1/255), PIL float32(b) / float32(255) (golden_info.json pixel_formulas).
"""
import struct
import sys

from safetensors_io import read_raw, write_raw


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def main():
    processed, backend, image, out = sys.argv[1:5]
    tensors = read_raw(processed)
    _, shape, pixel_bytes = tensors[f"{backend}_pixel_bytes_{image}"]
    _, pshape, positions = tensors[f"{backend}_position_ids_{image}"]
    inv = f32(1.0 / 255.0)
    table = [f32(f32(b) * inv) if backend == "torchvision" else f32(f32(b) / f32(255.0))
             for b in range(256)]
    values = struct.pack(f"<{len(pixel_bytes)}f", *(table[b] for b in pixel_bytes))
    write_raw(out, {"pixel_values": ("F32", shape, values),
                    "image_position_ids": ("I64", pshape, positions)})


if __name__ == "__main__":
    sys.exit(main())
