//===- SparkDialect.td - the spark dialect ---------------------*- tablegen -*-===//
#ifndef SPARK_DIALECT_TD
#define SPARK_DIALECT_TD

include "mlir/IR/OpBase.td"

def Spark_Dialect : Dialect {
  let name = "spark";
  let cppNamespace = "::spark";
  let summary = "The Gemma 4 model graph, at tensor level and at kernel level";
  let description = [{
    Tensor-level ops express the Gemma 4 text decoder exactly as
    `gemma4-architecture.md` describes it: weights by checkpoint name, embeddings (with the
    per-layer-embedding tables of the E models), RMSNorm, linear layers, RoPE, grouped-query
    attention over explicit KV caches, the MoE router and experts, and the scatter that merges
    image/audio soft tokens. Activations carry a dynamic leading token dimension, so one entry
    function serves prefill and decode.

    Kernel-level ops (`spark.program`, `spark.launch`) are what the compiler lowers the graph to:
    a launch sequence over a planned activation arena, serialised into the `.spark.plan` section.
  }];
  let useDefaultAttributePrinterParser = 1;
  // `spark.model` on a module must be a #spark.model.
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
}

class Spark_Op<string mnemonic, list<Trait> traits = []>
    : Op<Spark_Dialect, mnemonic, traits>;

#endif // SPARK_DIALECT_TD
