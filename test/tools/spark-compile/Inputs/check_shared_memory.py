"""Checks that every kernel entry of a cubin fits a per-block shared-memory limit (GB10, the DGX
Spark's GPU: 99 KB = 101,376 bytes per block) for shared-memory-limits.test: an entry's static
shared memory is its .nv.shared.<entry> section (llvm-readelf -S -W output on stdin) plus the
module's reserved .nv.shared.reserved.* bytes; its dynamic shared memory the largest
shared_bytes of the plan's steps that launch it (the plan's JSON, spark-run --dump-plan).

  check_shared_memory.py PLAN_JSON LIMIT_BYTES < readelf-output

Prints one line per entry over LIMIT_BYTES and a summary; exits 1 when an entry is over it or the
plan launches no entry at all."""
import json
import re
import sys

plan = json.load(open(sys.argv[1]))
limit = int(sys.argv[2])
dynamic = {}
for step in plan["steps"]:
    if step.get("kernel"):
        dynamic[step["kernel"]] = max(dynamic.get(step["kernel"], 0), step["shared_bytes"])

static, reserved = {}, 0
section = re.compile(r"\]\s+\.nv\.shared\.(\S+)\s+NOBITS\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s")
for line in sys.stdin:
    m = section.search(line)
    if not m:
        continue
    name, size = m.group(1), int(m.group(2), 16)
    if name.startswith("reserved."):
        reserved += size
    else:
        static[name] = size

over = []
largest = ("", -1)
for kernel in sorted(set(static) | set(dynamic)):
    total = static.get(kernel, 0) + reserved + dynamic.get(kernel, 0)
    if total > largest[1]:
        largest = (kernel, total)
    if total > limit:
        print(f"{kernel}: {total} bytes (static {static.get(kernel, 0)} + reserved {reserved} + "
              f"dynamic {dynamic.get(kernel, 0)}), over {limit}")
        over.append(kernel)
if not dynamic:
    print("no kernel entry in the plan")
    sys.exit(1)
print(f"{len(dynamic)} entries; largest {largest[0].split('__')[0]} {largest[1]} bytes; "
      f"{len(over)} over {limit}")
sys.exit(1 if over else 0)
