#!/usr/bin/env bash
# The sanitizer stage of the test command (scripts/test.sh runs it after the main suites):
#   1. builds the runtime, spark-run, the runtime's GoogleTest suite and the libFuzzer targets in
#      build-sanitize/ with clang-22, AddressSanitizer + UndefinedBehaviorSanitizer (no recovery:
#      any report fails);
#   2. runs the runtime unit tests, the spark-run tool tests, the host end-to-end tests and the
#      spark-serve tests (the OpenAI client suite with its soak) with those binaries (spark-import /
#      spark-compile come from build/, which scripts/build.sh made);
#   3. runs every fuzz target from its committed corpus (scripts/fuzz.sh, SPARK_FUZZ_SECONDS each,
#      default 60).
# Prints "spark-sanitize: ..." lines; exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${SPARK_JOBS:-$(nproc)}
if [ ! -x build/bin/spark-compile ]; then
  echo "sanitize: build/bin/spark-compile is missing; run scripts/build.sh first" >&2
  exit 1
fi
if [ ! -f build-sanitize/build.ninja ]; then
  CC=/usr/lib/llvm-22/bin/clang CXX=/usr/lib/llvm-22/bin/clang++ \
  cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DSPARK_BUILD_COMPILER=OFF -DSPARK_BUILD_KERNELS=OFF -DSPARK_BUILD_FUZZERS=ON \
        -DSPARK_SANITIZE=address,undefined \
        -DSPARK_COMPILER_TOOLS_DIR="$PWD/build/bin" >/dev/null
fi
ninja -C build-sanitize -j"$jobs" spark-run SparkRuntimeTests SparkTextTests SparkServeTests SparkImageTests spark-image spark-tokenize spark-serve spark-fuzzers

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
set +e
/usr/lib/llvm-22/bin/lit -s build-sanitize/test/Unit build-sanitize/test/tools/spark-run \
    build-sanitize/test/tools/spark-tokenize \
    build-sanitize/test/e2e build-sanitize/test/serve
lit_rc=$?
set -e
echo "spark-sanitize: ASan+UBSan unit, spark-run, host end-to-end and spark-serve tests: $([ $lit_rc -eq 0 ] && echo passed || echo FAILED)"

fuzz_rc=0
scripts/fuzz.sh "${SPARK_FUZZ_SECONDS:-60}" || fuzz_rc=$?
exit $(( lit_rc != 0 || fuzz_rc != 0 ))
