#include "spark/runtime/step_profile.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "loader_test_util.h"
#include "step_args.h"

namespace spark {
namespace rt {
namespace {

using test::TestPlan;

// `count` tokens at positions first, first + 1, ... (one sequence's prefill chunk).
std::vector<int32_t> Positions(int count, int32_t first) {
  std::vector<int32_t> positions(static_cast<size_t>(count));
  for (int t = 0; t < count; ++t) positions[static_cast<size_t>(t)] = first + t;
  return positions;
}

TEST(StepCostTest, LinearReadsItsWholeWeightAndCountsTwoFlopsPerMultiplyAdd) {
  const Plan plan = TestPlan();
  const StepCost cost = EstimateStepCost(plan, plan.steps[4], Positions(3, 0));
  EXPECT_EQ(cost.weight_bytes, 16 * 4 * 2);
  EXPECT_EQ(cost.flops, 2.0 * 3 * 16 * 4);
  EXPECT_EQ(cost.activation_bytes, 3 * (4 * 4 + 16 * 4));  // x rows + logits rows
  EXPECT_EQ(cost.kv_bytes, 0);
}

TEST(StepCostTest, EmbeddingReadsOnlyTheGatheredRows) {
  const Plan plan = TestPlan();
  const StepCost cost = EstimateStepCost(plan, plan.steps[0], Positions(2, 0));
  EXPECT_EQ(cost.weight_bytes, 2 * 4 * 2);
  EXPECT_EQ(cost.flops, 0);
}

// A MoE expert step reads the experts its tokens select; the grouped moe_down writes its
// workspace instead of y.
TEST(StepCostTest, MoeDownReadsTheSelectedExpertsAndWritesItsPathsOutput) {
  const Plan plan = TestPlan();
  // 2 experts x 16 intermediate x 2 hidden of weight 0 (64 elements), top_k 1.
  Step down = test::MakeStep(
      "moe_down", 256,
      {test::BufferArg(3), test::WeightArg(0), test::BufferArg(3),
       test::BufferArg(plan.input_ids), test::BufferArg(2), test::BufferArg(4),
       test::KindArg(ArgRefKind::kNumTokens), test::I32Arg(2), test::I32Arg(16), test::I32Arg(2),
       test::I32Arg(1), test::I32Arg(abi::kMoeGemv)});
  const StepCost gemv = EstimateStepCost(plan, down, Positions(1, 0));
  EXPECT_EQ(gemv.weight_bytes, 1 * 16 * 2 * 2);  // the one selected expert
  down.args[abi::ops::moe_down::path] = test::I32Arg(abi::kMoeGrouped);
  const StepCost grouped = EstimateStepCost(plan, down, Positions(1, 0));
  EXPECT_EQ(grouped.weight_bytes, gemv.weight_bytes);
  // y (buffer 2: 4 floats a row) written on the GEMV path, partials (buffer 4: 4) grouped.
  EXPECT_EQ(gemv.activation_bytes, grouped.activation_bytes);
  EXPECT_GT(gemv.activation_bytes, 0);
  EXPECT_TRUE(StepRuns(down, abi::kMoeGroupMinTokens, false));
  EXPECT_FALSE(StepRuns(down, abi::kMoeGroupMinTokens - 1, false));
  down.args[abi::ops::moe_down::path] = test::I32Arg(abi::kMoeGemv);
  EXPECT_TRUE(StepRuns(down, 1, false));
  EXPECT_TRUE(StepRuns(down, abi::kMoeGroupMinTokens - 1, true));
  EXPECT_FALSE(StepRuns(down, abi::kMoeGroupMinTokens, false));
}

// The calls each step is in the program of, as the registry's `runs` says, and only those.
TEST(StepRunsTest, FollowsTheRegistrysRules) {
  const Step combine = test::MakeStep(
      "moe_combine", 256,
      {test::BufferArg(3), test::BufferArg(2), test::KindArg(ArgRefKind::kNumTokens),
       test::I32Arg(2), test::I32Arg(1)});
  EXPECT_FALSE(StepRuns(combine, abi::kMoeGroupMinTokens - 1, false));
  EXPECT_TRUE(StepRuns(combine, abi::kMoeGroupMinTokens, false));
  // max_splits 8, split_rows 256: T <= 32 splits (all 8 ranges), T >= 33 does not.
  const Step merge = test::MakeStep(
      "attention_merge", 128,
      {test::BufferArg(3), test::BufferArg(2), test::KindArg(ArgRefKind::kNumTokens),
       test::I32Arg(1), test::I32Arg(4), test::I32Arg(8), test::I32Arg(256)});
  EXPECT_TRUE(StepRuns(merge, 1, false));
  EXPECT_TRUE(StepRuns(merge, 32, true));
  EXPECT_FALSE(StepRuns(merge, 33, false));
  EXPECT_EQ(StepSizeArg(merge, "split_rows", 5), 256);
  EXPECT_EQ(StepSizeArg(merge, "num_tokens", 5), 5);
  EXPECT_EQ(StepSizeArg(merge, "no_such_arg", 5), 0);
  for (const Step& step : TestPlan().steps) {
    for (int64_t t : {1, 16, 64}) {
      // scatter_rows merges soft tokens: nothing to do in a call without them.
      EXPECT_EQ(StepRuns(step, t, false), step.op != abi::OpId::kScatterRows)
          << OpName(step) << " " << t;
      EXPECT_TRUE(StepRuns(step, t, true)) << OpName(step) << " " << t;
    }
  }
}

TEST(StepCostTest, AttentionReadsTheKeysEachPositionSees) {
  Plan plan = TestPlan();
  Step attention = test::MakeStep(
      "attention", 128,
      {test::BufferArg(4), test::BufferArg(plan.input_positions),
       test::BufferArg(plan.input_sequences),
       test::KindArg(ArgRefKind::kKvBlockTable, 0), test::KindArg(ArgRefKind::kKCache, 0),
       test::KindArg(ArgRefKind::kVCache, 0),
       test::BufferArg(5), test::KindArg(ArgRefKind::kNull),
       test::KindArg(ArgRefKind::kNumTokens), test::I32Arg(1), test::I32Arg(1), test::I32Arg(4),
       test::KindArg(ArgRefKind::kKvCapacity, 0), test::I32Arg(3), test::F32Arg(1.0f),
       test::I32Arg(1), test::I32Arg(0), test::I32Arg(abi::kCacheF32),
       test::KindArg(ArgRefKind::kNull)});
  // Positions 5 and 6 with a window of 3 see 3 keys each; K and V rows of 1 x 4 f32.
  StepCost cost = EstimateStepCost(plan, attention, Positions(2, 5));
  EXPECT_EQ(cost.kv_bytes, 2 * (3 + 3) * 4 * 4);
  EXPECT_EQ(cost.flops, 4.0 * (3 + 3) * 1 * 4);
  // Without a window, positions 0 and 1 see 1 and 2 keys.
  attention.args[13] = test::I32Arg(0);
  cost = EstimateStepCost(plan, attention, Positions(2, 0));
  EXPECT_EQ(cost.kv_bytes, 2 * (1 + 2) * 4 * 4);
  // A bf16 cache: 2 bytes per element.
  attention.args[17] = test::I32Arg(abi::kCacheBF16);
  cost = EstimateStepCost(plan, attention, Positions(2, 0));
  EXPECT_EQ(cost.kv_bytes, 2 * (1 + 2) * 4 * 2);
  // A decode step of three sequences: each token at its own position (9, 0 and 4 see 10, 1, 5).
  const std::vector<int32_t> positions = {9, 0, 4};
  cost = EstimateStepCost(plan, attention, positions);
  EXPECT_EQ(cost.kv_bytes, 2 * (10 + 1 + 5) * 4 * 2);
}

TEST(RunProfileTest, SeparatesDecodeFromPrefillAndSumsByOp) {
  const Plan plan = TestPlan();
  RunProfile profile(plan);
  const std::vector<int32_t> prompt = {0, 1, 2, 3};
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    profile.Record(i, prompt, /*decode_step=*/false, 0.001 * (i + 1));
  }
  for (int call = 0; call < 2; ++call) {
    const std::vector<int32_t> next = {4 + call};
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      profile.Record(i, next, /*decode_step=*/true, 0.0001);
    }
  }
  // Decode steps of three sequences (a token each) go to their own table, not to prefill's.
  const std::vector<int32_t> three = {7, 2, 30};
  for (int call = 0; call < 3; ++call) {
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      profile.Record(i, three, /*decode_step=*/true, 0.0002);
    }
  }
  // A step mixing a prefill chunk with decode tokens is not a decode step.
  const std::vector<int32_t> mixed = {5, 0, 1};
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    profile.Record(i, mixed, /*decode_step=*/false, 0.0003);
  }
  EXPECT_EQ(profile.prefill_calls(), 2);
  EXPECT_EQ(profile.prefill_tokens(), 7);
  EXPECT_EQ(profile.decode_calls(), 2);
  EXPECT_EQ(profile.decode()[4].launches, 2);
  ASSERT_EQ(profile.decode_by_sequences().size(), 2u);
  const CallTimings& batched = profile.decode_by_sequences().at(3);
  EXPECT_EQ(batched.calls, 3);
  EXPECT_EQ(batched.tokens, 9);
  EXPECT_EQ(batched.steps[4].launches, 3);
  EXPECT_DOUBLE_EQ(batched.steps[4].seconds, 0.0006);
  const std::vector<OpTiming> prefill = SumByOp(plan, profile.prefill());
  ASSERT_EQ(prefill.size(), plan.steps.size());  // one step per op in the test plan
  EXPECT_EQ(prefill[0].op, "sample");            // the slowest first (the last step)
  EXPECT_DOUBLE_EQ(prefill[0].timing.seconds, 0.0073);
  EXPECT_EQ(prefill[1].op, "attention");
  EXPECT_DOUBLE_EQ(prefill[1].timing.seconds, 0.0063);
  EXPECT_EQ(prefill[2].op, "linear");
  EXPECT_DOUBLE_EQ(prefill[2].timing.seconds, 0.0053);
  const std::string text = FormatProfile(profile, "test clock");
  EXPECT_NE(text.find("profile: decode, 2 calls of 1 token (test clock)"), std::string::npos);
  EXPECT_NE(text.find("profile: decode, 3 calls of 3 sequences (a token each) (test clock)"),
            std::string::npos);
  EXPECT_NE(text.find("profile: prefill, 2 calls, 7 tokens (test clock)"), std::string::npos);
}

// A logits-tail launch (the sampled rows only) is costed on the call's last rows: their
// positions, not the first ones.
TEST(RunProfileTest, TailLaunchesTakeTheLastRows) {
  const Plan plan = TestPlan();
  RunProfile whole(plan), tail(plan);
  const std::vector<int32_t> positions = {0, 1, 2, 3, 4};
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    whole.Record(i, absl::MakeConstSpan(positions).subspan(4, 1), false, 0.001);
    tail.Record(i, positions, false, 0.001, /*launch_tokens=*/1);
  }
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    EXPECT_EQ(whole.prefill()[i].cost.bytes(), tail.prefill()[i].cost.bytes()) << i;
    EXPECT_EQ(whole.prefill()[i].cost.flops, tail.prefill()[i].cost.flops) << i;
  }
}

}  // namespace
}  // namespace rt
}  // namespace spark
