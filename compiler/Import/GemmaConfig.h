//===- GemmaConfig.h - a Gemma 4 config.json, parsed and derived ----*- C++ -*-===//
//
// Reads the HuggingFace config.json of a Gemma 4 checkpoint (transformers 5.5 hub style with
// global_head_dim / num_global_key_value_heads / expert_intermediate_size, or transformers 5.17
// style with per_layer_config / moe_intermediate_size; multimodal top level with text_config or
// text-only) and derives everything gemma4-architecture.md section 1.2 derives: layer types,
// per-layer head dims and KV heads, K = V, KV sharing and sources, double-wide MLP, PLE, MoE.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_COMPILER_IMPORT_GEMMACONFIG_H
#define SPARK_COMPILER_IMPORT_GEMMACONFIG_H

#include "compiler/Import/QuantizationConfig.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace spark {

/// RoPE of one layer type.
struct RopeConfig {
  double theta = 10000.0;
  double partialRotaryFactor = 1.0; // fraction of head_dim that rotates (proportional RoPE)
  double factor = 1.0;              // divides inv_freq
  bool proportional = false;
};

/// One decoder layer, fully resolved.
struct LayerConfig {
  int64_t index = 0;
  bool full = false;          // full_attention (else sliding_attention)
  int64_t headDim = 0;
  int64_t numHeads = 0;
  int64_t numKvHeads = 0;
  bool kEqV = false;          // V is the raw K projection (no v_proj)
  bool kvShared = false;      // reads another layer's KV, owns no k/v projections
  int64_t kvSource = -1;      // the layer whose cache a shared layer reads (else itself)
  int64_t intermediate = 0;   // dense MLP width
  int64_t rotatedPairs = 0;   // RoPE pairs that rotate
};

/// The vision tower of a multimodal checkpoint (config.json `vision_config`, transformers'
/// Gemma4VisionConfig) and the multimodal embedder after it.
struct VisionConfig {
  int64_t hiddenSize = 0;
  int64_t intermediateSize = 0;
  int64_t numLayers = 0;
  int64_t numHeads = 0;
  int64_t numKvHeads = 0;
  int64_t headDim = 0;
  int64_t patchSize = 16;
  int64_t poolingKernel = 3;
  int64_t positionEmbeddingSize = 10240;
  double ropeTheta = 100.0;
  double rmsNormEps = 1e-6;
  bool standardize = false;    // std_bias / std_scale after pooling (26B, 31B)
  bool clippedLinears = false; // input/output clamps around each linear (E2B, E4B)
};

struct GemmaConfig {
  std::string path;             // the config.json it came from
  std::string architecture;     // Gemma4ForConditionalGeneration or Gemma4ForCausalLM
  std::string weightPrefix;     // "model.language_model." or "model."
  std::string dtype = "bfloat16";
  int64_t hiddenSize = 0;
  int64_t numLayers = 0;
  int64_t vocabSize = 0;
  int64_t slidingWindow = 0;
  int64_t maxPositionEmbeddings = 0;
  double rmsNormEps = 1e-6;
  std::optional<double> finalLogitSoftcapping;
  bool tieWordEmbeddings = true;
  // PLE (E2B/E4B)
  int64_t pleDim = 0;
  int64_t pleVocab = 0;
  // KV sharing
  int64_t numKvSharedLayers = 0;
  // MoE (26B-A4B)
  bool moe = false;
  int64_t numExperts = 0;
  int64_t topKExperts = 0;
  int64_t moeIntermediate = 0;
  // token ids
  int64_t padTokenId = 0;
  int64_t bosTokenId = 2;
  std::vector<int64_t> eosTokenIds;
  std::vector<int64_t> softTokenIds; // image / audio / video placeholders, when the config names them
  bool bidirectionalVision = false;
  /// The vision tower, when the config has a vision_config (images in: the encode_image
  /// function), and the ids of the image's placeholder and its begin/end markers (-1: none).
  std::optional<VisionConfig> vision;
  int64_t imageTokenId = -1;
  int64_t boiTokenId = -1;
  int64_t eoiTokenId = -1;
  RopeConfig slidingRope, fullRope;
  std::vector<LayerConfig> layers;
  /// The weights' quantization (config.json quantization_config or hf_quant_config.json);
  /// format kNone for a bf16 checkpoint.
  QuantizationConfig quantization;
  std::vector<std::string> warnings; // fields that were not understood but do not change the math

  /// A short name: the released model it matches (gemma-4-31b, ...) or a description.
  std::string variant() const;
};

/// The largest size (hidden size, head count, head dim, vocabulary, layer count, ...) a config
/// may give; larger values are rejected as damaged (Gemma 4's largest is 262144).
inline constexpr int64_t kMaxConfigSize = int64_t{1} << 24;

/// Parses and validates a config.json (a file, or a checkpoint directory containing one).
llvm::Expected<GemmaConfig> parseGemmaConfig(llvm::StringRef pathOrDir);
/// Same, from text (for tests). `origin` names the source in messages.
llvm::Expected<GemmaConfig> parseGemmaConfigText(llvm::StringRef text, llvm::StringRef origin);

/// Parameter counts in elements: stored (embedding counted once) and read per decoded token;
/// INT64_MAX when the count does not fit in 64 bits.
struct ParameterCounts {
  int64_t total = 0;
  int64_t activePerToken = 0;
};
ParameterCounts countParameters(const GemmaConfig &config);

} // namespace spark

#endif // SPARK_COMPILER_IMPORT_GEMMACONFIG_H
