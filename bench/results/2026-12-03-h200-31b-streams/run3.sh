#!/usr/bin/env bash
# GPU call 3 (plan v17): the e2e suite with compute-sanitizer, then 31B --streams.
set -u
start=$(date +%s)
S=$OUT/stage.txt
timeout 250 test/gpu/run_e2e.sh .carry/art2 .carry/bin2/spark-run --sanitizer > $OUT/e2e.txt 2>&1
echo "e2e rc=$? at $(( $(date +%s) - start )) s: $(tail -1 $OUT/e2e.txt)" >> $S
grep -E "FAIL|streams" $OUT/e2e.txt | cut -c1-300 >> $S
BUDGET=$(( 585 - ($(date +%s) - start) )) STREAMS="1 4 8 16 32" SKIP_PT=1 OUT=$OUT bash .carry/g4/run2.sh > /dev/null 2>&1
cat $S | grep -v "^spark-run: stream [0-9]" | cut -c1-400
