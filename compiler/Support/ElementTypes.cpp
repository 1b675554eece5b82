//===- ElementTypes.cpp - the runtime's element types as MLIR types -------===//

#include "compiler/Support/ElementTypes.h"

#include "mlir/IR/BuiltinTypes.h"

namespace spark {

mlir::Type mlirElementType(rt::DType dtype, mlir::MLIRContext *context) {
  switch (dtype) {
  case rt::DType::kF32:
    return mlir::Float32Type::get(context);
  case rt::DType::kBF16:
    return mlir::BFloat16Type::get(context);
  case rt::DType::kI32:
    return mlir::IntegerType::get(context, 32);
  case rt::DType::kF16:
    return mlir::Float16Type::get(context);
  case rt::DType::kU8:
    return mlir::IntegerType::get(context, 8, mlir::IntegerType::Unsigned);
  case rt::DType::kF8E4M3FN:
    return mlir::Float8E4M3FNType::get(context);
  case rt::DType::kF4E2M1FN:
    return mlir::Float4E2M1FNType::get(context);
  }
  return {};
}

std::optional<rt::DType> runtimeElementType(mlir::Type type) {
  for (rt::DType dtype : rt::kAllDTypes)
    if (mlirElementType(dtype, type.getContext()) == type)
      return dtype;
  return std::nullopt;
}

} // namespace spark
