#!/usr/bin/env bash
# Grouped MoE with listed slots (a181b10) against 4fa15a9's scan: GPU op check of the six expert
# ops (sm_90a vs host), memcheck, racecheck; then 26B-A4B (random weights) prefill of 512 and
# 4096 tokens with both kernel libraries (same compiler, same model), alternating, and the
# per-op profile of a 4096-token prefill for each.
set -u
C=.carry
t0=$(date +%s)
exec > >(tee "$OUT/gpu5.txt") 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
O="--only moe_gate_up,moe_down,moe_gate_up_nvfp4,moe_down_nvfp4,moe_gate_up_fp8,moe_down_fp8"
cat $C/ocm/groups.txt | xargs -P 8 -I{} sh -c "$C/spark-op-check run $C/ocm --device cuda --target sm_90a $O --group {} > /tmp/oc.{}.log 2>&1; echo '{} rc '\$?" | sort | tr '\n' ' '; echo
cat /tmp/oc.*.log | grep -E "^moe" | sort | uniq > $OUT/opcheck.txt
echo "op check: $(grep -c PASS $OUT/opcheck.txt) PASS, $(grep -c FAIL $OUT/opcheck.txt) FAIL"; grep -v PASS $OUT/opcheck.txt | head
grep -E "T=(1100|160|128) " $OUT/opcheck.txt | head -12
echo "memcheck: $(compute-sanitizer --tool memcheck --error-exitcode 9 $C/spark-op-check run $C/ocm --device cuda --target sm_90a $O 2>&1 | grep -E 'ERROR SUMMARY|cases,' | tr '\n' ' ')"
for g in g00_bf16_T160_len160_pos0 g02_f32_T1100_len1100_pos0; do
  echo "racecheck $g: $(compute-sanitizer --tool racecheck --error-exitcode 9 $C/spark-op-check run $C/ocm --device cuda --target sm_90a $O --group $g 2>&1 | grep -E 'RACECHECK SUMMARY|cases,' | tr '\n' ' ')"
done
echo "checks done at $(( $(date +%s) - t0 )) s"
python3 tools/reference/make_full_size.py --model 26b-a4b --out /dev/shm/g26 --device cuda > /dev/null 2>&1 || echo "checkpoint failed"
echo "26b-a4b checkpoint at $(( $(date +%s) - t0 )) s"
for round in 1 2; do
  for m in 26b-a4b 26b-a4b.f32; do
    for v in base new; do
      for p in 512 4096; do
        ids=$(python3 bench/prompt_ids.py $p 1)
        $C/spark-run $C/img/$m.$v.sm_90a.cubin --weights /dev/shm/g26 --device cuda --prompt-ids "$ids" --max-new-tokens 1 --max-length $((p + 128)) > /dev/null 2> /tmp/p.err
        echo "$m $v r$round prefill $p: $(grep -o 'prefill: .*' /tmp/p.err)"
      done
    done
  done
  echo "round $round done at $(( $(date +%s) - t0 )) s"
done
ids=$(python3 bench/prompt_ids.py 4096 1)
for v in base new; do
  $C/spark-run $C/img/26b-a4b.$v.sm_90a.cubin --weights /dev/shm/g26 --device cuda --prompt-ids "$ids" --max-new-tokens 2 --max-length 4224 --profile > /dev/null 2> $OUT/profile_26b_$v.txt
  echo "== profile $v"; grep -A14 "profile: prefill" $OUT/profile_26b_$v.txt | head -16
done
echo "done at $(( $(date +%s) - t0 )) s"
