#!/usr/bin/env bash
# Dense linear prefill tiles in dynamic shared memory (128 x 128 for bf16 activations, 64 x 128
# for f32, three stages): GPU op check of linear / linear_nvfp4 / linear_fp8 (sm_90a vs host),
# memcheck and racecheck on tile groups; kernel_bench --only=linear new vs base (HEAD's kernels);
# 31B prefill (f32; bf16 cache + activations) old vs new alternating, profile of the new.
set -u
mkdir -p /tmp/c && tar xzf .carry/pack.tgz -C /tmp/c && C=/tmp/c
t0=$(date +%s)
chmod +x $C/spark-run $C/spark-op-check $C/kernel_bench $C/kernel_bench_base
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
O="--only linear,linear_nvfp4,linear_fp8"
ls $C/ocl/*.cubin | sed 's|.*/||; s|\.sm_90a\.cubin||' > /tmp/groups.txt
cat /tmp/groups.txt | xargs -P 8 -I{} sh -c "$C/spark-op-check run $C/ocl --device cuda --target sm_90a $O --group {} > /tmp/oc.{}.log 2>&1; echo '{} rc '\$?" | sort | tr '\n' ' '; echo
cat /tmp/oc.*.log | grep -E "^linear" | sort | uniq > $OUT/opcheck.txt
echo "op check: $(grep -c PASS $OUT/opcheck.txt) PASS, $(grep -c FAIL $OUT/opcheck.txt) FAIL"; grep -v PASS $OUT/opcheck.txt | head
grep -E "T=(100|130|150|200|300) " $OUT/opcheck.txt | head -14
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for g in $(grep -E "T(100|300|200|150)_" /tmp/groups.txt | head -4); do
  echo "memcheck $g: $($SAN --tool memcheck --error-exitcode 99 $C/spark-op-check run $C/ocl --device cuda --target sm_90a $O --group $g 2>&1 | grep -E 'ERROR SUMMARY|cases,' | tr '\n' ' ')"
  echo "racecheck $g: $($SAN --tool racecheck --error-exitcode 99 $C/spark-op-check run $C/ocl --device cuda --target sm_90a $O --group $g 2>&1 | grep -E 'RACECHECK SUMMARY|cases,' | tr '\n' ' ')"
done
echo "checks done at $(( $(date +%s) - t0 )) s"
$C/kernel_bench --only=linear --label="kernels/ of the working tree" > $OUT/kernels.md 2>&1
echo >> $OUT/kernels.md
$C/kernel_bench_base --only=linear --label="kernels/ of 1afce81" >> $OUT/kernels.md 2>&1
cat $OUT/kernels.md
echo "kernel bench done at $(( $(date +%s) - t0 )) s"
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
  ids=$(python3 bench/prompt_ids.py 4096 1)
  $C/spark-run $C/img/$m.new.cubin --weights $ck --device cuda --prompt-ids "$ids" --max-new-tokens 2 --max-length 4224 --profile > /dev/null 2> $OUT/profile_$m.txt
  grep -A12 "profile: prefill" $OUT/profile_$m.txt | head -14
}
python3 tools/reference/make_full_size.py --model 31b --out /dev/shm/g31 --device cuda > /dev/null 2>&1 || echo "checkpoint failed"
echo "31b checkpoint at $(( $(date +%s) - t0 )) s"
perf 31bh /dev/shm/g31 2
echo "31bh done at $(( $(date +%s) - t0 )) s"
perf 31b /dev/shm/g31 1
echo "31b done at $(( $(date +%s) - t0 )) s"
# decode speed (the linear entries' static shared memory went from 40 KiB to 8 KiB)
for v in old new; do
  ids=$(python3 bench/prompt_ids.py 64 1)
  $C/spark-run $C/img/31bh.$v.cubin --weights /dev/shm/g31 --device cuda --prompt-ids "$ids" --max-new-tokens 64 --max-length 256 > /dev/null 2> /tmp/p.err
  echo "31bh $v decode: $(grep -o "decode.*" /tmp/p.err | head -1)"
done
rm -rf /dev/shm/g31
if [ $(( $(date +%s) - t0 )) -lt 430 ]; then
  python3 tools/reference/make_full_size.py --model 26b-a4b --out /dev/shm/g26 --device cuda > /dev/null 2>&1
  perf 26bh /dev/shm/g26 1
fi
echo "done at $(( $(date +%s) - t0 )) s"
