//===- ImportGemma.h - Gemma 4 config -> spark dialect module --------*- C++ -*-===//
#ifndef SPARK_COMPILER_IMPORT_IMPORTGEMMA_H
#define SPARK_COMPILER_IMPORT_IMPORTGEMMA_H

#include "compiler/Import/GemmaConfig.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/raw_ostream.h"

namespace spark {

struct ImportOptions {
  /// Round the embedding scales to bf16, as transformers does for a bf16 model. Off by default:
  /// Spark computes activations in f32, which matches transformers run in float32.
  bool roundScalesToBf16 = false;
};

/// Builds the module: spark.kv_cache declarations, `func.func @forward` (ids, positions,
/// soft-token embeddings and their indices -> logits), and the `spark.model` attribute.
mlir::OwningOpRef<mlir::ModuleOp> importGemma(const GemmaConfig &config,
                                              const ImportOptions &options,
                                              mlir::MLIRContext *context);

/// Checks every spark.weight of `module` against the safetensors checkpoint in `dir`:
/// present, same shape, same dtype. The error names the tensor, the expected and the found.
llvm::Error checkWeightsAgainstCheckpoint(mlir::ModuleOp module, llvm::StringRef dir);

/// True when `dir` holds model.safetensors.index.json or at least one *.safetensors file.
bool hasSafetensors(llvm::StringRef dir);

/// The --summary report: variant, layer table, parameter counts.
void printSummary(const GemmaConfig &config, llvm::raw_ostream &os);

} // namespace spark

#endif // SPARK_COMPILER_IMPORT_IMPORTGEMMA_H
