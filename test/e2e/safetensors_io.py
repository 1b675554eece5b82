"""Reads and writes safetensors files in pure Python (no numpy), for the test helpers."""
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


def write_raw(path, tensors, sort=False):
    """Writes {name: (dtype, shape, bytes)} back to back (in the dict's order, or sorted by name),
    the header padded to 8 bytes; returns the data's size."""
    header, blobs, offset = {}, [], 0
    for name in (sorted(tensors) if sort else tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return offset
