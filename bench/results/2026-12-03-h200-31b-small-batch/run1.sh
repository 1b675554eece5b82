#!/usr/bin/env bash
# GPU call 1: linear op check (cuda vs host reference), kernel bench (working tree vs HEAD's
# kernels), then 31B streams with the small-batch GEMV.
set -u
start=$(date +%s)
S=$OUT/stage.txt
el() { echo $(( $(date +%s) - start )); }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $OUT/gpu.csv 2>&1
CK=/dev/shm/gemma4-31b-random
( timeout 200 python3 tools/reference/make_full_size.py --model 31b --out $CK --device cuda > $OUT/make.log 2>&1; echo "make rc=$? at $(el) s" >> $S ) &
MK=$!
timeout 240 .carry/g5/bin/spark-op-check run .carry/g5/opc --device cuda --target sm_90a --only linear,linear_nvfp4,linear_fp8 > $OUT/opcheck.txt 2>&1
echo "opcheck rc=$? at $(el) s: $(tail -1 $OUT/opcheck.txt)" >> $S
grep -c PASS $OUT/opcheck.txt >> $S
grep FAIL $OUT/opcheck.txt >> $S
timeout 200 bench/run_bench.sh kernels $OUT/kb .carry/g5/base > $OUT/kb.log 2>&1
echo "kernels rc=$? at $(el) s" >> $S
rm -f $OUT/kb/kernel_bench $OUT/kb/kernel_bench_base
wait $MK
P=$(cat .carry/g4/prompt128.txt)
for n in ${STREAMS:-8 1 4 16 32}; do
  [ $(el) -lt 500 ] || { echo "streams $n: skipped (time)" >> $S; continue; }
  extra=""; [ $n = 8 ] && extra="--compare-logits 1e-3"
  timeout 100 .carry/g5/bin/spark-run .carry/g5/b31/gemma-4-31b.sm_90a.cubin --weights $CK --device cuda \
    --prompt-ids $P --max-new-tokens 48 --max-length 512 --streams $n $extra --json \
    > $OUT/streams_$n.json 2> $OUT/streams_$n.err
  rc=$?
  echo "streams $n rc=$rc at $(el) s: $(grep 'streams:' $OUT/streams_$n.err | sed 's/spark-run: //')" >> $S
  python3 -c "import json;d=json.load(open('$OUT/streams_$n.json'));print('  differing', d['differing_streams'], 'alone', round(d['alone']['tokens_per_second'],1), 'together', round(d['together']['tokens_per_second'],1), 'ms/token/stream', round(d['together']['ms_between_tokens'],2))" >> $S 2>&1
  [ $rc -eq 0 ] || tail -5 $OUT/streams_$n.err >> $S
done
echo "done at $(el) s" >> $S
cat $S
