#!/usr/bin/env bash
# Configures and builds Spark (compiler, runtime, kernel library, tests) in build/.
# Incremental: a second run rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${SPARK_JOBS:-$(nproc)}
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir "$@"
fi
ninja -C build -j"$jobs"
