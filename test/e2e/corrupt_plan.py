#!/usr/bin/env python3
"""Damages the execution plan inside a cubin from spark-compile, for the loader's error tests.

  corrupt_plan.py IN.cubin OUT.cubin checksum|magic|version|flags|arena|kernel

Finds the plan header (magic "SPKPLAN\\0", docs/plan-format.md) and changes one thing, keeping the
file's size and ELF structure: `checksum` flips a bit of the plan buffer's first byte (the
header's FNV-1a checksum no longer matches), `magic` overwrites the magic's first byte, `version`
sets the version to the file's own plus one (newer than this runtime reads), `flags` sets the
flags to 1, `arena` sets the plan's arena_bytes to 1 in place (the root table's field, found
through its vtable: runtime/schema/plan.fbs) and updates the checksum, so that only the plan's
own checks can reject it; `kernel` points the narrowest linear step at the entry of the widest
linear whose name has the same length (an entry compiled for other sizes, e.g. a 64-output
projection at the 512-output LM head's entry) and updates the checksum.
Truncating the section changes its size: use `llvm-objcopy --dump-section` / `--update-section`.
"""
import re
import struct
import sys

MAGIC = b"SPKPLAN\0"
# The index of arena_bytes among the fields of table Plan (runtime/schema/plan.fbs).
ARENA_BYTES_FIELD = 2

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
        plan = bytes(data[begin:begin + size])
        (checksum,) = struct.unpack("<Q", data[at + 24:at + 32])
        basis = [b for b in BASES if fnv1a64(plan, b) == checksum]
        if not basis:
            sys.exit(f"{src}: the plan checksum matches no known FNV-1a variant")
        if what == "arena":
            plan = bytearray(plan)
            (root,) = struct.unpack_from("<I", plan, 0)
            (to_vtable,) = struct.unpack_from("<i", plan, root)
            vtable = root - to_vtable
            (vtable_size,) = struct.unpack_from("<H", plan, vtable)
            slot = 4 + 2 * ARENA_BYTES_FIELD
            (field,) = struct.unpack_from("<H", plan, vtable + slot) if slot < vtable_size else (0,)
            if field == 0:
                sys.exit(f"{src}: the plan buffer has no arena_bytes field")
            struct.pack_into("<Q", plan, root + field, 1)
            plan = bytes(plan)
        else:
            # FlatBuffers strings: a 32-bit length, the bytes, a NUL.
            names = [m for m in re.finditer(rb"spark_linear__[a-z0-9_]+", plan)
                     if struct.unpack_from("<I", plan, m.start() - 4)[0] == m.end() - m.start()]
            def out_features(name):  # spark_linear__i<out>_i<in>
                return int(re.match(rb"spark_linear__i([0-9]+)_", name).group(1))
            # The narrowest linear that has a wider one of the same name length, pointed at the
            # widest such: the most out of bounds.
            pairs = [(m, o) for m in names for o in names
                     if len(o.group(0)) == len(m.group(0)) and
                     out_features(o.group(0)) > out_features(m.group(0))]
            if not pairs:
                sys.exit(f"{src}: no two linear entries with names of one length")
            m = min((p[0] for p in pairs), key=lambda m: out_features(m.group(0)))
            b = max((p[1].group(0) for p in pairs if p[0] is m), key=out_features)
            start = m.start()
            plan = plan[:start] + b + plan[start + len(b):]
        data[begin:begin + size] = plan
        data[at + 24:at + 32] = struct.pack("<Q", fnv1a64(plan, basis[0]))
    open(dst, "wb").write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
