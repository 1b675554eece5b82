#!/usr/bin/env python3
"""Host-to-device copy bandwidth of the current CUDA GPU through PyTorch: the ceiling of a cold start
that copies the weights (bench/run_bench.sh cold-start).

A --gib buffer (uint8, random) copied to the device, from pinned (page-locked) memory and from
ordinary pageable memory; CUDA events around each copy, median of --reps after a warm-up; the
copy is checked (the device bytes equal the host's) before it is reported. GB/s = 1e9 bytes/s.

    python3 bench/h2d_bandwidth.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch


def measure(host: torch.Tensor, device: torch.Tensor, reps: int) -> float:
    device.copy_(host, non_blocking=True)  # warm-up
    torch.cuda.synchronize()
    if not torch.equal(device[:4096].cpu(), host[:4096]) or not torch.equal(device[-4096:].cpu(), host[-4096:]):
        raise SystemExit("h2d_bandwidth: the copied bytes differ from the host's")
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        device.copy_(host, non_blocking=True)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return host.numel() / statistics.median(times) / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    n = int(args.gib * 2**30)
    pageable = torch.randint(0, 256, (n,), dtype=torch.uint8)
    pinned = pageable.pin_memory()
    device = torch.empty(n, dtype=torch.uint8, device="cuda")
    result = {
        "gpu": torch.cuda.get_device_name(),
        "bytes": n,
        "reps": args.reps,
        "pinned_gb_per_s": measure(pinned, device, args.reps),
        "pageable_gb_per_s": measure(pageable, device, args.reps),
    }
    print(f"host to device, {n / 1e9:.2f} GB, median of {args.reps}: pinned {result['pinned_gb_per_s']:.1f} GB/s, "
          f"pageable {result['pageable_gb_per_s']:.1f} GB/s ({result['gpu']})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
