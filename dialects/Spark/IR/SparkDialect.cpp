//===- SparkDialect.cpp - the spark dialect --------------------------------===//
#include "dialects/Spark/IR/SparkDialect.h"

#include "dialects/Spark/IR/SparkOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace spark;

#include "dialects/Spark/IR/SparkDialect.cpp.inc"
#include "dialects/Spark/IR/SparkEnums.cpp.inc"

namespace spark {
FailureOr<SmallVector<int64_t>> parseIdList(AsmParser &parser) {
  SmallVector<int64_t> ids;
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
        int64_t id;
        if (parser.parseInteger(id))
          return failure();
        ids.push_back(id);
        return success();
      }))
    return failure();
  return ids;
}

void printIdList(AsmPrinter &printer, ArrayRef<int64_t> ids) {
  printer << '[';
  llvm::interleaveComma(ids, printer);
  printer << ']';
}
} // namespace spark

#define GET_ATTRDEF_CLASSES
#include "dialects/Spark/IR/SparkAttrs.cpp.inc"

void SparkDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Spark/IR/SparkOps.cpp.inc"
      >();
  registerAttributes();
}

LogicalResult SparkDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  // spark.ranks: the module was split over that many ranks (spark-shard-tensor-parallel).
  if (attr.getName() == "spark.ranks") {
    auto ranks = dyn_cast<IntegerAttr>(attr.getValue());
    if (!ranks || ranks.getInt() < 2 || ranks.getInt() > 64)
      return op->emitError("expects spark.ranks to be an integer in [2, 64], got ")
             << attr.getValue();
    return success();
  }
  if (attr.getName() != "spark.model")
    return op->emitError("unknown spark dialect attribute '") << attr.getName() << "'";
  if (!isa<ModelAttr>(attr.getValue()))
    return op->emitError("expects spark.model to be a #spark.model<...>, got ") << attr.getValue();
  return success();
}

LogicalResult ModelAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringRef variant,
                                StringRef architecture, int64_t vocabSize, int64_t hiddenSize,
                                int64_t numLayers, int64_t maxPositionEmbeddings,
                                ArrayRef<int64_t> eosTokenIds, int64_t bosTokenId,
                                int64_t padTokenId, ArrayRef<int64_t> softTokenIds,
                                StringRef weightPrefix, bool bidirectionalVision,
                                int64_t imageTokenId, int64_t boiTokenId, int64_t eoiTokenId) {
  const std::pair<StringRef, int64_t> sizes[] = {{"vocab_size", vocabSize},
                                                 {"hidden_size", hiddenSize},
                                                 {"num_layers", numLayers},
                                                 {"max_position_embeddings", maxPositionEmbeddings}};
  for (auto [name, value] : sizes)
    if (value <= 0)
      return emitError() << "#spark.model " << name << " must be positive, got " << value;
  if (variant.empty())
    return emitError() << "#spark.model needs a variant name";
  if (eosTokenIds.empty())
    return emitError() << "#spark.model needs at least one eos_token_ids entry";
  auto inVocab = [&](StringRef name, int64_t id) -> LogicalResult {
    if (id >= 0 && id < vocabSize)
      return success();
    return emitError() << "#spark.model " << name << " holds " << id
                       << ", outside the vocabulary [0, " << vocabSize << ")";
  };
  for (int64_t id : eosTokenIds)
    if (failed(inVocab("eos_token_ids", id)))
      return failure();
  for (int64_t id : softTokenIds)
    if (failed(inVocab("soft_token_ids", id)))
      return failure();
  if (failed(inVocab("bos_token_id", bosTokenId)) || failed(inVocab("pad_token_id", padTokenId)))
    return failure();
  for (auto [name, id] : {std::pair<StringRef, int64_t>{"image_token_id", imageTokenId},
                          {"boi_token_id", boiTokenId},
                          {"eoi_token_id", eoiTokenId}})
    if (id != -1 && failed(inVocab(name, id)))
      return failure();
  return success();
}

namespace {
bool isBufferType(Type type) { return type.isF32() || type.isBF16() || type.isSignlessInteger(32); }
bool isWeightType(Type type) {
  return type.isBF16() || type.isF32() || isa<Float8E4M3FNType, Float4E2M1FNType>(type);
}
LogicalResult verifyDims(function_ref<InFlightDiagnostic()> emitError, StringRef what,
                         StringRef name, StringRef field, ArrayRef<int64_t> dims) {
  for (int64_t d : dims)
    if (d < 0)
      return emitError() << what << " '" << name << "' has a negative " << field
                         << " dimension: " << d;
  return success();
}
} // namespace

LogicalResult BufferAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringRef name,
                                 Type dtype, ArrayRef<int64_t> rowShape,
                                 std::optional<int64_t> offset) {
  if (!isBufferType(dtype))
    return emitError() << "#spark.buffer '" << name << "' has dtype " << dtype
                       << "; arena buffers hold f32, bf16 or i32";
  if (offset && *offset < 0)
    return emitError() << "#spark.buffer '" << name << "' has a negative offset: " << *offset;
  return verifyDims(emitError, "#spark.buffer", name, "row_shape", rowShape);
}

LogicalResult ShardAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t axis,
                                int64_t parts, int64_t chunks) {
  if (axis < 0 || parts < 2 || chunks < 1)
    return emitError() << "#spark.shard expects axis >= 0, parts >= 2 and chunks >= 1, got axis "
                       << axis << ", parts " << parts << ", chunks " << chunks;
  return success();
}

LogicalResult WeightAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringRef name,
                                 Type dtype, ArrayRef<int64_t> shape, ArrayAttr parts,
                                 ArrayRef<int64_t> partShape, WeightTransform transform,
                                 ShardAttr shard) {
  if (name.empty())
    return emitError() << "#spark.weight needs a checkpoint tensor name";
  if (!isWeightType(dtype))
    return emitError() << "#spark.weight '" << name << "' has dtype " << dtype
                       << "; weights are bf16, f32, f8E4M3FN or f4E2M1FN";
  if (failed(verifyDims(emitError, "#spark.weight", name, "shape", shape)) ||
      failed(verifyDims(emitError, "#spark.weight", name, "part_shape", partShape)))
    return failure();
  if (!parts && !partShape.empty())
    return emitError() << "#spark.weight '" << name << "' has a part_shape but no parts";
  if (parts)
    for (Attribute part : parts)
      if (auto partName = dyn_cast<StringAttr>(part); !partName || partName.empty())
        return emitError() << "#spark.weight '" << name
                           << "' parts must be checkpoint tensor names, got " << part;
  if (shard && shard.getAxis() >= static_cast<int64_t>(shape.size()))
    return emitError() << "#spark.weight '" << name << "' has shard axis " << shard.getAxis()
                       << " but rank " << shape.size();
  return success();
}

FailureOr<LaunchArgAttr> LaunchArgAttr::parseBody(AsmParser &parser) {
  MLIRContext *ctx = parser.getContext();
  SMLoc loc = parser.getCurrentLocation();
  static constexpr StringLiteral kKinds =
      "(buffer, weight, k_cache, v_cache, kv_capacity, kv_block_table, null, num_tokens, "
      "num_soft_tokens, i32, f32)";
  StringRef keyword;
  if (parser.parseOptionalKeyword(&keyword))
    return parser.emitError(loc, "expected a launch argument kind ") << kKinds;
  std::optional<LaunchArgKind> kind = symbolizeLaunchArgKind(keyword);
  if (!kind)
    return parser.emitError(loc, "unknown launch argument kind '") << keyword << "' " << kKinds;
  auto emitError = [&] { return parser.emitError(loc); };
  switch (*kind) {
  case LaunchArgKind::null:
  case LaunchArgKind::num_tokens:
  case LaunchArgKind::num_soft_tokens:
    return getChecked(emitError, ctx, *kind, 0, llvm::APFloat(0.0f));
  case LaunchArgKind::f32: {
    llvm::APFloat value(0.0f);
    if (parser.parseFloat(llvm::APFloat::IEEEsingle(), value))
      return failure();
    return getChecked(emitError, ctx, *kind, 0, value);
  }
  default: {
    int64_t value;
    if (parser.parseInteger(value))
      return failure();
    return getChecked(emitError, ctx, *kind, value, llvm::APFloat(0.0f));
  }
  }
}

void LaunchArgAttr::printBody(AsmPrinter &printer) const {
  printer << stringifyLaunchArgKind(getKind());
  switch (getKind()) {
  case LaunchArgKind::null:
  case LaunchArgKind::num_tokens:
  case LaunchArgKind::num_soft_tokens:
    return;
  case LaunchArgKind::f32:
    printer << ' ';
    printer.printFloat(getF32());
    return;
  default:
    printer << ' ' << getValue();
  }
}

Attribute LaunchArgAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  FailureOr<LaunchArgAttr> arg = parseBody(parser);
  if (failed(arg) || !*arg || parser.parseGreater())
    return {};
  return *arg;
}

void LaunchArgAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printBody(printer);
  printer << '>';
}

LogicalResult LaunchArgAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                    LaunchArgKind kind, int64_t value, llvm::APFloat f32) {
  switch (kind) {
  case LaunchArgKind::null:
  case LaunchArgKind::num_tokens:
  case LaunchArgKind::num_soft_tokens:
    if (value != 0)
      return emitError() << "launch argument " << stringifyLaunchArgKind(kind)
                         << " carries no value, got " << value;
    return success();
  case LaunchArgKind::i32:
    if (value < INT32_MIN || value > INT32_MAX)
      return emitError() << "launch argument i32 " << value << " is outside the i32 range";
    return success();
  case LaunchArgKind::f32:
    if (!f32.isFinite())
      return emitError() << "launch argument f32 must be finite";
    return success();
  default:
    if (value < 0)
      return emitError() << "launch argument " << stringifyLaunchArgKind(kind)
                         << " needs an id >= 0, got " << value;
    return success();
  }
}

void SparkDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Spark/IR/SparkAttrs.cpp.inc"
      >();
}
