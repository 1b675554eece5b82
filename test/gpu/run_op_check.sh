#!/usr/bin/env bash
# The GPU op check on the shipped path (test/gpu/op_check), on a machine with a CUDA GPU: every
# op of the registry, compiled by spark-compile (build_op_check.sh, run elsewhere), executed by
# the CUDA executor and compared with the host reference executor on the same inputs.
#
#   test/gpu/run_op_check.sh FULL_DIR QUICK_DIR SPARK_OP_CHECK [--sanitizer] [--jobs N]
#                            [--logs DIR] [--group-timeout SECONDS]
#
# FULL_DIR and QUICK_DIR hold build_op_check.sh's output without and with --quick (sm_90a images
# to run, sm_121a images for the SASS). Steps:
#   1. spark-op-check run FULL_DIR --device cuda, the groups in parallel (the host reference is
#      the slow side);
#   2. the SASS of the very cubins (cuobjdump): for sm_121a and sm_90a, the linear tile entries
#      of prefill sizes hold tensor-core HMMA fed by ldmatrix (LDSM) and cp.async (LDGSTS); no
#      entry of sm_121a uses more than GB10's 99 KB of shared memory per block;
#   3. with --sanitizer, compute-sanitizer memcheck on QUICK_DIR's groups, and racecheck on the
#      groups of the ops that share memory within a block.
# Each group's output goes to its own log in --logs DIR (default: a temporary directory, removed
# at the end); a group that runs longer than --group-timeout (default 400 s) fails.
# Prints a summary; exits 1 when a step fails.
set -uo pipefail
FULL=$1
QUICK=$2
CHECK=$3
shift 3
SAN=0
JOBS=8
LOGS=""
GROUP_TIMEOUT=400
while [ $# -gt 0 ]; do
  case $1 in
    --sanitizer) SAN=1; shift ;;
    --jobs) JOBS=$2; shift 2 ;;
    --logs) LOGS=$2; shift 2 ;;
    --group-timeout) GROUP_TIMEOUT=$2; shift 2 ;;
    *) echo "run_op_check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
CUDA_ROOT=${CUDA_HOME:-/usr/local/cuda}
CUOBJDUMP=$(command -v cuobjdump || echo "$CUDA_ROOT/bin/cuobjdump")
SANITIZER=$(command -v compute-sanitizer || echo "$CUDA_ROOT/bin/compute-sanitizer")
KEEP_LOGS=1
[ -n "$LOGS" ] || { LOGS=$(mktemp -d); KEEP_LOGS=0; }
mkdir -p "$LOGS"
FAILED=0
SUMMARY=()
record() { if [ "$2" = 0 ]; then SUMMARY+=("PASS  $1"); else SUMMARY+=("FAIL  $1"); FAILED=1; fi; }

# 1. Every group of the full set, N at a time; each writes its own log.
run_groups() {  # dir log_prefix [prefix command...]
  local dir=$1 prefix=$2; shift 2
  cat "$dir/groups.txt" | xargs -P "$JOBS" -I{} sh -c \
    "timeout $GROUP_TIMEOUT $* \"$CHECK\" run \"$dir\" --device cuda --target sm_90a --group {} $QUICK_FLAG > \"$LOGS/$prefix.{}.log\" 2>&1; echo \$? > \"$LOGS/$prefix.{}.rc\""
}
QUICK_FLAG=""
run_groups "$FULL" full
cat "$LOGS"/full.*.log | grep -vE '^(spark-op-check:|op  )' | sort -k1,1 -s
bad=$(cat "$LOGS"/full.*.rc | grep -vc '^0$')
total=$(cat "$LOGS"/full.*.log | grep -cE ' (PASS|FAIL)')
failed=$(cat "$LOGS"/full.*.log | grep -cE ' FAIL|FAILED')
echo "op check: $total cases, $failed failed, $bad groups with a non-zero exit"
[ "$bad" = 0 ]
record "spark-op-check run (sm_90a images vs the host reference): $total cases" $?

# 2. SASS of the same cubins.
for target in sm_121a sm_90a; do
  sass=$LOGS/$target.sass
  : > "$sass"
  for cubin in "$FULL"/*."$target".cubin; do "$CUOBJDUMP" -sass "$cubin" >> "$sass"; done
  # The linear entries of groups of 16 tokens or more take the tile (prefill) path.
  awk '/Function : /{on = ($0 ~ /Function : spark_linear__/)} on' "$sass" > "$LOGS/linear.$target.sass"
  hmma=$(grep -c 'HMMA' "$LOGS/linear.$target.sass" || true)
  ldsm=$(grep -c 'LDSM' "$LOGS/linear.$target.sass" || true)
  ldgsts=$(grep -c 'LDGSTS' "$LOGS/linear.$target.sass" || true)
  echo "$target linear entries: $hmma HMMA, $ldsm LDSM, $ldgsts LDGSTS"
  [ "$hmma" -gt 0 ] && [ "$ldsm" -gt 0 ] && [ "$ldgsts" -gt 0 ]
  record "$target spark_linear entries: HMMA $hmma, LDSM $ldsm, LDGSTS $ldgsts" $?
done
max_shared=0
for cubin in "$FULL"/*.sm_121a.cubin; do
  for s in $("$CUOBJDUMP" -res-usage "$cubin" 2>&1 | grep -o 'SHARED:[0-9]*' | cut -d: -f2); do
    [ "$s" -gt "$max_shared" ] && max_shared=$s
  done
done
echo "sm_121a: the most shared memory of an entry: $max_shared bytes"
[ "$max_shared" -le $((99 * 1024)) ]
record "sm_121a entries within 99 KB of shared memory ($max_shared bytes)" $?

# 3. compute-sanitizer on the quick set.
if [ $SAN = 1 ]; then
  QUICK_FLAG="--quick"
  run_groups "$QUICK" memcheck "$SANITIZER" --tool memcheck --error-exitcode 99
  bad=$(cat "$LOGS"/memcheck.*.rc | grep -vc '^0$')
  errors=$(cat "$LOGS"/memcheck.*.log | grep -h 'ERROR SUMMARY' | awk '{s += $4} END {print s + 0}')
  echo "memcheck: $errors errors, $bad groups with a non-zero exit"
  [ "$bad" = 0 ] && [ "$errors" = 0 ]
  record "compute-sanitizer memcheck (quick set, $(wc -l < "$QUICK/groups.txt") groups): $errors errors" $?
  # racecheck on the groups whose ops share memory within a block, in parallel as above.
  grep -lE '^(rms_norm|residual_rms_norm|linear|rope|rms_norm_rope|attention|moe_topk|sample) ' \
    "$LOGS"/memcheck.*.log | sed 's|.*/memcheck\.||; s|\.log$||' | head -12 > "$LOGS/racecheck.groups"
  cat "$LOGS/racecheck.groups" | xargs -P "$JOBS" -I{} sh -c \
    "timeout $GROUP_TIMEOUT \"$SANITIZER\" --tool racecheck --error-exitcode 99 \"$CHECK\" run \"$QUICK\" --device cuda --target sm_90a --quick --group {} > \"$LOGS/racecheck.{}.log\" 2>&1; echo \$? > \"$LOGS/racecheck.{}.rc\""
  bad=$(cat "$LOGS"/racecheck.*.rc 2>/dev/null | grep -vc '^0$')
  echo "racecheck: $(ls "$LOGS"/racecheck.*.rc 2>/dev/null | wc -l) groups, $bad with a non-zero exit"
  [ "$bad" = 0 ]
  record "compute-sanitizer racecheck (groups with shared-memory ops)" $?
fi

echo
echo "==== summary ===="
printf '%s\n' "${SUMMARY[@]}"
for f in "$LOGS"/*.log; do grep -q 'FAIL\|ERROR SUMMARY: [1-9]' "$f" && { echo "== $f"; tail -20 "$f"; }; done
[ $KEEP_LOGS = 1 ] || rm -rf "$LOGS"
exit $FAILED
