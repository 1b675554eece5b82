#!/usr/bin/env bash
# f32 activations back to two stages (64 x 128, 40 KiB dynamic): GPU op check of the linears,
# memcheck/racecheck on f32 and bf16 tile groups; 31B f32 and bf16 prefill old vs new, two rounds,
# 26B-A4B bf16 one round.
set -u
mkdir -p /tmp/c && tar xzf .carry/pack.tgz -C /tmp/c && C=/tmp/c
t0=$(date +%s)
chmod +x $C/spark-run $C/spark-op-check
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
O="--only linear,linear_nvfp4,linear_fp8"
ls $C/ocl/*.cubin | sed 's|.*/||; s|\.sm_90a\.cubin||' > /tmp/groups.txt
cat /tmp/groups.txt | xargs -P 8 -I{} sh -c "$C/spark-op-check run $C/ocl --device cuda --target sm_90a $O --group {} > /tmp/oc.{}.log 2>&1; echo '{} rc '\$?" | sort | tr '\n' ' '; echo
cat /tmp/oc.*.log | grep -E "^linear" | sort | uniq > $OUT/opcheck.txt
echo "op check: $(grep -c PASS $OUT/opcheck.txt) PASS, $(grep -c FAIL $OUT/opcheck.txt) FAIL"; grep -v PASS $OUT/opcheck.txt | head
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for g in $(grep -E "f32_T(100|200|37)_" /tmp/groups.txt | head -3) $(grep -E "bf16_T300_" /tmp/groups.txt); do
  echo "memcheck $g: $($SAN --tool memcheck --error-exitcode 99 $C/spark-op-check run $C/ocl --device cuda --target sm_90a $O --group $g 2>&1 | grep -E 'ERROR SUMMARY|cases,' | tr '\n' ' ')"
  echo "racecheck $g: $($SAN --tool racecheck --error-exitcode 99 $C/spark-op-check run $C/ocl --device cuda --target sm_90a $O --group $g 2>&1 | grep -E 'RACECHECK SUMMARY|cases,' | tr '\n' ' ')"
done
echo "checks done at $(( $(date +%s) - t0 )) s"
perf() { # image-prefix ckpt rounds
  local m=$1 ck=$2 rounds=$3
  for round in $(seq 1 $rounds); do
    for v in old new; do
      for p in 512 4096; do
        ids=$(python3 bench/prompt_ids.py $p 1)
        $C/spark-run $C/img/$m.$v.cubin --weights $ck --device cuda --prompt-ids "$ids" --max-new-tokens 1 --max-length $((p + 128)) > /dev/null 2> /tmp/p.err
        echo "$m $v r$round prefill $p: $(grep -o 'prefill: .*' /tmp/p.err) $(grep -i error /tmp/p.err | head -2)"
      done
    done
  done
}
python3 tools/reference/make_full_size.py --model 31b --out /dev/shm/g31 --device cuda > /dev/null 2>&1 || echo "checkpoint failed"
echo "31b checkpoint at $(( $(date +%s) - t0 )) s"
perf 31b /dev/shm/g31 2
ids=$(python3 bench/prompt_ids.py 4096 1)
$C/spark-run $C/img/31b.new.cubin --weights /dev/shm/g31 --device cuda --prompt-ids "$ids" --max-new-tokens 2 --max-length 4224 --profile > /dev/null 2> $OUT/profile_31b.txt
grep -A4 "profile: prefill" $OUT/profile_31b.txt
perf 31bh /dev/shm/g31 1
for v in old new; do
  ids=$(python3 bench/prompt_ids.py 64 1)
  $C/spark-run $C/img/31b.$v.cubin --weights /dev/shm/g31 --device cuda --prompt-ids "$ids" --max-new-tokens 64 --max-length 256 > /dev/null 2> /tmp/p.err
  echo "31b $v decode: $(grep -o "decode.*" /tmp/p.err | head -1)"
done
rm -rf /dev/shm/g31
echo "31b done at $(( $(date +%s) - t0 )) s"
if [ $(( $(date +%s) - t0 )) -lt 400 ]; then
  python3 tools/reference/make_full_size.py --model 26b-a4b --out /dev/shm/g26 --device cuda > /dev/null 2>&1
  perf 26bh /dev/shm/g26 2
fi
echo "done at $(( $(date +%s) - t0 )) s"
