"""Reads safetensors files in pure Python (no numpy), for the test helpers beside it."""
import json
import struct


def read_raw(path):
    """Returns {name: (dtype, shape, bytes)} for every tensor of the file."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        tensors[name] = (info["dtype"], info["shape"], data[base + begin:base + end])
    return tensors
