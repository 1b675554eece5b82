// The sampling rules: SamplerOptions, their checks, and the draw the plan's sample step makes
// (kernel_ops.def sample), through its host reference host::Sample (the GPU op check compares the
// kernel with it).
#include "spark/runtime/sampler.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "runtime_test_util.h"
#include "spark/runtime/host_kernels.h"
#include "spark/runtime/kernel_abi.h"

namespace spark {
namespace rt {
namespace {

using testing_util::ErrorContains;

int32_t SampleOne(const std::vector<float>& logits, const abi::SamplingParams& params) {
  int32_t words[abi::kSamplingParamWords];
  std::memcpy(words, &params, sizeof(words));
  int32_t token = -1;
  host::Sample(logits.data(), words, &token, 1, static_cast<int32_t>(logits.size()));
  return token;
}

// n draws with the options, at positions 0..n-1 (the counters a generation uses).
std::vector<int32_t> Draw(const SamplerOptions& options, const std::vector<float>& logits, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(SampleOne(logits, SamplingParamsFor(options, i)));
  return out;
}

// 64 logits with a unique maximum at 17 and a few close competitors.
std::vector<float> SomeLogits() {
  std::vector<float> logits(64);
  for (int i = 0; i < 64; ++i) logits[i] = static_cast<float>(std::sin(i * 1.7)) * 0.5f;
  logits[17] = 1.0f;
  return logits;
}

SamplerOptions Temperature(float t, uint64_t seed) {
  SamplerOptions options;
  options.temperature = t;
  options.seed = seed;
  return options;
}

TEST(SampleTest, GreedyTakesTheLargestLogitAndTiesPickTheLowestIndex) {
  EXPECT_EQ(Draw(SamplerOptions{}, {0.5f, 2.0f, 2.0f, -1.0f}, 3), std::vector<int32_t>(3, 1));
  EXPECT_EQ(Draw(SamplerOptions{}, {-5.0f}, 1), std::vector<int32_t>{0});
}

TEST(SampleTest, NanNeverWinsAndAllNanGivesTokenZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Draw(SamplerOptions{}, {nan, -inf, -3.0f, nan}, 1), std::vector<int32_t>{2});
  EXPECT_EQ(Draw(Temperature(1.0f, 4), {nan, 0.0f, nan, 0.0f}, 50).size(), 50u);
  for (int32_t t : Draw(Temperature(1.0f, 4), {nan, 0.0f, nan, 0.0f}, 50)) {
    EXPECT_TRUE(t == 1 || t == 3) << t;
  }
  EXPECT_EQ(Draw(Temperature(1.0f, 4), {nan, nan}, 1), std::vector<int32_t>{0});
}

TEST(SampleTest, AnInfiniteMaximumIsGreedy) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Draw(Temperature(1.0f, 9), {0.0f, inf, 1.0f, inf}, 20), std::vector<int32_t>(20, 1));
}

TEST(SampleTest, TemperatureZeroIsGreedyWhateverTheOtherOptions) {
  SamplerOptions options;
  options.temperature = 0.0f;
  options.top_k = 40;
  options.top_p = 0.5f;
  options.seed = 1234;
  EXPECT_EQ(Draw(options, SomeLogits(), 5), std::vector<int32_t>(5, 17));
}

TEST(SampleTest, TopKOneIsGreedy) {
  SamplerOptions options = Temperature(5.0f, 7);
  options.top_k = 1;
  EXPECT_EQ(Draw(options, SomeLogits(), 20), std::vector<int32_t>(20, 17));
}

TEST(SampleTest, TinyTopPIsGreedyIncludingTies) {
  SamplerOptions options = Temperature(1.0f, 99);
  options.top_p = 1e-6f;
  EXPECT_EQ(Draw(options, SomeLogits(), 20), std::vector<int32_t>(20, 17));
  EXPECT_EQ(Draw(options, {1.0f, 3.0f, 3.0f}, 20), std::vector<int32_t>(20, 1));
}

TEST(SampleTest, SameSeedAndPositionGiveTheSameToken) {
  const std::vector<float> flat(1000, 0.0f);
  const std::vector<int32_t> first = Draw(Temperature(1.0f, 42), flat, 50);
  EXPECT_EQ(first, Draw(Temperature(1.0f, 42), flat, 50));
  EXPECT_NE(first, Draw(Temperature(1.0f, 43), flat, 50));
  // The counter is the position: the draw at position 7 is the same in any run.
  const abi::SamplingParams at7 = SamplingParamsFor(Temperature(1.0f, 42), 7);
  EXPECT_EQ(at7.counter, 7u);
  EXPECT_EQ(SampleOne(flat, at7), first[7]);
}

TEST(SampleTest, TopKRestrictsToTheKBestTokensTiesByLowerIndex) {
  SamplerOptions options = Temperature(100.0f, 5);  // nearly uniform over what is kept
  options.top_k = 2;
  for (int32_t token : Draw(options, {0.0f, 2.0f, 1.0f, 1.9f, -3.0f}, 200)) {
    EXPECT_TRUE(token == 1 || token == 3) << token;
  }
  // Three tokens tie for the second place: the lowest index of them is the candidate.
  int seen[5] = {0, 0, 0, 0, 0};
  for (int32_t token : Draw(options, {1.0f, 2.0f, 1.0f, 1.0f, 0.0f}, 400)) ++seen[token];
  EXPECT_GT(seen[0], 100);
  EXPECT_GT(seen[1], 100);
  EXPECT_EQ(seen[2] + seen[3] + seen[4], 0);
}

TEST(SampleTest, TopPKeepsTheSmallestRankedSetReachingP) {
  // Probabilities 0.5, 0.3, 0.2 (temperature 1): top_p 0.7 keeps tokens 0 and 1.
  SamplerOptions options = Temperature(1.0f, 11);
  options.top_p = 0.7f;
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  int count[3] = {0, 0, 0};
  for (int32_t token : Draw(options, logits, 2000)) ++count[token];
  EXPECT_EQ(count[2], 0);
  EXPECT_NEAR(count[0] / 2000.0, 0.625, 0.04);  // 0.5 / 0.8
  // Ranked, not by index: the largest logit last.
  const std::vector<float> reversed = {std::log(0.2f), std::log(0.3f), std::log(0.5f)};
  for (int32_t token : Draw(options, reversed, 200)) EXPECT_NE(token, 0);
}

TEST(SampleTest, TopPAndTopKTogether) {
  // top_k 3 keeps 0.4, 0.3, 0.2 (of 1.0); top_p 0.5 of their 0.9 keeps 0.4 and 0.3.
  SamplerOptions options = Temperature(1.0f, 21);
  options.top_k = 3;
  options.top_p = 0.5f;
  const std::vector<float> logits = {std::log(0.1f), std::log(0.4f), std::log(0.2f),
                                     std::log(0.3f)};
  for (int32_t token : Draw(options, logits, 500)) EXPECT_TRUE(token == 1 || token == 3) << token;
}

TEST(SampleTest, SamplesFollowTheSoftmax) {
  int ones = 0;
  for (int32_t token : Draw(Temperature(1.0f, 3), {0.0f, std::log(3.0f)}, 4000)) ones += token;
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);
}

TEST(SampleTest, TemperatureSharpensTheDistribution) {
  int ones = 0;
  for (int32_t token : Draw(Temperature(0.25f, 8), {0.0f, std::log(3.0f)}, 4000)) ones += token;
  EXPECT_NEAR(ones / 4000.0, 81.0 / 82.0, 0.01);  // 3^4 / (1 + 3^4)
}

// A Gemma-sized row: the weights' fixed point leaves room for 262144 of them.
TEST(SampleTest, AFullVocabularyRowIsUniformAtAHighTemperature) {
  std::vector<float> row(262144, 0.0f);
  EXPECT_EQ(abi::SamplingWeightBits(262144), 44);
  std::vector<int> halves(2, 0);
  for (int32_t token : Draw(Temperature(1.0f, 17), row, 400)) {
    ASSERT_GE(token, 0);
    ASSERT_LT(token, 262144);
    ++halves[token / 131072];
  }
  EXPECT_GT(halves[0], 150);
  EXPECT_GT(halves[1], 150);
}

TEST(SampleTest, EveryRowOfACallIsDrawnWithItsOwnParameters) {
  const std::vector<float> logits = {0.0f, 1.0f, 5.0f, 1.0f,   // row 0
                                     9.0f, 1.0f, 0.0f, 8.0f};  // row 1
  abi::SamplingParams p[2];
  int32_t words[2 * abi::kSamplingParamWords];
  std::memcpy(words, p, sizeof(words));
  int32_t tokens[2] = {-1, -1};
  host::Sample(logits.data(), words, tokens, 2, 4);
  EXPECT_EQ(tokens[0], 2);
  EXPECT_EQ(tokens[1], 0);
}

TEST(SamplingNucleusMassTest, IsTheCeilingWithinOneAndTheTotal) {
  EXPECT_EQ(abi::SamplingNucleusMass(0.5f, 10), 5u);
  EXPECT_EQ(abi::SamplingNucleusMass(0.55f, 10), 6u);
  EXPECT_EQ(abi::SamplingNucleusMass(1e-9f, 10), 1u);
  EXPECT_EQ(abi::SamplingNucleusMass(1.0f, 10), 10u);
  EXPECT_EQ(abi::SamplingNucleusMass(0.5f, uint64_t{1} << 62), uint64_t{1} << 61);
}

TEST(SamplingKeyTest, OrdersLikeTheFloatsWithNanLowest) {
  const float inf = std::numeric_limits<float>::infinity();
  const float values[] = {-inf, -3.5f, -0.0f, 0.0f, 1e-30f, 2.0f, inf};
  for (size_t i = 1; i < sizeof(values) / sizeof(values[0]); ++i) {
    EXPECT_LE(abi::SamplingKey(values[i - 1]), abi::SamplingKey(values[i])) << values[i];
  }
  EXPECT_LT(abi::SamplingKey(-3.5f), abi::SamplingKey(2.0f));
  EXPECT_EQ(abi::SamplingKey(std::numeric_limits<float>::quiet_NaN()), 0u);
  EXPECT_GT(abi::SamplingKey(-inf), 0u);
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
