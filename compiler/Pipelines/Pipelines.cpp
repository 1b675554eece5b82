//===- Pipelines.cpp - Spark's compile pipeline, stage by stage ------------===//
#include "compiler/Pipelines/Pipelines.h"

#include "dialects/Spark/Transforms/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void spark::buildGraphPipeline(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(createSparkFuseElementwisePass());
  pm.addNestedPass<func::FuncOp>(createSparkFuseNormsPass());
  pm.addPass(createCSEPass());
}

void spark::buildKernelPipeline(OpPassManager &pm, const KernelPipelineOptions &options) {
  SparkLowerToKernelsPassOptions lowerOptions;
  lowerOptions.maxTokens = options.maxTokens;
  lowerOptions.kvCacheDType = options.kvCacheDType;
  lowerOptions.activationPrecision = options.activationPrecision;
  pm.addPass(createSparkLowerToKernelsPass(lowerOptions));
}

void spark::buildNVVMPipeline(OpPassManager &pm, const NVVMPipelineOptions &options) {
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = options.features;
  target.optLevel = 3;
  if (!options.kernelLibrary.empty())
    target.linkLibs.push_back(options.kernelLibrary);
  pm.addPass(createGpuNVVMAttachTarget(target));
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps());
  pm.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.format;
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void spark::buildSparkCompilePipeline(OpPassManager &pm,
                                      const CompilePipelineOptions &options) {
  buildGraphPipeline(pm);
  KernelPipelineOptions kernel;
  kernel.maxTokens = options.maxTokens;
  kernel.kvCacheDType = options.kvCacheDType;
  kernel.activationPrecision = options.activationPrecision;
  buildKernelPipeline(pm, kernel);
  NVVMPipelineOptions nvvm;
  nvvm.chip = options.chip;
  nvvm.features = options.features;
  nvvm.kernelLibrary = options.kernelLibrary;
  buildNVVMPipeline(pm, nvvm);
}

void spark::registerPipelines() {
  PassPipelineRegistration<>("spark-graph-pipeline",
                             "Verify, fuse and canonicalize the tensor-level graph",
                             [](OpPassManager &pm) { buildGraphPipeline(pm); });
  PassPipelineRegistration<KernelPipelineOptions>(
      "spark-kernel-pipeline", "Plan the arena and lower every op to kernel launches",
      buildKernelPipeline);
  PassPipelineRegistration<NVVMPipelineOptions>(
      "spark-nvvm-pipeline", "Lower the kernel entries to NVVM and serialise them to PTX",
      buildNVVMPipeline);
  PassPipelineRegistration<CompilePipelineOptions>(
      "spark-compile-pipeline", "The whole compile pipeline, graph to PTX",
      buildSparkCompilePipeline);
}
