//===- LowerToKernels.cpp - lower ops to launches over planned buffers -----===//
//
// The entry function becomes a spark.program: each tensor value gets a buffer of max-tokens
// rows (views and in-place results share one), and each op becomes spark.launch ops whose
// arguments follow runtime/include/spark/runtime/kernel_abi.h. spark-plan-arena (PlanArena.cpp)
// then places the buffers in one arena.
// Each launch names the entry point of its (op, literal arguments), which
// spark-outline-kernel-entries (OutlineKernelEntries.cpp) then builds in gpu.module @kernels.
//
//===----------------------------------------------------------------------===//
#include "dialects/Spark/Transforms/Passes.h"

#include "dialects/Spark/IR/TypeInference.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

#include "spark/runtime/kernel_abi.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>

namespace spark {
#define GEN_PASS_DEF_SPARKLOWERTOKERNELSPASS
#include "dialects/Spark/Transforms/Passes.h.inc"
} // namespace spark

using namespace mlir;
using namespace spark;

namespace {


int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Blocks a decode step's attention should run at least (about two per SM on a 132-SM H200, five
/// on the 48-SM GB10): a layer with q query heads splits each head's keys into up to
/// ceil(kAttentionTargetBlocks / q) ranges.
constexpr int64_t kAttentionTargetBlocks = 256;
/// Keys below which splitting a sliding window further does not pay.
constexpr int64_t kMinKeysPerSplit = 64;

/// The most key ranges one (token, head) of this attention is split into (1: no split).
int64_t attentionMaxSplits(int64_t qHeads, int64_t window) {
  int64_t splits = ceilDiv(kAttentionTargetBlocks, std::max<int64_t>(qHeads, 1));
  if (window > 0)
    splits = std::min(splits, ceilDiv(window, kMinKeysPerSplit));
  return std::clamp<int64_t>(splits, 1, abi::kMaxAttentionSplits);
}

/// One plan argument, as the JSON of docs/plan-format.md spells it.
struct Arg {
  enum Kind { Buffer, Weight, KCache, VCache, KvCapacity, Null, NumTokens, NumSoftTokens, I32, F32 };
  Kind kind;
  int64_t index = 0;
  int32_t i32 = 0;
  float f32 = 0.0f;

  static Arg buffer(int64_t id) { return {Buffer, id}; }
  static Arg weight(int64_t id) { return {Weight, id}; }
  static Arg kCache(int64_t id) { return {KCache, id}; }
  static Arg vCache(int64_t id) { return {VCache, id}; }
  static Arg kvCapacity(int64_t id) { return {KvCapacity, id}; }
  static Arg null() { return {Null}; }
  static Arg numTokens() { return {NumTokens}; }
  static Arg numSoftTokens() { return {NumSoftTokens}; }
  static Arg i32v(int64_t v) { return {I32, 0, static_cast<int32_t>(v)}; }
  static Arg f32v(float v) { return {F32, 0, 0, v}; }
  bool isLiteral() const { return kind == I32 || kind == F32; }
};

/// A launch's grid as a function of a call's token count (kernel_abi.h GridRule): `work` items
/// per token, or a fixed count of them, `divisor` items per block.
using abi::GridRule;
GridRule perToken(int64_t work, int64_t divisor = 1) { return {work, 0, divisor}; }
GridRule fixedGrid(int64_t work, int64_t divisor = 1) { return {0, work, divisor}; }

/// A launch before entry points exist.
struct PendingLaunch {
  const abi::KernelSpec *spec;
  SmallVector<Arg> args;
  GridRule grid;
  std::string source;
  bool logitsTail = false;  // markLogitsTail
};

/// A logical buffer: what one or more tensor values (views, in-place results) live in.
struct LogicalBuffer {
  /// What the buffer's elements are, from the registry element type of the arguments it is
  /// passed as (assignElementTypes): token ids and indices, an f32 workspace, or activations of
  /// the module's precision (kernel_abi.h ElementType::kAct).
  enum class Element { kI32, kF32, kActivation };
  std::string name;
  Element element = Element::kActivation;
  SmallVector<int64_t> rowShape;
  /// Bytes of one element: activations are 2 with bf16 activation storage.
  int64_t elementBytes(bool bf16Activations) const {
    return element == Element::kActivation && bf16Activations ? 2 : 4;
  }
  int64_t rowElements() const {
    int64_t n = 1;
    for (int64_t d : rowShape)
      n *= d;
    return n;
  }
};

std::string sourceName(Operation *op) {
  // The importer names every op (NameLoc); passes may have fused locations since.
  std::string name;
  op->getLoc()->walk([&](Location loc) {
    if (auto named = dyn_cast<NameLoc>(loc)) {
      name = named.getName().str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (!name.empty())
    return name;
  return op->getName().stripDialect().str();
}

class Lowering {
public:
  Lowering(ModuleOp module, func::FuncOp entry, int64_t maxTokens, bool bf16Activations)
      : module(module), entry(entry), maxTokens(maxTokens), bf16Activations(bf16Activations),
        ctx(module.getContext()) {}

  LogicalResult run(int64_t &numLaunches, int64_t &numEntries);

private:
  LogicalResult collectCaches();
  LogicalResult assignBuffers();
  LogicalResult lowerOp(Operation *op);
  LogicalResult checkWeightTypes(Operation *op, size_t first);
  LogicalResult appendSampling();
  void markLogitsTail();
  LogicalResult assignElementTypes();
  LogicalResult checkBufferSizes();
  void buildProgram();

  int64_t bufferOf(Value value) { return valueBuffer.lookup(value); }
  int64_t newBuffer(Value value, StringRef name);
  int64_t newScratch(StringRef name, ArrayRef<int64_t> rowShape);
  FailureOr<int64_t> weightOf(Operation *user, Value value);
  void launch(Operation *op, abi::OpId kernelOp, SmallVector<Arg> args, GridRule grid,
              StringRef suffix = "");

  ModuleOp module;
  func::FuncOp entry;
  int64_t maxTokens;
  bool bf16Activations;
  MLIRContext *ctx;
  /// Ops another op's launch already computes (a scalar_mul fused into its norm).
  llvm::DenseSet<Operation *> fusedAway;

  SmallVector<LogicalBuffer> buffers;
  llvm::DenseMap<Value, int64_t> valueBuffer;
  /// A checkpoint tensor the plan reads: its type, weight id and, for a weight stored in pieces,
  /// the parts it is assembled from (spark.weight).
  struct PlanWeight {
    RankedTensorType type;
    int64_t id;
    ArrayAttr parts;
    DenseI64ArrayAttr partShape;
    bool reciprocal;
  };
  llvm::MapVector<StringRef, PlanWeight> weights;
  llvm::StringMap<int64_t> cacheIds;
  SmallVector<KvCacheOp> caches;
  SmallVector<PendingLaunch> launches;
  std::map<std::string, int64_t> inputs;
  int64_t logits = -1;
  int64_t vocab = 0;          // the width of a logits row
  int64_t sampledTokens = -1; // the sampled next tokens (appendSampling)
  std::set<std::string> entryNames; // distinct entry points the launches name
};

int64_t Lowering::newBuffer(Value value, StringRef name) {
  auto type = cast<RankedTensorType>(value.getType());
  LogicalBuffer buffer;
  buffer.name = name.str();
  if (type.getElementType().isInteger(32))
    buffer.element = LogicalBuffer::Element::kI32;
  buffer.rowShape.assign(type.getShape().begin() + 1, type.getShape().end());
  buffers.push_back(buffer);
  valueBuffer[value] = buffers.size() - 1;
  return buffers.size() - 1;
}

int64_t Lowering::newScratch(StringRef name, ArrayRef<int64_t> rowShape) {
  LogicalBuffer buffer;
  buffer.name = name.str();
  buffer.rowShape.assign(rowShape.begin(), rowShape.end());
  buffers.push_back(buffer);
  return buffers.size() - 1;
}

FailureOr<int64_t> Lowering::weightOf(Operation *user, Value value) {
  auto weight = value.getDefiningOp<WeightOp>();
  if (!weight) {
    int64_t index = llvm::find(user->getOperands(), value) - user->operand_begin();
    return user->emitOpError("expects operand #") << index << " to be a spark.weight result";
  }
  auto [it, inserted] = weights.try_emplace(
      weight.getName(), PlanWeight{weight.getType(), static_cast<int64_t>(weights.size()),
                                   weight.getPartsAttr(), weight.getPartShapeAttr(),
                                   weight.getReciprocal()});
  if (!inserted && it->second.type != weight.getType())
    return weight.emitOpError("weight '")
           << weight.getName() << "' is used with two types: " << it->second.type << " and "
           << weight.getType();
  if (!inserted &&
      (it->second.parts != weight.getPartsAttr() || it->second.partShape != weight.getPartShapeAttr()))
    return weight.emitOpError("weight '")
           << weight.getName() << "' is used with two different lists of parts";
  if (!inserted && it->second.reciprocal != weight.getReciprocal())
    return weight.emitOpError("weight '")
           << weight.getName() << "' is used both as stored and as its reciprocal";
  return it->second.id;
}

void Lowering::launch(Operation *op, abi::OpId kernelOp, SmallVector<Arg> args, GridRule grid,
                      StringRef suffix) {
  const abi::KernelSpec *spec = &abi::Kernel(kernelOp);
  // The lowering below must pass each op's registry arguments (kernel_ops.def), in order and of
  // their kinds; ValidatePlan re-checks everything when the plan is written.
  assert(spec->num_args == static_cast<int>(args.size()) && "launch does not match the registry");
  std::string source = sourceName(op);
  if (!suffix.empty())
    source += ("." + suffix).str();
  launches.push_back({spec, std::move(args), grid, source});
}

LogicalResult Lowering::collectCaches() {
  for (auto cache : module.getOps<KvCacheOp>()) {
    cacheIds[cache.getSymName()] = caches.size();
    caches.push_back(cache);
  }
  return success();
}

LogicalResult Lowering::assignBuffers() {
  static constexpr StringLiteral kInputNames[] = {"ids", "positions", "soft_embeddings",
                                                  "soft_indices", "last_visible"};
  for (BlockArgument arg : entry.getArguments()) {
    auto name = entry.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "spark.input");
    if (!name || !llvm::is_contained(kInputNames, name.getValue()))
      return entry.emitOpError("expects every argument to carry spark.input = \"ids\", "
                               "\"positions\", \"soft_embeddings\", \"soft_indices\" or "
                               "\"last_visible\"; argument ")
             << arg.getArgNumber() << " does not";
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      return entry.emitOpError("expects ranked tensor arguments");
    bool rows = name.getValue() == "soft_embeddings";
    bool ok = rows ? type.getRank() == 2 && type.getElementType().isF32() &&
                         !type.isDynamicDim(1)
                   : type.getRank() == 1 && type.getElementType().isInteger(32);
    if (!ok)
      return entry.emitOpError("expects argument ")
             << arg.getArgNumber() << " (\"" << name.getValue() << "\") of type "
             << (rows ? "tensor<?xNxf32>" : "tensor<?xi32>") << ", got " << type;
    if (inputs.count(name.getValue().str()))
      return entry.emitOpError("expects one argument per spark.input, got \"")
             << name.getValue() << "\" twice";
    inputs[name.getValue().str()] = newBuffer(arg, ("%" + name.getValue()).str());
  }
  if (!inputs.count("ids") || !inputs.count("positions"))
    return entry.emitOpError("expects \"ids\" and \"positions\" arguments");
  return success();
}

LogicalResult Lowering::lowerOp(Operation *op) {
  const size_t firstLaunch = launches.size();
  Value unbuffered;
  auto buf = [&](Value v) {
    if (!valueBuffer.count(v)) {
      unbuffered = v; // a spark.weight (or other non-activation) read as an activation
      return Arg::null();
    }
    return Arg::buffer(bufferOf(v));
  };
  auto out = [&](Value v) { return Arg::buffer(newBuffer(v, sourceName(op))); };
  auto shapeOf = [](Value v) { return cast<RankedTensorType>(v.getType()); };
  auto weightArg = [&](Value v) -> FailureOr<Arg> {
    FailureOr<int64_t> id = weightOf(op, v);
    if (failed(id))
      return failure();
    return Arg::weight(*id);
  };
  // A weight operand that may be absent (weight-less RMSNorm): a null pointer then.
  auto optionalWeightArg = [&](Value v) -> FailureOr<Arg> {
    return v ? weightArg(v) : FailureOr<Arg>(Arg::null());
  };
  auto elementwiseGrid = [&](Value v) { return perToken(rowElements(shapeOf(v)), 256); };
  // A size the kernels take as a 32-bit argument; one that does not fit fails the op below.
  std::optional<int64_t> oversized;
  auto i32 = [&](int64_t v) {
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      oversized = v;
    return Arg::i32v(v);
  };
  auto f32 = [](APFloat v) { return Arg::f32v(v.convertToFloat()); };

  LogicalResult result = llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<WeightOp>([](auto) { return success(); })
      .Case<EmbeddingOp>([&](EmbeddingOp e) -> LogicalResult {
        FailureOr<Arg> table = weightArg(e.getTable());
        if (failed(table))
          return failure();
        auto tableType = e.getTable().getType();
        Arg ids = buf(e.getIds());
        launch(op, abi::OpId::kEmbedding,
               {ids, *table, out(e.getResult()), Arg::numTokens(), i32(tableType.getDimSize(0)),
                i32(tableType.getDimSize(1)), f32(e.getScale())},
               elementwiseGrid(e.getResult()));
        return success();
      })
      .Case<MaskTokensOp>([&](MaskTokensOp m) -> LogicalResult {
        SmallVector<int64_t, 3> ids(m.getTokenIds().begin(), m.getTokenIds().end());
        ids.resize(3, -1);
        Arg in = buf(m.getIds());
        launch(op, abi::OpId::kMaskTokens,
               {in, out(m.getResult()), Arg::numTokens(), i32(ids[0]), i32(ids[1]), i32(ids[2]),
                i32(m.getReplacement())},
               perToken(1, 256));
        return success();
      })
      .Case<ScatterNdOp>([&](ScatterNdOp s) -> LogicalResult {
        int64_t cols = s.getDest().getType().getDimSize(1);
        Arg dest = buf(s.getDest());
        // In place only when nothing else can read the dest's buffer: one use, and the dest is
        // neither a view (reshape) of another value nor an entry argument.
        if (s.getDest().hasOneUse() && s.getDest().getDefiningOp() &&
            !s.getDest().getDefiningOp<ReshapeOp>()) {
          valueBuffer[s.getResult()] = bufferOf(s.getDest()); // in place
        } else {
          Arg copy = out(s.getResult());
          launch(op, abi::OpId::kCopy, {dest, copy, Arg::numTokens(), i32(cols)}, elementwiseGrid(s.getDest()),
                 "copy");
          dest = copy;
        }
        launch(op, abi::OpId::kScatterRows,
               {dest, buf(s.getIndices()), buf(s.getUpdates()), Arg::numTokens(),
                Arg::numSoftTokens(), i32(cols)},
               perToken(1));
        return success();
      })
      .Case<RmsNormOp>([&](RmsNormOp n) -> LogicalResult {
        RankedTensorType type = n.getInput().getType();
        int64_t groups = type.getRank() == 3 ? type.getDimSize(1) : 1;
        FailureOr<Arg> weight = optionalWeightArg(n.getWeight());
        if (failed(weight))
          return failure();
        Arg in = buf(n.getInput());
        launch(op, abi::OpId::kRmsNorm,
               {in, *weight, out(n.getResult()), Arg::numTokens(), i32(groups),
                i32(type.getShape().back()), f32(n.getEpsilon())},
               perToken(groups));
        return success();
      })
      .Case<ResidualRmsNormOp>([&](ResidualRmsNormOp n) -> LogicalResult {
        FailureOr<Arg> weight = optionalWeightArg(n.getWeight());
        if (failed(weight))
          return failure();
        Arg in = buf(n.getInput()), residual = buf(n.getResidual());
        // Followed only by a spark.scalar_mul (Gemma 4's layer_scalar after the post-feedforward
        // norm): one residual_rms_norm_scale launch computes both, and the sum is never stored.
        auto scale = n->hasOneUse() ? dyn_cast<ScalarMulOp>(*n->user_begin()) : ScalarMulOp();
        if (scale && scale.getInput() == n.getResult()) {
          FailureOr<Arg> scalar = weightArg(scale.getScalar());
          if (failed(scalar))
            return failure();
          fusedAway.insert(scale);
          launch(op, abi::OpId::kResidualRmsNormScale,
                 {in, *weight, residual, *scalar, out(scale.getResult()), Arg::numTokens(),
                  i32(n.getInput().getType().getShape().back()), f32(n.getEpsilon()),
                  i32(bf16Activations ? 1 : 0)},
                 perToken(1), "scale");
          return success();
        }
        launch(op, abi::OpId::kResidualRmsNorm,
               {in, *weight, residual, out(n.getResult()), Arg::numTokens(),
                i32(n.getInput().getType().getShape().back()), f32(n.getEpsilon())},
               perToken(1));
        return success();
      })
      .Case<RmsNormRopeOp>([&](RmsNormRopeOp r) -> LogicalResult {
        RankedTensorType in = r.getInput().getType();
        FailureOr<Arg> weight = optionalWeightArg(r.getWeight());
        if (failed(weight))
          return failure();
        Arg x = buf(r.getInput()), pos = buf(r.getPositions());
        launch(op, abi::OpId::kRmsNormRope,
               {x, *weight, pos, out(r.getResult()), Arg::numTokens(), i32(in.getDimSize(1)),
                i32(in.getDimSize(2)), i32(r.getRotatedPairs()), f32(r.getTheta()),
                f32(r.getFactor()), f32(r.getEpsilon())},
               perToken(1));
        return success();
      })
      .Case<LinearOp>([&](LinearOp l) -> LogicalResult {
        FailureOr<Arg> w = weightArg(l.getWeight());
        if (failed(w))
          return failure();
        SmallVector<Arg, 2> scales;
        for (Value scale : l.getScales()) {
          FailureOr<Arg> arg = weightArg(scale);
          if (failed(arg))
            return failure();
          scales.push_back(*arg);
        }
        auto wt = l.getWeight().getType();
        const int64_t outFeatures = wt.getDimSize(0), inFeatures = wt.getDimSize(1);
        Arg in = buf(l.getInput());
        Arg y = out(l.getResult());
        // One warp per output row, 8 warps per block; the verifier checked the scales.
        const GridRule grid = fixedGrid(outFeatures, 8);
        switch (l.getWeightFormat()) {
        case LinearOp::WeightFormat::kBF16:
          launch(op, abi::OpId::kLinear,
                 {in, *w, y, Arg::numTokens(), i32(outFeatures), i32(inFeatures)}, grid);
          break;
        case LinearOp::WeightFormat::kNvfp4:
          launch(op, abi::OpId::kLinearNvfp4,
                 {in, *w, scales[0], scales[1], y, Arg::numTokens(), i32(outFeatures),
                  i32(inFeatures)},
                 grid);
          break;
        case LinearOp::WeightFormat::kFp8: {
          const int64_t scaleCount =
              cast<RankedTensorType>(l.getScales()[0].getType()).getNumElements();
          launch(op, abi::OpId::kLinearFp8,
                 {in, *w, scales[0], y, Arg::numTokens(), i32(outFeatures), i32(inFeatures),
                  i32(scaleCount)},
                 grid);
          break;
        }
        }
        return success();
      })
      .Case<AddOp, MulOp>([&](auto b) -> LogicalResult {
        abi::OpId kernel = isa<AddOp>(op) ? abi::OpId::kAdd : abi::OpId::kMul;
        Arg lhs = buf(b.getLhs()), rhs = buf(b.getRhs());
        launch(op, kernel,
               {lhs, rhs, out(b.getResult()), Arg::numTokens(), i32(rowElements(b.getType()))},
               elementwiseGrid(b.getResult()));
        return success();
      })
      .Case<ScaleOp>([&](ScaleOp s) -> LogicalResult {
        Arg in = buf(s.getInput());
        launch(op, abi::OpId::kScale,
               {in, out(s.getResult()), Arg::numTokens(), i32(rowElements(s.getType())),
                f32(s.getFactor())},
               elementwiseGrid(s.getResult()));
        return success();
      })
      .Case<ScalarMulOp>([&](ScalarMulOp s) -> LogicalResult {
        FailureOr<Arg> scalar = weightArg(s.getScalar());
        if (failed(scalar))
          return failure();
        Arg in = buf(s.getInput());
        launch(op, abi::OpId::kScalarMul,
               {in, *scalar, out(s.getResult()), Arg::numTokens(),
                i32(rowElements(s.getResult().getType()))},
               elementwiseGrid(s.getResult()));
        return success();
      })
      .Case<GeluOp>([&](GeluOp g) -> LogicalResult {
        Arg in = buf(g.getInput());
        launch(op, abi::OpId::kGelu, {in, out(g.getResult()), Arg::numTokens(), i32(rowElements(g.getType()))},
               elementwiseGrid(g.getResult()));
        return success();
      })
      .Case<GeluMulOp>([&](GeluMulOp g) -> LogicalResult {
        Arg gate = buf(g.getGate()), up = buf(g.getUp());
        launch(op, abi::OpId::kGeluMul,
               {gate, up, out(g.getResult()), Arg::numTokens(), i32(rowElements(g.getType()))},
               elementwiseGrid(g.getResult()));
        return success();
      })
      .Case<SoftcapOp>([&](SoftcapOp s) -> LogicalResult {
        Arg in = buf(s.getInput());
        launch(op, abi::OpId::kSoftcap,
               {in, out(s.getResult()), Arg::numTokens(), i32(rowElements(s.getType())),
                f32(s.getCap())},
               elementwiseGrid(s.getResult()));
        return success();
      })
      .Case<ReshapeOp>([&](ReshapeOp r) -> LogicalResult {
        valueBuffer[r.getResult()] = bufferOf(r.getInput()); // a view: no data moves
        return success();
      })
      .Case<SelectGroupOp>([&](SelectGroupOp s) -> LogicalResult {
        RankedTensorType in = s.getInput().getType();
        Arg x = buf(s.getInput());
        launch(op, abi::OpId::kSelectGroup,
               {x, out(s.getResult()), Arg::numTokens(), i32(in.getDimSize(1)),
                i32(in.getDimSize(2)), i32(s.getIndex())},
               elementwiseGrid(s.getResult()));
        return success();
      })
      .Case<RopeOp>([&](RopeOp r) -> LogicalResult {
        RankedTensorType in = r.getInput().getType();
        Arg x = buf(r.getInput()), pos = buf(r.getPositions());
        launch(op, abi::OpId::kRope,
               {x, pos, out(r.getResult()), Arg::numTokens(), i32(in.getDimSize(1)),
                i32(in.getDimSize(2)), i32(r.getRotatedPairs()), f32(r.getTheta()),
                f32(r.getFactor())},
               perToken(in.getDimSize(1)));
        return success();
      })
      .Case<AttentionOp>([&](AttentionOp a) -> LogicalResult {
        auto it = cacheIds.find(a.getCache());
        if (it == cacheIds.end())
          return a.emitOpError("references unknown KV cache ") << a.getCacheAttr();
        int64_t cache = it->second;
        Arg cacheDType = i32(caches[cache].getCacheElementType().isBF16() ? abi::kCacheBF16
                                                                          : abi::kCacheF32);
        RankedTensorType q = a.getQuery().getType(), k = a.getKey().getType();
        Arg pos = buf(a.getPositions());
        if (!a.getKvShared()) {
          Arg key = buf(a.getKey()), value = buf(a.getValue());
          launch(op, abi::OpId::kKvWrite,
                 {key, value, pos, Arg::kCache(cache), Arg::vCache(cache), Arg::numTokens(),
                  i32(k.getDimSize(1)), i32(k.getDimSize(2)), Arg::kvCapacity(cache),
                  cacheDType},
                 perToken(rowElements(k), 256), "kv_write");
        }
        Arg query = buf(a.getQuery());
        Arg lastVisible = a.getLastVisible() ? buf(a.getLastVisible()) : Arg::null();
        const int64_t qHeads = q.getDimSize(1), headDim = q.getDimSize(2);
        const int64_t maxSplits = attentionMaxSplits(qHeads, a.getWindow());
        if (maxSplits <= 1) {
          launch(op, abi::OpId::kAttention,
                 {query, pos, Arg::kCache(cache), Arg::vCache(cache), out(a.getResult()),
                  Arg::null(), Arg::numTokens(), i32(qHeads), i32(k.getDimSize(1)), i32(headDim),
                  Arg::kvCapacity(cache), i32(a.getWindow()), f32(a.getScale()), i32(1), i32(0),
                  cacheDType, lastVisible},
                 perToken(qHeads));
          return success();
        }
        // Split over the KV length (flash-decoding, kernel_abi.h): the workspace holds
        // splitRows x qHeads partial records; a step of T tokens uses min(maxSplits,
        // splitRows / T) splits, so decode (T = 1) uses all of them and a full prefill chunk
        // (T = maxTokens) none.
        const int64_t splitRows = std::max(maxTokens, maxSplits);
        const int64_t partials =
            newScratch(sourceName(op) + ".partials",
                       {ceilDiv(splitRows, maxTokens), qHeads,
                        abi::AttentionRecordFloats(static_cast<int>(headDim))});
        Arg y = out(a.getResult());
        launch(op, abi::OpId::kAttention,
               {query, pos, Arg::kCache(cache), Arg::vCache(cache), y, Arg::buffer(partials),
                Arg::numTokens(), i32(qHeads), i32(k.getDimSize(1)), i32(headDim),
                Arg::kvCapacity(cache), i32(a.getWindow()), f32(a.getScale()), i32(maxSplits),
                i32(splitRows), cacheDType, lastVisible},
               GridRule{qHeads, maxSplits * qHeads, 1});
        launch(op, abi::OpId::kAttentionMerge,
               {Arg::buffer(partials), y, Arg::numTokens(), i32(qHeads), i32(headDim),
                i32(maxSplits), i32(splitRows)},
               perToken(qHeads), "merge");
        return success();
      })
      .Case<MoeRouterOp>([&](MoeRouterOp r) -> LogicalResult {
        FailureOr<Arg> scale = weightArg(r.getScale()), proj = weightArg(r.getProj()),
                       pes = weightArg(r.getPerExpertScale());
        if (failed(scale) || failed(proj) || failed(pes))
          return failure();
        auto projType = r.getProj().getType();
        const int64_t experts = projType.getDimSize(0), hidden = projType.getDimSize(1);
        // The logits as rms_norm (the router scale as its weight) + linear, so that reading
        // proj is spread over the GPU like any linear; hidden^-0.5 is applied by moe_topk.
        Arg in = buf(r.getInput());
        int64_t normed = newScratch(sourceName(op) + ".norm", {hidden});
        launch(op, abi::OpId::kRmsNorm,
               {in, *scale, Arg::buffer(normed), Arg::numTokens(), i32(1), i32(hidden),
                f32(r.getEpsilon())},
               perToken(1), "norm");
        int64_t logits = newScratch(sourceName(op) + ".logits", {experts});
        launch(op, abi::OpId::kLinear,
               {Arg::buffer(normed), *proj, Arg::buffer(logits), Arg::numTokens(), i32(experts),
                i32(hidden)},
               fixedGrid(experts, 8), "logits");
        Arg weightsOut = out(r.getWeights()), indicesOut = out(r.getIndices());
        launch(op, abi::OpId::kMoeTopK,
               {Arg::buffer(logits), *pes, weightsOut, indicesOut, Arg::numTokens(),
                i32(experts), i32(r.getTopK()),
                Arg::f32v(static_cast<float>(1.0 / std::sqrt(static_cast<double>(hidden))))},
               perToken(1));
        return success();
      })
      .Case<MoeExpertsOp>([&](MoeExpertsOp m) -> LogicalResult {
        FailureOr<Arg> gateUpW = weightArg(m.getGateUp()), down = weightArg(m.getDown());
        if (failed(gateUpW) || failed(down))
          return failure();
        SmallVector<Arg, 2> gateUpScales, downScales;
        for (auto [values, args] : {std::pair{m.getGateUpScales(), &gateUpScales},
                                    std::pair{m.getDownScales(), &downScales}})
          for (Value scale : values) {
            FailureOr<Arg> arg = weightArg(scale);
            if (failed(arg))
              return failure();
            args->push_back(*arg);
          }
        auto gu = m.getGateUp().getType();
        int64_t experts = gu.getDimSize(0), inter = gu.getDimSize(1) / 2,
                hidden = gu.getDimSize(2), topK = m.getWeights().getType().getDimSize(1);
        Arg in = buf(m.getInput()), w = buf(m.getWeights()), idx = buf(m.getIndices());
        int64_t act = newScratch(sourceName(op) + ".act", {topK, inter});
        // FP8 scales per matrix (1) or per row (the matrix's rows); the verifier checked them.
        auto scalesPerMatrix = [&](ValueRange scales, int64_t matrices) {
          return cast<RankedTensorType>(scales[0].getType()).getNumElements() /
                 (experts * matrices);
        };
        // Calls of kMoeGroupMinTokens tokens or more run the experts grouped by expert (tensor
        // cores; moe_down into a workspace that moe_combine sums), fewer tokens on the GEMV
        // path: each path its own launches and entries (the grouped tiles' registers would slow
        // the decode GEMV otherwise); the programs run the launches of the call's path.
        const bool grouped = maxTokens >= abi::kMoeGroupMinTokens;
        Type guElement = gu.getElementType(),
             downElement = m.getDown().getType().getElementType();
        auto gateUp = [&](abi::MoePath path, StringRef suffix) {
          const GridRule grid = perToken(topK * inter, 8);
          if (isa<Float4E2M1FNType>(guElement))
            launch(op, abi::OpId::kMoeGateUpNvfp4,
                   {in, *gateUpW, gateUpScales[0], gateUpScales[1], idx, Arg::buffer(act),
                    Arg::numTokens(), i32(hidden), i32(inter), i32(experts), i32(topK), i32(path)},
                   grid, suffix);
          else if (isa<Float8E4M3FNType>(guElement))
            launch(op, abi::OpId::kMoeGateUpFp8,
                   {in, *gateUpW, gateUpScales[0], idx, Arg::buffer(act), Arg::numTokens(),
                    i32(hidden), i32(inter), i32(experts), i32(topK),
                    i32(scalesPerMatrix(m.getGateUpScales(), 2)), i32(path)},
                   grid, suffix);
          else
            launch(op, abi::OpId::kMoeGateUp,
                   {in, *gateUpW, idx, Arg::buffer(act), Arg::numTokens(), i32(hidden),
                    i32(inter), i32(experts), i32(topK), i32(path)},
                   grid, suffix);
        };
        gateUp(abi::kMoeGemv, "gate_up");
        if (grouped)
          gateUp(abi::kMoeGrouped, "gate_up_grouped");
        Arg y = out(m.getResult());
        auto downLaunch = [&](Arg partials, abi::MoePath path, StringRef suffix) {
          const GridRule grid = perToken(hidden, 8);
          if (isa<Float4E2M1FNType>(downElement))
            launch(op, abi::OpId::kMoeDownNvfp4,
                   {Arg::buffer(act), *down, downScales[0], downScales[1], w, idx, y, partials,
                    Arg::numTokens(), i32(hidden), i32(inter), i32(experts), i32(topK), i32(path)},
                   grid, suffix);
          else if (isa<Float8E4M3FNType>(downElement))
            launch(op, abi::OpId::kMoeDownFp8,
                   {Arg::buffer(act), *down, downScales[0], w, idx, y, partials,
                    Arg::numTokens(), i32(hidden), i32(inter), i32(experts), i32(topK),
                    i32(scalesPerMatrix(m.getDownScales(), 1)), i32(path)},
                   grid, suffix);
          else
            launch(op, abi::OpId::kMoeDown,
                   {Arg::buffer(act), *down, w, idx, y, partials, Arg::numTokens(), i32(hidden),
                    i32(inter), i32(experts), i32(topK), i32(path)},
                   grid, suffix);
        };
        downLaunch(Arg::null(), abi::kMoeGemv, "down");
        if (!grouped)
          return success();
        int64_t partials = newScratch(sourceName(op) + ".partials", {topK, hidden});
        downLaunch(Arg::buffer(partials), abi::kMoeGrouped, "down_grouped");
        launch(op, abi::OpId::kMoeCombine,
               {Arg::buffer(partials), y, Arg::numTokens(), i32(hidden), i32(topK)},
               perToken(hidden, 256), "combine");
        return success();
      })
      .Case<func::ReturnOp>([&](func::ReturnOp r) -> LogicalResult {
        if (r.getNumOperands() != 1)
          return r.emitOpError("expects the entry to return exactly the logits");
        if (!valueBuffer.count(r.getOperand(0)))
          return r.emitOpError("expects the logits to be an activation computed by the entry");
        logits = bufferOf(r.getOperand(0));
        vocab = rowElements(cast<RankedTensorType>(r.getOperand(0).getType()));
        return success();
      })
      .Default([](Operation *op) {
        return op->emitOpError("cannot be lowered to a kernel: no kernel implements it");
      });
  if (succeeded(result) && oversized)
    return op->emitOpError("has a size of ")
           << *oversized << ", which does not fit the kernels' 32-bit size arguments";
  if (succeeded(result) && unbuffered)
    return op->emitOpError("expects operand #")
           << llvm::find(op->getOperands(), unbuffered) - op->operand_begin()
           << " to be an activation, got a value without a buffer (a spark.weight?)";
  if (succeeded(result))
    return checkWeightTypes(op, firstLaunch);
  return result;
}

/// The weights the launches of `op` (from index `first`) take must have the element type the
/// registry gives those arguments (kernel_ops.def: bf16 for most, quantized element types and
/// f32 scales for the quantized linears).
LogicalResult Lowering::checkWeightTypes(Operation *op, size_t first) {
  auto matches = [](abi::ElementType want, Type element) {
    switch (want) {
    case abi::ElementType::kBF16:
      return element.isBF16();
    case abi::ElementType::kF32:
      return element.isF32();
    case abi::ElementType::kF8E4M3:
      return isa<Float8E4M3FNType>(element);
    case abi::ElementType::kF4E2M1:
      return isa<Float4E2M1FNType>(element);
    default:
      return false;
    }
  };
  auto typeName = [](abi::ElementType want) {
    switch (want) {
    case abi::ElementType::kF32:
      return "f32";
    case abi::ElementType::kF8E4M3:
      return "f8E4M3FN";
    case abi::ElementType::kF4E2M1:
      return "f4E2M1FN";
    default:
      return "bf16";
    }
  };
  for (size_t l = first; l < launches.size(); ++l) {
    for (auto [i, arg] : llvm::enumerate(launches[l].args)) {
      if (arg.kind != Arg::Weight)
        continue;
      const abi::ElementType want = launches[l].spec->args[i].element;
      for (auto &[name, weight] : weights) {
        if (weight.id != arg.index)
          continue;
        if (!matches(want, weight.type.getElementType()))
          return op->emitOpError("expects weight '")
                 << name << "' in " << typeName(want) << " (the " << launches[l].spec->op
                 << " kernel's " << launches[l].spec->args[i].name << "), got " << weight.type
                 << (want == abi::ElementType::kBF16
                         ? "; only spark.linear and spark.moe_experts take quantized weights"
                         : "");
      }
    }
  }
  return success();
}

/// The program's last launch draws each row's next token from the logits on the device
/// (kernel_ops.def sample), with the sampling parameters the runtime writes into the "sampling"
/// input: a decode step then returns one token id, not a row of logits.
LogicalResult Lowering::appendSampling() {
  if (vocab < 1 || vocab > std::numeric_limits<int32_t>::max())
    return entry.emitOpError("expects logits rows of 1 to 2^31 - 1 elements, got ") << vocab;
  const int64_t params = newScratch("%sampling", {abi::kSamplingParamWords});
  inputs["sampling"] = params;
  sampledTokens = newScratch("tokens", {});
  launches.push_back({&abi::Kernel(abi::OpId::kSample),
                      {Arg::buffer(logits), Arg::buffer(params), Arg::buffer(sampledTokens),
                       Arg::numTokens(), Arg::i32v(vocab)},
                      perToken(1), "sample"});
  return success();
}

/// Marks the logits tail (plan.h Step::logits_tail): the longest run of last launches, each of a
/// row-local op (abi::RowLocal), whose written buffers only later tail launches read or which are
/// the logits. A step that needs only its last token's logits then runs them on that row. In a
/// Gemma 4 plan that is the final norm, the LM head and the softcap, and before them the last
/// layer's launches after its attention (the MLP or experts and the residual adds), which no
/// other token needs either.
void Lowering::markLogitsTail() {
  // Readers of each buffer, by launch index.
  llvm::DenseMap<int64_t, SmallVector<size_t>> readers;
  for (auto [l, launch] : llvm::enumerate(launches))
    for (auto [i, arg] : llvm::enumerate(launch.args))
      if (arg.kind == Arg::Buffer && !abi::IsWrittenRole(launch.spec->args[i].role))
        readers[arg.index].push_back(l);
  size_t first = launches.size();
  while (first > 0) {
    const PendingLaunch &launch = launches[first - 1];
    if (!abi::RowLocal(*launch.spec))
      break;
    bool onlyTailReads = true;
    for (auto [i, arg] : llvm::enumerate(launch.args)) {
      if (arg.kind != Arg::Buffer || !abi::IsWrittenRole(launch.spec->args[i].role))
        continue;
      for (size_t reader : readers.lookup(arg.index))
        onlyTailReads &= reader >= first - 1;  // itself (in place) or the tail so far
      onlyTailReads &= arg.index == logits || arg.index == sampledTokens ||
                       !readers.lookup(arg.index).empty();
    }
    if (!onlyTailReads)
      break;
    --first;
  }
  for (size_t l = first; l < launches.size(); ++l)
    launches[l].logitsTail = true;
}

/// Gives every buffer the element type of the registry arguments it is passed as (kI32, kF32 for
/// a workspace, kAct for activations); buffers no launch takes keep the type of their value.
/// A buffer passed as two different types is a bug of this lowering.
LogicalResult Lowering::assignElementTypes() {
  using Element = LogicalBuffer::Element;
  SmallVector<std::optional<Element>> seen(buffers.size());
  for (const PendingLaunch &l : launches) {
    for (auto [i, arg] : llvm::enumerate(l.args)) {
      if (arg.kind != Arg::Buffer)
        continue;
      const abi::ElementType element = l.spec->args[i].element;
      const Element want = element == abi::ElementType::kI32   ? Element::kI32
                           : element == abi::ElementType::kAct ? Element::kActivation
                                                               : Element::kF32;
      std::optional<Element> &have = seen[arg.index];
      if (have && *have != want)
        return entry.emitOpError("internal error: buffer '")
               << buffers[arg.index].name << "' is passed to " << l.spec->op << " ("
               << l.source << ") as another element type than to an earlier launch";
      have = want;
    }
  }
  for (auto [buffer, element] : llvm::zip(buffers, seen))
    if (element)
      buffer.element = *element;
  return success();
}

/// Every buffer's bytes (max_tokens rows) in int64 without overflow, and far below what any
/// device holds (2^40 bytes). spark-plan-arena places them.
LogicalResult Lowering::checkBufferSizes() {
  for (const LogicalBuffer &buffer : buffers) {
    int64_t bytes = buffer.elementBytes(bf16Activations) * maxTokens;
    for (int64_t d : buffer.rowShape)
      if (d < 0 || llvm::MulOverflow(bytes, d, bytes) || bytes > (int64_t{1} << 40))
        return entry.emitOpError("needs a buffer '")
               << buffer.name << "' of more than 2^40 bytes (" << maxTokens
               << " tokens x row " << formatShape(buffer.rowShape) << ")";
  }
  return success();
}

DictionaryAttr argAttr(Builder &b, const Arg &arg) {
  auto entry = [&](StringRef key, Attribute value) {
    return b.getDictionaryAttr(b.getNamedAttr(key, value));
  };
  switch (arg.kind) {
  case Arg::Buffer: return entry("buffer", b.getI64IntegerAttr(arg.index));
  case Arg::Weight: return entry("weight", b.getI64IntegerAttr(arg.index));
  case Arg::KCache: return entry("k_cache", b.getI64IntegerAttr(arg.index));
  case Arg::VCache: return entry("v_cache", b.getI64IntegerAttr(arg.index));
  case Arg::KvCapacity: return entry("kv_capacity", b.getI64IntegerAttr(arg.index));
  case Arg::Null: return entry("null", b.getI64IntegerAttr(1));
  case Arg::NumTokens: return entry("num_tokens", b.getI64IntegerAttr(1));
  case Arg::NumSoftTokens: return entry("num_soft_tokens", b.getI64IntegerAttr(1));
  case Arg::I32: return entry("i32", b.getI32IntegerAttr(arg.i32));
  case Arg::F32: return entry("f32", b.getF32FloatAttr(arg.f32));
  }
  llvm_unreachable("unknown argument kind");
}

void Lowering::buildProgram() {
  OpBuilder b(ctx);
  b.setInsertionPoint(entry);

  SmallVector<Attribute> bufferAttrs;
  for (const LogicalBuffer &buffer : buffers)
    bufferAttrs.push_back(b.getDictionaryAttr({
        b.getNamedAttr("name", b.getStringAttr(buffer.name)),
        b.getNamedAttr("dtype",
                       b.getStringAttr(buffer.element == LogicalBuffer::Element::kI32 ? "i32"
                                       : buffer.element == LogicalBuffer::Element::kF32 ||
                                               !bf16Activations
                                           ? "f32"
                                           : "bf16")),
        b.getNamedAttr("row_shape", b.getI64ArrayAttr(buffer.rowShape)),
    }));
  SmallVector<Attribute> weightAttrs;
  for (auto &[name, weight] : weights) {
    RankedTensorType type = weight.type;
    // The plan's dtype names are MLIR's builtin type names (runtime element_type.h): bf16, f32,
    // f8E4M3FN, f4E2M1FN (checkWeightTypes admitted no other).
    std::string dtype;
    llvm::raw_string_ostream(dtype) << type.getElementType();
    SmallVector<NamedAttribute> attrs{
        b.getNamedAttr("name", b.getStringAttr(name)),
        b.getNamedAttr("dtype", b.getStringAttr(dtype)),
        b.getNamedAttr("shape", b.getI64ArrayAttr(type.getShape())),
    };
    if (weight.parts) {
      attrs.push_back(b.getNamedAttr("parts", weight.parts));
      attrs.push_back(
          b.getNamedAttr("part_shape", b.getI64ArrayAttr(weight.partShape.asArrayRef())));
    }
    if (weight.reciprocal)
      attrs.push_back(b.getNamedAttr("transform", b.getStringAttr("reciprocal")));
    weightAttrs.push_back(b.getDictionaryAttr(attrs));
  }
  SmallVector<NamedAttribute> inputAttrs;
  for (auto &[name, id] : inputs)
    inputAttrs.push_back(b.getNamedAttr(name, b.getI64IntegerAttr(id)));
  // The model facts (absent in hand-written IR; the plan writer then refuses the module).
  auto model = module->getAttrOfType<ModelAttr>("spark.model");

  auto program = ProgramOp::create(
      b, entry.getLoc(), entry.getSymName(), maxTokens, /*arena_bytes=*/0,
      b.getArrayAttr(bufferAttrs),
      b.getArrayAttr(weightAttrs), b.getDictionaryAttr(inputAttrs),
      b.getDictionaryAttr({b.getNamedAttr("logits", b.getI64IntegerAttr(logits)),
                           b.getNamedAttr("tokens", b.getI64IntegerAttr(sampledTokens))}),
      model,
      /*activation_precision=*/TypeAttr());
  program.getBody().emplaceBlock();
  b.setInsertionPointToStart(&program.getBody().front());
  for (const PendingLaunch &l : launches) {
    SmallVector<Attribute> argList;
    for (const Arg &arg : l.args)
      argList.push_back(argAttr(b, arg));
    ArrayAttr args = b.getArrayAttr(argList);
    // One entry per (op, literal arguments), named after them; spark-outline-kernel-entries
    // builds it.
    const std::string entryName = LaunchOp::entryPointName(l.spec->symbol, args);
    entryNames.insert(entryName);
    auto launchOp = LaunchOp::create(
        b, entry.getLoc(), l.spec->op,
        SymbolRefAttr::get(ctx, "kernels", {FlatSymbolRefAttr::get(ctx, entryName)}),
        l.grid.per_token, l.grid.fixed, l.grid.divisor,
        b.getDenseI32ArrayAttr({l.spec->block_size, 1, 1}), args, l.logitsTail);
    launchOp->setAttr("source", b.getStringAttr(l.source));
  }
}

LogicalResult Lowering::run(int64_t &numLaunches, int64_t &numEntries) {
  if (failed(collectCaches()) || failed(assignBuffers()))
    return failure();
  for (Operation &op : entry.getBody().front())
    if (!fusedAway.contains(&op) && failed(lowerOp(&op)))
      return failure();
  if (logits < 0)
    return entry.emitOpError("expects a func.return of the logits");
  if (failed(appendSampling()))
    return failure();
  markLogitsTail();
  if (failed(assignElementTypes()) || failed(checkBufferSizes()))
    return failure();
  buildProgram();
  entry.erase();
  numLaunches = launches.size();
  numEntries = entryNames.size();
  return success();
}

/// Records the activation precision on the program (bf16 only: absent means f32);
/// spark-outline-kernel-entries defines the kernels' constant from it.
void recordActivationPrecision(ModuleOp module, bool bf16) {
  if (!bf16)
    return;
  for (ProgramOp program : module.getOps<ProgramOp>())
    program.setActivationPrecisionAttr(TypeAttr::get(BFloat16Type::get(module.getContext())));
}

struct SparkLowerToKernelsPass
    : spark::impl::SparkLowerToKernelsPassBase<SparkLowerToKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto entryFunc = module.lookupSymbol<func::FuncOp>(entry);
    if (!entryFunc) {
      module.emitError("no entry function @") << entry << " to lower";
      return signalPassFailure();
    }
    if (maxTokens <= 0 || maxTokens > abi::kMaxStepTokens) {
      module.emitError("max-tokens must be in [1, ")
          << abi::kMaxStepTokens << "], got " << static_cast<int64_t>(maxTokens);
      return signalPassFailure();
    }
    if (entryFunc.isExternal()) {
      entryFunc.emitOpError("expects a body, got a declaration");
      return signalPassFailure();
    }
    if (!entryFunc.getBody().hasOneBlock()) {
      entryFunc.emitOpError("expects a single block");
      return signalPassFailure();
    }
    if (!module.getOps<gpu::GPUModuleOp>().empty()) {
      module.emitError("module already contains a gpu.module: lower an imported model");
      return signalPassFailure();
    }
    if (!kvCacheDType.empty()) {
      // The element type of every KV cache, replacing what the module declares.
      Type element = kvCacheDType == "bf16"  ? Type(BFloat16Type::get(module.getContext()))
                     : kvCacheDType == "f32" ? Type(Float32Type::get(module.getContext()))
                                             : Type();
      if (!element) {
        module.emitError("kv-cache-dtype must be f32 or bf16, got '") << kvCacheDType << "'";
        return signalPassFailure();
      }
      for (KvCacheOp cache : module.getOps<KvCacheOp>())
        cache.setElementType(element);
    }
    if (activationPrecision != "f32" && activationPrecision != "bf16") {
      module.emitError("activation-precision must be f32 or bf16, got '")
          << activationPrecision << "'";
      return signalPassFailure();
    }
    int64_t launches = 0, entries = 0;
    Lowering lowering(module, entryFunc, maxTokens, activationPrecision == "bf16");
    if (failed(lowering.run(launches, entries)))
      return signalPassFailure();
    recordActivationPrecision(module, activationPrecision == "bf16");
    numLaunches = launches;
    numEntries = entries;
  }
};

} // namespace
