"""Gemma 4 text-decoder facts from /work/shared/docs/gemma4-architecture.md, in plain Python.

This module is shared by the reference tools (make_tiny_models.py, make_full_size.py,
run_reference.py). It has two halves:

* pure Python (no torch import at module level): parsing a config.json into per-layer geometry
  (spec 1.2), the expected checkpoint tensor names/shapes (spec 11), and the random-init rules used
  by the generators. These run anywhere (see test_gemma4_spec.py).
* `reference_forward`: an independent fp32 torch implementation of the forward pass written from
  the spec (sections 2-10), used to cross-check transformers' output. torch is imported lazily.

Section numbers below refer to the architecture document.
"""

from __future__ import annotations

import math
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field

SLIDING = "sliding_attention"
FULL = "full_attention"

# Defaults of transformers' Gemma4TextConfig (configuration_gemma4.py) for keys a config.json may
# omit. Only keys this module reads are listed.
TEXT_CONFIG_DEFAULTS = {
    "vocab_size": 262_144,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 30,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 131_072,
    "rms_norm_eps": 1e-6,
    "pad_token_id": 0,
    "eos_token_id": 1,
    "bos_token_id": 2,
    "tie_word_embeddings": True,
    "rope_parameters": None,
    "attention_bias": False,
    "sliding_window": 512,
    "layer_types": None,
    "final_logit_softcapping": None,
    "use_bidirectional_attention": None,
    "vocab_size_per_layer_input": 262_144,
    "hidden_size_per_layer_input": 256,
    "attention_k_eq_v": False,
    "num_kv_shared_layers": 0,
    "enable_moe_block": False,
    "use_double_wide_mlp": False,
    "num_experts": None,
    "top_k_experts": None,
    "moe_intermediate_size": None,
}

DEFAULT_ROPE_PARAMETERS = {
    SLIDING: {"rope_type": "default", "rope_theta": 10_000.0},
    FULL: {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
}

PLACEHOLDER_KEYS = ("image_token_id", "audio_token_id", "video_token_id")


@dataclass
class LayerGeom:
    index: int
    type: str  # SLIDING or FULL
    head_dim: int
    num_kv_heads: int
    k_eq_v: bool  # no v_proj: V is the raw K projection (spec 6.1)
    kv_shared: bool  # owns no k/v projections and no cache (spec 6.6)
    kv_source: int | None  # for kv_shared layers: the layer whose K/V it reads
    stores_shared_kv: bool  # the source layer of some kv_shared layer
    intermediate_size: int  # dense MLP width (doubled on kv-shared layers with use_double_wide_mlp)


@dataclass
class Geometry:
    hidden_size: int
    vocab_size: int
    num_layers: int
    num_attention_heads: int
    sliding_window: int
    rms_norm_eps: float
    final_logit_softcapping: float | None
    tie_word_embeddings: bool
    ple_dim: int  # hidden_size_per_layer_input (0 = no PLE)
    ple_vocab: int
    moe: bool
    num_experts: int | None
    top_k_experts: int | None
    moe_intermediate_size: int | None
    rope: dict  # layer type -> rope parameter dict
    pad_token_id: int
    bos_token_id: int | None
    eos_token_ids: list
    placeholder_ids: dict  # e.g. {"image_token_id": 509, ...}; empty when none
    use_bidirectional_attention: str | None
    hidden_activation: str
    layers: list = field(default_factory=list)

    @property
    def layer_types(self):
        return [lg.type for lg in self.layers]


def _text_and_top(config: dict):
    """Returns (text_config_dict, top_level_dict) for a CausalLM or a ConditionalGeneration config."""
    if isinstance(config.get("text_config"), dict):
        return config["text_config"], config
    return config, config


def _get(cfg: dict, key: str):
    value = cfg.get(key, TEXT_CONFIG_DEFAULTS.get(key))
    return value


def resolve_layer_types(cfg: dict) -> list:
    n = _get(cfg, "num_hidden_layers")
    types = cfg.get("layer_types")
    if types is None:
        # configuration_gemma4.py: 5 sliding then 1 full.
        types = [SLIDING if (i + 1) % 6 else FULL for i in range(n)]
    types = list(types)
    if len(types) != n:
        raise ValueError(f"layer_types has {len(types)} entries, num_hidden_layers is {n}")
    if types and types[-1] != FULL:
        types[-1] = FULL  # spec 1.2(1): the last layer is forced to full attention
    return types


def derive_geometry(config: dict) -> Geometry:
    """Spec 1.2 applied to a config.json dict (Gemma4TextConfig or Gemma4Config layout).

    Accepts both serialisations:
      * transformers 5.17: `per_layer_config` = {"<layer index, maybe zero-padded>": {"head_dim": ..,
        "num_key_value_heads": ..}}; `global_head_dim`/`num_global_key_value_heads` are absent.
        If `per_layer_config` is present (even `{}`) it is used as is.
      * older/hub (5.5.0.dev0): `global_head_dim`, `num_global_key_value_heads` keys.
    """
    cfg, top = _text_and_top(config)
    n = int(_get(cfg, "num_hidden_layers"))
    types = resolve_layer_types(cfg)
    head_dim = int(_get(cfg, "head_dim"))
    num_kv = int(_get(cfg, "num_key_value_heads"))
    k_eq_v = bool(_get(cfg, "attention_k_eq_v"))

    overrides = {i: {} for i in range(n)}
    if "per_layer_config" in cfg and cfg["per_layer_config"] is not None:
        for key, value in cfg["per_layer_config"].items():
            overrides[int(key)] = dict(value)
    else:
        global_head_dim = cfg.get("global_head_dim", 512)
        num_global_kv = cfg.get("num_global_key_value_heads")
        for i, t in enumerate(types):
            if t == FULL:
                overrides[i]["head_dim"] = global_head_dim
                if k_eq_v and num_global_kv is not None:
                    overrides[i]["num_key_value_heads"] = num_global_kv

    n_shared = int(_get(cfg, "num_kv_shared_layers") or 0)
    first_shared = n - n_shared
    double_wide = bool(_get(cfg, "use_double_wide_mlp"))
    intermediate = int(_get(cfg, "intermediate_size"))

    layers = []
    for i, t in enumerate(types):
        ov = overrides[i]
        shared = n_shared > 0 and i >= first_shared
        source = None
        if shared:
            prev = types[:first_shared]
            if t not in prev:
                raise ValueError(f"kv-shared layer {i} ({t}) has no earlier non-shared layer of its type")
            source = len(prev) - 1 - prev[::-1].index(t)
        layers.append(
            LayerGeom(
                index=i,
                type=t,
                head_dim=int(ov.get("head_dim", head_dim)),
                num_kv_heads=int(ov.get("num_key_value_heads", num_kv)),
                k_eq_v=k_eq_v and t == FULL,
                kv_shared=shared,
                kv_source=source,
                stores_shared_kv=False,
                # modeling_gemma4.Gemma4TextMLP: `layer_idx >= first_kv_shared_layer_idx > 0`
                intermediate_size=intermediate * (2 if (double_wide and i >= first_shared > 0) else 1),
            )
        )
    for lg in layers:
        if lg.kv_source is not None:
            layers[lg.kv_source].stores_shared_kv = True

    moe = bool(_get(cfg, "enable_moe_block"))
    moe_inter = cfg.get("moe_intermediate_size", cfg.get("expert_intermediate_size"))
    rope = cfg.get("rope_parameters") or DEFAULT_ROPE_PARAMETERS
    eos = _get(top, "eos_token_id") if "eos_token_id" in top else _get(cfg, "eos_token_id")
    eos_list = list(eos) if isinstance(eos, (list, tuple)) else ([] if eos is None else [eos])
    placeholders = {}
    for key in PLACEHOLDER_KEYS:
        value = top.get(key, cfg.get(key))
        if value is not None:
            placeholders[key] = int(value)
    ple_dim = int(_get(cfg, "hidden_size_per_layer_input") or 0)

    return Geometry(
        hidden_size=int(_get(cfg, "hidden_size")),
        vocab_size=int(_get(cfg, "vocab_size")),
        num_layers=n,
        num_attention_heads=int(_get(cfg, "num_attention_heads")),
        sliding_window=int(_get(cfg, "sliding_window")),
        rms_norm_eps=float(_get(cfg, "rms_norm_eps")),
        final_logit_softcapping=_get(cfg, "final_logit_softcapping"),
        tie_word_embeddings=bool(top.get("tie_word_embeddings", _get(cfg, "tie_word_embeddings"))),
        ple_dim=ple_dim,
        ple_vocab=int(_get(cfg, "vocab_size_per_layer_input")),
        moe=moe,
        num_experts=int(cfg["num_experts"]) if moe else None,
        top_k_experts=int(cfg["top_k_experts"]) if moe else None,
        moe_intermediate_size=int(moe_inter) if moe else None,
        rope={t: dict(rope[t]) for t in set(types)},
        pad_token_id=int(_get(cfg, "pad_token_id")),
        bos_token_id=_get(cfg, "bos_token_id"),
        eos_token_ids=eos_list,
        placeholder_ids=placeholders,
        use_bidirectional_attention=_get(cfg, "use_bidirectional_attention"),
        hidden_activation=_get(cfg, "hidden_activation"),
        layers=layers,
    )


def expected_tensor_shapes(geom: Geometry, prefix: str = "model.", include_lm_head: bool = False):
    """Checkpoint tensor names and shapes per spec 11 (bf16 in real checkpoints).

    prefix: "model." for Gemma4ForCausalLM, "model.language_model." for Gemma4ForConditionalGeneration.
    lm_head.weight is tied to embed_tokens.weight and normally absent from the file.
    """
    H, V = geom.hidden_size, geom.vocab_size
    nq = geom.num_attention_heads
    out = OrderedDict()
    out[prefix + "embed_tokens.weight"] = (V, H)
    for lg in geom.layers:
        p = f"{prefix}layers.{lg.index}."
        d = lg.head_dim
        out[p + "layer_scalar"] = (1,)
        out[p + "self_attn.q_proj.weight"] = (nq * d, H)
        out[p + "self_attn.q_norm.weight"] = (d,)
        if not lg.kv_shared:
            out[p + "self_attn.k_norm.weight"] = (d,)
            out[p + "self_attn.k_proj.weight"] = (lg.num_kv_heads * d, H)
            if not lg.k_eq_v:
                out[p + "self_attn.v_proj.weight"] = (lg.num_kv_heads * d, H)
        out[p + "self_attn.o_proj.weight"] = (H, nq * d)
        out[p + "mlp.gate_proj.weight"] = (lg.intermediate_size, H)
        out[p + "mlp.up_proj.weight"] = (lg.intermediate_size, H)
        out[p + "mlp.down_proj.weight"] = (H, lg.intermediate_size)
        for norm in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"):
            out[p + norm + ".weight"] = (H,)
        if geom.ple_dim:
            out[p + "per_layer_input_gate.weight"] = (geom.ple_dim, H)
            out[p + "per_layer_projection.weight"] = (H, geom.ple_dim)
            out[p + "post_per_layer_input_norm.weight"] = (H,)
        if geom.moe:
            E, Im = geom.num_experts, geom.moe_intermediate_size
            out[p + "router.proj.weight"] = (E, H)
            out[p + "router.scale"] = (H,)
            out[p + "router.per_expert_scale"] = (E,)
            out[p + "experts.gate_up_proj"] = (E, 2 * Im, H)
            out[p + "experts.down_proj"] = (E, H, Im)
            for norm in ("post_feedforward_layernorm_1", "post_feedforward_layernorm_2",
                         "pre_feedforward_layernorm_2"):
                out[p + norm + ".weight"] = (H,)
    out[prefix + "norm.weight"] = (H,)
    if geom.ple_dim:
        L, Dp = geom.num_layers, geom.ple_dim
        out[prefix + "embed_tokens_per_layer.weight"] = (geom.ple_vocab, L * Dp)
        out[prefix + "per_layer_model_projection.weight"] = (L * Dp, H)
        out[prefix + "per_layer_projection_norm.weight"] = (Dp,)
    if include_lm_head:
        out["lm_head.weight"] = (V, H)
    return out


def count_parameters(shapes) -> int:
    return sum(math.prod(s) for s in shapes.values())


# ------------------------------------------------------------------------------------------------
# Random initialisation rules (shared by the tiny and the full-size generators).
#
# Goals: every tensor is drawn (nothing left at transformers' init: layer_scalar = 1, norms = 1 would
# hide "forgot to load"/"used 1+w" bugs), activations stay O(1), final logits have a spread of
# roughly 4 before the softcap (clear top-1/top-2 gaps) and router logits a spread of roughly 2
# (clear top-k expert choices).
#
# With a tied LM head, a random model whose residual stream is dominated by the token's own
# embedding predicts "the current token" at every position (greedy then repeats the last prompt
# token, a weak test). Two choices avoid that: the post-branch norms (whose outputs are added to
# the stream) get weights around 2.5, and layer_scalar (which scales the whole stream, spec 5) is
# drawn in [0.5, 0.8], so the embedding's share decays layer by layer while each layer adds fresh
# O(1) contributions. Measured with reference_forward on the tiny models: the argmax equals the
# current token at <= 6% of positions (100% with post norms ~1 and layer_scalar ~1).
# ------------------------------------------------------------------------------------------------

def init_rule(name: str, shape: tuple, geom: Geometry):
    """Returns ("normal", mean, std) or ("uniform", low, high) for a checkpoint tensor name."""
    leaf = name.split(".")
    last, module = leaf[-1], (leaf[-2] if len(leaf) > 1 else "")
    if last == "layer_scalar":
        return ("uniform", 0.5, 0.8)
    if module == "router" and last == "per_expert_scale":
        return ("uniform", 0.5, 1.5)
    if module == "router" and last == "scale":
        return ("uniform", 0.8, 1.2)
    if last == "weight" and module in ("q_norm", "k_norm"):
        # q/k are RMS-normalised per head and attention uses scale 1.0 (spec 6.3): a norm weight
        # around 0.5 keeps the score spread near sqrt(head_dim)/4, i.e. soft attention over many
        # keys, so a wrong mask or window changes the output visibly.
        return ("normal", 0.5, 0.05)
    if last == "weight" and module in ("post_attention_layernorm", "post_feedforward_layernorm",
                                       "post_per_layer_input_norm"):
        return ("normal", 2.5, 0.25)  # branch outputs added to the residual stream (see above)
    if last == "weight" and "norm" in module:
        return ("normal", 1.0, 0.1)  # RMSNorm multiplies by w directly (spec 4)
    if name.endswith("embed_tokens_per_layer.weight"):
        return ("normal", 0.0, 1.0 / math.sqrt(geom.ple_dim))  # x sqrt(D_p) -> unit scale
    if name.endswith("embed_tokens.weight") or name == "lm_head.weight":
        return ("normal", 0.0, 4.0 / math.sqrt(geom.hidden_size))  # logits std ~4
    if module == "router" or name.endswith("router.proj.weight"):
        # router input is RMS0(r) * scale / sqrt(H) (rms 1/sqrt(H)) -> logits std ~= this std
        return ("normal", 0.0, 2.0)
    if last in ("gate_up_proj", "down_proj") and len(shape) == 3:
        return ("normal", 0.0, 0.8 / math.sqrt(shape[-1]))
    if last == "weight" and len(shape) == 2:
        return ("normal", 0.0, 0.8 / math.sqrt(shape[1]))
    raise ValueError(f"no init rule for tensor {name} {shape}")


def tensor_seed(base_seed: int, name: str) -> int:
    """Per-tensor seed: independent of iteration order and of sharding."""
    return (base_seed * 1_000_003 + zlib.crc32(name.encode())) % (2**63 - 1)


# ------------------------------------------------------------------------------------------------
# Independent fp32 reference forward (torch), written from the spec, not from transformers.
# ------------------------------------------------------------------------------------------------

def rope_inv_freq(geom: Geometry, layer_type: str, head_dim: int):
    """Spec 7. Built exactly as transformers does (int64 arange -> fp32, base ** (k / d))."""
    import torch

    params = geom.rope[layer_type]
    base = float(params["rope_theta"])
    kind = params.get("rope_type", "default")
    if kind == "default":
        return 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float) / head_dim))
    if kind == "proportional":
        factor = float(params.get("factor", 1.0))
        rotated = int(float(params.get("partial_rotary_factor", 1.0)) * head_dim // 2)
        inv = 1.0 / (base ** (torch.arange(0, 2 * rotated, 2, dtype=torch.int64).to(torch.float) / head_dim))
        if head_dim // 2 - rotated > 0:
            inv = torch.cat([inv, torch.zeros(head_dim // 2 - rotated, dtype=torch.float32)])
        return inv / factor
    raise ValueError(f"rope_type {kind} is not part of the Gemma 4 spec")


def _rms(x, weight, eps):
    import torch

    y = x.float()
    y = y * torch.pow(y.pow(2).mean(-1, keepdim=True) + eps, -0.5)
    if weight is not None:
        y = y * weight.float()
    return y


def _rope(x, cos, sin):
    import torch

    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[:, None, :] + rotated * sin[:, None, :]


def placeholder_mask(geom: Geometry, ids):
    import torch

    mask = torch.zeros_like(ids, dtype=torch.bool)
    for value in geom.placeholder_ids.values():
        mask |= ids == value
    return mask


def reference_forward(tensors: dict, geom: Geometry, ids, soft_positions=None, soft_embeddings=None,
                      prefix: str = "model.", vision_blocks=None):
    """fp32 forward of one sequence (positions 0..S-1, no cache) from checkpoint tensors.

    Returns {"logits": [S, V], "hidden": [embeddings, layer0 out, ..., layer L-1 out],
             "final_norm": [S, H], "per_layer_inputs": [S, L, D_p] or None,
             "router_min_gap": smallest log-prob gap between the k-th and (k+1)-th expert (MoE)}.
    Soft tokens (spec 10): rows with position < 0 or >= S are skipped; every placeholder position
    must receive exactly one row.
    vision_blocks (spec 6.5, only with use_bidirectional_attention "vision"): a block id per
    position (-1: not an image token); on sliding layers a query also sees the later keys of its
    own block (the window bound stays one-sided); full layers stay causal.
    """
    import torch
    import torch.nn.functional as F

    f32 = torch.float32

    def w(name):
        return tensors[prefix + name].to(f32)

    ids = torch.as_tensor(ids, dtype=torch.long).flatten()
    S, H, L, eps = ids.numel(), geom.hidden_size, geom.num_layers, geom.rms_norm_eps
    nq = geom.num_attention_heads

    # ---- embeddings and soft-token merge (spec 3.1, 10) ----
    mm = placeholder_mask(geom, ids)
    text_ids = torch.where(mm, torch.full_like(ids, geom.pad_token_id), ids)
    E = w("embed_tokens.weight")
    e = E[text_ids] * torch.tensor(H ** 0.5, dtype=f32)
    if soft_embeddings is not None:
        pos = torch.as_tensor(soft_positions, dtype=torch.long).flatten()
        rows = torch.as_tensor(soft_embeddings).to(f32)
        valid = (pos >= 0) & (pos < S)
        vpos = pos[valid]
        if sorted(vpos.tolist()) != mm.nonzero().flatten().tolist():
            raise ValueError("soft-token positions do not match the placeholder positions")
        e = e.clone()
        e[vpos] = rows[valid]
    elif bool(mm.any()):
        raise ValueError("prompt has placeholder ids but no soft embeddings were given")

    # ---- per-layer embeddings (spec 3.2) ----
    ple = None
    if geom.ple_dim:
        Dp = geom.ple_dim
        tok = w("embed_tokens_per_layer.weight")[text_ids] * torch.tensor(Dp ** 0.5, dtype=f32)
        tok = tok.view(S, L, Dp)
        ctx = (e @ w("per_layer_model_projection.weight").T) * (H ** -0.5)
        ctx = _rms(ctx.view(S, L, Dp), w("per_layer_projection_norm.weight"), eps)
        ple = (ctx + tok) * (2.0 ** -0.5)

    positions = torch.arange(S)
    router_gap = float("inf")  # smallest log-prob gap between the k-th and (k+1)-th expert
    rope_cache = {}
    hidden = [e]
    kv_by_layer = {}
    h = e
    for lg in geom.layers:
        p = f"layers.{lg.index}."
        d, W = lg.head_dim, geom.sliding_window
        key = (lg.type, d)
        if key not in rope_cache:
            inv = rope_inv_freq(geom, lg.type, d)
            freqs = positions.to(f32)[:, None] * inv[None, :]
            emb = torch.cat([freqs, freqs], dim=-1)
            rope_cache[key] = (emb.cos(), emb.sin())
        cos, sin = rope_cache[key]

        # ---- attention block (spec 5, 6) ----
        r = h
        a = _rms(h, w(p + "input_layernorm.weight"), eps)
        q = (a @ w(p + "self_attn.q_proj.weight").T).view(S, nq, d)
        q = _rope(_rms(q, w(p + "self_attn.q_norm.weight"), eps), cos, sin)
        if lg.kv_shared:
            k, v = kv_by_layer[lg.kv_source]
        else:
            k_raw = (a @ w(p + "self_attn.k_proj.weight").T).view(S, lg.num_kv_heads, d)
            v_raw = k_raw if lg.k_eq_v else (a @ w(p + "self_attn.v_proj.weight").T).view(S, lg.num_kv_heads, d)
            k = _rope(_rms(k_raw, w(p + "self_attn.k_norm.weight"), eps), cos, sin)
            v = _rms(v_raw, None, eps)
            kv_by_layer[lg.index] = (k, v)
        rep = nq // k.shape[1]
        kk = k.repeat_interleave(rep, dim=1)  # query head h uses kv head h // rep (spec 6.2)
        vv = v.repeat_interleave(rep, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, kk)  # scale 1.0 (spec 6.3)
        allowed = positions[None, :] <= positions[:, None]
        if lg.type == SLIDING and vision_blocks is not None:
            if geom.use_bidirectional_attention != "vision":
                raise ValueError("vision_blocks given for a model without the vision mask")
            blk = torch.as_tensor(vision_blocks, dtype=torch.long)
            allowed |= (blk[:, None] == blk[None, :]) & (blk[:, None] >= 0)  # spec 6.5
        if lg.type == SLIDING:
            allowed &= positions[None, :] > positions[:, None] - W  # spec 6.4: W keys incl. self
        scores = scores.masked_fill(~allowed, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        o = torch.einsum("hqk,khd->qhd", probs, vv).reshape(S, nq * d)
        o = o @ w(p + "self_attn.o_proj.weight").T
        h = r + _rms(o, w(p + "post_attention_layernorm.weight"), eps)

        # ---- feed-forward block (spec 5, 8, 9) ----
        r = h
        f = _rms(h, w(p + "pre_feedforward_layernorm.weight"), eps)
        f = (F.gelu(f @ w(p + "mlp.gate_proj.weight").T, approximate="tanh")
             * (f @ w(p + "mlp.up_proj.weight").T)) @ w(p + "mlp.down_proj.weight").T
        if geom.moe:
            f1 = _rms(f, w(p + "post_feedforward_layernorm_1.weight"), eps)
            z = _rms(r, None, eps) * w(p + "router.scale") * (H ** -0.5)
            router_probs = torch.softmax(z @ w(p + "router.proj.weight").T, dim=-1)
            ranked = torch.topk(router_probs, k=geom.top_k_experts + 1, dim=-1).values.clamp_min(1e-30).log()
            router_gap = min(router_gap, (ranked[:, -2] - ranked[:, -1]).min().item())
            top_w, top_i = torch.topk(router_probs, k=geom.top_k_experts, dim=-1)
            top_w = top_w / top_w.sum(dim=-1, keepdim=True)
            top_w = top_w * w(p + "router.per_expert_scale")[top_i]
            x2 = _rms(r, w(p + "pre_feedforward_layernorm_2.weight"), eps)
            gate_up, down = w(p + "experts.gate_up_proj"), w(p + "experts.down_proj")
            Im = geom.moe_intermediate_size
            f2 = torch.zeros_like(x2)
            for t in range(S):
                for j in range(geom.top_k_experts):
                    ex = int(top_i[t, j])
                    u = gate_up[ex] @ x2[t]
                    y = down[ex] @ (F.gelu(u[:Im], approximate="tanh") * u[Im:])
                    f2[t] += top_w[t, j] * y
            f2 = _rms(f2, w(p + "post_feedforward_layernorm_2.weight"), eps)
            f = f1 + f2
        h = r + _rms(f, w(p + "post_feedforward_layernorm.weight"), eps)

        # ---- PLE (spec 3.2) and layer scalar (spec 5) ----
        if geom.ple_dim:
            g = F.gelu(h @ w(p + "per_layer_input_gate.weight").T, approximate="tanh") * ple[:, lg.index, :]
            g = g @ w(p + "per_layer_projection.weight").T
            h = h + _rms(g, w(p + "post_per_layer_input_norm.weight"), eps)
        h = h * w(p + "layer_scalar")
        hidden.append(h)

    final = _rms(h, w("norm.weight"), eps)
    logits = final @ E.T  # tied, unscaled embedding (spec 3.3)
    cap = geom.final_logit_softcapping
    if cap is not None:
        logits = torch.tanh(logits / cap) * cap
    return {"logits": logits, "hidden": hidden, "final_norm": final, "per_layer_inputs": ple,
            "router_min_gap": router_gap}
