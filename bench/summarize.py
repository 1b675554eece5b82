#!/usr/bin/env python3
"""Turns the output directory of bench/run_bench.sh (all stages) into the Markdown tables of
bench/results/: ceilings, Spark vs PyTorch (eager, torch.compile) for decode and prefill, Spark's
per-op profile, and memory (estimate against measured).

    python3 bench/summarize.py OUTDIR > bench/results/DATE-h200-benchmarks.md.part

Spark figures come from spark_<model>_<run>_r<round>.json (spark-run --json); when a JSON did not
come back from the device, from the lines of spark_<model>_stdout.txt (run_bench.sh's summary
lines). Useful FLOPs for prefill are PyTorch's count (2 x parameters read per token x tokens +
the LM head once, pytorch_<model>_eager.json "params"), applied to both engines.
"""
import glob
import json
import os
import re
import statistics
import sys

MODELS = {"26b-a4b": "26B-A4B", "31b": "31B"}
LINE = re.compile(r"^(spark_\S+): exit (\d+), .*peak (\d+) MiB; prefill: (\d+) tokens in ([0-9.]+) s "
                  r"\(([0-9.]+) tokens/s\) decode: (\d+) tokens in ([0-9.]+) s \(([0-9.]+) tokens/s\)")


def load(path):
    with open(path) as f:
        return json.load(f)


def spark_runs(out, model):
    """{run name: {"prefill_tps", "decode_tps", "peak_mib", "json"}} for one model."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(out, "spark_%s_*.json" % model))):
        name = os.path.basename(path)[:-5]
        try:
            data = load(path)
        except (OSError, ValueError):
            continue
        mem = os.path.join(out, name + ".mem")
        peak = max(int(x) for x in open(mem).read().split()) if os.path.exists(mem) else None
        t = data["timings"]
        runs[name] = {"prefill_tps": t["prefill_tokens_per_second"],
                      "decode_tps": t["decode_tokens_per_second"], "peak_mib": peak, "json": data}
    stdout = os.path.join(out, "spark_%s_stdout.txt" % model)
    if os.path.exists(stdout):
        for line in open(stdout):
            m = LINE.match(line.strip())
            if m and m.group(1) not in runs:
                runs[m.group(1)] = {"prefill_tps": float(m.group(6)), "decode_tps": float(m.group(9)),
                                    "peak_mib": int(m.group(3)), "json": None}
    return runs


def rounds(runs, model, kind, n, key):
    values = [runs[k][key] for k in sorted(runs)
              if re.fullmatch(r"spark_%s_%s%d_r\d" % (re.escape(model), kind, n), k)]
    return values


def fmt(values, digits=1):
    if not values:
        return "-"
    return "/".join(("%." + str(digits) + "f") % v for v in values)


def pytorch(out, model, mode):
    path = os.path.join(out, "pytorch_%s_%s.json" % (model, mode))
    return load(path) if os.path.exists(path) else None


def pt_decode(data, context):
    if not data:
        return None
    best = [d for d in data.get("decode", []) if d.get("context") == context and "tokens_per_s" in d]
    manual = [d for d in best if d["method"] == "manual"]
    return (manual or best or [None])[0]


def pt_prefill(data, tokens):
    if not data:
        return None
    for p in data.get("prefill", []):
        if p.get("tokens") == tokens and "tokens_per_s" in p:
            return p
    return None


def measurements(out, kind, sizes, key, pick):
    """(model label, size, Spark's per-round figures, their median, PyTorch eager's and
    torch.compile's entries or None) for every size Spark measured."""
    for model, label in MODELS.items():
        runs = spark_runs(out, model)
        eager, compiled = pytorch(out, model, "eager"), pytorch(out, model, "compile")
        for size in sizes:
            spark = rounds(runs, model, kind, size, key)
            if spark:
                yield (label, size, spark, statistics.median(spark), pick(eager, size),
                       pick(compiled, size))


def main():
    out = sys.argv[1]
    ceilings = load(os.path.join(out, "ceilings.json"))["summary"]
    copy = ceilings["copy_GBps"]["best"]
    gemm = max(v["best"] for v in ceilings["gemm_TFLOPs"].values())
    print("## Ceilings (bench/ceilings.py, best of 2 rounds)\n")
    print("| figure | value | spread between rounds |\n| --- | --- | --- |")
    print("| device-to-device copy (bytes read + written) | %.0f GB/s | %.1f %% |"
          % (copy, ceilings["copy_GBps"]["spread_pct"]))
    print("| read-only sum | %.0f GB/s | %.1f %% |"
          % (ceilings["read_GBps"]["best"], ceilings["read_GBps"]["spread_pct"]))
    for shape, v in ceilings["gemm_TFLOPs"].items():
        print("| bf16 torch.matmul %s | %.0f TFLOP/s | %.1f %% |" % (shape, v["best"], v["spread_pct"]))

    print("\n## Decode (batch 1, 64 tokens after a prompt of the given length; tokens/s)\n")
    print("| model | context | Spark (round 1/2) | Spark ms/token | PyTorch eager | torch.compile |"
          " Spark / eager | Spark / compile | Spark weight+KV GB/s (of copy %.0f) |" % copy)
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, context, spark, med, e, c in measurements(out, "decode", (1024, 8192),
                                                     "decode_tps", pt_decode):
        bytes_per_token = None
        if e and e.get("est_bytes_per_token"):
            b = e["est_bytes_per_token"]
            bytes_per_token = b["weights"] + b["kv"]
        gbps = ("%.0f (%.0f %%)" % (med * bytes_per_token / 1e9, 100 * med * bytes_per_token / 1e9 / copy)
                if bytes_per_token else "-")
        print("| %s | %d | %s | %.2f | %s | %s | %s | %s | %s |" % (
            label, context, fmt(spark), 1000.0 / med, "%.1f" % e["tokens_per_s"] if e else "-",
            "%.1f" % c["tokens_per_s"] if c else "not run",
            "%.2fx" % (med / e["tokens_per_s"]) if e else "-",
            "%.2fx" % (med / c["tokens_per_s"]) if c else "-", gbps))

    print("\n## Prefill (one prompt; tokens/s, useful TFLOP/s against the GEMM ceiling %.0f)\n" % gemm)
    print("| model | prompt | Spark (round 1/2) | Spark TFLOP/s | PyTorch eager | eager TFLOP/s |"
          " torch.compile | Spark / eager |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, tokens, spark, med, e, c in measurements(out, "prefill", (512, 4096),
                                                    "prefill_tps", pt_prefill):
        flops_per_token = e["flops"] / tokens if e else None
        print("| %s | %d | %s | %s | %s | %s | %s | %s |" % (
            label, tokens, fmt(spark),
            "%.1f (%.1f %%)" % (med * flops_per_token / 1e12, 100 * med * flops_per_token / 1e12 / gemm)
            if flops_per_token else "-",
            "%.0f" % e["tokens_per_s"] if e else "-", "%.1f" % e["tflops"] if e else "-",
            "%.0f" % c["tokens_per_s"] if c else "not run",
            "%.3fx" % (med / e["tokens_per_s"]) if e else "-"))

    print("\n## Memory: spark-run's estimate against what was measured\n")
    print("| run | estimate (total) | nvidia-smi peak | estimate - peak | runtime allocations "
          "(measured vs estimated) | driver used since context (measured vs estimated) |")
    print("| --- | --- | --- | --- | --- | --- |")
    names = sorted(glob.glob(os.path.join(out, "memory_*.json"))) + sorted(
        glob.glob(os.path.join(out, "spark_*_decode*_r1.json")))
    for path in names:
        name = os.path.basename(path)[:-5]
        data = load(path)
        mem = data["memory"]
        measured = mem.get("measured", {})
        est_mib = mem["total_bytes"] / 2**20
        mem_path = path[:-5] + ".mem"
        if os.path.exists(mem_path):
            peak = max(int(x) for x in open(mem_path).read().split())
            versus = "%d MiB | %+.0f MiB (%+.2f %%)" % (peak, est_mib - peak,
                                                          100 * (est_mib - peak) / peak)
        else:
            versus = "not recorded | -"
        alloc = measured.get("peak_allocated_bytes", 0)
        alloc_est = measured.get("estimated_allocations_bytes", 0)
        drv, drv_est = measured.get("driver_used_bytes", 0), measured.get("estimated_driver_bytes", 0)
        print("| %s | %.0f MiB | %s | %.1f vs %.1f MiB (%+.3f %%) | %.1f vs %.1f MiB (%+.2f %%) |" % (
            name, est_mib, versus,
            alloc / 2**20, alloc_est / 2**20, 100 * (alloc - alloc_est) / max(alloc_est, 1),
            drv / 2**20, drv_est / 2**20, 100 * (drv - drv_est) / max(drv_est, 1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
