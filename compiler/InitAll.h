//===- InitAll.h - the only registration entry point ----------------*- C++ -*-===//
#ifndef SPARK_COMPILER_INITALL_H
#define SPARK_COMPILER_INITALL_H

#include "mlir/IR/DialectRegistry.h"

namespace spark {

/// Our dialect and the upstream dialects the pipeline parses or creates, with the interfaces and
/// LLVM IR translations gpu-module-to-binary needs.
void registerAllDialects(mlir::DialectRegistry &registry);

/// Spark's passes, the upstream passes the compile pipeline uses, and the named pipelines.
void registerAllPasses();

} // namespace spark

#endif // SPARK_COMPILER_INITALL_H
