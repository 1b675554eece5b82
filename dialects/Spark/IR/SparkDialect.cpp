//===- SparkDialect.cpp - the spark dialect --------------------------------===//
#include "dialects/Spark/IR/SparkDialect.h"

#include "dialects/Spark/IR/SparkOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace spark;

#include "dialects/Spark/IR/SparkDialect.cpp.inc"
#include "dialects/Spark/IR/SparkEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Spark/IR/SparkAttrs.cpp.inc"

void SparkDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Spark/IR/SparkOps.cpp.inc"
      >();
  registerAttributes();
}

void SparkDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Spark/IR/SparkAttrs.cpp.inc"
      >();
}
