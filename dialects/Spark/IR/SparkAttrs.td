//===- SparkAttrs.td - spark dialect attributes ----------------*- tablegen -*-===//
#ifndef SPARK_ATTRS_TD
#define SPARK_ATTRS_TD

include "dialects/Spark/IR/SparkEnums.td"

#endif // SPARK_ATTRS_TD
