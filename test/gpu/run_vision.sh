#!/usr/bin/env bash
# Images on a CUDA machine (the H100 / H200 here), with artifacts compiled elsewhere:
#   test/gpu/run_vision.sh ARTIFACT_DIR SPARK_RUN [--sanitizer]
# ARTIFACT_DIR (test/gpu/make_vision_configs.py + spark-import + spark-compile --target sm_90a):
#   tiny-mm-dense.sm_90a.cubin, tiny-mm-e2b.sm_90a.cubin: the tiny multimodal models;
#   vision-31b/, vision-e2b/ (config.json) and vision-31b.sm_90a.cubin, vision-e2b.sm_90a.cubin:
#   a released model's vision tower beside a tiny text model.
#   1. tiny-mm-dense / tiny-mm-e2b, --device cuda: one and two images (the processor's torchvision
#      pixels, as the goldens' were made) -> logits within 1e-3 (row-relative) of transformers'
#      and greedy ids equal (test/e2e/tiny-mm-image.test runs the same on the host); the PNG/JPEG
#      path on CUDA: ids equal the host run's;
#   2. with --sanitizer: compute-sanitizer memcheck on the two-image run of each;
#   3. when python3 has torch and transformers: the full-size towers with random weights
#      (tools/reference/time_vision_tower.py writes the weights from the same config) -> the time
#      of one image at the default budget (280 soft tokens) in transformers (bf16 / f32, eager /
#      sdpa) and in Spark (f32 activations, and bf16 ones with <tower>.act-bf16.sm_90a.cubin:
#      spark-run -v's vision tower line, the first image and a second one). (Their numbers are
#      checked on the tiny towers, above.)
# Prints a table; exits 1 on a failure.
set -uo pipefail
ART=$1
RUN=$2
SAN=${3:-}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MODELS=$ROOT/test/data/models
IMAGES=$ROOT/test/data/images
E2E=$ROOT/test/e2e
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
row() { printf '%-62s %s\n' "$1" "$2"; }

python3 "$E2E/image_patches.py" "$IMAGES/vision_processed_70.safetensors" torchvision a "$TMP/tv_a.st"
python3 "$E2E/image_patches.py" "$IMAGES/vision_processed_70.safetensors" torchvision b "$TMP/tv_b.st"

# The prompts of the goldens, each image's run of soft tokens collapsed to one placeholder.
prompt() {  # MODEL NAME
  python3 - "$MODELS/$1/golden_info.json" "$2" <<'PY'
import json, sys
info = json.load(open(sys.argv[1]))
ids, t = info["goldens"][sys.argv[2]]["prompt_ids"], info["token_ids"]
out, i = [], 0
while i < len(ids):
    if ids[i] == t["boi_token_id"]:
        out.append(t["image_token_id"]); i = ids.index(t["eoi_token_id"], i) + 1
    else:
        out.append(ids[i]); i += 1
print(",".join(map(str, out)))
PY
}

for m in tiny-mm-dense tiny-mm-e2b; do
  cubin=$ART/$m.sm_90a.cubin
  [ -f "$cubin" ] || { row "$m" "SKIP (no $cubin)"; continue; }
  for g in one two; do
    imgs=(--image "$TMP/tv_a.st"); [ $g = two ] && imgs+=(--image "$TMP/tv_b.st")
    ids=$("$RUN" "$cubin" --weights "$MODELS/$m" --device cuda --max-new-tokens 8 \
            --prompt-ids "$(prompt $m $g)" "${imgs[@]}" --logits-out "$TMP/$m.$g.st" 2>"$TMP/err")
    if [ $? -ne 0 ]; then row "$m $g image(s), cuda" "FAIL: $(tail -1 "$TMP/err")"; fail=1; continue; fi
    out=$(python3 "$E2E/compare_logits.py" "$TMP/$m.$g.st" "$MODELS/$m/golden_image_$g.safetensors" \
            --golden-tensor logits --rtol 1e-3 --tokens "$ids")
    if [ $? -eq 0 ]; then
      row "$m $g image(s), cuda: logits, greedy ids" "PASS ($(echo "$out" | head -1 | grep -o 'worst row-relative error [0-9.e+-]*'))"
    else
      row "$m $g image(s), cuda: logits, greedy ids" "FAIL: $out"; fail=1
    fi
  done
  # The PNG itself (Spark's preprocessing) on CUDA and on the host: the same ids.
  p=$(prompt $m one)
  a=$("$RUN" "$cubin" --weights "$MODELS/$m" --device cuda --max-new-tokens 8 --prompt-ids "$p" \
        --image "$IMAGES/vision_a.png" --image-tokens 70 2>/dev/null)
  b=$("$RUN" "$cubin" --weights "$MODELS/$m" --device host --max-new-tokens 8 --prompt-ids "$p" \
        --image "$IMAGES/vision_a.png" --image-tokens 70 2>/dev/null)
  if [ -n "$a" ] && [ "$a" = "$b" ]; then row "$m PNG, cuda ids == host ids" "PASS ($a)"; else row "$m PNG, cuda ids == host ids" "FAIL: '$a' vs '$b'"; fail=1; fi
  if [ "$SAN" = --sanitizer ]; then
    if compute-sanitizer --tool memcheck --error-exitcode 9 "$RUN" "$cubin" --weights "$MODELS/$m" \
         --device cuda --max-new-tokens 4 --prompt-ids "$(prompt $m two)" --image "$TMP/tv_a.st" \
         --image "$TMP/tv_b.st" > "$TMP/san.log" 2>&1; then
      row "$m two images, compute-sanitizer memcheck" "PASS ($(grep -o 'ERROR SUMMARY: [0-9]* errors' "$TMP/san.log"))"
    else
      row "$m two images, compute-sanitizer memcheck" "FAIL: $(grep -m3 -E 'ERROR|Invalid' "$TMP/san.log" | tr '\n' ' ')"; fail=1
    fi
  fi
done

# Full-size towers: timing next to transformers.
if python3 -c "import torch, transformers" 2>/dev/null; then
  for t in vision-31b vision-e2b; do
    cubin=$ART/$t.sm_90a.cubin
    [ -f "$cubin" ] || { row "$t" "SKIP (no $cubin)"; continue; }
    dir=/dev/shm/$t
    rm -rf "$dir" && mkdir -p "$dir" && cp "$ART/$t/config.json" "$dir/"
    python3 "$ROOT/tools/reference/time_vision_tower.py" "$dir" "$IMAGES/photo.jpg" --budget 280 > "$TMP/$t.tf" 2>&1 \
      || { row "$t transformers" "FAIL: $(tail -3 "$TMP/$t.tf" | tr '\n' ' ')"; fail=1; continue; }
    sed "s/^/  $t: /" "$TMP/$t.tf"
    image_id=$(python3 -c "import json; print(json.load(open('$dir/config.json'))['image_token_id'])")
    # One image, then two (the second image's time is the warm one); f32 activations, and bf16
    # ones when ARTIFACT_DIR has the image (spark-compile --activation-precision bf16).
    for precision in f32 bf16; do
      image=$cubin
      [ $precision = bf16 ] && image=$ART/$t.act-bf16.sm_90a.cubin
      [ -f "$image" ] || continue
      for n in 1 2; do
        imgs=(--image "$dir/patches.safetensors"); p="2,$image_id"
        [ $n = 2 ] && { imgs+=(--image "$dir/patches.safetensors"); p="2,$image_id,$image_id"; }
        "$RUN" "$image" --weights "$dir" --device cuda --max-new-tokens 1 --prompt-ids "$p" "${imgs[@]}" \
          -v > /dev/null 2> "$TMP/$t.$n.err" || true
        line=$(grep -o 'images: .*' "$TMP/$t.$n.err")
        [ -n "$line" ] && row "  $t: spark $precision, $n image(s)" "$line" || { row "$t spark" "FAIL: $(tail -2 "$TMP/$t.$n.err" | tr '\n' ' ')"; fail=1; }
      done
    done
  done
else
  row "full-size vision towers" "SKIP (python3 has no torch/transformers)"
fi
exit $fail
