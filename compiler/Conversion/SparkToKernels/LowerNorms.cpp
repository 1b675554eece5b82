//===- LowerNorms.cpp - RMSNorm and its fused forms ------------------------===//
//
// spark.rms_norm, spark.residual_rms_norm (with the spark.scalar_mul after it fused in, Gemma 4's
// layer scalar) and spark.rms_norm_rope to their kernels: one block per row.
//
//===----------------------------------------------------------------------===//
#include "KernelLowering.h"

using namespace mlir;

namespace spark {
namespace kernel_lowering {
namespace {

LogicalResult lowerRmsNorm(RmsNormOp n, KernelLowering &k) {
  RankedTensorType type = n.getInput().getType();
  int64_t groups = type.getRank() == 3 ? type.getDimSize(1) : 1;
  FailureOr<Arg> weight = k.optionalWeight(n.getWeight());
  if (failed(weight))
    return failure();
  Arg in = k.input(n.getInput());
  k.launch(abi::OpId::kRmsNorm,
           {in, *weight, k.result(n.getResult()), Arg::numTokens(), k.i32(groups),
            k.i32(type.getShape().back()), KernelLowering::f32(n.getEpsilon())},
           perToken(groups));
  return success();
}

LogicalResult lowerResidualRmsNorm(ResidualRmsNormOp n, KernelLowering &k) {
  FailureOr<Arg> weight = k.optionalWeight(n.getWeight());
  if (failed(weight))
    return failure();
  Arg in = k.input(n.getInput()), residual = k.input(n.getResidual());
  const int64_t cols = n.getInput().getType().getShape().back();
  // Followed only by a spark.scalar_mul (Gemma 4's layer_scalar after the post-feedforward
  // norm): one residual_rms_norm_scale launch computes both, and the sum is never stored.
  auto scale = n->hasOneUse() ? dyn_cast<ScalarMulOp>(*n->user_begin()) : ScalarMulOp();
  if (scale && scale.getInput() == n.getResult()) {
    FailureOr<Arg> scalar = k.weight(scale.getScalar());
    if (failed(scalar))
      return failure();
    k.fuse(scale);
    k.launch(abi::OpId::kResidualRmsNormScale,
             {in, *weight, residual, *scalar, k.result(scale.getResult()), Arg::numTokens(),
              k.i32(cols), KernelLowering::f32(n.getEpsilon()),
              k.i32(k.bf16Activations() ? 1 : 0)},
             perToken(1), "scale");
    return success();
  }
  k.launch(abi::OpId::kResidualRmsNorm,
           {in, *weight, residual, k.result(n.getResult()), Arg::numTokens(), k.i32(cols),
            KernelLowering::f32(n.getEpsilon())},
           perToken(1));
  return success();
}

LogicalResult lowerRmsNormRope(RmsNormRopeOp r, KernelLowering &k) {
  RankedTensorType in = r.getInput().getType();
  FailureOr<Arg> weight = k.optionalWeight(r.getWeight());
  if (failed(weight))
    return failure();
  Arg x = k.input(r.getInput()), pos = k.input(r.getPositions());
  k.launch(abi::OpId::kRmsNormRope,
           {x, *weight, pos, k.result(r.getResult()), Arg::numTokens(), k.i32(in.getDimSize(1)),
            k.i32(in.getDimSize(2)), k.i32(r.getRotatedPairs()), KernelLowering::f32(r.getTheta()),
            KernelLowering::f32(r.getFactor()), KernelLowering::f32(r.getEpsilon())},
           perToken(1));
  return success();
}

} // namespace

void populateNormLowerings(LoweringTable &table) {
  table.add<RmsNormOp>(lowerRmsNorm);
  table.add<ResidualRmsNormOp>(lowerResidualRmsNorm);
  table.add<RmsNormRopeOp>(lowerRmsNormRope);
}

} // namespace kernel_lowering
} // namespace spark
