#!/usr/bin/env bash
# GPU call 5: the linears' op check (cuda vs host reference) and the kernel bench of the working
# tree (small-batch unroll per format: NVFP4 1 quad, FP8 2, bf16 4).
set -u
S=$OUT/stage.txt
timeout 100 .carry/g5/bin/spark-op-check run .carry/g5/opc --device cuda --target sm_90a --only linear,linear_nvfp4,linear_fp8 > $OUT/opcheck.txt 2>&1
echo "opcheck rc=$?: $(tail -1 $OUT/opcheck.txt)" >> $S
grep FAIL $OUT/opcheck.txt >> $S
timeout 150 bench/run_bench.sh kernels $OUT/kb > $OUT/kb.log 2>&1
echo "kernels rc=$?" >> $S
rm -f $OUT/kb/kernel_bench
grep -E "linear" $OUT/kb.log | grep -E "T=1 |T=8 " >> $S
cat $S
