#!/usr/bin/env bash
# GPU call 2: the tiny-model e2e suite (with --sanitizer), then 31B streams with the small-batch
# GEMV capped at 16 tokens, and an overcommitted KV pool (--kv-pool-sequences 2).
set -u
start=$(date +%s)
S=$OUT/stage.txt
el() { echo $(( $(date +%s) - start )); }
CK=/dev/shm/gemma4-31b-random
( timeout 200 python3 tools/reference/make_full_size.py --model 31b --out $CK --device cuda > $OUT/make.log 2>&1; echo "make rc=$? at $(el) s" >> $S ) &
MK=$!
timeout 300 test/gpu/run_e2e.sh .carry/art2 .carry/g5/bin/spark-run --sanitizer > $OUT/e2e.txt 2>&1
echo "e2e rc=$? at $(el) s" >> $S
grep -E "FAIL|summary|passed|failed" $OUT/e2e.txt | tail -12 >> $S
grep -E "streams|kv-pool" $OUT/e2e.txt >> $S
wait $MK
P=$(cat .carry/g4/prompt128.txt)
run() {  # name, args...
  local name=$1; shift
  [ $(el) -lt 540 ] || { echo "$name: skipped (time)" >> $S; return; }
  timeout 100 .carry/g5/bin/spark-run .carry/g5/b31/gemma-4-31b.sm_90a.cubin --weights $CK --device cuda \
    --prompt-ids $P --max-new-tokens 48 --max-length 512 --json "$@" > $OUT/$name.json 2> $OUT/$name.err
  echo "$name rc=$? at $(el) s: $(grep 'streams:' $OUT/$name.err | sed 's/spark-run: //')" >> $S
  grep "worst row-relative" $OUT/$name.err >> $S
}
run s1 --streams 1
run s8 --streams 8 --compare-logits 1e-3
run s16 --streams 16
run s32 --streams 32
run s8pool2 --streams 8 --kv-pool-sequences 2
echo "done at $(el) s" >> $S
cat $S
