//===- TypeInference.cpp - shape rules of the spark ops --------------------===//
#include "dialects/Spark/IR/TypeInference.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace spark {

std::string formatShape(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleaveComma(shape, os, [&](int64_t dim) {
    if (ShapedType::isDynamic(dim))
      os << "?";
    else
      os << dim;
  });
  os << "]";
  return text;
}

LogicalResult verifyActivation(RankedTensorType type, int64_t rank, StringRef what,
                               ErrorEmitter emitError) {
  if (type.getRank() != rank)
    return emitError() << "expects " << what << " of rank " << rank << ", got "
                       << formatShape(type.getShape());
  for (int64_t dim : type.getShape().drop_front())
    if (ShapedType::isDynamic(dim))
      return emitError() << "expects " << what
                         << " to have static dimensions after the token dimension, got "
                         << formatShape(type.getShape());
  return success();
}

LogicalResult verifyRows(RankedTensorType type, StringRef what, ErrorEmitter emitError) {
  if (type.getRank() == 0)
    return emitError() << "expects " << what << " to have a leading token dimension, got []";
  return verifyActivation(type, type.getRank(), what, emitError);
}

LogicalResult verifySameTokens(RankedTensorType a, RankedTensorType b, StringRef whatA,
                               StringRef whatB, ErrorEmitter emitError) {
  if (a.getRank() == 0 || b.getRank() == 0)
    return success();
  int64_t ta = a.getDimSize(0), tb = b.getDimSize(0);
  if (ta != tb)
    return emitError() << "expects " << whatA << " and " << whatB
                       << " to have the same token dimension, got "
                       << formatShape(a.getShape()) << " and " << formatShape(b.getShape());
  return success();
}

LogicalResult verifyShape(RankedTensorType type, ArrayRef<int64_t> expected, StringRef what,
                          ErrorEmitter emitError) {
  if (type.getShape() != expected)
    return emitError() << "expects " << what << " of shape " << formatShape(expected)
                       << ", got " << formatShape(type.getShape());
  return success();
}

FailureOr<SmallVector<int64_t>> inferLinearShape(RankedTensorType input,
                                                 RankedTensorType weight,
                                                 ErrorEmitter emitError) {
  if (failed(verifyActivation(input, 2, "input", emitError)))
    return failure();
  if (weight.getRank() != 2 || !weight.hasStaticShape())
    return emitError() << "expects a static weight of rank 2 ([out, in]), got "
                       << formatShape(weight.getShape());
  if (weight.getDimSize(1) != input.getDimSize(1))
    return emitError() << "expects weight [out, in] with in = " << input.getDimSize(1)
                       << " (the input's last dimension), got weight "
                       << formatShape(weight.getShape());
  return SmallVector<int64_t>{input.getDimSize(0), weight.getDimSize(0)};
}

int64_t rowElements(RankedTensorType type) {
  int64_t n = 1;
  for (int64_t dim : type.getShape().drop_front())
    n *= dim;
  return n;
}

} // namespace spark
