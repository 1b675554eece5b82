#!/usr/bin/env python3
"""Runs a Gemma 4 checkpoint through transformers and dumps per-layer activations, or compares two
such dumps (e.g. transformers vs a Spark runtime dump) to find the first diverging layer.

    # dump: hidden_states.safetensors for a prompt (ids from a golden file or a comma list)
    python3 tools/reference/run_reference.py dump --model test/data/models/tiny-dense \
        --golden test/data/models/tiny-dense/golden.safetensors --out /tmp/hs.safetensors
    # with soft tokens (multimodal merge, spec section 10)
    python3 tools/reference/run_reference.py dump --model test/data/models/tiny-e2b \
        --golden test/data/models/tiny-e2b/golden_soft.safetensors \
        --soft test/data/models/tiny-e2b/soft_tokens.safetensors --out /tmp/hs_soft.safetensors
    # compare
    python3 tools/reference/run_reference.py compare /tmp/hs.safetensors /tmp/spark_dump.safetensors

Dump format (all float32, batch dimension removed, S = prompt length):
    embeddings         [S, H]        input of layer 0 (scaled token embeddings, soft tokens merged)
    per_layer_inputs   [S, L, D_p]   PLE models only: the per-layer inputs fed to each layer (spec 3.2)
    layer.<i>          [S, H]        output of decoder layer i (after layer_scalar), i = 0..L-1
    final_norm         [S, H]        model.norm output
    logits             [S, V]        after the final softcap
    input_ids          [S] int64     the prompt (placeholder ids included)
The dump is taken with forward hooks (not output_hidden_states, whose last entry is already normed);
it is cross-checked against output_hidden_states when transformers provides it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemma4_spec as spec  # noqa: E402

DUMP_ORDER_HEAD = ("embeddings", "per_layer_inputs")
DUMP_ORDER_TAIL = ("final_norm", "logits")


def read_config(model_dir) -> dict:
    return json.loads((Path(model_dir) / "config.json").read_text())


def _set_experts_eager(model):
    """Route MoE experts through the plain per-expert loop (modeling_gemma4 Gemma4TextExperts.forward)."""
    try:
        from transformers import PreTrainedConfig as ConfigBase
    except ImportError:  # transformers < 5
        from transformers import PretrainedConfig as ConfigBase

    for module in model.modules():
        cfg = getattr(module, "config", None)
        if isinstance(cfg, ConfigBase):
            try:
                cfg._experts_implementation = "eager"
            except Exception:  # older versions without the attribute
                pass


def load_model(model_dir, dtype: str = "float32", device: str = "cpu", attn: str = "eager"):
    """from_pretrained with an explicit dtype (transformers 5 defaults to the checkpoint's bf16).

    Returns (model, geometry, loading_info)."""
    import torch
    from transformers import Gemma4ForCausalLM, Gemma4ForConditionalGeneration

    config = read_config(model_dir)
    geom = spec.derive_geometry(config)
    arch = (config.get("architectures") or ["Gemma4ForCausalLM"])[0]
    cls = Gemma4ForConditionalGeneration if "ConditionalGeneration" in arch else Gemma4ForCausalLM
    kwargs = {"dtype": getattr(torch, dtype), "attn_implementation": attn, "output_loading_info": True}
    if device != "cpu":
        kwargs["device_map"] = device
    if geom.moe:
        try:
            model, info = cls.from_pretrained(str(model_dir), experts_implementation="eager", **kwargs)
        except (TypeError, ValueError):
            model, info = cls.from_pretrained(str(model_dir), **kwargs)
        _set_experts_eager(model)
    else:
        model, info = cls.from_pretrained(str(model_dir), **kwargs)
    model.eval()
    return model, geom, info


def text_decoder(model):
    """The Gemma4TextModel inside a CausalLM (model.model) or a ConditionalGeneration model."""
    inner = model.model
    return getattr(inner, "language_model", inner)


def model_device(model):
    return next(model.parameters()).device


def merged_inputs(model, geom, ids, soft_positions=None, soft_embeddings=None):
    """Emulates Gemma4Model's multimodal merge (spec 10) for a text-only model.

    Returns (inputs_embeds [1,S,H], per_layer_inputs [1,S,L,D_p] or None):
      * placeholder ids are replaced by the pad id before the (scaled) embedding lookup;
      * rows at valid soft positions (0 <= p < S) are overwritten by the given embeddings, NOT scaled;
        rows with other positions are skipped;
      * PLE models: the token-identity part uses the same pad-replaced ids; passing it as
        `per_layer_inputs` makes Gemma4TextModel combine it with the projection of the MERGED
        embeddings (project_per_layer_inputs), exactly as Gemma4Model.forward does.
    """
    import torch

    dec = text_decoder(model)
    dev = model_device(model)
    ids = torch.as_tensor(ids, dtype=torch.long).flatten().to(dev)
    S = ids.numel()
    mask = spec.placeholder_mask(geom, ids)
    text_ids = torch.where(mask, torch.full_like(ids, geom.pad_token_id), ids)
    embeds = dec.embed_tokens(text_ids[None])
    if soft_embeddings is not None:
        pos = torch.as_tensor(soft_positions, dtype=torch.long).flatten()
        rows = torch.as_tensor(soft_embeddings)
        valid = (pos >= 0) & (pos < S)
        if sorted(pos[valid].tolist()) != mask.nonzero().flatten().cpu().tolist():
            raise ValueError("soft-token positions do not match the placeholder positions of the prompt")
        embeds = embeds.clone()
        embeds[0, pos[valid].to(dev)] = rows[valid].to(device=dev, dtype=embeds.dtype)
    elif bool(mask.any()):
        raise ValueError("prompt contains placeholder ids but no soft embeddings were given")
    ple = None
    if geom.ple_dim:
        ple = dec.embed_tokens_per_layer(text_ids[None]).reshape(1, S, geom.num_layers, geom.ple_dim)
    return embeds, ple


def forward(model, geom, ids, soft_positions=None, soft_embeddings=None, **kwargs):
    """One full-sequence forward (no cache). Text-only prompts use the plain input_ids path."""
    import torch

    if soft_embeddings is None and not bool(spec.placeholder_mask(geom, torch.as_tensor(ids)).any()):
        ids_t = torch.as_tensor(ids, dtype=torch.long).flatten()[None].to(model_device(model))
        return model(input_ids=ids_t, use_cache=False, **kwargs)
    embeds, ple = merged_inputs(model, geom, ids, soft_positions, soft_embeddings)
    if ple is not None:
        kwargs["per_layer_inputs"] = ple
    return model(inputs_embeds=embeds, use_cache=False, **kwargs)


def capture(model, geom, ids, soft_positions=None, soft_embeddings=None, warn=print):
    """Per-layer activations for one prompt, as a dict of float32 CPU tensors (see module doc)."""
    import torch

    dec = text_decoder(model)
    rec, per_layer = {}, {}
    handles = []

    def grab(t):
        t = t[0] if isinstance(t, (tuple, list)) else t
        return t.detach()[0].float().cpu()

    def pre_layer(index):
        # Gemma4TextModel calls decoder_layer(hidden_states, per_layer_input, shared_kv_states=..., ...)
        def hook(module, args, kwargs=None):
            kwargs = kwargs or {}
            hidden = args[0] if args else kwargs.get("hidden_states")
            if index == 0:
                rec["embeddings"] = grab(hidden)
            pli = args[1] if len(args) > 1 else kwargs.get("per_layer_input")
            if pli is not None:
                per_layer[index] = grab(pli)
        return hook

    def post_layer(index):
        def hook(module, args, output):
            rec[f"layer.{index}"] = grab(output)
        return hook

    for i, layer in enumerate(dec.layers):
        try:
            handles.append(layer.register_forward_pre_hook(pre_layer(i), with_kwargs=True))
        except TypeError:  # torch < 2.0
            handles.append(layer.register_forward_pre_hook(pre_layer(i)))
        handles.append(layer.register_forward_hook(post_layer(i)))
    handles.append(dec.norm.register_forward_hook(lambda m, a, o: rec.__setitem__("final_norm", grab(o))))
    try:
        with torch.no_grad():
            out = forward(model, geom, ids, soft_positions, soft_embeddings, output_hidden_states=True)
    finally:
        for h in handles:
            h.remove()

    L = geom.num_layers
    result = {"embeddings": rec["embeddings"]}
    if geom.ple_dim:
        result["per_layer_inputs"] = torch.stack([per_layer[i] for i in range(L)], dim=1)
    for i in range(L):
        result[f"layer.{i}"] = rec[f"layer.{i}"]
    result["final_norm"] = rec["final_norm"]
    result["logits"] = out.logits.detach()[0].float().cpu()
    result["input_ids"] = torch.as_tensor(ids, dtype=torch.long).flatten().cpu()

    # Cross-check with transformers' own hidden_states: (embeddings, layer 0..L-2, final_norm).
    hs = getattr(out, "hidden_states", None)
    if hs is not None and len(hs) == L + 1:
        expect = [result["embeddings"]] + [result[f"layer.{i}"] for i in range(L - 1)] + [result["final_norm"]]
        worst = max((a[0].float().cpu() - b).abs().max().item() for a, b in zip(hs, expect))
        if worst > 0:
            warn(f"warning: hook dump differs from output_hidden_states by {worst:.3g}")
    elif hs is not None:
        warn(f"warning: output_hidden_states has {len(hs)} entries, expected {L + 1}; not cross-checked")
    return result


def save_dump(tensors, path, metadata=None):
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=metadata or {})


def dump_order(names):
    layers = sorted((n for n in names if n.startswith("layer.")), key=lambda n: int(n.split(".")[1]))
    return [n for n in DUMP_ORDER_HEAD if n in names] + layers + [n for n in DUMP_ORDER_TAIL if n in names]


def compare(path_a, path_b, atol=1e-4, rtol=1e-4):
    """Prints max |a-b| per tensor in forward order; returns the first tensor out of tolerance (or None)."""
    from safetensors.torch import load_file

    a, b = load_file(str(path_a)), load_file(str(path_b))
    first_bad = None
    print(f"{'tensor':<18} {'shape':<16} {'max|a-b|':>12} {'max|a|':>12}  status")
    for name in dump_order(set(a) | set(b)):
        if name not in a or name not in b:
            print(f"{name:<18} {'':<16} {'':>12} {'':>12}  missing in {'B' if name in a else 'A'}")
            continue
        x, y = a[name].float(), b[name].float()
        if x.shape != y.shape:
            print(f"{name:<18} {str(tuple(x.shape)):<16} shape mismatch {tuple(y.shape)}")
            first_bad = first_bad or name
            continue
        diff = (x - y).abs()
        ok = bool((diff <= atol + rtol * y.abs()).all())
        print(f"{name:<18} {str(tuple(x.shape)):<16} {diff.max().item():12.4g} {x.abs().max().item():12.4g}  "
              f"{'ok' if ok else 'DIVERGES'}")
        if not ok and first_bad is None:
            first_bad = name
    print(f"first diverging tensor: {first_bad}" if first_bad else "all tensors within tolerance")
    return first_bad


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="run a checkpoint and write hidden_states.safetensors")
    d.add_argument("--model", required=True, type=Path, help="checkpoint directory (config.json + safetensors)")
    src = d.add_mutually_exclusive_group(required=True)
    src.add_argument("--golden", type=Path, help="safetensors file with a 'prompt_ids' tensor")
    src.add_argument("--ids", help="comma-separated token ids")
    d.add_argument("--soft", type=Path, help="soft_tokens.safetensors ('embeddings' [n,H], 'positions' [n])")
    d.add_argument("--out", required=True, type=Path)
    d.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    d.add_argument("--device", default="cpu")
    c = sub.add_parser("compare", help="compare two dumps, report the first diverging tensor")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    c.add_argument("--atol", type=float, default=1e-4)
    c.add_argument("--rtol", type=float, default=1e-4)
    args = ap.parse_args(argv)

    if args.cmd == "compare":
        return 1 if compare(args.a, args.b, args.atol, args.rtol) else 0

    import torch
    from safetensors.torch import load_file

    torch.set_grad_enabled(False)
    if args.golden:
        ids = load_file(str(args.golden))["prompt_ids"]
    else:
        ids = torch.tensor([int(x) for x in args.ids.split(",")], dtype=torch.long)
    positions = embeddings = None
    if args.soft:
        soft = load_file(str(args.soft))
        positions, embeddings = soft["positions"], soft["embeddings"]
    model, geom, _ = load_model(args.model, args.dtype, args.device)
    result = capture(model, geom, ids, positions, embeddings)
    import transformers

    save_dump(result, args.out, {"model": str(args.model), "dtype": args.dtype,
                                 "transformers": transformers.__version__, "torch": torch.__version__})
    print(f"wrote {args.out}: {len(result)} tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
