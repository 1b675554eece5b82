#!/usr/bin/env bash
# 31B prefill side by side on one GPU: Spark (attention units of two heads, default step 1024)
# against PyTorch eager and torch.compile on the same random-weight checkpoint.
set -u
t0=$(date +%s)
chmod +x .carry/spark-run
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
python3 tools/reference/make_full_size.py --model 31b --out /dev/shm/g31 --device cuda > /dev/null 2>&1 || echo "checkpoint failed"
ln -sfn /dev/shm/g31 /tmp/gemma4-31b-random
echo "checkpoint at $(( $(date +%s) - t0 )) s"
for p in 512 4096; do
  ids=$(python3 bench/prompt_ids.py $p 1)
  .carry/spark-run .carry/31b.new.sm_90a.cubin --weights /dev/shm/g31 --device cuda --prompt-ids "$ids" --max-new-tokens 1 --max-length $((p + 128)) > /dev/null 2> /tmp/p.err
  echo "spark 31b prefill $p: $(grep -o 'prefill: .*' /tmp/p.err)"
done
bash bench/run_bench.sh pytorch 31b $OUT eager "" 512,4096 2>&1 | grep -iE "exit|prefill|error" | head
echo "eager done at $(( $(date +%s) - t0 )) s"
SPARK_BENCH_COMPILE_SECONDS=$(( 560 - ($(date +%s) - t0) )) bash bench/run_bench.sh pytorch 31b $OUT compile "" 512,4096 2>&1 | grep -iE "exit|prefill|error" | head
echo "done at $(( $(date +%s) - t0 )) s"
