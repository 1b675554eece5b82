//===- ImportGemma.h - Gemma 4 config -> spark dialect module --------*- C++ -*-===//
#ifndef SPARK_COMPILER_IMPORT_IMPORTGEMMA_H
#define SPARK_COMPILER_IMPORT_IMPORTGEMMA_H

#include "compiler/Import/GemmaConfig.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/raw_ostream.h"

namespace spark {
namespace rt {
class Checkpoint;
} // namespace rt

struct ImportOptions {
  /// Round the embedding scales to bf16, as transformers does for a bf16 model. Off by default:
  /// Spark computes activations in f32, which matches transformers run in float32.
  bool roundScalesToBf16 = false;
  /// The checkpoint's safetensors headers, when the directory has them: a quantized checkpoint's
  /// tensors then say which linears are quantized (a weight_scale beside the weight) and the
  /// shapes of their scales, and a MoE checkpoint's how its experts are stored (fused, or one
  /// linear per expert); without them the config decides (its exclude list; experts fused
  /// unless the config quantizes them).
  const rt::Checkpoint *checkpoint = nullptr;
  /// Import the vision tower of a config with a vision_config as `func.func @encode_image`
  /// (spark-import --no-vision turns it off). With checkpoint headers, a checkpoint without the
  /// vision tower's tensors (a text-only extraction) gets no encoder either, and a note says so.
  bool vision = true;
};

/// Builds the module: spark.kv_cache declarations, `func.func @forward` (ids, positions,
/// soft-token embeddings and their indices -> logits), for a multimodal config the vision tower
/// as `func.func @encode_image` (one image's pixel patches and their positions -> its soft
/// tokens), and the `spark.model` attribute. Fails
/// for a quantized module Spark cannot run quantized (the MoE router or experts; an NVFP4
/// linear whose input width is not a multiple of 16), naming it.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> importGemma(const GemmaConfig &config,
                                                              const ImportOptions &options,
                                                              mlir::MLIRContext *context);

/// Checks every spark.weight of `module` against the safetensors checkpoint in `dir` (`opened`,
/// when the caller has opened it already): present, same shape, same dtype. The error names the
/// tensor, the expected and the found.
/// Whether importGemma will build the vision tower for `config` (a vision_config, vision on,
/// and the tower's tensors in the checkpoint when its headers are given).
bool importsVisionTower(const GemmaConfig &config, const ImportOptions &options);

llvm::Error checkWeightsAgainstCheckpoint(mlir::ModuleOp module, llvm::StringRef dir,
                                          const rt::Checkpoint *opened = nullptr);

/// True when `dir` holds model.safetensors.index.json or at least one *.safetensors file.
bool hasSafetensors(llvm::StringRef dir);

/// The --summary report: variant, layer table, parameter counts, the weights' bytes (by element
/// type for a quantized checkpoint) as `module` reads them.
void printSummary(const GemmaConfig &config, mlir::ModuleOp module, llvm::raw_ostream &os);

} // namespace spark

#endif // SPARK_COMPILER_IMPORT_IMPORTGEMMA_H
