#!/usr/bin/env python3
"""Damages the execution plan inside a cubin from spark-compile, for the loader's error tests.

  corrupt_plan.py IN.cubin OUT.cubin checksum|magic|version|flags|arena|kernel

Finds the plan header (magic "SPKPLAN\\0", docs/plan-format.md) and changes one thing, keeping the
file's size and ELF structure: `checksum` flips a bit of the first JSON byte (the header's FNV-1a
checksum no longer matches), `magic` overwrites the magic's first byte, `version` sets the version
to the file's own plus one (newer than this runtime reads), `flags` sets the flags to 1, `arena` sets the JSON's arena_bytes to 1 (padded with spaces
to the same length) and updates the checksum, so that only the plan's own checks can reject it;
`kernel` points the first linear step at another linear step's entry whose name has the same
length (an entry compiled for other sizes, e.g. a 128-output projection at the 512-output LM
head's entry) and updates the checksum.
Truncating the section changes its size: use `llvm-objcopy --dump-section` / `--update-section`.
"""
import re
import struct
import sys

MAGIC = b"SPKPLAN\0"

# FNV-1a 64's offset basis is 14695981039346656037; plan_format.h's Fnv1a64 starts from
# 1469598103934665603 (a digit short). Use whichever reproduces the checksum found in the file.
BASES = (14695981039346656037, 1469598103934665603)


def fnv1a64(data, basis):
    h = basis
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in ("checksum", "magic", "version", "flags", "arena",
                                                 "kernel"):
        sys.exit(__doc__)
    src, dst, what = sys.argv[1:]
    data = bytearray(open(src, "rb").read())
    at = data.find(MAGIC)
    if at < 0 or data.find(MAGIC, at + 1) >= 0:
        sys.exit(f"{src}: expected exactly one plan header ({MAGIC!r})")
    if what == "checksum":
        data[at + 32] ^= 0x01
    elif what == "magic":
        data[at] = ord("X")
    elif what == "version":
        (version,) = struct.unpack("<I", data[at + 8:at + 12])
        data[at + 8:at + 12] = struct.pack("<I", version + 1)
    elif what == "flags":
        data[at + 12:at + 16] = struct.pack("<I", 1)
    else:
        (size,) = struct.unpack("<Q", data[at + 16:at + 24])
        begin = at + 32
        json = bytes(data[begin:begin + size])
        (checksum,) = struct.unpack("<Q", data[at + 24:at + 32])
        basis = [b for b in BASES if fnv1a64(json, b) == checksum]
        if not basis:
            sys.exit(f"{src}: the plan checksum matches no known FNV-1a variant")
        if what == "arena":
            key = b'"arena_bytes":'
            k = json.find(key) + len(key)
            end = k
            while json[end:end + 1].isdigit():
                end += 1
            if k < len(key) or end == k:
                sys.exit(f"{src}: no arena_bytes number in the plan")
            json = json[:k] + b"1".rjust(end - k) + json[end:]
        else:
            names = re.findall(rb'"kernel":"(spark_linear__[a-z0-9_]+)"', json)
            def out_features(name):  # spark_linear__i<out>_i<in>
                return int(re.match(rb"spark_linear__i([0-9]+)_", name).group(1))
            a = names[0] if names else b""
            others = [b for b in names if b != a and len(b) == len(a)]
            if not others:
                sys.exit(f"{src}: no two linear entries with names of one length")
            b = max(others, key=out_features)  # the widest: the most out of bounds
            json = json.replace(b'"kernel":"' + a + b'"', b'"kernel":"' + b + b'"', 1)
        data[begin:begin + size] = json
        data[at + 24:at + 32] = struct.pack("<Q", fnv1a64(json, basis[0]))
    open(dst, "wb").write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
