//===- CompileSession.cpp - parse -> pipeline -> serialise -----------------===//
#include "compiler/Driver/CompileSession.h"

#include "compiler/Conversion/Passes.h"

#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Target/CUDA/CudaTarget.h"
#include "dialects/Spark/IR/SparkOps.h"
#include "dialects/Spark/Transforms/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

namespace spark {
namespace {

LogicalResult fail(ModuleOp module, llvm::Error error) {
  return emitError(module.getLoc()) << llvm::toString(std::move(error));
}

LogicalResult writeFile(ModuleOp module, llvm::StringRef path, llvm::StringRef bytes,
                        bool verbose) {
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> out = openOutputFile(path, &error);
  if (!out)
    return emitError(module.getLoc()) << "cannot write " << path << ": " << error;
  out->os() << bytes;
  out->keep();
  if (verbose)
    llvm::errs() << "spark-compile: wrote " << path << " (" << bytes.size() << " bytes)\n";
  return success();
}

LogicalResult runPipeline(ModuleOp module, const CompileOptions &options, llvm::StringRef stage,
                          llvm::function_ref<void(OpPassManager &)> build) {
  // Outlives the pass manager, whose instrumentation refers to it.
  TimingScope timing = options.timing ? options.timing->nest(stage.str()) : TimingScope();
  PassManager pm(module.getContext());
  pm.enableTiming(timing);
  if (options.configurePassManager && failed(options.configurePassManager(pm)))
    return failure();
  build(pm);
  return pm.run(module);
}

/// The serialised object of the only gpu.binary in `module`.
FailureOr<std::string> binaryObject(ModuleOp module) {
  for (auto binary : module.getOps<gpu::BinaryOp>())
    for (Attribute object : binary.getObjects())
      return cast<gpu::ObjectAttr>(object).getObject().getValue().str();
  return emitError(module.getLoc()) << "code generation produced no gpu.binary";
}

LogicalResult compileTarget(ModuleOp kernelModule, const CompileOptions &options,
                            const std::string &targetName) {
  llvm::Expected<CudaTarget> target = parseCudaTarget(targetName);
  if (!target)
    return fail(kernelModule, target.takeError());
  llvm::raw_ostream *log = options.verbose ? &llvm::errs() : nullptr;
  llvm::Expected<std::string> library =
      findKernelLibrary(*target, options.kernelLibraryDirs, options.argv0.c_str(), log);
  if (!library)
    return fail(kernelModule, library.takeError());

  OwningOpRef<ModuleOp> module = kernelModule.clone();
  NVVMPipelineOptions nvvm;
  nvvm.chip = target->chip;
  nvvm.features = target->features;
  nvvm.kernelLibrary = *library;
  if (options.emit == EmitKind::Llvm)
    nvvm.format = "llvm"; // the same stage, stopping at linked LLVM bitcode instead of PTX
  // (The NVVM pipeline's gpu-module-to-binary runs the LLVM NVPTX back end: its time is there.)
  if (failed(runPipeline(*module, options, "NVVM pipeline (" + targetName + ")",
                         [&](OpPassManager &pm) { buildNVVMPipeline(pm, nvvm); })))
    return failure();
  FailureOr<std::string> object = binaryObject(*module);
  if (failed(object))
    return failure();

  if (options.emit == EmitKind::Llvm) {
    llvm::LLVMContext llvmContext;
    auto buffer = llvm::MemoryBuffer::getMemBuffer(*object, "kernels", false);
    llvm::Expected<std::unique_ptr<llvm::Module>> llvmModule =
        llvm::parseBitcodeFile(buffer->getMemBufferRef(), llvmContext);
    if (!llvmModule)
      return fail(kernelModule, llvmModule.takeError());
    std::string text;
    llvm::raw_string_ostream os(text);
    (*llvmModule)->print(os, nullptr);
    return writeFile(kernelModule, outputPathFor(options, targetName, ".ll"), text,
                     options.verbose);
  }
  const std::string &ptx = *object;
  if (!options.dumpPtx.empty() &&
      failed(writeFile(kernelModule, options.targets.size() == 1
                                         ? options.dumpPtx
                                         : options.dumpPtx + "." + targetName,
                       ptx, options.verbose)))
    return failure();
  if (options.emit == EmitKind::Ptx)
    return writeFile(kernelModule, outputPathFor(options, targetName, ".ptx"), ptx,
                     options.verbose);

  llvm::Expected<std::string> plan = buildPlanSection(kernelModule, *target);
  if (!plan)
    return fail(kernelModule, plan.takeError());
  if (target->ptxOnly) {
    // PTX targets: the PTX for the driver's JIT, and the plan beside it.
    std::string ptxPath = outputPathFor(options, targetName, ".ptx");
    llvm::SmallString<256> planPath(ptxPath);
    llvm::sys::path::replace_extension(planPath, ".plan");
    if (failed(writeFile(kernelModule, ptxPath, ptx, options.verbose)))
      return failure();
    return writeFile(kernelModule, planPath, *plan, options.verbose);
  }
  llvm::Expected<std::string> ptxas = findPtxas(options.ptxas, log);
  if (!ptxas)
    return fail(kernelModule, ptxas.takeError());
  std::string cubin;
  {
    TimingScope timing =
        options.timing ? options.timing->nest("ptxas (" + targetName + ")") : TimingScope();
    llvm::Expected<std::string> result =
        runPtxas(*ptxas, *target, ptx, options.keepTempsDir, log);
    if (!result)
      return fail(kernelModule, result.takeError());
    cubin = std::move(*result);
  }
  llvm::Expected<std::string> artifact = addPlanSection(cubin, *plan);
  if (!artifact)
    return fail(kernelModule, artifact.takeError());
  return writeFile(kernelModule, outputPathFor(options, targetName, ".cubin"), *artifact,
                   options.verbose);
}

} // namespace

std::string outputPathFor(const CompileOptions &options, llvm::StringRef target,
                          llvm::StringRef extension) {
  llvm::SmallString<256> path(options.output);
  if (options.targets.size() == 1 && path == "-")
    return "-";
  if (options.targets.size() == 1) {
    // One target: exactly the -o path, except that a PTX-only target keeps a .ptx extension.
    if (extension == ".ptx" && llvm::sys::path::extension(path) == ".cubin")
      llvm::sys::path::replace_extension(path, ".ptx");
    return std::string(path);
  }
  llvm::StringRef stem = llvm::sys::path::stem(options.output);
  llvm::SmallString<256> out(llvm::sys::path::parent_path(options.output));
  llvm::sys::path::append(out, (stem + "." + target + extension).str());
  return std::string(out);
}

LogicalResult compileModule(ModuleOp module, const CompileOptions &options) {
  if (options.maxTokens <= 0)
    return emitError(module.getLoc()) << "--max-tokens must be positive, got "
                                      << options.maxTokens;
  if (options.targets.empty())
    return emitError(module.getLoc()) << "no --target given";
  if (options.output == "-" && options.emit != EmitKind::Mlir &&
      (options.targets.size() > 1 || options.emit == EmitKind::Cubin))
    return emitError(module.getLoc())
           << "-o - (stdout) takes one text output: use it with --emit mlir, llvm or ptx and "
              "one --target";
  for (const std::string &name : options.targets)
    if (llvm::Expected<CudaTarget> t = parseCudaTarget(name); !t)
      return fail(module, t.takeError());
  if (options.maxImageTokensGiven && !module.lookupSymbol("encode_image"))
    return emitError(module.getLoc())
           << "--max-image-tokens sizes a vision tower, but the module has none (no "
              "@encode_image: a text-only model, or one imported with --no-vision)";
  if (!module.getOps<ProgramOp>().empty()) {
    // A kernel-level module (a spark.program already: the GPU op check's modules): no graph to
    // fuse or lower; its buffers are placed unless they carry offsets, and its entries built.
    bool planned = true;
    for (ProgramOp program : module.getOps<ProgramOp>())
      for (auto buffer : program.getBuffers().getAsRange<BufferAttr>())
        if (!buffer.getOffset())
          planned = false;
    if (failed(runPipeline(module, options, "kernel pipeline", [&](OpPassManager &pm) {
          if (!planned)
            pm.addPass(createSparkPlanArenaPass());
          pm.addPass(createSparkOutlineKernelEntriesPass());
        })))
      return failure();
  } else if (options.tensorParallel != 1 &&
             failed(runPipeline(module, options, "tensor-parallel split", [&](OpPassManager &pm) {
               SparkShardTensorParallelPassOptions shard;
               shard.ranks = options.tensorParallel;
               pm.addPass(createSparkShardTensorParallelPass(shard));
             }))) {
    return failure();
  } else if (failed(runPipeline(module, options, "graph pipeline", buildGraphPipeline))) {
    return failure();
  } else {
    KernelPipelineOptions kernel;
    kernel.maxTokens = options.maxTokens;
    kernel.imageMaxPatches = options.maxImageTokens * 9;
    kernel.kvCacheDType = options.kvCacheDType;
    kernel.activationPrecision = options.activationPrecision;
    kernel.fp4Activations = options.fp4Activations;
    if (failed(runPipeline(module, options, "kernel pipeline",
                           [&](OpPassManager &pm) { buildKernelPipeline(pm, kernel); })))
      return failure();
  }
  if (options.emit == EmitKind::Mlir) {
    std::string text;
    llvm::raw_string_ostream os(text);
    module.print(os);
    return writeFile(module, options.output, text, options.verbose);
  }
  for (const std::string &target : options.targets)
    if (failed(compileTarget(module, options, target)))
      return failure();
  return success();
}

} // namespace spark
