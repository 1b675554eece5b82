//===- SparkDialect.h - the spark dialect ---------------------------*- C++ -*-===//
#ifndef SPARK_DIALECTS_SPARK_IR_SPARKDIALECT_H
#define SPARK_DIALECTS_SPARK_IR_SPARKDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/Spark/IR/SparkDialect.h.inc"

#endif // SPARK_DIALECTS_SPARK_IR_SPARKDIALECT_H
