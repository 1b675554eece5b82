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

// What a launch argument is (plan.h ArgRefKind; the plan's JSON dump spells them alike).
def Spark_LaunchArgKind : I32EnumAttr<"LaunchArgKind", "kind of a launch argument", [
    I32EnumAttrCase<"buffer", 0>, I32EnumAttrCase<"weight", 1>,
    I32EnumAttrCase<"k_cache", 2>, I32EnumAttrCase<"v_cache", 3>,
    I32EnumAttrCase<"kv_capacity", 4>, I32EnumAttrCase<"null", 5>,
    I32EnumAttrCase<"num_tokens", 6>, I32EnumAttrCase<"num_soft_tokens", 7>,
    I32EnumAttrCase<"i32", 8>, I32EnumAttrCase<"f32", 9>,
    I32EnumAttrCase<"kv_block_table", 10>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::spark";
}

// How the runtime turns a checkpoint tensor into the weight a kernel reads (plan.h
// WeightTransform).
def Spark_WeightTransform : I32EnumAttr<"WeightTransform", "transform of a weight at load", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"reciprocal", 1>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::spark";
}

#endif // SPARK_ENUMS_TD
