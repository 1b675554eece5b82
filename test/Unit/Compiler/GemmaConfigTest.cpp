//===- GemmaConfigTest.cpp - derivations of the Gemma 4 config ------------===//
//
// The derived per-layer facts of gemma4-architecture.md section 1.2, checked on the released
// configs in test/data/configs, and the rejections of configs the importer cannot import exactly.
//
//===----------------------------------------------------------------------===//
#include "compiler/Import/GemmaConfig.h"

#include "gtest/gtest.h"

#include <string>

using namespace spark;

namespace {

GemmaConfig load(const std::string &name) {
  llvm::Expected<GemmaConfig> config =
      parseGemmaConfig(std::string(SPARK_TEST_SOURCE_DIR) + "/data/configs/" + name);
  if (!config) {
    ADD_FAILURE() << llvm::toString(config.takeError());
    return {};
  }
  return *config;
}

std::string errorOf(const std::string &json) {
  llvm::Expected<GemmaConfig> config = parseGemmaConfigText(json, "test.json");
  if (config)
    return "";
  return llvm::toString(config.takeError());
}

const char *kMinimal = R"({"model_type": "gemma4_text", "hidden_size": 64,
  "num_hidden_layers": 2, "vocab_size": 128, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 16, "global_head_dim": 32,
  "intermediate_size": 96, "sliding_window": 8, "eos_token_id": 1 EXTRA})";

std::string minimalWith(const std::string &extra) {
  std::string text = kMinimal;
  text.replace(text.find("EXTRA"), 5, extra);
  return text;
}

TEST(GemmaConfigTest, E2BSharesKvFromLayers13And14) {
  GemmaConfig c = load("gemma-4-e2b");
  ASSERT_EQ(c.layers.size(), 35u);
  EXPECT_EQ(c.weightPrefix, "model.language_model.");
  for (int i = 0; i < 35; ++i) {
    const LayerConfig &l = c.layers[i];
    EXPECT_EQ(l.full, (i + 1) % 5 == 0) << "layer " << i;
    EXPECT_EQ(l.kvShared, i >= 15) << "layer " << i;
    EXPECT_EQ(l.intermediate, i >= 15 ? 12288 : 6144) << "layer " << i;
    if (l.kvShared)
      EXPECT_EQ(l.kvSource, l.full ? 14 : 13) << "layer " << i;
    EXPECT_EQ(l.headDim, l.full ? 512 : 256);
    EXPECT_EQ(l.numKvHeads, 1);
    EXPECT_FALSE(l.kEqV);
  }
  EXPECT_EQ(c.pleDim, 256);
  EXPECT_EQ(c.variant(), "gemma-4-e2b");
}

TEST(GemmaConfigTest, E4BSharesKvFromLayers22And23) {
  GemmaConfig c = load("gemma-4-e4b");
  ASSERT_EQ(c.layers.size(), 42u);
  EXPECT_EQ(c.layers[23].full, true);
  EXPECT_EQ(c.layers[24].kvSource, 22);
  EXPECT_EQ(c.layers[29].kvSource, 23);
  EXPECT_EQ(c.layers[41].kvSource, 23);
  EXPECT_EQ(c.layers[30].intermediate, 10240); // no double-wide MLP on E4B
  EXPECT_EQ(c.layers[5].numKvHeads, 2);        // full layers keep 2 KV heads (no k_eq_v)
}

TEST(GemmaConfigTest, Dense31BFullLayersUseGlobalGeometry) {
  GemmaConfig c = load("gemma-4-31b");
  const LayerConfig &sliding = c.layers[0], &full = c.layers[5];
  EXPECT_FALSE(sliding.full);
  EXPECT_EQ(sliding.headDim, 256);
  EXPECT_EQ(sliding.numKvHeads, 16);
  EXPECT_EQ(sliding.rotatedPairs, 128);
  EXPECT_TRUE(full.full);
  EXPECT_EQ(full.headDim, 512);
  EXPECT_EQ(full.numKvHeads, 4);
  EXPECT_TRUE(full.kEqV);
  EXPECT_EQ(full.rotatedPairs, 64); // proportional RoPE: 0.25 * 512 / 2
  EXPECT_TRUE(c.bidirectionalVision);
  ParameterCounts counts = countParameters(c);
  EXPECT_NEAR(counts.total / 1e9, 30.70, 0.01);
}

TEST(GemmaConfigTest, Moe26BCountsMatchTheSpec) {
  GemmaConfig c = load("gemma-4-26b-a4b");
  EXPECT_TRUE(c.moe);
  EXPECT_EQ(c.numExperts, 128);
  EXPECT_EQ(c.topKExperts, 8);
  EXPECT_EQ(c.moeIntermediate, 704); // from expert_intermediate_size (hub style)
  ParameterCounts counts = countParameters(c);
  EXPECT_NEAR(counts.total / 1e9, 25.23, 0.01);
  EXPECT_NEAR(counts.activePerToken / 1e9, 3.822, 0.002);
  EXPECT_EQ(c.softTokenIds, (std::vector<int64_t>{258880, 258881, 258884}));
}

TEST(GemmaConfigTest, LastLayerIsAlwaysFull) {
  llvm::Expected<GemmaConfig> c = parseGemmaConfigText(minimalWith(""), "t");
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  EXPECT_FALSE(c->layers[0].full);
  EXPECT_TRUE(c->layers[1].full);
  EXPECT_EQ(c->weightPrefix, "model.");
}

TEST(GemmaConfigTest, PerLayerConfigOverridesGeometry) {
  llvm::Expected<GemmaConfig> c = parseGemmaConfigText(
      minimalWith(R"(, "per_layer_config": {"1": {"head_dim": 64, "num_key_value_heads": 1}})"),
      "t");
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->layers[1].headDim, 64);
  EXPECT_EQ(c->layers[1].numKvHeads, 1);
  EXPECT_EQ(c->layers[0].headDim, 16);
}

TEST(GemmaConfigTest, MoeIntermediateSizeKeyOf517) {
  llvm::Expected<GemmaConfig> c = parseGemmaConfigText(
      minimalWith(R"(, "enable_moe_block": true, "num_experts": 4, "top_k_experts": 2,
                     "moe_intermediate_size": 24)"),
      "t");
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->moeIntermediate, 24);
}

TEST(GemmaConfigTest, Rejections) {
  EXPECT_NE(errorOf(R"({"model_type": "llama"})").find("unsupported model_type 'llama'"),
            std::string::npos);
  EXPECT_NE(errorOf("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(errorOf(minimalWith(R"(, "attention_bias": true)")).find("attention_bias"),
            std::string::npos);
  EXPECT_NE(errorOf(minimalWith(R"(, "hidden_activation": "silu")")).find("'silu'"),
            std::string::npos);
  EXPECT_NE(errorOf(minimalWith(R"(, "query_pre_attn_scalar": 256)"))
                .find("'query_pre_attn_scalar' is set"),
            std::string::npos);
  EXPECT_NE(errorOf(minimalWith(R"(, "use_bidirectional_attention": "all")"))
                .find("non-causal"),
            std::string::npos);
  EXPECT_NE(errorOf(minimalWith(R"(, "num_kv_shared_layers": 2)")).find("num_kv_shared_layers"),
            std::string::npos);
  EXPECT_NE(errorOf(minimalWith(R"(, "enable_moe_block": true, "num_experts": 2,
                                   "top_k_experts": 4, "moe_intermediate_size": 8)"))
                .find("top_k_experts (4) exceeds num_experts (2)"),
            std::string::npos);
  EXPECT_NE(errorOf(minimalWith(R"(, "layer_types": ["full_attention"])"))
                .find("layer_types has 1 entries but num_hidden_layers is 2"),
            std::string::npos);
  EXPECT_NE(errorOf(minimalWith(R"(, "rope_parameters": {"sliding_attention":
                                   {"rope_type": "yarn"}})"))
                .find("'yarn' is not supported"),
            std::string::npos);
  std::string heads = R"({"model_type": "gemma4_text", "hidden_size": 64,
    "num_hidden_layers": 2, "vocab_size": 128, "num_attention_heads": 3,
    "num_key_value_heads": 2, "intermediate_size": 96, "eos_token_id": 1})";
  EXPECT_NE(errorOf(heads).find("is not a multiple of num_key_value_heads"), std::string::npos);
  EXPECT_NE(errorOf(R"({"model_type": "gemma4_text"})").find("missing required field 'hidden_size'"),
            std::string::npos);
  std::string noEos = R"({"model_type": "gemma4_text", "hidden_size": 64,
    "num_hidden_layers": 2, "vocab_size": 128, "num_attention_heads": 4,
    "num_key_value_heads": 2, "intermediate_size": 96})";
  EXPECT_NE(errorOf(noEos).find("missing required field 'eos_token_id'"), std::string::npos);
  EXPECT_NE(errorOf(minimalWith(R"(, "rms_norm_eps": -1)")).find("rms_norm_eps must be >= 0"),
            std::string::npos);
}

} // namespace

// Found by fuzz_gemma_config (test/fuzz/regressions/): a head count of 6.7e18 overflowed the
// parameter count. Sizes above kMaxConfigSize are now rejected, and the count saturates.
TEST(GemmaConfigTest, RejectsSizesAboveTheLimit) {
  const std::string path = std::string(SPARK_TEST_SOURCE_DIR) +
                           "/fuzz/regressions/fuzz_gemma_config/num-attention-heads-overflow.json";
  llvm::Expected<GemmaConfig> config = parseGemmaConfig(path);
  ASSERT_FALSE(static_cast<bool>(config));
  EXPECT_NE(llvm::toString(config.takeError())
                .find("field 'text_config.num_attention_heads' is 6666666666666666668, above the "
                      "limit of 16777216"),
            std::string::npos);
}

TEST(GemmaConfigTest, ParameterCountSaturatesInsteadOfOverflowing) {
  GemmaConfig config;
  config.hiddenSize = kMaxConfigSize;
  config.vocabSize = kMaxConfigSize;
  LayerConfig layer;
  layer.numHeads = kMaxConfigSize;
  layer.headDim = kMaxConfigSize;
  layer.numKvHeads = 1;
  layer.intermediate = 1;
  config.layers.push_back(layer);
  const ParameterCounts counts = countParameters(config);
  EXPECT_EQ(counts.total, INT64_MAX);
  EXPECT_EQ(counts.activePerToken, INT64_MAX);
}
