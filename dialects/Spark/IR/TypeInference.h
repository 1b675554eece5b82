//===- TypeInference.h - shape rules of the spark ops ----------------*- C++ -*-===//
//
// Shape and type rules as free functions, called by the op verifiers (the StableHLO layout), so
// the rules are readable in one place and testable on their own.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_DIALECTS_SPARK_IR_TYPEINFERENCE_H
#define SPARK_DIALECTS_SPARK_IR_TYPEINFERENCE_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LLVM.h"

#include <optional>

namespace spark {

/// An emitter of errors on the op being verified.
using ErrorEmitter = llvm::function_ref<mlir::InFlightDiagnostic()>;

/// Prints a shape as `[?, 8, 256]`.
std::string formatShape(llvm::ArrayRef<int64_t> shape);

/// Checks that `type` has `rank` dimensions, a dynamic or any leading token dimension, and static
/// trailing dimensions. `what` names the operand in messages.
mlir::LogicalResult verifyActivation(mlir::RankedTensorType type, int64_t rank,
                                     llvm::StringRef what, ErrorEmitter emitError);

/// Checks that `type` has a leading token dimension (rank >= 1) and static trailing
/// dimensions, for ops that work on any row shape.
mlir::LogicalResult verifyRows(mlir::RankedTensorType type, llvm::StringRef what,
                               ErrorEmitter emitError);

/// Checks that two activations have the same token dimension (both dynamic, or equal).
mlir::LogicalResult verifySameTokens(mlir::RankedTensorType a, mlir::RankedTensorType b,
                                     llvm::StringRef whatA, llvm::StringRef whatB,
                                     ErrorEmitter emitError);

/// Checks that `type` has exactly `expected` as its shape (weights: static).
mlir::LogicalResult verifyShape(mlir::RankedTensorType type,
                                llvm::ArrayRef<int64_t> expected, llvm::StringRef what,
                                ErrorEmitter emitError);

/// Shape of `input @ weight^T`: [T, in] x [out, in] -> [T, out].
mlir::FailureOr<llvm::SmallVector<int64_t>>
inferLinearShape(mlir::RankedTensorType input, mlir::RankedTensorType weight,
                 ErrorEmitter emitError);

/// Number of elements of the static trailing dimensions (all but the first).
int64_t rowElements(mlir::RankedTensorType type);

} // namespace spark

#endif // SPARK_DIALECTS_SPARK_IR_TYPEINFERENCE_H
