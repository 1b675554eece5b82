#!/usr/bin/env bash
# Runs the kernel check harness (test/gpu/kernel_check.cu) WITHOUT a GPU, on the CPU emulation of
# test/gpu/emulation/cuda_emu.h: the kernel sources are compiled as host C++ and every block's
# threads run as cooperative fibers. It checks kernel logic (indexing, grid-stride loops,
# reductions, barriers, the mma.sync fragment layout) against the host reference; it does not
# replace run_kernel_checks.sh on a real GPU (no ex2.approx, no real tensor cores, no timing).
# Slow (minutes): --quick shapes by default, one op at a time with --only.
#
#   test/gpu/run_emulated_checks.sh [--seed=N] [--only=op,op,...]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${TMPDIR:-/tmp}/spark-kernel-emulation
CXX=${CXX:-g++}
mkdir -p "$BUILD"
"$CXX" -std=c++17 -O2 -c "$ROOT/runtime/src/host_kernels.cc" -I "$ROOT/runtime/include" \
  -o "$BUILD/host_kernels.o"
"$CXX" -std=c++17 -O2 -DSPARK_KERNEL_EMULATION -include "$ROOT/test/gpu/emulation/cuda_emu.h" \
  -x c++ -I "$ROOT" -I "$ROOT/runtime/include" "$ROOT/test/gpu/kernel_check.cu" \
  -x none "$BUILD/host_kernels.o" -o "$BUILD/kernel_check_emulated"
exec "$BUILD/kernel_check_emulated" --quick "$@"
