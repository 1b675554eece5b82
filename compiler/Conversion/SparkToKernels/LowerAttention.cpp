//===- LowerAttention.cpp - RoPE and attention over the KV caches ----------===//
//
// spark.rope to its kernel, and spark.attention to kv_write (unless the layer shares another
// layer's cache) + attention, split over the KV length (flash-decoding) into a workspace of
// partial records + attention_merge when the keys are many (a full cache or a long window).
//
//===----------------------------------------------------------------------===//
#include "KernelLowering.h"

#include "dialects/Spark/IR/TypeInference.h"

#include <algorithm>

using namespace mlir;

namespace spark {
namespace kernel_lowering {
namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Blocks a decode step's attention should run at least (about two per SM on a 132-SM H200, five
/// on the 48-SM GB10): a layer with q query heads splits each head's keys into up to
/// ceil(kAttentionTargetBlocks / q) ranges.
constexpr int64_t kAttentionTargetBlocks = 256;
/// Keys below which splitting a sliding window further does not pay.
constexpr int64_t kMinKeysPerSplit = 64;
/// Tokens a step may have and still split (all of max_splits, kernel_abi.h AttentionSplits): the
/// decode tokens of up to this many sequences batched in one step (continuous batching) are each
/// attended exactly as alone.
constexpr int64_t kSplitStepTokens = 32;

/// The most key ranges one (token, head) of this attention is split into (1: no split).
int64_t attentionMaxSplits(int64_t qHeads, int64_t window) {
  int64_t splits = ceilDiv(kAttentionTargetBlocks, std::max<int64_t>(qHeads, 1));
  if (window > 0)
    splits = std::min(splits, ceilDiv(window, kMinKeysPerSplit));
  return std::clamp<int64_t>(splits, 1, abi::kMaxAttentionSplits);
}

LogicalResult lowerRope(RopeOp r, KernelLowering &k) {
  RankedTensorType in = r.getInput().getType();
  Arg x = k.input(r.getInput()), pos = k.input(r.getPositions());
  k.launch(abi::OpId::kRope,
           {x, pos, k.result(r.getResult()), Arg::numTokens(), k.i32(in.getDimSize(1)),
            k.i32(in.getDimSize(2)), k.i32(r.getRotatedPairs()), KernelLowering::f32(r.getTheta()),
            KernelLowering::f32(r.getFactor())},
           perToken(in.getDimSize(1)));
  return success();
}

LogicalResult lowerAttention(AttentionOp a, KernelLowering &k) {
  FailureOr<int64_t> found = k.cache(a, a.getCacheAttr());
  if (failed(found))
    return failure();
  const int64_t cache = *found;
  Arg cacheDType = k.i32(k.cacheOp(cache).getCacheElementType().isBF16() ? abi::kCacheBF16
                                                                         : abi::kCacheF32);
  RankedTensorType q = a.getQuery().getType(), key = a.getKey().getType();
  Arg pos = k.input(a.getPositions());
  Arg seqs = k.sequences(), table = Arg::kvBlockTable(cache);
  if (!a.getKvShared()) {
    Arg keys = k.input(a.getKey()), values = k.input(a.getValue());
    k.launch(abi::OpId::kKvWrite,
             {keys, values, pos, seqs, table, Arg::kCache(cache), Arg::vCache(cache),
              Arg::numTokens(),
              k.i32(key.getDimSize(1)), k.i32(key.getDimSize(2)), Arg::kvCapacity(cache),
              cacheDType},
             perToken(rowElements(key), 256), "kv_write");
  }
  Arg query = k.input(a.getQuery());
  Arg lastVisible = a.getLastVisible() ? k.input(a.getLastVisible()) : Arg::null();
  const int64_t qHeads = q.getDimSize(1), headDim = q.getDimSize(2);
  const int64_t maxSplits = attentionMaxSplits(qHeads, a.getWindow());
  if (maxSplits <= 1) {
    k.launch(abi::OpId::kAttention,
             {query, pos, seqs, table, Arg::kCache(cache), Arg::vCache(cache),
              k.result(a.getResult()),
              Arg::null(), Arg::numTokens(), k.i32(qHeads), k.i32(key.getDimSize(1)),
              k.i32(headDim), Arg::kvCapacity(cache), k.i32(a.getWindow()),
              KernelLowering::f32(a.getScale()), k.i32(1), k.i32(0), cacheDType, lastVisible},
             perToken(qHeads));
    return success();
  }
  // Split over the KV length (flash-decoding, kernel_abi.h): the workspace holds splitRows x
  // qHeads partial records; a step of T tokens splits into all maxSplits ranges when T x maxSplits
  // records fit (decode, and batched decode of up to kSplitStepTokens sequences), else not at all.
  const int64_t splitRows =
      std::max(k.maxTokens(), maxSplits * std::min(kSplitStepTokens, k.maxTokens()));
  Arg partials = k.scratch("partials", {ceilDiv(splitRows, k.maxTokens()), qHeads,
                                        abi::AttentionRecordFloats(static_cast<int>(headDim))});
  Arg y = k.result(a.getResult());
  k.launch(abi::OpId::kAttention,
           {query, pos, seqs, table, Arg::kCache(cache), Arg::vCache(cache), y, partials,
            Arg::numTokens(),
            k.i32(qHeads), k.i32(key.getDimSize(1)), k.i32(headDim), Arg::kvCapacity(cache),
            k.i32(a.getWindow()), KernelLowering::f32(a.getScale()), k.i32(maxSplits),
            k.i32(splitRows), cacheDType, lastVisible},
           abi::GridRule{qHeads, maxSplits * qHeads, 1});
  k.launch(abi::OpId::kAttentionMerge,
           {partials, y, Arg::numTokens(), k.i32(qHeads), k.i32(headDim), k.i32(maxSplits),
            k.i32(splitRows)},
           perToken(qHeads), "merge");
  return success();
}

} // namespace

void populateAttentionLowerings(LoweringTable &table) {
  table.add<RopeOp>(lowerRope);
  table.add<AttentionOp>(lowerAttention);
}

} // namespace kernel_lowering
} // namespace spark
