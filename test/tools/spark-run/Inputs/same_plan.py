#!/usr/bin/env python3
"""Checks that spark-run --dump-plan shows what the section's plan buffer holds, as FlatBuffers'
own decoder reads it.

  same_plan.py DUMP.json FLATC.json

DUMP.json: `spark-run MODEL --dump-plan`. FLATC.json: the section's payload decoded by
`flatc --json --strict-json --defaults-json --raw-binary runtime/schema/plan.fbs -- payload`.
The flatc document is rewritten into the dump's shape (docs/plan-format.md: the dump leaves out
absent inputs, parts and defaults, writes arguments as {"kind": value} and blocks as [x, y, z]);
then the two must be equal, f32 literals within flatc's 6 printed digits. Prints
"equal N steps M programs" or exits non-zero naming the first difference.
"""
import json
import math
import sys


def arg_of(arg):
    kind = arg["kind"]
    if kind in ("buffer", "weight", "k_cache", "v_cache", "kv_capacity", "kv_block_table"):
        return {kind: arg["index"]}
    if kind == "null_pointer":
        return {"null": 1}
    if kind in ("num_tokens", "num_soft_tokens"):
        return {kind: 1}
    return {kind: arg[kind]}  # i32, f32


def step_of(step):
    if step["kind_type"] == "Transfer":
        out = {"op": step["kind"]["op"], "transfer": True, "source": step["source"],
               "args": [arg_of(a) for a in step["kind"]["args"]]}
        if step["logits_tail"]:
            out["logits_tail"] = True
        return out
    assert step["kind_type"] == "Launch", step["kind_type"]
    launch = step["kind"]
    out = {"op": launch["op"], "kernel": launch["kernel"], "source": step["source"],
           "grid": launch["grid"],
           "block": [launch["block"][axis] for axis in ("x", "y", "z")],
           "shared_bytes": launch["shared_bytes"],
           "args": [arg_of(a) for a in launch["args"]]}
    if step["logits_tail"]:
        out["logits_tail"] = True
    return out


def weight_of(weight):
    out = {"name": weight["name"], "dtype": weight["dtype"], "shape": weight["shape"]}
    if weight.get("parts"):
        out["parts"] = weight["parts"]
        out["part_shape"] = weight["part_shape"]
    if weight["transform"] != "none":
        out["transform"] = weight["transform"]
    return out


def cache_of(cache):
    out = {"name": cache["name"], "kind": cache["kind"]}
    if cache["kind"] == "sliding" or cache["window"] != 0:
        out["window"] = cache["window"]
    out.update({k: cache[k] for k in ("kv_heads", "head_dim", "dtype")})
    return out


def program_of(program):
    out = {k: program[k] for k in ("name", "min_tokens", "max_tokens")}
    if program["soft_tokens"]:
        out["soft_tokens"] = True
    out["steps"] = program["steps"]
    return out


def model_of(model):
    # The image ids only for a model with an image encoder (-1 otherwise).
    image_ids = ("image_token_id", "boi_token_id", "eoi_token_id")
    return {k: v for k, v in model.items() if k not in image_ids or model["image_token_id"] >= 0}


def dump_shape(plan):
    encoder = plan["inputs"]["pixel_patches"] >= 0
    if encoder:  # the image encoder's own inputs and output only
        inputs = {k: plan["inputs"][k] for k in ("pixel_patches", "patch_positions")}
        outputs = {"embeddings": plan["outputs"]["embeddings"]}
    else:
        inputs = {k: v for k, v in plan["inputs"].items()
                  if k in ("ids", "positions") or (v >= 0 and k not in ("pixel_patches", "patch_positions"))}
        outputs = {k: plan["outputs"][k] for k in ("logits", "tokens")}
    out = {
        "target": plan["target"], "max_tokens": plan["max_tokens"],
        "arena_bytes": plan["arena_bytes"], "activation_precision": plan["activation_precision"],
        "model": model_of(plan["model"]),
        "inputs": inputs,
        "outputs": outputs,
        "buffers": plan["buffers"],
        "weights": [weight_of(w) for w in plan["weights"]],
        "kv_caches": [cache_of(c) for c in plan["kv_caches"]],
        "steps": [step_of(s) for s in plan["steps"]],
        "programs": [program_of(p) for p in plan["programs"]],
    }
    if plan.get("image_encoder"):
        out["image_encoder"] = dump_shape(plan["image_encoder"])
    return out


def compare(a, b, path):
    if isinstance(a, float) or isinstance(b, float):
        if not math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-30):
            sys.exit(f"{path}: dump {a!r}, flatc {b!r}")
    elif isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            sys.exit(f"{path}: dump keys {list(a)}, flatc keys {list(b)}")
        for key in a:
            compare(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            sys.exit(f"{path}: dump has {len(a)} entries, flatc {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            compare(x, y, f"{path}[{i}]")
    elif a != b:
        sys.exit(f"{path}: dump {a!r}, flatc {b!r}")


def main():
    dump = json.load(open(sys.argv[1]))
    flatc = dump_shape(json.load(open(sys.argv[2])))
    compare(dump, flatc, "plan")
    print("equal", len(dump["steps"]), "steps", len(dump["programs"]), "programs")


if __name__ == "__main__":
    main()
