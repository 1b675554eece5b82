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

def SparkShardTensorParallelPass : Pass<"spark-shard-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "splits the text model over N ranks, Megatron-style (tensor parallelism)";
  let description = [{
    Rewrites `@forward` into the program of one of `ranks` ranks, the same for every rank (each
    reads its own slices of the weights: `#spark.shard`), with collectives where the ranks'
    partial results meet (docs/multi-gpu.md):
    - attention by KV-head groups: q/k/v projections column-parallel (a rank's query heads and
      the KV heads they read; with fewer KV heads than ranks, each KV head on ranks / kv_heads
      ranks), its KV caches holding its KV heads, o_proj row-parallel + `spark.all_reduce`;
    - the dense MLP: gate/up column-parallel, down row-parallel + `spark.all_reduce`;
    - the MoE experts by their intermediate dimension (every rank every expert's slice, the
      router replicated) + `spark.all_reduce`;
    - the token embedding by columns (+ `spark.all_gather`), the LM head by vocabulary rows
      (+ `spark.all_gather` of the logits, so every rank samples the same token);
    - everything else (norms, the router, the per-layer embeddings of the E models, the vision
      tower `@encode_image`) replicated.
    A dimension the ranks do not divide is an error naming the layer and the sizes.
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", "2", "the number of ranks (2 to 64)">
  ];
  let dependentDialects = ["::spark::SparkDialect"];
}

#endif // SPARK_TRANSFORMS_PASSES_TD
