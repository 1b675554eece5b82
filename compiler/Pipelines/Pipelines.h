//===- Pipelines.h - Spark's compile pipeline, stage by stage --------*- C++ -*-===//
//
// Every stage is a C++ function that spark-compile calls and that spark-opt also exposes as a
// named pipeline, so any compile is reproducible with spark-opt:
//   spark-graph-pipeline    verify + fuse + canonicalize the tensor-level graph
//   spark-kernel-pipeline   plan the arena, lower every op to spark.launch + gpu.func entries
//   spark-nvvm-pipeline     attach the NVVM target (chip, PTX version, kernel library), lower
//                           the entries to NVVM and serialise the gpu.module to PTX
//   spark-compile-pipeline  the three in order
// ptxas and the plan section are applied after the pipeline by compiler/Target/CUDA.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_COMPILER_PIPELINES_PIPELINES_H
#define SPARK_COMPILER_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "spark/runtime/kernel_abi.h"

namespace spark {

struct KernelPipelineOptions : mlir::PassPipelineOptions<KernelPipelineOptions> {
  Option<int64_t> maxTokens{*this, "max-tokens",
                            llvm::cl::desc("Most tokens one step (prefill chunk) processes"),
                            llvm::cl::init(abi::kDefaultMaxStepTokens)};
  Option<int64_t> imageMaxPatches{
      *this, "image-max-patches",
      llvm::cl::desc("Most patches of one image the image encoder program takes (9 per soft "
                     "token)"),
      llvm::cl::init(2520)};
  Option<std::string> kvCacheDType{
      *this, "kv-cache-dtype",
      llvm::cl::desc("Element type of every KV cache: f32 or bf16 (empty: as the module says)"),
      llvm::cl::init("")};
  Option<std::string> activationPrecision{
      *this, "activation-precision",
      llvm::cl::desc("What activation buffers hold: f32, or bf16 (every kernel output rounded)"),
      llvm::cl::init("f32")};
  Option<bool> fp4Activations{
      *this, "fp4-activations",
      llvm::cl::desc("W4A4: NVFP4-weight linears (input width a multiple of 64) quantize their "
                     "activations to NVFP4"),
      llvm::cl::init(false)};
};

struct NVVMPipelineOptions : mlir::PassPipelineOptions<NVVMPipelineOptions> {
  Option<std::string> chip{*this, "chip", llvm::cl::desc("NVPTX chip, e.g. sm_121a"),
                           llvm::cl::init("sm_121a")};
  Option<std::string> features{*this, "features",
                               llvm::cl::desc("PTX features, e.g. +ptx88"),
                               llvm::cl::init("+ptx88")};
  Option<std::string> kernelLibrary{*this, "kernel-library",
                                    llvm::cl::desc("Kernel library bitcode to link"),
                                    llvm::cl::init("")};
  Option<std::string> format{*this, "format",
                             llvm::cl::desc("What gpu-module-to-binary produces: isa (PTX) or "
                                            "llvm (linked LLVM bitcode)"),
                             llvm::cl::init("isa")};
};

struct CompilePipelineOptions : mlir::PassPipelineOptions<CompilePipelineOptions> {
  Option<int64_t> maxTokens{*this, "max-tokens",
                            llvm::cl::desc("Most tokens one step (prefill chunk) processes"),
                            llvm::cl::init(abi::kDefaultMaxStepTokens)};
  Option<int64_t> imageMaxPatches{
      *this, "image-max-patches",
      llvm::cl::desc("Most patches of one image the image encoder program takes (9 per soft "
                     "token)"),
      llvm::cl::init(2520)};
  Option<std::string> kvCacheDType{
      *this, "kv-cache-dtype",
      llvm::cl::desc("Element type of every KV cache: f32 or bf16 (empty: as the module says)"),
      llvm::cl::init("")};
  Option<std::string> activationPrecision{
      *this, "activation-precision",
      llvm::cl::desc("What activation buffers hold: f32, or bf16 (every kernel output rounded)"),
      llvm::cl::init("f32")};
  Option<bool> fp4Activations{
      *this, "fp4-activations",
      llvm::cl::desc("W4A4: NVFP4-weight linears (input width a multiple of 64) quantize their "
                     "activations to NVFP4"),
      llvm::cl::init(false)};
  Option<std::string> chip{*this, "chip", llvm::cl::desc("NVPTX chip, e.g. sm_121a"),
                           llvm::cl::init("sm_121a")};
  Option<std::string> features{*this, "features",
                               llvm::cl::desc("PTX features, e.g. +ptx88"),
                               llvm::cl::init("+ptx88")};
  Option<std::string> kernelLibrary{*this, "kernel-library",
                                    llvm::cl::desc("Kernel library bitcode to link"),
                                    llvm::cl::init("")};
};

void buildGraphPipeline(mlir::OpPassManager &pm);
void buildKernelPipeline(mlir::OpPassManager &pm, const KernelPipelineOptions &options);
void buildNVVMPipeline(mlir::OpPassManager &pm, const NVVMPipelineOptions &options);
void buildSparkCompilePipeline(mlir::OpPassManager &pm, const CompilePipelineOptions &options);

void registerPipelines();

} // namespace spark

#endif // SPARK_COMPILER_PIPELINES_PIPELINES_H
