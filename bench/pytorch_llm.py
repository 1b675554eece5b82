#!/usr/bin/env python3
"""PyTorch/transformers baseline for Spark: prefill and decode speed of a Gemma 4 checkpoint on one GPU.

Loads a checkpoint (e.g. a full-size random-weight one from tools/reference/make_full_size.py) in bf16
on cuda with the same class choice as tools/reference/run_reference.py (Gemma4ForConditionalGeneration
or Gemma4ForCausalLM from config.json "architectures"), but with transformers' default (fastest) MoE
experts backend instead of the per-expert "eager" loop, and measures, in ONE mode per process:

  prefill N   one forward over a random N-token prompt (use_cache=True, logits of the last token only,
              as generate() does); CUDA events; --prefill-warmup untimed calls, then the median of
              --prefill-reps calls, each on a fresh prompt. FLOPs: see "How FLOPs and bytes are counted".
  decode C    greedy decoding after a random C-token prompt.
              eager:   "manual": prefill, then one forward per token on transformers' DynamicCache, the
                       argmax staying on the GPU; one CUDA event after each step; --decode-warmup steps
                       are dropped, then --decode-tokens steps are timed; the MoE experts run as
                       generate() runs them while decoding (GenerationMixin._optimize_model_for_decode:
                       grouped_mm -> batched_mm). "generate": model.generate(min_new_tokens =
                       max_new_tokens = --decode-tokens, greedy) with a streamer that records a CUDA
                       event per token; the first interval (prefill + first token) is reported as
                       ttft_ms, the other --decode-tokens - 1 intervals are the decode steps.
              compile: "generate" as above with cache_implementation="static" and
                       compile_config=CompileConfig(mode=--compile-mode, fullgraph=False, dynamic=None):
                       transformers' own torch.compile path (it compiles the decode forward, not the
                       prefill); --compile-warmup untimed calls per context first (they compile).
              Each decode figure is measured in --rounds rounds (fresh prompt each) so noise is visible;
              ms/token is the median over all timed steps, tokens/s = 1000 / that.
  memory      torch.cuda.max_memory_allocated per measurement (peak stats reset before each one).

In --mode compile, prefill runs torch.compile(model.forward, mode=--prefill-compile-mode, dynamic=False)
(the first warm-up call compiles). Every compile measurement has its own --compile-timeout, checked
between calls and between generated tokens (a compilation in progress is not interrupted). Any failure
(exception, timeout, OOM) in a measurement is printed and recorded as {"error": ...}; the other
measurements still run. The JSON file is rewritten after every measurement, so a run killed from outside
keeps what it had measured.

How FLOPs and bytes are counted (printed at start, stored under "params"):
  parameters of the text decoder, split into: embedding tables (nn.Embedding: token gathers, 0 FLOPs),
  vectors (ndim < 2: norms, scales; elementwise), experts (Gemma4TextExperts 3-D tensors) and dense
  matmul weights (everything else: attention, dense MLP, router, PLE projections). The LM head
  (model.get_output_embeddings(), tied to the embedding in Gemma 4) is counted once, as a matmul.
  body = dense + experts x top_k / num_experts (config.top_k_experts, config.num_experts).
  prefill FLOPs = 2 x body x N + 2 x lm_head (logits of the last token only); --flops-per-token F
  replaces this with F x N. Attention-score FLOPs (QK^T and PV, causal, sliding window per layer,
  layer geometry from gemma4_spec.derive_geometry of config.json) are reported separately.
  decode bytes/token (estimate) = weights read (body + lm_head + vectors, bf16) + K and V read over
  min(C, window) positions per layer; est_GBps = that / (ms/token).

Usage (one mode per process, so the model is freed between modes; a device command may run 10 min,
so keep compile runs small, and `timeout -s INT` keeps the JSON of an interrupted run complete):
    python3 bench/pytorch_llm.py --model-dir /tmp/gemma4-31b-random --mode eager \\
        --context 1024,8192 --prefill 512,4096 --json /tmp/pt_31b_eager.json
    timeout -s INT 540 python3 bench/pytorch_llm.py --model-dir /tmp/gemma4-31b-random --mode compile \\
        --context 1024 --prefill '' --json /tmp/pt_31b_compile.json
    python3 bench/pytorch_llm.py --model-dir /tmp/gemma4-26b-a4b-random --mode eager --json /tmp/pt_26b.json

JSON (all times in ms, memory in bytes; "?" = only where it applies):
  tool, argv, command, started, finished, interrupted, mode,
  environment {python, torch, transformers, cuda, gpu {name, capability, sm_count, total_memory_bytes},
               allow_bf16_reduced_precision_reduction},
  settings {every option}, error? (loading failed),
  model {dir, architecture, class, attn_implementation, experts_implementation_load, moe, num_layers,
         hidden_size, vocab_size, load_s, memory_after_load_bytes},
  params {dense_matmul, experts_total, experts_active, num_experts, top_k, vectors, embedding_gather,
          lm_head, lm_head_tied, body_per_token, total, bytes_per_param, how},
  prefill [{tokens, ms, ms_all, tokens_per_s, flops, flops_source, tflops, attention_flops,
            tflops_with_attention, first_call_s, experts_implementation, logits_finite, peak_mem_bytes}
           or {tokens, error}],
  decode [{context, method (manual|generate), compiled, new_tokens, warmup_steps? | warmup_calls?,
           warmup_s?, compile_config?, rounds [{ms_per_token, ms_steps, cache_class, ttft_ms?,
           logits_finite?}], ms_per_token, ms_per_token_mean, ms_per_token_max, tokens_per_s,
           experts_implementation_decode, est_bytes_per_token {weights, kv}, est_GBps, dynamo?
           {stats, frames, graph_breaks, recompile_limit}, peak_mem_bytes} or {context, method, error}],
  peak_memory_bytes (max over load and measurements).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import shlex
import statistics
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "reference"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemma4_spec as spec  # noqa: E402
from prompt_ids import prompt_ids  # noqa: E402
from run_reference import read_config, text_decoder  # noqa: E402

GiB = 2**30
PREFILL_FLOPS_RULE = "2*body_per_token*N + 2*lm_head (last-token logits)"


def int_list(text: str):
    """'1024,8192' -> [1024, 8192]; '' -> [] (skip that measurement)."""
    return [int(v) for v in text.split(",") if v.strip()]


class Deadline:
    """Raises TimeoutError once `seconds` have passed; only checked between calls/steps."""

    def __init__(self, seconds: float, what: str):
        self.seconds, self.what = seconds, what
        self.end = time.monotonic() + seconds

    def check(self):
        if time.monotonic() > self.end:
            raise TimeoutError(f"{self.what}: over --compile-timeout ({self.seconds:.0f} s)")


def check(deadline):
    if deadline is not None:
        deadline.check()


class Output:
    """The result record; save() rewrites the --json file atomically."""

    def __init__(self, path, record):
        self.path, self.record = path, record

    def save(self):
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.record, indent=2) + "\n")
        os.replace(tmp, self.path)


def environment(torch, transformers):
    props = torch.cuda.get_device_properties(0)
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.version.cuda,
        "gpu": {"name": props.name, "capability": f"{props.major}.{props.minor}",
                "sm_count": props.multi_processor_count, "total_memory_bytes": props.total_memory},
        "allow_bf16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    }


def load_model(torch, model_dir: Path, attn: str, experts: str | None):
    """bf16 on cuda; class from config.json "architectures" (as run_reference.load_model does)."""
    from transformers import Gemma4ForCausalLM, Gemma4ForConditionalGeneration

    arch = (read_config(model_dir).get("architectures") or ["Gemma4ForCausalLM"])[0]
    cls = Gemma4ForConditionalGeneration if "ConditionalGeneration" in arch else Gemma4ForCausalLM
    kwargs = {"dtype": torch.bfloat16, "attn_implementation": attn, "device_map": "cuda"}
    if experts:
        kwargs["experts_implementation"] = experts
    model = cls.from_pretrained(str(model_dir), **kwargs)
    model.eval()
    return model, arch, cls.__name__


def experts_implementation(model):
    """What transformers runs the MoE experts with now: one name, or {sub-config: name} when they differ."""
    getter = getattr(model, "get_experts_implementation", None)
    value = getter() if callable(getter) else getattr(model.config, "_experts_implementation", None)
    if not isinstance(value, dict):
        return str(value)
    names = {str(k): str(v) for k, v in value.items()}
    return next(iter(names.values())) if len(set(names.values())) == 1 else names


def decode_phase(model):
    """The context generate() decodes in (switches grouped_mm experts to batched_mm on GPU), if any."""
    enter = getattr(model, "_optimize_model_for_decode", None)
    return enter() if callable(enter) else contextlib.nullcontext()


def count_params(torch, model):
    """Parameter groups of the text decoder + LM head; see the module doc for what each group means."""
    cfg = model.config.get_text_config()
    dec = text_decoder(model)
    gather = {id(m.weight) for m in dec.modules() if isinstance(m, torch.nn.Embedding)}
    expert = {id(p) for m in dec.modules() if type(m).__name__.endswith("Experts") for p in m.parameters(False)}
    c = {"dense_matmul": 0, "experts_total": 0, "vectors": 0, "embedding_gather": 0}
    for p in dec.parameters():
        key = ("embedding_gather" if id(p) in gather else "experts_total" if id(p) in expert
               else "vectors" if p.ndim < 2 else "dense_matmul")
        c[key] += p.numel()
    head = model.get_output_embeddings().weight
    c["lm_head"] = head.numel()
    c["lm_head_tied"] = head.data_ptr() == dec.embed_tokens.weight.data_ptr()
    c["num_experts"] = getattr(cfg, "num_experts", None) if c["experts_total"] else None
    c["top_k"] = getattr(cfg, "top_k_experts", None) if c["experts_total"] else None
    c["experts_active"] = c["experts_total"] * c["top_k"] // c["num_experts"] if c["experts_total"] else 0
    c["body_per_token"] = c["dense_matmul"] + c["experts_active"]
    c["total"] = sum(c[k] for k in ("dense_matmul", "experts_total", "vectors", "embedding_gather"))
    c["total"] += 0 if c["lm_head_tied"] else c["lm_head"]
    c["bytes_per_param"] = head.element_size()
    c["how"] = (f"prefill FLOPs = {PREFILL_FLOPS_RULE}; body_per_token = dense_matmul + "
                "experts_total*top_k/num_experts; embedding gathers and vectors: 0 FLOPs; "
                "tied LM head counted once, as the head matmul")
    return c


def attention_flops(geom, n: int) -> int:
    """QK^T + PV FLOPs of one causal N-token forward (sliding layers see min(i+1, window) keys)."""
    total = 0
    for lg in geom.layers:
        w = geom.sliding_window if lg.type == spec.SLIDING else n
        keys = n * (n + 1) // 2 if n <= w else w * (w + 1) // 2 + (n - w) * w
        total += 4 * geom.num_attention_heads * lg.head_dim * keys
    return total


def kv_bytes_per_token(geom, context: int, bytes_per_value: int) -> int:
    """K and V bytes one decode step reads at this context (every layer, shared-KV layers included)."""
    total = 0
    for lg in geom.layers:
        span = min(context, geom.sliding_window) if lg.type == spec.SLIDING else context
        total += 2 * span * lg.num_kv_heads * lg.head_dim * bytes_per_value
    return total


def cleanup(torch, compiled: bool):
    if compiled:
        torch._dynamo.reset()
    gc.collect()
    torch.cuda.empty_cache()


def guarded(torch, label: str, base: dict, compiled: bool, fn):
    """fn() -> record; on any exception: print it, return base + {"error": ...}."""
    print(f"-- {label}", flush=True)
    torch.cuda.reset_peak_memory_stats()
    try:
        rec = dict(base, **fn())
        rec["peak_mem_bytes"] = torch.cuda.max_memory_allocated()
        return rec
    except Exception as err:  # recorded, not fatal: the remaining measurements still run
        traceback.print_exc()
        print(f"{label}: FAILED: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        cleanup(torch, compiled)
        return dict(base, error=f"{type(err).__name__}: {err}")


class Bench:
    """The loaded model, its counts and the prompt generator; one method per kind of measurement."""

    def __init__(self, torch, model, args, geom, params):
        self.torch, self.model, self.args, self.geom, self.params = torch, model, args, geom, params
        self.vocab = model.config.get_text_config().vocab_size
        self.prompts_drawn = {}  # prompt length -> prompts of that length drawn so far
        self.batch = 1  # sequences decoded at once (manual decode)

    def experts(self):
        return experts_implementation(self.model) if self.params["experts_total"] else "n/a (dense)"

    def prompt(self, n: int, batch: int = 1):
        """A fresh prompt of n ids: the k-th one of that length is bench/prompt_ids.py's with seed
        k (1, 2, ...), the ids bench/run_bench.sh gives spark-run in its round k; with batch > 1,
        that many fresh prompts as the rows of one tensor."""
        rows = []
        for _ in range(batch):
            k = self.prompts_drawn.get(n, 0) + 1
            self.prompts_drawn[n] = k
            rows.append(prompt_ids(n, k))
        return self.torch.tensor(rows, dtype=self.torch.long).to("cuda")

    def event(self):
        ev = self.torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    # ---------------------------------------------------------------- prefill
    def prefill(self, fn, n: int, deadline):
        torch, args = self.torch, self.args
        t0 = time.perf_counter()
        first_call_s = None
        for _ in range(args.prefill_warmup):
            out = fn(input_ids=self.prompt(n), use_cache=True, logits_to_keep=1)
            del out
            torch.cuda.synchronize()
            first_call_s = first_call_s or time.perf_counter() - t0
            check(deadline)
        times = []
        for _ in range(args.prefill_reps):
            ids = self.prompt(n)
            start = self.event()
            out = fn(input_ids=ids, use_cache=True, logits_to_keep=1)
            end = self.event()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
            finite = bool(torch.isfinite(out.logits).all())
            del out
            check(deadline)
        ms = statistics.median(times)
        p = self.params
        if args.flops_per_token:
            flops, source = args.flops_per_token * n, "--flops-per-token x N"
        else:
            flops, source = 2 * p["body_per_token"] * n + 2 * p["lm_head"], PREFILL_FLOPS_RULE
        attn = attention_flops(self.geom, n)
        return {"ms": ms, "ms_all": times, "tokens_per_s": n / (ms * 1e-3), "flops": flops,
                "flops_source": source, "tflops": flops / (ms * 1e-3) / 1e12, "attention_flops": attn,
                "tflops_with_attention": (flops + attn) / (ms * 1e-3) / 1e12, "first_call_s": first_call_s,
                "experts_implementation": self.experts(), "logits_finite": finite}

    # ---------------------------------------------------------------- decode
    def decode_manual(self, context: int):
        """Prefill, then one forward per token on the returned cache -> (round record, experts)."""
        torch, model, args = self.torch, self.model, self.args
        out = model(input_ids=self.prompt(context, self.batch), use_cache=True, logits_to_keep=1)
        cache, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
        del out
        with decode_phase(model):
            experts = self.experts()
            marks = [self.event()]
            for _ in range(args.decode_warmup + args.decode_tokens):
                out = model(input_ids=token, past_key_values=cache, use_cache=True)
                token = out.logits[:, -1:].argmax(-1)
                marks.append(self.event())
        torch.cuda.synchronize()
        steps = [a.elapsed_time(b) for a, b in zip(marks, marks[1:])]
        finite = bool(torch.isfinite(out.logits).all())
        return {"ms_steps": steps[args.decode_warmup:], "logits_finite": finite,
                "cache_class": type(cache).__name__}, experts

    def decode_generate(self, context: int, compile_config, deadline):
        """model.generate, a CUDA event per streamed token -> (round record, experts while decoding)."""
        from transformers.generation.streamers import BaseStreamer

        torch, model, new_tokens = self.torch, self.model, self.args.decode_tokens

        class StepMarks(BaseStreamer):
            def __init__(self, bench):
                self.bench, self.marks, self.experts = bench, [], None

            def put(self, value):  # called with the prompt, then once per generated token
                self.marks.append(self.bench.event())
                if len(self.marks) == 3:  # inside the decoding loop
                    self.experts = self.bench.experts()
                check(deadline)

            def end(self):
                pass

        prompt = self.prompt(context)
        streamer = StepMarks(self)
        kwargs = {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens, "do_sample": False,
                  "attention_mask": torch.ones_like(prompt), "streamer": streamer, "return_dict_in_generate": True}
        if compile_config is not None:
            kwargs.update(cache_implementation="static", compile_config=compile_config)
        else:
            kwargs.update(disable_compile=True)
        out = model.generate(prompt, **kwargs)
        torch.cuda.synchronize()
        generated = out.sequences.shape[1] - prompt.shape[1]
        if generated != new_tokens or len(streamer.marks) != new_tokens + 1:
            raise RuntimeError(f"generate produced {generated} tokens / {len(streamer.marks)} streamer calls, "
                               f"expected {new_tokens} / {new_tokens + 1}")
        times = [a.elapsed_time(b) for a, b in zip(streamer.marks, streamer.marks[1:])]
        one = {"ttft_ms": times[0], "ms_steps": times[1:], "cache_class": type(out.past_key_values).__name__}
        return one, streamer.experts

    def decode(self, context: int, method: str, compile_config=None, deadline=None):
        args, p = self.args, self.params
        rec = {"compiled": compile_config is not None, "new_tokens": args.decode_tokens}
        if method == "generate":
            warmup_calls = args.compile_warmup if compile_config is not None else 1
            t0 = time.perf_counter()
            for _ in range(warmup_calls):
                self.decode_generate(context, compile_config, deadline)
                check(deadline)
            rec.update(warmup_calls=warmup_calls, warmup_s=time.perf_counter() - t0)
            if compile_config is not None:
                rec["compile_config"] = {k: getattr(compile_config, k, None)
                                         for k in ("fullgraph", "dynamic", "backend", "mode")}
        else:
            rec["warmup_steps"] = args.decode_warmup
        rounds = []
        for _ in range(args.rounds):
            one, experts = (self.decode_generate(context, compile_config, deadline) if method == "generate"
                            else self.decode_manual(context))
            one["ms_per_token"] = statistics.median(one["ms_steps"])
            rounds.append(one)
            check(deadline)
        steps = [t for r in rounds for t in r["ms_steps"]]
        ms = statistics.median(steps)
        weights = (p["body_per_token"] + p["lm_head"] + p["vectors"]) * p["bytes_per_param"]
        kv = kv_bytes_per_token(self.geom, context, p["bytes_per_param"])
        rec.update(rounds=rounds, ms_per_token=ms, ms_per_token_mean=statistics.mean(steps),
                   ms_per_token_max=max(steps), tokens_per_s=1000.0 / ms, batch=self.batch,
                   aggregate_tokens_per_s=self.batch * 1000.0 / ms, experts_implementation_decode=experts,
                   est_bytes_per_token={"weights": weights, "kv": kv}, est_GBps=(weights + kv) / (ms * 1e-3) / 1e9)
        if compile_config is not None:
            rec["dynamo"] = dynamo_stats(self.torch)
        return rec


def dynamo_stats(torch):
    """torch._dynamo counters since the last reset: graphs captured, frames, graph breaks."""
    from torch._dynamo.utils import counters

    config = torch._dynamo.config
    return {"stats": dict(counters["stats"]), "frames": dict(counters["frames"]),
            "graph_breaks": sum(counters["graph_break"].values()),
            "recompile_limit": getattr(config, "recompile_limit", getattr(config, "cache_size_limit", None))}


def count_str(n: int) -> str:
    return f"{n / 1e9:.3f} B" if n >= 1e8 else f"{n / 1e6:.3f} M"


def fmt_error(rec, width=70):
    text = rec["error"].replace("\n", " ")
    return text if len(text) <= width else text[: width - 3] + "..."


def print_table(record):
    env, model = record["environment"], record["model"]
    print(f"\n== {record['tool']}  mode={record['mode']}  {env['gpu']['name']}  torch {env['torch']}  "
          f"transformers {env['transformers']}")
    print(f"   {model.get('class')} ({model.get('dir')}), attn {model.get('attn_implementation')}, "
          f"experts at load: {model.get('experts_implementation_load')}")
    print(f"{'prefill':<8} {'tokens':>7} {'ms':>9} {'tok/s':>9} {'TFLOP/s':>8} {'+attn':>7} {'peak GiB':>9}")
    for r in record["prefill"]:
        if "error" in r:
            print(f"{'':<8} {r['tokens']:>7}  error: {fmt_error(r)}")
            continue
        print(f"{'':<8} {r['tokens']:>7} {r['ms']:9.2f} {r['tokens_per_s']:9.0f} {r['tflops']:8.1f} "
              f"{r['tflops_with_attention']:7.1f} {r['peak_mem_bytes'] / GiB:9.2f}")
    print(f"{'decode':<8} {'context':>7} {'method':<9} {'ms/tok':>8} {'rounds (ms/tok)':<17} {'tok/s':>7} "
          f"{'est GB/s':>8} {'peak GiB':>9}  experts (decode)")
    for r in record["decode"]:
        if "error" in r:
            print(f"{'':<8} {r['context']:>7} {r['method']:<9} error: {fmt_error(r)}")
            continue
        rounds = "/".join(f"{x['ms_per_token']:.2f}" for x in r["rounds"])
        print(f"{'':<8} {r['context']:>7} {r['method']:<9} {r['ms_per_token']:8.2f} {rounds:<17} "
              f"{r['tokens_per_s']:7.1f} {r['est_GBps']:8.0f} {r['peak_mem_bytes'] / GiB:9.2f}  "
              f"{r['experts_implementation_decode']}")
    print(f"peak memory (max over measurements): {record['peak_memory_bytes'] / GiB:.2f} GiB")


def run_measurements(torch, args, bench, record, out):
    """Prefill lengths, then decode contexts; every result goes into `record` and is saved at once."""
    compiled = args.mode == "compile"
    prefill_fn = bench.model.forward
    if compiled and args.prefill:
        mode = None if args.prefill_compile_mode == "default" else args.prefill_compile_mode
        prefill_fn = torch.compile(bench.model.forward, mode=mode, dynamic=False)
    for n in args.prefill:
        deadline = Deadline(args.compile_timeout, f"prefill {n}") if compiled else None
        rec = guarded(torch, f"prefill {n} tokens", {"tokens": n}, compiled,
                      lambda n=n, d=deadline: bench.prefill(prefill_fn, n, d))
        record["prefill"].append(rec)
        out.save()

    compile_config = None
    if compiled:
        try:
            from transformers import CompileConfig
        except ImportError:
            from transformers.generation import CompileConfig
        compile_config = CompileConfig(fullgraph=False, dynamic=None, mode=args.compile_mode)
    for c in args.context:
        runs = [("generate", 1)] if compiled else [("manual", b) for b in args.batch]
        if not compiled and args.batch == [1]:
            runs.append(("generate", 1))
        for method, batch in runs:
            if compiled:
                cleanup(torch, compiled)  # fresh dynamo state and counters per context
            bench.batch = batch
            deadline = Deadline(args.compile_timeout, f"decode context {c}") if compiled else None
            rec = guarded(torch, f"decode context {c} ({method}, batch {batch})",
                          {"context": c, "method": method, "batch": batch}, compiled,
                          lambda c=c, m=method, d=deadline: bench.decode(c, m, compile_config, d))
            record["decode"].append(rec)
            out.save()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", required=True, type=Path, help="HF checkpoint (config.json + safetensors)")
    ap.add_argument("--mode", required=True, choices=("eager", "compile"))
    ap.add_argument("--context", type=int_list, default="1024,8192", help="decode contexts, comma list ('' = none)")
    ap.add_argument("--prefill", type=int_list, default="512,4096", help="prefill lengths, comma list ('' = none)")
    ap.add_argument("--decode-tokens", type=int, default=64, help="timed tokens per decode round")
    ap.add_argument("--batch", type=int_list, default="1",
                    help="comma list: decode this many sequences at once, each in turn (eager manual decode "
                         "only: a [batch, context] prompt of fresh prompts, then one forward of [batch, 1] per "
                         "step on the DynamicCache; tokens_per_s stays per sequence, aggregate_tokens_per_s = "
                         "batch x that)")
    ap.add_argument("--json", type=Path, help="write all figures here (rewritten after every measurement)")
    ap.add_argument("--attn", default="sdpa", help="attn_implementation (default sdpa)")
    ap.add_argument("--experts", help="experts_implementation to load with (default: transformers' default)")
    ap.add_argument("--flops-per-token", type=float, help="prefill FLOPs per token to use instead of the count")
    ap.add_argument("--prefill-warmup", type=int, default=2)
    ap.add_argument("--prefill-reps", type=int, default=3)
    ap.add_argument("--decode-warmup", type=int, default=4, help="untimed steps before the timed ones (manual)")
    ap.add_argument("--rounds", type=int, default=2, help="decode rounds per context (fresh prompt each)")
    ap.add_argument("--compile-mode", default="reduce-overhead", help="torch.compile mode of the decode forward")
    ap.add_argument("--prefill-compile-mode", default="default", help="torch.compile mode of the prefill forward")
    ap.add_argument("--compile-warmup", type=int, default=2, help="untimed generate() calls per context (compile)")
    ap.add_argument("--compile-timeout", type=float, default=300.0, help="seconds per compile measurement")
    args = ap.parse_args(argv)
    if not args.batch or min(args.batch) < 1 or (args.batch != [1] and args.mode != "eager"):
        ap.error("--batch takes sizes >= 1, and sizes other than 1 only with --mode eager")
    if min(args.prefill_warmup, args.prefill_reps, args.decode_tokens - 1, args.rounds, args.compile_warmup) < 1:
        ap.error("--prefill-warmup, --prefill-reps, --rounds, --compile-warmup must be >= 1, --decode-tokens >= 2")

    import torch
    import transformers

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device")
    torch.set_grad_enabled(False)
    record = {
        "tool": "bench/pytorch_llm.py", "argv": sys.argv, "command": shlex.join([sys.executable] + sys.argv),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "finished": False, "interrupted": False,
        "mode": args.mode, "environment": environment(torch, transformers),
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "model": None, "params": None, "prefill": [], "decode": [], "peak_memory_bytes": 0,
    }
    out = Output(args.json, record)
    print(f"{record['command']}\n{record['environment']['gpu']['name']}, torch {torch.__version__}, "
          f"transformers {transformers.__version__}", flush=True)

    t0 = time.perf_counter()
    try:
        model, arch, cls_name = load_model(torch, args.model_dir, args.attn, args.experts)
    except Exception as err:
        record["error"] = f"loading failed: {type(err).__name__}: {err}"
        out.save()
        raise
    geom = spec.derive_geometry(read_config(args.model_dir))
    params = count_params(torch, model)
    load_s = time.perf_counter() - t0
    bench = Bench(torch, model, args, geom, params)
    record["model"] = {
        "dir": str(args.model_dir), "architecture": arch, "class": cls_name,
        "attn_implementation": getattr(model.config, "_attn_implementation", args.attn),
        "experts_implementation_load": bench.experts(),
        "moe": bool(params["experts_total"]), "num_layers": geom.num_layers, "hidden_size": geom.hidden_size,
        "vocab_size": geom.vocab_size, "load_s": load_s,
        "memory_after_load_bytes": torch.cuda.memory_allocated(),
    }
    record["params"] = params
    out.save()
    p = params
    print(f"loaded {cls_name} in {record['model']['load_s']:.0f} s, "
          f"{record['model']['memory_after_load_bytes'] / GiB:.2f} GiB allocated; "
          f"experts: {record['model']['experts_implementation_load']}")
    print(f"params: dense matmul {count_str(p['dense_matmul'])}, experts {count_str(p['experts_total'])} "
          f"(active {count_str(p['experts_active'])} = x {p['top_k']}/{p['num_experts']}), "
          f"vectors {count_str(p['vectors'])}, embedding gathers {count_str(p['embedding_gather'])}, "
          f"LM head {count_str(p['lm_head'])} ({'tied, counted once' if p['lm_head_tied'] else 'untied'}); "
          f"per token: body {count_str(p['body_per_token'])} + LM head")
    print(f"counting: {p['how']}", flush=True)

    try:
        run_measurements(torch, args, bench, record, out)
    except KeyboardInterrupt:  # e.g. `timeout -s INT ...`: keep what was measured
        record["interrupted"] = True
        print("interrupted: writing what was measured", file=sys.stderr)
    peaks = [r.get("peak_mem_bytes", 0) for r in record["prefill"] + record["decode"]]
    record["peak_memory_bytes"] = max(peaks + [record["model"]["memory_after_load_bytes"]])
    record["finished"] = not record["interrupted"]
    out.save()
    print_table(record)
    if args.json:
        print(f"wrote {args.json}")
    return 0 if record["finished"] else 130


if __name__ == "__main__":
    sys.exit(main())
