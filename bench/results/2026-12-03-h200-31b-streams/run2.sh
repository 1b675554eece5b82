#!/usr/bin/env bash
# GPU call 2: Gemma 4 31B (random bf16 weights): spark-run --streams N (continuous batching) for
# N = 1, 4, 8, 16, 32, then PyTorch eager batched decode (DynamicCache) in the same call.
set -u
start=$(date +%s)
left() { echo $(( ${BUDGET:-585} - ($(date +%s) - start) )); }
S=$OUT/stage.txt
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $OUT/gpu.csv 2>&1
CK=/dev/shm/gemma4-31b-random
if [ ! -f $CK/config.json ]; then
  timeout 200 python3 tools/reference/make_full_size.py --model 31b --out $CK --device cuda > $OUT/make.log 2>&1
  echo "make rc=$? at $(( $(date +%s) - start )) s" >> $S
fi
P=$(cat .carry/g4/prompt128.txt)
for n in ${STREAMS:-1 4 8 16 32}; do
  [ $(left) -gt 200 ] || { echo "streams $n: skipped (time)" >> $S; continue; }
  timeout 150 .carry/bin2/spark-run .carry/b31/gemma-4-31b.sm_90a.cubin --weights $CK --device cuda \
    --prompt-ids $P --max-new-tokens 64 --max-length 512 --streams $n --json \
    > $OUT/streams_$n.json 2> $OUT/streams_$n.err
  rc=$?
  echo "streams $n rc=$rc at $(( $(date +%s) - start )) s: $(grep 'streams:' $OUT/streams_$n.err | sed 's/spark-run: //')" >> $S
  python3 -c "import json;d=json.load(open('$OUT/streams_$n.json'));print('  differing', d['differing_streams'], 'alone', round(d['alone']['tokens_per_second'],1), 'together', round(d['together']['tokens_per_second'],1), 'ms/token/stream', round(d['together']['ms_between_tokens'],2))" >> $S 2>&1
  [ $rc -eq 0 ] || tail -5 $OUT/streams_$n.err >> $S
done
[ -n "${SKIP_PT:-}" ] && { echo "done at $(( $(date +%s) - start )) s" >> $S; cat $S; exit 0; }
t=$(( $(left) - 10 ))
echo "pytorch: ${t} s left" >> $S
if [ $t -gt 60 ]; then
  timeout -s INT $t python3 bench/pytorch_llm.py --model-dir $CK --mode eager --context 128 --prefill '' \
    --batch 1,4,8,16,32 --decode-tokens 32 --decode-warmup 4 --rounds 1 --json $OUT/pt.json > $OUT/pt.log 2>&1
  echo "pytorch rc=$?" >> $S
  python3 -c "
import json; d=json.load(open('$OUT/pt.json'))
for r in d['decode']:
  print('  pt batch', r.get('batch'), r.get('method'), 'ms/token', round(r.get('ms_per_token',0),2), 'aggregate tok/s', round(r.get('aggregate_tokens_per_s', r.get('tokens_per_s',0)),1), r.get('error',''))
" >> $S 2>&1
fi
echo "done at $(( $(date +%s) - start )) s" >> $S
cat $S
