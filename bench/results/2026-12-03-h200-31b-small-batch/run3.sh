#!/usr/bin/env bash
# GPU call 3: 31B --streams 8 --compare-logits: where the rows differ (prompt rows vs decode rows).
set -u
start=$(date +%s)
S=$OUT/stage.txt
el() { echo $(( $(date +%s) - start )); }
CK=/dev/shm/gemma4-31b-random
[ -f $CK/config.json ] || { timeout 200 python3 tools/reference/make_full_size.py --model 31b --out $CK --device cuda > $OUT/make.log 2>&1; echo "make rc=$? at $(el) s" >> $S; }
P=$(cat .carry/g4/prompt128.txt)
for n in 8 2; do
timeout 120 .carry/g5/bin/spark-run .carry/g5/b31/gemma-4-31b.sm_90a.cubin --weights $CK --device cuda \
  --prompt-ids $P --max-new-tokens 48 --max-length 512 --streams $n --compare-logits 1e-3 > /dev/null 2> $OUT/s${n}.err
echo "s$n rc=$? at $(el) s" >> $S
grep -E "logits rows|worst row-relative|streams:" $OUT/s${n}.err >> $S
done
cat $S
