#!/usr/bin/env python3
"""Measures the two ceilings of the current CUDA GPU through PyTorch: memory bandwidth and bf16 GEMM rate.

Method (/work/.library/device/METHOD.md): random (never zero) data, warm-up, CUDA events around each
repetition, median of >= 20 repetitions, and the whole set measured in two rounds so that the noise is
visible next to the figures. Each result is checked (copy: dst == src; sum: finite; GEMM: relative
error of 256 output rows against a float64 product) before it is reported.

  * copy:  dst.copy_(src) of a --copy-gib buffer (bf16); counted as bytes read + bytes written
           (2 x size) per copy; GB/s = 1e9 bytes/s.
  * read:  src.sum() over the same buffer (bf16 in, fp32 accumulation, one value out); counted as
           bytes read (size) per sum.
  * gemm:  torch.matmul(a[M,K], w[N,K].T, out=c[M,N]) in bf16 (the nn.Linear layout); 2*M*N*K FLOP.
           Default shapes: 8192x8192x8192, and the 31B prefill-like 4096 tokens x hidden 5376 ->
           MLP 21504 (gate/up) and 21504 -> 5376 (down). Every operand is larger than the L2, so one
           input set is reused.

Usage:
    python3 bench/ceilings.py --json /tmp/ceilings.json
    python3 bench/ceilings.py --copy-gib 8 --reps 50 --gemm 8192x8192x8192,4096x2816x2112 --json out.json

Prints one table per round, then a summary (best of the rounds and the spread between them).
JSON keys: tool, argv, command, environment{python,torch,cuda,gpu{name,capability,sm_count,
total_memory_bytes}}, settings{copy_bytes,warmup,reps,rounds,gemm_shapes,
allow_bf16_reduced_precision_reduction}, rounds[{copy,read,gemm[]}], summary.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import statistics
import sys
from pathlib import Path

GiB = 2**30


def parse_shapes(text: str):
    """'MxKxN,...' -> [(M, K, N), ...]"""
    shapes = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        m, k, n = (int(v) for v in item.lower().split("x"))
        shapes.append((m, k, n))
    return shapes


def event_times_ms(torch, fn, warmup: int, reps: int):
    """Per-repetition device times (ms) of fn(), measured with CUDA events after `warmup` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    marks = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for start, end in marks:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in marks]


def summarize(times_ms, nbytes=None, flops=None):
    med = statistics.median(times_ms)
    out = {"ms_median": med, "ms_min": min(times_ms), "ms_max": max(times_ms), "reps": len(times_ms)}
    if nbytes is not None:
        out["bytes_per_rep"] = nbytes
        out["GBps"] = nbytes / (med * 1e-3) / 1e9
    if flops is not None:
        out["flop_per_rep"] = flops
        out["TFLOPs"] = flops / (med * 1e-3) / 1e12
    return out


def measure_round(torch, args, src, dst, gemm_inputs):
    size = src.numel() * src.element_size()
    result = {}

    copy_times = event_times_ms(torch, lambda: dst.copy_(src), args.warmup, args.reps)
    if not torch.equal(dst, src):
        raise RuntimeError("copy check failed: dst != src")
    result["copy"] = summarize(copy_times, nbytes=2 * size)

    sums = []
    read_times = event_times_ms(torch, lambda: sums.append(src.sum()), args.warmup, args.reps)
    if not bool(torch.isfinite(torch.stack(sums[-args.reps:]).float()).all()):
        raise RuntimeError("read check failed: non-finite sum")
    result["read"] = summarize(read_times, nbytes=size)

    result["gemm"] = []
    for (m, k, n), (a, w, c) in gemm_inputs.items():
        c.fill_(float("nan"))  # poison: every element must be written
        times = event_times_ms(torch, lambda a=a, w=w, c=c: torch.matmul(a, w.t(), out=c), args.warmup, args.reps)
        rows = min(256, m)
        ref = a[:rows].double() @ w.double().t()
        got = c[:rows].double()
        rel_err = (torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref)).item()
        if not bool(torch.isfinite(c).all()) or not rel_err < 2e-2:
            raise RuntimeError(f"gemm {m}x{k}x{n} check failed: rel_err {rel_err:.3g} (or NaN/unwritten output)")
        entry = {"m": m, "k": k, "n": n, "rel_err_256_rows": rel_err}
        entry.update(summarize(times, flops=2 * m * n * k))
        result["gemm"].append(entry)
    return result


def print_round(index, res):
    print(f"\nround {index}")
    print(f"  {'what':<28} {'median ms':>10} {'min ms':>9} {'max ms':>9} {'rate':>16}")
    for key, label in (("copy", "copy (read+write bytes)"), ("read", "sum (read bytes)")):
        r = res[key]
        print(f"  {label:<28} {r['ms_median']:10.3f} {r['ms_min']:9.3f} {r['ms_max']:9.3f} "
              f"{r['GBps']:11.1f} GB/s")
    for g in res["gemm"]:
        label = f"gemm {g['m']}x{g['k']}x{g['n']}"
        print(f"  {label:<28} {g['ms_median']:10.3f} {g['ms_min']:9.3f} {g['ms_max']:9.3f} "
              f"{g['TFLOPs']:8.1f} TFLOP/s")


def build_summary(rounds):
    def entry(values, unit):
        best = max(values)
        spread = (best - min(values)) / statistics.mean(values) * 100 if len(values) > 1 else 0.0
        return {"per_round": values, "best": best, "spread_pct": spread, "unit": unit}

    summary = {
        "copy_GBps": entry([r["copy"]["GBps"] for r in rounds], "GB/s"),
        "read_GBps": entry([r["read"]["GBps"] for r in rounds], "GB/s"),
        "gemm_TFLOPs": {},
    }
    for i, g in enumerate(rounds[0]["gemm"]):
        key = f"{g['m']}x{g['k']}x{g['n']}"
        summary["gemm_TFLOPs"][key] = entry([r["gemm"][i]["TFLOPs"] for r in rounds], "TFLOP/s")
    return summary


def print_summary(summary):
    print("\nsummary (best of rounds; spread = (max - min) / mean)")
    rows = [("copy (read+write)", summary["copy_GBps"]), ("sum (read)", summary["read_GBps"])]
    rows += [(f"gemm {k}", v) for k, v in summary["gemm_TFLOPs"].items()]
    for label, e in rows:
        per_round = ", ".join(f"{v:.1f}" for v in e["per_round"])
        print(f"  {label:<28} {e['best']:9.1f} {e['unit']:<8} spread {e['spread_pct']:4.1f}%  rounds [{per_round}]")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copy-gib", type=float, default=4.0, help="buffer size for copy/sum (GiB, default 4)")
    ap.add_argument("--gemm", default="8192x8192x8192,4096x5376x21504,4096x21504x5376",
                    help="comma list of MxKxN (c[M,N] = a[M,K] @ w[N,K].T)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20, help="timed repetitions per figure (>= 20)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="write all figures here")
    args = ap.parse_args(argv)
    if args.reps < 20:
        ap.error("--reps must be >= 20")

    import torch

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device")
    torch.manual_seed(args.seed)
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": {"name": props.name, "capability": f"{props.major}.{props.minor}",
                "sm_count": props.multi_processor_count, "total_memory_bytes": props.total_memory},
    }
    shapes = parse_shapes(args.gemm)
    numel = int(args.copy_gib * GiB) // 2
    settings = {
        "copy_bytes": numel * 2, "warmup": args.warmup, "reps": args.reps, "rounds": args.rounds,
        "gemm_shapes": [f"{m}x{k}x{n}" for m, k, n in shapes],
        "allow_bf16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    }
    print(f"{props.name} (sm_{props.major}{props.minor}, {props.multi_processor_count} SMs, "
          f"{props.total_memory / GiB:.1f} GiB), torch {torch.__version__}, CUDA {torch.version.cuda}")
    print(f"copy/sum buffer {numel * 2 / GiB:.2f} GiB bf16; {args.reps} reps after {args.warmup} warm-up; "
          f"{args.rounds} rounds")

    src = torch.randn(numel, dtype=torch.bfloat16, device=dev)
    dst = torch.empty_like(src)
    gemm_inputs = {}
    for m, k, n in shapes:
        a = torch.randn(m, k, dtype=torch.bfloat16, device=dev)
        w = torch.randn(n, k, dtype=torch.bfloat16, device=dev).div_(k**0.5)
        gemm_inputs[(m, k, n)] = (a, w, torch.empty(m, n, dtype=torch.bfloat16, device=dev))

    rounds = []
    for i in range(args.rounds):
        rounds.append(measure_round(torch, args, src, dst, gemm_inputs))
        print_round(i + 1, rounds[-1])
    summary = build_summary(rounds)
    print_summary(summary)

    if args.json:
        record = {"tool": "bench/ceilings.py", "argv": sys.argv, "command": shlex.join([sys.executable] + sys.argv),
                  "environment": env, "settings": settings, "rounds": rounds, "summary": summary}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=2) + "\n")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
