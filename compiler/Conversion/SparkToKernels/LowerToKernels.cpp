//===- LowerToKernels.cpp - lower ops to launches over planned buffers -----===//
//
// The driver of spark-lower-to-kernels: the entry function becomes a spark.program. Every
// tensor value gets a buffer of max-tokens rows (views and in-place results share one), and
// each op becomes spark.launch ops whose arguments follow the op registry
// (runtime/include/spark/runtime/kernel_ops.def), by the lowering its family registers
// (KernelLowering.h; LowerEmbeddings.cpp, LowerElementwise.cpp, LowerNorms.cpp, LowerLinear.cpp,
// LowerAttention.cpp, LowerMoe.cpp). The driver then appends the sample step, marks the logits
// tail, gives every buffer its element type and builds the program. spark-plan-arena
// (PlanArena.cpp) then places the buffers in one arena; each launch names the entry point of its
// (op, literal arguments), which spark-outline-kernel-entries (OutlineKernelEntries.cpp) builds.
//
//===----------------------------------------------------------------------===//
#include "compiler/Conversion/Passes.h"

#include "KernelLowering.h"
#include "dialects/Spark/IR/TypeInference.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"

#include "spark/runtime/kernel_abi.h"

#include <limits>
#include <map>
#include <optional>
#include <set>

namespace spark {
#define GEN_PASS_DEF_SPARKLOWERTOKERNELSPASS
#include "compiler/Conversion/Passes.h.inc"
} // namespace spark

using namespace mlir;
using namespace spark;
using namespace spark::kernel_lowering;

namespace {

using abi::GridRule;

/// The function a multimodal model's vision tower is imported as (ImportGemma.cpp).
constexpr StringLiteral kImageEncoderEntry = "encode_image";

/// A launch before entry points exist.
struct PendingLaunch {
  const abi::OpSpec *spec;
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

/// What a lowered function is: the model's forward step (token ids in, logits and sampled tokens
/// out) or the image encoder (`encode_image`: one image's patches in, its soft-token embeddings
/// out; no sampling, no logits tail).
enum class EntryKind { kForward, kImageEncoder };

class Lowering final : public KernelLowering {
public:
  Lowering(ModuleOp module, func::FuncOp entry, EntryKind kind, int64_t maxTokens,
           bool bf16Activations, bool fp4Activations)
      : module(module), entry(entry), kind(kind), tokens(maxTokens), bf16(bf16Activations),
        fp4(fp4Activations), ctx(module.getContext()) {
    populateEmbeddingLowerings(table);
    populateElementwiseLowerings(table);
    populateNormLowerings(table);
    populateLinearLowerings(table);
    populateAttentionLowerings(table);
    populateMoeLowerings(table);
    populateVisionLowerings(table);
    populateCollectiveLowerings(table);
  }

  LogicalResult run(int64_t &numLaunches, int64_t &numEntries);

  // KernelLowering, for the op being lowered (`current`).
  Arg input(Value value) override;
  Arg result(Value value) override { return Arg::buffer(newBuffer(value, sourceName(current))); }
  void alias(Value value, Value of) override { valueBuffer[value] = bufferOf(of); }
  Arg scratch(StringRef suffix, ArrayRef<int64_t> rowShape) override {
    return Arg::buffer(newScratch(sourceName(current) + "." + suffix.str(), rowShape));
  }
  FailureOr<Arg> weight(Value value) override;
  Arg i32(int64_t value) override;
  Arg sequences() override {
    auto [it, made] = inputs.try_emplace("sequences", -1);
    if (made)
      it->second = newScratch("%sequences", {});
    return Arg::buffer(it->second);
  }
  FailureOr<int64_t> cache(Operation *user, FlatSymbolRefAttr name) override;
  KvCacheOp cacheOp(int64_t id) override { return caches[id]; }
  int64_t maxTokens() const override { return tokens; }
  bool bf16Activations() const override { return bf16; }
  bool fp4Activations() const override { return fp4; }
  Arg nvfp4Rows(Value activation, int64_t cols) override {
    auto [it, made] = fp4Rows.try_emplace(activation, Arg::null());
    if (!made)
      return it->second;
    const int64_t words = abi::Nvfp4RowWords(cols);
    it->second = scratch("nvfp4_rows", {words});
    launch(abi::OpId::kQuantizeNvfp4Rows,
           {input(activation), it->second, Arg::numTokens(), i32(cols), i32(words)}, perToken(1),
           "quantize");
    return it->second;
  }
  void launch(abi::OpId op, SmallVector<Arg> args, GridRule grid,
              StringRef suffix = "") override;
  void fuse(Operation *op) override { fusedAway.insert(op); }

private:
  LogicalResult collectCaches();
  LogicalResult assignBuffers();
  LogicalResult lowerOp(Operation *op);
  LogicalResult lowerReturn(func::ReturnOp r);
  LogicalResult checkWeightTypes(Operation *op, size_t first);
  LogicalResult appendSampling();
  void markLogitsTail();
  LogicalResult assignElementTypes();
  LogicalResult checkBufferSizes();
  void buildProgram();

  int64_t bufferOf(Value value) { return valueBuffer.lookup(value); }
  int64_t newBuffer(Value value, StringRef name);
  int64_t newScratch(StringRef name, ArrayRef<int64_t> rowShape);

  ModuleOp module;
  func::FuncOp entry;
  EntryKind kind;
  int64_t tokens;
  bool bf16;
  bool fp4;
  /// The quantized rows of each activation a W4A4 linear read (nvfp4Rows).
  DenseMap<Value, Arg> fp4Rows;
  MLIRContext *ctx;
  LoweringTable table;
  /// The op being lowered, and what its lowering did wrong (reported after it returns).
  Operation *current = nullptr;
  Value unbuffered;                // an operand read as an activation that has no buffer
  std::optional<int64_t> oversized; // a size that does not fit the kernels' i32
  /// Ops another op's launch already computes (a scalar_mul fused into its norm).
  llvm::DenseSet<Operation *> fusedAway;

  SmallVector<LogicalBuffer> buffers;
  llvm::DenseMap<Value, int64_t> valueBuffer;
  /// A checkpoint tensor the plan reads: its type, weight id and, for a weight stored in pieces,
  /// the parts it is assembled from (spark.weight).
  struct PlanWeight {
    StringRef name;
    RankedTensorType type;
    int64_t id;
    ArrayAttr parts;
    DenseI64ArrayAttr partShape;
    bool reciprocal;
    ShardAttr shard;
  };
  /// By (name, shard): a tensor-parallel module reads two slices of a tied embedding table.
  llvm::MapVector<std::pair<StringRef, Attribute>, PlanWeight> weights;
  llvm::StringMap<int64_t> cacheIds;
  SmallVector<KvCacheOp> caches;
  SmallVector<PendingLaunch> launches;
  std::map<std::string, int64_t> inputs;
  int64_t logits = -1;
  int64_t embeddings = -1;   // the image encoder's result
  int64_t vocab = 0;         // the width of a logits row
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

Arg Lowering::input(Value value) {
  if (!valueBuffer.count(value)) {
    unbuffered = value; // a spark.weight (or other non-activation) read as an activation
    return Arg::null();
  }
  return Arg::buffer(bufferOf(value));
}

Arg Lowering::i32(int64_t value) {
  if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max())
    oversized = value;
  return Arg::i32v(value);
}

FailureOr<Arg> Lowering::weight(Value value) {
  auto weight = value.getDefiningOp<WeightOp>();
  if (!weight) {
    int64_t index = llvm::find(current->getOperands(), value) - current->operand_begin();
    return current->emitOpError("expects operand #") << index << " to be a spark.weight result";
  }
  auto [it, inserted] = weights.try_emplace(
      std::make_pair(weight.getName(), Attribute(weight.getShardAttr())),
      PlanWeight{weight.getName(), weight.getType(), static_cast<int64_t>(weights.size()),
                 weight.getPartsAttr(), weight.getPartShapeAttr(), weight.getReciprocal(),
                 weight.getShardAttr()});
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
  return Arg::weight(it->second.id);
}

FailureOr<int64_t> Lowering::cache(Operation *user, FlatSymbolRefAttr name) {
  auto it = cacheIds.find(name.getValue());
  if (it == cacheIds.end())
    return user->emitOpError("references unknown KV cache ") << name;
  return it->second;
}

void Lowering::launch(abi::OpId kernelOp, SmallVector<Arg> args, GridRule grid,
                      StringRef suffix) {
  const abi::OpSpec *spec = &abi::Spec(kernelOp);
  // The lowering below must pass each op's registry arguments (kernel_ops.def), in order and of
  // their kinds; ValidatePlan re-checks everything when the plan is written.
  assert(spec->num_args == static_cast<int>(args.size()) && "launch does not match the registry");
  std::string source = sourceName(current);
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

/// The image encoder's arguments: the pixel patches ([T, 768] f32) and their (x, y) positions
/// ([T, 2] i32).
LogicalResult assignEncoderInputs(func::FuncOp entry,
                                  llvm::function_ref<int64_t(BlockArgument, StringRef)> make,
                                  std::map<std::string, int64_t> &inputs) {
  for (BlockArgument arg : entry.getArguments()) {
    auto name = entry.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "spark.input");
    if (!name || (name.getValue() != "pixel_patches" && name.getValue() != "patch_positions"))
      return entry.emitOpError("expects every argument of the image encoder to carry "
                               "spark.input = \"pixel_patches\" or \"patch_positions\"; "
                               "argument ")
             << arg.getArgNumber() << " does not";
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    const bool pixels = name.getValue() == "pixel_patches";
    const bool ok = type && type.getRank() == 2 && !type.isDynamicDim(1) &&
                    (pixels ? type.getElementType().isF32()
                            : type.getElementType().isInteger(32) && type.getDimSize(1) == 2);
    if (!ok)
      return entry.emitOpError("expects argument ")
             << arg.getArgNumber() << " (\"" << name.getValue() << "\") of type "
             << (pixels ? "tensor<?xNxf32>" : "tensor<?x2xi32>") << ", got " << arg.getType();
    if (inputs.count(name.getValue().str()))
      return entry.emitOpError("expects one argument per spark.input, got \"")
             << name.getValue() << "\" twice";
    inputs[name.getValue().str()] = make(arg, name.getValue());
  }
  if (!inputs.count("pixel_patches") || !inputs.count("patch_positions"))
    return entry.emitOpError("expects \"pixel_patches\" and \"patch_positions\" arguments");
  return success();
}

LogicalResult Lowering::assignBuffers() {
  if (kind == EntryKind::kImageEncoder)
    return assignEncoderInputs(
        entry,
        [&](BlockArgument arg, StringRef name) { return newBuffer(arg, ("%" + name).str()); },
        inputs);
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

LogicalResult Lowering::lowerReturn(func::ReturnOp r) {
  if (kind == EntryKind::kImageEncoder) {
    if (r.getNumOperands() != 1 || !valueBuffer.count(r.getOperand(0)))
      return r.emitOpError("expects the image encoder to return exactly its embeddings, an "
                           "activation it computes");
    embeddings = bufferOf(r.getOperand(0));
    return success();
  }
  if (r.getNumOperands() != 1)
    return r.emitOpError("expects the entry to return exactly the logits");
  if (!valueBuffer.count(r.getOperand(0)))
    return r.emitOpError("expects the logits to be an activation computed by the entry");
  logits = bufferOf(r.getOperand(0));
  vocab = rowElements(cast<RankedTensorType>(r.getOperand(0).getType()));
  return success();
}

LogicalResult Lowering::lowerOp(Operation *op) {
  if (isa<WeightOp>(op))
    return success(); // read where the launches name it
  if (auto r = dyn_cast<func::ReturnOp>(op))
    return lowerReturn(r);
  const LoweringTable::Lowering *lower = table.find(op);
  if (!lower)
    return op->emitOpError("cannot be lowered to a kernel: no kernel implements it");
  const size_t firstLaunch = launches.size();
  current = op;
  unbuffered = Value();
  oversized.reset();
  if (failed((*lower)(op, *this)))
    return failure();
  if (oversized)
    return op->emitOpError("has a size of ")
           << *oversized << ", which does not fit the kernels' 32-bit size arguments";
  if (unbuffered)
    return op->emitOpError("expects operand #")
           << llvm::find(op->getOperands(), unbuffered) - op->operand_begin()
           << " to be an activation, got a value without a buffer (a spark.weight?)";
  return checkWeightTypes(op, firstLaunch);
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
      for (auto &[key, weight] : weights) {
        if (weight.id != arg.index)
          continue;
        if (!matches(want, weight.type.getElementType()))
          return op->emitOpError("expects weight '")
                 << weight.name << "' in " << typeName(want) << " (the " << launches[l].spec->op
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
  launches.push_back({&abi::Spec(abi::OpId::kSample),
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
  // Readers of each buffer, by launch index (an argument updated in place is read too).
  llvm::DenseMap<int64_t, SmallVector<size_t>> readers;
  for (auto [l, launch] : llvm::enumerate(launches))
    for (auto [i, arg] : llvm::enumerate(launch.args))
      if (arg.kind == Arg::Buffer && (!abi::IsWrittenRole(launch.spec->args[i].role) ||
                                      launch.spec->args[i].role == abi::Role::kInOut))
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
    int64_t bytes = buffer.elementBytes(bf16) * tokens;
    for (int64_t d : buffer.rowShape)
      if (d < 0 || llvm::MulOverflow(bytes, d, bytes) || bytes > (int64_t{1} << 40))
        return entry.emitOpError("needs a buffer '")
               << buffer.name << "' of more than 2^40 bytes (" << tokens
               << " tokens x row " << formatShape(buffer.rowShape) << ")";
  }
  return success();
}

LaunchArgAttr argAttr(MLIRContext *ctx, const Arg &arg) {
  switch (arg.kind) {
  case Arg::Buffer: return LaunchArgAttr::get(ctx, LaunchArgKind::buffer, arg.index);
  case Arg::Weight: return LaunchArgAttr::get(ctx, LaunchArgKind::weight, arg.index);
  case Arg::KCache: return LaunchArgAttr::get(ctx, LaunchArgKind::k_cache, arg.index);
  case Arg::VCache: return LaunchArgAttr::get(ctx, LaunchArgKind::v_cache, arg.index);
  case Arg::KvCapacity: return LaunchArgAttr::get(ctx, LaunchArgKind::kv_capacity, arg.index);
  case Arg::KvBlockTable:
    return LaunchArgAttr::get(ctx, LaunchArgKind::kv_block_table, arg.index);
  case Arg::Null: return LaunchArgAttr::get(ctx, LaunchArgKind::null, 0);
  case Arg::NumTokens: return LaunchArgAttr::get(ctx, LaunchArgKind::num_tokens, 0);
  case Arg::NumSoftTokens: return LaunchArgAttr::get(ctx, LaunchArgKind::num_soft_tokens, 0);
  case Arg::I32: return LaunchArgAttr::get(ctx, LaunchArgKind::i32, arg.i32);
  case Arg::F32: return LaunchArgAttr::get(ctx, arg.f32);
  }
  llvm_unreachable("unknown argument kind");
}

void Lowering::buildProgram() {
  OpBuilder b(ctx);
  b.setInsertionPoint(entry);

  SmallVector<Attribute> bufferAttrs;
  for (const LogicalBuffer &buffer : buffers) {
    Type dtype = buffer.element == LogicalBuffer::Element::kI32 ? Type(b.getI32Type())
                 : buffer.element == LogicalBuffer::Element::kF32 || !bf16
                     ? Type(b.getF32Type())
                     : Type(b.getBF16Type());
    bufferAttrs.push_back(
        BufferAttr::get(ctx, buffer.name, dtype, buffer.rowShape, /*offset=*/std::nullopt));
  }
  SmallVector<Attribute> weightAttrs;
  for (auto &[key, weight] : weights)
    weightAttrs.push_back(WeightAttr::get(
        ctx, weight.name, weight.type.getElementType(), weight.type.getShape(), weight.parts,
        weight.parts ? weight.partShape.asArrayRef() : ArrayRef<int64_t>(),
        weight.reciprocal ? WeightTransform::reciprocal : WeightTransform::none, weight.shard));
  auto input = [&](StringRef name) -> int64_t {
    auto it = inputs.find(name.str());
    return it == inputs.end() ? -1 : it->second;
  };
  auto programInputs = ProgramInputsAttr::get(
      ctx, input("ids"), input("positions"), input("soft_embeddings"), input("soft_indices"),
      input("last_visible"), input("sampling"), input("sequences"), input("pixel_patches"),
      input("patch_positions"));
  // The model facts (absent in hand-written IR; the plan writer then refuses the module).
  auto model = module->getAttrOfType<ModelAttr>("spark.model");

  auto program = ProgramOp::create(
      b, entry.getLoc(), entry.getSymName(), tokens, /*arena_bytes=*/0,
      b.getArrayAttr(bufferAttrs),
      b.getArrayAttr(weightAttrs), programInputs,
      ProgramOutputsAttr::get(ctx, logits, sampledTokens, embeddings),
      model,
      /*activation_precision=*/TypeAttr(),
      /*ranks=*/kind == EntryKind::kForward ? module->getAttrOfType<IntegerAttr>("spark.ranks")
                                             : IntegerAttr());
  program.getBody().emplaceBlock();
  b.setInsertionPointToStart(&program.getBody().front());
  for (const PendingLaunch &l : launches) {
    SmallVector<Attribute> argList;
    for (const Arg &arg : l.args)
      argList.push_back(argAttr(ctx, arg));
    ArrayAttr args = b.getArrayAttr(argList);
    if (!l.spec->kernel()) { // a transfer: the runtime moves the data, no entry
      auto transfer = TransferOp::create(b, entry.getLoc(), l.spec->op, args, l.logitsTail);
      transfer->setAttr("source", b.getStringAttr(l.source));
      continue;
    }
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
  if (kind == EntryKind::kForward) {
    if (logits < 0)
      return entry.emitOpError("expects a func.return of the logits");
    if (failed(appendSampling()))
      return failure();
    markLogitsTail();
  } else if (embeddings < 0) {
    return entry.emitOpError("expects a func.return of the embeddings");
  }
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
    Lowering lowering(module, entryFunc, EntryKind::kForward, maxTokens,
                      activationPrecision == "bf16", fp4Activations);
    if (failed(lowering.run(launches, entries)))
      return signalPassFailure();
    // The image encoder (a multimodal model's vision tower), lowered into a program of its own
    // whose tokens are one image's patches.
    if (auto encoder = module.lookupSymbol<func::FuncOp>(kImageEncoderEntry)) {
      if (imageMaxPatches <= 0 || imageMaxPatches > abi::kMaxStepTokens) {
        module.emitError("image-max-patches must be in [1, ")
            << abi::kMaxStepTokens << "], got " << static_cast<int64_t>(imageMaxPatches);
        return signalPassFailure();
      }
      if (encoder.isExternal() || !encoder.getBody().hasOneBlock()) {
        encoder.emitOpError("expects a body of a single block");
        return signalPassFailure();
      }
      int64_t encoderLaunches = 0, encoderEntries = 0;
      Lowering encoderLowering(module, encoder, EntryKind::kImageEncoder, imageMaxPatches,
                               activationPrecision == "bf16", fp4Activations);
      if (failed(encoderLowering.run(encoderLaunches, encoderEntries)))
        return signalPassFailure();
      launches += encoderLaunches;
      entries += encoderEntries;  // an upper bound: the programs may share entries
    }
    recordActivationPrecision(module, activationPrecision == "bf16");
    numLaunches = launches;
    numEntries = entries;
  }
};

} // namespace
