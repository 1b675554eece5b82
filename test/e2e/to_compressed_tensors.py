#!/usr/bin/env python3
"""Rewrites a ModelOpt FP8 (per-tensor) checkpoint, as spark-quantize writes it, in the
compressed-tensors layout of llm-compressor's FP8 schemes, with the same dequantised weights:

  to_compressed_tensors.py IN_DIR OUT_DIR --strategy tensor|channel

config.json's quantization_config becomes quant_method "compressed-tensors", format
"float-quantized", one config group (targets ["Linear"], weights 8-bit float, symmetric, the
strategy given), and `ignore` the input's exclude patterns as "re:" expressions (wildcards
translated) plus a plain "lm_head"; hf_quant_config.json is dropped. Every
X.weight_scale (F32 []) becomes F32 [1] (tensor) or F32 [out, 1] holding the same value on every
row (channel). Everything else is copied byte for byte. Pure Python (no numpy).
"""
import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from safetensors_io import read_raw, write_raw  # noqa: E402


def wildcard_regex(pattern):
    """An fnmatch wildcard (* and ? only, as spark-quantize writes them) as a regular expression
    of the kind published compressed-tensors configs use (".*vision.*$"), anchored at the end."""
    out = "".join(".*" if c == "*" else "." if c == "?" else "\\" + c if c in ".^$+()[]{}|\\" else c
                  for c in pattern)
    return out + "$"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--strategy", choices=["tensor", "channel"], required=True)
    args = ap.parse_args()
    src, dst = Path(args.src), Path(args.dst)
    dst.mkdir(parents=True, exist_ok=True)
    config = json.loads((src / "config.json").read_text())
    q = config.get("quantization_config", {})
    if q.get("quant_algo") != "FP8":
        sys.exit(f"{src}: not a ModelOpt per-tensor FP8 checkpoint")
    ignore = ["lm_head"] + ["re:" + wildcard_regex(p) for p in q.get("ignore", [])]
    config["quantization_config"] = {
        "quant_method": "compressed-tensors",
        "format": "float-quantized",
        "quantization_status": "compressed",
        "config_groups": {"group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "strategy": args.strategy,
                        "symmetric": True, "dynamic": False, "group_size": None},
            "input_activations": None}},
        "ignore": ignore,
        "kv_cache_scheme": None,
    }
    (dst / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for f in src.iterdir():
        if f.name in ("config.json", "hf_quant_config.json") or f.suffix == ".safetensors":
            continue
        if f.is_file():
            shutil.copy(f, dst / f.name)
    for f in sorted(src.glob("*.safetensors")):
        tensors = read_raw(f)
        for name, (dtype, shape, raw) in list(tensors.items()):
            if not name.endswith(".weight_scale") or dtype != "F32" or shape not in ([], [1]):
                continue
            if args.strategy == "tensor":
                tensors[name] = ("F32", [1], raw)
            else:
                out = tensors[name[: -len("_scale")]][1][0]
                tensors[name] = ("F32", [out, 1], raw * out)
        write_raw(dst / f.name, tensors)
    return 0


if __name__ == "__main__":
    sys.exit(main())
