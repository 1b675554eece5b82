//===- ElementTypes.h - the runtime's element types as MLIR types ---------===//
//
// The runtime owns the vocabulary of element types (spark/runtime/element_type.h); these two
// functions are its one mapping to MLIR's builtin types, used wherever the compiler turns IR into
// plan data or plan data into IR. Names agree by construction: rt::DTypeName is the MLIR name.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_COMPILER_SUPPORT_ELEMENTTYPES_H
#define SPARK_COMPILER_SUPPORT_ELEMENTTYPES_H

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Types.h"
#include "spark/runtime/element_type.h"

#include <optional>

namespace spark {

/// The runtime type of an MLIR element type, or nullopt for a type Spark has none for.
std::optional<rt::DType> runtimeElementType(mlir::Type type);

/// The MLIR element type of a runtime type.
mlir::Type mlirElementType(rt::DType dtype, mlir::MLIRContext *context);

} // namespace spark

#endif // SPARK_COMPILER_SUPPORT_ELEMENTTYPES_H
