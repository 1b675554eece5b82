//===- spark-compile.cpp - model.mlir -> model.cubin -----------------------===//
//
//   spark-compile model.mlir -o model.cubin [--target sm_121a]... [--emit mlir|llvm|ptx|cubin]
//
// A thin main over compiler/Driver: parses flags, reads the module, calls compileModule.
//
//===----------------------------------------------------------------------===//
#include <string>

#include "compiler/Driver/CompileSession.h"
#include "compiler/InitAll.h"
#include "compiler/Support/InputFile.h"
#include "compiler/Target/CUDA/CudaTarget.h"
#include "spark/runtime/kernel_abi.h"
#include "llvm/Support/FileSystem.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"


using namespace llvm;

static cl::OptionCategory sparkCompileCategory("spark-compile options");

static cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.mlir>"), cl::init("-"),
                                      cl::cat(sparkCompileCategory));
static cl::opt<std::string>
    outputPath("o",
               cl::desc("Output file (default model.cubin); with several --target values, "
                        "<stem>.<target>.cubin (or .ptx) next to it"),
               cl::value_desc("file"), cl::init("model.cubin"), cl::cat(sparkCompileCategory));
static cl::list<std::string>
    targets("target",
            cl::desc("Target to compile for (repeatable): sm_121a (default, DGX Spark), sm_120a, "
                     "sm_120f, sm_100a, sm_90a, sm_80, or compute_XY for PTX only"),
            cl::value_desc("target"), cl::cat(sparkCompileCategory));
static cl::opt<std::string> emit("emit",
                                 cl::desc("Stop after a stage: mlir (planned kernel-level "
                                          "module), llvm (linked LLVM IR), ptx, cubin (default)"),
                                 cl::init("cubin"), cl::cat(sparkCompileCategory));
static const std::string maxTokensHelp =
    "Most tokens one step processes (prefill chunk); sizes every activation buffer (default " +
    std::to_string(spark::abi::kDefaultMaxStepTokens) + ")";
static cl::opt<int64_t> maxTokens("max-tokens", cl::desc(maxTokensHelp),
                                  cl::init(spark::abi::kDefaultMaxStepTokens),
                                  cl::cat(sparkCompileCategory));
static cl::opt<int64_t> maxImageTokens(
    "max-image-tokens",
    cl::desc("A multimodal model's largest image budget in soft tokens (spark-run --image-tokens "
             "up to this; 70, 140, 280, 560 or 1120; default 280, the processor's default): sizes "
             "the image encoder's buffers, 9 patches per soft token"),
    cl::init(280), cl::cat(sparkCompileCategory));
static cl::opt<std::string>
    kvCacheDType("kv-cache-dtype",
                 cl::desc("Element type of every KV cache: f32 or bf16 (half the cache memory "
                          "and attention's cache reads; K and V rounded to bf16). Without it, "
                          "each cache keeps the module's element_type (f32 when absent, as "
                          "spark-import writes it)"),
                 cl::value_desc("f32|bf16"), cl::init("f32"), cl::cat(sparkCompileCategory));
static cl::opt<std::string> activationPrecision(
    "activation-precision",
    cl::desc("Element type of the activations: f32 (default), or bf16: stored in bf16 (half "
             "the activation arena; kernels compute in f32 and round what they store, the "
             "numerics of an engine that keeps its activations in bf16; docs/precision.md)"),
    cl::value_desc("f32|bf16"), cl::init("f32"), cl::cat(sparkCompileCategory));
static cl::opt<bool> fp4Activations(
    "fp4-activations",
    cl::desc("W4A4 for checkpoints with NVFP4 weights: each linear with NVFP4 weights and an "
             "input width that is a multiple of 64 quantizes its activations to NVFP4 per token "
             "row (a global scale per row, an e4m3 scale per 16 elements) and multiplies both in "
             "4 bits: block-scaled FP4 MMA on sm_120a / sm_121a, the CUDA cores elsewhere "
             "(numerics only, slower than W4A16). Changes the results (docs/quantization.md)"),
    cl::init(false), cl::cat(sparkCompileCategory));
static cl::opt<int64_t> tensorParallel(
    "tensor-parallel",
    cl::desc("Split the text model over N ranks (GPUs), Megatron-style: attention by KV-head "
             "groups, the MLPs and MoE experts by their intermediate features, the embedding and "
             "LM head by columns and vocabulary, joined by all-reduce / all-gather steps; every "
             "rank runs the one plan on its weight slices (docs/multi-gpu.md). Default 1"),
    cl::value_desc("N"), cl::init(1), cl::cat(sparkCompileCategory));
static cl::opt<std::string> ptxasPath("ptxas",
                                      cl::desc("ptxas to use (else SPARK_PTXAS, CUDA_HOME, "
                                               "CUDA_PATH, /usr/local/cuda, PATH)"),
                                      cl::value_desc("path"), cl::cat(sparkCompileCategory));
static cl::list<std::string> kernelDirs(
    "kernel-library-dir",
    cl::desc("Directory holding kernels/<target>/spark_kernels.bc (repeatable; searched before "
             "SPARK_MODULE_PATH and the install prefix)"),
    cl::value_desc("dir"), cl::cat(sparkCompileCategory));
static cl::opt<std::string> keepTemps("keep-temps",
                                      cl::desc("Keep the .ptx and ptxas output in this directory"),
                                      cl::value_desc("dir"), cl::cat(sparkCompileCategory));
static cl::opt<std::string> dumpPtx("dump-ptx", cl::desc("Also write the PTX to this file"),
                                    cl::value_desc("file"), cl::cat(sparkCompileCategory));
static cl::opt<bool> verbose("v", cl::desc("Print every lookup, each file written and the timing report of every stage"),
                             cl::cat(sparkCompileCategory));
static cl::opt<bool> verifyDiagnostics(
    "verify-diagnostics",
    cl::desc("Check that emitted diagnostics match expected-* lines in the input"),
    cl::cat(sparkCompileCategory));

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  cl::HideUnrelatedOptions({&sparkCompileCategory, &getColorCategory()});
  cl::ParseCommandLineOptions(
      argc, argv,
      "spark-compile: compiles a spark dialect model (from spark-import) ahead of time through "
      "LLVM's NVPTX back end and ptxas into a cubin that also carries the execution plan "
      "(.spark.plan section).\n\nMLIR debugging options (--mlir-print-ir-after-all, "
      "--mlir-print-ir-after-failure, --mlir-timing, ...) are accepted too; --help-hidden lists "
      "them.\n");

  spark::CompileOptions options;
  if (!targets.empty())
    options.targets.assign(targets.begin(), targets.end());
  static const std::pair<const char *, spark::EmitKind> kEmit[] = {
      {"mlir", spark::EmitKind::Mlir},
      {"llvm", spark::EmitKind::Llvm},
      {"ptx", spark::EmitKind::Ptx},
      {"cubin", spark::EmitKind::Cubin}};
  bool known = false;
  for (auto &[name, kind] : kEmit)
    if (emit == name) {
      options.emit = kind;
      known = true;
    }
  if (!known) {
    WithColor::error(errs(), "spark-compile")
        << "unknown --emit value '" << emit << "' (expected mlir, llvm, ptx or cubin)\n";
    return 1;
  }
  options.maxTokens = maxTokens;
  // Command-line mistakes are reported before the input is read, without a source location.
  if (maxTokens <= 0 || maxTokens > spark::abi::kMaxStepTokens) {
    WithColor::error(errs(), "spark-compile")
        << "--max-tokens must be in [1, " << spark::abi::kMaxStepTokens << "], got " << maxTokens
        << " (a longer prefill runs in several steps)\n";
    return 1;
  }
  if (maxImageTokens < 1 || maxImageTokens > 1120) {
    WithColor::error(errs(), "spark-compile")
        << "--max-image-tokens must be in [1, 1120] (the processor's largest budget), got "
        << maxImageTokens << "\n";
    return 1;
  }
  if (tensorParallel < 1 || tensorParallel > 64) {
    WithColor::error(errs(), "spark-compile")
        << "--tensor-parallel must be in [1, 64], got " << tensorParallel << "\n";
    return 1;
  }
  options.tensorParallel = tensorParallel;
  options.maxImageTokens = maxImageTokens;
  options.maxImageTokensGiven = maxImageTokens.getNumOccurrences() > 0;
  if (kvCacheDType != "f32" && kvCacheDType != "bf16") {
    WithColor::error(errs(), "spark-compile")
        << "unknown --kv-cache-dtype value '" << kvCacheDType << "' (expected f32 or bf16)\n";
    return 1;
  }
  // Only an explicit flag overrides what the module declares (spark-import declares none: f32).
  if (kvCacheDType.getNumOccurrences() > 0)
    options.kvCacheDType = kvCacheDType;
  if (activationPrecision != "f32" && activationPrecision != "bf16") {
    WithColor::error(errs(), "spark-compile")
        << "unknown --activation-precision value '" << activationPrecision
        << "' (expected f32 or bf16)\n";
    return 1;
  }
  options.activationPrecision = activationPrecision;
  options.fp4Activations = fp4Activations;
  for (const std::string &target : options.targets) {
    Expected<spark::CudaTarget> parsed = spark::parseCudaTarget(target);
    if (!parsed) {
      WithColor::error(errs(), "spark-compile") << toString(parsed.takeError()) << "\n";
      return 1;
    }
    // The kernels take the block-scaled FP4 MMA only where the library's bitcode has it.
    if (fp4Activations && parsed->chip != "sm_120a" && parsed->chip != "sm_121a")
      WithColor::note(errs(), "spark-compile")
          << "--fp4-activations on " << target << ": it has no block-scaled FP4 MMA (sm_120a "
          << "and sm_121a have), so its W4A4 products run on the CUDA cores: the numerics of "
          << "W4A4, slower than W4A16\n";
  }
  options.output = outputPath;
  if (outputPath.getNumOccurrences() == 0) {
    // The default output is named after what is emitted.
    static const char *const kDefaultName[] = {"model.mlir", "model.ll", "model.ptx",
                                               "model.cubin"};
    options.output = kDefaultName[static_cast<int>(options.emit)];
  }
  options.ptxas = ptxasPath;
  for (const std::string &dir : kernelDirs)
    if (!sys::fs::is_directory(dir)) {
      WithColor::error(errs(), "spark-compile")
          << "--kernel-library-dir " << dir << " is not a directory (it should hold "
          << "kernels/<target>/spark_kernels.bc)\n";
      return 1;
    }
  options.kernelLibraryDirs.assign(kernelDirs.begin(), kernelDirs.end());
  options.keepTempsDir = keepTemps;
  options.dumpPtx = dumpPtx;
  options.verbose = verbose;
  options.argv0 = argv[0];
  // --mlir-timing: one timing report for all the stages of this compile (MLIR's timing manager,
  // the one timer: a scope per pass manager and one per ptxas run, CompileOptions::timing),
  // printed at exit.
  // -v: the same report, as a tree of the stages (each pass manager, ptxas) and their passes.
  mlir::DefaultTimingManager timingManager;
  mlir::applyDefaultTimingManagerCLOptions(timingManager);
  if (verbose && !timingManager.isEnabled()) {
    timingManager.setEnabled(true);
    timingManager.setDisplayMode(mlir::DefaultTimingManager::DisplayMode::Tree);
  }
  mlir::TimingScope timing = timingManager.getRootScope();
  options.timing = &timing;
  options.configurePassManager = [](mlir::PassManager &pm) {
    return mlir::applyPassManagerCLOptions(pm);
  };

  mlir::DialectRegistry registry;
  spark::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();

  Expected<std::unique_ptr<MemoryBuffer>> input =
      spark::readInputFile(inputPath, spark::kMlirModuleInput);
  if (input) {
    if (Error deep = spark::checkMlirNesting((*input)->getBuffer(), inputPath))
      input = std::move(deep);
  }
  if (!input) {
    WithColor::error(errs(), "spark-compile") << toString(input.takeError()) << "\n";
    return 1;
  }
  SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(*input), SMLoc());

  if (verifyDiagnostics) {
    context.printOpOnDiagnostic(false); // as mlir-opt does: expected-* lines match messages only
    mlir::SourceMgrDiagnosticVerifierHandler handler(sourceMgr, &context);
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
    if (module)
      (void)spark::compileModule(*module, options);
    return failed(handler.verify()) ? 1 : 0;
  }
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;
  return failed(spark::compileModule(*module, options)) ? 1 : 0;
}
