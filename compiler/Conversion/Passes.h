//===- Passes.h - Spark's conversions ---------------------------------*- C++ -*-===//
#ifndef SPARK_COMPILER_CONVERSION_PASSES_H
#define SPARK_COMPILER_CONVERSION_PASSES_H

#include "dialects/Spark/IR/SparkOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "spark/runtime/kernel_abi.h"

namespace spark {

#define GEN_PASS_DECL
#include "compiler/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Conversion/Passes.h.inc"

} // namespace spark

#endif // SPARK_COMPILER_CONVERSION_PASSES_H
