#!/usr/bin/env bash
# Runs a command against a spark-serve started on a free port: with_server.sh SPARK_SERVE ARGS...
# -- COMMAND...; every @URL@ in COMMAND becomes the server's URL. Stops the server with SIGTERM
# afterwards; exits with the command's status (1 if the server did not start).
set -uo pipefail
server=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do server+=("$1"); shift; done
shift
log=$(mktemp)
"${server[@]}" --port 0 2>"$log" &
pid=$!
for _ in $(seq 600); do
  grep -q "listening on" "$log" && break
  kill -0 $pid 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
url=$(grep -o "listening on http://[0-9.:]*" "$log" | sed 's/listening on //')
[ -n "$url" ] || { cat "$log" >&2; exit 1; }
command=()
for arg in "$@"; do command+=("${arg//@URL@/$url}"); done
"${command[@]}"
rc=$?
kill -TERM $pid 2>/dev/null
wait $pid
rm -f "$log"
exit $rc
