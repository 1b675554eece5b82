#!/usr/bin/env bash
# The README's main command: installs what is missing, builds Spark, then runs the whole flow on a
# small Gemma 4 model (default: the 31B-like tiny checkpoint in test/data/models/tiny-dense, with
# the tiny tokenizer and Google's Gemma 4 chat template in test/data/models/tokenizers/tiny):
#   spark-import  config.json -> model.mlir
#   spark-compile model.mlir  -> model.sm_121a.cubin (DGX Spark) + model.sm_90a.cubin (H100/H200)
#   spark-run     answers a chat message, streaming text: on a GPU with a fitting image, else on the
#                 host reference executor (this machine has no GPU), saying which.
# Usage: scripts/demo.sh [CHECKPOINT_DIR] [MESSAGE]
#   CHECKPOINT_DIR's own tokenizer files are used when it has a tokenizer.json.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh

model=${1:-test/data/models/tiny-dense}
message=${2:-Hello! Who are you?}
tokenizer=$model
[ -f "$model/tokenizer.json" ] || tokenizer=test/data/models/tokenizers/tiny
out=build/demo
mkdir -p "$out"

echo "== spark-import $model"
build/bin/spark-import "$model" -o "$out/model.mlir" --summary
echo "== spark-compile (sm_121a for the DGX Spark, sm_90a for the H200)"
build/bin/spark-compile "$out/model.mlir" --target sm_121a --target sm_90a -o "$out/model.cubin" -v
echo "== spark-run $out/model.sm_121a.cubin --chat \"$message\" (the resolver picks the image that fits this machine)"
# The tiny model's weights are random: its answer is fluent gibberish (exactly transformers' own,
# test/e2e/tiny-dense-chat.test); a real checkpoint answers for real.
build/bin/spark-run "$out/model.sm_121a.cubin" --weights "$model" --tokenizer "$tokenizer" \
    --system "You are a helpful assistant." --chat "$message" --max-new-tokens 16
