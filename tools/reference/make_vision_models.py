#!/usr/bin/env python3
"""Builds two tiny random-weight Gemma4ForConditionalGeneration checkpoints WITH a real (2-layer)
vision tower, two deterministic test images, and transformers goldens for prompts with images.

    python3 tools/reference/make_vision_models.py --data test/data --out test/data

Needs torch, torchvision, Pillow, tokenizers, transformers (written against 5.17.0), safetensors.
CPU, well under a minute.

Models (test/data/models/<name>/):
  tiny-mm-dense  text = tiny-dense (bf16 weights renamed model.* -> model.language_model.*) with
                 use_bidirectional_attention "vision"; vision tower 31B-like but tiny: H 48, FFN 96,
                 2 layers, 4 heads (= KV heads), head_dim 12, standardize, no clipped linears.
  tiny-mm-e2b    text = tiny-e2b (PLE, KV sharing), causal; vision tower E2B-like but tiny: H 32,
                 FFN 64, 2 layers, 2 heads, head_dim 16, clipped linears (finite bf16 0-d bounds,
                 calibrated on the test images so that every bound clips some values), no standardize.
Both: patch 16, pooling kernel 3, position table [2, 10240, H], rope theta 100, eps 1e-6.

Images (test/data/images/): vision_a.png (100x75 RGB) and vision_b.jpg (64x130, quality 90),
"photograph-like" numpy pictures (gradients, a disc, a rectangle, stripes, noise). They are reused
when they exist (--regenerate-images makes new ones), so the goldens stay tied to the stored files.
vision_processed_70.safetensors beside them holds what transformers' Gemma4ImageProcessor
(torchvision backend, the default) and Gemma4ImageProcessorPil (backend "pil") make of them at
max_soft_tokens=70, loaded by path (load_image: EXIF transpose + convert("RGB")): for x in a, b:
  rgb_x                          u8  [H, W, 3]   the decoded picture (load_image)
  <backend>_pixel_bytes_x        u8  [n, 768]    the real patches only (no padding); pixel_values =
                                                 the formula in the metadata (checked bit-exact)
  <backend>_position_ids_x       i64 [n, 2]      (x, y) per real patch
  <backend>_num_soft_tokens_x    i64 [1]
(backend = torchvision, pil; if no formula reproduces a backend's float32 values exactly, that
backend is stored as <backend>_pixel_values_x f32 instead).

Goldens (per model; f32, from_pretrained(dtype=float32), eager attention, CPU), for one image (a)
and for two images (a, b) in one prompt: golden_image_one.safetensors, golden_image_two.safetensors:
  prompt_ids [P] i64, mm_token_type_ids [P] i64, logits [P, V], greedy_ids [8] i64,
  greedy_logits [8, V] (row i: the distribution greedy_ids[i] was taken from, i.e. row P-1+i of a
  no-cache forward of prompt + greedy_ids[:-1]), top2_margin [8], num_soft_tokens [k] i64;
  per image i: position_ids_i [n_i, 2] i64, patch_embeddings_i [n_i, Hv] (patch embedder output,
  real patches), encoder_output_i [n_i, Hv] (encoder output before pooling, real patches),
  pooled_i [s_i, Hv] (vision tower output: pooled, x sqrt(Hv), standardized), soft_tokens_i
  [s_i, Ht] (get_image_features(...).pooler_output: after embed_vision).
  With --golden-pixels u8|f32 the goldens also hold the torchvision pixels of image i
  (pixel_bytes_i u8 or pixel_values_i f32); by default they are only in vision_processed_70.
Plus config.json, generation_config.json, model.safetensors (single file, bf16), golden_info.json,
MANIFEST.txt (checks, versions, sha256).

Prompts are built by hand, as processing_gemma4 expands them: every "<|image|>" of the prompt text
becomes boi + n x image_token + eoi (n = num_soft_tokens of that image); text pieces are encoded with
the tiny tokenizer (tokenizers library), bos prepended. The tiny tokenizers have no "<|image>" /
"<image|>" strings, so boi/eoi are ids of unused pieces (see BOI_EOI) and the processor's own
expansion is cross-checked with a temporary copy of the tokenizer in which those two pieces are
renamed (best effort: reported, never used for the goldens).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemma4_spec as spec  # noqa: E402
import make_tiny_models as tiny  # noqa: E402

MAX_SOFT_TOKENS = 70
NUM_NEW = 8
TOL_SAME = 1e-5  # transformers vs itself, different padding/batching (the brief's 1e-5)
TOL_HF = 1e-4  # transformers vs itself (cache vs no cache, other API paths)
TOL_REFERENCE = 1e-3  # transformers vs the independent fp32 implementation
MIN_CLIP_EFFECT = 1e-3  # the clip bounds must move the soft tokens at least this much
ACCEPT_REL_MARGIN = tiny.ACCEPT_REL_MARGIN
SOFT_STD = tiny.SOFT_STD  # spread of the scaled text embeddings: soft tokens are drawn to match

IMAGES = {  # name -> (file, width, height, seed)
    "a": ("vision_a.png", 100, 75, 101),
    "b": ("vision_b.jpg", 64, 130, 202),
}
PROCESSED_FILE = f"vision_processed_{MAX_SOFT_TOKENS}.safetensors"
JPEG_QUALITY = 90

# boi/eoi ids inside the tiny vocabularies. 512 ids (tiny-dense) have no unused piece: the byte
# tokens <0xFE>/<0xFF> (108 + 254/255) can never come out of UTF-8 text and are used. The 1024-id
# tokenizer has <unused1012>..<unused1020>: the last two are used.
BOI_EOI = {512: (362, 363), 1024: (1019, 1020)}

VISION_COMMON = dict(
    hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6, patch_size=16, pooling_kernel_size=3,
    position_embedding_size=10 * 1024, rope_parameters={"rope_type": "default", "rope_theta": 100.0},
    attention_bias=False, attention_dropout=0.0,
)

MODELS = {
    "tiny-mm-dense": {
        "seed": 21,
        "text": "tiny-dense",
        "tokenizer": "tiny",
        "bidirectional": "vision",
        "about": "31B-like: tiny-dense text with the vision mask; vision H 48, 2 layers, 4 heads x 12, "
                 "standardize, no clipped linears",
        "vision": dict(hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=4, head_dim=12, standardize=True, use_clipped_linears=False),
    },
    "tiny-mm-e2b": {
        "seed": 23,
        "text": "tiny-e2b",
        "tokenizer": "tiny-1024",
        "bidirectional": None,
        "about": "E2B-like: tiny-e2b text (PLE, KV sharing), causal; vision H 32, 2 layers, 2 heads x 16, "
                 "clipped linears (calibrated bf16 bounds), no standardize",
        "vision": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                       num_key_value_heads=2, head_dim=16, standardize=False, use_clipped_linears=True),
    },
}

# Prompt texts: "<|image|>" marks where an image goes (expanded to boi + n x image + eoi). The
# question is searched (in this order) for clear greedy margins.
TEMPLATES = {
    "one": ("a",), "two": ("a", "b"),
}
PROMPT_TEXT = {
    "one": "<|turn>user\n\n\n<|image|>\n\n{q}<turn|>\n<|turn>model\n",
    "two": "<|turn>user\nCompare\n\n<|image|>\n\nwith\n\n<|image|>\n\n{q}<turn|>\n<|turn>model\n",
}
QUESTIONS = (
    "Describe this picture.", "What is in the image?", "Tell me a story about it.", "What color is the sky?",
    "Please answer in one sentence.", "Is there a cat or a dog?", "Hello! How are you?",
    "Thank you very much for your help today.", "What is the capital of France?", "Once upon a time",
)

CLIP_NAMES = ("input_min", "input_max", "output_min", "output_max")

REPORT = tiny.Report()


# ------------------------------------------------------------------------------------------------
# small helpers
# ------------------------------------------------------------------------------------------------

def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def versions():
    out = tiny.versions()
    for mod in ("torchvision", "PIL", "tokenizers"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:
            out[mod] = "n/a"
    return out


def maxdiff(a, b):
    a, b = a.detach().float().cpu(), b.detach().float().cpu()
    if a.shape != b.shape:
        return float("inf")
    return (a - b).abs().max().item() if a.numel() else 0.0


def bf16_round(t):
    import torch

    return t.to(torch.bfloat16).to(torch.float32)


# ------------------------------------------------------------------------------------------------
# images
# ------------------------------------------------------------------------------------------------

def make_photo(width, height, seed):
    """A deterministic "photograph-like" RGB uint8 picture: smooth sky/ground gradients, a soft disc,
    a rectangle, a striped patch, gaussian noise."""
    import numpy as np

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    u, v = x / max(width - 1, 1), y / max(height - 1, 1)
    r = 0.25 + 0.50 * v + 0.15 * np.sin(2 * np.pi * (1.3 * u + 0.1))
    g = 0.35 + 0.35 * (1 - v) + 0.10 * np.cos(2 * np.pi * (0.7 * u + 0.5 * v))
    b = 0.75 - 0.45 * v + 0.10 * np.sin(2 * np.pi * 2.1 * v)
    img = np.stack([r, g, b], axis=-1)
    # a soft-edged disc (a "sun" or "ball")
    cx, cy = rng.uniform(0.3, 0.7) * width, rng.uniform(0.2, 0.5) * height
    rad = 0.2 * min(width, height)
    alpha = np.clip(rad + 1.0 - np.hypot(x - cx, y - cy), 0.0, 1.0)[..., None]
    img = img * (1 - alpha) + rng.uniform(0.2, 1.0, 3) * alpha
    # a rectangle (a "house")
    x0, x1, y0, y1 = int(0.1 * width), int(0.45 * width), int(0.55 * height), int(0.9 * height)
    img[y0:y1, x0:x1] = img[y0:y1, x0:x1] * 0.3 + rng.uniform(0.0, 1.0, 3) * 0.7
    # diagonal stripes (texture) bottom right
    mask = (x > 0.55 * width) & (y > 0.65 * height)
    stripes = 0.75 + 0.25 * np.sign(np.sin(0.9 * (x + y)))
    img[mask] = img[mask] * stripes[mask][:, None]
    img = img + rng.normal(0.0, 0.025, img.shape)
    return np.clip(np.round(img * 255.0), 0, 255).astype(np.uint8)


def ensure_images(data_dir: Path, out_dir: Path, regenerate: bool):
    """Returns {name: path} of the test images in out_dir/images (created or copied from data_dir)."""
    from PIL import Image

    img_out = out_dir / "images"
    img_out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, (fname, w, h, seed) in IMAGES.items():
        dst = img_out / fname
        src = data_dir / "images" / fname
        if not regenerate and src.exists():
            if src.resolve() != dst.resolve():
                shutil.copyfile(src, dst)
            REPORT.add("images", f"{fname}", "INFO", f"reused {src} (sha256 {sha256(dst)[:16]})")
        else:
            arr = make_photo(w, h, seed)
            im = Image.fromarray(arr, "RGB")
            if fname.endswith(".png"):
                im.save(dst, format="PNG")
            else:
                im.save(dst, format="JPEG", quality=JPEG_QUALITY)
            REPORT.add("images", f"{fname}", "INFO", f"created {w}x{h} (sha256 {sha256(dst)[:16]})")
        with Image.open(dst) as im:
            ok = im.size == (w, h) and im.mode == "RGB"
            REPORT.add("images", f"{fname} is {w}x{h} RGB", "PASS" if ok else "FAIL", f"{im.size} {im.mode} {im.format}")
        paths[name] = dst
    return paths


def byte_formulas():
    """Candidate maps from stored bytes b (u8) to the processors' float32 pixel values."""
    import torch

    return {
        "float32(b) * float32(1/255)": lambda b: b.float() * torch.tensor(1 / 255, dtype=torch.float32),
        "float32(b) / float32(255)": lambda b: b.float() / 255.0,
        "float32(float64(b) * (1/255))": lambda b: (b.double() * (1 / 255)).float(),
        "float32(float64(b) / 255)": lambda b: (b.double() / 255.0).float(),
    }


def as_bytes(pv):
    """(bytes u8, formula) if some formula maps the bytes back to exactly pv, else (None, None)."""
    import torch

    b = torch.round(pv.double() * 255.0)
    if not bool(((b >= 0) & (b <= 255)).all()):
        return None, None
    b = b.to(torch.uint8)
    for name, fn in byte_formulas().items():
        if torch.equal(fn(b), pv.float()):
            return b, name
    return None, None


def run_processor(backend, paths):
    """transformers' Gemma4 image processor of that backend on image paths (load_image runs)."""
    import torch
    from transformers import Gemma4ImageProcessor

    if backend == "torchvision":
        proc = Gemma4ImageProcessor(max_soft_tokens=MAX_SOFT_TOKENS)
    else:
        try:
            from transformers import Gemma4ImageProcessorPil
        except ImportError:
            from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil
        proc = Gemma4ImageProcessorPil(max_soft_tokens=MAX_SOFT_TOKENS)
    bases = [c.__name__ for c in type(proc).__mro__[1:3]]
    if backend == "torchvision" and "TorchvisionBackend" not in bases or backend == "pil" and "PilBackend" not in bases:
        REPORT.add("images", f"{backend} processor class", "WARN", f"{type(proc).__name__} bases {bases}")
    try:
        out = proc(images=[str(p) for p in paths], return_tensors="pt")
        how = "paths"
    except Exception as err:  # an older API without fetch_images in preprocess
        from transformers.image_utils import load_image

        REPORT.add("images", f"{backend} processor on paths", "WARN", f"{type(err).__name__}: {err}; using load_image")
        out = proc(images=[load_image(str(p)) for p in paths], return_tensors="pt")
        how = "load_image"
    pv = torch.as_tensor(out["pixel_values"])
    pos = torch.as_tensor(out["image_position_ids"]).long()
    nst = [int(n) for n in out["num_soft_tokens_per_image"]]
    return pv, pos, nst, type(proc).__name__, how


def real_patches(pv, pos, nst, k2=9):
    """Per image: the real rows (first n = num_soft_tokens * 9), after checking the padding."""
    outs = []
    for i, n_soft in enumerate(nst):
        n = n_soft * k2
        pad_ok = bool((pos[i, n:] == -1).all()) and bool((pv[i, n:] == 0).all()) and bool((pos[i, :n] >= 0).all())
        outs.append((pv[i, :n].contiguous(), pos[i, :n].contiguous(), pad_ok))
    return outs


def process_images(paths, out_dir):
    """Runs both backends on each image alone and on (a, b) together; writes PROCESSED_FILE.
    Returns {"tv": {name: (pv_real f32, pos_real i64, n_soft)}, "info": {...}}."""
    import torch
    from transformers.image_utils import load_image

    tensors, meta, info = {}, {}, {"images": {}}
    result = {"torchvision": {}, "pil": {}}
    for backend in ("torchvision", "pil"):
        for name, path in paths.items():
            pv, pos, nst, cls, how = run_processor(backend, [path])
            (rows, rpos, pad_ok), = real_patches(pv, pos, nst)
            REPORT.add("images", f"{backend} {name}: padding rows are (0, -1) and max_patches = {MAX_SOFT_TOKENS * 9}",
                       "PASS" if pad_ok and pv.shape[1] == MAX_SOFT_TOKENS * 9 else "FAIL",
                       f"pixel_values {tuple(pv.shape)} {pv.dtype}, {nst[0]} soft tokens, {cls}, via {how}")
            result[backend][name] = (rows, rpos, nst[0])
        # batch of two == each alone (bitwise)
        pv2, pos2, nst2, _, _ = run_processor(backend, [paths["a"], paths["b"]])
        same = all(torch.equal(r, result[backend][n][0]) and torch.equal(p, result[backend][n][1])
                   for (r, p, _), n in zip(real_patches(pv2, pos2, nst2), ("a", "b")))
        REPORT.add("images", f"{backend}: images (a, b) in one call == each alone", "PASS" if same else "FAIL")

    for name, path in paths.items():
        fname, w, h, _ = IMAGES[name]
        rgb = torch.from_numpy(__import__("numpy").array(load_image(str(path)).convert("RGB"))).contiguous()
        tensors[f"rgb_{name}"] = rgb
        tv_rows, tv_pos, tv_n = result["torchvision"][name]
        pil_rows, pil_pos, pil_n = result["pil"][name]
        wp, hp = int(tv_pos[:, 0].max()) + 1, int(tv_pos[:, 1].max()) + 1
        th, tw = expected_size(h, w)
        REPORT.add("images", f"{name}: patch grid == get_aspect_ratio_preserving_size (spec 7.3)",
                   "PASS" if (hp * 16, wp * 16) == (th, tw) and tv_n == hp * wp // 9 else "FAIL",
                   f"{w}x{h} -> {tw}x{th} ({wp}x{hp} patches, {tv_n} soft tokens)")
        same_pos = torch.equal(tv_pos, pil_pos) and tv_n == pil_n
        REPORT.add("images", f"{name}: torchvision and PIL backends: same positions and soft-token count",
                   "PASS" if same_pos else "FAIL", f"{tv_n} vs {pil_n}")
        d = (tv_rows - pil_rows).abs() if same_pos else None
        diff = d.max().item() if d is not None else float("inf")
        ndiff = int((d > 0).sum()) if d is not None else -1
        REPORT.add("images", f"{name}: max |torchvision - PIL| pixel value", "INFO",
                   f"{diff:.6g} ({diff * 255:.3g}/255), {ndiff} of {tv_rows.numel()} values differ")
        info["images"][name] = {
            "file": fname, "width": w, "height": h, "resized_width": tw, "resized_height": th,
            "patches_x": wp, "patches_y": hp, "num_patches": wp * hp, "num_soft_tokens": tv_n,
            "max_abs_diff_torchvision_vs_pil": diff, "num_values_differing": ndiff,
            "sha256": sha256(path),
        }
        for backend, (rows, rpos, n_soft) in (("torchvision", result["torchvision"][name]), ("pil", result["pil"][name])):
            b, formula = as_bytes(rows)
            if b is not None:
                tensors[f"{backend}_pixel_bytes_{name}"] = b
                meta[f"{backend}_pixel_formula"] = formula
                REPORT.add("images", f"{backend} {name}: pixel_values == {formula} of the stored bytes", "PASS",
                           "bit-exact")
            else:
                tensors[f"{backend}_pixel_values_{name}"] = rows.float()
                REPORT.add("images", f"{backend} {name}: pixel values as bytes", "WARN",
                           "no formula reproduces them exactly: stored float32")
            tensors[f"{backend}_position_ids_{name}"] = rpos.long()
            tensors[f"{backend}_num_soft_tokens_{name}"] = torch.tensor([n_soft], dtype=torch.long)
    info["pixel_formulas"] = {k: v for k, v in meta.items()}
    meta.update({
        "max_soft_tokens": str(MAX_SOFT_TOKENS), "patch_size": "16", "pooling_kernel_size": "3",
        "images": json.dumps({n: IMAGES[n][0] for n in IMAGES}),
        "semantics": "real patches only (no padding rows); row = patch py*Wp+px, element (row*16+col)*3+c; "
                     "position_ids (x, y); rgb_x = load_image(path) (EXIF transpose + convert RGB)",
        "made_by": "tools/reference/make_vision_models.py",
    })
    tiny.save_st(out_dir / "images" / PROCESSED_FILE, tensors, meta)
    info["processed_file"] = PROCESSED_FILE
    return {"tv": result["torchvision"], "pil": result["pil"], "info": info}


def expected_size(height, width, patch=16, k=3, max_soft=MAX_SOFT_TOKENS):
    """get_aspect_ratio_preserving_size (spec 7.3), written out again."""
    max_patches = max_soft * k * k
    factor = math.sqrt(max_patches * patch * patch / (height * width))
    side = k * patch
    th = int(math.floor(factor * height / side)) * side
    tw = int(math.floor(factor * width / side)) * side
    max_side = (max_patches // (k * k)) * side
    if th == 0:
        th, tw = side, min(int(math.floor(width / height)) * side, max_side)
    elif tw == 0:
        tw, th = side, min(int(math.floor(height / width)) * side, max_side)
    return th, tw


# ------------------------------------------------------------------------------------------------
# independent fp32 vision tower (spec sections 2-5), not using transformers' modules
# ------------------------------------------------------------------------------------------------

def reference_vision(W, vc, pv, pos):
    """W: name -> tensor (checkpoint names); vc: vision config dict; pv [N, 768], pos [N, 2] (real
    patches of ONE image). Returns the stages as f32 tensors."""
    import torch
    import torch.nn.functional as F

    f32 = torch.float32
    p = "model.vision_tower."
    H, nh, nkv, hd = vc["hidden_size"], vc["num_attention_heads"], vc["num_key_value_heads"], vc["head_dim"]
    eps, L, k = vc["rms_norm_eps"], vc["num_hidden_layers"], vc["pooling_kernel_size"]
    theta = float(vc["rope_parameters"]["rope_theta"])
    clip = bool(vc["use_clipped_linears"])

    def w(name):
        return W[name].to(f32)

    def lin(x, name):
        if clip:
            x = x.clamp(min=float(w(p + name + ".input_min")), max=float(w(p + name + ".input_max")))
        y = x @ w(p + name + ".linear.weight").T
        if clip:
            y = y.clamp(min=float(w(p + name + ".output_min")), max=float(w(p + name + ".output_max")))
        return y

    pv, pos = pv.to(f32), pos.long()
    N = pv.shape[0]
    x = (2.0 * (pv - 0.5)) @ w(p + "patch_embedder.input_proj.weight").T
    table = w(p + "patch_embedder.position_embedding_table")
    x = x + table[0][pos[:, 0]] + table[1][pos[:, 1]]  # index 0: x (column), 1: y (row)
    patch_embeddings = x

    sd = hd // 2  # channels per spatial axis
    inv = 1.0 / (theta ** (torch.arange(0, sd, 2, dtype=torch.int64).to(f32) / sd))
    cs = []
    for axis in (0, 1):
        freqs = pos[:, axis].to(f32)[:, None] * inv[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        cs.append((emb.cos(), emb.sin()))

    def rope2d(t):  # t [N, heads, hd]: channels [0, sd) rotate with x, [sd, hd) with y (NeoX halves)
        parts = []
        for axis in (0, 1):
            part = t[..., axis * sd:(axis + 1) * sd]
            half = sd // 2
            rot = torch.cat([-part[..., half:], part[..., :half]], dim=-1)
            cos, sin = cs[axis]
            parts.append(part * cos[:, None, :] + rot * sin[:, None, :])
        return torch.cat(parts, dim=-1)

    for i in range(L):
        q = f"encoder.layers.{i}."
        r = x
        a = spec._rms(x, w(p + q + "input_layernorm.weight"), eps)
        Q = rope2d(spec._rms(lin(a, q + "self_attn.q_proj").view(N, nh, hd), w(p + q + "self_attn.q_norm.weight"), eps))
        K = rope2d(spec._rms(lin(a, q + "self_attn.k_proj").view(N, nkv, hd), w(p + q + "self_attn.k_norm.weight"), eps))
        V = spec._rms(lin(a, q + "self_attn.v_proj").view(N, nkv, hd), None, eps)
        rep = nh // nkv
        K, V = K.repeat_interleave(rep, dim=1), V.repeat_interleave(rep, dim=1)
        probs = torch.softmax(torch.einsum("qhd,khd->hqk", Q, K), dim=-1)  # scale 1.0, no mask
        o = lin(torch.einsum("hqk,khd->qhd", probs, V).reshape(N, nh * hd), q + "self_attn.o_proj")
        x = r + spec._rms(o, w(p + q + "post_attention_layernorm.weight"), eps)
        r = x
        f = spec._rms(x, w(p + q + "pre_feedforward_layernorm.weight"), eps)
        f = lin(F.gelu(lin(f, q + "mlp.gate_proj"), approximate="tanh") * lin(f, q + "mlp.up_proj"), q + "mlp.down_proj")
        x = r + spec._rms(f, w(p + q + "post_feedforward_layernorm.weight"), eps)
    encoder_output = x

    wp = int(pos[:, 0].max()) + 1
    idx = pos[:, 0] // k + (wp // k) * (pos[:, 1] // k)
    n_out = N // (k * k)
    pooled = torch.zeros(n_out, H, dtype=f32).index_add_(0, idx, x) / (k * k)
    pooled = pooled * (H ** 0.5)
    if vc["standardize"]:
        pooled = (pooled - w(p + "std_bias")) * w(p + "std_scale")
    soft = spec._rms(pooled, None, eps) @ w("model.embed_vision.embedding_projection.weight").T
    return {"patch_embeddings": patch_embeddings, "encoder_output": encoder_output, "pooled": pooled,
            "soft_tokens": soft}


# ------------------------------------------------------------------------------------------------
# checkpoint
# ------------------------------------------------------------------------------------------------

def vision_init(name, shape, hv, seed):
    """Random value (f32, bf16-rounded) of a vision tensor, or None for clip bounds (calibrated)."""
    import torch

    gen = torch.Generator().manual_seed(spec.tensor_seed(seed, name))
    if name.endswith(CLIP_NAMES):
        return None
    if name.endswith("patch_embedder.input_proj.weight"):
        v = torch.randn(shape, generator=gen) * 0.03
    elif name.endswith("patch_embedder.position_embedding_table"):
        v = torch.randn(shape, generator=gen) * 0.02
    elif name.endswith(".linear.weight"):  # q, k, v, o, gate, up, down
        v = torch.randn(shape, generator=gen) * 0.05
    elif name.endswith(("layernorm.weight", "q_norm.weight", "k_norm.weight")):
        v = 1.0 + torch.randn(shape, generator=gen) * 0.1
    elif name.endswith("vision_tower.std_bias"):
        v = torch.randn(shape, generator=gen) * 2.0
    elif name.endswith("vision_tower.std_scale"):
        v = 0.5 + torch.rand(shape, generator=gen)
    elif name.endswith("embed_vision.embedding_projection.weight"):
        v = torch.randn(shape, generator=gen) * (SOFT_STD / hv ** 0.5)  # soft tokens ~ scaled text embeddings
    else:
        raise ValueError(f"no init rule for {name}")
    return bf16_round(v)


def clippable_modules(model):
    return [(n, m) for n, m in model.model.vision_tower.named_modules() if type(m).__name__ == "Gemma4ClippableLinear"]


class ClipRecorder:
    """Records the pre-clamp inputs and pre-clamp linear outputs of every Gemma4ClippableLinear."""

    def __init__(self, model):
        self.mods = clippable_modules(model)
        self.values = {n: {"in": [], "out": []} for n, _ in self.mods}
        self.handles = []

    def __enter__(self):
        for n, m in self.mods:
            self.handles.append(m.register_forward_pre_hook(
                lambda mod, args, n=n: self.values[n]["in"].append(args[0].detach().float().reshape(-1).clone())))
            self.handles.append(m.linear.register_forward_hook(
                lambda mod, args, out, n=n: self.values[n]["out"].append(out.detach().float().reshape(-1).clone())))
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()

    def cat(self, n, which):
        import torch

        return torch.cat(self.values[n][which])


def calibrate_clips(model, images, seed):
    """Sets every clip bound of the (f32, in-memory) model to a bf16 value at a random quantile of the
    values it sees on the real patches of the test images (bounds at the 0.5-5 % / 95-99.5 % levels)."""
    import torch

    with ClipRecorder(model) as rec, torch.no_grad():
        for rows, pos, _ in images:
            model.model.get_image_features(pixel_values=rows[None], image_position_ids=pos[None], return_dict=True)
    gen = torch.Generator().manual_seed(seed * 7 + 3)
    bounds = {}
    with torch.no_grad():
        for n, m in rec.mods:
            for which, lo_name, hi_name in (("in", "input_min", "input_max"), ("out", "output_min", "output_max")):
                vals = rec.cat(n, which)
                q_lo = 0.005 + 0.045 * float(torch.rand(1, generator=gen))
                q_hi = 0.995 - 0.045 * float(torch.rand(1, generator=gen))
                lo = float(bf16_round(torch.quantile(vals, q_lo)))
                hi = float(bf16_round(torch.quantile(vals, q_hi)))
                if not lo < hi:
                    raise RuntimeError(f"{n}: degenerate clip bounds {lo} {hi}")
                getattr(m, lo_name).fill_(lo)
                getattr(m, hi_name).fill_(hi)
                bounds[f"{n}.{lo_name}"], bounds[f"{n}.{hi_name}"] = lo, hi
    return bounds


def build_checkpoint(name, data_dir, out_dir, processed):
    """Writes config.json, generation_config.json, model.safetensors; returns (weights, vcfg dict, ids)."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig, Gemma4VisionConfig

    m = MODELS[name]
    text_dir = data_dir / "models" / m["text"]
    out_dir.mkdir(parents=True, exist_ok=True)
    text_cfg = Gemma4TextConfig.from_pretrained(str(text_dir))
    text_cfg.use_bidirectional_attention = m["bidirectional"]
    V = text_cfg.vocab_size
    boi, eoi = BOI_EOI[V]
    ids = {"image_token_id": text_cfg.image_token_id, "audio_token_id": text_cfg.audio_token_id,
           "video_token_id": text_cfg.video_token_id, "boi_token_id": boi, "eoi_token_id": eoi}
    special = {text_cfg.pad_token_id, text_cfg.bos_token_id, *(text_cfg.eos_token_id if isinstance(text_cfg.eos_token_id, list) else [text_cfg.eos_token_id])}
    ok = all(0 <= v < V for v in ids.values()) and len(set(ids.values())) == len(ids) and not (set(ids.values()) & special)
    REPORT.add(name, "token ids inside the vocabulary, distinct, not pad/bos/eos", "PASS" if ok else "FAIL",
               f"V={V}, " + ", ".join(f"{k}={v}" for k, v in ids.items()))

    vkw = dict(VISION_COMMON)
    vkw.update(m["vision"])
    hd = vkw["head_dim"]
    REPORT.add(name, "vision head_dim divisible by 4 (two RoPE axes, NeoX halves)", "PASS" if hd % 4 == 0 else "FAIL",
               f"head_dim {hd}: {hd // 2} channels per axis, {hd // 4} frequencies")
    vision_cfg = Gemma4VisionConfig(**vkw)
    cfg = Gemma4Config(text_config=text_cfg, vision_config=vision_cfg, audio_config=None, **ids)
    cfg.architectures = ["Gemma4ForConditionalGeneration"]

    torch.manual_seed(m["seed"])
    model = Gemma4ForConditionalGeneration(cfg).float().eval()
    try:
        model.set_attn_implementation("eager")
    except Exception:
        pass

    src = load_file(str(text_dir / "model.safetensors"))
    text = {"model.language_model." + k[len("model."):]: v for k, v in src.items() if k.startswith("model.")}
    state = model.state_dict()
    wanted = [k for k in state if k != "lm_head.weight"]
    missing_text = [k for k in text if k not in state]
    vision_keys = [k for k in wanted if k not in text]
    odd = [k for k in vision_keys if not k.startswith(("model.vision_tower.", "model.embed_vision."))]
    REPORT.add(name, "text tensors map onto model.language_model.*, the rest is vision",
               "FAIL" if missing_text or odd else "PASS",
               f"{len(text)} text + {len(vision_keys)} vision tensors" + (f"; not in model {missing_text[:3]}" if missing_text else "")
               + (f"; unexpected {odd[:3]}" if odd else ""))
    hv = vkw["hidden_size"]
    values = {}
    with torch.no_grad():
        for k in wanted:
            if k in text:
                values[k] = text[k].float()
            else:
                v = vision_init(k, tuple(state[k].shape), hv, m["seed"])
                values[k] = v if v is not None else state[k].float().clone()
        result = model.load_state_dict(values, strict=False)
        bad = [k for k in result.missing_keys if k != "lm_head.weight"] + list(result.unexpected_keys)
        if bad:
            raise RuntimeError(f"load_state_dict: {bad[:4]}")
        dec = model.model.language_model
        if model.lm_head.weight.data_ptr() != dec.embed_tokens.weight.data_ptr():
            model.lm_head.weight.copy_(dec.embed_tokens.weight)

    bounds = {}
    if vkw["use_clipped_linears"]:
        tv_imgs = [processed["tv"][n] for n in ("a", "b")]
        bounds = calibrate_clips(model, tv_imgs, m["seed"])
        values = {k: v.detach().float().clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}
        finite = all(math.isfinite(v) for v in bounds.values())
        REPORT.add(name, "clip bounds finite (calibrated on the test images)", "PASS" if finite else "FAIL",
                   f"{len(bounds)} bounds, input range [{min(bounds.values()):.3g}, {max(bounds.values()):.3g}]")

    tensors = {k: values[k].to(torch.bfloat16).contiguous() for k in wanted}
    lossy = [k for k in wanted if not torch.equal(tensors[k].float(), values[k])]
    REPORT.add(name, "every stored value is bf16-representable (goldens use exactly these)",
               "FAIL" if lossy else "PASS", ", ".join(lossy[:4]))
    cfg.dtype = torch.bfloat16
    cfg.save_pretrained(str(out_dir))
    complete_vision_config(name, out_dir, cfg)
    shutil.copy(text_dir / "generation_config.json", out_dir / "generation_config.json")
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    size = (out_dir / "model.safetensors").stat().st_size
    REPORT.add(name, "model.safetensors size < 3.2 MB", "PASS" if size < 3.2e6 else "WARN", f"{size} bytes")
    return tensors, json.loads((out_dir / "config.json").read_text()), ids, bounds


VISION_KEYS = ("model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
               "num_key_value_heads", "head_dim", "hidden_activation", "rms_norm_eps", "rope_parameters",
               "pooling_kernel_size", "patch_size", "position_embedding_size", "use_clipped_linears", "standardize",
               "attention_bias", "attention_dropout")


def complete_vision_config(name, out_dir, cfg):
    """save_pretrained may leave class defaults out of vision_config; write every field the vision math
    depends on explicitly (as the hub configs do)."""
    path = out_dir / "config.json"
    doc = json.loads(path.read_text())
    full = cfg.vision_config.to_dict()
    vc = doc.get("vision_config") or {}
    added = [k for k in VISION_KEYS if k not in vc and k in full]
    for k in added:
        vc[k] = full[k]
    doc["vision_config"] = vc
    if added:
        path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    REPORT.add(name, "config.json vision_config lists every vision field", "PASS" if all(k in vc for k in VISION_KEYS) else "FAIL",
               f"added {added}" if added else "all present as written")


def load_model(name, out_dir, tensors):
    import torch
    from transformers import Gemma4ForConditionalGeneration

    model, info = Gemma4ForConditionalGeneration.from_pretrained(
        str(out_dir), dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    model.eval()
    problems = tiny.loading_info_problems(info)
    REPORT.add(name, "from_pretrained loading info clean", "FAIL" if problems else "PASS", "; ".join(problems))
    impls = {"text": getattr(model.model.language_model.config, "_attn_implementation", None),
             "vision": getattr(model.model.vision_tower.config, "_attn_implementation", None)}
    if set(impls.values()) != {"eager"}:
        try:
            model.set_attn_implementation("eager")
        except Exception:
            pass
        impls = {"text": getattr(model.model.language_model.config, "_attn_implementation", None),
                 "vision": getattr(model.model.vision_tower.config, "_attn_implementation", None)}
    REPORT.add(name, "attention implementation eager (text and vision)",
               "PASS" if set(impls.values()) == {"eager"} else "FAIL", str(impls))
    state = model.state_dict()
    bad = [k for k, v in tensors.items() if k not in state or not torch.equal(state[k].float(), v.float())]
    REPORT.add(name, "loaded f32 state (incl. clip/std buffers) == file bf16 values", "FAIL" if bad else "PASS",
               ", ".join(bad[:4]))
    non_f32 = sorted({f"{k}:{v.dtype}" for k, v in state.items() if v.is_floating_point() and v.dtype != torch.float32})
    REPORT.add(name, "all floating state in float32", "PASS" if not non_f32 else "WARN", ", ".join(non_f32[:4]))
    vt = model.model.vision_tower
    inv = vt.encoder.rotary_emb.inv_freq.float().cpu()
    vc = model.config.vision_config
    sd = vc.head_dim // 2
    want = 1.0 / (100.0 ** (torch.arange(0, sd, 2, dtype=torch.int64).float() / sd))
    REPORT.add(name, "vision inv_freq == 1/100^(2j/(head_dim/2)) (spec 3.2)",
               "PASS" if inv.shape == want.shape and torch.allclose(inv, want, rtol=1e-6, atol=0) else "FAIL",
               f"{inv.tolist()} ({vt.encoder.rotary_emb.inv_freq.dtype})")
    return model


# ------------------------------------------------------------------------------------------------
# goldens
# ------------------------------------------------------------------------------------------------

class VisionTaps:
    """Forward hooks on the patch embedder and the encoder (their last outputs)."""

    def __init__(self, model):
        self.vt = model.model.vision_tower
        self.out = {}
        self.handles = []

    def __enter__(self):
        def keep(key):
            def hook(mod, args, out):
                t = out if hasattr(out, "shape") else getattr(out, "last_hidden_state", None)
                if t is None:
                    t = out[0]
                self.out[key] = t
            return hook

        self.handles = [self.vt.patch_embedder.register_forward_hook(keep("patch_embeddings")),
                        self.vt.encoder.register_forward_hook(keep("encoder_output"))]
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()


def as_rows(x):
    """A feature output as one [rows, D] tensor (transformers returns a tensor or a tuple per image)."""
    import torch

    if isinstance(x, (tuple, list)):
        return torch.cat([as_rows(t) for t in x], dim=0)
    return x.reshape(-1, x.shape[-1])


def split_rows(x, counts):
    """Per-image [count_i, D] rows of an output that is a per-image tuple, a padded [B, N, D] batch or
    packed [sum, D] rows."""
    import torch

    if isinstance(x, (tuple, list)):
        parts = [t.reshape(-1, t.shape[-1]) for t in x]
        if len(parts) == len(counts):
            return [t[:c] for t, c in zip(parts, counts)]
        x = torch.cat(parts, dim=0)
    if x.dim() == 3 and x.shape[0] == len(counts):
        return [x[i, :c] for i, c in enumerate(counts)]
    x = x.reshape(-1, x.shape[-1])
    if x.shape[0] == sum(counts):
        return list(torch.split(x, list(counts)))
    if x.shape[0] % len(counts) == 0:
        y = x.reshape(len(counts), -1, x.shape[-1])
        return [y[i, :c] for i, c in enumerate(counts)]
    raise ValueError(f"cannot split {tuple(x.shape)} into {counts}")


FORMS = {}  # what transformers returned (reported once)


def image_features(model, pv, pos, nst):
    """Per image i: soft_tokens [s_i, Ht], pooled [s_i, Hv], patch_embeddings / encoder_output [9 s_i, Hv]."""
    import torch

    with VisionTaps(model) as taps, torch.no_grad():
        out = model.model.get_image_features(pixel_values=pv, image_position_ids=pos, return_dict=True)
    raw = {"soft_tokens": out.pooler_output, "pooled": out.last_hidden_state, **taps.out}
    for k, v in raw.items():
        form = f"tuple of {len(v)} {[tuple(t.shape) for t in v]}" if isinstance(v, (tuple, list)) else str(tuple(v.shape))
        FORMS.setdefault(k, set()).add(form)
    counts = {"soft_tokens": nst, "pooled": nst, "patch_embeddings": [9 * n for n in nst],
              "encoder_output": [9 * n for n in nst]}
    return {k: [t.detach().float().clone() for t in split_rows(v, counts[k])] for k, v in raw.items()}


def build_prompt(tok, text, n_soft, ids):
    """Hand expansion (processing_gemma4): "<|image|>" -> boi + n x image + eoi; bos first."""
    import torch

    pieces = text.split("<|image|>")
    if len(pieces) - 1 != len(n_soft):
        raise ValueError("image count mismatch")
    out = [2]
    for j, piece in enumerate(pieces):
        if piece:
            out += tok.encode(piece, add_special_tokens=False).ids
        if j < len(n_soft):
            out += [ids["boi_token_id"]] + [ids["image_token_id"]] * n_soft[j] + [ids["eoi_token_id"]]
    return torch.tensor(out, dtype=torch.long)


def forward(model, ids, pv, pos, types, cache=False):
    return model(input_ids=ids[None], pixel_values=pv, image_position_ids=pos, mm_token_type_ids=types[None],
                 use_cache=cache)


def greedy(model, ids, pv, pos, types, n):
    import torch

    with torch.no_grad():
        out = forward(model, ids, pv, pos, types, cache=True)
        return tiny.greedy_from(model, out, n)


def spec_logits(weights, geom, ids, soft_rows, image_id, bidirectional):
    import torch

    tensors = {k.replace("model.language_model.", "model."): v for k, v in weights.items()
               if k.startswith("model.language_model.")}
    positions = (ids == image_id).nonzero().flatten()
    blocks = None
    if bidirectional == "vision":
        blocks, b, prev = [-1] * ids.numel(), -1, False
        for p in range(ids.numel()):
            cur = bool(ids[p] == image_id)
            if cur and not prev:
                b += 1
            if cur:
                blocks[p] = b
            prev = cur
    return spec.reference_forward(tensors, geom, ids, positions, soft_rows, vision_blocks=blocks)["logits"]


def processor_crosscheck(name, data_dir, mcfg, ids, text, image_paths, want_ids, want_types, want_pv):
    """Gemma4Processor (text expansion + image processor) with a copy of the tiny tokenizer whose boi/eoi
    pieces are renamed "<|image>" / "<image|>". Best effort: SKIP when the API does not fit."""
    import torch

    check = f"{name}: Gemma4Processor expansion of the prompt string == hand-built ids"
    try:
        import transformers
        from transformers import AutoTokenizer, Gemma4ImageProcessor, Gemma4Processor

        tok_dir = data_dir / "models" / "tokenizers" / MODELS[mcfg]["tokenizer"]
        tmp = Path(tempfile.mkdtemp(prefix="tiny-tok-"))
        tj = json.loads((tok_dir / "tokenizer.json").read_text())
        vocab = tj["model"]["vocab"]
        inv = {v: k for k, v in vocab.items()}
        renames = {ids["boi_token_id"]: "<|image>", ids["eoi_token_id"]: "<image|>"}
        merges = tj["model"].get("merges") or []
        for tid, new in renames.items():
            old = inv[tid]
            if any(old in (m.split(" ") if isinstance(m, str) else m) for m in merges):
                raise RuntimeError(f"{old} is used by a merge")
            del vocab[old]
            vocab[new] = tid
            tj["added_tokens"].append({"id": tid, "content": new, "single_word": False, "lstrip": False,
                                       "rstrip": False, "normalized": False, "special": True})
        tj["added_tokens"].sort(key=lambda t: t["id"])
        (tmp / "tokenizer.json").write_text(json.dumps(tj, ensure_ascii=False))
        tc = json.loads((tok_dir / "tokenizer_config.json").read_text())
        for tid, new in renames.items():
            tc.setdefault("added_tokens_decoder", {})[str(tid)] = {
                "content": new, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
                "special": True}
        tc["extra_special_tokens"] = {"image_token": "<|image|>", "boi_token": "<|image>", "eoi_token": "<image|>",
                                      "audio_token": "<|audio|>", "boa_token": "<|audio>", "eoa_token": "<audio|>"}
        (tmp / "tokenizer_config.json").write_text(json.dumps(tc, indent=1))
        tok = AutoTokenizer.from_pretrained(str(tmp))
        for attr, val in (("image_token", "<|image|>"), ("boi_token", "<|image>"), ("eoi_token", "<image|>"),
                          ("audio_token", "<|audio|>"), ("boa_token", "<|audio>"), ("eoa_token", "<audio|>")):
            if getattr(tok, attr, None) != val:
                try:
                    setattr(tok, attr, val)
                except Exception:
                    pass
        if getattr(tok, "image_token_id", None) != ids["image_token_id"]:
            try:
                tok.image_token_id = ids["image_token_id"]
            except Exception:
                pass

        def instance(suffixes):
            errors = []
            for n in sorted(dir(transformers)):
                if n.startswith("Gemma4") and n.endswith(suffixes):
                    try:
                        return getattr(transformers, n)()
                    except Exception as err:
                        errors.append(f"{n}: {err}")
            raise RuntimeError(f"no Gemma4*{suffixes}: {errors}")

        proc = Gemma4Processor(feature_extractor=instance(("FeatureExtractor",)),
                               image_processor=Gemma4ImageProcessor(max_soft_tokens=MAX_SOFT_TOKENS),
                               tokenizer=tok, video_processor=instance(("VideoProcessor",)))
        out = proc(text=[text], images=[[str(p) for p in image_paths]], return_tensors="pt")
        got = torch.as_tensor(out["input_ids"])[0].long()
        if torch.equal(got, want_ids):
            REPORT.add(name, check, "PASS", f"{got.numel()} ids")
        else:
            n = min(got.numel(), want_ids.numel())
            first = next((i for i in range(n) if int(got[i]) != int(want_ids[i])), n)
            REPORT.add(name, check, "WARN", f"differ from {first}: got {got[first:first + 6].tolist()} "
                       f"want {want_ids[first:first + 6].tolist()} (lengths {got.numel()} / {want_ids.numel()})")
        key = next((k for k in ("mm_token_type_ids", "token_type_ids") if k in out), None)
        if key is not None:
            gt = torch.as_tensor(out[key])[0].long()
            same = gt.shape == want_types.shape and torch.equal(gt, want_types)
            REPORT.add(name, f"{name}: processor {key} == (ids == image_token_id)", "PASS" if same else "WARN",
                       "" if same else f"values {sorted(set(gt.tolist()))}, {int((gt != 0).sum())} non-zero")
        same_pv = torch.equal(torch.as_tensor(out["pixel_values"]).float(), want_pv.float())
        REPORT.add(name, f"{name}: processor pixel_values == Gemma4ImageProcessor's", "PASS" if same_pv else "FAIL")
    except Exception as err:
        REPORT.add(name, check, "SKIP", f"{type(err).__name__}: {str(err)[:300]}")


def clip_checks(name, model, tv_imgs):
    """On the real patches of each test image alone: every bound clips some values, and the bounds
    move the soft tokens (vs +-inf bounds)."""
    import torch

    with ClipRecorder(model) as rec, torch.no_grad():
        clipped = [as_rows(model.model.get_image_features(pixel_values=rows[None], image_position_ids=pos[None],
                                                          return_dict=True).pooler_output).float().clone()
                   for rows, pos, _ in tv_imgs]
    counts = {}
    for n, m in rec.mods:
        vin, vout = rec.cat(n, "in"), rec.cat(n, "out")
        counts[f"{n}.input_min"] = int((vin < float(m.input_min)).sum())
        counts[f"{n}.input_max"] = int((vin > float(m.input_max)).sum())
        counts[f"{n}.output_min"] = int((vout < float(m.output_min)).sum())
        counts[f"{n}.output_max"] = int((vout > float(m.output_max)).sum())
    worst = min(counts, key=counts.get)
    REPORT.add(name, "every clip bound clips some values on the test images (a, b)",
               "PASS" if counts[worst] > 0 else "FAIL",
               f"{len(counts)} bounds; fewest clipped: {counts[worst]} ({worst}); most: {max(counts.values())}")
    saved = {}
    mods = dict(rec.mods)
    with torch.no_grad():
        for n, m in rec.mods:
            for b in CLIP_NAMES:
                saved[(n, b)] = getattr(m, b).clone()
                getattr(m, b).fill_(float("-inf") if b.endswith("min") else float("inf"))
        diffs = []
        for (rows, pos, _), want in zip(tv_imgs, clipped):
            got = as_rows(model.model.get_image_features(pixel_values=rows[None], image_position_ids=pos[None],
                                                         return_dict=True).pooler_output)
            diffs.append(maxdiff(got, want))
        for (n, b), v in saved.items():
            getattr(mods[n], b).copy_(v)
        again = as_rows(model.model.get_image_features(pixel_values=tv_imgs[0][0][None],
                                                       image_position_ids=tv_imgs[0][1][None], return_dict=True).pooler_output)
    restored = maxdiff(again, clipped[0]) == 0.0
    effect = min(diffs)
    REPORT.add(name, "the clip bounds change the soft tokens (vs no clipping)",
               "PASS" if effect >= MIN_CLIP_EFFECT and restored else "FAIL",
               f"max|diff| per image {[f'{d:.3g}' for d in diffs]} (>= {MIN_CLIP_EFFECT} wanted); restored: {restored}")
    return counts


def make_golden(name, model, weights, vcfg, geom, ids, images, processed, kind, tok, data_dir, args):
    """One golden (kind "one" or "two"). Returns (tensors, info)."""
    import torch
    from transformers import Gemma4ImageProcessor

    paths = [images[n] for n in TEMPLATES[kind]]
    # the default (torchvision) processor on the prompt's images, in one call
    proc = Gemma4ImageProcessor(max_soft_tokens=MAX_SOFT_TOKENS)
    bf = proc(images=[str(p) for p in paths], return_tensors="pt")
    pv, pos = torch.as_tensor(bf["pixel_values"]).float(), torch.as_tensor(bf["image_position_ids"]).long()
    nst = [int(n) for n in bf["num_soft_tokens_per_image"]]
    feats = image_features(model, pv, pos, nst)
    soft_all = torch.cat(feats["soft_tokens"], dim=0)
    REPORT.add(name, f"{kind}: soft tokens [sum n_i, Ht]",
               "PASS" if tuple(soft_all.shape) == (sum(nst), geom.hidden_size) else "FAIL",
               f"{tuple(soft_all.shape)}, n = {nst}")
    per_image = []
    for i, (img_name, n_soft) in enumerate(zip(TEMPLATES[kind], nst)):
        n = n_soft * 9
        rows, rpos = pv[i, :n], pos[i, :n]
        entry = {"position_ids": rpos.clone(), "rows": rows,
                 **{k: feats[k][i] for k in ("soft_tokens", "pooled", "patch_embeddings", "encoder_output")}}
        same_in = torch.equal(rows, processed["tv"][img_name][0]) and torch.equal(rpos, processed["tv"][img_name][1])
        REPORT.add(name, f"{kind} image {i} ({img_name}): pixels == {PROCESSED_FILE} torchvision",
                   "PASS" if same_in else "FAIL")
        # Spark runs the real patches only: no padding rows, batch of one
        alone = image_features(model, rows[None], rpos[None], [n_soft])
        d = maxdiff(alone["soft_tokens"][0], entry["soft_tokens"])
        REPORT.add(name, f"{kind} image {i}: unpadded patches alone == padded batch (soft tokens)",
                   "PASS" if d <= TOL_SAME else "FAIL", f"max|diff| {d:.3g} (tol {TOL_SAME:g})")
        d_enc = maxdiff(alone["encoder_output"][0], entry["encoder_output"])
        scale = max(1.0, entry["encoder_output"].abs().max().item())
        REPORT.add(name, f"{kind} image {i}: unpadded == padded (encoder output, real rows; relative)",
                   "PASS" if d_enc <= TOL_SAME * scale else "FAIL",
                   f"max|diff| {d_enc:.3g} (tol {TOL_SAME:g} x max|value| {scale:.3g})")
        entry["unpadded_diff"] = d
        ref = reference_vision(weights, vcfg, rows, rpos)
        diffs = {k: maxdiff(ref[k], entry[k]) for k in ("patch_embeddings", "encoder_output", "pooled", "soft_tokens")}
        first = next((k for k, v in diffs.items() if v > TOL_REFERENCE), None)
        REPORT.add(name, f"{kind} image {i}: spec reference vision tower == transformers, every stage",
                   "PASS" if first is None else "FAIL",
                   ", ".join(f"{k} {v:.2g}" for k, v in diffs.items()) + (f"; first diverging: {first}" if first else ""))
        entry["reference_diffs"] = diffs
        per_image.append(entry)

    # ---- prompt: search the question for clear greedy margins ----
    image_id = ids["image_token_id"]
    banned = {geom.pad_token_id, geom.bos_token_id, *geom.eos_token_ids, *ids.values()}
    best = None
    for qi, q in enumerate(QUESTIONS):
        text = PROMPT_TEXT[kind].format(q=q)
        pids = build_prompt(tok, text, nst, ids)
        types = (pids == image_id).long()
        tokens, steps = greedy(model, pids, pv, pos, types, NUM_NEW)
        rel = tiny.top2(steps)[1].min().item()
        score = rel / ACCEPT_REL_MARGIN - (100.0 if any(t in banned for t in tokens) else 0.0)
        if best is None or score > best["score"]:
            best = dict(score=score, q=q, text=text, ids=pids, types=types, tokens=tokens, steps=steps, attempt=qi)
        if score >= 1.0:
            break
    REPORT.add(name, f"{kind}: prompt question search (greedy margins, no special token generated)",
               "PASS" if best["score"] >= 1.0 else "WARN",
               f"question {best['attempt'] + 1} {best['q']!r}, score {best['score']:.2f} (>= 1 wanted)")
    pids, types, tokens, steps = best["ids"], best["types"], best["tokens"], best["steps"]
    P = pids.numel()
    n_img = int((pids == image_id).sum())
    REPORT.add(name, f"{kind}: image tokens in the prompt == soft tokens", "PASS" if n_img == sum(nst) else "FAIL",
               f"{n_img} vs {sum(nst)}, P = {P}")
    with torch.no_grad():
        logits = forward(model, pids, pv, pos, types).logits[0].float()
        seq = torch.cat([pids, torch.tensor(tokens[:-1], dtype=torch.long)])
        seq_types = torch.cat([types, torch.zeros(NUM_NEW - 1, dtype=torch.long)])
        full = forward(model, seq, pv, pos, seq_types).logits[0].float()
    tiny_close = REPORT.close
    tiny_close(name, f"{kind}: cached prefill last row == full forward", steps[0], logits[-1], TOL_HF)
    tiny_close(name, f"{kind}: prompt rows of the prompt+greedy forward == prompt logits", full[:P], logits, TOL_HF)
    tiny_close(name, f"{kind}: cached greedy decode == full forward of prompt + greedy ids", steps, full[P - 1:], TOL_HF)
    REPORT.equal(name, f"{kind}: greedy ids == argmax of the full forward", tokens, full[P - 1:].argmax(-1).tolist())
    greedy_logits = full[P - 1:].clone()
    margin, rel = tiny.top2(greedy_logits)

    # independent text forward with the soft tokens (and the vision block mask for the dense model)
    try:
        ref = spec_logits(weights, geom, pids, soft_all, image_id, MODELS[name]["bidirectional"])
        tiny_close(name, f"{kind}: spec reference text forward (soft tokens merged) == logits", ref, logits, TOL_REFERENCE)
        ref_seq = spec_logits(weights, geom, seq, soft_all, image_id, MODELS[name]["bidirectional"])
        tiny_close(name, f"{kind}: spec reference == greedy logits", ref_seq[P - 1:], greedy_logits, TOL_REFERENCE)
    except Exception as err:
        REPORT.add(name, f"{kind}: spec reference text forward", "FAIL", f"{type(err).__name__}: {err}")
    if MODELS[name]["bidirectional"] == "vision":
        with torch.no_grad():
            causal = model(input_ids=pids[None], pixel_values=pv, image_position_ids=pos, use_cache=False).logits[0]
        effect = maxdiff(causal, logits)
        REPORT.add(name, f"{kind}: the vision mask changes the logits (vs no mm_token_type_ids)",
                   "PASS" if effect >= 1e-2 else "FAIL", f"max|diff| {effect:.3g}")

    # transformers' generate
    try:
        with torch.no_grad():
            gen = model.generate(input_ids=pids[None], attention_mask=torch.ones(1, P, dtype=torch.long),
                                 pixel_values=pv, image_position_ids=pos, mm_token_type_ids=types[None],
                                 do_sample=False, max_new_tokens=NUM_NEW, pad_token_id=geom.pad_token_id)
        new = gen[0, P:].tolist()
        ok = new == tokens[:len(new)] and (len(new) == NUM_NEW or (new and new[-1] in geom.eos_token_ids))
        REPORT.add(name, f"{kind}: model.generate(do_sample=False) == manual greedy", "PASS" if ok else "FAIL",
                   "" if ok else f"generate {new} vs {tokens}")
    except Exception as err:
        REPORT.add(name, f"{kind}: model.generate(do_sample=False) == manual greedy", "SKIP",
                   f"{type(err).__name__}: {str(err)[:200]}")

    processor_crosscheck(name, data_dir, name, ids, best["text"], paths, pids, types, pv)

    tensors = {"prompt_ids": pids, "mm_token_type_ids": types, "logits": logits, "greedy_ids":
               torch.tensor(tokens, dtype=torch.long), "greedy_logits": greedy_logits, "top2_margin": margin,
               "num_soft_tokens": torch.tensor(nst, dtype=torch.long)}
    for i, e in enumerate(per_image):
        for k in ("position_ids", "patch_embeddings", "encoder_output", "pooled", "soft_tokens"):
            tensors[f"{k}_{i}"] = e[k]
        if args.golden_pixels == "u8":
            b, _ = as_bytes(e["rows"])
            if b is not None:
                tensors[f"pixel_bytes_{i}"] = b
            else:
                tensors[f"pixel_values_{i}"] = e["rows"].float()
        elif args.golden_pixels == "f32":
            tensors[f"pixel_values_{i}"] = e["rows"].float()
    info = {"question": best["q"], "prompt_text": best["text"], "images": [IMAGES[n][0] for n in TEMPLATES[kind]],
            "num_soft_tokens": nst, "prompt_len": P, "prompt_ids": pids.tolist(),
            "image_runs": runs_of(pids, image_id), "greedy_ids": tokens,
            "min_greedy_margin": margin.min().item(), "min_greedy_rel_margin": rel.min().item(),
            "unpadded_vs_padded_soft_token_diff": [e["unpadded_diff"] for e in per_image],
            "reference_vision_diffs": [e["reference_diffs"] for e in per_image]}
    return tensors, info


def runs_of(ids, token):
    runs, start = [], None
    for p, v in enumerate(ids.tolist() + [None]):
        if v == token and start is None:
            start = p
        elif v != token and start is not None:
            runs.append([start, p - 1])
            start = None
    return runs


def generate_model(name, args, images, processed):
    import torch
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    print(f"\n=== {name}: {MODELS[name]['about']} ===", flush=True)
    out_dir = args.out / "models" / name
    if out_dir.exists():
        for f in out_dir.iterdir():
            if f.is_file():
                f.unlink()
    tensors, config, ids, bounds = build_checkpoint(name, args.data, out_dir, processed)
    model = load_model(name, out_dir, tensors)
    geom = spec.derive_geometry(config)
    vcfg = model.config.vision_config.to_dict()
    REPORT.add(name, "loaded vision config == config.json vision_config",
               "PASS" if all(vcfg.get(k) == v for k, v in config["vision_config"].items()
                             if k in VISION_KEYS) else "FAIL")
    tok = Tokenizer.from_file(str(args.data / "models" / "tokenizers" / MODELS[name]["tokenizer"] / "tokenizer.json"))
    names = {k: tok.id_to_token(v) for k, v in ids.items()}
    REPORT.add(name, "tokenizer pieces of the token ids", "INFO", json.dumps(names, ensure_ascii=False))

    # the text path is the text model's (its golden must come out unchanged)
    golden = load_file(str(args.data / "models" / MODELS[name]["text"] / "golden.safetensors"))
    with torch.no_grad():
        text_logits = model(input_ids=golden["prompt_ids"][None], use_cache=False).logits[0]
    REPORT.close(name, f"text-only prompt == {MODELS[name]['text']}'s golden logits", text_logits, golden["logits"], TOL_HF)

    weights = {k: v.float() for k, v in tensors.items()}
    info = {"model": name, "about": MODELS[name]["about"], "text_model": MODELS[name]["text"],
            "use_bidirectional_attention": MODELS[name]["bidirectional"], "token_ids": ids,
            "token_pieces": names, "bos_token_id": geom.bos_token_id, "eos_token_ids": geom.eos_token_ids,
            "pad_token_id": geom.pad_token_id, "vision_config": vcfg, "max_soft_tokens": MAX_SOFT_TOKENS,
            "images_dir": "test/data/images", "processed_file": PROCESSED_FILE, "goldens": {}}
    for kind in ("one", "two"):
        t, gi = make_golden(name, model, weights, vcfg, geom, ids, images, processed, kind, tok, args.data, args)
        meta = {"model": name, "prompt": kind, "images": json.dumps(gi["images"]),
                "computed_with": "Gemma4ForConditionalGeneration.from_pretrained(dtype=float32, attn_implementation="
                                 "'eager') on CPU; pixels from Gemma4ImageProcessor (torchvision backend) "
                                 f"max_soft_tokens={MAX_SOFT_TOKENS}, images loaded by path",
                "pixels": f"test/data/images/{PROCESSED_FILE}: torchvision_pixel_bytes_<image> (real patches)",
                "greedy_logits_rows": "row i: logits at position P-1+i of a no-cache forward of prompt + "
                                      "greedy_ids[:-1]; greedy_ids[i] = argmax(row i)",
                "prompt_text": gi["prompt_text"], "num_soft_tokens": json.dumps(gi["num_soft_tokens"]),
                "image_token_id": str(ids["image_token_id"]), "boi_token_id": str(ids["boi_token_id"]),
                "eoi_token_id": str(ids["eoi_token_id"])}
        tiny.save_st(out_dir / f"golden_image_{kind}.safetensors", t, meta)
        info["goldens"][kind] = gi
    REPORT.add(name, "shapes transformers returned (get_image_features, hooks)", "INFO",
               "; ".join(f"{k}: {sorted(v)}" for k, v in FORMS.items()))
    FORMS.clear()
    if bounds:
        counts = clip_checks(name, model, [processed["tv"][n] for n in ("a", "b")])
        info["clip_bounds"] = bounds
        info["clip_counts_image_a"] = counts
    return out_dir, info


def write_manifest(name, out_dir, info, args):
    vers = versions()
    info["versions"] = vers
    rows = [r for r in REPORT.rows if r[0] in (name, "images")]
    info["checks"] = [{"scope": m, "check": c, "status": s, "detail": d} for m, c, s, d in rows]
    (out_dir / "golden_info.json").write_text(json.dumps(info, indent=1, default=str) + "\n")
    lines = [f"Spark {name} reference model (tools/reference/make_vision_models.py)",
             f"generated: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M:%S} UTC",
             "command: python3 tools/reference/make_vision_models.py " + " ".join(sys.argv[1:]),
             "versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()),
             f"about: {MODELS[name]['about']}", "", "checks:"]
    lines += [f"  [{s}] {m}: {c}: {d}" for m, c, s, d in rows]
    lines += ["", "sha256:"]
    for f in sorted(out_dir.iterdir()):
        if f.is_file() and f.name != "MANIFEST.txt":
            lines.append(f"  {sha256(f)}  {f.stat().st_size:9d}  {f.name}")
    img_dir = args.out / "images"
    for fname in sorted([v[0] for v in IMAGES.values()] + [PROCESSED_FILE]):
        f = img_dir / fname
        if f.exists():
            lines.append(f"  {sha256(f)}  {f.stat().st_size:9d}  ../../images/{fname}")
    (out_dir / "MANIFEST.txt").write_text("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("test/data"), help="reads models/<text>, models/tokenizers, images/")
    ap.add_argument("--out", type=Path, default=Path("test/data"), help="writes models/<name>/ and images/")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--regenerate-images", action="store_true", help="draw the test images anew even if they exist")
    ap.add_argument("--golden-pixels", choices=("none", "u8", "f32"), default="none",
                    help="also store the torchvision pixels in the goldens (default: only in images/" + PROCESSED_FILE + ")")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown models {unknown}")

    import torch
    import transformers

    torch.set_grad_enabled(False)
    torch.set_float32_matmul_precision("highest")
    vers = versions()
    print("versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()), flush=True)
    if transformers.__version__ != "5.17.0":
        print(f"WARNING: written for transformers 5.17.0, running {transformers.__version__}")

    images = ensure_images(args.data, args.out, args.regenerate_images)
    processed = process_images(images, args.out)
    for name in names:
        try:
            out_dir, info = generate_model(name, args, images, processed)
            info["images"] = processed["info"]
            write_manifest(name, out_dir, info, args)
        except Exception as err:
            traceback.print_exc()
            REPORT.add(name, "generation", "FAIL", f"{type(err).__name__}: {err}")
    print("\n" + REPORT.table())
    failed = REPORT.failed
    print("FAILED" if failed else "all checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
