#!/usr/bin/env bash
# spark-serve on a CUDA machine: the OpenAI client suite when node exists there, the answers vs the
# transformers goldens (test/serve/http_check.py), TTFT and tokens/s
# per stream (bench/serve_bench.py) next to spark-run's decode rate on the same image. Run from the
# repository root with ART = test/gpu/make_artifacts.sh's output, LIBS = a directory with
# libcpp-httplib.so.0.11 and the brotli libraries when the machine lacks them, OUT = where results
# go (NODE_MODULES: where the openai npm package is):
#   ART=.carry/art LIBS=.carry/lib OUT=/tmp/out bash bench/serve_gpu.sh
set -u
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
M=test/data/models
{
echo "# spark-serve on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), $(date -u '+%Y-%m-%d %H:%M UTC')"
ldd build/bin/spark-serve | grep -E "not found|httplib" 
if command -v node >/dev/null; then
  echo "## OpenAI Node client suite, --device cuda (node $(node --version))"
  NODE_PATH=${NODE_MODULES:-} SPARK_SERVE_DEVICE=cuda node test/serve/openai_client.cjs \
    build/bin/spark-serve $ART/tiny-dense.sm_90a.cubin $M/tiny-dense $M/tokenizers/tiny \
    $M/tiny-dense/golden_chat.json 2>&1 | tail -16
else
  echo "## no node on this machine: the OpenAI Node client suite did not run here;"
  echo "## test/serve/http_check.py (standard library) checks the answers instead"
fi
for m in tiny-dense tiny-moe tiny-e2b; do
  tok=$M/tokenizers/tiny; [ $m != tiny-dense ] && tok=$M/tokenizers/tiny-1024
  echo "## $m, --device cuda, 5 streamed requests of 128 tokens (bench/serve_bench.py)"
  build/bin/spark-serve $ART/$m.sm_90a.cubin --weights $M/$m --tokenizer $tok --device cuda \
    --port 0 2> "$OUT/$m.serve.log" &
  pid=$!
  for _ in $(seq 300); do grep -q "listening on" "$OUT/$m.serve.log" && break; sleep 0.1; done
  url=$(grep -o "listening on http://[0-9.:]*" "$OUT/$m.serve.log" | sed 's/listening on //')
  python3 test/serve/http_check.py "$url" $M/$m/golden_chat.json
  python3 bench/serve_bench.py "$url" --requests 5 --tokens 128
  kill -TERM $pid; wait $pid; echo "spark-serve exit $?"
  echo "spark-run, same image, 128 tokens: $(build/bin/spark-run $ART/$m.sm_90a.cubin --weights $M/$m --device cuda --prompt-ids 2,105,24,30 --max-new-tokens 128 2>&1 | grep 'decode:')"
done
} 2>&1 | tee "$OUT/serve.txt"
