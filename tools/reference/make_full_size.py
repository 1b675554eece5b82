#!/usr/bin/env python3
"""Writes a random-weight, FULL-SIZE Gemma 4 26B-A4B or 31B checkpoint (bf16, sharded safetensors).

The architecture is exactly the released one (spec section 1.1); only the weight values are random
(drawn with the same rules as the tiny models, see gemma4_spec.init_rule), so the checkpoint can be
used for loader, memory, performance and "does it run end to end" tests, and for comparing Spark
against transformers on the same random weights.

The model is never materialised: tensor names/shapes come from instantiating the transformers model
on the meta device (and are cross-checked against spec section 11), then each tensor is drawn on its
own (per-tensor seed, so the values do not depend on sharding) and written shard by shard
(~--shard-size-gb each) with safetensors.torch.save_file, plus model.safetensors.index.json.

Sizes (bf16): 26b-a4b 50.5 GB (25.23 B params), 31b 61.4 GB (30.70 B params). Write ONE model at a
time: a 64 GiB disk holds only one of them, and 31b needs ~57.2 GiB free. The script refuses to start
when the output filesystem has less free space than the checkpoint needs (override with --force).
Completed shards are kept: re-running the same command skips shards that already exist with the
expected tensors, so an interrupted run can simply be restarted.

Usage:
    python3 tools/reference/make_full_size.py --model 31b --out /data/gemma4-31b-random
    python3 tools/reference/make_full_size.py --model 26b-a4b --out /data/gemma4-26b-random --dry-run
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemma4_spec as spec  # noqa: E402

S, F = spec.SLIDING, spec.FULL

_COMMON = {
    "vocab_size": 262144,
    "head_dim": 256,
    "global_head_dim": 512,  # popped by transformers 5.17 into per_layer_config
    "attention_k_eq_v": True,
    "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 262144,
    "rms_norm_eps": 1e-6,
    "pad_token_id": 0,
    "eos_token_id": 1,
    "bos_token_id": 2,
    "tie_word_embeddings": True,
    "rope_parameters": copy.deepcopy(spec.DEFAULT_ROPE_PARAMETERS),
    "attention_bias": False,
    "sliding_window": 1024,
    "final_logit_softcapping": 30.0,
    "use_bidirectional_attention": "vision",
    "vocab_size_per_layer_input": 262144,
    "hidden_size_per_layer_input": 0,
    "num_kv_shared_layers": 0,
    "use_double_wide_mlp": False,
}

# Gemma4TextConfig constructor arguments (spec 1.1).
FULL_SIZE_TEXT_CONFIGS = {
    "26b-a4b": dict(
        _COMMON,
        hidden_size=2816,
        intermediate_size=2112,
        num_hidden_layers=30,
        num_attention_heads=16,
        num_key_value_heads=8,
        num_global_key_value_heads=2,
        layer_types=[S if (i + 1) % 6 else F for i in range(30)],
        enable_moe_block=True,
        num_experts=128,
        top_k_experts=8,
        moe_intermediate_size=704,
    ),
    "31b": dict(
        _COMMON,
        hidden_size=5376,
        intermediate_size=21504,
        num_hidden_layers=60,
        num_attention_heads=32,
        num_key_value_heads=16,
        num_global_key_value_heads=4,
        layer_types=[S if (i + 1) % 6 else F for i in range(60)],
        enable_moe_block=False,
        num_experts=None,
        top_k_experts=None,
        moe_intermediate_size=None,
    ),
}

# Top-level Gemma4Config ids of the released checkpoints (spec 1.1).
MULTIMODAL_IDS = {
    "image_token_id": 258880,
    "audio_token_id": 258881,
    "video_token_id": 258884,
    "boi_token_id": 255999,
    "eoi_token_id": 258882,
    "boa_token_id": 256000,
    "eoa_token_index": 258883,
}
TOP_LEVEL_EOS = [1, 106]

BYTES_PER_ELEMENT = 2  # bf16


def build_config(model: str, layout: str):
    """transformers config object for the chosen layout (imports transformers)."""
    import torch
    from transformers import Gemma4Config, Gemma4TextConfig

    text = Gemma4TextConfig(**copy.deepcopy(FULL_SIZE_TEXT_CONFIGS[model]))
    text.dtype = torch.bfloat16
    if layout == "causal":
        text.architectures = ["Gemma4ForCausalLM"]
        return text
    config = Gemma4Config(text_config=text, vision_config=None, audio_config=None,
                          eos_token_id=TOP_LEVEL_EOS, **MULTIMODAL_IDS)
    config.dtype = torch.bfloat16
    config.architectures = ["Gemma4ForConditionalGeneration"]
    return config


def meta_tensor_table(config, layout: str):
    """(name, shape) pairs in state_dict order from a meta-device instance of the transformers model."""
    import torch
    from transformers import Gemma4ForCausalLM, Gemma4ForConditionalGeneration

    cls = Gemma4ForCausalLM if layout == "causal" else Gemma4ForConditionalGeneration
    with torch.device("meta"):
        model = cls(config)
    table = [(name, tuple(t.shape)) for name, t in model.state_dict().items()]
    return table


def plan_shards(table, shard_bytes: int):
    shards, current, size = [], [], 0
    for name, shape in table:
        nbytes = math.prod(shape) * BYTES_PER_ELEMENT
        if current and size + nbytes > shard_bytes:
            shards.append(current)
            current, size = [], 0
        current.append((name, shape))
        size += nbytes
    if current:
        shards.append(current)
    return shards


def shard_is_complete(path: Path, entries) -> bool:
    if not path.exists():
        return False
    try:
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            keys = set(f.keys())
            if keys != {name for name, _ in entries}:
                return False
            for name, shape in entries:
                sl = f.get_slice(name)
                if tuple(sl.get_shape()) != tuple(shape) or sl.get_dtype() not in ("BF16", "bf16"):
                    return False
        return True
    except Exception:  # a truncated file from an interrupted run
        return False


def make_tensor(name, shape, geom, seed, device):
    import torch

    kind, a, b = spec.init_rule(name, shape, geom)
    gen = torch.Generator(device=device).manual_seed(spec.tensor_seed(seed, name))
    if kind == "normal":
        t = torch.randn(shape, generator=gen, device=device, dtype=torch.float32).mul_(b).add_(a)
    else:
        t = torch.rand(shape, generator=gen, device=device, dtype=torch.float32).mul_(b - a).add_(a)
    return t.to(torch.bfloat16).cpu().contiguous()


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Disk: 26b-a4b needs 50.5 GB (47.0 GiB), 31b needs 61.4 GB (57.2 GiB) free on --out; "
               "only one model fits on a 64 GiB disk. RAM: about one shard plus one tensor (~10 GB).",
    )
    ap.add_argument("--model", required=True, choices=sorted(FULL_SIZE_TEXT_CONFIGS))
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--layout", choices=("conditional", "causal"), default="conditional",
                    help="conditional (default): hub layout, Gemma4ForConditionalGeneration config without "
                         "vision/audio towers, weights 'model.language_model.*'; causal: Gemma4ForCausalLM, "
                         "weights 'model.*'")
    ap.add_argument("--shard-size-gb", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto", help="where random numbers are drawn: auto|cpu|cuda")
    ap.add_argument("--dry-run", action="store_true", help="print the plan (needs no torch) and exit")
    ap.add_argument("--force", action="store_true", help="skip the free-disk-space check")
    ap.add_argument("--num-layers", type=int, default=0,
                    help="only the first N decoder layers (a truncated model of the same shapes, "
                         "for reproducing a fault at full-size dimensions quickly); 0: all")
    args = ap.parse_args(argv)
    if args.num_layers:
        cfg = FULL_SIZE_TEXT_CONFIGS[args.model]
        if not 0 < args.num_layers <= cfg["num_hidden_layers"]:
            raise SystemExit(f"--num-layers: 1 .. {cfg['num_hidden_layers']} for {args.model}")
        cfg["num_hidden_layers"] = args.num_layers
        cfg["layer_types"] = cfg["layer_types"][:args.num_layers]

    geom = spec.derive_geometry(FULL_SIZE_TEXT_CONFIGS[args.model])
    prefix = "model.language_model." if args.layout == "conditional" else "model."
    spec_table = spec.expected_tensor_shapes(geom, prefix)

    config = None
    table, source = list(spec_table.items()), "spec table"
    try:
        config = build_config(args.model, args.layout)
    except ImportError as err:
        if not args.dry_run:
            raise
        print(f"note: {err}; using the spec table only")
    if config is not None:
        try:
            table = [(n, s) for n, s in meta_tensor_table(config, args.layout) if n != "lm_head.weight"]
            source = "transformers meta-device model"
        except Exception as err:  # the names still come from spec section 11
            print(f"warning: meta-device instantiation failed ({type(err).__name__}: {err}); using the spec table")
    if dict(table) != dict(spec_table):
        got, want = dict(table), dict(spec_table)
        diff = sorted(set(got.items()) ^ set(want.items()))
        raise SystemExit(f"tensor table from {source} differs from spec section 11:\n"
                         + "\n".join(f"  {n} {s} ({'model' if (n, s) in got.items() else 'spec'})" for n, s in diff[:40]))

    total_bytes = sum(math.prod(s) for _, s in table) * BYTES_PER_ELEMENT
    shards = plan_shards(table, int(args.shard_size_gb * 1e9))
    n = len(shards)
    print(f"{args.model} ({args.layout}): {len(table)} tensors, {total_bytes / 2 / 1e9:.3f} B params, "
          f"{total_bytes / 1e9:.2f} GB in {n} shards ({source})")
    if args.dry_run:
        for i, shard in enumerate(shards):
            size = sum(math.prod(s) for _, s in shard) * BYTES_PER_ELEMENT
            print(f"  shard {i + 1}/{n}: {len(shard)} tensors, {size / 1e9:.2f} GB, first {shard[0][0]}")
        return 0

    import torch
    from safetensors.torch import save_file

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"

    args.out.mkdir(parents=True, exist_ok=True)
    names = [f"model-{i + 1:05d}-of-{n:05d}.safetensors" for i in range(n)]
    pending = [i for i in range(n) if not shard_is_complete(args.out / names[i], shards[i])]
    need = sum(sum(math.prod(s) for _, s in shards[i]) * BYTES_PER_ELEMENT for i in pending)
    free = shutil.disk_usage(args.out).free
    if need * 1.01 > free and not args.force:
        raise SystemExit(f"not enough disk on {args.out}: need {need / 2**30:.1f} GiB, free {free / 2**30:.1f} GiB")

    config.save_pretrained(str(args.out))
    try:
        from transformers import GenerationConfig

        GenerationConfig(bos_token_id=2, eos_token_id=TOP_LEVEL_EOS, pad_token_id=0).save_pretrained(str(args.out))
    except Exception as err:  # optional file
        print(f"warning: generation_config.json not written: {err}")

    weight_map = {}
    for i, shard in enumerate(shards):
        for name, _ in shard:
            weight_map[name] = names[i]
    t0 = time.time()
    for i in range(n):
        path = args.out / names[i]
        if i not in pending:
            print(f"[{i + 1}/{n}] {names[i]} exists, kept")
            continue
        tensors = {name: make_tensor(name, shape, geom, args.seed, device) for name, shape in shards[i]}
        tmp = path.with_suffix(".tmp")
        save_file(tensors, str(tmp), metadata={"format": "pt"})
        os.replace(tmp, path)
        del tensors
        print(f"[{i + 1}/{n}] {names[i]} written ({time.time() - t0:.0f} s)", flush=True)

    index = {"metadata": {"total_size": total_bytes}, "weight_map": dict(sorted(weight_map.items()))}
    (args.out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    bad = [names[i] for i in range(n) if not shard_is_complete(args.out / names[i], shards[i])]
    if bad:
        raise SystemExit(f"verification failed for {bad}")
    print(f"done: {args.out} ({total_bytes / 1e9:.2f} GB), all {n} shard headers verified")
    return 0


if __name__ == "__main__":
    sys.exit(main())
