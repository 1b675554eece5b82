//===- LowerEmbeddings.cpp - token ids and rows: embedding, merge, select --===//
//
// spark.embedding, spark.mask_tokens, spark.scatter_nd (the soft-token merge) and
// spark.select_group (a per-layer input's slice) to their kernels (kernel_ops.def).
//
//===----------------------------------------------------------------------===//
#include "KernelLowering.h"

#include "dialects/Spark/IR/TypeInference.h"

using namespace mlir;

namespace spark {
namespace kernel_lowering {
namespace {

LogicalResult lowerEmbedding(EmbeddingOp e, KernelLowering &k) {
  FailureOr<Arg> table = k.weight(e.getTable());
  if (failed(table))
    return failure();
  auto tableType = e.getTable().getType();
  Arg ids = k.input(e.getIds());
  k.launch(abi::OpId::kEmbedding,
           {ids, *table, k.result(e.getResult()), Arg::numTokens(), k.i32(tableType.getDimSize(0)),
            k.i32(tableType.getDimSize(1)), KernelLowering::f32(e.getScale())},
           rowsOf(e.getResult()));
  return success();
}

LogicalResult lowerMaskTokens(MaskTokensOp m, KernelLowering &k) {
  SmallVector<int64_t, 3> ids(m.getTokenIds().begin(), m.getTokenIds().end());
  ids.resize(3, -1);
  Arg in = k.input(m.getIds());
  k.launch(abi::OpId::kMaskTokens,
           {in, k.result(m.getResult()), Arg::numTokens(), k.i32(ids[0]), k.i32(ids[1]),
            k.i32(ids[2]), k.i32(m.getReplacement())},
           perToken(1, 256));
  return success();
}

LogicalResult lowerScatterNd(ScatterNdOp s, KernelLowering &k) {
  int64_t cols = s.getDest().getType().getDimSize(1);
  Arg dest = updatedInPlace(k, s.getResult(), s.getDest(), cols);
  k.launch(abi::OpId::kScatterRows,
           {dest, k.input(s.getIndices()), k.input(s.getUpdates()), Arg::numTokens(),
            Arg::numSoftTokens(), k.i32(cols)},
           perToken(1));
  return success();
}

LogicalResult lowerSelectGroup(SelectGroupOp s, KernelLowering &k) {
  RankedTensorType in = s.getInput().getType();
  Arg x = k.input(s.getInput());
  k.launch(abi::OpId::kSelectGroup,
           {x, k.result(s.getResult()), Arg::numTokens(), k.i32(in.getDimSize(1)),
            k.i32(in.getDimSize(2)), k.i32(s.getIndex())},
           rowsOf(s.getResult()));
  return success();
}

} // namespace

void populateEmbeddingLowerings(LoweringTable &table) {
  table.add<EmbeddingOp>(lowerEmbedding);
  table.add<MaskTokensOp>(lowerMaskTokens);
  table.add<ScatterNdOp>(lowerScatterNd);
  table.add<SelectGroupOp>(lowerSelectGroup);
}

} // namespace kernel_lowering
} // namespace spark
