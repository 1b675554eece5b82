#!/usr/bin/env bash
# The README's main command: installs what is missing, builds Spark, then runs the whole flow on a
# small Gemma 4 model (default: the E2B-like tiny checkpoint in test/data/models/tiny-e2b):
#   spark-import  config.json -> model.mlir
#   spark-compile model.mlir  -> model.sm_121a.cubin (DGX Spark) + model.sm_90a.cubin (H100/H200)
#   spark-run     generates tokens: on a GPU with a fitting image, else on the host reference
#                 executor (this machine has no GPU), saying which.
# Usage: scripts/demo.sh [CHECKPOINT_DIR] [PROMPT_IDS]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh

model=${1:-test/data/models/tiny-e2b}
prompt=${2:-}
if [ -z "$prompt" ] && [ -f "$model/golden_info.json" ]; then
  prompt=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['prompt_ids'])))" "$model/golden_info.json")
fi
prompt=${prompt:-2,100,200,300}
out=build/demo
mkdir -p "$out"

echo "== spark-import $model"
build/bin/spark-import "$model" -o "$out/model.mlir" --summary
echo "== spark-compile (sm_121a for the DGX Spark, sm_90a for the H200)"
build/bin/spark-compile "$out/model.mlir" --target sm_121a --target sm_90a -o "$out/model.cubin" -v
echo "== spark-run $out/model.sm_121a.cubin (the resolver picks the image that fits this machine)"
build/bin/spark-run "$out/model.sm_121a.cubin" --weights "$model" --prompt-ids "$prompt" \
    --max-new-tokens 8
