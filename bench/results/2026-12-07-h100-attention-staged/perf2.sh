#!/usr/bin/env bash
# Second call: the staged units for bf16 caches only, the direct units (as 7fbcab3, now inlined into
# each entry) for f32 caches: the GPU op check of attention, racecheck on tile groups, then 31B
# (f32; bf16 cache + activations) and 26B-A4B (bf16 cache + activations) prefill, old and new.
set -u
t0=$(date +%s)
chmod +x .carry/spark-run .carry/spark-op-check
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cat .carry/oc/groups.txt | xargs -P 8 -I{} sh -c '.carry/spark-op-check run .carry/oc --device cuda --target sm_90a --only attention,attention_merge --group {} > /tmp/oc.{}.log 2>&1; echo "{} rc $?"' | sort | tr '\n' ' '; echo
cat /tmp/oc.*.log | grep -E "^attention" | sort | uniq > $OUT/opcheck.txt
echo "op check: $(grep -c PASS $OUT/opcheck.txt) PASS, $(grep -c FAIL $OUT/opcheck.txt) FAIL"; grep -v PASS $OUT/opcheck.txt | head
grep -E "T=(37|100|40|64) " $OUT/opcheck.txt | head -14
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for g in g01_bf16_T40_len96_pos30 g02_f32_T100_len256_pos150 g18_f32_T37_len2048_pos900 g27_f32_T64_len128_pos20; do
  echo "racecheck $g: $($SAN --tool racecheck --error-exitcode 99 .carry/spark-op-check run .carry/oc --device cuda --target sm_90a --only attention,attention_merge --group $g 2>&1 | grep -E 'RACECHECK SUMMARY|cases,' | tr '\n' ' ')"
done
echo "checks done at $(( $(date +%s) - t0 )) s"
perf() { # image-prefix ckpt rounds
  local m=$1 ck=$2 rounds=$3
  for round in $(seq 1 $rounds); do
    for v in old new; do
      for p in 512 4096; do
        ids=$(python3 bench/prompt_ids.py $p 1)
        .carry/spark-run .carry/$m.$v.sm_90a.cubin --weights $ck --device cuda --prompt-ids "$ids" --max-new-tokens 1 --max-length $((p + 128)) > /dev/null 2> /tmp/p.err
        echo "$m $v r$round prefill $p: $(grep -o 'prefill: .*' /tmp/p.err)"
      done
    done
  done
  ids=$(python3 bench/prompt_ids.py 4096 1)
  .carry/spark-run .carry/$m.new.sm_90a.cubin --weights $ck --device cuda --prompt-ids "$ids" --max-new-tokens 2 --max-length 4224 --profile > /dev/null 2> $OUT/profile_$m.txt
  grep -A12 "profile: prefill" $OUT/profile_$m.txt | head -14
}
python3 tools/reference/make_full_size.py --model 31b --out /dev/shm/g31 --device cuda > /dev/null 2>&1 || echo "checkpoint failed"
echo "31b checkpoint at $(( $(date +%s) - t0 )) s"
perf 31b /dev/shm/g31 2
echo "31b done at $(( $(date +%s) - t0 )) s"
perf 31bh /dev/shm/g31 2
rm -rf /dev/shm/g31
echo "31bh done at $(( $(date +%s) - t0 )) s"
if [ $(( $(date +%s) - t0 )) -lt 420 ]; then
  python3 tools/reference/make_full_size.py --model 26b-a4b --out /dev/shm/g26 --device cuda > /dev/null 2>&1
  perf 26bh /dev/shm/g26 1
fi
echo "done at $(( $(date +%s) - t0 )) s"
