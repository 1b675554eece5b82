//===- SparkEnums.td - spark dialect enums ---------------------*- tablegen -*-===//
#ifndef SPARK_ENUMS_TD
#define SPARK_ENUMS_TD

include "mlir/IR/EnumAttr.td"
include "dialects/Spark/IR/SparkDialect.td"

def Spark_KvKind_Full : I32EnumAttrCase<"full", 0>;
def Spark_KvKind_Sliding : I32EnumAttrCase<"sliding", 1>;
def Spark_KvKind : I32EnumAttr<"KvKind", "kind of a KV cache",
    [Spark_KvKind_Full, Spark_KvKind_Sliding]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::spark";
}
def Spark_KvKindAttr : EnumAttr<Spark_Dialect, Spark_KvKind, "kv_kind">;

#endif // SPARK_ENUMS_TD
