#!/usr/bin/env bash
# Runs every `curl -s... $SPARK_URL/...` line of docs/serving.md against a spark-serve started
# here (tiny-dense on the host, a free port). Each must exit 0 and print what its route answers:
# JSON (one object, or server-sent events of JSON then [DONE]), or Prometheus text for /metrics.
#   run_doc_examples.sh SPARK_SERVE MODEL.cubin WEIGHTS TOKENIZER DOC
set -euo pipefail
serve=$1 cubin=$2 weights=$3 tokenizer=$4 doc=$5
log=$(mktemp)
"$serve" "$cubin" --weights "$weights" --tokenizer "$tokenizer" --device host --port 0 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 300); do
  grep -q "listening on" "$log" && break
  sleep 0.1
done
SPARK_URL=$(grep -o "listening on http://[0-9.:]*" "$log" | sed 's/listening on //')
export SPARK_URL
n=0
while IFS= read -r line; do
  out=$(eval "$line")
  python3 - "$line" "$out" <<'PY'
import json, sys
line, out = sys.argv[1], sys.argv[2]
if "/metrics" in line:
    assert "spark_queue_depth" in out, out[:200]
elif out.startswith("data: "):
    events = [e[6:] for e in out.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "[DONE]", events[-1]
    for e in events[:-1]:
        assert "error" not in json.loads(e), e
else:
    body = json.loads(out)
    assert "error" not in body, body
print("ok:", line.split("$SPARK_URL")[1].split()[0])
PY
  n=$((n + 1))
done < <(grep -E '^curl -s[N]? \$SPARK_URL' "$doc")
kill -TERM $pid
wait $pid
echo "docs examples: $n ran"
