#!/usr/bin/env bash
# The README's test command: installs what is missing, builds everything, and runs every test
# suite (lit + FileCheck, GoogleTest through lit, the host end-to-end tests), then the sanitizer
# stage (scripts/sanitize.sh: ASan + UBSan build of the runtime running its unit tests, the
# spark-run tests and the host end-to-end tests, and every fuzz target for SPARK_FUZZ_SECONDS,
# default 60, from its committed corpus). Prints "spark-tests: N passed, N failed, N skipped" and
# the sanitizer stage's lines.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
log=$(mktemp)
set +e
/usr/lib/llvm-22/bin/lit -sv build/test build/test/Unit 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
count() { local v; v=$(sed -n "s/^ *$1 *: *\([0-9][0-9]*\).*/\1/p" "$log" | tail -1); echo "${v:-0}"; }
passed=$(count Passed)
failed=$(( $(count Failed) + $(count 'Unexpectedly Passed') + $(count Unresolved) + $(count 'Timed Out') ))
skipped=$(( $(count Unsupported) + $(count 'Expectedly Failed') + $(count Excluded) ))
rm -f "$log"
echo "spark-tests: ${passed} passed, ${failed} failed, ${skipped} skipped"
sanitize_rc=0
scripts/sanitize.sh || sanitize_rc=$?
echo "spark-tests: ${passed} passed, ${failed} failed, ${skipped} skipped; sanitizer stage: $([ $sanitize_rc -eq 0 ] && echo passed || echo FAILED)"
exit $(( rc != 0 || sanitize_rc != 0 ))
