//===- GemmaConfig.cpp - a Gemma 4 config.json, parsed and derived --------===//
#include "compiler/Import/GemmaConfig.h"

#include "compiler/Support/InputFile.h"
#include "spark/runtime/printable_text.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

// The compiler is built without exceptions (LLVM style): nlohmann reports through the SAX
// handler instead of throwing.
#define JSON_NOEXCEPTION
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

using namespace llvm;

namespace spark {
namespace {

/// Reads fields of one JSON object, remembering which keys were consumed, and turns every
/// problem into an error that names the config and the key.
class FieldReader {
public:
  FieldReader(const json::Object &object, StringRef origin, StringRef scope)
      : object(object), origin(origin.str()), scope(scope.str()) {}

  Error error(const Twine &message) const {
    return createStringError(inconvertibleErrorCode(), "%s: %s", origin.c_str(),
                             message.str().c_str());
  }
  /// The field's path for messages, control characters escaped (keys come from the file).
  std::string key(StringRef name) const {
    return rt::PrintableText(scope.empty() ? name.str() : scope + "." + name.str());
  }

  bool has(StringRef name) const {
    const json::Value *v = object.get(name);
    return v && v->kind() != json::Value::Null;
  }
  const json::Value *raw(StringRef name) {
    used.insert(name);
    return object.get(name);
  }

  Expected<int64_t> integer(StringRef name, std::optional<int64_t> fallback = std::nullopt) {
    const json::Value *v = raw(name);
    if (!v || v->kind() == json::Value::Null) {
      if (fallback)
        return *fallback;
      return error("missing required field '" + key(name) + "'");
    }
    if (std::optional<int64_t> n = v->getAsInteger())
      return *n;
    return error("field '" + key(name) + "' must be an integer");
  }
  /// A size: an integer in [1, kMaxConfigSize].
  Expected<int64_t> positive(StringRef name, std::optional<int64_t> fallback = std::nullopt) {
    Expected<int64_t> n = integer(name, fallback);
    if (n && *n <= 0)
      return error(formatv("field '{0}' must be positive, got {1}", key(name), *n));
    if (n && *n > kMaxConfigSize)
      return error(formatv("field '{0}' is {1}, above the limit of {2} (no Gemma 4 size comes "
                           "near it; the config is damaged)",
                           key(name), *n, kMaxConfigSize));
    return n;
  }
  Expected<double> number(StringRef name, std::optional<double> fallback = std::nullopt) {
    const json::Value *v = raw(name);
    if (!v || v->kind() == json::Value::Null) {
      if (fallback)
        return *fallback;
      return error("missing required field '" + key(name) + "'");
    }
    if (std::optional<double> d = v->getAsNumber()) {
      // The graph holds every number as an f32 attribute: 1e39 would become +inf.
      if (!std::isfinite(static_cast<float>(*d)))
        return error(formatv("field '{0}' is {1:e}, which is not a finite 32-bit float", key(name),
                             *d));
      return *d;
    }
    return error("field '" + key(name) + "' must be a number");
  }
  Expected<bool> boolean(StringRef name, bool fallback) {
    const json::Value *v = raw(name);
    if (!v || v->kind() == json::Value::Null)
      return fallback;
    if (std::optional<bool> b = v->getAsBoolean())
      return *b;
    return error("field '" + key(name) + "' must be true or false");
  }
  std::optional<std::string> string(StringRef name) {
    const json::Value *v = raw(name);
    if (!v)
      return std::nullopt;
    if (std::optional<StringRef> s = v->getAsString())
      return s->str();
    return std::nullopt;
  }

  /// Keys of the object nobody read.
  std::vector<std::string> unused() const {
    std::vector<std::string> keys;
    for (const auto &kv : object)
      if (!used.contains(kv.first))
        keys.push_back(kv.first.str());
    llvm::sort(keys);
    return keys;
  }

  void markUsed(StringRef name) { used.insert(name); }
  const std::string &originPath() const { return origin; }

private:
  const json::Object &object;
  std::string origin;
  std::string scope;
  StringSet<> used;
};

/// Keys that are read elsewhere or that do not change the text model's math.
const char *const kIgnoredKeys[] = {
    "architectures", "model_type", "transformers_version", "dtype", "torch_dtype",
    "initializer_range", "use_cache", "attention_dropout", "hidden_activation",
    "text_config", "vision_config", "audio_config", "boi_token_id", "eoi_token_id",
    "boa_token_id", "eoa_token_id", "boi_token_index", "eoi_token_index",
    "vision_soft_tokens_per_image", "audio_soft_tokens_per_image", "image_token_index",
    "mm_tokens_per_image", "output_attentions", "output_hidden_states", "return_dict",
    "is_encoder_decoder", "chunk_size_feed_forward", "tie_word_embeddings", "bos_token_id",
    "eos_token_id", "pad_token_id", "image_token_id", "audio_token_id", "video_token_id",
    "rope_parameters", "layer_types", "per_layer_config", "_name_or_path", "id2label",
    "label2id", "problem_type", "auto_map", "quantization_config", "tokenizer_class",
    "sliding_window_pattern", "rope_scaling", "rope_theta", "rope_local_base_freq",
    "final_logit_softcapping", "attn_logit_softcapping", "query_pre_attn_scalar",
    "use_bidirectional_attention", "attention_bias", "router_aux_loss_coef",
    "output_router_logits", "expert_intermediate_size", "moe_intermediate_size",
    "global_head_dim", "num_global_key_value_heads", "enable_moe_block", "num_experts",
    "top_k_experts", "num_kv_shared_layers", "use_double_wide_mlp", "attention_k_eq_v",
    "hidden_size_per_layer_input", "vocab_size_per_layer_input", "head_dim", "sliding_window",
    "max_position_embeddings", "rms_norm_eps", "vocab_size", "hidden_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "intermediate_size",
    "initializer_factor", "cache_implementation", "final_norm", "use_sliding_window",
};

Expected<std::vector<int64_t>> readIdList(const json::Value *value, StringRef what,
                                          const FieldReader &reader) {
  std::vector<int64_t> ids;
  if (!value || value->kind() == json::Value::Null)
    return ids;
  if (std::optional<int64_t> one = value->getAsInteger())
    return std::vector<int64_t>{*one};
  if (const json::Array *array = value->getAsArray()) {
    for (const json::Value &v : *array) {
      std::optional<int64_t> id = v.getAsInteger();
      if (!id)
        return reader.error("field '" + what + "' must hold integers");
      ids.push_back(*id);
    }
    return ids;
  }
  return reader.error("field '" + what + "' must be an integer or a list of integers");
}

Expected<RopeConfig> readRope(const json::Object *params, StringRef type, bool fullLayer,
                              const FieldReader &outer) {
  RopeConfig rope;
  rope.theta = fullLayer ? 1e6 : 1e4;
  rope.proportional = fullLayer;
  rope.partialRotaryFactor = fullLayer ? 0.25 : 1.0;
  if (!params)
    return rope;
  const json::Object *p = params->getObject(type);
  if (!p)
    return rope;
  FieldReader reader(*p, outer.originPath(), ("rope_parameters." + type).str());
  std::string ropeType = reader.string("rope_type").value_or(fullLayer ? "proportional" : "default");
  if (ropeType != "default" && ropeType != "proportional")
    return outer.error("rope_parameters." + type + ".rope_type '" + ropeType +
                       "' is not supported (expected 'default' or 'proportional')");
  rope.proportional = ropeType == "proportional";
  Expected<double> theta = reader.number("rope_theta", rope.theta);
  if (!theta)
    return theta.takeError();
  rope.theta = *theta;
  Expected<double> partial =
      reader.number("partial_rotary_factor", rope.proportional ? 0.25 : 1.0);
  if (!partial)
    return partial.takeError();
  rope.partialRotaryFactor = *partial;
  Expected<double> factor = reader.number("factor", 1.0);
  if (!factor)
    return factor.takeError();
  rope.factor = *factor;
  if (!(rope.theta > 0) || !(rope.factor > 0) || rope.partialRotaryFactor <= 0 ||
      rope.partialRotaryFactor > 1)
    return outer.error("rope_parameters." + type +
                       " needs rope_theta > 0, factor > 0 and 0 < partial_rotary_factor <= 1");
  for (const std::string &k : reader.unused())
    if (k != "rope_type")
      return outer.error("rope_parameters." + type + "." + k +
                         " is not understood and would change the RoPE math; refusing to import");
  return rope;
}

Error checkMathChangingFields(FieldReader &text, const json::Object &object) {
  auto isSet = [&](StringRef k) {
    const json::Value *v = object.get(k);
    return v && v->kind() != json::Value::Null;
  };
  for (StringRef k : {"attn_logit_softcapping", "query_pre_attn_scalar", "rope_scaling"})
    if (isSet(k))
      return text.error("field '" + k.str() +
                        "' is set, but Gemma 4 has no such term; this config is not a Gemma 4 "
                        "text model Spark can import exactly");
  if (std::optional<std::string> act = text.string("hidden_activation"))
    if (*act != "gelu_pytorch_tanh")
      return text.error("hidden_activation '" + *act +
                        "' is not supported (Gemma 4 uses gelu_pytorch_tanh)");
  Expected<bool> bias = text.boolean("attention_bias", false);
  if (!bias)
    return bias.takeError();
  if (*bias)
    return text.error("attention_bias = true is not supported (Gemma 4 has no biases)");
  return Error::success();
}

} // namespace

std::string GemmaConfig::variant() const {
  struct Known {
    int64_t hidden, layers;
    bool moe;
    const char *name;
  };
  static const Known kKnown[] = {{2816, 30, true, "gemma-4-26b-a4b"},
                                 {5376, 60, false, "gemma-4-31b"},
                                 {2560, 42, false, "gemma-4-e4b"},
                                 {1536, 35, false, "gemma-4-e2b"}};
  for (const Known &k : kKnown)
    if (k.hidden == hiddenSize && k.layers == numLayers && k.moe == moe && vocabSize == 262144)
      return k.name;
  std::string kind = moe ? "moe" : pleDim > 0 ? "ple" : "dense";
  return formatv("gemma4-{0}-h{1}-l{2}", kind, hiddenSize, numLayers).str();
}

namespace {

/// The structure of config.json before llvm::json reads it: llvm::json::parse recurses once per
/// nesting level (a 35,000-deep array overflows the stack) and keeps the last of two equal keys.
/// nlohmann's SAX parser is iterative, so this check itself cannot overflow; it stops at the
/// first problem. Syntax errors are left to llvm::json, whose messages the importer reports.
class ConfigStructureCheck final : public nlohmann::json_sax<nlohmann::json> {
public:
  /// A real config nests 3 levels (text_config.rope_parameters.full_attention).
  static constexpr size_t kMaxDepth = 32;

  const std::string &problem() const { return problem_; }

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t &) override { return true; }
  bool string(string_t &) override { return true; }
  bool binary(binary_t &) override { return true; }
  bool start_object(std::size_t) override {
    scopes_.push_back({true, {}, ""});
    return withinDepth();
  }
  bool key(string_t &name) override {
    Scope &scope = scopes_.back();
    if (!scope.keys.insert(name).second) {
      problem_ = formatv("key '{0}' appears twice in {1}; a config must name each field once",
                         rt::PrintableText(name), path())
                     .str();
      return false;
    }
    scope.lastKey = name;
    return true;
  }
  bool end_object() override {
    scopes_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    scopes_.push_back({false, {}, ""});
    return withinDepth();
  }
  bool end_array() override {
    scopes_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string &, const nlohmann::detail::exception &) override {
    return false;
  }

private:
  struct Scope {
    bool object;
    std::set<std::string> keys;
    std::string lastKey;
  };
  bool withinDepth() {
    if (scopes_.size() <= kMaxDepth)
      return true;
    problem_ = formatv("the JSON nests more than {0} levels deep (no config comes near that; the "
                       "file is damaged or hostile)",
                       kMaxDepth)
                   .str();
    return false;
  }
  /// "the top-level object", "object 'text_config'", ...
  std::string path() const {
    std::string p;
    for (size_t i = 0; i + 1 < scopes_.size(); ++i)
      if (scopes_[i].object)
        p += (p.empty() ? "" : ".") + scopes_[i].lastKey;
    return p.empty() ? "the top-level object" : "object '" + rt::PrintableText(p) + "'";
  }

  std::vector<Scope> scopes_;
  std::string problem_;
};

} // namespace

/// Reads `vision_config` (transformers' Gemma4VisionConfig; its defaults where a field is
/// absent, the sizes required).
/// Keys of vision_config that do not change the tower's math (transformers' to_dict writes them).
const char *const kIgnoredVisionKeys[] = {
    "model_type", "transformers_version", "architectures", "dtype", "torch_dtype", "_name_or_path",
    "id2label", "label2id", "problem_type", "return_dict", "output_attentions",
    "output_hidden_states", "chunk_size_feed_forward", "is_encoder_decoder", "initializer_range",
    "attention_dropout", "max_position_embeddings", "tie_word_embeddings",
};

Expected<VisionConfig> readVisionConfig(const json::Object &object, StringRef origin,
                                        std::vector<std::string> &warnings) {
  FieldReader reader(object, origin, "vision_config");
  VisionConfig v;
#define SPARK_READ_VISION(expr, out)                                                           \
  if (auto value = (expr))                                                                     \
    out = *value;                                                                              \
  else                                                                                         \
    return value.takeError()
  SPARK_READ_VISION(reader.positive("hidden_size"), v.hiddenSize);
  SPARK_READ_VISION(reader.positive("intermediate_size"), v.intermediateSize);
  SPARK_READ_VISION(reader.positive("num_hidden_layers"), v.numLayers);
  SPARK_READ_VISION(reader.positive("num_attention_heads"), v.numHeads);
  SPARK_READ_VISION(reader.positive("num_key_value_heads", v.numHeads), v.numKvHeads);
  SPARK_READ_VISION(reader.positive("head_dim", v.hiddenSize / v.numHeads), v.headDim);
  SPARK_READ_VISION(reader.positive("patch_size", 16), v.patchSize);
  SPARK_READ_VISION(reader.positive("pooling_kernel_size", 3), v.poolingKernel);
  SPARK_READ_VISION(reader.positive("position_embedding_size", 10240), v.positionEmbeddingSize);
  SPARK_READ_VISION(reader.number("rms_norm_eps", 1e-6), v.rmsNormEps);
  SPARK_READ_VISION(reader.boolean("standardize", false), v.standardize);
  SPARK_READ_VISION(reader.boolean("use_clipped_linears", false), v.clippedLinears);
  if (const json::Object *rope = object.getObject("rope_parameters")) {
    FieldReader ropeReader(*rope, origin, "vision_config.rope_parameters");
    std::string type = ropeReader.string("rope_type").value_or("default");
    if (type != "default" && type != "axial")
      return reader.error("vision_config.rope_parameters.rope_type '" + type +
                          "' is not supported (expected 'axial' or 'default': the 2-D RoPE of "
                          "Gemma 4's vision tower)");
    SPARK_READ_VISION(ropeReader.number("rope_theta", 100.0), v.ropeTheta);
  }
  reader.markUsed("rope_parameters");
#undef SPARK_READ_VISION
  Expected<bool> bias = reader.boolean("attention_bias", false);
  if (!bias)
    return bias.takeError();
  if (*bias)
    return reader.error("vision_config.attention_bias true is not supported (Gemma 4's vision "
                        "tower has no attention biases)");
  std::string activation = reader.string("hidden_activation").value_or("gelu_pytorch_tanh");
  if (activation != "gelu_pytorch_tanh")
    return reader.error("vision_config.hidden_activation '" + activation +
                        "' is not supported (Gemma 4's vision tower uses gelu_pytorch_tanh)");
  if (v.patchSize != 16)
    return reader.error(formatv("vision_config.patch_size {0} is not supported: Spark's image "
                                "preprocessing cuts 16x16 patches, as Gemma 4's processor does",
                                v.patchSize));
  if (v.poolingKernel != 3)
    return reader.error(formatv("vision_config.pooling_kernel_size {0} is not supported: Spark's "
                                "image preprocessing pools 3x3 patches into one soft token, as "
                                "Gemma 4's processor does",
                                v.poolingKernel));
  if (v.numHeads % v.numKvHeads != 0)
    return reader.error(formatv("vision_config.num_attention_heads ({0}) is not a multiple of "
                                "num_key_value_heads ({1})",
                                v.numHeads, v.numKvHeads));
  if (v.headDim % 4 != 0)
    return reader.error(formatv("vision_config.head_dim {0} is not a multiple of 4 (the 2-D RoPE "
                                "rotates two halves of rotate-half pairs)",
                                v.headDim));
  for (const std::string &k : reader.unused())
    if (!llvm::is_contained(kIgnoredVisionKeys, k))
      warnings.push_back("field '" + reader.key(k) + "' is not used by the importer");
  if (!(v.ropeTheta > 0) || !(v.rmsNormEps >= 0))
    return reader.error("vision_config needs a positive rope_theta and a non-negative "
                        "rms_norm_eps");
  if (v.numHeads * v.headDim > std::numeric_limits<int32_t>::max() ||
      v.positionEmbeddingSize * v.hiddenSize * 2 > std::numeric_limits<int32_t>::max())
    return reader.error("vision_config sizes do not fit the kernels' 32-bit sizes (the config "
                        "is damaged)");
  return v;
}

Expected<GemmaConfig> parseGemmaConfigText(StringRef source, StringRef origin) {
  ConfigStructureCheck structure;
  nlohmann::json::sax_parse(source.begin(), source.end(), &structure);
  if (!structure.problem().empty())
    return createStringError(inconvertibleErrorCode(), "%s: %s", origin.str().c_str(),
                             structure.problem().c_str());
  Expected<json::Value> root = json::parse(source);
  if (!root)
    return createStringError(inconvertibleErrorCode(), "%s: not valid JSON: %s",
                             origin.str().c_str(), toString(root.takeError()).c_str());
  const json::Object *top = root->getAsObject();
  if (!top)
    return createStringError(inconvertibleErrorCode(), "%s: expected a JSON object",
                             origin.str().c_str());

  GemmaConfig config;
  config.path = origin.str();
  FieldReader topReader(*top, origin, "");
  std::string modelType = topReader.string("model_type").value_or("");
  const json::Object *textObject = top->getObject("text_config");
  if (modelType == "gemma4") {
    if (!textObject)
      return topReader.error("model_type 'gemma4' needs a 'text_config' object");
    config.architecture = "Gemma4ForConditionalGeneration";
    config.weightPrefix = "model.language_model.";
  } else if (modelType == "gemma4_text") {
    textObject = top;
    config.architecture = "Gemma4ForCausalLM";
    config.weightPrefix = "model.";
  } else {
    return topReader.error("unsupported model_type '" + modelType +
                           "' (expected 'gemma4' or 'gemma4_text')");
  }
  // Quantized checkpoints: ModelOpt NVFP4 / FP8 and compressed-tensors FP8 are read
  // (QuantizationConfig.h); anything else (AWQ, GPTQ, MXFP4, other compressed-tensors schemes,
  // ...) is refused, naming what the config says.
  for (const json::Object *object : {top, textObject}) {
    const json::Value *quantization = object->get("quantization_config");
    if (!quantization || quantization->kind() == json::Value::Null)
      continue;
    const json::Object *q = quantization->getAsObject();
    if (!q)
      return topReader.error("quantization_config must be an object");
    Expected<QuantizationConfig> parsed = parseQuantizationConfig(*q, origin);
    if (!parsed)
      return parsed.takeError();
    config.quantization = std::move(*parsed);
    break;
  }
  if (const json::Array *archs = top->getArray("architectures"))
    if (!archs->empty())
      if (std::optional<StringRef> a = (*archs)[0].getAsString()) {
        if (*a == "Gemma4ForCausalLM")
          config.weightPrefix = "model.";
        else if (*a == "Gemma4ForConditionalGeneration")
          config.weightPrefix = "model.language_model.";
        config.architecture = a->str();
      }

  FieldReader text(*textObject, origin, textObject == top ? "" : "text_config");
  if (Error e = checkMathChangingFields(text, *textObject))
    return std::move(e);

  auto need = [](auto expected, auto &out) -> Error {
    if (!expected)
      return expected.takeError();
    out = *expected;
    return Error::success();
  };
#define SPARK_READ(expr, out)                                                                  \
  if (Error e = need(expr, out))                                                               \
    return std::move(e);

  SPARK_READ(text.positive("hidden_size"), config.hiddenSize);
  SPARK_READ(text.positive("num_hidden_layers"), config.numLayers);
  SPARK_READ(text.positive("vocab_size"), config.vocabSize);
  int64_t numHeads, numKvHeads, headDim, globalHeadDim, intermediate;
  SPARK_READ(text.positive("num_attention_heads"), numHeads);
  SPARK_READ(text.positive("num_key_value_heads"), numKvHeads);
  SPARK_READ(text.positive("head_dim", 256), headDim);
  SPARK_READ(text.positive("global_head_dim", 512), globalHeadDim);
  SPARK_READ(text.positive("intermediate_size"), intermediate);
  SPARK_READ(text.positive("sliding_window", 1024), config.slidingWindow);
  SPARK_READ(text.positive("max_position_embeddings", 131072), config.maxPositionEmbeddings);
  SPARK_READ(text.number("rms_norm_eps", 1e-6), config.rmsNormEps);
  if (!(config.rmsNormEps >= 0))
    return text.error(formatv("rms_norm_eps must be >= 0, got {0}", config.rmsNormEps));
  SPARK_READ(text.boolean("tie_word_embeddings", true), config.tieWordEmbeddings);
  SPARK_READ(text.integer("hidden_size_per_layer_input", 0), config.pleDim);
  SPARK_READ(text.positive("vocab_size_per_layer_input", config.vocabSize), config.pleVocab);
  SPARK_READ(text.integer("num_kv_shared_layers", 0), config.numKvSharedLayers);
  SPARK_READ(text.boolean("enable_moe_block", false), config.moe);
  bool kEqV, doubleWide;
  SPARK_READ(text.boolean("attention_k_eq_v", false), kEqV);
  SPARK_READ(text.boolean("use_double_wide_mlp", false), doubleWide);
  std::optional<int64_t> globalKvHeads;
  if (text.has("num_global_key_value_heads")) {
    int64_t n;
    SPARK_READ(text.positive("num_global_key_value_heads"), n);
    globalKvHeads = n;
  } else {
    text.markUsed("num_global_key_value_heads");
  }
  if (text.has("final_logit_softcapping")) {
    double cap;
    SPARK_READ(text.number("final_logit_softcapping"), cap);
    if (!(cap > 0))
      return text.error("final_logit_softcapping must be positive");
    config.finalLogitSoftcapping = cap;
  } else {
    text.markUsed("final_logit_softcapping");
  }
  if (config.moe) {
    SPARK_READ(text.positive("num_experts"), config.numExperts);
    SPARK_READ(text.positive("top_k_experts"), config.topKExperts);
    if (text.has("moe_intermediate_size")) {
      SPARK_READ(text.positive("moe_intermediate_size"), config.moeIntermediate);
    } else if (text.has("expert_intermediate_size")) {
      SPARK_READ(text.positive("expert_intermediate_size"), config.moeIntermediate);
    } else {
      return text.error("missing required field 'moe_intermediate_size' (or "
                        "'expert_intermediate_size')");
    }
    if (config.topKExperts > config.numExperts)
      return text.error(formatv("top_k_experts ({0}) exceeds num_experts ({1})",
                                config.topKExperts, config.numExperts));
  }
  std::optional<std::string> bidi = text.string("use_bidirectional_attention");
  if (bidi && *bidi == "all")
    return text.error("use_bidirectional_attention = \"all\" (non-causal text attention) is "
                      "not supported");
  config.bidirectionalVision = bidi && *bidi == "vision";
  if (std::optional<std::string> dtype = text.string("dtype"))
    config.dtype = *dtype;
  else if (std::optional<std::string> dtype = topReader.string("torch_dtype"))
    config.dtype = *dtype;

  // Token ids: the top level first, then the text config (as transformers' GenerationConfig
  // does: the hub configs list eos [1, 106] at the top and 1 in text_config).
  auto idsFrom = [&](StringRef k) -> Expected<std::vector<int64_t>> {
    const json::Value *v = top->get(k);
    if (!v || v->kind() == json::Value::Null)
      v = textObject->get(k);
    return readIdList(v, k, text);
  };
  std::vector<int64_t> ids;
  SPARK_READ(idsFrom("eos_token_id"), config.eosTokenIds);
  SPARK_READ(idsFrom("pad_token_id"), ids);
  config.padTokenId = ids.empty() ? 0 : ids[0];
  SPARK_READ(idsFrom("bos_token_id"), ids);
  config.bosTokenId = ids.empty() ? 2 : ids[0];
  for (StringRef k : {"image_token_id", "audio_token_id", "video_token_id"}) {
    SPARK_READ(idsFrom(k), ids);
    for (int64_t id : ids)
      if (id >= 0 && id < config.vocabSize)
        config.softTokenIds.push_back(id);
  }
  if (config.softTokenIds.size() > 3)
    config.softTokenIds.resize(3);
  // The image placeholder and its begin/end markers (the processor's expansion of each image).
  for (auto [k, out] : {std::pair<StringRef, int64_t *>{"image_token_id", &config.imageTokenId},
                        {"boi_token_id", &config.boiTokenId},
                        {"eoi_token_id", &config.eoiTokenId}}) {
    SPARK_READ(idsFrom(k), ids);
    if (ids.size() == 1 && ids[0] >= 0 && ids[0] < config.vocabSize)
      *out = ids[0];
  }
  if (const json::Value *vision = top->get("vision_config");
      textObject != top && vision && vision->kind() != json::Value::Null) {
    const json::Object *visionObject = vision->getAsObject();
    if (!visionObject)
      return topReader.error("vision_config must be an object or null");
    SPARK_READ(readVisionConfig(*visionObject, origin, config.warnings), config.vision);
    if (config.imageTokenId < 0 || config.boiTokenId < 0 || config.eoiTokenId < 0)
      return topReader.error("a vision_config needs image_token_id, boi_token_id and "
                             "eoi_token_id in the vocabulary (each image is expanded to "
                             "boi + image tokens + eoi)");
  }

  // Consistency.
  if (config.numKvSharedLayers < 0 || config.numKvSharedLayers >= config.numLayers)
    return text.error(formatv("num_kv_shared_layers ({0}) must be in [0, num_hidden_layers = {1})",
                              config.numKvSharedLayers, config.numLayers));
  if (config.pleDim < 0 || config.pleDim > kMaxConfigSize)
    return text.error(formatv("hidden_size_per_layer_input must be in [0, {0}]", kMaxConfigSize));
  if (config.pleDim * config.numLayers > std::numeric_limits<int32_t>::max())
    return text.error(formatv("hidden_size_per_layer_input x num_hidden_layers = {0} does not fit "
                              "the kernels' 32-bit sizes",
                              config.pleDim * config.numLayers));
  if (numHeads % numKvHeads != 0)
    return text.error(formatv("num_attention_heads ({0}) is not a multiple of "
                              "num_key_value_heads ({1})", numHeads, numKvHeads));
  if (globalKvHeads && numHeads % *globalKvHeads != 0)
    return text.error(formatv("num_attention_heads ({0}) is not a multiple of "
                              "num_global_key_value_heads ({1})", numHeads, *globalKvHeads));
  if (headDim % 2 || globalHeadDim % 2)
    return text.error("head_dim and global_head_dim must be even");
  if (config.eosTokenIds.empty())
    return text.error("missing required field 'eos_token_id'");
  for (auto [name, id] : {std::pair{"pad_token_id", config.padTokenId},
                          std::pair{"bos_token_id", config.bosTokenId}})
    if (id < 0 || id >= config.vocabSize)
      return text.error(formatv("{0} {1} is outside the vocabulary [0, {2})", name, id,
                                config.vocabSize));
  for (int64_t id : config.eosTokenIds)
    if (id < 0 || id >= config.vocabSize)
      return text.error(formatv("eos_token_id {0} is outside the vocabulary [0, {1})", id,
                                config.vocabSize));

  // RoPE per layer type.
  const json::Object *ropeParams = textObject->getObject("rope_parameters");
  {
    Expected<RopeConfig> s = readRope(ropeParams, "sliding_attention", false, text);
    if (!s)
      return s.takeError();
    config.slidingRope = *s;
    Expected<RopeConfig> f = readRope(ropeParams, "full_attention", true, text);
    if (!f)
      return f.takeError();
    config.fullRope = *f;
  }

  // Layer types (section 1.2.1): given, or the 5:1 pattern; the last layer is always full.
  std::vector<bool> full(config.numLayers);
  if (const json::Value *v = textObject->get("layer_types");
      v && v->kind() != json::Value::Null && !v->getAsArray())
    return text.error("field 'layer_types' must be a list of \"full_attention\" or "
                      "\"sliding_attention\"");
  if (const json::Array *types = textObject->getArray("layer_types")) {
    if (static_cast<int64_t>(types->size()) != config.numLayers)
      return text.error(formatv("layer_types has {0} entries but num_hidden_layers is {1}",
                                types->size(), config.numLayers));
    for (auto [i, v] : llvm::enumerate(*types)) {
      std::optional<StringRef> s = v.getAsString();
      if (!s || (*s != "full_attention" && *s != "sliding_attention"))
        return text.error(formatv("layer_types[{0}] must be \"full_attention\" or "
                                  "\"sliding_attention\"", i));
      full[i] = *s == "full_attention";
    }
  } else {
    for (int64_t i = 0; i < config.numLayers; ++i)
      full[i] = (i + 1) % 6 == 0;
  }
  full.back() = true;

  // Explicit per-layer overrides (transformers 5.17), by layer index or layer type.
  const json::Object *perLayer = textObject->getObject("per_layer_config");
  if (!perLayer && text.has("per_layer_config"))
    return text.error("per_layer_config must be an object");
  if (perLayer) {
    // Keys are layer indices (transformers may zero-pad them) or layer types; anything else
    // would be silently ignored.
    for (const auto &[key, value] : *perLayer) {
      StringRef k = key;
      unsigned long long index = 0;
      bool isType = k == "full_attention" || k == "sliding_attention";
      if (!isType && (k.getAsInteger(10, index) || index >= uint64_t(config.numLayers)))
        return text.error(formatv("per_layer_config key '{0}' is neither a layer index in [0, "
                                  "{1}) nor full_attention / sliding_attention",
                                  rt::PrintableText(k.str()), config.numLayers));
      if (!value.getAsObject())
        return text.error(
            formatv("per_layer_config['{0}'] must be an object", rt::PrintableText(k.str())));
    }
  }
  auto overrideOf = [&](int64_t i, bool isFull, StringRef k) -> std::optional<int64_t> {
    if (!perLayer)
      return std::nullopt;
    // The layer's own entry (its index, maybe zero-padded) first, then its type's.
    const json::Object *byIndex = nullptr;
    for (const auto &[key, value] : *perLayer) {
      unsigned long long index = 0;
      if (!StringRef(key).getAsInteger(10, index) && index == uint64_t(i))
        byIndex = value.getAsObject();
    }
    for (const json::Object *o :
         {byIndex, perLayer->getObject(isFull ? "full_attention" : "sliding_attention")})
      if (o)
        if (const json::Value *v = o->get(k))
          if (std::optional<int64_t> n = v->getAsInteger())
            return *n;
    return std::nullopt;
  };

  int64_t firstShared = config.numLayers - config.numKvSharedLayers;
  int64_t lastSliding = -1, lastFull = -1;
  for (int64_t i = 0; i < firstShared; ++i)
    (full[i] ? lastFull : lastSliding) = i;
  for (int64_t i = 0; i < config.numLayers; ++i) {
    LayerConfig layer;
    layer.index = i;
    layer.full = full[i];
    layer.numHeads = numHeads;
    layer.headDim = overrideOf(i, full[i], "head_dim").value_or(full[i] ? globalHeadDim : headDim);
    layer.numKvHeads = numKvHeads;
    if (full[i] && kEqV && globalKvHeads)
      layer.numKvHeads = *globalKvHeads;
    layer.numKvHeads = overrideOf(i, full[i], "num_key_value_heads").value_or(layer.numKvHeads);
    layer.kEqV = full[i] && kEqV;
    layer.kvShared = config.numKvSharedLayers > 0 && i >= firstShared;
    layer.kvSource = i;
    if (layer.kvShared) {
      layer.kvSource = full[i] ? lastFull : lastSliding;
      if (layer.kvSource < 0)
        return text.error(formatv("layer {0} shares KV with the last non-shared {1} layer, but "
                                  "there is none before layer {2}",
                                  i, full[i] ? "full" : "sliding", firstShared));
    }
    layer.intermediate = intermediate * (doubleWide && layer.kvShared ? 2 : 1);
    layer.intermediate =
        overrideOf(i, full[i], "intermediate_size").value_or(layer.intermediate);
    if (layer.intermediate <= 0 || layer.intermediate > kMaxConfigSize)
      return text.error(formatv("layer {0}: intermediate_size must be in [1, {2}], got {1}", i,
                                layer.intermediate, kMaxConfigSize));
    if (layer.headDim <= 0 || layer.headDim > kMaxConfigSize || layer.headDim % 2 ||
        layer.numKvHeads <= 0 || layer.numKvHeads > kMaxConfigSize ||
        layer.numHeads % layer.numKvHeads)
      return text.error(formatv("layer {0}: inconsistent attention geometry ({1} heads, {2} KV "
                                "heads, head_dim {3})",
                                i, layer.numHeads, layer.numKvHeads, layer.headDim));
    // The projections' widths are 32-bit kernel arguments (each factor was checked to be
    // below 2^24 just above, so the products fit int64).
    for (auto [what, width] :
         {std::pair<const char *, int64_t>{"num_attention_heads x head_dim",
                                           layer.numHeads * layer.headDim},
          {"num_key_value_heads x head_dim", layer.numKvHeads * layer.headDim}})
      if (width > std::numeric_limits<int32_t>::max())
        return text.error(formatv("layer {0}: {1} = {2} does not fit the kernels' 32-bit sizes "
                                  "(no Gemma 4 size comes near it; the config is damaged)",
                                  i, what, width));
    const RopeConfig &rope = full[i] ? config.fullRope : config.slidingRope;
    layer.rotatedPairs = rope.proportional
                             ? static_cast<int64_t>(rope.partialRotaryFactor * layer.headDim) / 2
                             : layer.headDim / 2;
    config.layers.push_back(layer);
  }
  // A shared layer reads its source's cache, so the geometry must agree.
  for (const LayerConfig &layer : config.layers)
    if (layer.kvShared) {
      const LayerConfig &src = config.layers[layer.kvSource];
      if (src.headDim != layer.headDim || src.numKvHeads != layer.numKvHeads)
        return text.error(formatv("layer {0} shares KV with layer {1} but their KV geometry "
                                  "differs", layer.index, src.index));
    }

  for (const std::string &k : text.unused())
    if (!llvm::is_contained(kIgnoredKeys, k))
      config.warnings.push_back("field '" + text.key(k) + "' is not used by the importer");
#undef SPARK_READ
  return config;
}

Expected<GemmaConfig> parseGemmaConfig(StringRef pathOrDir) {
  SmallString<256> path(pathOrDir);
  if (sys::fs::is_directory(path))
    sys::path::append(path, "config.json");
  Expected<std::unique_ptr<MemoryBuffer>> buffer = readInputFile(path, kConfigJsonInput);
  if (!buffer)
    return buffer.takeError();
  Expected<GemmaConfig> config = parseGemmaConfigText((*buffer)->getBuffer(), path);
  if (!config)
    return config.takeError();
  // ModelOpt may describe the quantization in a file of its own next to config.json (it writes
  // both; they must agree).
  SmallString<256> quantPath = sys::path::parent_path(path);
  sys::path::append(quantPath, "hf_quant_config.json");
  if (!sys::fs::exists(quantPath))
    return config;
  Expected<std::unique_ptr<MemoryBuffer>> quantText = readInputFile(quantPath, kConfigJsonInput);
  if (!quantText)
    return quantText.takeError();
  Expected<QuantizationConfig> fromFile = parseHfQuantConfig((*quantText)->getBuffer(), quantPath);
  if (!fromFile)
    return fromFile.takeError();
  if (config->quantization.quantized() &&
      config->quantization.formatName() != fromFile->formatName())
    return createStringError(inconvertibleErrorCode(),
                             "%s: says %s, but config.json's quantization_config says %s; which "
                             "one describes the weights?",
                             quantPath.c_str(), fromFile->formatName().c_str(),
                             config->quantization.formatName().c_str());
  config->quantization = std::move(*fromFile);
  return config;
}

namespace {

/// int64 arithmetic that sticks at INT64_MAX instead of overflowing (every operand is >= 0): the
/// count of an absurd but accepted config is "too many", never undefined behaviour.
struct Count {
  int64_t v = 0;
  Count(int64_t value = 0) : v(value) {}
  friend Count operator+(Count a, Count b) {
    int64_t r;
    return __builtin_add_overflow(a.v, b.v, &r) ? Count(INT64_MAX) : Count(r);
  }
  friend Count operator*(Count a, Count b) {
    int64_t r;
    return __builtin_mul_overflow(a.v, b.v, &r) ? Count(INT64_MAX) : Count(r);
  }
  Count &operator+=(Count b) { return *this = *this + b; }
};

} // namespace

ParameterCounts countParameters(const GemmaConfig &c) {
  Count total, active;
  const Count h = c.hiddenSize;
  const Count head = Count(c.vocabSize) * h; // tied: the embedding is also the LM head
  total += head;
  active += head;
  if (!c.tieWordEmbeddings)
    total += head;
  total += h; // final norm
  if (c.pleDim > 0) {
    const Count L = c.numLayers, dp = c.pleDim;
    total += Count(c.pleVocab) * L * dp + L * dp * h + dp;
    active += L * dp * h + dp;
  }
  for (const LayerConfig &l : c.layers) {
    Count attn = Count(l.numHeads) * l.headDim * h * 2 + l.headDim; // q, o, q_norm
    if (!l.kvShared)
      attn += Count(l.numKvHeads) * l.headDim * h * (l.kEqV ? 1 : 2) + l.headDim; // k, v, k_norm
    const Count mlp = Count(3) * l.intermediate * h;
    const Count norms = Count(4) * h + 1; // + layer_scalar
    const Count shared = attn + mlp + norms;
    Count stored = shared, activeLayer = shared;
    if (c.moe) {
      const Count router = Count(c.numExperts) * h + h + c.numExperts;
      const Count perExpert = Count(3) * c.moeIntermediate * h;
      stored += router + Count(c.numExperts) * perExpert + Count(3) * h;
      activeLayer += router + Count(c.topKExperts) * perExpert + Count(3) * h;
    }
    if (c.pleDim > 0) {
      const Count ple = Count(2) * c.pleDim * h + h;
      stored += ple;
      activeLayer += ple;
    }
    total += stored;
    active += activeLayer;
  }
  return {total.v, active.v};
}

} // namespace spark
