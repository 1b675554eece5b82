//===- LowerLinear.cpp - spark.linear over bf16, NVFP4 and FP8 weights -----===//
//
// spark.linear to linear, linear_nvfp4 or linear_fp8 by the weight's format (the verifier checked
// the scales): one warp per output row, 8 warps per block, for any token count (the kernels take
// their GEMV or tensor-core path from it). With fp4Activations (spark-compile --fp4-activations),
// an NVFP4 linear whose input width is a multiple of 64 becomes linear_nvfp4_a4 (W4A4) over the
// packed NVFP4 rows of its input, which one quantize_nvfp4_rows (a block per token row) writes
// for all the linears that read that input.
//
//===----------------------------------------------------------------------===//
#include "KernelLowering.h"

using namespace mlir;

namespace spark {
namespace kernel_lowering {
namespace {

LogicalResult lowerLinear(LinearOp l, KernelLowering &k) {
  FailureOr<Arg> w = k.weight(l.getWeight());
  if (failed(w))
    return failure();
  SmallVector<Arg, 2> scales;
  for (Value scale : l.getScales()) {
    FailureOr<Arg> arg = k.weight(scale);
    if (failed(arg))
      return failure();
    scales.push_back(*arg);
  }
  auto wt = l.getWeight().getType();
  const int64_t outFeatures = wt.getDimSize(0), inFeatures = wt.getDimSize(1);
  Arg in = k.input(l.getInput());
  Arg y = k.result(l.getResult());
  const abi::GridRule grid = fixedGrid(outFeatures, 8);
  switch (l.getWeightFormat()) {
  case LinearOp::WeightFormat::kBF16:
    k.launch(abi::OpId::kLinear,
             {in, *w, y, Arg::numTokens(), k.i32(outFeatures), k.i32(inFeatures)}, grid);
    break;
  case LinearOp::WeightFormat::kNvfp4:
    if (k.fp4Activations() && inFeatures % 64 == 0) {
      k.launch(abi::OpId::kLinearNvfp4A4,
               {k.nvfp4Rows(l.getInput(), inFeatures), *w, scales[0], scales[1], y,
                Arg::numTokens(), k.i32(outFeatures), k.i32(inFeatures),
                k.i32(abi::Nvfp4RowWords(inFeatures))},
               grid);
      break;
    }
    k.launch(abi::OpId::kLinearNvfp4,
             {in, *w, scales[0], scales[1], y, Arg::numTokens(), k.i32(outFeatures),
              k.i32(inFeatures)},
             grid);
    break;
  case LinearOp::WeightFormat::kFp8: {
    const int64_t scaleCount =
        cast<RankedTensorType>(l.getScales()[0].getType()).getNumElements();
    k.launch(abi::OpId::kLinearFp8,
             {in, *w, scales[0], y, Arg::numTokens(), k.i32(outFeatures), k.i32(inFeatures),
              k.i32(scaleCount)},
             grid);
    break;
  }
  }
  return success();
}

} // namespace

void populateLinearLowerings(LoweringTable &table) { table.add<LinearOp>(lowerLinear); }

} // namespace kernel_lowering
} // namespace spark
