#!/usr/bin/env bash
# Benchmarks Spark on the H200 device machine against the bandwidth/GEMM ceilings and PyTorch,
# one stage per call (a device command may run 10 minutes):
#
#   bench/run_bench.sh ceilings OUTDIR
#       bench/ceilings.py: device-to-device copy bandwidth and bf16 torch.matmul throughput.
#   bench/run_bench.sh tiny OUTDIR IMAGEDIR SPARK_RUN
#       memory: spark-run on the three tiny test models (IMAGEDIR/tiny-*.sm_90a.cubin), estimate
#       against the runtime's own allocations and the driver's used memory (--json -v) and
#       nvidia-smi's peak.
#   bench/run_bench.sh spark MODEL OUTDIR IMAGE SPARK_RUN
#       builds the random-weight checkpoint /tmp/gemma4-MODEL-random (tools/reference/
#       make_full_size.py, once: kept while the machine stays warm), then spark-run: decode after a
#       1024- and an 8192-token prompt (64 tokens, twice each), prefill of 512- and 4096-token
#       prompts (twice each), and one --profile run (per-op GB/s, 1024-token prompt, 16 tokens).
#       SPARK_BENCH_ROUNDS=1 runs each case once (to fit one 10-minute device call);
#       SPARK_BENCH_CASES (default "decode prefill profile") picks the kinds of run;
#       SPARK_BENCH_CONTEXTS (default "1024 8192") the prompt lengths of the decode runs;
#       SPARK_BENCH_NAME (default MODEL) names the result files spark_<name>_... (e.g.
#       31b-kv-bf16 for an image compiled with --kv-cache-dtype bf16).
#       Every run records nvidia-smi's used-memory peak next to spark-run's JSON.
#   bench/run_bench.sh cold-start MODEL OUTDIR IMAGE SPARK_RUN [BEFORE_SPARK_RUN]
#       cold start, weights in the page cache: bench/h2d_bandwidth.py (pinned and pageable
#       host-to-device copy rates), then spark-run from process start to its first token on a
#       16-token prompt (-v prints the load phases; the JSON's "startup"), with BEFORE_SPARK_RUN
#       (another build) alternating, SPARK_BENCH_ROUNDS rounds (default 2).
#   bench/run_bench.sh act-precision MODEL OUTDIR IMAGEDIR SPARK_RUN
#       f32 against bf16 activation storage in one call: the `spark` stage (one round, prefill
#       512 / 4096 and decode after 1024 / 8192) on IMAGEDIR/gemma-4-MODEL.f32.sm_90a.cubin and
#       then on IMAGEDIR/gemma-4-MODEL.act-bf16.sm_90a.cubin (spark-compile --max-tokens 512,
#       without and with --activation-precision bf16), results named spark_MODEL-f32_... and
#       spark_MODEL-act-bf16_.... About 6 minutes per model on the H200.
#   bench/run_bench.sh quantized MODEL FORMAT OUTDIR IMAGE SPARK_RUN SPARK_QUANTIZE
#       a quantized checkpoint (FORMAT nvfp4 or fp8) of the random-weight model: the bf16 one is
#       built in memory (/dev/shm: the device's 64 GiB disk cannot hold 31B in bf16 beside its
#       quantized copy), spark-quantize writes /tmp/gemma4-MODEL-FORMAT (timed, in
#       OUTDIR/quantize_MODEL_FORMAT.log) and the bf16 copy is removed; then the `spark` stage's
#       runs (one round) on IMAGE (compiled from a config with the same quantization_config),
#       results named spark_MODEL-FORMAT_....
#   bench/run_bench.sh pytorch MODEL OUTDIR MODE [CONTEXTS] [PREFILLS]
#       bench/pytorch_llm.py on the same checkpoint (MODE eager or compile; compile runs under
#       timeout -s INT ${SPARK_BENCH_COMPILE_SECONDS:-500} so that what was measured is kept).
#   bench/run_bench.sh clean MODEL   removes the checkpoint (the disk holds one model at a time).
#   bench/run_bench.sh kernels OUTDIR [BASE_DIR]
#       bench/kernel_bench.cu (built with nvcc for this GPU): the dense GEMM and decode GEMV at 31B
#       shapes and the grouped MoE experts at 26B-A4B shapes, against the measured copy bandwidth
#       and the GEMM ceiling (SPARK_GEMM_TFLOPS, default 781: bench/ceilings.py on the H200). With
#       BASE_DIR (a directory holding another copy of kernels/), the same program is also built
#       from that copy, so that two kernel variants are timed in one run.
#       SPARK_KERNEL_BENCH_ONLY=moe times only the grouped MoE experts (512- and 1024-token
#       chunks, f32 and bf16 activations); =linear only the dense linears (31B shapes: 512- and
#       1024-token chunks with f32 and bf16 activations, decode, NVFP4 / FP8 at 512 and 1);
#       =small-batch the linears of decode steps of 1 to 16 sequences (31B and 26B-A4B shapes).
#   bench/run_bench.sh all OUTDIR IMAGEDIR SPARK_RUN
#       every stage in one run, for a machine without a per-command time limit (about 45 minutes
#       on the H200): ceilings, tiny, then for 26b-a4b and 31b: spark, pytorch eager, pytorch
#       compile, clean; IMAGEDIR holds gemma-4-<model>.sm_90a.cubin and the tiny images; then
#       bench/summarize.py OUTDIR > OUTDIR/summary.md. (This workplace's device calls are limited
#       to 10 minutes, so the recorded runs were made stage by stage.)
#
# Prompts are random ids in [3, 250000) from a fixed seed (the same for Spark and PyTorch:
# bench/prompt_ids.py). bench/summarize.py turns OUTDIR into the results table.
set -uo pipefail
cd "$(dirname "$0")/.."
stage=$1
shift

smi_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; }

# run_with_peak NAME CMD...: runs CMD with stdout to OUT/NAME.json, stderr to OUT/NAME.err and
# nvidia-smi's used memory sampled every 100 ms into OUT/NAME.mem (first line: before).
run_with_peak() {
  local name=$1
  shift
  smi_used > "$out/$name.mem"
  ( while true; do smi_used; sleep 0.1; done ) >> "$out/$name.mem" &
  local sampler=$!
  "$@" > "$out/$name.json" 2> "$out/$name.err"
  local rc=$?
  kill $sampler 2>/dev/null
  wait $sampler 2>/dev/null
  local before peak
  before=$(head -1 "$out/$name.mem")
  peak=$(sort -n "$out/$name.mem" | tail -1)
  echo "$name: exit $rc, driver used before ${before} MiB, peak ${peak} MiB; $(grep -E 'prefill:|decode:' "$out/$name.err" | sed 's/spark-run: //' | tr '\n' ' ')"
  [ $rc -eq 0 ] || tail -5 "$out/$name.err"
  return $rc
}

# ensure_checkpoint MODEL CKPT: the random-weight checkpoint CKPT (built by
# tools/reference/make_full_size.py unless SPARK_BENCH_CKPT names one or it is complete already),
# read once so that every timed run starts from the page cache.
ensure_checkpoint() {
  local model=$1 ckpt=$2
  if [ -z "${SPARK_BENCH_CKPT:-}" ] && { [ ! -f "$ckpt/model.safetensors.index.json" ] || [ ! -f "$ckpt/.complete" ]; }; then
    local t0
    t0=$(date +%s)
    python3 tools/reference/make_full_size.py --model "$model" --out "$ckpt" --device cuda \
      > "$out/make_$model.log" 2>&1 || { tail -20 "$out/make_$model.log"; return 1; }
    touch "$ckpt/.complete"
    echo "checkpoint $ckpt written in $(( $(date +%s) - t0 )) s: $(du -sh "$ckpt" | cut -f1)"
  fi
  cat "$ckpt"/*.safetensors > /dev/null
}

case "$stage" in
  ceilings)
    out=$1
    mkdir -p "$out"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv > "$out/gpu.csv"
    python3 bench/ceilings.py --json "$out/ceilings.json" 2>&1 | tee "$out/ceilings.log" | tail -25
    ;;
  tiny)
    out=$1 images=$2 run=$3
    mkdir -p "$out"
    for model in tiny-dense tiny-moe tiny-e2b; do
      run_with_peak "memory_$model" "$run" "$images/$model.sm_90a.cubin" \
        --weights "test/data/models/$model" --device cuda --prompt-ids 2,164,436,12,15,131,249 \
        --max-new-tokens 8 --json -v
      grep -E 'measured|memory:' "$out/memory_$model.err"
    done
    ;;
  spark)
    model=$1 out=$2 image=$3 run=$4
    ckpt=${SPARK_BENCH_CKPT:-/tmp/gemma4-$model-random}
    mkdir -p "$out"
    ensure_checkpoint "$model" "$ckpt" || exit 1
    cases=" ${SPARK_BENCH_CASES:-decode prefill profile} "
    name=${SPARK_BENCH_NAME:-$model}
    for round in $(seq 1 "${SPARK_BENCH_ROUNDS:-2}"); do
      for context in ${SPARK_BENCH_CONTEXTS:-1024 8192}; do
        [[ $cases == *" decode "* ]] || continue
        ids=$(python3 bench/prompt_ids.py "$context" "$round")
        run_with_peak "spark_${name}_decode${context}_r$round" "$run" "$image" --weights "$ckpt" \
          --device cuda --prompt-ids "$ids" --max-new-tokens 65 --max-length $(( context + 128 )) --json -v
      done
      for prompt in 512 4096; do
        [[ $cases == *" prefill "* ]] || continue
        ids=$(python3 bench/prompt_ids.py "$prompt" "$round")
        run_with_peak "spark_${name}_prefill${prompt}_r$round" "$run" "$image" --weights "$ckpt" \
          --device cuda --prompt-ids "$ids" --max-new-tokens 1 --max-length $(( prompt + 128 )) --json -v
      done
    done
    if [[ $cases == *" profile "* ]]; then
      ids=$(python3 bench/prompt_ids.py 1024 1)
      run_with_peak "spark_${name}_profile1024" "$run" "$image" --weights "$ckpt" --device cuda \
        --prompt-ids "$ids" --max-new-tokens 17 --max-length 1152 --json --profile
      sed -n '/^profile: decode/,$p' "$out/spark_${name}_profile1024.err" | head -24
    fi
    ;;
  cold-start)
    model=$1 out=$2 image=$3 run=$4 before=${5:-}
    ckpt=${SPARK_BENCH_CKPT:-/tmp/gemma4-$model-random}
    mkdir -p "$out"
    ensure_checkpoint "$model" "$ckpt" || exit 1
    python3 bench/h2d_bandwidth.py --json "$out/h2d.json" | tee "$out/h2d.log"
    ids=$(python3 bench/prompt_ids.py 16 1)
    for round in $(seq 1 "${SPARK_BENCH_ROUNDS:-2}"); do
      for variant in before new; do
        binary=$run
        if [ "$variant" = before ]; then
          [ -n "$before" ] || continue
          binary=$before
        fi
        t0=$(date +%s.%N)
        run_with_peak "cold_${model}_${variant}_r$round" "$binary" "$image" --weights "$ckpt" \
          --device cuda --prompt-ids "$ids" --max-new-tokens 1 --max-length 1024 --json -v
        echo "cold_${model}_${variant}_r$round: process start to exit $(python3 -c "print(round($(date +%s.%N) - $t0, 3))") s"
        sed -n '/startup:/,/the rest/p' "$out/cold_${model}_${variant}_r$round.err"
      done
    done
    ;;
  act-precision)
    model=$1 out=$2 images=$3 run=$4
    for variant in f32 act-bf16; do
      SPARK_BENCH_ROUNDS=1 SPARK_BENCH_CASES="prefill decode" SPARK_BENCH_NAME=$model-$variant \
        bash bench/run_bench.sh spark "$model" "$out" "$images/gemma-4-$model.$variant.sm_90a.cubin" "$run" || exit 1
    done
    ;;
  quantized)
    model=$1 format=$2 out=$3 image=$4 run=$5 quantize=$6
    src=/dev/shm/gemma4-$model-random dst=/tmp/gemma4-$model-$format
    mkdir -p "$out"
    if [ ! -f "$dst/hf_quant_config.json" ]; then
      if [ ! -f "$src/.complete" ]; then
        t0=$(date +%s)
        python3 tools/reference/make_full_size.py --model "$model" --out "$src" --device cuda \
          > "$out/make_$model.log" 2>&1 || { tail -20 "$out/make_$model.log"; exit 1; }
        touch "$src/.complete"
        echo "checkpoint $src written in $(( $(date +%s) - t0 )) s"
      fi
      t0=$(date +%s)
      "$quantize" "$src" "$dst" --format "$format" > "$out/quantize_${model}_$format.log" 2>&1 \
        || { tail -5 "$out/quantize_${model}_$format.log"; exit 1; }
      echo "spark-quantize $model $format: $(( $(date +%s) - t0 )) s, $(tail -1 "$out/quantize_${model}_$format.log")" \
        | tee -a "$out/quantize_${model}_$format.log"
      rm -rf "$src"
    fi
    SPARK_BENCH_CKPT=$dst SPARK_BENCH_ROUNDS=1 SPARK_BENCH_NAME=$model-$format \
      bash bench/run_bench.sh spark "$model" "$out" "$image" "$run"
    ;;
  pytorch)
    model=$1 out=$2 mode=$3 contexts=${4:-1024,8192} prefills=${5:-512,4096}
    ckpt=/tmp/gemma4-$model-random
    mkdir -p "$out"
    limit=()
    [ "$mode" = compile ] && limit=(timeout -s INT "${SPARK_BENCH_COMPILE_SECONDS:-500}")
    "${limit[@]}" python3 bench/pytorch_llm.py --model-dir "$ckpt" --mode "$mode" \
      --context "$contexts" --prefill "$prefills" --json "$out/pytorch_${model}_$mode.json" \
      > "$out/pytorch_${model}_$mode.log" 2>&1
    echo "pytorch $model $mode: exit $?"
    tail -25 "$out/pytorch_${model}_$mode.log"
    ;;
  kernels)
    out=$1
    base=${2:-}
    mkdir -p "$out"
    tflops=${SPARK_GEMM_TFLOPS:-781}
    arch=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')a
    build() {  # build <include-dir-first> <binary>
      nvcc -arch="$arch" -std=c++17 -O3 -I "$1" -I . -I runtime/include \
        bench/kernel_bench.cu -o "$2" || exit 1
    }
    build . "$out/kernel_bench"
    only=()
    [[ -n "${SPARK_KERNEL_BENCH_ONLY:-}" ]] && only=(--only="$SPARK_KERNEL_BENCH_ONLY")
    "$out/kernel_bench" "${only[@]}" --gemm-tflops="$tflops" --label="kernels/ of the working tree" \
      | tee "$out/kernels.md"
    if [[ -n "$base" ]]; then
      build "$base" "$out/kernel_bench_base"
      echo | tee -a "$out/kernels.md"
      "$out/kernel_bench_base" "${only[@]}" --gemm-tflops="$tflops" --label="kernels/ of $base" \
        | tee -a "$out/kernels.md"
    fi
    ;;
  clean)
    rm -rf "/tmp/gemma4-$1-random"
    ;;
  all)
    out=$1 images=$2 run=$3
    self=$0
    "$self" ceilings "$out"
    "$self" tiny "$out" "$images" "$run"
    for model in 26b-a4b 31b; do
      "$self" spark "$model" "$out" "$images/gemma-4-$model.sm_90a.cubin" "$run"
      "$self" pytorch "$model" "$out" eager
      SPARK_BENCH_COMPILE_SECONDS=${SPARK_BENCH_COMPILE_SECONDS:-1800} "$self" pytorch "$model" "$out" compile
      "$self" clean "$model"
    done
    python3 bench/summarize.py "$out" > "$out/summary.md"
    echo "tables: $out/summary.md"
    ;;
  *)
    echo "unknown stage $stage (ceilings, tiny, spark, act-precision, quantized, pytorch, kernels, clean, all)" >&2
    exit 2
    ;;
esac
