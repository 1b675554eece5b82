#!/usr/bin/env bash
# One case of quantized-golden.test: spark-quantize MODEL to FORMAT, spark-import, spark-compile
# (sm_90a), spark-run --device host on the golden prompt (8 greedy tokens), then the logits and
# ids against transformers on the dequantised weights (MODEL/golden_FORMAT.safetensors,
# tools/reference/make_quantized_goldens.py).
#   quantized_golden.sh SRC_ROOT MODEL FORMAT WORKDIR
set -euo pipefail
root=$1 model=$2 format=$3 work=$4
src=$root/test/data/models/$model
q=$work/$model-$format
rm -rf "$q" && mkdir -p "$work"
spark-quantize "$src" "$q" --format "$format" > /dev/null
spark-import "$q" -o "$q.mlir"
spark-compile "$q.mlir" --target sm_90a -o "$q.cubin"
prompt=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['prompt_ids'])))" \
  "$src/golden_info.json")
spark-run "$q.cubin" --weights "$q" --device host --max-new-tokens 8 --prompt-ids "$prompt" \
  --logits-out "$q.logits.safetensors" > "$q.ids"
python3 "$root/test/e2e/compare_logits.py" "$q.logits.safetensors" "$src/golden_$format.safetensors" \
  --golden-tensor greedy_logits --rtol 1e-3 --tokens-file "$q.ids"
