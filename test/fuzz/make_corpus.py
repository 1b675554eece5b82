#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer targets (test/fuzz/corpus/<target>/) from the real
test files: the tiny models' configs and checkpoints, the released configs, and the plans of the
tiny models as spark-compile writes them. Deterministic; rerun after a plan format change:

    python3 test/fuzz/make_corpus.py --build build

(needs build/bin/spark-import and spark-compile, and llvm-objcopy from LLVM 22).
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODELS = ["tiny-dense", "tiny-moe", "tiny-e2b", "tiny-vision"]
OBJCOPY = "/usr/lib/llvm-22/bin/llvm-objcopy"


def put(target, name, data):
    directory = os.path.join(HERE, "corpus", target)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def minimal_cuda_elf(sections):
    """An ELF64 little-endian EM_CUDA relocatable with the given (name, bytes) sections."""
    names = b"\0" + b"".join(name.encode() + b"\0" for name, _ in sections) + b".shstrtab\0"
    body = b""
    layout = []  # (name offset, file offset, size)
    offset = 64
    name_offset = 1
    for name, data in sections:
        layout.append((name_offset, offset + len(body), len(data)))
        body += data
        name_offset += len(name) + 1
    shstrtab_offset = offset + len(body)
    body += names
    while (offset + len(body)) % 8:
        body += b"\0"
    shoff = offset + len(body)
    count = len(sections) + 2
    header = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header += struct.pack("<HHIQQQIHHHHHH", 1, 190, 1, 0, 0, shoff, 0, 64, 0, 0, 64, count,
                          count - 1)
    headers = bytes(64)  # SHT_NULL
    for name_off, file_off, size in layout:
        headers += struct.pack("<IIQQQQIIQQ", name_off, 1, 0, 0, file_off, size, 0, 0, 1, 0)
    headers += struct.pack("<IIQQQQIIQQ", name_offset, 3, 0, 0, shstrtab_offset, len(names), 0, 0,
                           1, 0)
    return header + body + headers


def safetensors(tensors, metadata=None):
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def compiled_plan(build, tmp, mlir, name, *options):
    """The .spark.plan section of `mlir` compiled for sm_90a with `options`, and the cubin's path."""
    cubin = os.path.join(tmp, name + ".cubin")
    plan = os.path.join(tmp, name + ".plan")
    subprocess.run([os.path.join(build, "bin", "spark-compile"), mlir, "--target", "sm_90a",
                    *options, "-o", cubin], check=True)
    # llvm-objcopy rewrites its input when given no output file (and its rewrite of a cubin no
    # longer loads correctly): write the copy elsewhere.
    subprocess.run([OBJCOPY, "--dump-section", ".spark.plan=" + plan, cubin,
                    os.path.join(tmp, name + ".objcopy.cubin")], check=True)
    with open(plan, "rb") as f:
        return f.read(), cubin


def imported(build, tmp, checkpoint, name):
    mlir = os.path.join(tmp, name + ".mlir")
    subprocess.run([os.path.join(build, "bin", "spark-import"), checkpoint, "-o", mlir],
                   check=True, stdout=subprocess.DEVNULL)
    return mlir


def payload(section):
    """The plan buffer a section's header frames (FlatBuffers bytes may end in zeros: the header's
    size says where the padding starts)."""
    (size,) = struct.unpack("<Q", section[16:24])
    return section[32:32 + size]


def plan_seeds(build):
    with tempfile.TemporaryDirectory() as tmp:
        for model in MODELS:
            mlir = imported(build, tmp, os.path.join(ROOT, "test", "data", "models", model), model)
            section, cubin = compiled_plan(build, tmp, mlir, model)
            put("fuzz_plan_section", model + "-raw", b"\0" + section)
            put("fuzz_plan_section", model + "-payload", b"\1" + payload(section))
            put("fuzz_plan_execution", model + ".plan", payload(section))
            put("fuzz_cubin", model + "-plan-only.cubin",
                minimal_cuda_elf([(".spark.plan", section)]))
            if model == "tiny-dense":
                with open(cubin, "rb") as f:
                    put("fuzz_cubin", model + ".sm_90a.cubin", f.read())
            if model == "tiny-moe":
                # A plan with bf16 activation storage (bf16 buffers, f32 workspaces).
                section, _ = compiled_plan(build, tmp, mlir, model + "-act-bf16",
                                           "--activation-precision", "bf16")
                put("fuzz_plan_section", model + "-act-bf16-raw", b"\0" + section)
                put("fuzz_plan_execution", model + ".act-bf16.plan", payload(section))
        # Plans with quantized linears (linear_nvfp4, linear_fp8 and their f4E2M1FN / f8E4M3FN /
        # f32 weights), from tiny-dense's config with a ModelOpt quantization_config; and a
        # compressed-tensors NVFP4 one (weight_global_scale weights with "transform":
        # "reciprocal").
        quantizations = [("tiny-dense-" + algo.lower(),
                          {"quant_method": "modelopt", "quant_algo": algo, "ignore": ["lm_head"]})
                         for algo in ("NVFP4", "FP8")]
        quantizations.append(("tiny-dense-ct-nvfp4", {
            "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                "num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}}},
            "ignore": ["lm_head"]}))
        for name, quantization in quantizations:
            qdir = os.path.join(tmp, name)
            os.makedirs(qdir)
            with open(os.path.join(ROOT, "test", "data", "models", "tiny-dense", "config.json")) as f:
                config = json.load(f)
            config["quantization_config"] = quantization
            with open(os.path.join(qdir, "config.json"), "w") as f:
                json.dump(config, f)
            section, _ = compiled_plan(build, tmp, imported(build, tmp, qdir, name), name)
            put("fuzz_plan_section", name + "-raw", b"\0" + section)
            put("fuzz_plan_execution", name + ".plan", payload(section))
            put("fuzz_gemma_config", name + ".json", json.dumps(config).encode())
        # A compressed-tensors FP8 (W8A8, FP8 KV cache) config: the fields spark-import reports.
        config["quantization_config"] = {
            "quant_method": "compressed-tensors", "format": "float-quantized",
            "config_groups": {"group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                "input_activations": {"num_bits": 8, "type": "float", "strategy": "token",
                                      "dynamic": True}}},
            "ignore": ["lm_head"], "kv_cache_scheme": {"num_bits": 8, "type": "float"}}
        put("fuzz_gemma_config", "tiny-dense-compressed-fp8.json", json.dumps(config).encode())
        put("fuzz_cubin", "no-plan.cubin", minimal_cuda_elf([(".text", b"\0" * 16)]))


def safetensors_seeds():
    put("fuzz_safetensors", "two-tensors", safetensors([
        ("a", "BF16", [2, 3], bytes(range(12))),
        ("b", "F32", [3], bytes(range(12)))], {"format": "pt"}))
    put("fuzz_safetensors", "scalar-and-empty", safetensors([
        ("s", "I64", [], bytes(8)), ("e", "F16", [0, 4], b"")]))
    put("fuzz_safetensors", "all-dtypes", safetensors([
        (dtype.lower(), dtype, [1], bytes(size)) for dtype, size in [
            ("BOOL", 1), ("U8", 1), ("I8", 1), ("F8_E4M3", 1), ("F8_E5M2", 1), ("F8_E8M0", 1),
            ("U16", 2), ("I16", 2), ("F16", 2), ("BF16", 2), ("U32", 4), ("I32", 4),
            ("F32", 4), ("U64", 8), ("I64", 8), ("F64", 8)]]))
    soft = os.path.join(ROOT, "test", "data", "models", "tiny-dense", "soft_tokens.safetensors")
    with open(soft, "rb") as f:
        put("fuzz_safetensors", "tiny-dense-soft-tokens", f.read())
    index = {"metadata": {"total_size": 1024},
             "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                            "model.norm.weight": "model-00002-of-00002.safetensors",
                            "model.layers.0.self_attn.q_proj.weight":
                                "model-00001-of-00002.safetensors"}}
    put("fuzz_safetensors_index", "two-shards.json", json.dumps(index, indent=2).encode())
    put("fuzz_safetensors_index", "empty.json", b'{"weight_map": {}}')


def target_name_seeds():
    for i, name in enumerate(["sm_121a", "sm_120a", "sm_120f", "sm_100a", "sm_90a", "sm_80",
                              "compute_90", "compute_121a", "sm_121", "model.sm_90a.cubin\nmodel",
                              "dir/model.compute_90.ptx\nmodel", "12.1", "9.0"]):
        put("fuzz_target_names", "seed-%02d" % i, name.encode())


def config_seeds():
    configs = os.path.join(ROOT, "test", "data", "configs")
    for name in sorted(os.listdir(configs)):
        path = os.path.join(configs, name, "config.json")
        if os.path.exists(path):
            shutil.copyfile(path, os.path.join(HERE, "corpus", "fuzz_gemma_config", name + ".json"))
    for model in MODELS:
        shutil.copyfile(os.path.join(ROOT, "test", "data", "models", model, "config.json"),
                        os.path.join(HERE, "corpus", "fuzz_gemma_config", model + ".json"))
    # Structure the readers must refuse: nesting just past the config check's limit (32), deep
    # enough to overflow a recursive parser, and a key twice.
    put("fuzz_gemma_config", "deep-33.json", b'{"junk": ' + b"[" * 33 + b"]" * 33 + b"}")
    put("fuzz_gemma_config", "deep-4000.json", b'{"junk": ' + b"[" * 4000 + b"]" * 4000 + b"}")
    put("fuzz_gemma_config", "duplicate-key.json",
        b'{"model_type": "gemma4_text", "hidden_size": 64, "hidden_size": 128}')


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"),
                        help="build directory with bin/spark-import and bin/spark-compile")
    args = parser.parse_args()
    # Only the corpora written here are replaced: the tokenizer, chat-template and request corpora
    # are committed by hand (their seeds are real files of test/data).
    for target in ("fuzz_plan_section", "fuzz_plan_execution", "fuzz_cubin", "fuzz_safetensors",
                   "fuzz_safetensors_index", "fuzz_target_names", "fuzz_gemma_config"):
        shutil.rmtree(os.path.join(HERE, "corpus", target), ignore_errors=True)
    os.makedirs(os.path.join(HERE, "corpus", "fuzz_gemma_config"))
    plan_seeds(os.path.abspath(args.build))
    safetensors_seeds()
    target_name_seeds()
    config_seeds()
    total = 0
    for directory, _, files in os.walk(os.path.join(HERE, "corpus")):
        total += sum(os.path.getsize(os.path.join(directory, f)) for f in files)
    print("make_corpus: wrote %s (%d KiB)" % (os.path.join(HERE, "corpus"), total // 1024))
    return 0


if __name__ == "__main__":
    sys.exit(main())
