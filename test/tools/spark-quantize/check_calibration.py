"""calibration.test: spark-quantize --calibration-prompt-ids against the activations spark-run
dumps for the same prompts, mapped to the linears by Gemma 4's architecture (not by the plan's
buffers, which is what spark-quantize follows).

   check_calibration.py QUANTIZED_DIR FORMAT DUMP_DIR...

Each DUMP_DIR holds `spark-run --dump` files of one prompt's prefill. A linear's input:
  q_proj, k_proj, v_proj        layers.N.input_layernorm
  o_proj                        layers.N.self_attn.attention (.merge where the attention was
                                split over the keys: its partial results are merged there)
  mlp.gate_proj, mlp.up_proj    layers.N.pre_feedforward_layernorm
  mlp.down_proj                 layers.N.mlp.gate_mul
  experts.E.gate_proj / up_proj layers.N.pre_feedforward_layernorm_2, rows routed to E
                                (layers.N.router.indices)
  experts.E.down_proj           layers.N.experts.gate_up, the slots routed to E
input_scale = amax / (6 * 448) (NVFP4) or amax / 448 (FP8); an expert no token reached takes the
largest of its layer's experts. Every quantized linear (one with weight_scale) must have an
input_scale within 1e-6 of that. Prints a summary line; exits 1 on a mismatch.
"""
import array
import glob
import math
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "e2e"))
from safetensors_io import read_raw  # noqa: E402


def values(dtype, raw):
    return array.array("f" if dtype == "F32" else "i", raw)


def main():
    qdir, fmt, dumps = sys.argv[1], sys.argv[2], sys.argv[3:]
    divisor = 6.0 * 448.0 if fmt == "nvfp4" else 448.0
    tensors = {}
    for path in glob.glob(os.path.join(qdir, "*.safetensors")):
        tensors.update(read_raw(path))
    quantized = sorted(n[:-len(".weight_scale")] for n in tensors if n.endswith(".weight_scale"))
    amax = {}

    def record(module, value):
        amax[module] = max(amax.get(module, 0.0), value)

    for d in dumps:
        for path in sorted(glob.glob(os.path.join(d, "run*.safetensors"))):
            by_source = {}
            for name, (dtype, shape, raw) in read_raw(path).items():
                step, source = name.split(".", 1)
                by_source[source] = (shape, values(dtype, raw))
            for source, (shape, v) in by_source.items():
                m = re.match(r"layers\.(\d+)\.(.*)$", source)
                if not m:
                    continue
                layer, what = m.group(1), m.group(2)
                prefix = [n for n in quantized if re.search(rf"layers\.{layer}\.", n)]
                base = prefix[0][:prefix[0].index(f"layers.{layer}.")] if prefix else ""
                top = max((abs(x) for x in v if not math.isnan(x)), default=0.0)
                lp = f"{base}layers.{layer}."
                if what == "input_layernorm":
                    for p in ("q_proj", "k_proj", "v_proj"):
                        record(lp + "self_attn." + p, top)
                elif what == "self_attn.attention.merge" or (
                        what == "self_attn.attention" and
                        f"layers.{layer}.self_attn.attention.merge" not in by_source):
                    record(lp + "self_attn.o_proj", top)
                elif what == "pre_feedforward_layernorm":
                    record(lp + "mlp.gate_proj", top)
                    record(lp + "mlp.up_proj", top)
                elif what == "mlp.gate_mul":
                    record(lp + "mlp.down_proj", top)
                elif what == "pre_feedforward_layernorm_2":
                    idx_shape, idx = by_source[f"layers.{layer}.router.indices"]
                    tokens, top_k = idx_shape
                    width = len(v) // tokens
                    for t in range(tokens):
                        row = max(abs(x) for x in v[t * width:(t + 1) * width])
                        for k in range(top_k):
                            e = idx[t * top_k + k]
                            record(f"{lp}experts.{e}.gate_proj", row)
                            record(f"{lp}experts.{e}.up_proj", row)
                elif what == "experts.gate_up":
                    idx_shape, idx = by_source[f"layers.{layer}.router.indices"]
                    tokens, top_k = idx_shape
                    width = len(v) // (tokens * top_k)
                    for s in range(tokens * top_k):
                        row = max(abs(x) for x in v[s * width:(s + 1) * width])
                        record(f"{lp}experts.{idx[s]}.down_proj", row)
    matched, bad = 0, []
    for module in quantized:
        name = module + ".input_scale"
        if name not in tensors:
            bad.append(f"{name} missing")
            continue
        got = array.array("f", tensors[name][2])[0]
        want = amax.get(module)
        if want is None:
            m = re.match(r"(.*\.experts\.)\d+(\..*)$", module)
            peers = [v for k, v in amax.items()
                     if m and k.startswith(m.group(1)) and k.endswith(m.group(2))]
            want = max(peers) if peers else None
        if want is None:
            bad.append(f"{module}: no activation mapped to it")
            continue
        want = 1.0 if want == 0.0 else want / divisor
        if abs(got - want) > 1e-6 * abs(want):
            bad.append(f"{name}: {got:.9g}, the dumps give {want:.9g}")
        else:
            matched += 1
    for line in bad:
        print(line)
    print(f"input_scale: {matched} of {len(quantized)} quantized linears match the dumped "
          f"activations")
    return 0 if not bad and matched == len(quantized) else 1


if __name__ == "__main__":
    sys.exit(main())
