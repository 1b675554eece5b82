#include "spark/runtime/host_executor.h"

#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "loader_test_util.h"
#include "runtime_test_util.h"
#include "tiny_plan.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/host_kernel_dispatch.h"
#include "spark/runtime/host_kernels.h"
#include "spark/runtime/kernel_abi.h"
#include "spark/runtime/plan.h"
#include "spark/runtime/plan_format.h"
#include "spark/runtime/safetensors.h"
#include "spark/runtime/step_profile.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPARK_HAS_ADDRESS_SANITIZER 1
#endif
#endif
#ifndef SPARK_HAS_ADDRESS_SANITIZER
#define SPARK_HAS_ADDRESS_SANITIZER 0
#endif

namespace spark {
namespace rt {
namespace {

using testing_util::ErrorContains;
using namespace tiny_plan;  // NOLINT: the tiny model of tiny_plan.h

class HostExecutorTest : public ::testing::Test {
 protected:
  HostExecutorTest() {
    for (const auto& row : kTable) {
      for (float v : row) table_.push_back(F32ToBf16(v));
    }
  }

  std::vector<WeightData> Weights() const {
    return {{reinterpret_cast<const uint8_t*>(table_.data()), table_.size() * 2}};
  }

  // An executor over `plan`, which the fixture keeps alive, prepared for `max_length`.
  std::unique_ptr<Executor> Make(Plan plan, int64_t max_length = 32) {
    plan_ = std::move(plan);
    absl::StatusOr<std::unique_ptr<Executor>> executor = CreateHostExecutor(plan_, Weights());
    EXPECT_TRUE(executor.ok()) << executor.status();
    EXPECT_TRUE((*executor)->Prepare(max_length).ok());
    return std::move(*executor);
  }

  // The logits the tiny model must give for the token at `p` of `ids` (all tokens at positions
  // 0..), with a sliding window of `window` keys (0 = causal).
  static std::vector<float> Expected(const std::vector<int32_t>& ids, int p, int window) {
    const int first = window > 0 ? std::max(0, p - window + 1) : 0;
    float mean[kHidden] = {0, 0};
    for (int j = first; j <= p; ++j) {
      for (int c = 0; c < kHidden; ++c) mean[c] += kTable[ids[j]][c] / (p - first + 1);
    }
    std::vector<float> logits;
    for (const auto& row : kTable) logits.push_back(row[0] * mean[0] + row[1] * mean[1]);
    return logits;
  }

  static std::vector<float> Row(const std::vector<float>& logits, int row) {
    return std::vector<float>(logits.begin() + row * kVocab, logits.begin() + (row + 1) * kVocab);
  }

  static void ExpectNear(const std::vector<float>& a, const std::vector<float>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5f) << "element " << i;
  }

  std::vector<uint16_t> table_;
  Plan plan_;
};

TEST_F(HostExecutorTest, PrefillComputesEveryRow) {
  std::unique_ptr<Executor> executor = Make(TinyPlan(KvKind::kFull, 0));
  const std::vector<int32_t> ids = {0, 1, 2};
  std::vector<float> logits;
  ASSERT_TRUE(executor->RunStep(ids, {0, 1, 2}, nullptr, &logits).ok());
  ASSERT_EQ(logits.size(), 3u * kVocab);
  ExpectNear(Row(logits, 0), {1, 0, 1, -1});
  ExpectNear(Row(logits, 1), {0.5f, 0.5f, 1, 0.5f});
  for (int p = 0; p < 3; ++p) ExpectNear(Row(logits, p), Expected(ids, p, 0));
  EXPECT_EQ(executor->name(), "host");
}

// The logits tail (Step::logits_tail; here the LM head and the sample step): a call that needs
// the last row's token runs it on that row and returns the token alone, one that needs none not
// at all, and one that asks for every row gets every row's logits and the same token.
TEST_F(HostExecutorTest, TheLogitsTailRunsOnTheRowsAskedFor) {
  Plan plan = TinyPlan(KvKind::kFull, 0);
  plan.steps[plan.steps.size() - 2].logits_tail = true;
  plan.steps.back().logits_tail = true;
  ASSERT_TRUE(ValidatePlan(plan, "tail").ok()) << ValidatePlan(plan, "tail");
  const size_t lm_head = plan.steps.size() - 2;
  std::unique_ptr<Executor> executor = Make(plan);
  auto profile = std::make_unique<RunProfile>(plan);
  const RunProfile* seen = profile.get();
  executor->set_profile(std::move(profile));
  const std::vector<int32_t> ids = {0, 1, 2};
  const std::vector<int32_t> positions = {0, 1, 2};
  StepCall call;
  call.ids = ids;
  call.positions = positions;
  StepResult last, all;
  {
    absl::StatusOr<std::unique_ptr<SequenceState>> sequence = executor->NewSequence(32);
    ASSERT_TRUE(sequence.ok());
    ASSERT_TRUE(executor->Run(**sequence, call, &last).ok());
    EXPECT_TRUE(last.logits.empty());
    // Row 2 sees {0, 1, 2}: mean (2/3, 2/3); logits {2/3, 2/3, 4/3, 2/3}: token 2.
    EXPECT_EQ(last.token, 2);
    // The tail ran once, for one token; the steps before it for three.
    EXPECT_EQ(seen->prefill()[lm_head].launches, 1);
    EXPECT_EQ(seen->prefill()[lm_head].cost.flops, 2.0 * kVocab * kHidden);
    StepResult none;
    const std::vector<int32_t> more = {3, 1}, more_positions = {3, 4};
    StepCall early = call;
    early.ids = more;
    early.positions = more_positions;
    early.rows = LogitRows::kNone;
    ASSERT_TRUE(executor->Run(**sequence, early, &none).ok());
    EXPECT_TRUE(none.logits.empty());
    EXPECT_EQ(none.token, -1);
    EXPECT_EQ(seen->prefill()[lm_head].launches, 1);  // not run
    EXPECT_EQ(seen->prefill()[0].launches, 2);
  }
  absl::StatusOr<std::unique_ptr<SequenceState>> sequence = executor->NewSequence(32);
  ASSERT_TRUE(sequence.ok());
  call.rows = LogitRows::kAll;
  ASSERT_TRUE(executor->Run(**sequence, call, &all).ok());
  EXPECT_EQ(all.token, last.token);
  ASSERT_EQ(all.logits.size(), 3u * kVocab);
  for (int p = 0; p < 3; ++p) ExpectNear(Row(all.logits, p), Expected(ids, p, 0));
}

// Continuous batching: a step over the tokens of several sequences (prefill chunks that need
// no logits, last prompt chunks, decode tokens) gives each sequence the tokens it gets alone, and
// its blocks are its own (the KV pool reserved for three sequences).
TEST_F(HostExecutorTest, ABatchedStepGivesEachSequenceItsOwnTokens) {
  plan_ = TinyPlan(KvKind::kFull, 0);
  absl::StatusOr<std::unique_ptr<Executor>> made = CreateHostExecutor(plan_, Weights());
  ASSERT_TRUE(made.ok()) << made.status();
  Executor& executor = **made;
  ASSERT_TRUE(executor.ReserveSequences(32, 3, 3).ok());
  const std::vector<std::vector<int32_t>> prompts = {{0, 3, 1}, {2}, {3, 3}};
  constexpr int kNew = 5;
  const auto call_of = [](const std::vector<int32_t>& ids, int32_t first, LogitRows rows,
                          std::vector<int32_t>* positions) {
    positions->clear();
    for (size_t t = 0; t < ids.size(); ++t) positions->push_back(first + static_cast<int32_t>(t));
    StepCall call;
    call.ids = ids;
    call.positions = *positions;
    call.rows = rows;
    return call;
  };
  // Alone: the prompt in one step, then one token a step.
  std::vector<std::vector<int32_t>> alone(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    absl::StatusOr<std::unique_ptr<SequenceState>> sequence = executor.NewSequence(32);
    ASSERT_TRUE(sequence.ok()) << sequence.status();
    std::vector<int32_t> ids = prompts[i], positions;
    int32_t next = static_cast<int32_t>(ids.size());
    StepResult result;
    ASSERT_TRUE(executor.Run(**sequence, call_of(ids, 0, LogitRows::kLast, &positions), &result).ok());
    while (static_cast<int>(alone[i].size()) < kNew) {
      alone[i].push_back(result.token);
      ids = {result.token};
      ASSERT_TRUE(executor.Run(**sequence, call_of(ids, next++, LogitRows::kLast, &positions),
                               &result).ok());
    }
  }
  // Batched, the three sequences' steps interleaved.
  std::vector<std::unique_ptr<SequenceState>> seqs;
  for (size_t i = 0; i < prompts.size(); ++i) seqs.push_back(*executor.NewSequence(32));
  std::vector<std::vector<int32_t>> got(prompts.size());
  std::vector<int32_t> next(prompts.size(), 0);
  std::vector<std::vector<int32_t>> ids(prompts.size()), positions(prompts.size());
  const auto step = [&](std::vector<std::pair<size_t, LogitRows>> who) {
    std::vector<SequenceStep> parts;
    for (auto [i, rows] : who) {
      parts.push_back({seqs[i].get(), call_of(ids[i], next[i], rows, &positions[i])});
    }
    std::vector<StepResult> results;
    const absl::Status status = executor.RunBatch(parts, &results);
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_EQ(results.size(), who.size());
    for (size_t k = 0; k < who.size(); ++k) {
      const size_t i = who[k].first;
      next[i] += static_cast<int32_t>(ids[i].size());
      if (who[k].second == LogitRows::kNone) {
        EXPECT_EQ(results[k].token, -1);
        continue;
      }
      got[i].push_back(results[k].token);
      ids[i] = {results[k].token};
    }
  };
  // Step 1: the first two tokens of A's prompt (no logits) and B's prompt.
  ids[0] = {0, 3};
  ids[1] = prompts[1];
  step({{0, LogitRows::kNone}, {1, LogitRows::kLast}});
  // Step 2: A's last prompt token, C's prompt, B's first decode token: 4 tokens.
  ids[0] = {1};
  ids[2] = prompts[2];
  step({{2, LogitRows::kLast}, {0, LogitRows::kLast}, {1, LogitRows::kLast}});
  while (got[0].size() < kNew || got[1].size() < kNew || got[2].size() < kNew) {
    std::vector<std::pair<size_t, LogitRows>> who;
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (got[i].size() < kNew) who.push_back({i, LogitRows::kLast});
    }
    step(who);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    got[i].resize(kNew);
    EXPECT_EQ(got[i], alone[i]) << "sequence " << i;
  }
}

// Calls that ask for every row's logits (LogitRows::kAll) in one batched step get their own rows,
// as alone.
TEST_F(HostExecutorTest, ABatchedStepGivesEachCallItsOwnLogitsRows) {
  plan_ = TinyPlan(KvKind::kFull, 0);
  std::unique_ptr<Executor> executor = *CreateHostExecutor(plan_, Weights());
  ASSERT_TRUE(executor->ReserveSequences(32, 4, 4).ok());
  const std::vector<int32_t> pa = {3, 0}, pb = {1, 2}, positions = {0, 1};
  const auto call_of = [&](const std::vector<int32_t>& ids, LogitRows rows) {
    StepCall call;
    call.ids = ids;
    call.positions = positions;
    call.rows = rows;
    return call;
  };
  std::vector<std::vector<float>> alone;
  for (const std::vector<int32_t>* p : {&pa, &pb}) {
    std::unique_ptr<SequenceState> s = *executor->NewSequence(32);
    StepResult r;
    ASSERT_TRUE(executor->Run(*s, call_of(*p, LogitRows::kAll), &r).ok());
    alone.push_back(r.logits);
  }
  std::unique_ptr<SequenceState> a = *executor->NewSequence(32), b = *executor->NewSequence(32);
  std::vector<StepResult> results;
  // b's rows come after a's; a draws its token (its last row moves to the end of the step).
  ASSERT_TRUE(executor->RunBatch({{a.get(), call_of(pa, LogitRows::kAll)},
                                  {b.get(), call_of(pb, LogitRows::kAll)}},
                                 &results).ok());
  EXPECT_EQ(results[0].logits, alone[0]);
  EXPECT_EQ(results[1].logits, alone[1]);
  EXPECT_NE(alone[0], alone[1]);
}

// What a batched step refuses before running anything.
TEST_F(HostExecutorTest, ABatchedStepRefusesMalformedCalls) {
  plan_ = TinyPlan(KvKind::kFull, 0);
  std::unique_ptr<Executor> executor = *CreateHostExecutor(plan_, Weights());
  ASSERT_TRUE(executor->ReserveSequences(32, 2, 2).ok());
  std::unique_ptr<SequenceState> a = *executor->NewSequence(32), b = *executor->NewSequence(32);
  const std::vector<int32_t> three = {0, 1, 2}, positions = {0, 1, 2};
  StepCall call;
  call.ids = three;
  call.positions = positions;
  std::vector<StepResult> results;
  EXPECT_TRUE(ErrorContains(executor->RunBatch({{a.get(), call}, {a.get(), call}}, &results),
                            "calls 0 and 1 of the step are of the same sequence"));
  EXPECT_TRUE(ErrorContains(executor->RunBatch({{a.get(), call}, {b.get(), call}}, &results),
                            "a step takes 1 to 4 tokens and at most as many soft rows (the plan's "
                            "max_tokens), the calls have 6 and 0"));
  StepCall one = call;
  one.ids = absl::MakeSpan(three).subspan(0, 1);
  one.positions = absl::MakeSpan(positions).subspan(0, 1);
  StepCall bad = one;
  const std::vector<int32_t> out_of_range = {9};
  bad.ids = out_of_range;
  EXPECT_TRUE(ErrorContains(executor->RunBatch({{a.get(), one}, {b.get(), bad}}, &results),
                            "call 1 of the step: token id 9 at step row 0 is outside the "
                            "vocabulary [0, 4)"));
  // A third sequence's blocks do not fit a pool reserved for two: refused, nothing lost.
  EXPECT_TRUE(ErrorContains(executor->ReserveSequences(32, 3, 3),
                            "cannot be reserved again while 2 sequence(s) of it are alive"));
}

// The token is drawn on the executor with the call's sampling parameters, and out-of-range
// parameters are refused before anything runs.
TEST_F(HostExecutorTest, TheTokenIsDrawnWithTheCallsSamplingParameters) {
  std::unique_ptr<Executor> executor = Make(TinyPlan(KvKind::kFull, 0));
  absl::StatusOr<std::unique_ptr<SequenceState>> sequence = executor->NewSequence(32);
  ASSERT_TRUE(sequence.ok());
  // Token 0 alone: logits {1, 0, 1, -1}, a tie between 0 and 2.
  const std::vector<int32_t> ids = {0}, positions = {0};
  StepCall call;
  call.ids = ids;
  call.positions = positions;
  StepResult result;
  ASSERT_TRUE(executor->Run(**sequence, call, &result).ok());
  EXPECT_EQ(result.token, 0);  // greedy: the lower index of the tie
  // At a high temperature every token is drawn now and then; with top_k 2 only the tie's two.
  call.sampling.temperature = 100.0f;
  call.sampling.seed = 5;
  std::vector<int> seen(kVocab, 0);
  for (uint64_t counter = 0; counter < 200; ++counter) {
    call.sampling.counter = counter;
    ASSERT_TRUE(executor->Run(**sequence, call, &result).ok());
    ASSERT_GE(result.token, 0);
    ASSERT_LT(result.token, kVocab);
    ++seen[result.token];
  }
  for (int v = 0; v < kVocab; ++v) EXPECT_GT(seen[v], 0) << "token " << v;
  call.sampling.top_k = 2;
  for (uint64_t counter = 0; counter < 50; ++counter) {
    call.sampling.counter = counter;
    ASSERT_TRUE(executor->Run(**sequence, call, &result).ok());
    EXPECT_TRUE(result.token == 0 || result.token == 2) << result.token;
  }
  call.sampling.top_p = 1.5f;
  EXPECT_TRUE(ErrorContains(executor->Run(**sequence, call, &result),
                            "sampling parameters out of range"));
  call.sampling.top_p = 1.0f;
  call.sampling.temperature = -1.0f;
  EXPECT_TRUE(ErrorContains(executor->Run(**sequence, call, &result),
                            "sampling parameters out of range"));
}

// A transfer step (an op carried out without a kernel: a copy of the call's rows) runs on the
// host as its reference does: the tiny model with its embeddings copied to another buffer, which
// the attention then reads, gives the logits of the model without the copy.
TEST_F(HostExecutorTest, ATransferStepCopiesTheCallsRows) {
  Plan plan = TinyPlan(KvKind::kFull, 0, /*soft_merge=*/false);
  const int64_t h = plan.steps[0].args[abi::ops::embedding::y].index;
  BufferInfo copy{"%h.copy", DType::kF32, {kHidden}, plan.arena_bytes};
  plan.arena_bytes += copy.row_bytes() * kMaxTokens;
  const int64_t h2 = static_cast<int64_t>(plan.buffers.size());
  plan.buffers.push_back(copy);
  for (Step& step : plan.steps) {
    if (step.op != abi::OpId::kKvWrite && step.op != abi::OpId::kAttention) continue;
    for (StepArg& arg : step.args) {
      if (arg.kind == ArgRefKind::kBuffer && arg.index == h) arg.index = h2;
    }
  }
  plan.steps.insert(plan.steps.begin() + 1,
                    TransferStep(abi::OpId::kCopy, "copy",
                                 {Buffer(h), Buffer(h2), NumTokens(), I32(kHidden)}));
  BuildPrograms(&plan);
  ASSERT_TRUE(ValidatePlan(plan, "copy").ok()) << ValidatePlan(plan, "copy");
  std::unique_ptr<Executor> executor = Make(plan);
  const std::vector<int32_t> ids = {0, 1, 2};
  std::vector<float> logits;
  ASSERT_TRUE(executor->RunStep(ids, {0, 1, 2}, nullptr, &logits).ok());
  for (int p = 0; p < 3; ++p) ExpectNear(Row(logits, p), Expected(ids, p, 0));
  ASSERT_TRUE(executor->RunStep({1}, {3}, nullptr, &logits).ok());  // decode: the copy too
  ExpectNear(Row(logits, 0), Expected({0, 1, 2, 1}, 3, 0));
}

// Direct memory access for tools (the GPU op check): bytes in and out of the arena and the KV
// caches, and a program run on what memory holds; ranges outside them are refused.
TEST_F(HostExecutorTest, ToolsReadAndWriteMemoryAndRunAProgram) {
  const Plan plan = TinyPlan(KvKind::kFull, 0, /*soft_merge=*/false);
  std::unique_ptr<Executor> executor = Make(plan);
  absl::StatusOr<std::unique_ptr<SequenceState>> sequence = executor->NewSequence(8);
  ASSERT_TRUE(sequence.ok());
  // ids {1, 2} at positions {0, 1}, written as the runtime would.
  const int32_t ids[] = {1, 2}, positions[] = {0, 1};
  const auto bytes = [](const int32_t* v, size_t n) {
    return std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(v),
                                reinterpret_cast<const uint8_t*>(v) + 4 * n);
  };
  const MemoryRegion at_ids{MemoryRegion::Kind::kArena, 0, plan.buffers[plan.input_ids].offset};
  ASSERT_TRUE(executor->CopyToMemory(**sequence, at_ids, bytes(ids, 2)).ok());
  ASSERT_TRUE(executor
                  ->CopyToMemory(**sequence,
                                 {MemoryRegion::Kind::kArena, 0,
                                  plan.buffers[plan.input_positions].offset},
                                 bytes(positions, 2))
                  .ok());
  ASSERT_TRUE(executor->RunProgram(**sequence, 2, 0).ok());
  std::vector<uint8_t> logits(2 * kVocab * 4);
  ASSERT_TRUE(executor
                  ->CopyFromMemory(**sequence,
                                   {MemoryRegion::Kind::kArena, 0,
                                    plan.buffers[plan.output_logits].offset},
                                   absl::MakeSpan(logits))
                  .ok());
  std::vector<float> values(2 * kVocab);
  std::memcpy(values.data(), logits.data(), logits.size());
  ExpectNear(Row(values, 1), Expected({1, 2}, 1, 0));
  // The cache holds what kv_write wrote: K = V = the embedding of id 2 at slot 1.
  std::vector<uint8_t> k(kHidden * 4);
  ASSERT_TRUE(executor
                  ->CopyFromMemory(**sequence, {MemoryRegion::Kind::kKCache, 0, kHidden * 4},
                                   absl::MakeSpan(k))
                  .ok());
  float slot1[kHidden];
  std::memcpy(slot1, k.data(), sizeof(slot1));
  EXPECT_EQ(slot1[0], kTable[2][0]);
  EXPECT_EQ(slot1[1], kTable[2][1]);
  // Refusals.
  EXPECT_TRUE(ErrorContains(
      executor->CopyToMemory(**sequence, {MemoryRegion::Kind::kArena, 0, plan.arena_bytes},
                             bytes(ids, 1)),
      "4 bytes at offset"));
  EXPECT_TRUE(ErrorContains(executor->CopyFromMemory(**sequence,
                                                     {MemoryRegion::Kind::kVCache, 3, 0},
                                                     absl::MakeSpan(k)),
                            "KV cache 3 is out of range"));
  EXPECT_TRUE(ErrorContains(executor->RunProgram(**sequence, kMaxTokens + 1, 0),
                            "the plan has no program for a call of 5 tokens"));
  EXPECT_TRUE(ErrorContains(executor->RunProgram(**sequence, 1, 1),
                            "soft rows need a soft-token merge"));
}

// Prefix sharing (Executor::ShareKv): b reads a's blocks where they are; a write to a shared
// block gives the writer a copy first; a dropped sequence's blocks that another still shares keep
// their bytes (the host fills only freed blocks with NaN).
TEST_F(HostExecutorTest, SharedKvBlocksAreReadInPlaceAndCopiedOnWrite) {
  const Plan plan = TinyPlan(KvKind::kFull, 0, /*soft_merge=*/false);
  std::unique_ptr<Executor> executor = Make(plan);
  std::unique_ptr<SequenceState> a = *executor->NewSequence(32), b = *executor->NewSequence(32);
  const auto slot = [](int64_t s) { return MemoryRegion{MemoryRegion::Kind::kKCache, 0,
                                                        static_cast<uint64_t>(s * kHidden * 4)}; };
  const auto write = [&](SequenceState& seq, int64_t s, float x) {
    const float v[kHidden] = {x, x + 1};
    return executor->CopyToMemory(
        seq, slot(s), absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(v), sizeof(v)));
  };
  const auto read = [&](SequenceState& seq, int64_t s) {
    float v[kHidden] = {0, 0};
    EXPECT_TRUE(executor
                    ->CopyFromMemory(seq, slot(s),
                                     absl::MakeSpan(reinterpret_cast<uint8_t*>(v), sizeof(v)))
                    .ok());
    return v[0];
  };
  ASSERT_TRUE(write(*a, 0, 10.0f).ok());
  ASSERT_TRUE(write(*a, 1, 20.0f).ok());
  ASSERT_TRUE(write(*b, 0, 99.0f).ok());  // b's own block, given up by the share
  ASSERT_TRUE(executor->ShareKv(*a, *b, 2).ok());
  EXPECT_EQ(read(*b, 0), 10.0f);
  EXPECT_EQ(read(*b, 1), 20.0f);
  // a gives its blocks up: b still shares them, so nothing is freed and b reads the same bytes.
  EXPECT_EQ(*executor->DropKv(*a), 0);
  EXPECT_EQ(read(*b, 1), 20.0f);
  // Shared again (a takes b's), then b writes slot 1: b's copy changes, a's block does not.
  ASSERT_TRUE(executor->ShareKv(*b, *a, 2).ok());
  ASSERT_TRUE(write(*b, 1, 30.0f).ok());
  EXPECT_EQ(read(*b, 1), 30.0f);
  EXPECT_EQ(read(*b, 0), 10.0f);  // the rest of the block came with the copy
  EXPECT_EQ(read(*a, 1), 20.0f);
  // Refusals.
  EXPECT_TRUE(ErrorContains(executor->ShareKv(*a, *a, 2), "cannot share its own KV blocks"));
  std::unique_ptr<Executor> other = Make(plan);
  std::unique_ptr<SequenceState> c = *other->NewSequence(32);
  EXPECT_FALSE(executor->ShareKv(*c, *a, 2).ok());
  EXPECT_TRUE(ErrorContains(executor->ShareKv(*a, *b, 33), "cannot share 33 positions"));
  EXPECT_EQ(read(*b, 1), 30.0f);  // a refused share leaves b's blocks alone
}

TEST_F(HostExecutorTest, DecodeAfterPrefillReadsTheCache) {
  std::unique_ptr<Executor> executor = Make(TinyPlan(KvKind::kFull, 0));
  const std::vector<int32_t> ids = {3, 1, 2, 0, 2, 1};
  std::vector<float> logits;
  ASSERT_TRUE(executor->RunStep({3, 1, 2, 0}, {0, 1, 2, 3}, nullptr, &logits).ok());
  for (int p = 4; p < 6; ++p) {
    ASSERT_TRUE(executor->RunStep({ids[p]}, {p}, nullptr, &logits).ok());
    ExpectNear(logits, Expected(ids, p, 0));
  }
}

TEST_F(HostExecutorTest, SlidingCacheMatchesTheWindowAcrossChunksAndWraparound) {
  // window 3, max_tokens 4: capacity min(32, 3 - 1 + 4) = 6 slots, wrapping several times.
  std::unique_ptr<Executor> executor = Make(TinyPlan(KvKind::kSliding, 3));
  const std::vector<int32_t> ids = {0, 1, 2, 3, 1, 0, 2, 2, 3, 1, 0, 1, 3, 2, 0, 0, 1, 2};
  std::vector<float> logits;
  int p = 0;
  for (int chunk : {4, 3, 1, 4, 1, 1, 4}) {
    std::vector<int32_t> chunk_ids, positions;
    for (int i = 0; i < chunk; ++i, ++p) {
      chunk_ids.push_back(ids[p]);
      positions.push_back(p);
    }
    ASSERT_TRUE(executor->RunStep(chunk_ids, positions, nullptr, &logits).ok());
    for (int i = 0; i < chunk; ++i) {
      ExpectNear(Row(logits, i), Expected(ids, positions[i], 3));
    }
  }
}

TEST_F(HostExecutorTest, PrepareAgainStartsOver) {
  std::unique_ptr<Executor> executor = Make(TinyPlan(KvKind::kFull, 0));
  std::vector<float> logits;
  ASSERT_TRUE(executor->RunStep({3, 3}, {0, 1}, nullptr, &logits).ok());
  ASSERT_TRUE(executor->Prepare(16).ok());
  ASSERT_TRUE(executor->RunStep({0}, {0}, nullptr, &logits).ok());
  ExpectNear(logits, Expected({0}, 0, 0));
}

TEST_F(HostExecutorTest, SoftTokensReplaceEmbeddingRowsAndOutOfRangeRowsAreSkipped) {
  std::unique_ptr<Executor> executor = Make(TinyPlan(KvKind::kFull, 0));
  const std::vector<float> rows = {5, 5, 9, 9, 9, 9};
  const std::vector<int32_t> indices = {1, -1, 3};  // 3 >= num_tokens (2): skipped
  const SoftTokenChunk soft{rows, indices};
  std::vector<float> logits;
  ASSERT_TRUE(executor->RunStep({0, 0}, {0, 1}, &soft, &logits).ok());
  // Token 1 is [5, 5]: the mean of [1, 0] and [5, 5] is [3, 2.5].
  ExpectNear(Row(logits, 1), {3, 2.5f, 5.5f, 2});
}

// The observer sees the output of every step the call runs: without soft tokens the call's
// program has no merge.
TEST_F(HostExecutorTest, StepObserverSeesEveryOutputBuffer) {
  std::unique_ptr<Executor> executor = Make(TinyPlan(KvKind::kFull, 0));
  std::vector<std::string> names;
  std::vector<float> embed_output;
  executor->set_step_observer([&](const StepOutput& output) {
    names.push_back(output.name);
    EXPECT_EQ(output.shape[0], 2);
    if (output.name == "0.embed") {
      const float* data = static_cast<const float*>(output.data);
      embed_output.assign(data, data + output.num_bytes / sizeof(float));
    }
    return absl::OkStatus();
  });
  std::vector<float> logits;
  ASSERT_TRUE(executor->RunStep({2, 3}, {0, 1}, nullptr, &logits).ok());
  EXPECT_EQ(names, (std::vector<std::string>{"0.embed", "3.layers.0.attention", "4.lm_head",
                                             "5.sample"}));
  ExpectNear(embed_output, {1, 1, -1, 2});
}

TEST_F(HostExecutorTest, Bf16ActivationsAreStoredAsBf16) {
  const Plan plan = test::WithBf16Activations(TinyPlan(KvKind::kFull, 0));
  ASSERT_TRUE(ValidatePlan(plan, "bf16").ok()) << ValidatePlan(plan, "bf16");
  std::unique_ptr<Executor> executor = Make(plan);
  int outputs = 0;
  executor->set_step_observer([&](const StepOutput& output) {
    if (output.dtype == DType::kI32) return absl::OkStatus();
    // Every activation a step writes is stored in bf16: half the bytes of its f32 rows.
    ++outputs;
    EXPECT_EQ(output.dtype, DType::kBF16) << output.name;
    uint64_t elements = 1;
    for (int64_t d : output.shape) elements *= static_cast<uint64_t>(d);
    EXPECT_EQ(output.num_bytes, 2 * elements) << output.name;
    return absl::OkStatus();
  });
  std::vector<float> logits;
  ASSERT_TRUE(executor->RunStep({0, 1, 2}, {0, 1, 2}, nullptr, &logits).ok());
  EXPECT_EQ(outputs, 3);  // embed, attention, lm_head (no merge: the call has no soft tokens)
  // Token 2 attends to the mean of rows {1,0}, {0,1}, {1,1}: (2/3, 2/3), stored as bf16
  // 0.66796875 (f32 keeps 0.6666667, see PrefillComputesEveryRow); the logits are its products
  // with the table rows, rounded again, and come back widened to f32.
  EXPECT_EQ(Row(logits, 2), (std::vector<float>{0.66796875f, 0.66796875f, 1.3359375f,
                                                0.66796875f}));
}

TEST_F(HostExecutorTest, StepDumpWritesOneSafetensorsFilePerCall) {
  const test::TempDir temp;
  const std::string& dir = temp.path();
  std::unique_ptr<Executor> executor = WithStepDump(Make(TinyPlan(KvKind::kFull, 0)), dir);
  ASSERT_TRUE(executor->Prepare(32).ok());  // the wrapper's own sequence
  std::vector<float> logits;
  ASSERT_TRUE(executor->RunStep({2, 3}, {0, 1}, nullptr, &logits).ok());
  ASSERT_TRUE(executor->RunStep({1}, {2}, nullptr, &logits).ok());
  absl::StatusOr<std::vector<OwnedTensor>> first = ReadSafetensorsFile(dir + "/run000.safetensors");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 4u);  // the steps the call runs: no merge without soft tokens
  EXPECT_EQ((*first)[0].name, "0.embed");
  EXPECT_EQ((*first)[0].dtype, "F32");
  EXPECT_EQ((*first)[0].shape, (std::vector<int64_t>{2, kHidden}));
  EXPECT_EQ((*first)[2].name, "4.lm_head");
  EXPECT_EQ((*first)[2].shape, (std::vector<int64_t>{2, kVocab}));
  absl::StatusOr<std::vector<OwnedTensor>> second =
      ReadSafetensorsFile(dir + "/run001.safetensors");
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->size(), 4u);
  EXPECT_EQ((*second)[2].shape, (std::vector<int64_t>{1, kVocab}));
  EXPECT_EQ(executor->name(), "host");
}

// A dump never writes through what is already in the directory: a symbolic link planted as the
// next dump file (pointing at a file the attacker wants overwritten) or an existing file.
TEST_F(HostExecutorTest, StepDumpRefusesExistingFilesAndLinks) {
  const test::TempDir temp;
  const std::string victim = temp.Write("victim.txt", "precious");
  ASSERT_EQ(::symlink(victim.c_str(), temp.Path("run000.safetensors").c_str()), 0);
  temp.Write("run001.safetensors", "old dump");
  std::unique_ptr<Executor> executor = WithStepDump(Make(TinyPlan(KvKind::kFull, 0)), temp.path());
  ASSERT_TRUE(executor->Prepare(32).ok());
  std::vector<float> logits;
  const absl::Status status = executor->RunStep({2, 3}, {0, 1}, nullptr, &logits);
  EXPECT_TRUE(test::StatusIs(status, absl::StatusCode::kAlreadyExists,
                             absl::StrCat("cannot create ", temp.Path("run000.safetensors"),
                                          ": it already exists (a file, or a symbolic link, "
                                          "which is never followed)")));
  EXPECT_EQ(*ReadFileToString(victim), "precious");
  EXPECT_TRUE(test::StatusIs(executor->RunStep({1}, {2}, nullptr, &logits),
                             absl::StatusCode::kAlreadyExists, "run001.safetensors"));
  EXPECT_EQ(*ReadFileToString(temp.Path("run001.safetensors")), "old dump");
}

// An allocation the host cannot make (here a 4 EiB arena; in practice ulimit -v or a cgroup
// limit) is RESOURCE_EXHAUSTED, not an abort on std::bad_alloc.
TEST_F(HostExecutorTest, PrepareReportsAnAllocationFailure) {
#if defined(__SANITIZE_ADDRESS__) || SPARK_HAS_ADDRESS_SANITIZER
  GTEST_SKIP() << "AddressSanitizer's operator new aborts on an impossible size instead of "
                  "throwing std::bad_alloc; the regular build runs this test";
#endif
  Plan plan = TinyPlan(KvKind::kFull, 0);
  plan.arena_bytes = uint64_t{1} << 62;
  absl::StatusOr<std::unique_ptr<Executor>> executor = CreateHostExecutor(plan, Weights());
  ASSERT_TRUE(executor.ok()) << executor.status();
  EXPECT_TRUE(test::StatusIs((*executor)->Prepare(32), absl::StatusCode::kResourceExhausted,
                             "out of host memory: cannot allocate the activation arena "
                             "(4611686018427387904 bytes); free memory, or raise this process's "
                             "limit (ulimit -v, the container's or cgroup's memory limit)"));
  std::vector<float> logits;
  EXPECT_TRUE(test::StatusIs((*executor)->RunStep({0}, {0}, nullptr, &logits),
                             absl::StatusCode::kFailedPrecondition, "Prepare must be called"));
}

TEST_F(HostExecutorTest, ObserverErrorStopsTheRun) {
  std::unique_ptr<Executor> executor = Make(TinyPlan(KvKind::kFull, 0));
  executor->set_step_observer([](const StepOutput&) { return absl::InternalError("disk full"); });
  std::vector<float> logits;
  EXPECT_TRUE(ErrorContains(executor->RunStep({0}, {0}, nullptr, &logits), "disk full"));
}

TEST_F(HostExecutorTest, RunStepBeforePrepareFails) {
  const Plan plan = TinyPlan(KvKind::kFull, 0);
  absl::StatusOr<std::unique_ptr<Executor>> executor = CreateHostExecutor(plan, Weights());
  ASSERT_TRUE(executor.ok());
  std::vector<float> logits;
  const absl::Status status = (*executor)->RunStep({0}, {0}, nullptr, &logits);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(HostExecutorTest, RejectsBadStepInputs) {
  std::unique_ptr<Executor> executor = Make(TinyPlan(KvKind::kFull, 0), 8);
  std::vector<float> logits;
  EXPECT_TRUE(ErrorContains(executor->RunStep({0, 1, 2, 3, 0}, {0, 1, 2, 3, 4}, nullptr, &logits),
                            "a step takes 1 to 4 tokens (the plan's max_tokens), got 5"));
  EXPECT_TRUE(ErrorContains(executor->RunStep({}, {}, nullptr, &logits), "got 0"));
  EXPECT_TRUE(ErrorContains(executor->RunStep({0, 1}, {0}, nullptr, &logits),
                            "got 2 token ids but 1 positions"));
  EXPECT_TRUE(ErrorContains(executor->RunStep({0, 4}, {0, 1}, nullptr, &logits),
                            "token id 4 at step row 1 is outside the vocabulary [0, 4)"));
  EXPECT_TRUE(ErrorContains(executor->RunStep({0}, {8}, nullptr, &logits),
                            "position 8 at step row 0 is outside [0, max_length = 8)"));
  const std::vector<float> rows = {1, 2, 3};
  const std::vector<int32_t> indices = {0, 1};
  const SoftTokenChunk soft{rows, indices};
  EXPECT_TRUE(ErrorContains(executor->RunStep({0, 1}, {0, 1}, &soft, &logits),
                            "2 soft-token rows of width 2 need 4 floats, got 3"));
}

TEST_F(HostExecutorTest, LastVisibleLetsABlockSeeItsLaterTokens) {
  const std::vector<int32_t> ids = {0, 1, 2};
  const std::vector<float> rows = {1, 0, 0, 1};  // the embeddings of ids 0 and 1 (kTable)
  const std::vector<int32_t> indices = {0, 1};
  const std::vector<int32_t> block = {1, 1, 2};  // rows 0 and 1: one image
  SoftTokenChunk soft{rows, indices, block};
  std::vector<float> logits;
  std::unique_ptr<Executor> executor = Make(TinyPlan(KvKind::kFull, 0, true, true));
  ASSERT_TRUE(executor->RunStep(ids, {0, 1, 2}, &soft, &logits).ok());
  ExpectNear(Row(logits, 0), Expected(ids, 1, 0));  // row 0 sees row 1 too
  ExpectNear(Row(logits, 1), Expected(ids, 1, 0));
  ExpectNear(Row(logits, 2), Expected(ids, 2, 0));
  // No blocks (empty last_visible, or no soft tokens at all): causal, as decode is.
  soft.last_visible = {};
  ASSERT_TRUE(executor->RunStep(ids, {0, 1, 2}, &soft, &logits).ok());
  ExpectNear(Row(logits, 0), Expected(ids, 0, 0));
  ASSERT_TRUE(executor->RunStep({2}, {3}, nullptr, &logits).ok());
  ExpectNear(Row(logits, 0), Expected({0, 1, 2, 2}, 3, 0));
}

TEST_F(HostExecutorTest, RejectsLastVisibleOutsideTheStepOrWithoutTheMask) {
  const std::vector<float> rows = {1, 0};
  const std::vector<int32_t> indices = {0};
  std::vector<float> logits;
  std::unique_ptr<Executor> executor = Make(TinyPlan(KvKind::kFull, 0, true, true));
  const std::vector<int32_t> ahead = {3, 1};  // key 3 is not in this step
  const SoftTokenChunk past_step{rows, indices, ahead};
  EXPECT_TRUE(ErrorContains(executor->RunStep({0, 1}, {0, 1}, &past_step, &logits),
                            "last_visible 3 at step row 0 is outside [position 0, the step's last "
                            "position 1]: an image block must lie within one step"));
  const std::vector<int32_t> behind = {0, 0};
  const SoftTokenChunk before{rows, indices, behind};
  EXPECT_TRUE(ErrorContains(executor->RunStep({0, 1}, {0, 1}, &before, &logits),
                            "last_visible 0 at step row 1 is outside [position 1"));
  const std::vector<int32_t> one = {1};
  const SoftTokenChunk short_block{rows, indices, one};
  EXPECT_TRUE(ErrorContains(executor->RunStep({0, 1}, {0, 1}, &short_block, &logits),
                            "got 2 tokens but 1 last_visible values"));
  std::unique_ptr<Executor> causal = Make(TinyPlan(KvKind::kFull, 0));
  const std::vector<int32_t> block = {1, 1};
  const SoftTokenChunk blocks{rows, indices, block};
  EXPECT_TRUE(ErrorContains(causal->RunStep({0, 1}, {0, 1}, &blocks, &logits),
                            "the model's attention is causal"));
}

TEST_F(HostExecutorTest, RejectsSoftTokensWithoutAMerge) {
  std::unique_ptr<Executor> executor = Make(TinyPlan(KvKind::kFull, 0, /*soft_merge=*/false));
  const std::vector<float> rows = {1, 2};
  const std::vector<int32_t> indices = {0};
  const SoftTokenChunk soft{rows, indices};
  std::vector<float> logits;
  EXPECT_TRUE(ErrorContains(executor->RunStep({0}, {0}, &soft, &logits),
                            "compiled without a soft-token merge"));
  EXPECT_TRUE(executor->RunStep({0}, {0}, nullptr, &logits).ok());
}

TEST_F(HostExecutorTest, RejectsWeightsThatDoNotMatchThePlan) {
  const Plan plan = TinyPlan(KvKind::kFull, 0);
  EXPECT_TRUE(ErrorContains(CreateHostExecutor(plan, {}).status(),
                            "the plan reads 1 weights, 0 were bound"));
  std::vector<WeightData> short_weights = Weights();
  short_weights[0].num_bytes -= 2;
  EXPECT_TRUE(ErrorContains(CreateHostExecutor(plan, short_weights).status(),
                            "weight model.embed_tokens.weight needs 16 bytes, bound 14"));
}

TEST_F(HostExecutorTest, RejectsBadMaxLength) {
  const Plan plan = TinyPlan(KvKind::kFull, 0);
  absl::StatusOr<std::unique_ptr<Executor>> executor = CreateHostExecutor(plan, Weights());
  ASSERT_TRUE(executor.ok());
  EXPECT_TRUE(ErrorContains((*executor)->Prepare(0), "max_length must be in [1, 2^31), got 0"));
}

TEST_F(HostExecutorTest, KernelErrorsNameTheStep) {
  Plan plan = TinyPlan(KvKind::kFull, 0);
  plan.steps[plan.steps.size() - 2].args[4] = I32(-3);  // the LM head's out_features
  std::unique_ptr<Executor> executor = Make(plan);
  std::vector<float> logits;
  EXPECT_TRUE(ErrorContains(executor->RunStep({0}, {0}, nullptr, &logits),
                            "step 4 (lm_head, op linear, kernel spark_linear__i4_i2)"));
}

// A kernel runner (spark-op-check's CPU emulation of the CUDA kernels) runs every launch step in
// place of the host references, with the call's grid; its errors name the step, and arguments
// the registry refuses never reach it.
TEST_F(HostExecutorTest, AKernelRunnerRunsEveryLaunchInsteadOfTheReferences) {
  plan_ = TinyPlan(KvKind::kFull, 0);
  std::vector<abi::OpId> ran;
  absl::Status fail_with = absl::OkStatus();
  HostKernelRunner runner = [&](abi::OpId op, absl::Span<const HostArg> args, int blocks,
                                int shared_bytes) {
    ran.push_back(op);
    EXPECT_GE(blocks, 1);
    // Calls of 3 tokens: no op gets the dense linears' tile memory (more than 16 tokens).
    EXPECT_EQ(shared_bytes, 0) << abi::Spec(op).op;
    if (!fail_with.ok()) return fail_with;
    return RunHostKernel(op, args);  // the references, so that the numbers can be checked
  };
  absl::StatusOr<std::unique_ptr<Executor>> executor =
      CreateHostExecutor(plan_, Weights(), runner);
  ASSERT_TRUE(executor.ok()) << executor.status();
  ASSERT_TRUE((*executor)->Prepare(32).ok());
  const std::vector<int32_t> ids = {0, 1, 2};
  std::vector<float> logits;
  ASSERT_TRUE((*executor)->RunStep(ids, {0, 1, 2}, nullptr, &logits).ok());
  for (int p = 0; p < 3; ++p) ExpectNear(Row(logits, p), Expected(ids, p, 0));
  ASSERT_FALSE(ran.empty());
  for (abi::OpId op : ran) EXPECT_TRUE(abi::Spec(op).kernel()) << abi::Spec(op).op;

  ran.clear();
  fail_with = absl::InternalError("emulated fault");
  ASSERT_TRUE((*executor)->Prepare(32).ok());
  const absl::Status status = (*executor)->RunStep({0}, {0}, nullptr, &logits);
  EXPECT_TRUE(ErrorContains(status, "emulated fault")) << status;
  EXPECT_TRUE(ErrorContains(status, "step 0")) << status;
  EXPECT_EQ(ran.size(), 1u);

  Plan bad = TinyPlan(KvKind::kFull, 0);
  bad.steps[bad.steps.size() - 2].args[4] = I32(-3);  // the LM head's out_features
  plan_ = bad;
  ran.clear();
  fail_with = absl::OkStatus();
  executor = CreateHostExecutor(plan_, Weights(), runner);
  ASSERT_TRUE(executor.ok() && (*executor)->Prepare(32).ok());
  EXPECT_TRUE(ErrorContains((*executor)->RunStep({0}, {0}, nullptr, &logits),
                            "step 4 (lm_head, op linear, kernel spark_linear__i4_i2)"));
  for (abi::OpId op : ran) EXPECT_NE(abi::Spec(op).op, std::string("linear"));
}

TEST(KvCapacityTest, FullHoldsMaxLengthSlidingHoldsTheWindowPlusAChunk) {
  KvCacheInfo full;
  full.kind = KvKind::kFull;
  EXPECT_EQ(KvCapacity(full, 4096, 64), 4096);
  KvCacheInfo sliding;
  sliding.kind = KvKind::kSliding;
  sliding.window = 512;
  EXPECT_EQ(KvCapacity(sliding, 4096, 64), 576);  // 575 slots, whole blocks
  EXPECT_EQ(KvCapacity(sliding, 100, 64), 112);
}

// An integrated GPU reads weights in place unless their bytes sit where the kernels' 16-byte
// vector loads cannot read them: those are copied (a safetensors file packs tensors back to back,
// so the U8 codes after an NVFP4 checkpoint's f32 scalars may start at any offset).
TEST(PlaceIntegratedWeightsTest, CopiesWhatIsNotSixteenByteAligned) {
  alignas(64) static uint8_t bytes[256] = {};
  Plan plan;
  plan.weights = {{"aligned", DType::kF4E2M1FN, {8, 16}},     // 64 bytes at offset 0
                  {"codes", DType::kF4E2M1FN, {8, 16}},       // 64 bytes at offset 68
                  {"scalar", DType::kF32, {}},                // 4 bytes at offset 4: fine
                  {"bf16-odd", DType::kBF16, {4}},            // 8 bytes at offset 1: element
                  {"empty", DType::kBF16, {0}}};              // no bytes
  const std::vector<WeightData> weights = {
      {bytes, 64}, {bytes + 68, 64}, {bytes + 4, 4}, {bytes + 1, 8}, {bytes + 3, 0}};
  const WeightPlacement placement = PlaceIntegratedWeights(plan, weights);
  EXPECT_EQ(placement.copied, (std::vector<bool>{false, true, false, true, false}));
  EXPECT_EQ(placement.num_copied, 2u);
  EXPECT_EQ(placement.copied_bytes, 72u);
}

}  // namespace
}  // namespace rt
}  // namespace spark
