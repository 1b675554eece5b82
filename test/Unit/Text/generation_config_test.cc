// LoadGenerationConfig (generation_config.h): what it honours, what it refuses.
#include "spark/runtime/generation_config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace spark {
namespace rt {
namespace {

class GenerationConfigTest : public ::testing::Test {
 protected:
  GenerationConfigTest() {
    std::string pattern = (std::filesystem::temp_directory_path() / "spark_gencfg_XXXXXX").string();
    dir_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : "";
  }
  ~GenerationConfigTest() override { std::filesystem::remove_all(dir_); }

  absl::StatusOr<GenerationConfig> Load(const std::string& text) {
    std::ofstream(dir_ + "/generation_config.json") << text;
    return LoadGenerationConfig(dir_);
  }

  std::string dir_;
};

TEST_F(GenerationConfigTest, NoFileIsAnEmptyConfig) {
  absl::StatusOr<GenerationConfig> config = LoadGenerationConfig(dir_);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->path.empty());
  EXPECT_TRUE(config->eos_token_ids.empty());
  EXPECT_FALSE(config->temperature.has_value());
}

TEST_F(GenerationConfigTest, ReadsGemma4sConfig) {
  absl::StatusOr<GenerationConfig> config =
      Load(R"({"bos_token_id": 2, "do_sample": true, "eos_token_id": [1, 106, 50],
               "pad_token_id": 0, "temperature": 1.0, "top_k": 64, "top_p": 0.95,
               "transformers_version": "5.5.0"})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->eos_token_ids, (std::vector<int32_t>{1, 106, 50}));
  EXPECT_EQ(*config->temperature, 1.0f);
  EXPECT_EQ(*config->top_k, 64);
  EXPECT_EQ(*config->top_p, 0.95f);
  // Defaults for what the user did not give; the user's values stay.
  SamplerOptions sampler;
  sampler.temperature = 0.3f;
  SamplerFieldsGiven given;
  given.temperature = true;
  ApplySamplingDefaults(*config, given, &sampler);
  EXPECT_EQ(sampler.temperature, 0.3f);
  EXPECT_EQ(sampler.top_k, 64);
  EXPECT_EQ(sampler.top_p, 0.95f);
}

TEST_F(GenerationConfigTest, DoSampleFalseIsGreedyAndOneEosIdIsAList) {
  absl::StatusOr<GenerationConfig> config =
      Load(R"({"do_sample": false, "temperature": 0.7, "eos_token_id": 1})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(*config->temperature, 0.0f);
  EXPECT_EQ(config->eos_token_ids, (std::vector<int32_t>{1}));
}

TEST_F(GenerationConfigTest, RefusesWhatItCannotHonour) {
  const auto error = [&](const std::string& text) {
    absl::StatusOr<GenerationConfig> config = Load(text);
    return config.ok() ? std::string("ok") : std::string(config.status().message());
  };
  EXPECT_TRUE(absl::StrContains(error(R"({"repetition_penalty": 1.3})"),
                                "sets repetition_penalty = 1.3, which Spark does not implement"));
  EXPECT_TRUE(absl::StrContains(error("[1, 2]"), "not a JSON object"));
  EXPECT_TRUE(absl::StrContains(error("{"), "not a JSON object"));
  EXPECT_TRUE(absl::StrContains(error(R"({"eos_token_id": "x"})"),
                                "eos_token_id must be a token id or a list of them"));
  EXPECT_TRUE(absl::StrContains(error(R"({"eos_token_id": [1, -2]})"),
                                "eos_token_id must be a token id"));
}

}  // namespace
}  // namespace rt
}  // namespace spark
