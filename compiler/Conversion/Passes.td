//===- Passes.td - Spark's conversions --------------------------*- tablegen -*-===//
//
// The passes that lower the tensor-level spark dialect to kernel-level IR (a spark.program of
// launches over planned buffers) and build its kernel entries; SparkToKernels/ implements them.
// Their flags predate this file and stay as users know them.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_CONVERSION_PASSES_TD
#define SPARK_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def SparkLowerToKernelsPass : Pass<"spark-lower-to-kernels", "mlir::ModuleOp"> {
  let summary = "lowers each op to kernel launches over the program's buffers";
  let description = [{
    Turns the entry function `@forward` into a `spark.program`: every tensor value gets a buffer
    of `max-tokens` rows (reshapes are views, in-place results share their input's buffer), and
    every op becomes one or more `spark.launch` ops whose arguments follow the kernel ABI
    (runtime/include/spark/runtime/kernel_abi.h). The buffers have no offsets yet
    (`spark-plan-arena` places them); each launch names the entry point of its (op, literal
    arguments), which `spark-outline-kernel-entries` builds, so layers of the same shape share
    their kernels. A function `@encode_image` (a multimodal model's vision tower: one image's
    patches in, its soft-token embeddings out) becomes a second `spark.program` of its own, of
    `image-max-patches` rows, with no sampling step.
  }];
  let dependentDialects = ["::spark::SparkDialect"];
  let options = [
    Option<"maxTokens", "max-tokens", "int64_t", /*default=*/"::spark::abi::kDefaultMaxStepTokens",
           "Rows of every activation buffer: the most tokens one step (a prefill chunk) processes">,
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "Name of the entry function to lower">,
    Option<"imageMaxPatches", "image-max-patches", "int64_t", /*default=*/"2520",
           "Rows of every buffer of the image encoder program (a function @encode_image, lowered "
           "when the module has one): the most patches of one image (9 per soft token; 2520 = "
           "the processor's default budget of 280 soft tokens)">,
    Option<"kvCacheDType", "kv-cache-dtype", "std::string", /*default=*/"\"\"",
           "Element type of every KV cache, f32 or bf16 (sets element_type on each "
           "spark.kv_cache; empty: as the module declares, f32 when absent)">,
    Option<"activationPrecision", "activation-precision", "std::string", /*default=*/"\"f32\"",
           "Element type of the activation buffers: f32, or bf16 (bf16 storage, what kernels "
           "store rounded to nearest even; workspaces stay f32; the program records it, the "
           "gpu.module defines the kernels' spark_activation_precision constant)">,
    Option<"fp4Activations", "fp4-activations", "bool", /*default=*/"false",
           "W4A4: linears with NVFP4 weights and an input width that is a multiple of 64 "
           "quantize their activations to NVFP4 per token row (quantize_nvfp4_rows) and multiply "
           "both in NVFP4 (linear_nvfp4_a4); the others stay W4A16">
  ];
  let statistics = [
    Statistic<"numLaunches", "num-launches", "Number of kernel launches in the plan">,
    Statistic<"numEntries", "num-entries", "Number of distinct kernel entry points">
  ];
}

def SparkPlanArenaPass : Pass<"spark-plan-arena", "mlir::ModuleOp"> {
  let summary = "places every buffer of each spark.program in one activation arena";
  let description = [{
    After `spark-lower-to-kernels`: gives each buffer of a `spark.program` its byte `offset` and
    the program its `arena_bytes`. A buffer lives from the first `spark.launch` that names it to
    the last one (the entry inputs for the whole program, the logits to its end); buffers whose
    lives do not overlap share bytes. First fit in order of first use, 256-byte aligned. A
    program whose buffers already have offsets is refused.
  }];
  let dependentDialects = ["::spark::SparkDialect"];
  let statistics = [
    Statistic<"arenaBytes", "arena-bytes", "Bytes of the activation arena (all programs)">
  ];
}

def SparkOutlineKernelEntriesPass : Pass<"spark-outline-kernel-entries", "mlir::ModuleOp"> {
  let summary = "builds gpu.module @kernels: one entry per distinct (op, literal arguments)";
  let description = [{
    After `spark-lower-to-kernels`: for every `spark.launch`, the `gpu.func` entry its `kernel`
    names (checked to be the name its op and literal arguments make, entry_point.h), built once
    per name: it calls the kernel library's `spark_<op>` (declared from the op registry,
    kernel_ops.def) with the literal `i32` / `f32` arguments as constants and the other arguments
    as its parameters, in order. Also defines the library's `spark_activation_precision`
    constant from the program's `activation_precision`, so code generation folds every kernel's
    rounding.
  }];
  let dependentDialects = ["::spark::SparkDialect", "::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect"];
  let statistics = [
    Statistic<"numEntries", "num-entries", "Number of distinct kernel entry points">
  ];
}

#endif // SPARK_CONVERSION_PASSES_TD
