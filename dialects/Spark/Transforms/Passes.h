//===- Passes.h - spark dialect passes --------------------------------*- C++ -*-===//
#ifndef SPARK_DIALECTS_SPARK_TRANSFORMS_PASSES_H
#define SPARK_DIALECTS_SPARK_TRANSFORMS_PASSES_H

#include "dialects/Spark/IR/SparkOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace spark {

#define GEN_PASS_DECL
#include "dialects/Spark/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialects/Spark/Transforms/Passes.h.inc"

} // namespace spark

#endif // SPARK_DIALECTS_SPARK_TRANSFORMS_PASSES_H
