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
                                StringRef weightPrefix, bool bidirectionalVision) {
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
  return success();
}

void SparkDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Spark/IR/SparkAttrs.cpp.inc"
      >();
}
