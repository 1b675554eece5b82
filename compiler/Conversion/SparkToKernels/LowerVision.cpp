//===- LowerVision.cpp - the vision tower's ops ----------------------------===//
//
// The ops of the `encode_image` function (Gemma 4's vision tower, one image's patches as its
// tokens) to their kernels: spark.shift_scale, spark.patch_position_embedding, spark.clamp,
// spark.rope_2d, spark.bidirectional_attention, spark.pool_by_position, spark.standardize. Each
// is one launch; patch positions are an i32 [T, 2] activation (the encoder's patch_positions
// input).
//
//===----------------------------------------------------------------------===//
#include "KernelLowering.h"

#include "dialects/Spark/IR/TypeInference.h"

using namespace mlir;

namespace spark {
namespace kernel_lowering {
namespace {

LogicalResult lowerShiftScale(ShiftScaleOp s, KernelLowering &k) {
  Arg in = k.input(s.getInput());
  k.launch(abi::OpId::kShiftScale,
           {in, k.result(s.getResult()), Arg::numTokens(), k.i32(elementsPerRow(s.getResult())),
            KernelLowering::f32(s.getShift()), KernelLowering::f32(s.getScale())},
           rowsOf(s.getResult()));
  return success();
}

LogicalResult lowerPatchPositionEmbedding(PatchPositionEmbeddingOp p, KernelLowering &k) {
  FailureOr<Arg> table = k.weight(p.getTable());
  if (failed(table))
    return failure();
  Arg in = k.input(p.getInput()), pos = k.input(p.getPositions());
  RankedTensorType tableType = p.getTable().getType();
  k.launch(abi::OpId::kPatchPositionEmbedding,
           {in, pos, *table, k.result(p.getResult()), Arg::numTokens(),
            k.i32(tableType.getDimSize(2)), k.i32(tableType.getDimSize(1))},
           rowsOf(p.getResult()));
  return success();
}

LogicalResult lowerClamp(ClampOp c, KernelLowering &k) {
  FailureOr<Arg> lo = k.weight(c.getMin());
  if (failed(lo))
    return failure();
  FailureOr<Arg> hi = k.weight(c.getMax());
  if (failed(hi))
    return failure();
  Arg in = k.input(c.getInput());
  k.launch(abi::OpId::kClamp,
           {in, *lo, *hi, k.result(c.getResult()), Arg::numTokens(),
            k.i32(elementsPerRow(c.getResult()))},
           rowsOf(c.getResult()));
  return success();
}

LogicalResult lowerRope2d(Rope2dOp r, KernelLowering &k) {
  RankedTensorType in = r.getInput().getType();
  Arg x = k.input(r.getInput()), pos = k.input(r.getPositions());
  k.launch(abi::OpId::kRope2d,
           {x, pos, k.result(r.getResult()), Arg::numTokens(), k.i32(in.getDimSize(1)),
            k.i32(in.getDimSize(2)), KernelLowering::f32(r.getTheta())},
           perToken(in.getDimSize(1)));
  return success();
}

LogicalResult lowerBidirectionalAttention(BidirectionalAttentionOp a, KernelLowering &k) {
  RankedTensorType q = a.getQuery().getType(), key = a.getKey().getType();
  Arg qa = k.input(a.getQuery()), ka = k.input(a.getKey()), va = k.input(a.getValue());
  // One block per (query head, tile of 32 query tokens): kernels/vision.cu.
  k.launch(abi::OpId::kBidirectionalAttention,
           {qa, ka, va, k.result(a.getResult()), Arg::numTokens(), k.i32(q.getDimSize(1)),
            k.i32(key.getDimSize(1)), k.i32(q.getDimSize(2)), KernelLowering::f32(a.getScale())},
           perToken(q.getDimSize(1), 32));
  return success();
}

LogicalResult lowerPoolByPosition(PoolByPositionOp p, KernelLowering &k) {
  Arg in = k.input(p.getInput()), pos = k.input(p.getPositions());
  k.launch(abi::OpId::kPoolByPosition,
           {in, pos, k.result(p.getResult()), Arg::numTokens(),
            k.i32(elementsPerRow(p.getResult())), k.i32(p.getKernelSize()),
            KernelLowering::f32(p.getScale())},
           // A block per (output row, 1024 columns): kernels/vision.cu.
           perToken((elementsPerRow(p.getResult()) + 1023) / 1024));
  return success();
}

LogicalResult lowerStandardize(StandardizeOp s, KernelLowering &k) {
  FailureOr<Arg> bias = k.weight(s.getBias());
  if (failed(bias))
    return failure();
  FailureOr<Arg> scale = k.weight(s.getScale());
  if (failed(scale))
    return failure();
  Arg in = k.input(s.getInput());
  k.launch(abi::OpId::kStandardize,
           {in, *bias, *scale, k.result(s.getResult()), Arg::numTokens(),
            k.i32(elementsPerRow(s.getResult()))},
           rowsOf(s.getResult()));
  return success();
}

} // namespace

void populateVisionLowerings(LoweringTable &table) {
  table.add<ShiftScaleOp>(lowerShiftScale);
  table.add<PatchPositionEmbeddingOp>(lowerPatchPositionEmbedding);
  table.add<ClampOp>(lowerClamp);
  table.add<Rope2dOp>(lowerRope2d);
  table.add<BidirectionalAttentionOp>(lowerBidirectionalAttention);
  table.add<PoolByPositionOp>(lowerPoolByPosition);
  table.add<StandardizeOp>(lowerStandardize);
}

} // namespace kernel_lowering
} // namespace spark
