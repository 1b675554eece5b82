#include "spark/runtime/sampler.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "runtime_test_util.h"

namespace spark {
namespace rt {
namespace {

using testing_util::ErrorContains;

std::vector<int32_t> Draw(Sampler& sampler, const std::vector<float>& logits, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(sampler.Sample(logits));
  return out;
}

// 64 logits with a unique maximum at 17 and a few close competitors.
std::vector<float> SomeLogits() {
  std::vector<float> logits(64);
  for (int i = 0; i < 64; ++i) logits[i] = static_cast<float>(std::sin(i * 1.7)) * 0.5f;
  logits[17] = 1.0f;
  return logits;
}

TEST(ArgMaxTest, TiesPickTheLowestIndex) {
  EXPECT_EQ(ArgMax({1.0f, 3.0f, 2.0f, 3.0f}), 1);
  EXPECT_EQ(ArgMax({-5.0f}), 0);
  EXPECT_EQ(ArgMax({}), -1);
}

TEST(SamplerTest, DefaultIsGreedy) {
  Sampler sampler(SamplerOptions{});
  EXPECT_TRUE(sampler.greedy());
  EXPECT_EQ(sampler.Sample({0.5f, 2.0f, 2.0f, -1.0f}), 1);
}

TEST(SamplerTest, TemperatureZeroIsGreedyWhateverTheOtherOptions) {
  SamplerOptions options;
  options.temperature = 0.0f;
  options.top_k = 40;
  options.top_p = 0.5f;
  options.seed = 1234;
  Sampler sampler(options);
  EXPECT_EQ(Draw(sampler, SomeLogits(), 5), std::vector<int32_t>(5, 17));
}

TEST(SamplerTest, TopKOneIsGreedy) {
  SamplerOptions options;
  options.temperature = 5.0f;
  options.top_k = 1;
  options.seed = 7;
  Sampler sampler(options);
  EXPECT_TRUE(sampler.greedy());
  EXPECT_EQ(Draw(sampler, SomeLogits(), 20), std::vector<int32_t>(20, 17));
}

TEST(SamplerTest, TinyTopPIsGreedyIncludingTies) {
  SamplerOptions options;
  options.temperature = 1.0f;
  options.top_p = 1e-6f;
  options.seed = 99;
  Sampler sampler(options);
  EXPECT_FALSE(sampler.greedy());
  EXPECT_EQ(Draw(sampler, SomeLogits(), 20), std::vector<int32_t>(20, 17));
  EXPECT_EQ(Draw(sampler, {1.0f, 3.0f, 3.0f}, 20), std::vector<int32_t>(20, 1));
}

TEST(SamplerTest, SameSeedGivesTheSameSequence) {
  SamplerOptions options;
  options.temperature = 1.0f;
  options.seed = 42;
  const std::vector<float> flat(1000, 0.0f);
  Sampler a(options), b(options);
  const std::vector<int32_t> first = Draw(a, flat, 50);
  EXPECT_EQ(first, Draw(b, flat, 50));
  options.seed = 43;
  Sampler c(options);
  EXPECT_NE(first, Draw(c, flat, 50));
}

TEST(SamplerTest, TopKRestrictsToTheKBestTokens) {
  SamplerOptions options;
  options.temperature = 100.0f;  // nearly uniform over what is kept
  options.top_k = 2;
  options.seed = 5;
  Sampler sampler(options);
  for (int32_t token : Draw(sampler, {0.0f, 2.0f, 1.0f, 1.9f, -3.0f}, 200)) {
    EXPECT_TRUE(token == 1 || token == 3) << token;
  }
}

TEST(SamplerTest, TopPKeepsTheSmallestSetReachingP) {
  // Probabilities 0.5, 0.3, 0.2 (temperature 1): top_p 0.7 keeps tokens 0 and 1.
  SamplerOptions options;
  options.temperature = 1.0f;
  options.top_p = 0.7f;
  options.seed = 11;
  Sampler sampler(options);
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  int count[3] = {0, 0, 0};
  for (int32_t token : Draw(sampler, logits, 2000)) ++count[token];
  EXPECT_EQ(count[2], 0);
  EXPECT_NEAR(count[0] / 2000.0, 0.625, 0.04);  // 0.5 / 0.8
}

TEST(SamplerTest, SamplesFollowTheSoftmax) {
  SamplerOptions options;
  options.temperature = 1.0f;
  options.seed = 3;
  Sampler sampler(options);
  int ones = 0;
  for (int32_t token : Draw(sampler, {0.0f, std::log(3.0f)}, 4000)) ones += token;
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);
}

TEST(SamplerTest, TemperatureSharpensTheDistribution) {
  SamplerOptions options;
  options.temperature = 0.25f;  // p(1) = 3^4 / (1 + 3^4)
  options.seed = 8;
  Sampler sampler(options);
  int ones = 0;
  for (int32_t token : Draw(sampler, {0.0f, std::log(3.0f)}, 4000)) ones += token;
  EXPECT_NEAR(ones / 4000.0, 81.0 / 82.0, 0.01);
}

TEST(ValidateSamplerOptionsTest, AcceptsDefaultsAndRejectsBadValues) {
  EXPECT_TRUE(ValidateSamplerOptions(SamplerOptions{}).ok());
  SamplerOptions options;
  options.temperature = -1.0f;
  EXPECT_TRUE(ErrorContains(ValidateSamplerOptions(options), "temperature must be"));
  options = SamplerOptions{};
  options.top_k = -2;
  EXPECT_TRUE(ErrorContains(ValidateSamplerOptions(options), "top-k must be >= 0"));
  options = SamplerOptions{};
  options.top_p = 0.0f;
  EXPECT_TRUE(ErrorContains(ValidateSamplerOptions(options), "top-p must be in (0, 1]"));
  options.top_p = 1.5f;
  EXPECT_TRUE(ErrorContains(ValidateSamplerOptions(options), "top-p must be in (0, 1]"));
}

}  // namespace
}  // namespace rt
}  // namespace spark
