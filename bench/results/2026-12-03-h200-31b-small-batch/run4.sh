#!/usr/bin/env bash
# GPU call 4: 31B aggregate decode rates at 1, 4, 8 streams (no logits comparison), then PyTorch
# eager batched decode on the same checkpoint in the same call.
set -u
start=$(date +%s)
S=$OUT/stage.txt
el() { echo $(( $(date +%s) - start )); }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $OUT/gpu.csv 2>&1
CK=/dev/shm/gemma4-31b-random
[ -f $CK/config.json ] || { timeout 200 python3 tools/reference/make_full_size.py --model 31b --out $CK --device cuda > $OUT/make.log 2>&1; echo "make rc=$? at $(el) s" >> $S; }
P=$(cat .carry/g4/prompt128.txt)
for n in 8 4 1; do
  timeout 100 .carry/g5/bin/spark-run .carry/g5/b31/gemma-4-31b.sm_90a.cubin --weights $CK --device cuda \
    --prompt-ids $P --max-new-tokens 48 --max-length 512 --streams $n > /dev/null 2> $OUT/s$n.err
  echo "s$n rc=$? at $(el) s: $(grep 'streams:' $OUT/s$n.err | sed 's/spark-run: //')" >> $S
done
t=$(( 370 - $(el) ))
echo "pytorch: ${t} s left" >> $S
if [ $t -gt 60 ]; then
  timeout -s INT $t python3 bench/pytorch_llm.py --model-dir $CK --mode eager --context 128 --prefill '' \
    --batch 1,4,8 --decode-tokens 32 --decode-warmup 4 --rounds 1 --json $OUT/pt.json > $OUT/pt.log 2>&1
  echo "pytorch rc=$?" >> $S
  python3 -c "
import json; d=json.load(open('$OUT/pt.json'))
for r in d['decode']:
  print('  pt batch', r.get('batch'), r.get('method'), 'ms/token', round(r.get('ms_per_token',0),2), 'aggregate tok/s', round(r.get('aggregate_tokens_per_s', r.get('tokens_per_s',0)),1), r.get('error',''))
" >> $S 2>&1
fi
echo "done at $(el) s" >> $S
cat $S
