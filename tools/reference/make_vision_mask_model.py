#!/usr/bin/env python3
"""Builds test/data/models/tiny-vision: a Gemma4ForConditionalGeneration checkpoint whose text model
is tiny-dense (31B-like, the same bf16 weights) with `use_bidirectional_attention: "vision"`, and
transformers goldens for prompts with images (the vision-bidirectional prefill mask, spec 6.5).

    python3 tools/reference/make_vision_mask_model.py --tiny-dense test/data/models/tiny-dense \
        --out test/data/models/tiny-vision

Needs torch, transformers (written against 5.17.0), safetensors. CPU, a few seconds.

There is no vision tower (vision_config null): the image features are given as soft tokens, fed
through transformers' own merge with get_image_features patched, and the mask comes from
transformers' own `mm_token_type_ids` handling (1 = image token). Every golden is cross-checked
against gemma4_spec.reference_forward with the block mask (an independent fp32 implementation), and
against the same prompt with a causal mask (which must differ: otherwise the test proves nothing).

Writes <out>/:
  config.json, generation_config.json   Gemma4Config (text_config of tiny-dense + the vision mask)
  model.safetensors                     tiny-dense's bf16 tensors named model.language_model.*
  soft_tokens_one.safetensors           embeddings [n,H] f32, positions [n] i64 (one image, 10 tokens)
  golden_one.safetensors                prompt_ids [P] i64, logits [P,V] f32, greedy_ids [N] i64,
                                        greedy_logits [P+N-1,V] f32, top2_margin, causal_logits [P,V]
  soft_tokens_two.safetensors / golden_two.safetensors   the same for two images (6 and 5 tokens)
  golden_info.json, MANIFEST.txt        prompts, block positions, checks, versions, sha256
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import inspect
import json
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemma4_spec as spec  # noqa: E402
import make_tiny_models as tiny  # noqa: E402

PROMPT_LEN = 24
NUM_NEW = 8
TOL_HF = 1e-4  # transformers vs itself (cache vs no cache)
TOL_REFERENCE = 1e-3  # transformers vs the spec implementation (both fp32)
MIN_MASK_EFFECT = 1e-2  # the vision mask must move the logits at least this much (max |diff|)

# Image runs (prompt positions) of the two prompts. The window of tiny-dense is 8: the 10-token
# image is longer than it (the window bound stays one-sided), the two images are separated by text.
PROMPTS = {
    "one": [range(6, 16)],
    "two": [range(3, 9), range(11, 16)],
}


def log(status, check, detail=""):
    print(f"[{status}] {check}: {detail}", flush=True)
    ROWS.append((check, status, detail))


ROWS = []


def close(check, got, want, tol):
    diff = (got.float().cpu() - want.float().cpu()).abs().max().item()
    log("PASS" if diff <= tol else "FAIL", check, f"max|diff| {diff:.3g} (tol {tol:g})")
    return diff


def build_model(text_dir: Path, out_dir: Path):
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

    text_cfg = Gemma4TextConfig.from_pretrained(str(text_dir))
    text_cfg.use_bidirectional_attention = "vision"
    ids = {k: getattr(text_cfg, k) for k in ("image_token_id", "audio_token_id", "video_token_id")}
    cfg = Gemma4Config(text_config=text_cfg, vision_config=None, audio_config=None, **ids)
    cfg.architectures = ["Gemma4ForConditionalGeneration"]
    cfg.dtype = torch.bfloat16
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg.save_pretrained(str(out_dir))
    shutil.copy(text_dir / "generation_config.json", out_dir / "generation_config.json")

    src = load_file(str(text_dir / "model.safetensors"))
    renamed = {"model.language_model." + k[len("model."):]: v for k, v in src.items()}
    save_file({k: v.contiguous() for k, v in renamed.items()}, str(out_dir / "model.safetensors"),
              metadata={"format": "pt"})

    model = Gemma4ForConditionalGeneration.from_pretrained(str(out_dir), dtype=torch.float32)
    try:
        model.set_attn_implementation("eager")
    except Exception:
        pass
    model.eval()
    cfg_text = model.config.text_config
    log("PASS" if cfg_text.use_bidirectional_attention == "vision" else "FAIL",
        "loaded config has use_bidirectional_attention 'vision'", repr(cfg_text.use_bidirectional_attention))
    dec = model.model.language_model
    state = model.state_dict()
    problems = [k for k, v in renamed.items() if k not in state or not torch.equal(state[k].to(torch.bfloat16), v)]
    log("FAIL" if problems else "PASS", "from_pretrained holds the saved bf16 tensors", "; ".join(problems[:4]))
    # The text path of the new checkpoint is tiny-dense: its golden must come out unchanged (no
    # image: the vision mask does not apply).
    golden = load_file(str(text_dir / "golden.safetensors"))
    with torch.no_grad():
        text = model(input_ids=golden["prompt_ids"][None], use_cache=False).logits[0]
    close("text prompt == tiny-dense's golden logits", text, golden["logits"], TOL_HF)
    if dec.embed_tokens.weight.data_ptr() != model.lm_head.weight.data_ptr():
        diff = (dec.embed_tokens.weight - model.lm_head.weight).abs().max().item()
        log("PASS" if diff == 0 else "FAIL", "lm_head tied to embed_tokens", f"max|diff| {diff}")
    return model, spec.derive_geometry(json.loads((out_dir / "config.json").read_text())), renamed


# The forward argument that carries the multimodal token types (transformers 5.17:
# mm_token_type_ids); chosen once by mm_kwarg_name.
TYPE_KWARG = []


def mm_kwarg_name(model):
    if TYPE_KWARG:
        return TYPE_KWARG[0]
    params = inspect.signature(model.forward).parameters
    names = [n for n in ("mm_token_type_ids", "token_type_ids") if n in params]
    log("INFO", "token-type arguments of Gemma4ForConditionalGeneration.forward", str(names))
    TYPE_KWARG.append(names[0] if names else "mm_token_type_ids")
    return TYPE_KWARG[0]


def hf_forward(model, ids, soft_rows, image_token, with_types, cache=None, use_cache=False):
    import torch

    dev = next(model.parameters()).device
    kwargs = {}
    if soft_rows is not None:
        feats = soft_rows.to(dev)
        model.model.get_image_features = lambda *a, **k: SimpleNamespace(pooler_output=tiny._Features([feats]))
        kwargs["pixel_values"] = torch.zeros(1, 1, device=dev)
        if with_types:
            # 1 = image soft token, as Gemma4Processor writes mm_token_type_ids.
            kwargs[mm_kwarg_name(model)] = (ids == image_token).long()[None].to(dev)
    return model(input_ids=ids[None].to(dev), past_key_values=cache, use_cache=use_cache, **kwargs)


def greedy(model, ids, soft_rows, image_token, n):
    """Prefill with the vision mask and transformers' cache, then causal decode (spec 6.5)."""
    out = hf_forward(model, ids, soft_rows, image_token, True, use_cache=True)
    return tiny.greedy_from(model, out, n)


def spec_logits(weights, geom, ids, positions, rows, blocks):
    import torch

    tensors = {k.replace("model.language_model.", "model."): v for k, v in weights.items()}
    return spec.reference_forward(tensors, geom, ids, positions, rows, vision_blocks=blocks)["logits"]


def make_prompt(name, model, geom, weights, seed):
    import torch

    runs = PROMPTS[name]
    gen = torch.Generator().manual_seed(seed)
    allowed = tiny.allowed_ids(geom)
    image_token = geom.placeholder_ids["image_token_id"]
    ids = allowed[torch.randint(len(allowed), (PROMPT_LEN,), generator=gen)]
    ids[0] = geom.bos_token_id
    positions = [p for run in runs for p in run]
    for p in positions:
        ids[p] = image_token
    rows = (torch.randn(len(positions), geom.hidden_size, generator=gen) * tiny.SOFT_STD).to(torch.bfloat16).float()
    blocks = [-1] * PROMPT_LEN
    for b, run in enumerate(runs):
        for p in run:
            blocks[p] = b

    with torch.no_grad():
        logits = hf_forward(model, ids, rows, image_token, True).logits[0].float().cpu()
        causal = hf_forward(model, ids, rows, image_token, False).logits[0].float().cpu()
        effect = (logits - causal).abs().max().item()
        log("PASS" if effect >= MIN_MASK_EFFECT else "FAIL", f"{name}: the vision mask changes transformers' logits",
            f"max|vision - causal| {effect:.3g} (>= {MIN_MASK_EFFECT} wanted)")
        first = int(((logits - causal).abs().amax(-1) > 1e-5).nonzero().flatten()[0]) if effect > 1e-5 else -1
        log("PASS" if first == positions[0] else "FAIL", f"{name}: logits differ from the first image row on",
            f"first differing row {first}, first image row {positions[0]}")
        ref = spec_logits(weights, geom, ids, torch.tensor(positions), rows, blocks)
        close(f"{name}: spec reference with the block mask == transformers", ref, logits, TOL_REFERENCE)
        ref_causal = spec_logits(weights, geom, ids, torch.tensor(positions), rows, None)
        close(f"{name}: spec reference causal == transformers without mm_token_type_ids", ref_causal, causal, TOL_REFERENCE)
        tokens, steps = greedy(model, ids, rows, image_token, NUM_NEW)
        log("FAIL" if image_token in tokens else "PASS", f"{name}: no image token among the greedy ids", str(tokens))
        close(f"{name}: cached prefill last row == full forward", steps[0], logits[-1], TOL_HF)
        # Rows after the prompt: a full forward of prompt + greedy_ids[:-1] with the image types
        # (text tokens after the image are causal either way), cross-checked with the cached run.
        seq = torch.cat([ids, torch.tensor(tokens[:-1], dtype=torch.long)])
        full = hf_forward(model, seq, rows, image_token, True).logits[0].float().cpu()
        close(f"{name}: cached decode == full forward of prompt + greedy ids", steps, full[PROMPT_LEN - 1:], TOL_HF)
    values = full.topk(2, dim=-1).values
    margin = values[:, 0] - values[:, 1]
    log("INFO", f"{name}: greedy ids", f"{tokens}, min top1-top2 margin {margin[PROMPT_LEN - 1:].min().item():.4f}")
    return dict(ids=ids, positions=torch.tensor(positions, dtype=torch.long), rows=rows, logits=logits,
                causal=causal, tokens=tokens, greedy_logits=full, margin=margin, blocks=blocks, runs=runs)


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny-dense", type=Path, default=Path("test/data/models/tiny-dense"))
    ap.add_argument("--out", type=Path, default=Path("test/data/models/tiny-vision"))
    args = ap.parse_args()

    import torch

    torch.manual_seed(0)
    model, geom, weights = build_model(args.tiny_dense, args.out)
    info = {"model": "tiny-vision", "text_model": "tiny-dense", "use_bidirectional_attention": "vision",
            "sliding_window": geom.sliding_window, "layer_types": geom.layer_types, "prompts": {}}
    for i, name in enumerate(PROMPTS):
        p = make_prompt(name, model, geom, weights, seed=1000 + i)
        meta = {"model": "tiny-vision", "prompt": name,
                "computed_with": "Gemma4ForConditionalGeneration.from_pretrained(dtype=float32, eager), image "
                                 "features patched in, mm_token_type_ids = (ids == image_token_id)",
                "greedy_logits_rows": "logits after prompt + greedy_ids[:-1]; row P-1+i predicts greedy_ids[i]"}
        tiny.save_st(args.out / f"soft_tokens_{name}.safetensors",
                     {"embeddings": p["rows"], "positions": p["positions"]},
                     {"model": "tiny-vision", "semantics": "e[positions[n]] = embeddings[n]; each run of "
                      "consecutive positions is one image"})
        tiny.save_st(args.out / f"golden_{name}.safetensors",
                     {"prompt_ids": p["ids"].long(), "logits": p["logits"], "causal_logits": p["causal"],
                      "greedy_ids": torch.tensor(p["tokens"], dtype=torch.long),
                      "greedy_logits": p["greedy_logits"], "top2_margin": p["margin"]}, meta)
        info["prompts"][name] = {"prompt_ids": p["ids"].tolist(),
                                 "image_runs": [[r.start, r.stop - 1] for r in p["runs"]],
                                 "greedy_ids": p["tokens"]}
    vers = tiny.versions()
    info["versions"] = vers
    (args.out / "golden_info.json").write_text(json.dumps(info, indent=1) + "\n")
    failed = any(status == "FAIL" for _, status, _ in ROWS)
    lines = ["Spark tiny-vision reference model (tools/reference/make_vision_mask_model.py)",
             f"generated: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M:%S} UTC",
             "command: python3 tools/reference/make_vision_mask_model.py " + " ".join(sys.argv[1:]),
             "versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()), "", "checks:"]
    lines += [f"  [{s}] {c}: {d}" for c, s, d in ROWS]
    lines += ["", "sha256:"]
    for f in sorted(args.out.iterdir()):
        if f.name != "MANIFEST.txt":
            lines.append(f"  {sha256(f)}  {f.name}")
    (args.out / "MANIFEST.txt").write_text("\n".join(lines) + "\n")
    print("FAILED" if failed else "all checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
