//===- ShardTensorParallel.cpp - split @forward over N ranks (Megatron) ---===//
//
// spark-shard-tensor-parallel (Passes.td; docs/multi-gpu.md). The graph it starts from is the
// importer's (ImportGemma.cpp), before the fusions: every piece it shards is found by structure,
// not by name:
//   attention   q / k / v each a chain linear -> reshape [heads, d] -> norms / RoPE -> the
//               spark.attention operand; the result -> reshape -> linear (o_proj);
//   dense MLP   mul(gelu(linear gate), linear up) (or gelu_mul) -> linear (down);
//   MoE         spark.moe_experts;
//   embedding   the spark.embedding whose rows are the model's hidden size;
//   LM head     the linear whose result @forward returns (through the final softcap).
// Every rank runs the same program: the weights say which slice each rank reads (#spark.shard),
// so the shapes, kernels and plan are one for all ranks.
//
//===----------------------------------------------------------------------===//
#include "dialects/Spark/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

namespace spark {
#define GEN_PASS_DEF_SPARKSHARDTENSORPARALLELPASS
#include "dialects/Spark/Transforms/Passes.h.inc"
} // namespace spark

using namespace mlir;
using namespace spark;

namespace {

/// The name an op's location gives it ("layers.3.self_attn.attention"), for messages.
std::string nameOf(Operation *op) {
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    return name.getName().str();
  std::string text;
  llvm::raw_string_ostream os(text);
  op->getLoc().print(os);
  return text;
}

class Sharder {
public:
  Sharder(ModuleOp module, int64_t ranks) : module(module), ranks(ranks), b(module.getContext()) {}

  LogicalResult run();

private:
  /// A weight operand `operand` of its user becomes a slice: a new spark.weight (the same tensor,
  /// its type `parts` times smaller along `axis`, #spark.shard) right before the user.
  LogicalResult shardWeight(OpOperand &operand, int64_t axis, int64_t parts, int64_t chunks = 1);
  /// Divides dimension 1 of `value`'s type by `factor` (the per-token row's first dimension:
  /// heads, or heads * head_dim, or the intermediate size), once.
  void shrinkRows(Value value, int64_t factor);
  /// The ops from `value` back to the spark.linear that computes it through reshapes, norms and
  /// RoPE (the q / k / v chains); null linear when the chain has another op.
  LinearOp chainToLinear(Value value, SmallVectorImpl<Value> &chain);
  /// Shards a column-parallel linear (its output features split in `parts`), the scales too.
  LogicalResult shardColumns(LinearOp linear, int64_t parts);
  /// Shards a row-parallel linear (its input features split over the ranks) and sums its result
  /// over the ranks (spark.all_reduce after it).
  LogicalResult shardRowsAndReduce(LinearOp linear);
  /// Inserts `spark.all_reduce` after `value`'s producer and makes its users read it.
  void allReduceAfter(Value value, Operation *producer);
  /// Inserts `spark.all_gather` of `value` (now `cols / ranks` columns) giving `cols` columns.
  void allGatherAfter(Value value, Operation *producer, int64_t cols);

  LogicalResult shardAttention(AttentionOp attention);
  LogicalResult shardMlp(Operation *mul, Value gate, Value up);
  LogicalResult shardExperts(MoeExpertsOp experts);
  LogicalResult shardEmbedding(EmbeddingOp embedding);
  LogicalResult shardLmHead(func::FuncOp forward);

  InFlightDiagnostic error(Operation *op, const Twine &what) {
    return op->emitOpError() << "cannot be split over " << ranks << " ranks (" << nameOf(op)
                             << "): " << what;
  }

  ModuleOp module;
  int64_t ranks;
  OpBuilder b;
  llvm::DenseSet<Value> shrunk;
  llvm::DenseSet<Operation *> doneLinears;
  llvm::DenseSet<StringRef> doneCaches;
};

void Sharder::shrinkRows(Value value, int64_t factor) {
  if (factor == 1 || !shrunk.insert(value).second)
    return;
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[1] /= factor;
  value.setType(RankedTensorType::get(shape, type.getElementType()));
}

LogicalResult Sharder::shardWeight(OpOperand &operand, int64_t axis, int64_t parts,
                                   int64_t chunks) {
  Operation *user = operand.getOwner();
  auto weight = operand.get().getDefiningOp<WeightOp>();
  if (!weight)
    return error(user, "its weight is not a spark.weight");
  RankedTensorType type = weight.getType();
  if (type.getDimSize(axis) % (parts * chunks) != 0)
    return error(user, Twine("dimension ") + Twine(axis) + " of weight '" + weight.getName() +
                           "' (" + Twine(type.getDimSize(axis)) + ") does not split into " +
                           Twine(parts) + " parts" +
                           (chunks > 1 ? " of each of " + Twine(chunks) + " chunks" : Twine()));
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] /= parts;
  b.setInsertionPoint(user);
  auto slice = cast<WeightOp>(b.clone(*weight));
  slice.getResult().setType(RankedTensorType::get(shape, type.getElementType()));
  slice.setShardAttr(ShardAttr::get(b.getContext(), axis, parts, chunks));
  operand.set(slice.getResult());
  return success();
}

LinearOp Sharder::chainToLinear(Value value, SmallVectorImpl<Value> &chain) {
  while (true) {
    chain.push_back(value);
    Operation *op = value.getDefiningOp();
    if (auto linear = dyn_cast_or_null<LinearOp>(op))
      return linear;
    if (!op || !isa<ReshapeOp, RmsNormOp, RopeOp, RmsNormRopeOp>(op))
      return nullptr;
    value = op->getOperand(0);
  }
}

LogicalResult Sharder::shardColumns(LinearOp linear, int64_t parts) {
  if (!doneLinears.insert(linear).second)
    return success();
  const int64_t out = linear.getWeight().getType().getDimSize(0);
  if (failed(shardWeight(linear.getWeightMutable(), 0, parts)))
    return failure();
  // Scales per output row ([out, ...]: NVFP4 block scales, FP8 per-row) split with them; a
  // tensor scale is every rank's.
  for (OpOperand &scale : linear.getScalesMutable()) {
    auto type = cast<RankedTensorType>(scale.get().getType());
    if (type.getRank() >= 1 && type.getDimSize(0) == out && type.getNumElements() > 1 &&
        failed(shardWeight(scale, 0, parts)))
      return failure();
  }
  return success();
}

void Sharder::allReduceAfter(Value value, Operation *producer) {
  b.setInsertionPointAfter(producer);
  auto sum = AllReduceOp::create(b, producer->getLoc(), value.getType(), value,
                                 b.getI64IntegerAttr(ranks));
  value.replaceAllUsesExcept(sum.getResult(), sum);
}

void Sharder::allGatherAfter(Value value, Operation *producer, int64_t cols) {
  auto type = cast<RankedTensorType>(value.getType());
  b.setInsertionPointAfter(producer);
  auto whole = AllGatherOp::create(
      b, producer->getLoc(),
      RankedTensorType::get({ShapedType::kDynamic, cols}, type.getElementType()), value,
      b.getI64IntegerAttr(ranks));
  value.replaceAllUsesExcept(whole.getResult(), whole);
}

LogicalResult Sharder::shardRowsAndReduce(LinearOp linear) {
  if (!doneLinears.insert(linear).second)
    return success();
  RankedTensorType weightType = linear.getWeight().getType();
  const int64_t in = weightType.getDimSize(1);
  if (linear.getWeightFormat() == LinearOp::WeightFormat::kNvfp4 && (in / ranks) % 16 != 0)
    return error(linear, Twine("an NVFP4 weight's ") + Twine(in) + " inputs split into " +
                             Twine(ranks) + " parts of " + Twine(in / ranks) +
                             ", not a multiple of 16 (one block scale per 16 inputs)");
  if (failed(shardWeight(linear.getWeightMutable(), 1, ranks)))
    return failure();
  // NVFP4 block scales follow the inputs ([out, in / 16]); per-row and tensor scales are whole.
  for (OpOperand &scale : linear.getScalesMutable()) {
    auto type = cast<RankedTensorType>(scale.get().getType());
    if (type.getRank() == 2 && type.getDimSize(1) * 16 == in &&
        failed(shardWeight(scale, 1, ranks)))
      return failure();
  }
  allReduceAfter(linear.getResult(), linear);
  return success();
}

LogicalResult Sharder::shardAttention(AttentionOp attention) {
  const int64_t queryHeads = attention.getQuery().getType().getDimSize(1);
  const int64_t kvHeads = attention.getKey().getType().getDimSize(1);
  if (queryHeads % ranks != 0)
    return error(attention, Twine(queryHeads) + " query heads");
  // KV heads: split when the ranks divide them; else each replicated on ranks / kv_heads ranks
  // (every rank's query heads then read one KV head).
  int64_t kvParts = 0;
  if (kvHeads % ranks == 0)
    kvParts = ranks;
  else if (ranks % kvHeads == 0)
    kvParts = kvHeads;
  else
    return error(attention, Twine(kvHeads) + " KV heads: the ranks must divide them or be a "
                                             "multiple of them");
  SmallVector<Value> chain;
  LinearOp q = chainToLinear(attention.getQuery(), chain);
  if (!q)
    return error(attention, "its query is not a projection followed by norms and RoPE");
  if (failed(shardColumns(q, ranks)))
    return failure();
  for (Value v : chain)
    shrinkRows(v, ranks);
  if (!attention.getKvShared()) {
    const int64_t kvLocal = kvHeads / kvParts;
    for (Value operand : {attention.getKey(), attention.getValue()}) {
      chain.clear();
      LinearOp kv = chainToLinear(operand, chain);
      if (!kv)
        return error(attention, "its key or value is not a projection followed by norms");
      if (kvParts > 1 && failed(shardColumns(kv, kvParts)))
        return failure();
      for (Value v : chain)
        shrinkRows(v, kvHeads / kvLocal);
    }
    auto cache = SymbolTable::lookupNearestSymbolFrom<KvCacheOp>(attention, attention.getCacheAttr());
    if (!cache)
      return error(attention, "its KV cache is not declared");
    if (doneCaches.insert(cache.getSymName()).second)
      cache.setKvHeads(kvLocal);
  }
  shrinkRows(attention.getResult(), ranks);
  // The output projection: attention -> reshape [heads * d] -> linear.
  auto reshape = dyn_cast<ReshapeOp>(*attention->getUsers().begin());
  if (!attention->hasOneUse() || !reshape || !reshape->hasOneUse())
    return error(attention, "its result is not reshaped into the output projection alone");
  auto o = dyn_cast<LinearOp>(*reshape->getUsers().begin());
  if (!o)
    return error(attention, "its result does not feed a projection");
  shrinkRows(reshape.getResult(), ranks);
  return shardRowsAndReduce(o);
}

LogicalResult Sharder::shardMlp(Operation *mul, Value gate, Value up) {
  auto gateLinear = gate.getDefiningOp<LinearOp>();
  auto upLinear = up.getDefiningOp<LinearOp>();
  auto down = mul->hasOneUse() ? dyn_cast<LinearOp>(*mul->getUsers().begin()) : LinearOp();
  if (!gateLinear || !upLinear || !down)
    return success();  // not a dense MLP (the per-layer input gate of the E models): replicated
  const int64_t intermediate = gateLinear.getWeight().getType().getDimSize(0);
  if (intermediate % ranks != 0)
    return error(mul, Twine("an MLP of ") + Twine(intermediate) + " intermediate features");
  if (failed(shardColumns(gateLinear, ranks)) || failed(shardColumns(upLinear, ranks)))
    return failure();
  shrinkRows(gateLinear.getResult(), ranks);
  shrinkRows(upLinear.getResult(), ranks);
  for (Value v : mul->getOperands())
    if (auto gelu = v.getDefiningOp<GeluOp>())
      shrinkRows(gelu.getResult(), ranks);
  shrinkRows(mul->getResult(0), ranks);
  return shardRowsAndReduce(down);
}

LogicalResult Sharder::shardExperts(MoeExpertsOp experts) {
  RankedTensorType gateUp = experts.getGateUp().getType();  // [E, 2I, H]
  const int64_t intermediate = gateUp.getDimSize(1) / 2;
  if (intermediate % ranks != 0)
    return error(experts, Twine("experts of ") + Twine(intermediate) + " intermediate features");
  const bool nvfp4 = isa<Float4E2M1FNType>(gateUp.getElementType());
  if (nvfp4 && (intermediate / ranks) % 16 != 0)
    return error(experts, Twine("NVFP4 experts of ") + Twine(intermediate) +
                              " intermediate features split into parts of " +
                              Twine(intermediate / ranks) +
                              ", not a multiple of 16 (one block scale per 16 inputs of down)");
  // gate_up: the gate rows and the up rows each split (2 chunks); down: its inputs.
  if (failed(shardWeight(experts.getGateUpMutable(), 1, ranks, 2)) ||
      failed(shardWeight(experts.getDownMutable(), 2, ranks)))
    return failure();
  for (OpOperand &scale : experts.getGateUpScalesMutable()) {
    auto type = cast<RankedTensorType>(scale.get().getType());  // [E, 2I(, H/16)] per row
    if (type.getRank() >= 2 && type.getDimSize(1) == 2 * intermediate &&
        failed(shardWeight(scale, 1, ranks, 2)))
      return failure();
  }
  for (OpOperand &scale : experts.getDownScalesMutable()) {
    auto type = cast<RankedTensorType>(scale.get().getType());  // [E, H, I/16] block scales
    if (type.getRank() == 3 && failed(shardWeight(scale, 2, ranks)))
      return failure();
  }
  allReduceAfter(experts.getResult(), experts);
  return success();
}

LogicalResult Sharder::shardEmbedding(EmbeddingOp embedding) {
  auto type = cast<RankedTensorType>(embedding.getType());
  const int64_t hidden = type.getDimSize(1);
  if (hidden % ranks != 0)
    return error(embedding, Twine("a hidden size of ") + Twine(hidden));
  if (failed(shardWeight(embedding.getTableMutable(), 1, ranks)))
    return failure();
  shrinkRows(embedding.getResult(), ranks);
  allGatherAfter(embedding.getResult(), embedding, hidden);
  return success();
}

LogicalResult Sharder::shardLmHead(func::FuncOp forward) {
  auto ret = cast<func::ReturnOp>(forward.getBody().front().getTerminator());
  Value logits = ret.getOperand(0);
  if (auto softcap = logits.getDefiningOp<SoftcapOp>())
    logits = softcap.getInput();
  auto head = logits.getDefiningOp<LinearOp>();
  if (!head)
    return forward.emitOpError("cannot be split over ")
           << ranks << " ranks: its logits are not a linear (the LM head)";
  const int64_t vocab = head.getWeight().getType().getDimSize(0);
  if (vocab % ranks != 0)
    return error(head, Twine("a vocabulary of ") + Twine(vocab));
  if (failed(shardColumns(head, ranks)))
    return failure();
  shrinkRows(head.getResult(), ranks);
  allGatherAfter(head.getResult(), head, vocab);
  return success();
}

LogicalResult Sharder::run() {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return module.emitOpError("has no @forward to split over ranks");
  for (Operation &op : forward.getBody().front())
    if (isa<ResidualRmsNormOp, RmsNormRopeOp, GeluMulOp, AllReduceOp, AllGatherOp>(op))
      return op.emitOpError("spark-shard-tensor-parallel runs on the imported graph, before "
                            "the fusions and once (it found a fused op or a collective)");
  auto model = module->getAttrOfType<ModelAttr>("spark.model");
  if (!model)
    return module.emitOpError("has no spark.model attribute (the importer's)");
  // Collected first: sharding inserts ops.
  SmallVector<Operation *> ops;
  for (Operation &op : forward.getBody().front())
    ops.push_back(&op);
  for (Operation *op : ops) {
    LogicalResult result = success();
    if (auto attention = dyn_cast<AttentionOp>(op))
      result = shardAttention(attention);
    else if (auto mul = dyn_cast<MulOp>(op)) {
      // mul(gelu(gate), up), either order.
      for (auto [g, u] : {std::pair{mul.getLhs(), mul.getRhs()},
                          std::pair{mul.getRhs(), mul.getLhs()}})
        if (auto gelu = g.getDefiningOp<GeluOp>()) {
          result = shardMlp(mul, gelu.getInput(), u);
          break;
        }
    } else if (auto experts = dyn_cast<MoeExpertsOp>(op))
      result = shardExperts(experts);
    else if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
      if (cast<RankedTensorType>(embedding.getType()).getDimSize(1) == model.getHiddenSize())
        result = shardEmbedding(embedding);
    }
    if (failed(result))
      return failure();
  }
  if (failed(shardLmHead(forward)))
    return failure();
  // The whole weights the slices replaced.
  for (Operation &op : llvm::make_early_inc_range(forward.getBody().front()))
    if (isa<WeightOp>(op) && op.use_empty())
      op.erase();
  module->setAttr("spark.ranks", b.getI64IntegerAttr(ranks));
  return success();
}

struct ShardTensorParallelPass
    : spark::impl::SparkShardTensorParallelPassBase<ShardTensorParallelPass> {
  using SparkShardTensorParallelPassBase::SparkShardTensorParallelPassBase;
  void runOnOperation() override {
    if (ranks == 1)
      return;
    if (ranks < 2 || ranks > 64) {
      getOperation().emitOpError("spark-shard-tensor-parallel: ranks must be 1 to 64, got ")
          << static_cast<int64_t>(ranks);
      return signalPassFailure();
    }
    if (getOperation()->hasAttr("spark.ranks")) {
      getOperation().emitOpError("is already split over ranks (spark.ranks)");
      return signalPassFailure();
    }
    if (failed(Sharder(getOperation(), ranks).run()))
      signalPassFailure();
  }
};

} // namespace
