#!/usr/bin/env python3
"""Builds tiny random-weight Gemma 4 checkpoints and transformers golden outputs for Spark tests.

    python3 tools/reference/make_tiny_models.py --out test/data/models          # generate + self-check
    python3 tools/reference/make_tiny_models.py --out test/data/models --self-check   # verify only

Needs torch, transformers (written against 5.17.0), safetensors. Runs on CPU in about a minute.

For each model (tiny-dense: 31B-like, tiny-moe: 26B-A4B-like, tiny-e2b: E2B-like) it writes
<out>/<model>/:
  config.json, generation_config.json   as Gemma4ForCausalLM.save_pretrained writes them
  model.safetensors                     bf16 weights, names 'model.*' (lm_head tied, not stored)
  golden.safetensors                    prompt_ids [P] i64, logits [P,V] f32, greedy_ids [N] i64,
                                        greedy_logits [P+N-1,V] f32, top2_margin [P+N-1] f32
  soft_tokens.safetensors               embeddings [n,H] f32, positions [n] i64, modality [n] i64
  golden_soft.safetensors               prompt_ids [P] i64 (with placeholder ids), logits [P,V] f32
  hidden_states.safetensors             per-layer activations for the golden prompt (run_reference.py)
  hidden_states_soft.safetensors        the same for the soft-token prompt
  golden_info.json                      the same facts in JSON (ids, margins, layout)
and <out>/MANIFEST.txt (versions, date, command, checks, sha256 of every file).

Goldens are computed by transformers in float32 (attn_implementation="eager", experts "eager")
from the saved bf16 checkpoint, so the weights used are exactly the stored bf16 values.
Every value is cross-checked against an independent fp32 implementation of the spec
(gemma4_spec.reference_forward); see README.md.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import hashlib
import json
import platform
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemma4_spec as spec  # noqa: E402
import run_reference as rr  # noqa: E402

S, F = spec.SLIDING, spec.FULL

PROMPT_LEN = 24  # > sliding window, so sliding masks matter
NUM_NEW = 8
WINDOW = 8

ACCEPT_REL_MARGIN = 0.02  # a prompt is accepted when every greedy step has (top1-top2)/|top1| >= this
WARN_REL_MARGIN = 0.01  # below this a warning is printed
ACCEPT_ROUTER_GAP = 5e-3  # MoE: min log-prob gap between the k-th and (k+1)-th expert
MAX_PROMPT_ATTEMPTS = 256
MAX_SOFT_ATTEMPTS = 64
MAX_FILE_BYTES = 4 * 2**20

TOL_RECOMPUTE = 1e-4  # same code, same weights (self-check reload)
TOL_CACHE = 1e-4  # KV-cache decode vs full recompute, inputs_embeds vs input_ids, HF cross-checks
TOL_REFERENCE = 1e-3  # transformers vs the independent spec implementation (both fp32)

# Soft-token prompt layout: placeholder runs (positions within the 24-token prompt).
SOFT_LAYOUT = (("image_token_id", range(3, 9)), ("video_token_id", range(11, 14)), ("audio_token_id", range(16, 20)))
MODALITY_CODE = {"image_token_id": 0, "video_token_id": 1, "audio_token_id": 2}
SOFT_STD = 4.0  # about the spread of the scaled text embeddings (4/sqrt(H) * sqrt(H))

COMMON = {
    "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-6,
    "pad_token_id": 0,
    "bos_token_id": 2,
    "eos_token_id": [1, 106],
    "tie_word_embeddings": True,
    "rope_parameters": spec.DEFAULT_ROPE_PARAMETERS,  # sliding: default 1e4; full: proportional 0.25, 1e6
    "attention_bias": False,
    "sliding_window": WINDOW,
    "final_logit_softcapping": 30.0,
    "use_bidirectional_attention": None,
    "num_attention_heads": 4,
    "head_dim": 32,
    "global_head_dim": 64,  # same 1:2 ratio as 256:512
}

MODELS = {
    "tiny-dense": {
        "seed": 1,
        "about": "31B-like: sliding+full layers, k_eq_v on full layers, 2/1 KV heads, proportional RoPE",
        "config": dict(
            vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=5,
            layer_types=[S, S, F, S, F], num_key_value_heads=2, num_global_key_value_heads=1,
            attention_k_eq_v=True, hidden_size_per_layer_input=0, vocab_size_per_layer_input=512,
            num_kv_shared_layers=0, use_double_wide_mlp=False, enable_moe_block=False,
            num_experts=None, top_k_experts=None, moe_intermediate_size=None,
        ),
    },
    "tiny-moe": {
        "seed": 2,
        "about": "26B-A4B-like: MoE block on every layer (8 experts, top-2) plus the dense shared MLP",
        "config": dict(
            vocab_size=1024, hidden_size=64, intermediate_size=64, num_hidden_layers=4,
            layer_types=[S, F, S, F], num_key_value_heads=2, num_global_key_value_heads=1,
            attention_k_eq_v=True, hidden_size_per_layer_input=0, vocab_size_per_layer_input=1024,
            num_kv_shared_layers=0, use_double_wide_mlp=False, enable_moe_block=True,
            num_experts=8, top_k_experts=2, moe_intermediate_size=32,
        ),
    },
    "tiny-e2b": {
        "seed": 3,
        "about": "E2B-like: PLE (D_p 16), KV sharing (layers 4,5 read 3/2), double-wide MLP, own V",
        "config": dict(
            vocab_size=1024, hidden_size=128, intermediate_size=64, num_hidden_layers=6,
            layer_types=[S, S, F, S, S, F], num_key_value_heads=1, num_global_key_value_heads=None,
            attention_k_eq_v=False, hidden_size_per_layer_input=16, vocab_size_per_layer_input=1024,
            num_kv_shared_layers=2, use_double_wide_mlp=True, enable_moe_block=False,
            num_experts=None, top_k_experts=None, moe_intermediate_size=None,
        ),
    },
}

OUTPUT_FILES = (
    "config.json", "generation_config.json", "model.safetensors", "model.safetensors.index.json",
    "golden.safetensors", "soft_tokens.safetensors", "golden_soft.safetensors",
    "hidden_states.safetensors", "hidden_states_soft.safetensors", "golden_info.json",
)

SUMMARY = {}  # model name -> facts for MANIFEST.txt


def config_kwargs(name: str) -> dict:
    """Gemma4TextConfig constructor arguments of a tiny model (placeholder ids at the top of the vocab)."""
    kw = copy.deepcopy(COMMON)
    kw.update(copy.deepcopy(MODELS[name]["config"]))
    V = kw["vocab_size"]
    kw.update(image_token_id=V - 3, audio_token_id=V - 2, video_token_id=V - 1)
    return kw


# ------------------------------------------------------------------------------------------------
# Reporting
# ------------------------------------------------------------------------------------------------

class Report:
    def __init__(self):
        self.rows = []

    def add(self, model, check, status, detail=""):
        self.rows.append((model, check, status, detail))
        print(f"[{status}] {model}: {check}: {detail}", flush=True)

    def close(self, model, check, got, want, tol):
        got, want = got.detach().float().cpu(), want.detach().float().cpu()
        if got.shape != want.shape:
            self.add(model, check, "FAIL", f"shape {tuple(got.shape)} != {tuple(want.shape)}")
            return float("inf")
        diff = (got - want).abs().max().item() if got.numel() else 0.0
        self.add(model, check, "PASS" if diff <= tol else "FAIL", f"max|diff| {diff:.3g} (tol {tol:g})")
        return diff

    def equal(self, model, check, got, want):
        ok = got == want
        self.add(model, check, "PASS" if ok else "FAIL", "" if ok else f"got {got!r}, want {want!r}")
        return ok

    @property
    def failed(self):
        return any(status == "FAIL" for _, _, status, _ in self.rows)

    def table(self):
        w_model = max([5] + [len(r[0]) for r in self.rows])
        w_check = max([5] + [len(r[1]) for r in self.rows])
        lines = [f"{'model':<{w_model}}  {'check':<{w_check}}  status  detail"]
        for model, check, status, detail in self.rows:
            lines.append(f"{model:<{w_model}}  {check:<{w_check}}  {status:<6}  {detail}")
        counts = {s: sum(1 for r in self.rows if r[2] == s) for s in ("PASS", "FAIL", "WARN", "SKIP", "INFO")}
        lines.append(", ".join(f"{n} {s.lower()}" for s, n in counts.items()))
        return "\n".join(lines)


def geometry_table(geom) -> str:
    lines = [" layer  type     head_dim  kv_heads  v_proj  kv_shared(src)  mlp_width"]
    for lg in geom.layers:
        shared = f"yes({lg.kv_source})" if lg.kv_shared else ("source" if lg.stores_shared_kv else "no")
        v = "-" if lg.kv_shared else ("K (k_eq_v)" if lg.k_eq_v else "own")
        lines.append(f" {lg.index:5d}  {('full' if lg.type == F else 'sliding'):<7}  {lg.head_dim:8d}  "
                     f"{lg.num_kv_heads:8d}  {v:<10}  {shared:<14}  {lg.intermediate_size}")
    return "\n".join(lines)


def _rope_key(params):
    """The RoPE parameters that matter (transformers may add defaulted keys when it serialises)."""
    kind = params.get("rope_type", "default")
    partial = float(params.get("partial_rotary_factor", 1.0)) if kind == "proportional" else None
    return (kind, float(params["rope_theta"]), partial, float(params.get("factor", 1.0)))


def geometry_facts(geom) -> dict:
    """What must agree between the intended configuration and what config.json says."""
    return {
        "hidden_size": geom.hidden_size, "vocab_size": geom.vocab_size, "num_layers": geom.num_layers,
        "heads": geom.num_attention_heads, "window": geom.sliding_window, "eps": geom.rms_norm_eps,
        "softcap": geom.final_logit_softcapping, "tie": geom.tie_word_embeddings, "ple": geom.ple_dim,
        "ple_vocab": geom.ple_vocab if geom.ple_dim else None, "moe": geom.moe,
        "experts": (geom.num_experts, geom.top_k_experts, geom.moe_intermediate_size),
        "rope": {t: _rope_key(r) for t, r in geom.rope.items()}, "pad": geom.pad_token_id, "bos": geom.bos_token_id, "eos": geom.eos_token_ids,
        "placeholders": geom.placeholder_ids, "activation": geom.hidden_activation,
        "layers": [vars(lg) for lg in geom.layers],
    }


# ------------------------------------------------------------------------------------------------
# Small model helpers
# ------------------------------------------------------------------------------------------------

class RouterGapMonitor:
    """Records, over all router calls, the smallest log-probability gap between the k-th and the
    (k+1)-th expert: a near-tie there would make the expert choice (and the output) fragile."""

    def __init__(self, model, geom):
        self.k = geom.top_k_experts
        self.modules = [m for m in model.modules() if type(m).__name__.endswith("TextRouter")] if geom.moe else []
        self.min_gap = float("inf")
        self.handles = []

    def _hook(self, module, args, output):
        import torch

        probs = output[0] if isinstance(output, (tuple, list)) else output
        probs = probs.detach().float().reshape(-1, probs.shape[-1])
        top = torch.topk(probs, self.k + 1, dim=-1).values
        is_prob = bool((probs >= 0).all()) and bool(((probs.sum(-1) - 1).abs() < 1e-3).all())
        if is_prob:
            top = top.clamp_min(1e-30).log()
        self.min_gap = min(self.min_gap, (top[:, self.k - 1] - top[:, self.k]).min().item())

    def __enter__(self):
        self.handles = [m.register_forward_hook(self._hook) for m in self.modules]
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()


def full_logits(model, geom, ids, positions=None, embeddings=None):
    return rr.forward(model, geom, ids, positions, embeddings).logits[0].float().cpu()


def greedy_cached(model, prompt, n):
    """Greedy decoding with transformers' KV cache: prefill, then one token per step."""
    dev = rr.model_device(model)
    return greedy_from(model, model(input_ids=prompt[None].to(dev), use_cache=True), n)


def greedy_from(model, out, n):
    """Greedy decoding after a prefill whose output (with its KV cache) is `out`: n tokens and the
    logits each was chosen from."""
    import torch

    dev = rr.model_device(model)
    past = out.past_key_values
    logits = out.logits[0, -1].float().cpu()
    tokens, steps = [], []
    for i in range(n):
        steps.append(logits)
        tokens.append(int(torch.argmax(logits)))
        if i + 1 == n:
            break
        out = model(input_ids=torch.tensor([[tokens[-1]]], device=dev), past_key_values=past, use_cache=True)
        past = out.past_key_values
        logits = out.logits[0, -1].float().cpu()
    return tokens, torch.stack(steps)


def top2(logits):
    """(top1 - top2, (top1 - top2) / max(|top1|, 1)) per row."""
    values = logits.topk(2, dim=-1).values
    margin = values[:, 0] - values[:, 1]
    return margin, margin / values[:, 0].abs().clamp_min(1.0)


def banned_ids(geom):
    return {geom.pad_token_id, geom.bos_token_id, *geom.eos_token_ids, *geom.placeholder_ids.values()}


def allowed_ids(geom):
    import torch

    banned = banned_ids(geom)
    return torch.tensor([i for i in range(geom.vocab_size) if i not in banned], dtype=torch.long)


def save_st(path, tensors, metadata):
    from safetensors.torch import save_file

    save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(path),
              metadata={k: (v if isinstance(v, str) else json.dumps(v)) for k, v in metadata.items()})


def versions():
    import torch
    import transformers

    out = {"python": platform.python_version(), "torch": torch.__version__,
           "transformers": transformers.__version__, "platform": platform.platform()}
    for mod in ("safetensors", "numpy", "huggingface_hub"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:
            out[mod] = "n/a"
    return out


# ------------------------------------------------------------------------------------------------
# Checkpoint creation
# ------------------------------------------------------------------------------------------------

def randomize_(model, geom, seed):
    """Draws every stored tensor (parameters and persistent buffers such as layer_scalar) in fp32."""
    import torch

    unknown = []
    for name, tensor in model.state_dict(keep_vars=True).items():
        if name == "lm_head.weight":
            continue  # tied to model.embed_tokens.weight
        try:
            kind, a, b = spec.init_rule(name, tuple(tensor.shape), geom)
        except ValueError:
            unknown.append(name)  # not in spec 11: left at transformers' init, flagged by the caller
            continue
        gen = torch.Generator().manual_seed(spec.tensor_seed(seed, name))
        if kind == "normal":
            value = torch.randn(tuple(tensor.shape), generator=gen) * b + a
        else:
            value = torch.rand(tuple(tensor.shape), generator=gen) * (b - a) + a
        with torch.no_grad():
            tensor.copy_(value)
    return unknown


def create_checkpoint(name, out_dir, writer, report):
    import torch
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig

    kw = config_kwargs(name)
    geom = spec.derive_geometry(kw)
    seed = MODELS[name]["seed"]
    torch.manual_seed(seed)
    config = Gemma4TextConfig(**copy.deepcopy(kw))
    model = Gemma4ForCausalLM(config).eval()
    unknown = randomize_(model, geom, seed)
    if unknown:
        report.add(name, "every stored tensor has a spec init rule", "FAIL", f"unknown: {unknown[:6]}")
    if model.lm_head.weight is not model.model.embed_tokens.weight:
        report.add(name, "lm_head tied to embed_tokens at init", "WARN", "not the same Parameter; copying")
        with torch.no_grad():
            model.lm_head.weight.copy_(model.model.embed_tokens.weight)
    model.to(torch.bfloat16)  # round every stored value to bf16; goldens use exactly these values
    expected = {k: v.detach().clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}

    model.config.dtype = torch.bfloat16
    if writer == "hf":
        model.save_pretrained(str(out_dir))
    else:  # same files, written without save_pretrained's weight handling
        from safetensors.torch import save_file

        model.config.architectures = ["Gemma4ForCausalLM"]
        model.config.save_pretrained(str(out_dir))
        model.generation_config.save_pretrained(str(out_dir))
        save_file({k: v.contiguous() for k, v in expected.items()}, str(out_dir / "model.safetensors"),
                  metadata={"format": "pt"})
    verify_saved_weights(name, out_dir, expected, geom, report)
    return geom


def verify_saved_weights(name, out_dir, expected, geom, report):
    import torch
    from safetensors.torch import load_file

    path = out_dir / "model.safetensors"
    if not path.exists():
        report.add(name, "save_pretrained wrote model.safetensors", "FAIL",
                   f"files: {sorted(p.name for p in out_dir.iterdir())} (try --writer manual)")
        raise RuntimeError("model.safetensors does not hold the expected tensors")
    saved = load_file(str(path))
    problems = []
    for k in sorted(set(expected) - set(saved)):
        problems.append(f"missing {k}")
    for k in sorted(set(saved) - set(expected)):
        if not (k == "lm_head.weight" and torch.equal(saved[k], expected["model.embed_tokens.weight"])):
            problems.append(f"unexpected {k}")
    for k in sorted(set(saved) & set(expected)):
        if saved[k].dtype != torch.bfloat16 or not torch.equal(saved[k], expected[k]):
            problems.append(f"{k}: saved {saved[k].dtype} {tuple(saved[k].shape)} differs")
    report.add(name, "model.safetensors == the model's bf16 state dict", "FAIL" if problems else "PASS",
               "; ".join(problems[:6]) + (" (try --writer manual)" if problems else ""))
    if problems:
        raise RuntimeError("model.safetensors does not hold the expected tensors")


# ------------------------------------------------------------------------------------------------
# Goldens
# ------------------------------------------------------------------------------------------------

def pick_prompt(model, geom, seed, report, name):
    """Random prompts (bos + P-1 ordinary ids) until the greedy path has clear top-1/top-2 gaps, no
    special/placeholder token and (MoE) no near-tie in expert selection; keeps the best otherwise."""
    import torch

    gen = torch.Generator().manual_seed(seed * 7919 + 17)
    allowed, banned = allowed_ids(geom), banned_ids(geom)
    best = None
    for attempt in range(MAX_PROMPT_ATTEMPTS):
        body = allowed[torch.randint(len(allowed), (PROMPT_LEN - 1,), generator=gen)]
        prompt = torch.cat([torch.tensor([geom.bos_token_id]), body])
        with RouterGapMonitor(model, geom) as mon:
            tokens, steps = greedy_cached(model, prompt, NUM_NEW)
        rel = top2(steps)[1].min().item()
        score = min(rel / ACCEPT_REL_MARGIN, mon.min_gap / ACCEPT_ROUTER_GAP)
        if any(t in banned for t in tokens):
            score -= 100.0
        if best is None or score > best["score"]:
            best = dict(score=score, attempt=attempt, prompt=prompt, tokens=tokens, steps=steps,
                        router_gap=mon.min_gap)
        if score >= 1.0:
            break
    status = "PASS" if best["score"] >= 1.0 else "WARN"
    report.add(name, "prompt search", status,
               f"attempt {best['attempt'] + 1}, score {best['score']:.2f} (>= 1 wanted)")
    return best


def make_soft_prompt(model, geom, seed, report, name):
    """Prompt with image/video/audio placeholder runs and random soft embeddings (bf16-representable),
    plus two rows that must be skipped (position -1 and position P)."""
    import torch

    gen = torch.Generator().manual_seed(seed * 104729 + 5)
    allowed = allowed_ids(geom)
    best = None
    for attempt in range(MAX_SOFT_ATTEMPTS):
        ids = allowed[torch.randint(len(allowed), (PROMPT_LEN,), generator=gen)]
        ids[0] = geom.bos_token_id
        valid_pos, valid_mod = [], []
        for key, run in SOFT_LAYOUT:
            for p in run:
                ids[p] = geom.placeholder_ids[key]
                valid_pos.append(p)
                valid_mod.append(MODALITY_CODE[key])
        order = sorted(range(len(valid_pos)), key=lambda i: valid_pos[i])
        valid_pos = [valid_pos[i] for i in order]
        valid_mod = [valid_mod[i] for i in order]
        positions = [valid_pos[0], -1] + valid_pos[1:] + [PROMPT_LEN]
        modality = [valid_mod[0], -1] + valid_mod[1:] + [-1]
        rows = (torch.randn(len(positions), geom.hidden_size, generator=gen) * SOFT_STD)
        rows = rows.to(torch.bfloat16).float()
        positions_t = torch.tensor(positions, dtype=torch.long)
        with RouterGapMonitor(model, geom) as mon:
            logits = full_logits(model, geom, ids, positions_t, rows)
        cand = dict(ids=ids, positions=positions_t, modality=torch.tensor(modality, dtype=torch.long),
                    embeddings=rows, logits=logits, router_gap=mon.min_gap, attempt=attempt)
        if best is None or cand["router_gap"] > best["router_gap"]:
            best = cand
        if best["router_gap"] >= ACCEPT_ROUTER_GAP:
            break
    if geom.moe:
        report.add(name, "soft prompt: min router gap", "PASS" if best["router_gap"] >= ACCEPT_ROUTER_GAP else "WARN",
                   f"{best['router_gap']:.4f} (attempt {best['attempt'] + 1})")
    return best


class _Features(tuple):
    """A tuple of feature tensors that also answers .to() with their concatenation, so the patched
    get_*_features work with both transformers' list-returning and tensor-returning versions."""

    def to(self, *args, **kwargs):
        import torch

        return torch.cat(list(self), dim=0).to(*args, **kwargs)


def conditional_generation_check(name, model_dir, geom, prompt, logits, soft, device, report):
    """Best effort: load the same weights into a Gemma4ForConditionalGeneration without towers, feed the
    soft tokens through transformers' own merge (feature getters patched) and compare."""
    try:
        import torch
        from types import SimpleNamespace
        from safetensors.torch import load_file
        from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

        text_cfg = Gemma4TextConfig.from_pretrained(str(model_dir))
        cfg = Gemma4Config(text_config=text_cfg, vision_config=None, audio_config=None, **geom.placeholder_ids)
        mm = Gemma4ForConditionalGeneration(cfg).float()
        try:
            mm.set_attn_implementation("eager")
        except Exception:
            pass
        if geom.moe:
            rr._set_experts_eager(mm)
        src = load_file(str(model_dir / "model.safetensors"))
        mapped = {"model.language_model." + k[len("model."):]: v.float() for k, v in src.items() if k.startswith("model.")}
        result = mm.load_state_dict(mapped, strict=False)
        missing = [k for k in result.missing_keys if k != "lm_head.weight"]
        if missing or result.unexpected_keys:
            raise RuntimeError(f"load_state_dict: missing {missing[:4]}, unexpected {result.unexpected_keys[:4]}")
        dec = mm.model.language_model
        with torch.no_grad():
            if mm.lm_head.weight.data_ptr() != dec.embed_tokens.weight.data_ptr():
                mm.lm_head.weight.copy_(dec.embed_tokens.weight)
            for emb, dim in ((dec.embed_tokens, geom.hidden_size), (getattr(dec, "embed_tokens_per_layer", None), geom.ple_dim)):
                if emb is not None and hasattr(emb, "embed_scale"):
                    emb.embed_scale.copy_(torch.tensor(dim ** 0.5, dtype=torch.float32))
        mm.to(device).eval()
        dev = rr.model_device(mm)

        out = mm(input_ids=prompt[None].to(dev), use_cache=False)
        report.close(name, "Gemma4ForConditionalGeneration text path == golden logits",
                     out.logits[0], logits, TOL_CACHE)

        kwargs = {}
        valid = (soft["positions"] >= 0) & (soft["positions"] < PROMPT_LEN)
        by_mod = {}
        for key, code in MODALITY_CODE.items():
            sel = valid & (soft["modality"] == code)
            order = torch.argsort(soft["positions"][sel])
            by_mod[key] = soft["embeddings"][sel][order].to(dev)
        if len(by_mod["image_token_id"]):
            feats = by_mod["image_token_id"]
            mm.model.get_image_features = lambda *a, **k: SimpleNamespace(pooler_output=_Features([feats]))
            kwargs["pixel_values"] = torch.zeros(1, 1, device=dev)
        if len(by_mod["video_token_id"]):
            vfeats = by_mod["video_token_id"]
            mm.model.get_video_features = lambda *a, **k: SimpleNamespace(pooler_output=_Features([vfeats]))
            kwargs["pixel_values_videos"] = torch.zeros(1, 1, 1, device=dev)
        if len(by_mod["audio_token_id"]):
            afeats = by_mod["audio_token_id"]
            amask = torch.ones(1, len(afeats), dtype=torch.bool, device=dev)
            mm.model.get_audio_features = lambda *a, **k: SimpleNamespace(pooler_output=afeats[None], attention_mask=amask)
            kwargs["input_features"] = torch.zeros(1, 1, 1, device=dev)
            kwargs["input_features_mask"] = torch.ones(1, 1, dtype=torch.bool, device=dev)
        out = mm(input_ids=soft["ids"][None].to(dev), use_cache=False, **kwargs)
        report.close(name, "Gemma4ForConditionalGeneration merge == emulated soft-token merge",
                     out.logits[0], soft["logits"], TOL_CACHE)
    except Exception as err:  # the ConditionalGeneration internals are version dependent
        report.add(name, "Gemma4ForConditionalGeneration cross-check", "SKIP", f"{type(err).__name__}: {err}")


def generate_model(name, out_dir, args, report):
    import torch

    print(f"\n=== {name}: {MODELS[name]['about']} ===", flush=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    for fname in OUTPUT_FILES:
        (out_dir / fname).unlink(missing_ok=True)
    t0 = time.time()
    create_checkpoint(name, out_dir, args.writer, report)

    model, geom, _ = rr.load_model(out_dir, "float32", args.device)
    print(geometry_table(geom))
    seed = MODELS[name]["seed"]
    P, N = PROMPT_LEN, NUM_NEW

    # ---- text prompt, greedy continuation ----
    best = pick_prompt(model, geom, seed, report, name)
    prompt, tokens = best["prompt"], best["tokens"]
    logits = full_logits(model, geom, prompt)
    seq = torch.cat([prompt, torch.tensor(tokens[:-1], dtype=torch.long)])
    with RouterGapMonitor(model, geom) as mon:
        greedy_logits = full_logits(model, geom, seq)
    router_gap = min(best["router_gap"], mon.min_gap)
    report.close(name, "prompt-only logits == first P rows of greedy_logits", logits, greedy_logits[:P], TOL_CACHE)
    report.equal(name, "greedy (KV cache) == argmax of no-cache recompute", tokens,
                 greedy_logits[P - 1:].argmax(-1).tolist())
    report.close(name, "KV-cache decode logits == no-cache recompute", best["steps"], greedy_logits[P - 1:], TOL_CACHE)
    margin, rel = top2(greedy_logits)
    min_abs, min_rel = margin[P - 1:].min().item(), rel[P - 1:].min().item()
    if min_rel < WARN_REL_MARGIN:
        print(f"WARNING: {name}: min greedy top1-top2 margin {min_rel:.4g} relative is below {WARN_REL_MARGIN}")
    report.add(name, "greedy top1-top2 margin", "PASS" if min_rel >= WARN_REL_MARGIN else "WARN",
               f"min {min_abs:.4f} abs, {min_rel:.4f} rel over the {N} greedy steps")
    if geom.moe:
        report.add(name, "min router top-k gap (prompt+greedy)", "PASS" if router_gap >= ACCEPT_ROUTER_GAP else "WARN",
                   f"{router_gap:.4f}")
    try:
        dev = rr.model_device(model)
        gen = model.generate(input_ids=prompt[None].to(dev), attention_mask=torch.ones(1, P, dtype=torch.long, device=dev),
                             do_sample=False, max_new_tokens=N, pad_token_id=geom.pad_token_id)
        new = gen[0, P:].tolist()
        ok = new == tokens[:len(new)] and (len(new) == N or (new and new[-1] in geom.eos_token_ids))
        report.add(name, "model.generate(do_sample=False) == manual greedy", "PASS" if ok else "FAIL",
                   "" if ok else f"generate {new} vs {tokens}")
    except Exception as err:
        report.add(name, "model.generate(do_sample=False) == manual greedy", "SKIP", f"{type(err).__name__}: {err}")

    # inputs_embeds (+ per_layer_inputs) path, used for the soft tokens, equals the input_ids path
    embeds, ple = rr.merged_inputs(model, geom, prompt)
    extra = {"per_layer_inputs": ple} if ple is not None else {}
    via_embeds = model(inputs_embeds=embeds, use_cache=False, **extra).logits[0]
    report.close(name, "inputs_embeds(+per_layer_inputs) path == input_ids path", via_embeds, logits, TOL_CACHE)

    # ---- soft tokens ----
    soft = make_soft_prompt(model, geom, seed, report, name)
    conditional_generation_check(name, out_dir, geom, prompt, logits, soft, args.device, report)

    # ---- write ----
    vers = versions()
    meta = {
        "model": name, "prompt_len": str(P), "sliding_window": str(WINDOW),
        "computed_with": "Gemma4ForCausalLM.from_pretrained(dtype=float32, attn_implementation='eager') "
                         "of the bf16 model.safetensors; full-sequence forward, no cache",
        "transformers": vers["transformers"], "torch": vers["torch"],
    }
    save_st(out_dir / "golden.safetensors", {
        "prompt_ids": prompt.long(), "logits": logits, "greedy_ids": torch.tensor(tokens, dtype=torch.long),
        "greedy_logits": greedy_logits, "top2_margin": margin,
    }, dict(meta, num_new_tokens=str(N), min_greedy_margin=f"{min_abs:.6g}", min_greedy_rel_margin=f"{min_rel:.6g}",
            greedy_logits_rows="logits after prompt + greedy_ids[:-1]; row P-1+i predicts greedy_ids[i]"))
    save_st(out_dir / "soft_tokens.safetensors", {
        "embeddings": soft["embeddings"], "positions": soft["positions"], "modality": soft["modality"],
    }, {"model": name, "semantics": "e[positions[n]] = embeddings[n] (not scaled) for 0 <= positions[n] < P; "
        "other rows are skipped", "modality": "0 image, 1 video, 2 audio, -1 row to be skipped"})
    save_st(out_dir / "golden_soft.safetensors", {"prompt_ids": soft["ids"].long(), "logits": soft["logits"]},
            dict(meta, **{k: str(v) for k, v in geom.placeholder_ids.items()}, pad_token_id=str(geom.pad_token_id)))

    hs = rr.capture(model, geom, prompt, warn=lambda m: report.add(name, "hidden_states dump", "WARN", m))
    report.close(name, "hidden_states dump logits == golden logits", hs["logits"], logits, TOL_RECOMPUTE)
    rr.save_dump(hs, out_dir / "hidden_states.safetensors", {"model": name, "prompt": "golden.safetensors prompt_ids"})
    hs_soft = rr.capture(model, geom, soft["ids"], soft["positions"], soft["embeddings"],
                         warn=lambda m: report.add(name, "hidden_states_soft dump", "WARN", m))
    report.close(name, "hidden_states_soft dump logits == golden_soft logits", hs_soft["logits"], soft["logits"], TOL_RECOMPUTE)
    rr.save_dump(hs_soft, out_dir / "hidden_states_soft.safetensors",
                 {"model": name, "prompt": "golden_soft.safetensors prompt_ids + soft_tokens.safetensors"})

    info = {
        "model": name, "about": MODELS[name]["about"], "prompt_ids": prompt.tolist(), "greedy_ids": tokens,
        "min_greedy_margin": min_abs, "min_greedy_rel_margin": min_rel,
        "min_router_logit_gap": router_gap if geom.moe else None,
        "layer_types": geom.layer_types, "sliding_window": WINDOW,
        "soft": {"prompt_ids": soft["ids"].tolist(), "positions": soft["positions"].tolist(),
                 "modality": soft["modality"].tolist(), "placeholder_ids": geom.placeholder_ids,
                 "min_router_logit_gap": soft["router_gap"] if geom.moe else None},
        "transformers": vers["transformers"], "torch": vers["torch"],
    }
    (out_dir / "golden_info.json").write_text(json.dumps(info, indent=1) + "\n")
    SUMMARY[name] = dict(info, seconds=round(time.time() - t0, 1),
                         weights_bytes=(out_dir / "model.safetensors").stat().st_size)
    del model


# ------------------------------------------------------------------------------------------------
# Self-check
# ------------------------------------------------------------------------------------------------

def loading_info_problems(info):
    def get(key):
        if isinstance(info, dict):
            return list(info.get(key) or [])
        return list(getattr(info, key, None) or [])

    problems = []
    missing = [k for k in get("missing_keys") if k != "lm_head.weight"]
    if missing:
        problems.append(f"missing {missing[:4]}")
    for key in ("unexpected_keys", "mismatched_keys", "error_msgs"):
        if get(key):
            problems.append(f"{key} {get(key)[:4]}")
    return problems


def check_architecture(name, model, geom, report):
    """Spec facts on the instantiated transformers model."""
    import torch

    dec = rr.text_decoder(model)
    H, nq = geom.hidden_size, geom.num_attention_heads
    problems = []

    def expect(cond, what):
        if not cond:
            problems.append(what)

    expect(len(dec.layers) == geom.num_layers, "layer count")
    shared_model = any(lg.kv_shared for lg in geom.layers)
    for lg, layer in zip(geom.layers, dec.layers):
        i, attn, d = lg.index, layer.self_attn, lg.head_dim
        expect(tuple(attn.q_proj.weight.shape) == (nq * d, H), f"L{i} q_proj shape {tuple(attn.q_proj.weight.shape)}")
        expect(tuple(attn.o_proj.weight.shape) == (H, nq * d), f"L{i} o_proj shape")
        expect(getattr(attn, "head_dim", d) == d, f"L{i} head_dim {getattr(attn, 'head_dim', None)}")
        expect(float(attn.scaling) == 1.0, f"L{i} attention scaling {attn.scaling} (spec 6.3: 1.0)")
        want_window = geom.sliding_window if lg.type == S else None
        expect(getattr(attn, "sliding_window", want_window) == want_window,
               f"L{i} sliding_window {getattr(attn, 'sliding_window', None)}")
        if getattr(attn, "is_kv_shared_layer", None) is not None:
            expect(bool(attn.is_kv_shared_layer) == lg.kv_shared, f"L{i} is_kv_shared_layer")
        if shared_model and getattr(attn, "store_full_length_kv", None) is not None:
            expect(bool(attn.store_full_length_kv) == lg.stores_shared_kv, f"L{i} store_full_length_kv")
        if lg.kv_shared:
            for mod in ("k_proj", "v_proj", "k_norm"):
                expect(getattr(attn, mod, None) is None, f"L{i} kv-shared layer owns {mod}")
        else:
            expect(tuple(attn.k_proj.weight.shape) == (lg.num_kv_heads * d, H), f"L{i} k_proj shape")
            if lg.k_eq_v:
                expect(getattr(attn, "v_proj", None) is None, f"L{i} full layer with k_eq_v has a v_proj")
            else:
                expect(tuple(attn.v_proj.weight.shape) == (lg.num_kv_heads * d, H), f"L{i} v_proj shape")
            expect(getattr(attn.v_norm, "weight", None) is None, f"L{i} v_norm has a weight")
        expect(tuple(layer.mlp.gate_proj.weight.shape) == (lg.intermediate_size, H),
               f"L{i} MLP width {layer.mlp.gate_proj.weight.shape[0]} (want {lg.intermediate_size})")
        expect(tuple(layer.layer_scalar.shape) == (1,), f"L{i} layer_scalar shape")
        if geom.moe:
            E, Im = geom.num_experts, geom.moe_intermediate_size
            expect(tuple(layer.experts.gate_up_proj.shape) == (E, 2 * Im, H), f"L{i} experts.gate_up_proj")
            expect(tuple(layer.experts.down_proj.shape) == (E, H, Im), f"L{i} experts.down_proj")
            expect(tuple(layer.router.proj.weight.shape) == (E, H), f"L{i} router.proj")
        if geom.ple_dim:
            expect(tuple(layer.per_layer_input_gate.weight.shape) == (geom.ple_dim, H), f"L{i} per_layer_input_gate")
    # tied head, embedding scale (fp32 model: fp32 sqrt(H), spec 3.1/14)
    expect(model.lm_head.weight.data_ptr() == dec.embed_tokens.weight.data_ptr(), "lm_head not tied to embed_tokens")
    scale = getattr(dec.embed_tokens, "embed_scale", None)
    if scale is not None:
        expect(float(scale) == float(torch.tensor(H ** 0.5, dtype=torch.float32)), f"embed_scale {float(scale)}")
    # RoPE inverse frequencies (spec 7), incl. proportional zeros
    rot = dec.rotary_emb
    for t in set(geom.layer_types):
        d = next(lg.head_dim for lg in geom.layers if lg.type == t)
        inv = getattr(rot, f"{t}_inv_freq", None)
        want = spec.rope_inv_freq(geom, t, d)
        expect(inv is not None and inv.shape == want.shape and torch.allclose(inv.float().cpu(), want, rtol=1e-6, atol=0),
               f"{t} inv_freq differs from spec 7")
    # RMSNorm multiplies by w (not 1 + w), pow(-0.5) form (spec 4)
    x = torch.randn(3, H, generator=torch.Generator().manual_seed(0)).to(rr.model_device(model))
    y = dec.norm(x).float().cpu()
    want = spec._rms(x.cpu(), dec.norm.weight.detach().cpu(), geom.rms_norm_eps)
    expect(torch.allclose(y, want, atol=1e-6, rtol=1e-6), "RMSNorm is not x * rms^-1 * w")
    report.add(name, "architecture facts on the transformers model", "FAIL" if problems else "PASS",
               "; ".join(problems[:6]))


def self_check_model(name, model_dir, args, report):
    import torch
    from safetensors.torch import load_file

    print(f"\n=== self-check {name} ===", flush=True)
    if not (model_dir / "config.json").exists():
        report.add(name, "model directory", "FAIL", f"{model_dir} has no config.json")
        return
    cfg = json.loads((model_dir / "config.json").read_text())
    geom = spec.derive_geometry(cfg)
    print(geometry_table(geom))
    intended = spec.derive_geometry(config_kwargs(name))
    report.equal(name, "config.json geometry == intended (spec 1.2)", geometry_facts(geom), geometry_facts(intended))
    report.add(name, "config.json head_dim/kv-head form", "INFO",
               "per_layer_config " + json.dumps(cfg["per_layer_config"]) if "per_layer_config" in cfg
               else f"global_head_dim={cfg.get('global_head_dim')}, num_global_key_value_heads={cfg.get('num_global_key_value_heads')}")
    report.equal(name, "config.json dtype", cfg.get("dtype", cfg.get("torch_dtype")), "bfloat16")
    report.equal(name, "config.json architectures", cfg.get("architectures"), ["Gemma4ForCausalLM"])

    # ---- the weight file against spec section 11 ----
    weights = load_file(str(model_dir / "model.safetensors"))
    want = spec.expected_tensor_shapes(geom, "model.")
    problems = [f"missing {k}" for k in want if k not in weights]
    problems += [f"unexpected {k}" for k in weights if k not in want and k != "lm_head.weight"]
    problems += [f"{k} shape {tuple(weights[k].shape)} != {want[k]}" for k in want
                 if k in weights and tuple(weights[k].shape) != want[k]]
    problems += [f"{k} dtype {v.dtype}" for k, v in weights.items() if v.dtype != torch.bfloat16]
    report.add(name, "model.safetensors names/shapes/dtype == spec 11", "FAIL" if problems else "PASS",
               "; ".join(problems[:6]) or f"{len(weights)} tensors, lm_head.weight "
               + ("stored" if "lm_head.weight" in weights else "not stored (tied)"))
    scalars = [round(float(weights[f"model.layers.{i}.layer_scalar"].float()), 4) for i in range(geom.num_layers)]
    report.add(name, "layer_scalar values stored", "PASS" if any(s != 1.0 for s in scalars) else "FAIL", str(scalars))
    for fname in OUTPUT_FILES:
        path = model_dir / fname
        if path.exists() and path.stat().st_size >= MAX_FILE_BYTES:
            report.add(name, f"{fname} size", "FAIL", f"{path.stat().st_size} bytes >= 4 MiB")
    report.add(name, "model.safetensors size", "INFO", f"{(model_dir / 'model.safetensors').stat().st_size} bytes")

    # ---- reload with transformers ----
    model, _, info = rr.load_model(model_dir, "float32", args.device)
    problems = loading_info_problems(info)
    report.add(name, "from_pretrained loading info clean", "FAIL" if problems else "PASS", "; ".join(problems))
    state = model.state_dict()
    bad = [k for k, v in weights.items() if k != "lm_head.weight" and not torch.equal(state[k].float().cpu(), v.float())]
    report.add(name, "loaded fp32 state == file bf16 values", "FAIL" if bad else "PASS", ", ".join(bad[:4]))
    try:
        check_architecture(name, model, geom, report)
    except Exception as err:  # an attribute layout this script does not expect
        traceback.print_exc()
        report.add(name, "architecture facts on the transformers model", "FAIL", f"{type(err).__name__}: {err}")

    # ---- goldens recomputed ----
    golden = load_file(str(model_dir / "golden.safetensors"))
    prompt, greedy = golden["prompt_ids"], golden["greedy_ids"].tolist()
    P = prompt.numel()
    report.close(name, "recompute logits", full_logits(model, geom, prompt), golden["logits"], TOL_RECOMPUTE)
    tokens, steps = greedy_cached(model, prompt, len(greedy))
    report.equal(name, "recompute greedy_ids (KV cache)", tokens, greedy)
    seq = torch.cat([prompt, golden["greedy_ids"][:-1]])
    gl = full_logits(model, geom, seq)
    report.close(name, "recompute greedy_logits", gl, golden["greedy_logits"], TOL_RECOMPUTE)
    report.close(name, "recompute top2_margin", top2(gl)[0], golden["top2_margin"], TOL_RECOMPUTE)
    rel = top2(golden["greedy_logits"])[1][P - 1:].min().item()
    report.add(name, "greedy margin (from file)", "PASS" if rel >= WARN_REL_MARGIN else "WARN", f"min rel {rel:.4f}")
    soft = load_file(str(model_dir / "soft_tokens.safetensors"))
    gsoft = load_file(str(model_dir / "golden_soft.safetensors"))
    soft_logits = full_logits(model, geom, gsoft["prompt_ids"], soft["positions"], soft["embeddings"])
    report.close(name, "recompute golden_soft logits", soft_logits, gsoft["logits"], TOL_RECOMPUTE)
    n_valid = int(((soft["positions"] >= 0) & (soft["positions"] < P)).sum())
    report.equal(name, "soft rows: placeholders covered, 2 rows to skip",
                 (n_valid, len(soft["positions"]) - n_valid),
                 (int(spec.placeholder_mask(geom, gsoft["prompt_ids"]).sum()), 2))

    # ---- independent spec implementation ----
    ref = spec.reference_forward(weights, geom, prompt)
    report.close(name, "spec reference == golden logits", ref["logits"], golden["logits"], TOL_REFERENCE)
    ref_seq = spec.reference_forward(weights, geom, seq)
    report.close(name, "spec reference == golden greedy_logits", ref_seq["logits"], golden["greedy_logits"], TOL_REFERENCE)
    report.equal(name, "spec reference greedy argmax == greedy_ids", ref_seq["logits"][P - 1:].argmax(-1).tolist(), greedy)
    ref_soft = spec.reference_forward(weights, geom, gsoft["prompt_ids"], soft["positions"], soft["embeddings"])
    report.close(name, "spec reference == golden_soft logits", ref_soft["logits"], gsoft["logits"], TOL_REFERENCE)

    # ---- hidden-state dumps: recompute, and locate any spec/transformers divergence ----
    for fname, ids, pos, emb, r in (("hidden_states.safetensors", prompt, None, None, ref),
                                    ("hidden_states_soft.safetensors", gsoft["prompt_ids"], soft["positions"],
                                     soft["embeddings"], ref_soft)):
        dump = load_file(str(model_dir / fname))
        now = rr.capture(model, geom, ids, pos, emb, warn=lambda m: report.add(name, fname, "WARN", m))
        worst = max((now[k] - dump[k].to(now[k].dtype)).abs().max().item() for k in now if k != "input_ids")
        report.add(name, f"recompute {fname}", "PASS" if worst <= TOL_RECOMPUTE else "FAIL", f"max|diff| {worst:.3g}")
        names = ["embeddings"] + [f"layer.{i}" for i in range(geom.num_layers)]
        diffs = [(n, (r["hidden"][j] - dump[n]).abs().max().item()) for j, n in enumerate(names)]
        diffs.append(("final_norm", (r["final_norm"] - dump["final_norm"]).abs().max().item()))
        if geom.ple_dim:
            diffs.insert(1, ("per_layer_inputs", (r["per_layer_inputs"] - dump["per_layer_inputs"]).abs().max().item()))
        first = next((n for n, d in diffs if d > TOL_REFERENCE), None)
        report.add(name, f"spec reference per layer vs {fname}", "PASS" if first is None else "FAIL",
                   f"worst {max(d for _, d in diffs):.3g}" + (f", first diverging: {first}" if first else ""))
    del model


# ------------------------------------------------------------------------------------------------
# MANIFEST
# ------------------------------------------------------------------------------------------------

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def manifest_files(out):
    files = []
    for name in MODELS:
        d = out / name
        if d.is_dir():
            files += sorted(p for p in d.rglob("*") if p.is_file())
    return files


def write_manifest(out, generated, report, device):
    vers = versions()
    lines = [
        "Spark tiny Gemma 4 reference models (tools/reference/make_tiny_models.py)",
        f"generated: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC')}",
        f"command: python3 {' '.join(sys.argv)}",
        "versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()),
        f"device: {device}",
        f"prompt_len {PROMPT_LEN}, greedy tokens {NUM_NEW}, sliding_window {WINDOW}",
        "",
        "models:",
    ]
    for name in generated:
        s = SUMMARY.get(name, {})
        lines.append(f"  {name}: {MODELS[name]['about']}")
        if s:
            gap = s.get("min_router_logit_gap")
            lines.append(f"    weights {s['weights_bytes']} bytes, min greedy margin {s['min_greedy_margin']:.4f} "
                         f"({s['min_greedy_rel_margin']:.4f} rel)" + (f", min router gap {gap:.4f}" if gap is not None else "")
                         + f", {s['seconds']} s")
            lines.append(f"    greedy_ids {s['greedy_ids']}")
    lines += ["", "checks:", report.table(), "", "sha256:"]
    for path in manifest_files(out):
        lines.append(f"{sha256(path)}  {path.stat().st_size:9d}  {path.relative_to(out)}")
    (out / "MANIFEST.txt").write_text("\n".join(lines) + "\n")
    print(f"\nwrote {out / 'MANIFEST.txt'}")


def verify_manifest(out, report):
    path = out / "MANIFEST.txt"
    if not path.exists():
        report.add("all", "MANIFEST.txt sha256", "WARN", "no MANIFEST.txt")
        return
    text = path.read_text().split("\nsha256:\n", 1)
    listed = {}
    for line in (text[1].splitlines() if len(text) == 2 else []):
        parts = line.split()
        if len(parts) == 3:
            listed[parts[2]] = parts[0]
    actual = {str(p.relative_to(out)): sha256(p) for p in manifest_files(out)}
    bad = sorted(k for k in set(listed) | set(actual) if listed.get(k) != actual.get(k))
    report.add("all", "MANIFEST.txt sha256 == files", "FAIL" if bad else "PASS", ", ".join(bad[:6]))


# ------------------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("test/data/models"))
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma list from {', '.join(MODELS)}")
    ap.add_argument("--self-check", action="store_true", help="only verify existing files (no writing)")
    ap.add_argument("--no-self-check", action="store_true", help="generate without the reload self-check")
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda; TF32 is disabled either way")
    ap.add_argument("--writer", choices=("hf", "manual"), default="hf",
                    help="hf: model.save_pretrained (default); manual: config.save_pretrained + safetensors save_file")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown models {unknown}")

    import torch
    import transformers

    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    vers = versions()
    print("versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()))
    if transformers.__version__ != "5.17.0":
        print(f"WARNING: written for transformers 5.17.0, running {transformers.__version__}")

    report = Report()
    crashed = set()
    if not args.self_check:
        for name in names:
            try:
                generate_model(name, args.out / name, args, report)
            except Exception as err:
                traceback.print_exc()
                report.add(name, "generation", "FAIL", f"{type(err).__name__}: {err}")
                crashed.add(name)
    if not args.no_self_check:
        for name in names:
            if name in crashed:
                continue
            try:
                self_check_model(name, args.out / name, args, report)
            except Exception as err:
                traceback.print_exc()
                report.add(name, "self-check", "FAIL", f"{type(err).__name__}: {err}")
    if args.self_check:
        verify_manifest(args.out, report)
    else:
        write_manifest(args.out, names, report, args.device)
    print("\n" + report.table())
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
