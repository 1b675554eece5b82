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

def SparkLowerToKernelsPass : Pass<"spark-lower-to-kernels", "mlir::ModuleOp"> {
  let summary = "plans the activation arena and lowers each op to a kernel launch";
  let description = [{
    Turns the entry function `@forward` into a `spark.program`: every tensor value gets a buffer
    of `max-tokens` rows in one arena, offsets are reused between buffers whose lifetimes do not
    overlap (first fit, in op order), reshapes are views, and every op becomes one or more
    `spark.launch` ops whose arguments follow the kernel ABI (runtime/include/spark/runtime/
    kernel_abi.h). Launch entry points are generated in `gpu.module @kernels`, one per distinct
    (op, literal arguments) pair, so layers of the same shape share their kernels.
  }];
  let dependentDialects = ["::spark::SparkDialect", "::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect"];
  let options = [
    Option<"maxTokens", "max-tokens", "int64_t", /*default=*/"64",
           "Rows of every activation buffer: the most tokens one step (a prefill chunk) processes">,
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "Name of the entry function to lower">
  ];
  let statistics = [
    Statistic<"numLaunches", "num-launches", "Number of kernel launches in the plan">,
    Statistic<"numEntries", "num-entries", "Number of distinct kernel entry points">
  ];
}

#endif // SPARK_TRANSFORMS_PASSES_TD
