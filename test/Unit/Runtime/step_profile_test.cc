#include "spark/runtime/step_profile.h"

#include "gtest/gtest.h"
#include "loader_test_util.h"
#include "step_args.h"

namespace spark {
namespace rt {
namespace {

using test::TestPlan;

TEST(StepCostTest, LinearReadsItsWholeWeightAndCountsTwoFlopsPerMultiplyAdd) {
  const Plan plan = TestPlan();
  const StepCost cost = EstimateStepCost(plan, plan.steps[4], /*num_tokens=*/3, 0);
  EXPECT_EQ(cost.weight_bytes, 16 * 4 * 2);
  EXPECT_EQ(cost.flops, 2.0 * 3 * 16 * 4);
  EXPECT_EQ(cost.activation_bytes, 3 * (4 * 4 + 16 * 4));  // x rows + logits rows
  EXPECT_EQ(cost.kv_bytes, 0);
}

TEST(StepCostTest, EmbeddingReadsOnlyTheGatheredRows) {
  const Plan plan = TestPlan();
  const StepCost cost = EstimateStepCost(plan, plan.steps[0], 2, 0);
  EXPECT_EQ(cost.weight_bytes, 2 * 4 * 2);
  EXPECT_EQ(cost.flops, 0);
}

// A MoE expert op outside its token range does nothing (the CUDA executor does not launch it:
// a decode step of a grouped model skips the grouped entries).
TEST(StepCostTest, MoeOpOutsideItsTokenRangeCostsNothing) {
  const Plan plan = TestPlan();
  // 2 experts x 16 intermediate x 2 hidden of weight 0 (64 elements), top_k 1.
  Step down = test::MakeStep(
      "moe_down", 256,
      {test::BufferArg(3), test::WeightArg(0), test::BufferArg(3),
       test::BufferArg(plan.input_ids), test::BufferArg(2), test::KindArg(ArgRefKind::kNull),
       test::KindArg(ArgRefKind::kNumTokens), test::I32Arg(2), test::I32Arg(16), test::I32Arg(2),
       test::I32Arg(1), test::I32Arg(1), test::I32Arg(15)});
  StepCost cost = EstimateStepCost(plan, down, 1, 0);
  EXPECT_EQ(cost.weight_bytes, 1 * 16 * 2 * 2);  // the one selected expert
  EXPECT_GT(cost.activation_bytes, 0);
  cost = EstimateStepCost(plan, down, 16, 0);      // outside [1, 15]
  EXPECT_EQ(cost.weight_bytes, 0);
  EXPECT_EQ(cost.activation_bytes, 0);
  EXPECT_EQ(cost.flops, 0);
  EXPECT_FALSE(StepDoesNothing(down, 1, 0));
  EXPECT_FALSE(StepDoesNothing(down, 15, 0));
  EXPECT_TRUE(StepDoesNothing(down, 16, 0));
}

// The launches the ABI defines as doing nothing at a step size, and only those.
TEST(StepDoesNothingTest, FollowsTheAbisNoOpRules) {
  const Step combine = test::MakeStep(
      "moe_combine", 256,
      {test::BufferArg(3), test::BufferArg(2), test::KindArg(ArgRefKind::kNumTokens),
       test::I32Arg(2), test::I32Arg(1)});
  EXPECT_TRUE(StepDoesNothing(combine, abi::kMoeGroupMinTokens - 1, 0));
  EXPECT_FALSE(StepDoesNothing(combine, abi::kMoeGroupMinTokens, 0));
  // max_splits 8, split_rows 64: T <= 32 splits (at least 2 per token), T >= 33 does not.
  const Step merge = test::MakeStep(
      "attention_merge", 128,
      {test::BufferArg(3), test::BufferArg(2), test::KindArg(ArgRefKind::kNumTokens),
       test::I32Arg(1), test::I32Arg(4), test::I32Arg(8), test::I32Arg(64)});
  EXPECT_FALSE(StepDoesNothing(merge, 1, 0));
  EXPECT_FALSE(StepDoesNothing(merge, 32, 0));
  EXPECT_TRUE(StepDoesNothing(merge, 33, 0));
  EXPECT_EQ(StepSizeArg(merge, "split_rows", 5), 64);
  EXPECT_EQ(StepSizeArg(merge, "num_tokens", 5), 5);
  EXPECT_EQ(StepSizeArg(merge, "no_such_arg", 5), 0);
  for (const Step& step : TestPlan().steps) {
    for (int64_t t : {1, 16, 64}) {
      // scatter_rows merges soft tokens: nothing to do in a step without them.
      EXPECT_EQ(StepDoesNothing(step, t, 0), step.op == abi::OpId::kScatterRows)
          << OpName(step) << " " << t;
      EXPECT_FALSE(StepDoesNothing(step, t, 1)) << OpName(step) << " " << t;
    }
  }
}

TEST(StepCostTest, AttentionReadsTheKeysEachPositionSees) {
  Plan plan = TestPlan();
  Step attention = test::MakeStep(
      "attention", 128,
      {test::BufferArg(4), test::BufferArg(plan.input_positions),
       test::KindArg(ArgRefKind::kKCache, 0), test::KindArg(ArgRefKind::kVCache, 0),
       test::BufferArg(5), test::KindArg(ArgRefKind::kNull),
       test::KindArg(ArgRefKind::kNumTokens), test::I32Arg(1), test::I32Arg(1), test::I32Arg(4),
       test::KindArg(ArgRefKind::kKvCapacity, 0), test::I32Arg(3), test::F32Arg(1.0f),
       test::I32Arg(1), test::I32Arg(0), test::I32Arg(abi::kCacheF32),
       test::KindArg(ArgRefKind::kNull)});
  // Positions 5 and 6 with a window of 3 see 3 keys each; K and V rows of 1 x 4 f32.
  StepCost cost = EstimateStepCost(plan, attention, 2, 5);
  EXPECT_EQ(cost.kv_bytes, 2 * (3 + 3) * 4 * 4);
  EXPECT_EQ(cost.flops, 4.0 * (3 + 3) * 1 * 4);
  // Without a window, positions 0 and 1 see 1 and 2 keys.
  attention.args[11] = test::I32Arg(0);
  cost = EstimateStepCost(plan, attention, 2, 0);
  EXPECT_EQ(cost.kv_bytes, 2 * (1 + 2) * 4 * 4);
  // A bf16 cache: 2 bytes per element.
  attention.args[15] = test::I32Arg(abi::kCacheBF16);
  cost = EstimateStepCost(plan, attention, 2, 0);
  EXPECT_EQ(cost.kv_bytes, 2 * (1 + 2) * 4 * 2);
}

TEST(RunProfileTest, SeparatesDecodeFromPrefillAndSumsByOp) {
  const Plan plan = TestPlan();
  RunProfile profile(plan);
  for (size_t i = 0; i < plan.steps.size(); ++i) profile.Record(i, 4, 0, 0.001 * (i + 1));
  for (int call = 0; call < 2; ++call) {
    for (size_t i = 0; i < plan.steps.size(); ++i) profile.Record(i, 1, 4 + call, 0.0001);
  }
  EXPECT_EQ(profile.prefill_calls(), 1);
  EXPECT_EQ(profile.prefill_tokens(), 4);
  EXPECT_EQ(profile.decode_calls(), 2);
  EXPECT_EQ(profile.decode()[4].launches, 2);
  const std::vector<OpTiming> prefill = SumByOp(plan, profile.prefill());
  ASSERT_EQ(prefill.size(), plan.steps.size());  // one step per op in the test plan
  EXPECT_EQ(prefill[0].op, "attention");         // the slowest first (the last step)
  EXPECT_DOUBLE_EQ(prefill[0].timing.seconds, 0.006);
  EXPECT_EQ(prefill[1].op, "linear");
  EXPECT_DOUBLE_EQ(prefill[1].timing.seconds, 0.005);
  const std::string text = FormatProfile(profile, "test clock");
  EXPECT_NE(text.find("profile: decode, 2 calls of 1 token (test clock)"), std::string::npos);
  EXPECT_NE(text.find("profile: prefill, 1 calls, 4 tokens (test clock)"), std::string::npos);
}

}  // namespace
}  // namespace rt
}  // namespace spark
