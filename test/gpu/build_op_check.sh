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
# Emit into a scratch directory and keep a module's old file when its text did not change, so
# that only new or changed modules are compiled again.
mkdir -p "$DIR"
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
"$BUILD/bin/spark-op-check" emit "$SCRATCH" "${emit[@]}"
cp "$SCRATCH/groups.txt" "$DIR/groups.txt"
# Modules of groups no longer emitted go (run_op_check.sh reads every cubin in DIR).
for f in "$DIR"/*.mlir; do
  [ -e "$f" ] || continue
  group=$(basename "$f" .mlir)
  grep -qx "$group" "$DIR/groups.txt" || rm -f "$DIR/$group".*
done
compiled=0
for group in $(cat "$DIR/groups.txt"); do
  cmp -s "$SCRATCH/$group.mlir" "$DIR/$group.mlir" || cp "$SCRATCH/$group.mlir" "$DIR/$group.mlir"
  stale=()
  for target in "${targets[@]}"; do
    out=$DIR/$group.$target.cubin
    [[ $target == compute_* ]] && out=$DIR/$group.$target.ptx
    [ "$out" -nt "$DIR/$group.mlir" ] || stale+=(--target "$target")
  done
  [ ${#stale[@]} -gt 0 ] || continue
  # One target: -o names its output; several: spark-compile writes <stem>.<target>.cubin (or
  # .ptx) beside -o.
  if [ ${#stale[@]} -eq 2 ]; then
    target=${stale[1]}
    out=$DIR/$group.$target.cubin
    [[ $target == compute_* ]] && out=$DIR/$group.$target.ptx
    "$BUILD/bin/spark-compile" "$DIR/$group.mlir" --target "$target" -o "$out"
  else
    "$BUILD/bin/spark-compile" "$DIR/$group.mlir" "${stale[@]}" -o "$DIR/$group.cubin"
  fi
  compiled=$((compiled + 1))
done
echo "build_op_check: $(wc -l < "$DIR/groups.txt") modules for ${targets[*]} in $DIR ($compiled compiled)"
