#!/usr/bin/env python3
"""Checks the layout of safetensors files: every tensor's absolute offset is a multiple of its
element size, and of 16 when its byte size is a multiple of 16; every file's __metadata__ says
format "pt". Pure Python.

  check_alignment.py DIR...   (every *.safetensors file of each DIR)
"""
import json
import os
import struct
import sys

SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F16": 2, "BF16": 2, "I16": 2,
         "U16": 2, "F32": 4, "I32": 4, "U32": 4, "F64": 8, "I64": 8, "U64": 8}


def main():
    tensors = files = 0
    for d in sys.argv[1:]:
        for name in sorted(os.listdir(d)):
            if not name.endswith(".safetensors"):
                continue
            path = os.path.join(d, name)
            with open(path, "rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(n))
            files += 1
            meta = header.pop("__metadata__", None)
            if not meta or meta.get("format") != "pt":
                sys.exit(f"{path}: __metadata__ {meta!r}, expected format pt")
            for tensor, info in header.items():
                begin, end = info["data_offsets"]
                offset = 8 + n + begin
                element = SIZES[info["dtype"]]
                need = 16 if (end - begin) % 16 == 0 else element
                if offset % need:
                    sys.exit(f"{path}: {tensor} ({info['dtype']}, {end - begin} bytes) at offset "
                             f"{offset}, not a multiple of {need}")
                tensors += 1
    print(f"aligned: {tensors} tensors in {files} files, every one at a multiple of its element "
          "size (16 bytes for sizes that are multiples of 16); metadata format pt")


if __name__ == "__main__":
    main()
