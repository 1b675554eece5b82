//===- Pipelines.cpp - Spark's compile pipeline, stage by stage ------------===//
#include "compiler/Pipelines/Pipelines.h"

#include "compiler/Conversion/Passes.h"
#include "dialects/Spark/Transforms/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "compiler/Target/CUDA/CudaTarget.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/TargetParser/Triple.h"

extern "C" void LLVMInitializeNVPTXTargetInfo();
extern "C" void LLVMInitializeNVPTXTargetMC();

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
  lowerOptions.imageMaxPatches = options.imageMaxPatches;
  lowerOptions.kvCacheDType = options.kvCacheDType;
  lowerOptions.activationPrecision = options.activationPrecision;
  lowerOptions.fp4Activations = options.fp4Activations;
  pm.addPass(createSparkLowerToKernelsPass(lowerOptions));
  pm.addPass(createSparkPlanArenaPass());
  pm.addPass(createSparkOutlineKernelEntriesPass());
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
  kernel.imageMaxPatches = options.imageMaxPatches;
  kernel.kvCacheDType = options.kvCacheDType;
  kernel.activationPrecision = options.activationPrecision;
  kernel.fp4Activations = options.fp4Activations;
  buildKernelPipeline(pm, kernel);
  NVVMPipelineOptions nvvm;
  nvvm.chip = options.chip;
  nvvm.features = options.features;
  nvvm.kernelLibrary = options.kernelLibrary;
  buildNVVMPipeline(pm, nvvm);
}

namespace {

/// An error unless `chip` is a GPU Spark compiles for (spark-compile's target names, cubin
/// kinds) that LLVM's NVPTX back end knows: otherwise LLVM only warns, once per module, and
/// generates code for a default processor.
LogicalResult checkChip(StringRef chip, function_ref<LogicalResult(const Twine &)> errorHandler) {
  llvm::Expected<spark::CudaTarget> target = spark::parseCudaTarget(chip);
  if (!target)
    return errorHandler("chip: " + llvm::toString(target.takeError()));
  if (target->ptxOnly)
    return errorHandler("chip '" + chip + "' is a PTX target; name the processor (e.g. sm_90 " +
                        "for compute_90)");
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTargetMC();
  llvm::Triple triple("nvptx64-nvidia-cuda");
  std::string error;
  if (const llvm::Target *nvptx = llvm::TargetRegistry::lookupTarget(triple, error)) {
    std::unique_ptr<llvm::MCSubtargetInfo> info(nvptx->createMCSubtargetInfo(triple, "", ""));
    if (info && !info->isCPUStringValid(chip))
      return errorHandler("chip '" + chip + "' is not a processor of LLVM's NVPTX back end");
  }
  return success();
}

/// Registers a pipeline whose options are checked before it is built (PassPipelineRegistration
/// would build it with whatever the options say).
template <typename Options>
void registerCheckedPipeline(StringRef arg, StringRef description,
                             void (*build)(OpPassManager &, const Options &)) {
  registerPassPipeline(
      arg, description,
      [build](OpPassManager &pm, StringRef text,
              function_ref<LogicalResult(const Twine &)> errorHandler) {
        Options options;
        if (failed(options.parseFromString(text)) || failed(checkChip(options.chip, errorHandler)))
          return failure();
        build(pm, options);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> handler) { handler(Options()); });
}

} // namespace

void spark::registerPipelines() {
  PassPipelineRegistration<>("spark-graph-pipeline",
                             "Verify, fuse and canonicalize the tensor-level graph",
                             [](OpPassManager &pm) { buildGraphPipeline(pm); });
  PassPipelineRegistration<KernelPipelineOptions>(
      "spark-kernel-pipeline", "Plan the arena and lower every op to kernel launches",
      buildKernelPipeline);
  registerCheckedPipeline<NVVMPipelineOptions>(
      "spark-nvvm-pipeline", "Lower the kernel entries to NVVM and serialise them to PTX",
      buildNVVMPipeline);
  registerCheckedPipeline<CompilePipelineOptions>(
      "spark-compile-pipeline", "The whole compile pipeline, graph to PTX",
      buildSparkCompilePipeline);
}
