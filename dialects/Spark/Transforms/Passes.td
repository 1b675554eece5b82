//===- Passes.td - spark dialect passes ------------------------*- tablegen -*-===//
#ifndef SPARK_TRANSFORMS_PASSES_TD
#define SPARK_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def SparkFuseElementwisePass : Pass<"spark-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "fuses obvious elementwise chains (gelu(gate) * up -> spark.gelu_mul)";
  let description = [{
    Rewrites `spark.mul(spark.gelu(%gate), %up)` (either operand order) into
    `spark.gelu_mul %gate, %up` when the gelu has no other use, so the MLP's gate costs one
    kernel and no intermediate buffer.
  }];
  let dependentDialects = ["::spark::SparkDialect"];
  let statistics = [
    Statistic<"numFused", "num-fused", "Number of gelu/mul pairs fused">
  ];
}

def SparkFuseNormsPass : Pass<"spark-fuse-norms", "mlir::func::FuncOp"> {
  let summary = "fuses RMSNorm with what follows it (residual add, RoPE)";
  let description = [{
    Two rewrites, each when the `spark.rms_norm` has no other use:
    - `spark.add(%residual, spark.rms_norm(%x, %w))` (either operand order) ->
      `spark.residual_rms_norm %x, %residual, %w`: Gemma 4's post-attention and post-feedforward
      norms and the residual add after them;
    - `spark.rope(spark.rms_norm(%x, %w), %pos)` -> `spark.rms_norm_rope %x, %pos, %w`: the q and
      k norms and RoPE.
    Each fusion saves one kernel launch and one intermediate buffer per use (four per decoder
    layer of a Gemma 4 model, two in a KV-shared layer).
  }];
  let dependentDialects = ["::spark::SparkDialect"];
  let statistics = [
    Statistic<"numResidualFused", "num-residual-fused", "Number of norm + residual add pairs fused">,
    Statistic<"numRopeFused", "num-rope-fused", "Number of norm + RoPE pairs fused">
  ];
}

#endif // SPARK_TRANSFORMS_PASSES_TD
