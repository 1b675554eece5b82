#!/usr/bin/env bash
# GPU checks of the kernel library (kernels/), for a machine with a CUDA GPU. Needs only nvcc
# (CUDA 13), g++, cuobjdump, compute-sanitizer and this source tree: no CMake, MLIR or Abseil
# (the host reference kernels are plain C++: no Abseil).
#
# Steps:
#   1. build test/gpu/kernel_check.cu (kernels + __global__ entries) with nvcc for the GPU's arch,
#      and the host reference runtime/src/host_kernels.cc with g++;
#   2. run it: every op of kernel_abi.h vs the host reference, realistic Gemma 4 shapes;
#   3. compile the kernels for sm_121a and sm_90a to cubin with nvcc and check with cuobjdump that
#      spark_linear's tensor-core path became HMMA instructions fed by ldmatrix (LDSM) and
#      cp.async (LDGSTS); print register/spill usage;
#   4. compute-sanitizer memcheck on the harness (--quick shapes), racecheck and synccheck on the
#      ops that use shared memory.
# Exits non-zero when any step fails. Usage:
#   test/gpu/run_kernel_checks.sh [--seed=N] [--arch=sm_90a] [--build-dir=DIR] [--skip-sanitizer]
#                                 [--only=op,op,...] [--skip-sass]
# --only limits steps 2 and 4 to the named ops (e.g. after changing those kernels); --skip-sass
# skips step 3.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CUDA_ROOT=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$(command -v nvcc || echo "$CUDA_ROOT/bin/nvcc")}
CUOBJDUMP=${CUOBJDUMP:-$(command -v cuobjdump || echo "$CUDA_ROOT/bin/cuobjdump")}
SANITIZER=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo "$CUDA_ROOT/bin/compute-sanitizer")}
CXX=${CXX:-g++}

SEED=""
ARCH=""
BUILD=${TMPDIR:-/tmp}/spark-kernel-check
RUN_SANITIZER=1
RUN_SASS=1
ONLY=""
for arg in "$@"; do
  case "$arg" in
    --seed=*) SEED=${arg#--seed=} ;;
    --arch=*) ARCH=${arg#--arch=} ;;
    --build-dir=*) BUILD=${arg#--build-dir=} ;;
    --skip-sanitizer) RUN_SANITIZER=0 ;;
    --only=*) ONLY=${arg#--only=} ;;
    --skip-sass) RUN_SASS=0 ;;
    *) echo "usage: $0 [--seed=N] [--arch=sm_XX] [--build-dir=DIR] [--skip-sanitizer]" \
            "[--only=op,...] [--skip-sass]" >&2; exit 2 ;;
  esac
done
if [[ -z "$SEED" ]]; then
  SEED=$(( $(date +%s%N) % 1000000007 ))
fi
if [[ -z "$ARCH" ]]; then
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .')
  case "$cap" in
    90|100|103|110|120|121) ARCH="sm_${cap}a" ;;
    "") ARCH=sm_90a ;;
    *) ARCH="sm_${cap}" ;;
  esac
fi
mkdir -p "$BUILD"

declare -a SUMMARY=()
FAILED=0
step() { echo; echo "==== $* ===="; }
record() {  # record <name> <rc>
  if [[ "$2" == 0 ]]; then SUMMARY+=("PASS  $1"); else SUMMARY+=("FAIL  $1 (exit $2)"); FAILED=1; fi
}
finish() {
  echo; echo "==== summary (seed=$SEED, arch=$ARCH) ===="
  printf '%s\n' "${SUMMARY[@]}"
  exit $FAILED
}

for tool in "$NVCC" "$CXX"; do
  command -v "$tool" >/dev/null 2>&1 || { echo "missing tool: $tool" >&2; exit 2; }
done
echo "repo:   $ROOT"
echo "nvcc:   $NVCC ($("$NVCC" --version | tail -n1))"
echo "build:  $BUILD"
echo "arch:   $ARCH"
echo "seed:   $SEED"

# ---- 1. build ----
step "build harness ($ARCH)"
# The host reference needs only a sliver of Abseil (Status, StrCat, Span): always use the shim,
# so that nothing has to be linked (system Abseil headers would need its libraries too).
set -x
"$CXX" -std=c++17 -O2 -c "$ROOT/runtime/src/host_kernels.cc" -I "$ROOT/runtime/include" \
  -o "$BUILD/host_kernels.o" &&
"$NVCC" -arch="$ARCH" -std=c++17 -O3 -lineinfo -I "$ROOT" -I "$ROOT/runtime/include" \
  "$ROOT/test/gpu/kernel_check.cu" "$BUILD/host_kernels.o" \
  -o "$BUILD/kernel_check"
rc=$?
{ set +x; } 2>/dev/null
record "build kernel_check ($ARCH)" $rc
[[ $rc == 0 ]] || finish

# ---- 2. run ----
ONLY_ARGS=()
[[ -n "$ONLY" ]] && ONLY_ARGS=(--only="$ONLY")
step "kernel_check --seed=$SEED ${ONLY_ARGS[*]}"
"$BUILD/kernel_check" --seed="$SEED" "${ONLY_ARGS[@]}"
record "kernel_check vs host reference${ONLY:+ ($ONLY)}" $?

# ---- 3. SASS ----
SASS_ARCHS=(sm_121a sm_90a)
[[ $RUN_SASS == 1 ]] || SASS_ARCHS=()
for sass_arch in "${SASS_ARCHS[@]}"; do
  step "SASS check ($sass_arch)"
  cubin="$BUILD/kernels_${sass_arch}.cubin"
  if ! "$NVCC" -arch="$sass_arch" -cubin -std=c++17 -O3 -I "$ROOT" -I "$ROOT/runtime/include" \
       "$ROOT/test/gpu/sass_entries.cu" -o "$cubin"; then
    record "nvcc -cubin $sass_arch" 1
    continue
  fi
  if [[ ! -x "$CUOBJDUMP" ]] && ! command -v "$CUOBJDUMP" >/dev/null 2>&1; then
    echo "cuobjdump not found: skipping the SASS inspection"
    record "cuobjdump available" 1
    continue
  fi
  "$CUOBJDUMP" -sass "$cubin" > "$BUILD/kernels_${sass_arch}.sass"
  # The SASS of check_linear (inlines spark_linear) only.
  awk '/Function : /{on = ($0 ~ /Function : check_linear$/)} on' \
    "$BUILD/kernels_${sass_arch}.sass" > "$BUILD/linear_${sass_arch}.sass"
  hmma=$(grep -c 'HMMA' "$BUILD/linear_${sass_arch}.sass" || true)
  echo "check_linear: $(wc -l < "$BUILD/linear_${sass_arch}.sass") SASS lines, $hmma HMMA instructions"
  grep -o 'HMMA[.A-Z0-9]*' "$BUILD/linear_${sass_arch}.sass" | sort | uniq -c || true
  [[ "$hmma" -gt 0 ]]
  record "spark_linear has HMMA on $sass_arch ($hmma)" $?
  # The tile's fragments come from ldmatrix (LDSM) and its weights through cp.async (LDGSTS).
  ldsm=$(grep -c 'LDSM' "$BUILD/linear_${sass_arch}.sass" || true)
  ldgsts=$(grep -c 'LDGSTS' "$BUILD/linear_${sass_arch}.sass" || true)
  echo "check_linear: $ldsm LDSM, $ldgsts LDGSTS instructions"
  [[ "$ldsm" -gt 0 && "$ldgsts" -gt 0 ]]
  record "spark_linear has LDSM and LDGSTS on $sass_arch ($ldsm, $ldgsts)" $?
  echo "resource usage (REG = registers/thread, STACK/LOCAL > 0 means spills):"
  "$CUOBJDUMP" -res-usage "$cubin" 2>&1 | grep -E 'Function|REG' | paste - - |
    sed -E 's/[[:space:]]+/ /g' || true
done

# ---- 4. compute-sanitizer ----
if [[ $RUN_SANITIZER == 1 ]]; then
  if ! command -v "$SANITIZER" >/dev/null 2>&1 && [[ ! -x "$SANITIZER" ]]; then
    echo "compute-sanitizer not found" >&2
    record "compute-sanitizer available" 1
  else
    step "compute-sanitizer memcheck (--quick)"
    "$SANITIZER" --tool memcheck --leak-check full --error-exitcode 99 \
      "$BUILD/kernel_check" --quick --seed="$SEED" "${ONLY_ARGS[@]}"
    record "compute-sanitizer memcheck" $?
    SHARED_OPS=${ONLY:-rms_norm,residual_rms_norm,linear,rope,rms_norm_rope,attention,attention_merge,moe_topk}
    for tool in racecheck synccheck; do
      step "compute-sanitizer $tool (--quick --only=$SHARED_OPS)"
      "$SANITIZER" --tool $tool --error-exitcode 99 \
        "$BUILD/kernel_check" --quick --seed="$SEED" --only=$SHARED_OPS
      record "compute-sanitizer $tool" $?
    done
  fi
fi

finish
