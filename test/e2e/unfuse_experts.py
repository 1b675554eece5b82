#!/usr/bin/env python3
"""Rewrites a bf16 Gemma 4 MoE checkpoint with its fused experts split one linear per expert, in
bf16 (the layout ModelOpt uses for a model whose experts it leaves unquantized): every
`<layer>.experts.gate_up_proj` [E, 2I, H] becomes `<layer>.experts.<e>.gate_proj.weight` and
`up_proj.weight` [I, H], every `<layer>.experts.down_proj` [E, H, I] `<layer>.experts.<e>.down_proj.weight`
[H, I]; everything else (and every other file) is copied. Pure Python, for the tests.

  unfuse_experts.py IN_DIR OUT_DIR
"""
import os
import shutil
import sys

from safetensors_io import read_raw, write_raw


def main():
    src, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        path = os.path.join(src, name)
        if not os.path.isfile(path):
            continue
        if not name.endswith(".safetensors") or name.startswith("golden") or name.startswith("hidden") \
                or name.startswith("soft"):
            if not name.endswith(".safetensors"):
                shutil.copy(path, os.path.join(dst, name))
            continue
        out = {}
        for tensor, (dtype, shape, raw) in read_raw(path).items():
            gate_up = tensor.endswith(".experts.gate_up_proj")
            if dtype != "BF16" or len(shape) != 3 or not (gate_up or tensor.endswith(".experts.down_proj")):
                out[tensor] = (dtype, shape, raw)
                continue
            experts = tensor.rsplit(".", 1)[0]
            count, rows, cols = shape[0], shape[1] // 2 if gate_up else shape[1], shape[2]
            size = rows * cols * 2
            projections = ("gate_proj", "up_proj") if gate_up else ("down_proj",)
            for e in range(count):
                for p, proj in enumerate(projections):
                    at = (e * len(projections) + p) * size
                    out[f"{experts}.{e}.{proj}.weight"] = ("BF16", [rows, cols], raw[at:at + size])
        write_raw(os.path.join(dst, name), out, sort=True)


if __name__ == "__main__":
    main()
