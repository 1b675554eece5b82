#!/usr/bin/env bash
# Full-size run on the H200 device machine: builds a random-weight 26B-A4B (or 31B) checkpoint with
# tools/reference/make_full_size.py, runs spark-run on it with an sm_90a image compiled elsewhere,
# and records tokens/s, the runtime's estimate and the driver's used-memory high-water mark
# (nvidia-smi sampled every 100 ms) next to it.
#   bench/run_full_size.sh MODEL(26b-a4b|31b) IMAGE.cubin SPARK_RUN OUTDIR
set -uo pipefail
model=$1 image=$2 run=$3 out=$4
ckpt=/tmp/gemma4-$model-random
mkdir -p "$out"
free_before=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
t0=$(date +%s)
python3 tools/reference/make_full_size.py --model "$model" --out "$ckpt" --device cuda \
  > "$out/make_$model.log" 2>&1 || { tail -20 "$out/make_$model.log"; exit 1; }
echo "checkpoint written in $(( $(date +%s) - t0 )) s: $(du -sh "$ckpt" | cut -f1)"
( while true; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; sleep 0.1; done ) > "$out/mem_$model.txt" &
sampler=$!
prompt=2,818,5192,3,44,900,1200,77,15,16,17,18,19,20,21,22
"$run" "$image" --weights "$ckpt" --device cuda --prompt-ids "$prompt" --max-new-tokens 16 \
  --max-length 1024 --json -v > "$out/run_$model.json" 2> "$out/run_$model.err"
rc=$?
kill $sampler
cat "$out/run_$model.err"; cat "$out/run_$model.json"; echo
peak=$(sort -n "$out/mem_$model.txt" | tail -1)
echo "driver memory used: before ${free_before} MiB, peak ${peak} MiB, model peak $(( peak - free_before )) MiB"
exit $rc
