#!/usr/bin/env bash
# Emits the GPU op check's modules (build/bin/spark-op-check emit, test/gpu/op_check) into DIR and
# compiles each with spark-compile for every TARGET (default: sm_90a, the H200's, and sm_121a,
# the DGX Spark's, whose SASS run_op_check.sh reads): DIR/<group>.<target>.cubin, or for a PTX
# target (compute_90) DIR/<group>.compute_90.{ptx,plan}. Runs here (the GPU machine has no
# LLVM/MLIR); run_op_check.sh runs them there.
#
#   test/gpu/build_op_check.sh DIR [--quick] [--only op,...] [--target T]... [--build BUILD_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DIR=$1
shift
BUILD=$ROOT/build
emit=()
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --quick) emit+=(--quick); shift ;;
    --only) emit+=(--only "$2"); shift 2 ;;
    --target) targets+=("$2"); shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    *) echo "build_op_check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(sm_90a sm_121a)
"$BUILD/bin/spark-op-check" emit "$DIR" "${emit[@]}"
for group in $(cat "$DIR/groups.txt"); do
  for target in "${targets[@]}"; do
    "$BUILD/bin/spark-compile" "$DIR/$group.mlir" --target "$target" -o "$DIR/$group.$target.cubin"
  done
done
echo "build_op_check: $(wc -l < "$DIR/groups.txt") modules compiled for ${targets[*]} in $DIR"
