#!/usr/bin/env python3
"""Rewrites a ModelOpt FP8 (per-tensor) or NVFP4 checkpoint, as spark-quantize writes it, in the
compressed-tensors layout of llm-compressor's schemes, with the same dequantised weights:

  to_compressed_tensors.py IN_DIR OUT_DIR --strategy tensor|channel     (FP8)
  to_compressed_tensors.py IN_DIR OUT_DIR                               (NVFP4)

config.json's quantization_config becomes quant_method "compressed-tensors", one config group
(targets ["Linear"]), and `ignore` the input's exclude patterns as "re:" expressions (wildcards
translated) plus a plain "lm_head"; hf_quant_config.json is dropped.
  FP8: format "float-quantized", weights 8-bit float, symmetric, the strategy given. Every
    X.weight_scale (F32 []) becomes F32 [1] (tensor) or F32 [out, 1] holding the same value on
    every row (channel).
  NVFP4: format "nvfp4-pack-quantized", weights 4-bit float, strategy "tensor_group", group_size
    16 (vLLM's compressed_tensors_w4a16_nvfp4 scheme). X.weight (U8 codes) is renamed
    X.weight_packed, X.weight_scale is kept, and X.weight_scale_2 (F32 []) becomes
    X.weight_global_scale = f32(1 / weight_scale_2) as F32 [1]: compressed-tensors dequantises
    as e2m1 * weight_scale / weight_global_scale. The dequantised weights then differ from the
    input's by at most the rounding of that reciprocal (about 2^-24 relative, per tensor).
Everything else is copied byte for byte. Pure Python (no numpy).
"""
import argparse
import json
import shutil
import struct
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
    ap.add_argument("--strategy", choices=["tensor", "channel"],
                    help="FP8 weight scales per tensor or per output channel (FP8 input only)")
    args = ap.parse_args()
    src, dst = Path(args.src), Path(args.dst)
    config = json.loads((src / "config.json").read_text())
    q = config.get("quantization_config", {})
    algo = q.get("quant_algo")
    if algo not in ("FP8", "NVFP4"):
        sys.exit(f"{src}: not a ModelOpt per-tensor FP8 or NVFP4 checkpoint")
    if (algo == "FP8") != (args.strategy is not None):
        sys.exit("--strategy is required for an FP8 input and not taken for NVFP4")
    dst.mkdir(parents=True, exist_ok=True)
    ignore = ["lm_head"] + ["re:" + wildcard_regex(p) for p in q.get("ignore", [])]
    if algo == "FP8":
        fmt = "float-quantized"
        weights = {"num_bits": 8, "type": "float", "strategy": args.strategy,
                   "symmetric": True, "dynamic": False, "group_size": None}
    else:
        fmt = "nvfp4-pack-quantized"
        weights = {"num_bits": 4, "type": "float", "strategy": "tensor_group",
                   "symmetric": True, "dynamic": False, "group_size": 16}
    config["quantization_config"] = {
        "quant_method": "compressed-tensors",
        "format": fmt,
        "quantization_status": "compressed",
        "config_groups": {"group_0": {
            "targets": ["Linear"],
            "weights": weights,
            "input_activations": None,
            "format": fmt}},
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
        if algo == "NVFP4":
            for name, (dtype, shape, raw) in list(tensors.items()):
                if not name.endswith(".weight_scale_2"):
                    continue
                module = name[: -len(".weight_scale_2")]
                (s2,) = struct.unpack("<f", raw)
                inverse = struct.pack("<f", 1.0 / s2)  # rounded to f32 by the pack
                del tensors[name]
                tensors[module + ".weight_global_scale"] = ("F32", [1], inverse)
                tensors[module + ".weight_packed"] = tensors.pop(module + ".weight")
            write_raw(dst / f.name, tensors)
            continue
        for name, (dtype, shape, raw) in list(tensors.items()):
            if not name.endswith(".weight_scale") or dtype != "F32" or shape not in ([], [1]):
                continue
            if args.strategy == "tensor":
                tensors[name] = ("F32", [1], raw)
            else:
                out = tensors[name[: -len("_scale")]][1][0]
                tensors[name] = ("F32", [out, 1], raw * out)
        write_raw(dst / f.name, tensors)
    index = dst / "model.safetensors.index.json"
    if index.exists():  # the shards' tensor names changed (NVFP4): map them again
        meta = json.loads(index.read_text())
        meta["weight_map"] = {name: f.name for f in sorted(dst.glob("*.safetensors"))
                              for name in read_raw(f)}
        index.write_text(json.dumps(meta, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
