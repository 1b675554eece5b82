#!/usr/bin/env bash
# One case of compressed-tensors-nvfp4.test: spark-quantize MODEL to NVFP4 (ModelOpt layout),
# rewrite it in compressed-tensors' layout (to_compressed_tensors.py), then import, compile
# (sm_90a) and spark-run --device host both on the golden prompt (8 greedy tokens): the
# compressed-tensors run against transformers (MODEL/golden_nvfp4.safetensors) and against the
# ModelOpt run.
#   compressed_tensors_nvfp4.sh SRC_ROOT MODEL WORKDIR
set -euo pipefail
root=$1 model=$2 work=$3
src=$root/test/data/models/$model
mo=$work/$model-modelopt ct=$work/$model-ct
rm -rf "$mo" "$ct" && mkdir -p "$work"
spark-quantize "$src" "$mo" --format nvfp4 > /dev/null
python3 "$root/test/e2e/to_compressed_tensors.py" "$mo" "$ct"
prompt=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['prompt_ids'])))" \
  "$src/golden_info.json")
for d in "$mo" "$ct"; do
  [ "$d" = "$ct" ] && summary=--summary || summary=
  spark-import "$d" -o "$d.mlir" $summary
  spark-compile "$d.mlir" --target sm_90a -o "$d.cubin"
  spark-run "$d.cubin" --weights "$d" --device host --max-new-tokens 8 --prompt-ids "$prompt" \
    --logits-out "$d.logits.safetensors" > "$d.ids" 2> "$d.err"
done
grep -m1 "weight_packed" "$ct.mlir"
grep -m1 "weight_global_scale\" {reciprocal}" "$ct.mlir"
grep -m1 "experts.*weight_global_scale" "$ct.mlir" || true
python3 "$root/test/e2e/compare_logits.py" "$ct.logits.safetensors" "$src/golden_nvfp4.safetensors" \
  --golden-tensor greedy_logits --rtol 1e-3 --tokens-file "$ct.ids"
python3 "$root/test/e2e/compare_logits.py" "$ct.logits.safetensors" "$mo.logits.safetensors" \
  --golden-tensor logits --rtol 1e-5
cmp -s "$ct.ids" "$mo.ids" && echo "ids equal the ModelOpt checkpoint's"
