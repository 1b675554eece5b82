#!/usr/bin/env bash
# Starts spark-serve with the given arguments on a free port, sends one chat request, prints the
# server's stderr and "answer: <response>", stops the server with SIGTERM (exit status: the
# server's).   serve_once.sh SPARK_SERVE ARGS...
set -uo pipefail
log=$(mktemp)
"$@" --port 0 2>"$log" &
pid=$!
for _ in $(seq 600); do
  grep -q "listening on" "$log" && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
url=$(grep -o "listening on http://[0-9.:]*" "$log" | sed 's/listening on //')
answer=$(curl -s "$url/v1/chat/completions" -d '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0}')
kill -TERM $pid 2>/dev/null
wait $pid
rc=$?
cat "$log"
rm -f "$log"
echo "answer: $answer"
exit $rc
