//===- SparkOps.cpp - spark dialect ops ------------------------------------===//
#include "dialects/Spark/IR/SparkOps.h"

#include <cmath>

#include "dialects/Spark/IR/TypeInference.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpImplementation.h"
#include "spark/runtime/entry_point.h"
#include "spark/runtime/kernel_abi.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace spark;

namespace {
RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}
} // namespace

//===----------------------------------------------------------------------===//
// WeightOp, KvCacheOp
//===----------------------------------------------------------------------===//

LogicalResult WeightOp::verify() {
  if (getName().empty())
    return emitOpError("expects a non-empty checkpoint tensor name");
  if (!getResult().getType().hasStaticShape())
    return emitOpError("expects a static shape for weight '")
           << getName() << "', got " << formatShape(getResult().getType().getShape());
  // NVFP4 codes are stored two to a byte along the last dimension (ModelOpt's U8 layout).
  RankedTensorType type = getResult().getType();
  if (isa<Float4E2M1FNType>(type.getElementType()) &&
      (type.getRank() == 0 || type.getShape().back() % 2 != 0))
    return emitOpError("expects an f4E2M1FN weight with an even last dimension (two codes per "
                       "byte), got '")
           << getName() << "' " << type;
  if (getReciprocal() && !type.getElementType().isF32())
    return emitOpError("expects an f32 weight with reciprocal (the reciprocal of a scale), got '")
           << getName() << "' " << type;
  if (ShardAttr shard = getShardAttr()) {
    if (shard.getAxis() >= type.getRank())
      return emitOpError("expects the shard axis of weight '")
             << getName() << "' below its rank " << type.getRank() << ", got "
             << shard.getAxis();
    if (type.getDimSize(shard.getAxis()) % shard.getChunks() != 0)
      return emitOpError("expects ") << shard.getChunks() << " shard chunks to divide dimension "
                                     << shard.getAxis() << " of weight '" << getName() << "' "
                                     << type;
  }
  if (!getParts() && !getPartShape())
    return success();
  if (!getParts() || !getPartShape())
    return emitOpError("expects both parts and part_shape, or neither, for weight '")
           << getName() << "'";
  ArrayAttr parts = *getParts();
  ArrayRef<int64_t> partShape = *getPartShape();
  if (parts.empty())
    return emitOpError("expects at least one part for weight '") << getName() << "'";
  llvm::StringSet<> seen;
  for (Attribute part : parts) {
    StringRef partName = cast<StringAttr>(part).getValue();
    if (partName.empty())
      return emitOpError("expects non-empty part names for weight '") << getName() << "'";
    if (!seen.insert(partName).second)
      return emitOpError("expects distinct parts for weight '")
             << getName() << "', got '" << partName << "' twice";
  }
  int64_t partElements = 1;
  for (int64_t d : partShape) {
    if (d <= 0)
      return emitOpError("expects a positive part_shape for weight '")
             << getName() << "', got " << formatShape(partShape);
    partElements *= d;
  }
  if (isa<Float4E2M1FNType>(type.getElementType()) &&
      (partShape.empty() || partShape.back() % 2 != 0))
    return emitOpError("expects f4E2M1FN parts with an even last dimension (two codes per "
                       "byte), got part_shape ")
           << formatShape(partShape) << " for weight '" << getName() << "'";
  if (static_cast<int64_t>(parts.size()) * partElements != type.getNumElements())
    return emitOpError("expects ")
           << parts.size() << " parts of shape " << formatShape(partShape) << " ("
           << static_cast<int64_t>(parts.size()) * partElements << " elements) to make weight '"
           << getName() << "' " << type << " (" << type.getNumElements() << " elements)";
  return success();
}

LogicalResult KvCacheOp::verify() {
  if (getKvHeads() <= 0 || getHeadDim() <= 0)
    return emitOpError("expects positive kv_heads and head_dim, got ")
           << getKvHeads() << " and " << getHeadDim();
  if (getKind() == KvKind::sliding && getWindow() <= 0)
    return emitOpError("expects a positive window for a sliding cache, got ") << getWindow();
  if (getKind() == KvKind::full && getWindow() != 0)
    return emitOpError("expects window = 0 for a full cache, got ") << getWindow();
  Type element = getCacheElementType();
  if (!element.isF32() && !element.isBF16())
    return emitOpError("expects element_type f32 or bf16, got ") << element;
  return success();
}

Type KvCacheOp::getCacheElementType() {
  if (std::optional<Type> type = getElementType())
    return *type;
  return Float32Type::get(getContext());
}

//===----------------------------------------------------------------------===//
// Embeddings and token ids
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  auto emit = [&] { return emitOpError(); };
  RankedTensorType ids = getIds().getType(), table = getTable().getType();
  if (failed(verifyActivation(ids, 1, "ids", emit)))
    return failure();
  if (table.getRank() != 2)
    return emitOpError("expects a table of rank 2 ([vocab, dim]), got ")
           << formatShape(table.getShape());
  if (!std::isfinite(getScale().convertToFloat()))
    return emitOpError("expects a finite scale, got ") << getScale().convertToFloat();
  if (failed(verifyShape(getResult().getType(), {ids.getDimSize(0), table.getDimSize(1)},
                         "result", emit)))
    return failure();
  return success();
}

LogicalResult MaskTokensOp::verify() {
  if (getTokenIds().size() > 3)
    return emitOpError("expects at most 3 placeholder token ids, got ")
           << getTokenIds().size();
  return verifyActivation(getIds().getType(), 1, "ids", [&] { return emitOpError(); });
}

OpFoldResult MaskTokensOp::fold(FoldAdaptor) {
  // Nothing to replace: the op is the identity.
  if (getTokenIds().empty())
    return getIds();
  return {};
}

LogicalResult ScatterNdOp::verify() {
  auto emit = [&] { return emitOpError(); };
  RankedTensorType dest = getDest().getType(), updates = getUpdates().getType();
  if (failed(verifyActivation(dest, 2, "dest", emit)) ||
      failed(verifyActivation(updates, 2, "updates", emit)) ||
      failed(verifyActivation(getIndices().getType(), 1, "indices", emit)) ||
      failed(verifySameTokens(getIndices().getType(), updates, "indices", "updates", emit)))
    return failure();
  if (dest.getDimSize(1) != updates.getDimSize(1))
    return emitOpError("expects update rows of width ")
           << dest.getDimSize(1) << " (the dest's), got " << formatShape(updates.getShape());
  if (getResult().getType() != dest)
    return emitOpError("expects the result type to equal the dest type");
  return success();
}

//===----------------------------------------------------------------------===//
// Normalisation, linear algebra, elementwise
//===----------------------------------------------------------------------===//

// The optional weight of a norm spans the normalised (last) dimension; epsilon is >= 0.
template <typename NormOp>
static LogicalResult verifyNormWeightAndEpsilon(NormOp op, int64_t cols) {
  auto emit = [&] { return op.emitOpError(); };
  if (Value weight = op.getWeight())
    if (failed(verifyShape(tensorType(weight), {cols}, "weight", emit)))
      return failure();
  float epsilon = op.getEpsilon().convertToFloat();
  if (!(epsilon >= 0.0f) || !std::isfinite(epsilon))
    return op.emitOpError("expects a finite, non-negative epsilon, got ") << epsilon;
  return success();
}

LogicalResult RmsNormOp::verify() {
  RankedTensorType input = getInput().getType();
  auto emit = [&] { return emitOpError(); };
  if (input.getRank() != 2 && input.getRank() != 3)
    return emitOpError("expects input of rank 2 ([T, H]) or 3 ([T, heads, head_dim]), got ")
           << formatShape(input.getShape());
  if (failed(verifyActivation(input, input.getRank(), "input", emit)))
    return failure();
  if (getResult().getType() != input)
    return emitOpError("expects the result type to equal the input type");
  return verifyNormWeightAndEpsilon(*this, input.getShape().back());
}

LogicalResult ResidualRmsNormOp::verify() {
  RankedTensorType input = getInput().getType();
  auto emit = [&] { return emitOpError(); };
  if (failed(verifyActivation(input, 2, "input", emit)))
    return failure();
  if (getResidual().getType() != input)
    return emitOpError("expects the residual type to equal the input type");
  if (getResult().getType() != input)
    return emitOpError("expects the result type to equal the input type");
  return verifyNormWeightAndEpsilon(*this, input.getShape().back());
}

LinearOp::WeightFormat LinearOp::getWeightFormat() {
  Type element = getWeight().getType().getElementType();
  if (isa<Float4E2M1FNType>(element))
    return WeightFormat::kNvfp4;
  if (isa<Float8E4M3FNType>(element))
    return WeightFormat::kFp8;
  return WeightFormat::kBF16;
}

namespace {
/// A static shape of one element (the per-tensor scale of a quantized weight).
bool isOneElement(RankedTensorType type) {
  return type.hasStaticShape() && type.getNumElements() == 1 && type.getRank() <= 1;
}
} // namespace

LogicalResult LinearOp::verify() {
  auto emit = [&] { return emitOpError(); };
  RankedTensorType weight = getWeight().getType();
  FailureOr<SmallVector<int64_t>> shape = inferLinearShape(getInput().getType(), weight, emit);
  if (failed(shape))
    return failure();
  const int64_t out = weight.getDimSize(0), in = weight.getDimSize(1);
  SmallVector<RankedTensorType> scales;
  for (Value scale : getScales())
    scales.push_back(cast<RankedTensorType>(scale.getType()));
  auto isF32 = [](RankedTensorType t) { return t.getElementType().isF32(); };
  switch (getWeightFormat()) {
  case WeightFormat::kBF16:
    if (!weight.getElementType().isBF16())
      return emitOpError("expects a bf16, f4E2M1FN (NVFP4) or f8E4M3FN (FP8) weight, got ")
             << weight;
    if (!scales.empty())
      return emitOpError("expects no scales with a bf16 weight, got ") << scales.size();
    break;
  case WeightFormat::kNvfp4: {
    if (in % 16 != 0)
      return emitOpError("expects an NVFP4 weight whose input dimension is a multiple of 16 "
                         "(one block scale per 16 inputs), got ")
             << formatShape(weight.getShape());
    if (scales.size() != 2)
      return emitOpError("expects an NVFP4 weight with two scales (block scales, tensor "
                         "scale), got ")
             << scales.size();
    RankedTensorType block = scales[0];
    if (!isa<Float8E4M3FNType>(block.getElementType()) || block.getRank() != 2 ||
        block.getDimSize(0) != out || block.getDimSize(1) != in / 16)
      return emitOpError("expects NVFP4 block scales tensor<")
             << out << "x" << in / 16 << "xf8E4M3FN> for weight " << formatShape(weight.getShape())
             << ", got " << block;
    if (!isF32(scales[1]) || !isOneElement(scales[1]))
      return emitOpError("expects an NVFP4 tensor scale tensor<f32> or tensor<1xf32>, got ")
             << scales[1];
    break;
  }
  case WeightFormat::kFp8: {
    if (scales.size() != 1)
      return emitOpError("expects an FP8 weight with one scale (per tensor or per row), got ")
             << scales.size();
    RankedTensorType scale = scales[0];
    const bool perRow = scale.hasStaticShape() && scale.getRank() >= 1 && scale.getRank() <= 2 &&
                        scale.getDimSize(0) == out && scale.getNumElements() == out;
    if (!isF32(scale) || (!isOneElement(scale) && !perRow))
      return emitOpError("expects an FP8 scale of f32 per tensor (tensor<f32>, tensor<1xf32>) "
                         "or per row (tensor<")
             << out << "xf32>, tensor<" << out << "x1xf32>), got " << scale;
    break;
  }
  }
  return verifyShape(getResult().getType(), *shape, "result", emit);
}

// Elementwise ops (SameOperandsAndResultType): one check of the shared type.
LogicalResult AddOp::verify() {
  return verifyRows(getType(), "result", [&] { return emitOpError(); });
}
LogicalResult MulOp::verify() {
  return verifyRows(getType(), "result", [&] { return emitOpError(); });
}
LogicalResult ScaleOp::verify() {
  if (!std::isfinite(getFactor().convertToFloat()))
    return emitOpError("expects a finite factor, got ") << getFactor().convertToFloat();
  return verifyRows(getType(), "result", [&] { return emitOpError(); });
}
LogicalResult GeluOp::verify() {
  return verifyRows(getType(), "result", [&] { return emitOpError(); });
}
LogicalResult GeluMulOp::verify() {
  return verifyRows(getType(), "result", [&] { return emitOpError(); });
}

OpFoldResult ScaleOp::fold(FoldAdaptor) {
  if (getFactor().convertToFloat() == 1.0f)
    return getInput();
  return {};
}

LogicalResult ScalarMulOp::verify() {
  auto emit = [&] { return emitOpError(); };
  if (failed(verifyRows(getInput().getType(), "input", emit)) ||
      failed(verifyShape(getScalar().getType(), {1}, "scalar", emit)))
    return failure();
  if (getResult().getType() != getInput().getType())
    return emitOpError("expects the result type to equal the input type");
  return success();
}

LogicalResult SoftcapOp::verify() {
  if (failed(verifyRows(getType(), "result", [&] { return emitOpError(); })))
    return failure();
  float cap = getCap().convertToFloat();
  if (!(cap > 0.0f) || !std::isfinite(cap))
    return emitOpError("expects a finite, positive cap, got ") << cap;
  return success();
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType in = getInput().getType(), out = getResult().getType();
  auto emit = [&] { return emitOpError(); };
  if (failed(verifyRows(in, "input", emit)) || failed(verifyRows(out, "result", emit)) ||
      failed(verifySameTokens(in, out, "input", "result", emit)))
    return failure();
  if (rowElements(in) != rowElements(out))
    return emitOpError("expects the same number of elements per token, got ")
           << rowElements(in) << " (" << formatShape(in.getShape()) << ") and "
           << rowElements(out) << " (" << formatShape(out.getShape()) << ")";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  // reshape(reshape(x)) -> reshape(x)
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Collectives (tensor parallelism)
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::verify() {
  if (getRanks() < 2)
    return emitOpError("expects 2 or more ranks, got ") << getRanks();
  return verifyActivation(getType(), 2, "result", [&] { return emitOpError(); });
}

LogicalResult AllGatherOp::verify() {
  RankedTensorType in = getInput().getType(), out = getResult().getType();
  auto emit = [&] { return emitOpError(); };
  if (getRanks() < 2)
    return emitOpError("expects 2 or more ranks, got ") << getRanks();
  if (failed(verifyActivation(in, 2, "input", emit)))
    return failure();
  return verifyShape(out, {in.getDimSize(0), in.getDimSize(1) * getRanks()}, "result", emit);
}

LogicalResult SelectGroupOp::verify() {
  RankedTensorType in = getInput().getType(), out = getResult().getType();
  auto emit = [&] { return emitOpError(); };
  if (failed(verifyActivation(in, 3, "input", emit)))
    return failure();
  if (getIndex() < 0 || getIndex() >= in.getDimSize(1))
    return emitOpError("expects index in [0, ")
           << in.getDimSize(1) << "), got " << getIndex();
  return verifyShape(out, {in.getDimSize(0), in.getDimSize(2)}, "result", emit);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

// A RoPE over `in` [T, heads, head_dim] at `positions` [T]: an even head_dim, at most
// head_dim / 2 rotated pairs, positive theta and factor, a result of the input's type.
template <typename RotaryOp>
static LogicalResult verifyRotary(RotaryOp op) {
  RankedTensorType in = op.getInput().getType();
  auto emit = [&] { return op.emitOpError(); };
  if (failed(verifyActivation(in, 3, "input", emit)) ||
      failed(verifyActivation(op.getPositions().getType(), 1, "positions", emit)) ||
      failed(verifySameTokens(in, op.getPositions().getType(), "input", "positions", emit)))
    return failure();
  int64_t headDim = in.getDimSize(2);
  if (headDim % 2 != 0)
    return op.emitOpError("expects an even head_dim, got ") << headDim;
  if (op.getRotatedPairs() < 0 || op.getRotatedPairs() > headDim / 2)
    return op.emitOpError("expects rotated_pairs in [0, ")
           << headDim / 2 << "] (head_dim / 2), got " << op.getRotatedPairs();
  float theta = op.getTheta().convertToFloat(), factor = op.getFactor().convertToFloat();
  if (!(theta > 0.0f) || !(factor > 0.0f) || !std::isfinite(theta) || !std::isfinite(factor))
    return op.emitOpError("expects finite, positive theta and factor, got ")
           << theta << " and " << factor;
  if (op.getResult().getType() != in)
    return op.emitOpError("expects the result type to equal the input type");
  return success();
}

LogicalResult RopeOp::verify() { return verifyRotary(*this); }

LogicalResult RmsNormRopeOp::verify() {
  if (failed(verifyRotary(*this)))
    return failure();
  return verifyNormWeightAndEpsilon(*this, getInput().getType().getDimSize(2));
}

// Query [T, q_heads, d], key and value [T, kv_heads, d] of one type: the same head_dim, q_heads a
// multiple of kv_heads (grouped-query attention).
static LogicalResult verifyGroupedHeads(RankedTensorType q, RankedTensorType k, RankedTensorType v,
                                        ErrorEmitter emit) {
  if (k != v)
    return emit() << "expects key and value of the same type, got " << formatShape(k.getShape())
                  << " and " << formatShape(v.getShape());
  if (q.getDimSize(2) != k.getDimSize(2))
    return emit() << "expects query and key with the same head_dim, got " << q.getDimSize(2)
                  << " and " << k.getDimSize(2);
  if (q.getDimSize(1) % k.getDimSize(1) != 0)
    return emit() << "expects q_heads (" << q.getDimSize(1) << ") to be a multiple of kv_heads ("
                  << k.getDimSize(1) << ")";
  return success();
}

LogicalResult AttentionOp::verify() {
  auto emit = [&] { return emitOpError(); };
  RankedTensorType q = getQuery().getType(), k = getKey().getType(), v = getValue().getType();
  if (failed(verifyActivation(q, 3, "query", emit)) ||
      failed(verifyActivation(k, 3, "key", emit)) ||
      failed(verifyActivation(v, 3, "value", emit)) ||
      failed(verifyActivation(getPositions().getType(), 1, "positions", emit)) ||
      failed(verifySameTokens(q, k, "query", "key", emit)) ||
      failed(verifySameTokens(q, getPositions().getType(), "query", "positions", emit)))
    return failure();
  if (Value last = getLastVisible())
    if (failed(verifyActivation(cast<RankedTensorType>(last.getType()), 1, "last_visible", emit)) ||
        failed(verifySameTokens(q, cast<RankedTensorType>(last.getType()), "query",
                                "last_visible", emit)))
      return failure();
  if (failed(verifyGroupedHeads(q, k, v, emit)))
    return failure();
  if (getWindow() < 0)
    return emitOpError("expects window >= 0 (0 = full attention), got ") << getWindow();
  if (!std::isfinite(getScale().convertToFloat()))
    return emitOpError("expects a finite scale, got ") << getScale().convertToFloat();
  if (getResult().getType() != q)
    return emitOpError("expects the result type to equal the query type");
  return success();
}

LogicalResult AttentionOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto cache = symbolTable.lookupNearestSymbolFrom<KvCacheOp>(*this, getCacheAttr());
  if (!cache)
    return emitOpError("references unknown KV cache ") << getCacheAttr();
  RankedTensorType k = getKey().getType();
  if (cache.getKvHeads() != k.getDimSize(1) || cache.getHeadDim() != k.getDimSize(2))
    return emitOpError("expects keys of ")
           << cache.getKvHeads() << " heads x " << cache.getHeadDim() << " (cache "
           << getCacheAttr() << "), got " << formatShape(k.getShape());
  int64_t expectedWindow = cache.getKind() == KvKind::sliding ? cache.getWindow() : 0;
  if (getWindow() != expectedWindow)
    return emitOpError("expects window ")
           << expectedWindow << " to match cache " << getCacheAttr() << ", got "
           << getWindow();
  return success();
}

//===----------------------------------------------------------------------===//
// The vision tower
//===----------------------------------------------------------------------===//

namespace {
/// Patch coordinates: i32 [T, 2] with the same tokens as `rows`.
LogicalResult verifyPatchPositions(RankedTensorType rows, Value positions, ErrorEmitter emit) {
  auto type = cast<RankedTensorType>(positions.getType());
  if (failed(verifyActivation(type, 2, "positions", emit)) ||
      failed(verifySameTokens(rows, type, "input", "positions", emit)))
    return failure();
  if (type.getDimSize(1) != 2)
    return emit() << "expects positions of shape [T, 2] (x, y per patch), got "
                  << formatShape(type.getShape());
  return success();
}

/// A bound of spark.clamp: one bf16 element (shape [] or [1]).
LogicalResult verifyScalarBound(Value bound, StringRef what, ErrorEmitter emit) {
  auto type = cast<RankedTensorType>(bound.getType());
  if (!type.getElementType().isBF16() || !type.hasStaticShape() || type.getNumElements() != 1 ||
      type.getRank() > 1)
    return emit() << "expects " << what << " of type tensor<bf16> or tensor<1xbf16>, got "
                  << type;
  return success();
}
} // namespace

LogicalResult ShiftScaleOp::verify() {
  if (!std::isfinite(getShift().convertToFloat()) || !std::isfinite(getScale().convertToFloat()))
    return emitOpError("expects a finite shift and scale, got ")
           << getShift().convertToFloat() << " and " << getScale().convertToFloat();
  return verifyRows(getType(), "result", [&] { return emitOpError(); });
}

LogicalResult PatchPositionEmbeddingOp::verify() {
  auto emit = [&] { return emitOpError(); };
  RankedTensorType in = getInput().getType();
  if (failed(verifyActivation(in, 2, "input", emit)) ||
      failed(verifyPatchPositions(in, getPositions(), emit)))
    return failure();
  RankedTensorType table = getTable().getType();
  if (table.getRank() != 3 || table.getDimSize(0) != 2 || table.getDimSize(2) != in.getDimSize(1))
    return emitOpError("expects a position table [2, table_size, ")
           << in.getDimSize(1) << "], got " << formatShape(table.getShape());
  if (getResult().getType() != in)
    return emitOpError("expects the result type to equal the input type");
  return success();
}

LogicalResult ClampOp::verify() {
  auto emit = [&] { return emitOpError(); };
  if (failed(verifyRows(getInput().getType(), "input", emit)) ||
      failed(verifyScalarBound(getMin(), "min", emit)) ||
      failed(verifyScalarBound(getMax(), "max", emit)))
    return failure();
  if (getResult().getType() != getInput().getType())
    return emitOpError("expects the result type to equal the input type");
  return success();
}

LogicalResult Rope2dOp::verify() {
  auto emit = [&] { return emitOpError(); };
  RankedTensorType in = getInput().getType();
  if (failed(verifyActivation(in, 3, "input", emit)) ||
      failed(verifyPatchPositions(in, getPositions(), emit)))
    return failure();
  if (in.getDimSize(2) % 4 != 0)
    return emitOpError("expects a head_dim that is a multiple of 4 (two halves of rotate-half "
                       "pairs), got ")
           << in.getDimSize(2);
  float theta = getTheta().convertToFloat();
  if (!(theta > 0.0f) || !std::isfinite(theta))
    return emitOpError("expects a finite, positive theta, got ") << theta;
  if (getResult().getType() != in)
    return emitOpError("expects the result type to equal the input type");
  return success();
}

LogicalResult BidirectionalAttentionOp::verify() {
  auto emit = [&] { return emitOpError(); };
  RankedTensorType q = getQuery().getType(), k = getKey().getType(), v = getValue().getType();
  if (failed(verifyActivation(q, 3, "query", emit)) ||
      failed(verifyActivation(k, 3, "key", emit)) ||
      failed(verifyActivation(v, 3, "value", emit)) ||
      failed(verifySameTokens(q, k, "query", "key", emit)))
    return failure();
  if (failed(verifyGroupedHeads(q, k, v, emit)))
    return failure();
  if (!std::isfinite(getScale().convertToFloat()))
    return emitOpError("expects a finite scale, got ") << getScale().convertToFloat();
  if (getResult().getType() != q)
    return emitOpError("expects the result type to equal the query type");
  return success();
}

LogicalResult PoolByPositionOp::verify() {
  auto emit = [&] { return emitOpError(); };
  RankedTensorType in = getInput().getType();
  if (failed(verifyActivation(in, 2, "input", emit)) ||
      failed(verifyPatchPositions(in, getPositions(), emit)))
    return failure();
  if (getKernelSize() < 1 || getKernelSize() > 64)
    return emitOpError("expects kernel_size in [1, 64], got ") << getKernelSize();
  if (!std::isfinite(getScale().convertToFloat()))
    return emitOpError("expects a finite scale, got ") << getScale().convertToFloat();
  if (getResult().getType() != in)
    return emitOpError("expects the result type to equal the input type");
  return success();
}

LogicalResult StandardizeOp::verify() {
  auto emit = [&] { return emitOpError(); };
  RankedTensorType in = getInput().getType();
  if (failed(verifyActivation(in, 2, "input", emit)) ||
      failed(verifyShape(getBias().getType(), {in.getDimSize(1)}, "bias", emit)) ||
      failed(verifyShape(getScale().getType(), {in.getDimSize(1)}, "scale", emit)))
    return failure();
  if (getResult().getType() != in)
    return emitOpError("expects the result type to equal the input type");
  return success();
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

LogicalResult MoeRouterOp::verify() {
  auto emit = [&] { return emitOpError(); };
  RankedTensorType in = getInput().getType(), proj = getProj().getType();
  if (failed(verifyActivation(in, 2, "input", emit)))
    return failure();
  int64_t hidden = in.getDimSize(1);
  if (proj.getRank() != 2 || proj.getDimSize(1) != hidden)
    return emitOpError("expects proj of shape [experts, ")
           << hidden << "], got " << formatShape(proj.getShape());
  int64_t experts = proj.getDimSize(0);
  if (failed(verifyShape(getScale().getType(), {hidden}, "scale", emit)) ||
      failed(verifyShape(getPerExpertScale().getType(), {experts}, "per_expert_scale", emit)))
    return failure();
  if (getTopK() <= 0 || getTopK() > experts)
    return emitOpError("expects top_k in [1, ") << experts << "], got " << getTopK();
  float epsilon = getEpsilon().convertToFloat();
  if (!(epsilon >= 0.0f) || !std::isfinite(epsilon))
    return emitOpError("expects a finite, non-negative epsilon, got ") << epsilon;
  SmallVector<int64_t> outShape{in.getDimSize(0), getTopK()};
  if (failed(verifyShape(getWeights().getType(), outShape, "weights", emit)) ||
      failed(verifyShape(getIndices().getType(), outShape, "indices", emit)))
    return failure();
  return success();
}

namespace {
/// The scales of an MoE expert weight [E, R, K] of `matrices` stacked matrices per expert
/// (gate_up: 2, down: 1), as spark.moe_experts describes them.
LogicalResult verifyExpertScales(function_ref<InFlightDiagnostic()> emit, StringRef what,
                                 RankedTensorType weight, ValueRange scaleValues,
                                 int64_t matrices) {
  SmallVector<RankedTensorType> scales;
  for (Value scale : scaleValues)
    scales.push_back(cast<RankedTensorType>(scale.getType()));
  const int64_t experts = weight.getDimSize(0), rows = weight.getDimSize(1),
                cols = weight.getDimSize(2);
  auto shapeIs = [](RankedTensorType t, ArrayRef<int64_t> shape) {
    return t.hasStaticShape() && t.getShape() == shape;
  };
  SmallVector<int64_t> perMatrix{experts};
  if (matrices > 1)
    perMatrix.push_back(matrices);
  Type element = weight.getElementType();
  if (element.isBF16()) {
    if (!scales.empty())
      return emit() << "expects no " << what << " scales with bf16 " << what << ", got "
                    << scales.size();
    return success();
  }
  if (isa<Float4E2M1FNType>(element)) {
    if (cols % 16 != 0)
      return emit() << "expects NVFP4 " << what << " whose input dimension is a multiple of 16 "
                    << "(one block scale per 16 inputs), got " << formatShape(weight.getShape());
    if (scales.size() != 2)
      return emit() << "expects NVFP4 " << what << " with two scales (block scales, tensor "
                    << "scales), got " << scales.size();
    if (!isa<Float8E4M3FNType>(scales[0].getElementType()) ||
        !shapeIs(scales[0], {experts, rows, cols / 16}))
      return emit() << "expects NVFP4 " << what << " block scales tensor<" << experts << "x"
                    << rows << "x" << cols / 16 << "xf8E4M3FN>, got " << scales[0];
    if (!scales[1].getElementType().isF32() || !shapeIs(scales[1], perMatrix))
      return emit() << "expects NVFP4 " << what << " tensor scales (one per matrix) of shape "
                    << formatShape(perMatrix) << " in f32, got " << scales[1];
    return success();
  }
  if (isa<Float8E4M3FNType>(element)) {
    if (scales.size() != 1)
      return emit() << "expects FP8 " << what << " with one scale tensor, got " << scales.size();
    if (!scales[0].getElementType().isF32() ||
        (!shapeIs(scales[0], perMatrix) && !shapeIs(scales[0], {experts, rows})))
      return emit() << "expects FP8 " << what << " scales of f32 per matrix "
                    << formatShape(perMatrix) << " or per row " << formatShape({experts, rows})
                    << ", got " << scales[0];
    return success();
  }
  return emit() << "expects " << what << " in bf16, f4E2M1FN (NVFP4) or f8E4M3FN (FP8), got "
                << weight;
}
} // namespace

LogicalResult MoeExpertsOp::verify() {
  auto emit = [&] { return emitOpError(); };
  RankedTensorType in = getInput().getType(), gateUp = getGateUp().getType(),
                   down = getDown().getType();
  if (failed(verifyActivation(in, 2, "input", emit)))
    return failure();
  int64_t hidden = in.getDimSize(1);
  if (gateUp.getRank() != 3 || gateUp.getDimSize(2) != hidden || gateUp.getDimSize(1) % 2)
    return emitOpError("expects gate_up of shape [experts, 2 * intermediate, ")
           << hidden << "], got " << formatShape(gateUp.getShape());
  int64_t experts = gateUp.getDimSize(0), intermediate = gateUp.getDimSize(1) / 2;
  if (failed(verifyShape(down, {experts, hidden, intermediate}, "down", emit)))
    return failure();
  if (failed(verifyExpertScales(emit, "gate_up", gateUp, getGateUpScales(), 2)) ||
      failed(verifyExpertScales(emit, "down", down, getDownScales(), 1)))
    return failure();
  RankedTensorType w = getWeights().getType(), idx = getIndices().getType();
  if (failed(verifyActivation(w, 2, "weights", emit)) ||
      failed(verifySameTokens(in, w, "input", "weights", emit)) ||
      failed(verifyShape(idx, w.getShape(), "indices", emit)))
    return failure();
  return verifyShape(getResult().getType(), in.getShape(), "result", emit);
}

//===----------------------------------------------------------------------===//
// Kernel level
//===----------------------------------------------------------------------===//

// A launch's or transfer's `args [buffer 0, num_tokens, i32 4]`: #spark.arg attributes without
// their wrappers.
static ParseResult parseLaunchArgs(OpAsmParser &parser, ArrayAttr &args) {
  SmallVector<Attribute> list;
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
        FailureOr<LaunchArgAttr> arg = LaunchArgAttr::parseBody(parser);
        if (failed(arg) || !*arg)
          return failure();
        list.push_back(*arg);
        return success();
      }))
    return failure();
  args = parser.getBuilder().getArrayAttr(list);
  return success();
}

static void printLaunchArgs(OpAsmPrinter &printer, Operation *, ArrayAttr args) {
  printer << '[';
  llvm::interleaveComma(args.getAsRange<LaunchArgAttr>(), printer,
                        [&](LaunchArgAttr arg) { arg.printBody(printer); });
  printer << ']';
}

namespace {

// What a slot of an op's signature (kernel_abi.h ArgKind) takes.
abi::ArgKind slotKindOf(LaunchArgKind kind) {
  switch (kind) {
  case LaunchArgKind::buffer:
  case LaunchArgKind::weight:
  case LaunchArgKind::k_cache:
  case LaunchArgKind::v_cache:
  case LaunchArgKind::kv_block_table:
  case LaunchArgKind::null:
    return abi::ArgKind::kPtr;
  case LaunchArgKind::kv_capacity:
  case LaunchArgKind::num_tokens:
  case LaunchArgKind::num_soft_tokens:
  case LaunchArgKind::i32:
    return abi::ArgKind::kI32;
  case LaunchArgKind::f32:
    return abi::ArgKind::kF32;
  }
  llvm_unreachable("unknown launch argument kind");
}

// A launch's or transfer's arguments against its op's signature in the registry.
LogicalResult verifyStepArgs(Operation *op, const abi::OpSpec &spec, ArrayAttr args) {
  if (static_cast<int>(args.size()) != spec.num_args)
    return op->emitOpError("of ") << spec.op << " expects " << spec.num_args
                                  << " arguments (kernel_ops.def), got " << args.size();
  for (auto [i, arg] : llvm::enumerate(args.getAsRange<LaunchArgAttr>())) {
    abi::ArgKind slot = spec.args[i].kind;
    if (slotKindOf(arg.getKind()) != slot)
      return op->emitOpError("of ")
             << spec.op << ": argument " << i << " (" << spec.args[i].name << ") is "
             << abi::SlotDescription(slot) << ", got " << stringifyLaunchArgKind(arg.getKind());
  }
  return success();
}

} // namespace

LogicalResult ProgramOp::verify() {
  if (getMaxTokens() <= 0)
    return emitOpError("expects max_tokens > 0, got ") << getMaxTokens();
  if (getArenaBytes() < 0)
    return emitOpError("expects arena_bytes >= 0, got ") << getArenaBytes();
  return success();
}

// After the steps' own verifiers: every id they and the program's inputs and outputs name exists.
LogicalResult ProgramOp::verifyRegions() {
  int64_t numBuffers = getBuffers().size(), numWeights = getWeights().size();
  int64_t numCaches = 0;
  if (auto module = (*this)->getParentOfType<ModuleOp>())
    numCaches = llvm::range_size(module.getOps<KvCacheOp>());
  auto checkBuffer = [&](StringRef what, int64_t id) -> LogicalResult {
    if (id < -1 || id >= numBuffers)
      return emitOpError() << what << " names buffer " << id << ", but the program has "
                           << numBuffers;
    return success();
  };
  ProgramInputsAttr in = getInputs();
  ProgramOutputsAttr out = getOutputs();
  const std::pair<StringRef, int64_t> io[] = {
      {"input ids", in.getIds()},
      {"input positions", in.getPositions()},
      {"input soft_embeddings", in.getSoftEmbeddings()},
      {"input soft_indices", in.getSoftIndices()},
      {"input last_visible", in.getLastVisible()},
      {"input sampling", in.getSampling()},
      {"input sequences", in.getSequences()},
      {"input pixel_patches", in.getPixelPatches()},
      {"input patch_positions", in.getPatchPositions()},
      {"output logits", out.getLogits()},
      {"output tokens", out.getTokens()},
      {"output embeddings", out.getEmbeddings()}};
  for (auto [what, id] : io)
    if (failed(checkBuffer(what, id)))
      return failure();
  for (Operation &step : getBody().front()) {
    ArrayAttr args = isa<LaunchOp>(step)     ? cast<LaunchOp>(step).getArgs()
                     : isa<TransferOp>(step) ? cast<TransferOp>(step).getArgs()
                                             : ArrayAttr();
    if (!args)
      continue;
    for (auto [i, arg] : llvm::enumerate(args.getAsRange<LaunchArgAttr>())) {
      int64_t limit = 0;
      StringRef what;
      switch (arg.getKind()) {
      case LaunchArgKind::buffer: limit = numBuffers, what = "buffer"; break;
      case LaunchArgKind::weight: limit = numWeights, what = "weight"; break;
      case LaunchArgKind::k_cache:
      case LaunchArgKind::v_cache:
      case LaunchArgKind::kv_capacity:
      case LaunchArgKind::kv_block_table: limit = numCaches, what = "KV cache"; break;
      default: continue;
      }
      if (arg.getValue() >= limit)
        return step.emitOpError("argument ")
               << i << " names " << what << " " << arg.getValue() << ", but there are " << limit
               << (what == "KV cache" ? " (spark.kv_cache ops in the module)" : " in the program");
    }
  }
  return success();
}

std::string LaunchOp::entryPointName(StringRef symbol, ArrayAttr args) {
  std::string name = EntryPointPrefix(symbol.str().c_str());
  for (auto arg : args.getAsRange<LaunchArgAttr>()) {
    if (arg.getKind() == LaunchArgKind::i32)
      AppendEntryLiteral(&name, static_cast<int32_t>(arg.getValue()));
    else if (arg.getKind() == LaunchArgKind::f32)
      AppendEntryLiteral(&name, arg.getF32Value());
  }
  return name;
}

LogicalResult LaunchOp::verify() {
  if (getBlock().size() != 3)
    return emitOpError("expects a 3-dimensional block");
  for (int32_t d : getBlock())
    if (d <= 0)
      return emitOpError("expects positive block dimensions");
  const struct {
    const char *name;
    int64_t value, min;
  } terms[] = {{"per_token", getGridPerTokenAttr().getInt(), 0},
               {"fixed", getGridFixedAttr().getInt(), 0},
               {"divisor", getGridDivisorAttr().getInt(), 1}};
  for (const auto &term : terms)
    if (term.value < term.min || term.value > abi::kMaxGridRuleTerm)
      return emitOpError("expects grid ")
             << term.name << " in [" << term.min << ", " << abi::kMaxGridRuleTerm << "], got "
             << term.value;
  const abi::OpSpec *spec = abi::FindOp(getOp().str().c_str());
  if (!spec)
    return emitOpError("of op '") << getOp()
                                  << "', which the op registry (kernel_ops.def) does not know";
  if (!spec->kernel())
    return emitOpError("of op '") << getOp()
                                  << "', which runs without a kernel: it is a spark.transfer";
  return verifyStepArgs(*this, *spec, getArgs());
}

LogicalResult TransferOp::verify() {
  const abi::OpSpec *spec = abi::FindOp(getOp().str().c_str());
  if (!spec)
    return emitOpError("of op '") << getOp()
                                  << "', which the op registry (kernel_ops.def) does not know";
  if (spec->kernel())
    return emitOpError("of op '") << getOp() << "', a kernel op: a kernel runs as spark.launch";
  return verifyStepArgs(*this, *spec, getArgs());
}

#define GET_OP_CLASSES
#include "dialects/Spark/IR/SparkOps.cpp.inc"
