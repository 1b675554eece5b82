#!/usr/bin/env python3
"""Splits a one-file checkpoint into two shards with an index (model-0000N-of-00002.safetensors):
tensors of layers 0-2 and the rest in the first, layers 3 and up in the second. Pure Python.

  shard.py IN_DIR OUT_DIR
"""
import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "e2e"))
from safetensors_io import read_raw, write_raw  # noqa: E402


def main():
    src, dst = sys.argv[1], sys.argv[2]
    tensors = read_raw(os.path.join(src, "model.safetensors"))
    shards = [{}, {}]
    for name, tensor in tensors.items():
        m = re.search(r"\.layers\.(\d+)\.", name)
        shards[1 if m and int(m.group(1)) >= 3 else 0][name] = tensor
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        file = f"model-{i + 1:05d}-of-00002.safetensors"
        total += write_raw(os.path.join(dst, file), shard, sort=True)
        for name in shard:
            weight_map[name] = file
    with open(os.path.join(dst, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    for file in ("config.json", "generation_config.json"):
        shutil.copy(os.path.join(src, file), os.path.join(dst, file))
    return 0


if __name__ == "__main__":
    sys.exit(main())
