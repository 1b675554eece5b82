#!/usr/bin/env python3
"""Transformers goldens for quantized tiny models (issue: quantized weights).

For each tiny model and format, quantizes the bf16 checkpoint with the rules of ModelOpt
(modelopt_quant.py quantize: byte-identical to spark-quantize, test/tools/spark-quantize), writes
the dequantised float32 checkpoint (modelopt_quant.py dequantize), runs transformers on it in
float32, and writes test/data/models/<model>/golden_<format>.safetensors:
  logits         [P, V]  the prompt's logits (prompt = golden_info.json's prompt_ids)
  greedy_ids     [8]     greedy decoding with transformers' KV cache
  greedy_logits  [P + 7, V] the prompt's logits, then the logits each generated id was chosen from
So `spark-run` on the quantized checkpoint (written by spark-quantize in the test) is compared
with transformers on the exact dequantised weights: only summation order differs (1e-3).

Needs the reference stack (torch, transformers 5.17, safetensors; tools/reference/README.md), so
it runs on the GPU machine or any machine with them; the outputs are committed.

  python3 tools/reference/make_quantized_goldens.py --models tiny-dense tiny-moe tiny-e2b \
      --formats nvfp4 fp8 [--device cuda]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

import run_reference as rr  # noqa: E402
from make_tiny_models import greedy_cached, save_st  # noqa: E402


def quantize(model_dir: Path, out: Path, fmt: str) -> None:
    subprocess.run([sys.executable, str(HERE / "modelopt_quant.py"), "quantize", str(model_dir),
                    str(out), "--format", fmt], check=True, stdout=subprocess.DEVNULL)


def dequantize(quantized: Path, out: Path) -> None:
    subprocess.run([sys.executable, str(HERE / "modelopt_quant.py"), "dequantize", str(quantized),
                    str(out)], check=True, stdout=subprocess.DEVNULL)


def golden(model_dir: Path, fmt: str, device: str) -> Path:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    info = json.loads((model_dir / "golden_info.json").read_text())
    prompt = torch.tensor(info["prompt_ids"], dtype=torch.long)
    with tempfile.TemporaryDirectory() as tmp:
        q, f32 = Path(tmp) / "q", Path(tmp) / "f32"
        quantize(model_dir, q, fmt)
        dequantize(q, f32)
        model, geom, _ = rr.load_model(f32, dtype="float32", device=device)
        with torch.no_grad():
            logits = rr.forward(model, geom, prompt).logits[0].float().cpu()
            ids, steps = greedy_cached(model, prompt, 8)
    greedy_logits = torch.cat([logits, steps[1:]], dim=0)
    out = model_dir / f"golden_{fmt}.safetensors"
    save_st(out, {"logits": logits, "greedy_ids": torch.tensor(ids, dtype=torch.long),
                  "greedy_logits": greedy_logits},
            {"format": fmt, "prompt_ids": info["prompt_ids"],
             "made_by": "tools/reference/make_quantized_goldens.py (transformers on the "
                        "dequantised weights, float32)"})
    print(f"{out}: {fmt} greedy {ids}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["tiny-dense", "tiny-moe", "tiny-e2b"])
    ap.add_argument("--formats", nargs="+", default=["nvfp4", "fp8"], choices=["nvfp4", "fp8"])
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    for m in args.models:
        for fmt in args.formats:
            golden(ROOT / "test" / "data" / "models" / m, fmt, args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
