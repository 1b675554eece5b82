//===- LowerCollectives.cpp - all_reduce and all_gather -> transfer steps -===//
//
// The collectives spark-shard-tensor-parallel inserts become the registry's transfer ops
// all_reduce and all_gather (kernel_ops.def): steps without a kernel, which the runtime carries
// out through NCCL on GPUs or its in-process communicator on the host (docs/multi-gpu.md).
//
//===----------------------------------------------------------------------===//
#include "KernelLowering.h"

using namespace mlir;

namespace spark {
namespace kernel_lowering {
namespace {

LogicalResult lowerAllReduce(AllReduceOp op, KernelLowering &k) {
  const int64_t cols = op.getType().getDimSize(1);
  // The sum replaces the partial result in its buffer when nothing else reads it.
  Arg x = updatedInPlace(k, op.getResult(), op.getInput(), cols);
  k.launch(abi::OpId::kAllReduce, {x, Arg::numTokens(), k.i32(cols), k.i32(op.getRanks())}, {});
  return success();
}

LogicalResult lowerAllGather(AllGatherOp op, KernelLowering &k) {
  const int64_t cols = op.getInput().getType().getDimSize(1);
  Arg x = k.input(op.getInput());
  Arg gathered = k.scratch("gathered", {op.getRanks() * cols});
  k.launch(abi::OpId::kAllGather,
           {x, gathered, k.result(op.getResult()), Arg::numTokens(), k.i32(cols),
            k.i32(op.getRanks())},
           {});
  return success();
}

} // namespace

void populateCollectiveLowerings(LoweringTable &table) {
  table.add<AllReduceOp>(lowerAllReduce);
  table.add<AllGatherOp>(lowerAllGather);
}

} // namespace kernel_lowering
} // namespace spark
