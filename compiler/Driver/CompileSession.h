//===- CompileSession.h - parse -> pipeline -> serialise --------------*- C++ -*-===//
#ifndef SPARK_COMPILER_DRIVER_COMPILESESSION_H
#define SPARK_COMPILER_DRIVER_COMPILESESSION_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "spark/runtime/kernel_abi.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <string>
#include <vector>

namespace spark {

enum class EmitKind { Mlir, Llvm, Ptx, Cubin };

struct CompileOptions {
  std::vector<std::string> targets{"sm_121a"};
  EmitKind emit = EmitKind::Cubin;
  int64_t maxTokens = abi::kDefaultMaxStepTokens;
  /// The largest soft-token budget of one image the image encoder takes (--max-image-tokens; its
  /// buffers hold 9 patches per soft token). Unused for a model without a vision tower.
  int64_t maxImageTokens = 280;
  bool maxImageTokensGiven = false;  // --max-image-tokens on the command line: the model needs one
  std::string kvCacheDType;  // "f32", "bf16", or empty: as the module declares (f32)
  std::string activationPrecision = "f32";  // "f32" or "bf16" (kernel_abi.h ActivationPrecision)
  /// --fp4-activations: W4A4 for the NVFP4 linears (docs/quantization.md).
  bool fp4Activations = false;
  /// --tensor-parallel: the ranks the text model is split over (spark-shard-tensor-parallel;
  /// docs/multi-gpu.md); 1: not split.
  int64_t tensorParallel = 1;
  std::string output = "model.cubin";
  std::string ptxas;                        // --ptxas
  std::vector<std::string> kernelLibraryDirs; // --kernel-library-dir
  std::string keepTempsDir;                 // --keep-temps: keep .ptx and ptxas output here
  std::string dumpPtx;                      // --dump-ptx=<file>
  bool verbose = false;                     // -v: each stage's time and every lookup
  std::string argv0;
  /// Applies the --mlir-* pass manager options (print-ir, ...) to each pass manager.
  std::function<mlir::LogicalResult(mlir::PassManager &)> configurePassManager;
  /// --mlir-timing / -v: every stage is timed in a scope of its own under this one, named after
  /// it: each pass manager with its passes (MLIR keys a pass's timer by the pass object's address,
  /// which a later pass manager's pass may reuse: one shared scope would mix their lines), and
  /// each ptxas run. MLIR's timing manager is the compiler's one timer. Null: no timing.
  mlir::TimingScope *timing = nullptr;
};

/// Runs the compile pipeline on `module` and writes the outputs (docs/cli.md lists them).
/// Problems are reported as diagnostics on the module.
mlir::LogicalResult compileModule(mlir::ModuleOp module, const CompileOptions &options);

/// The file a target's output goes to: the -o path itself for one target, else
/// `<dir>/<stem>.<target>.<ext>`.
std::string outputPathFor(const CompileOptions &options, llvm::StringRef target,
                          llvm::StringRef extension);

} // namespace spark

#endif // SPARK_COMPILER_DRIVER_COMPILESESSION_H
