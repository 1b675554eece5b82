//===- QuantizationConfig.h - a checkpoint's weight quantization -----*- C++ -*-===//
//
// What a quantized Gemma 4 checkpoint says about its weights: NVIDIA ModelOpt's layouts, as
// config.json `quantization_config` (quant_method "modelopt") or hf_quant_config.json describe
// them (gemma4-ecosystem.md section 6). Formats Spark runs:
//   - NVFP4 (quant_algo "NVFP4", group_size 16): per linear X, X.weight U8 [out, in/2] (E2M1
//     codes), X.weight_scale F8_E4M3 [out, in/16], X.weight_scale_2 F32 scalar;
//   - FP8 (quant_algo "FP8": X.weight F8_E4M3 [out, in], X.weight_scale F32 scalar; or
//     "FP8_PER_CHANNEL_PER_TOKEN": X.weight_scale F32 [out]).
// And compressed-tensors (vLLM's llm-compressor; quant_method "compressed-tensors"):
//   - NVFP4: format "nvfp4-pack-quantized", every config group's `weights` 4-bit symmetric float
//     with strategy "tensor_group" and group_size 16; per linear X.weight_packed (ModelOpt's
//     X.weight), X.weight_scale, and X.weight_global_scale F32 [1], the INVERSE of ModelOpt's
//     weight_scale_2 (w = e2m1 * weight_scale / weight_global_scale): imported as its reciprocal
//     (spark.weight {reciprocal});
//   - FP8: format "float-quantized" (or "naive-quantized"), `weights` 8-bit symmetric float with
//     strategy "tensor" (X.weight_scale F32 [1]) or "channel" ([out, 1]), the same tensors as
//     ModelOpt FP8 otherwise;
//   `ignore` holds module names and "re:" regular expressions, `targets` "Linear" or names /
//   "re:" expressions; NVFP4 and FP8 groups in one config are refused.
// Anything else (AWQ, GPTQ, MXFP4, block-wise FP8, compressed-tensors integer schemes, an unknown
// algo, a group size other than 16) is refused with a message naming it: never imported as if
// it were bf16.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_COMPILER_IMPORT_QUANTIZATIONCONFIG_H
#define SPARK_COMPILER_IMPORT_QUANTIZATIONCONFIG_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <string>
#include <vector>

namespace spark {

struct QuantizationConfig {
  enum class Format { kNone, kNvfp4, kFp8 };
  Format format = Format::kNone;
  /// FP8 with one weight scale per output row (FP8_PER_CHANNEL_PER_TOKEN), else per tensor.
  bool fp8PerChannel = false;
  /// The tensors of an NVFP4 linear X, by suffix: X.<codes> (U8 [out, in/2]), X.<blockScale>
  /// (F8_E4M3 [out, in/16]), X.<tensorScale> (F32 [] or [1]); the tensor scale is what the
  /// dequantised weight is multiplied by (ModelOpt's weight_scale_2), or divided by when
  /// `tensorScaleInverted` (compressed-tensors' weight_global_scale).
  struct Nvfp4Tensors {
    std::string codes = "weight", blockScale = "weight_scale", tensorScale = "weight_scale_2";
    bool tensorScaleInverted = false;
  };
  Nvfp4Tensors nvfp4;
  /// The algorithm as the config names it ("NVFP4", "FP8", ...), for messages.
  std::string algo;
  /// Where it was read: "config.json quantization_config" or a path to hf_quant_config.json.
  std::string source;
  /// Modules kept in bf16: fnmatch wildcards over full module names (ModelOpt's `ignore` /
  /// `exclude_modules`; "model.language_model.layers.0*" is a subtree; compressed-tensors'
  /// plain names, which match themselves).
  std::vector<std::string> exclude;
  /// Modules kept in bf16 by regular expression (compressed-tensors' "re:" entries of `ignore`,
  /// matched from the start of the name as Python's re.match does).
  std::vector<std::string> excludeRegex;
  /// compressed-tensors `targets` other than "Linear": only the linears they name (plain names
  /// or "re:" expressions, as above) are quantized. Empty: every linear.
  std::vector<std::string> targets, targetRegex;
  /// What the config asks for that Spark does not apply: activation quantization
  /// (compressed-tensors input_activations) and a quantized KV cache (kv_cache_scheme,
  /// kv_cache_quant_algo). spark-import refuses such a config unless given
  /// --weight-only-quantization (the weights quantized, activations and KV cache not).
  std::vector<std::string> unhonoured;

  bool quantized() const { return format != Format::kNone; }
  /// Whether the config quantizes the linear module `module` (a full name, e.g.
  /// "model.language_model.layers.3.mlp.gate_proj"): not matched by any exclude pattern.
  bool quantizes(llvm::StringRef module) const;
  /// "NVFP4", "FP8" or "FP8 (per channel)".
  std::string formatName() const;
};

/// Reads a config.json `quantization_config` object. `origin` names it in messages.
llvm::Expected<QuantizationConfig> parseQuantizationConfig(const llvm::json::Object &object,
                                                           llvm::StringRef origin);
/// Reads the text of an hf_quant_config.json.
llvm::Expected<QuantizationConfig> parseHfQuantConfig(llvm::StringRef text,
                                                      llvm::StringRef origin);

} // namespace spark

#endif // SPARK_COMPILER_IMPORT_QUANTIZATIONCONFIG_H
