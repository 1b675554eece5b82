#!/usr/bin/env bash
# GPU call 1 (2026-12-07): this session's CUDA paths (prefix sharing's block copies, the weight
# upload refactor) through the tiny models end to end; the tiles' pipeline (three stages with bf16
# activations) against the host reference and under racecheck; then the time to first token of a
# stream whose 2,048-token prompt another (idle) stream holds, 26B-A4B at full size, with and
# without prefix sharing.
set -u
C=.carry
OPS=linear,linear_nvfp4,linear_fp8,moe_gate_up,moe_down
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/gpu.txt
(
  bash test/gpu/run_e2e.sh $C/art $C/spark-run --sanitizer > $OUT/e2e.txt 2>&1; echo "e2e rc $?" >> $OUT/e2e.txt
  $C/spark-op-check run $C/oc --device cuda --target sm_90a --only $OPS > $OUT/opcheck.txt 2>&1
  for g in g00_bf16_T100_len100_pos0 g02_bf16_T160_len160_pos0 g10_f32_T100_len100_pos0; do
    echo "## $g" >> $OUT/racecheck.txt
    compute-sanitizer --tool racecheck $C/spark-op-check run $C/oc --device cuda --target sm_90a \
      --only $OPS --group $g 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard|cases," >> $OUT/racecheck.txt
  done
) &
bg=$!
python3 tools/reference/make_full_size.py --model 26b-a4b --out /dev/shm/g26 --device cuda > $OUT/ckpt.log 2>&1
ids=$(python3 bench/prompt_ids.py 2048 1)
{
for mode in share noshare share noshare; do
  extra=""; [ $mode = noshare ] && extra=--no-prefix-sharing
  echo "## $mode"
  $C/spark-run $C/g26.sm_90a.cubin --weights /dev/shm/g26 --device cuda --prompt-ids $ids \
    --max-new-tokens 8 --max-length 2200 --streams 3 $extra --json 2>$OUT/run_$mode.err \
    | python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({k: d[k] for k in ("kv_pool","alone_streams","differing_streams")}))'
  tail -1 $OUT/run_$mode.err
done
} > $OUT/share.txt 2>&1
wait $bg
