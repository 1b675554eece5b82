//===- SparkOps.h - spark dialect ops --------------------------------*- C++ -*-===//
#ifndef SPARK_DIALECTS_SPARK_IR_SPARKOPS_H
#define SPARK_DIALECTS_SPARK_IR_SPARKOPS_H

#include "dialects/Spark/IR/SparkDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/Spark/IR/SparkEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Spark/IR/SparkAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/Spark/IR/SparkOps.h.inc"

#endif // SPARK_DIALECTS_SPARK_IR_SPARKOPS_H
