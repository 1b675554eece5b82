//===- CudaTarget.h - targets, kernel library, ptxas, plan section ---*- C++ -*-===//
//
// The edges of the CUDA back end: which chip and PTX version a --target means, where the kernel
// library bitcode for it is, finding and running ptxas, and writing the plan into the cubin's
// `.spark.plan` section. Everything returns llvm::Expected / llvm::Error; the driver turns them
// into diagnostics once.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_COMPILER_TARGET_CUDA_CUDATARGET_H
#define SPARK_COMPILER_TARGET_CUDA_CUDATARGET_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace spark {

/// What one --target value means for code generation.
struct CudaTarget {
  std::string name;     // as given: sm_121a, sm_120f, sm_90a, sm_80, compute_90, ...
  std::string chip;     // NVPTX chip LLVM generates for (compute_90 -> sm_90)
  std::string features; // PTX version feature, e.g. +ptx88
  std::string ptxasArch; // -arch for ptxas (empty for PTX-only targets)
  bool ptxOnly = false;
};

/// Targets spark-compile accepts, for --help and errors.
llvm::StringRef supportedTargetsText();

/// Parses a --target value (through the runtime's target parser) and picks chip and PTX version.
llvm::Expected<CudaTarget> parseCudaTarget(llvm::StringRef name);

/// Finds `<dir>/kernels/<target>/spark_kernels.bc` in the search path: --kernel-library-dir
/// values, SPARK_MODULE_PATH entries, the directory of the running executable's
/// ../lib/spark, the build tree's lib/spark, and the install prefix's lib/spark. The error lists
/// every path tried and the command that builds the library.
llvm::Expected<std::string> findKernelLibrary(const CudaTarget &target,
                                              llvm::ArrayRef<std::string> extraDirs,
                                              const char *argv0, llvm::raw_ostream *log);

/// Finds ptxas: --ptxas, SPARK_PTXAS, $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin, PATH.
/// The error lists each place looked at.
llvm::Expected<std::string> findPtxas(llvm::StringRef flag, llvm::raw_ostream *log);

/// Runs `ptxas -arch=<arch> -O3` on `ptx`. On failure the error has the exit code, ptxas's
/// stderr and a copy-pasteable command with the kept .ptx path. `keepDir`, if not empty, keeps
/// the .ptx and .cubin there.
llvm::Expected<std::string> runPtxas(llvm::StringRef ptxas, const CudaTarget &target,
                                     llvm::StringRef ptx, llvm::StringRef keepDir,
                                     llvm::raw_ostream *log);

/// Builds the plan section bytes (runtime's format, runtime's writer) from the module's
/// spark.program and spark.kv_cache ops, validated with the runtime's own checks.
llvm::Expected<std::string> buildPlanSection(mlir::ModuleOp module, const CudaTarget &target);

/// Returns `cubin` with an extra, non-allocated ELF section `.spark.plan` holding `plan`.
llvm::Expected<std::string> addPlanSection(llvm::StringRef cubin, llvm::StringRef plan);

} // namespace spark

#endif // SPARK_COMPILER_TARGET_CUDA_CUDATARGET_H
