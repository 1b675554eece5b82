// The checkpoint quantizer (checkpoint_quantizer.h) on a small hand-made checkpoint: which tensors
// become which, the configs, progress, and that a failure leaves nothing behind. Byte equality
// with the independent Python implementation is test/tools/spark-quantize's.
#include "spark/runtime/checkpoint_quantizer.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loader_test_util.h"
#include "spark/runtime/host_kernels.h"
#include "spark/runtime/safetensors.h"

namespace spark {
namespace rt {
namespace {

using test::TempDir;

OwnedTensor Bf16Tensor(const std::string& name, std::vector<int64_t> shape, float scale) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::string bytes;
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t bits = F32ToBf16(scale * std::sin(static_cast<float>(i)));
    bytes.append(reinterpret_cast<const char*>(&bits), 2);
  }
  return {name, "BF16", std::move(shape), std::move(bytes)};
}

// A checkpoint with two linears of the text decoder, a norm, the embedding and a router.
void WriteCheckpoint(const TempDir& dir, const std::string& sub, float q_scale = 0.05f) {
  dir.Write(sub + "/config.json", R"({"model_type": "gemma4_text", "hidden_size": 32})");
  dir.Write(sub + "/tokenizer.json", "{}");
  const std::vector<OwnedTensor> tensors = {
      Bf16Tensor("model.embed_tokens.weight", {16, 32}, 0.1f),
      Bf16Tensor("model.layers.0.self_attn.q_proj.weight", {64, 32}, q_scale),
      Bf16Tensor("model.layers.0.mlp.down_proj.weight", {32, 48}, 0.05f),
      Bf16Tensor("model.layers.0.router.proj.weight", {8, 32}, 0.05f),
      Bf16Tensor("model.norm.weight", {32}, 1.0f),
  };
  ASSERT_TRUE(WriteSafetensors(dir.Path(sub + "/model.safetensors"), tensors).ok());
}

TEST(CheckpointQuantizerTest, QuantizesTheLinearsOfTheTextDecoder) {
  TempDir dir;
  WriteCheckpoint(dir, "in");
  QuantizeCheckpointOptions options;
  options.input = dir.Path("in");
  options.output = dir.Path("out");
  options.format = QuantizedFormat::kNvfp4;
  options.threads = 3;
  int progress_calls = 0;
  uint64_t last_done = 0;
  options.on_progress = [&](uint64_t done, uint64_t total, const std::string& file) {
    ++progress_calls;
    EXPECT_LE(done, total);
    EXPECT_GE(done, last_done);
    EXPECT_EQ(file, "model.safetensors");
    last_done = done;
  };
  const absl::StatusOr<QuantizeCheckpointResult> result = QuantizeCheckpoint(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->quantized_layers, 2);  // q_proj, down_proj; not the router
  EXPECT_EQ(result->narrow_layers, 0);
  EXPECT_GT(progress_calls, 0);
  const absl::StatusOr<std::vector<OwnedTensor>> written =
      ReadSafetensorsFile(dir.Path("out/model.safetensors"));
  ASSERT_TRUE(written.ok()) << written.status();
  std::map<std::string, std::pair<std::string, std::vector<int64_t>>> by_name;
  for (const OwnedTensor& t : *written) by_name[t.name] = {t.dtype, t.shape};
  using Entry = std::pair<std::string, std::vector<int64_t>>;
  EXPECT_EQ(by_name["model.layers.0.self_attn.q_proj.weight"], (Entry{"U8", {64, 16}}));
  EXPECT_EQ(by_name["model.layers.0.self_attn.q_proj.weight_scale"], (Entry{"F8_E4M3", {64, 2}}));
  EXPECT_EQ(by_name["model.layers.0.self_attn.q_proj.weight_scale_2"], (Entry{"F32", {}}));
  EXPECT_EQ(by_name["model.layers.0.mlp.down_proj.weight"], (Entry{"U8", {32, 24}}));
  EXPECT_EQ(by_name["model.layers.0.router.proj.weight"], (Entry{"BF16", {8, 32}}));
  EXPECT_EQ(by_name["model.embed_tokens.weight"], (Entry{"BF16", {16, 32}}));
  EXPECT_EQ(by_name.size(), 9u);
  EXPECT_TRUE(std::filesystem::exists(dir.Path("out/hf_quant_config.json")));
  EXPECT_TRUE(std::filesystem::exists(dir.Path("out/tokenizer.json")));
  const absl::StatusOr<std::string> config = ReadFileToString(dir.Path("out/config.json"));
  ASSERT_TRUE(config.ok());
  EXPECT_NE(config->find("\"quant_algo\": \"NVFP4\""), std::string::npos) << *config;
  EXPECT_NE(config->find("\"*router*\""), std::string::npos) << *config;
}

TEST(CheckpointQuantizerTest, AFailureLeavesNoOutput) {
  TempDir dir;
  WriteCheckpoint(dir, "in", std::nanf(""));
  QuantizeCheckpointOptions options;
  options.input = dir.Path("in");
  options.output = dir.Path("out");
  options.format = QuantizedFormat::kFp8;
  const absl::StatusOr<QuantizeCheckpointResult> result = QuantizeCheckpoint(options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("tensor model.layers.0.self_attn.q_proj.weight: "
                                           "element 0 is NaN"),
            absl::string_view::npos)
      << result.status();
  EXPECT_FALSE(std::filesystem::exists(dir.Path("out")));
  // An output directory that existed (empty) before stays, empty.
  std::filesystem::create_directories(dir.Path("empty"));
  options.output = dir.Path("empty");
  EXPECT_FALSE(QuantizeCheckpoint(options).ok());
  EXPECT_TRUE(std::filesystem::is_empty(dir.Path("empty")));
}

// Calibration's input_amax becomes each quantized module's input_scale (amax / (6 x 448) for
// NVFP4, / 448 for FP8; 1 for 0); a fused MoE layer's experts get theirs per expert, and an
// expert no calibration token reached takes the largest of its layer's for that projection; a
// quantized module with no amax at all is an error that leaves no output.
TEST(CheckpointQuantizerTest, CalibrationWritesInputScales) {
  TempDir dir;
  dir.Write("in/config.json", R"({"model_type": "gemma4_text", "hidden_size": 32})");
  const std::vector<OwnedTensor> tensors = {
      Bf16Tensor("model.layers.0.self_attn.q_proj.weight", {64, 32}, 0.05f),
      Bf16Tensor("model.layers.0.mlp.down_proj.weight", {32, 48}, 0.05f),
      Bf16Tensor("model.layers.0.experts.gate_up_proj", {3, 2 * 16, 32}, 0.05f),
      Bf16Tensor("model.layers.0.experts.down_proj", {3, 32, 16}, 0.05f),
  };
  ASSERT_TRUE(WriteSafetensors(dir.Path("in/model.safetensors"), tensors).ok());
  QuantizeCheckpointOptions options;
  options.input = dir.Path("in");
  options.output = dir.Path("out");
  options.format = QuantizedFormat::kNvfp4;
  options.input_amax = {{"model.layers.0.self_attn.q_proj", 26.88f},
                        {"model.layers.0.mlp.down_proj", 0.0f},
                        {"model.layers.0.experts.0.gate_proj", 2.688f},
                        {"model.layers.0.experts.0.up_proj", 2.688f},
                        {"model.layers.0.experts.2.gate_proj", 5.376f},
                        {"model.layers.0.experts.2.up_proj", 5.376f},
                        {"model.layers.0.experts.0.down_proj", 1.0f},
                        {"model.layers.0.experts.1.down_proj", 8.0f},
                        {"model.layers.0.experts.2.down_proj", 4.0f}};
  const absl::StatusOr<QuantizeCheckpointResult> result = QuantizeCheckpoint(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->quantized_layers, 2 + 3 * 3);
  EXPECT_EQ(result->input_scales, 2 + 3 * 3);
  const absl::StatusOr<std::vector<OwnedTensor>> written =
      ReadSafetensorsFile(dir.Path("out/model.safetensors"));
  ASSERT_TRUE(written.ok()) << written.status();
  std::map<std::string, float> scale;
  for (const OwnedTensor& t : *written) {
    if (t.name.size() > 12 && t.name.compare(t.name.size() - 12, 12, ".input_scale") == 0) {
      ASSERT_EQ(t.dtype, "F32");
      ASSERT_EQ(t.bytes.size(), 4u);
      std::memcpy(&scale[t.name.substr(0, t.name.size() - 12)], t.bytes.data(), 4);
    }
  }
  EXPECT_EQ(scale.size(), 11u);
  EXPECT_EQ(scale["model.layers.0.self_attn.q_proj"], 26.88f / 2688.0f);
  EXPECT_EQ(scale["model.layers.0.mlp.down_proj"], 1.0f);
  EXPECT_EQ(scale["model.layers.0.experts.0.gate_proj"], 2.688f / 2688.0f);
  EXPECT_EQ(scale["model.layers.0.experts.1.gate_proj"], 5.376f / 2688.0f);  // not routed
  EXPECT_EQ(scale["model.layers.0.experts.1.up_proj"], 5.376f / 2688.0f);
  EXPECT_EQ(scale["model.layers.0.experts.1.down_proj"], 8.0f / 2688.0f);
  // FP8: amax / 448; a quantized module calibration never reached is an error, nothing written.
  options.format = QuantizedFormat::kFp8;
  options.output = dir.Path("fp8");
  options.input_amax.erase("model.layers.0.mlp.down_proj");
  const absl::StatusOr<QuantizeCheckpointResult> missing = QuantizeCheckpoint(options);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(
                "calibration measured no input for model.layers.0.mlp.down_proj"),
            absl::string_view::npos)
      << missing.status();
  EXPECT_FALSE(std::filesystem::exists(dir.Path("fp8")));
  options.input_amax["model.layers.0.mlp.down_proj"] = 44.8f;
  ASSERT_TRUE(QuantizeCheckpoint(options).ok());
  const absl::StatusOr<std::vector<OwnedTensor>> fp8 =
      ReadSafetensorsFile(dir.Path("fp8/model.safetensors"));
  ASSERT_TRUE(fp8.ok());
  for (const OwnedTensor& t : *fp8) {
    if (t.name == "model.layers.0.mlp.down_proj.input_scale") {
      float v;
      std::memcpy(&v, t.bytes.data(), 4);
      EXPECT_EQ(v, 44.8f / 448.0f);
    }
  }
}

TEST(CheckpointQuantizerTest, FormatNames) {
  EXPECT_EQ(*ParseQuantizedFormat("nvfp4"), QuantizedFormat::kNvfp4);
  EXPECT_EQ(*ParseQuantizedFormat("fp8"), QuantizedFormat::kFp8);
  EXPECT_EQ(ParseQuantizedFormat("int4").status().message(),
            "--format int4: expected nvfp4 or fp8");
}

}  // namespace
}  // namespace rt
}  // namespace spark
