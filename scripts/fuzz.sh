#!/usr/bin/env bash
# Runs every libFuzzer target of build-sanitize/fuzz (scripts/sanitize.sh builds them) for
# SECONDS each (default 60), starting from its committed corpus test/fuzz/corpus/<target>/ and
# the inputs that once crashed it (test/fuzz/regressions/<target>/, each also a unit test).
# New inputs go to build-sanitize/fuzz-corpus/<target>/ (the committed corpus is not touched);
# a crash, leak or sanitizer report stops that target, saves the input under
# build-sanitize/fuzz-crashes/ and fails the run.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=(fuzz_plan_section fuzz_plan_execution fuzz_cubin fuzz_safetensors
           fuzz_safetensors_index fuzz_target_names fuzz_gemma_config fuzz_tokenizer fuzz_chat_template
           fuzz_openai_request fuzz_image_decode)
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p build-sanitize/fuzz-crashes
failed=0
for target in "${targets[@]}"; do
  binary=build-sanitize/fuzz/$target
  corpus=test/fuzz/corpus/$target
  regressions=()  # inputs that once crashed the target (test/fuzz/regressions/<target>/)
  [ -d test/fuzz/regressions/$target ] && regressions=(test/fuzz/regressions/$target)
  work=build-sanitize/fuzz-corpus/$target
  if [ ! -x "$binary" ]; then echo "fuzz: $binary is missing; run scripts/sanitize.sh" >&2; exit 1; fi
  mkdir -p "$work"
  log=build-sanitize/fuzz-crashes/$target.log
  # Inputs long enough for structure that matters: deep nesting (tens of KB), whole plans (60 KB).
  case $target in
    fuzz_gemma_config|fuzz_safetensors_index|fuzz_tokenizer|fuzz_chat_template|fuzz_openai_request|fuzz_image_decode) max_len=65536 ;;
    fuzz_plan_section|fuzz_plan_execution|fuzz_cubin) max_len=1048576 ;;
    *) max_len=16384 ;;
  esac
  "$binary" "$work" "$corpus" "${regressions[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=$max_len \
      -malloc_limit_mb=1024 -print_final_stats=1 \
      -artifact_prefix=build-sanitize/fuzz-crashes/"$target"- >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  if [ $rc -eq 0 ]; then
    echo "spark-fuzz: $target: ${seconds}s, ${runs:-?} inputs, ${cov:-cov: ?}, no crash, leak or sanitizer report"
  else
    failed=1
    echo "spark-fuzz: $target: FAILED (exit $rc); log: $log"
    grep -E 'ERROR|SUMMARY|fuzz invariant|runtime error|Test unit written' "$log" | head -20
  fi
done
exit $failed
