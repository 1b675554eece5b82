//===- PlanArena.cpp - place a program's buffers in one activation arena ---===//
//
// After spark-lower-to-kernels: every buffer of a spark.program gets a byte offset in one
// arena, and the program its arena_bytes. A buffer lives from the first launch that names it
// to the last (the plan's inputs for the whole program, the logits from their first launch to
// the end); buffers whose lives do not overlap share bytes. Placement is first fit, in order of
// first use, each buffer 256-byte aligned. Lives come from the launches themselves, in plan
// order: a call runs a subset of them (its program), in the same order, so two buffers that
// share bytes are never both live in any call.
//
//===----------------------------------------------------------------------===//
#include "compiler/Conversion/Passes.h"

#include "dialects/Spark/IR/SparkOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <limits>

namespace spark {
#define GEN_PASS_DEF_SPARKPLANARENAPASS
#include "compiler/Conversion/Passes.h.inc"
} // namespace spark

using namespace mlir;
using namespace spark;

namespace {

constexpr int64_t kAlignment = 256;
constexpr int64_t kMaxBufferBytes = int64_t{1} << 40;
/// "Live for the whole program": before the first launch / after the last.
constexpr int64_t kBeforeAll = -1;
constexpr int64_t kAfterAll = std::numeric_limits<int64_t>::max();

int64_t alignUp(int64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

struct Placement {
  int64_t bytes = 0;  // aligned
  int64_t firstUse = kAfterAll;
  int64_t lastUse = kBeforeAll;
  int64_t offset = 0;
};

LogicalResult planProgram(ProgramOp program) {
  auto buffers = program.getBuffers().getAsRange<BufferAttr>();
  SmallVector<Placement> placements(program.getBuffers().size());
  for (auto [id, buffer] : llvm::enumerate(buffers)) {
    if (buffer.getOffset())
      return program.emitOpError("buffer ")
             << id << " already has an offset: the arena is planned once, after "
             << "spark-lower-to-kernels";
    int64_t bytes = buffer.elementBytes() * program.getMaxTokens();
    for (int64_t d : buffer.getRowShape())
      if (llvm::MulOverflow(bytes, d, bytes) || bytes > kMaxBufferBytes)
        return program.emitOpError("buffer ") << id << " needs more than 2^40 bytes";
    placements[id].bytes = alignUp(bytes);
  }
  auto touch = [&](int64_t id, int64_t at) -> LogicalResult {
    if (id < 0 || id >= static_cast<int64_t>(placements.size()))
      return program.emitOpError("names buffer ") << id << ", which it does not have";
    placements[id].firstUse = std::min(placements[id].firstUse, at);
    placements[id].lastUse = std::max(placements[id].lastUse, at);
    return success();
  };
  int64_t index = 0;
  for (Operation &step : program.getBody().front()) {
    ArrayAttr args = isa<LaunchOp>(step)     ? cast<LaunchOp>(step).getArgs()
                     : isa<TransferOp>(step) ? cast<TransferOp>(step).getArgs()
                                             : ArrayAttr();
    if (!args)
      continue;
    for (auto arg : args.getAsRange<LaunchArgAttr>())
      if (arg.getKind() == LaunchArgKind::buffer && failed(touch(arg.getValue(), index)))
        return failure();
    ++index;
  }
  // The runtime writes the inputs before the first launch and reads the outputs after the last.
  ProgramInputsAttr in = program.getInputs();
  for (int64_t id : {in.getIds(), in.getPositions(), in.getSoftEmbeddings(), in.getSoftIndices(),
                     in.getLastVisible(), in.getSampling(), in.getSequences(),
                     in.getPixelPatches(), in.getPatchPositions()})
    if (id >= 0 && (failed(touch(id, kBeforeAll)) || failed(touch(id, kAfterAll))))
      return failure();
  for (int64_t id : {program.getOutputs().getLogits(), program.getOutputs().getTokens(),
                     program.getOutputs().getEmbeddings()})
    if (id >= 0 && failed(touch(id, kAfterAll)))
      return failure();

  SmallVector<int64_t> order(placements.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  llvm::stable_sort(order, [&](int64_t a, int64_t b) {
    return placements[a].firstUse < placements[b].firstUse;
  });
  int64_t arenaBytes = 0;
  SmallVector<int64_t> placed;
  for (int64_t id : order) {
    Placement &buffer = placements[id];
    // Bytes of the placed buffers still live when this one is first written.
    SmallVector<std::pair<int64_t, int64_t>> busy;
    for (int64_t other : placed)
      if (placements[other].lastUse >= buffer.firstUse)
        busy.push_back({placements[other].offset,
                        placements[other].offset + placements[other].bytes});
    llvm::sort(busy);
    int64_t offset = 0;
    for (auto [begin, end] : busy) {
      if (offset + buffer.bytes <= begin)
        break;
      offset = std::max(offset, end);
    }
    buffer.offset = offset;
    arenaBytes = std::max(arenaBytes, offset + buffer.bytes);
    placed.push_back(id);
  }

  Builder b(program.getContext());
  SmallVector<Attribute> planned;
  for (auto [id, buffer] : llvm::enumerate(buffers))
    planned.push_back(buffer.withOffset(placements[id].offset));
  program.setBuffersAttr(b.getArrayAttr(planned));
  program.setArenaBytes(arenaBytes);
  return success();
}

struct SparkPlanArenaPass : spark::impl::SparkPlanArenaPassBase<SparkPlanArenaPass> {
  using Base::Base;

  void runOnOperation() override {
    int64_t total = 0;
    for (ProgramOp program : getOperation().getOps<ProgramOp>()) {
      if (failed(planProgram(program)))
        return signalPassFailure();
      total += program.getArenaBytes();
    }
    arenaBytes = total;
  }
};

} // namespace
