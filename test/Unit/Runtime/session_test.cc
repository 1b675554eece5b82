// The public API (engine.h, session.h) on the host executor, with the tiny model of tiny_plan.h
// written to disk as a PTX artifact (plan file beside it) and a one-tensor checkpoint: opening a
// model, sessions that reuse their KV caches for the prompt prefix they hold (and the sliding-
// window limit on going back), cancellation, several sessions of one model.
#include "spark/runtime/session.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "loader_test_util.h"
#include "runtime_test_util.h"
#include "spark/runtime/engine.h"
#include "spark/runtime/generator.h"
#include "spark/runtime/host_kernels.h"
#include "spark/runtime/plan.h"
#include "spark/runtime/safetensors.h"
#include "tiny_plan.h"

namespace spark {
namespace rt {
namespace {

using testing_util::ErrorContains;
using namespace tiny_plan;  // NOLINT: the tiny model of tiny_plan.h

class SessionTest : public ::testing::Test {
 protected:
  // Writes `plan` as dir/tiny.compute_90.ptx + .plan and the embedding table as a checkpoint,
  // and opens it on the host.
  absl::StatusOr<std::shared_ptr<Model>> Open(Plan plan, int64_t max_length = 32,
                                              int64_t max_sessions = 2,
                                              int64_t kv_pool_sessions = 0) {
    plan.target = "compute_90";
    const std::string artifact = temp_.Write("tiny.compute_90.ptx", "// no kernels: host only\n");
    temp_.Write("tiny.compute_90.plan", SerializePlanSection(plan));
    OwnedTensor table;
    table.name = plan.weights[0].name;
    table.dtype = "BF16";
    table.shape = plan.weights[0].shape;
    for (const auto& row : kTable) {
      for (float v : row) {
        const uint16_t bits = F32ToBf16(v);
        table.bytes.append(reinterpret_cast<const char*>(&bits), 2);
      }
    }
    const std::string weights = temp_.Path("model.safetensors");
    const absl::Status written = WriteSafetensors(weights, {table});
    if (!written.ok()) return written;
    EngineOptions engine_options;
    engine_options.device = DeviceMode::kHost;
    ModelOptions options;
    options.artifact = artifact;
    options.weights = weights;
    options.max_length = max_length;
    options.max_sessions = max_sessions;
    options.kv_pool_sessions = kv_pool_sessions;
    options.share_kv_prefixes = share_kv_prefixes_;
    return Engine(engine_options).OpenModel(options);
  }

  static GenerateOptions Greedy(int64_t max_new_tokens, bool collect_logits = false) {
    GenerateOptions options;
    options.max_new_tokens = max_new_tokens;
    options.collect_logits = collect_logits;
    options.stop_token_ids = {};
    return options;
  }

  // What a fresh session of `model` generates after `prompt`.
  static GenerateResult Fresh(Model& model, const std::vector<int32_t>& prompt,
                              const GenerateOptions& options) {
    absl::StatusOr<std::unique_ptr<Session>> session = model.NewSession();
    EXPECT_TRUE(session.ok()) << session.status();
    absl::StatusOr<GenerateResult> result = (*session)->Generate(prompt, nullptr, options);
    EXPECT_TRUE(result.ok()) << result.status();
    return *std::move(result);
  }

  // `first` generates after `prompt` on another thread, which holds at its first token (its
  // prompt prefilled) until `while_held` has run on this one; returns what `first` generated.
  static absl::StatusOr<GenerateResult> WhileHeldAtFirstToken(
      Session& first, const std::vector<int32_t>& prompt, GenerateOptions options,
      const std::function<void()>& while_held) {
    std::atomic<bool> waiting{false}, released{false};
    options.on_token = [&](int32_t) {
      if (!waiting.exchange(true)) {
        while (!released) std::this_thread::yield();
      }
      return true;
    };
    absl::StatusOr<GenerateResult> result;
    std::thread thread([&] { result = first.Generate(prompt, nullptr, options); });
    while (!waiting) std::this_thread::yield();
    while_held();
    released = true;
    thread.join();
    return result;
  }

  // Until a session of `model` waits for another's prefill (KvPoolStats::awaited), or 10 s
  // have passed (then the test's expectations fail instead of hanging).
  static void UntilAwaited(const Model& model) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (model.kv_pool_stats().awaited == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
  }

  // The last `rows` logits rows of `result`.
  static std::vector<float> LastRows(const GenerateResult& result, int64_t rows) {
    return std::vector<float>(result.logits.end() - rows * kVocab, result.logits.end());
  }

  test::TempDir temp_;
  bool share_kv_prefixes_ = true;  // ModelOptions::share_kv_prefixes of the next Open
};

TEST_F(SessionTest, OpenModelReportsWhatItLoaded) {
  absl::StatusOr<std::shared_ptr<Model>> model = Open(TinyPlan(KvKind::kFull, 0), 24);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_FALSE((*model)->on_cuda());
  EXPECT_EQ((*model)->resolution(), nullptr);
  EXPECT_EQ((*model)->executor_name(), "host");
  EXPECT_EQ((*model)->max_length(), 24);
  EXPECT_EQ((*model)->info().vocab_size, kVocab);
  EXPECT_TRUE((*model)->estimate().fits);
}

TEST_F(SessionTest, NextTurnPrefillsOnlyWhatIsNew) {
  absl::StatusOr<std::shared_ptr<Model>> model = Open(TinyPlan(KvKind::kFull, 0));
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::unique_ptr<Session>> session = (*model)->NewSession();
  ASSERT_TRUE(session.ok()) << session.status();
  const std::vector<int32_t> first = {2, 0, 1, 1, 0, 2};
  absl::StatusOr<GenerateResult> one = (*session)->Generate(first, nullptr, Greedy(3));
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->tokens.size(), 3u);
  EXPECT_EQ(one->reused_tokens, 0);
  // The caches hold the prompt and every generated token but the last.
  EXPECT_EQ(one->cached_tokens, 6 + 2);
  ASSERT_EQ((*session)->history().size(), 8u);

  // The next turn: the conversation so far, the last answer, and a new message.
  std::vector<int32_t> second = first;
  second.insert(second.end(), one->tokens.begin(), one->tokens.end());
  second.insert(second.end(), {1, 0, 2, 1, 1});
  absl::StatusOr<GenerateResult> two = (*session)->Generate(second, nullptr, Greedy(4, true));
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->reused_tokens, 8);
  EXPECT_EQ(two->prefill_tokens, static_cast<int64_t>(second.size()) - 8);
  const GenerateResult fresh = Fresh(**model, second, Greedy(4, true));
  EXPECT_EQ(two->tokens, fresh.tokens);
  // Same logits for every position both ran (the reused run has fewer rows).
  const int64_t rows = two->logits_rows;
  ASSERT_GT(rows, 0);
  EXPECT_EQ(LastRows(*two, rows), LastRows(fresh, rows));
}

TEST_F(SessionTest, APromptThatDivergesGoesBackInAFullCache) {
  absl::StatusOr<std::shared_ptr<Model>> model = Open(TinyPlan(KvKind::kFull, 0));
  ASSERT_TRUE(model.ok()) << model.status();
  std::unique_ptr<Session> session = *(*model)->NewSession();
  ASSERT_TRUE(session->Generate({2, 0, 1, 1, 0, 2, 1, 1, 0}, nullptr, Greedy(2)).ok());
  const std::vector<int32_t> edited = {2, 0, 1, 0, 0};  // differs at position 3
  absl::StatusOr<GenerateResult> result = session->Generate(edited, nullptr, Greedy(5, true));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->reused_tokens, 3);
  const GenerateResult fresh = Fresh(*model.value(), edited, Greedy(5, true));
  EXPECT_EQ(result->tokens, fresh.tokens);
  EXPECT_EQ(LastRows(*result, result->logits_rows), LastRows(fresh, result->logits_rows));
  // The same prompt again: everything but its last token is reused.
  absl::StatusOr<GenerateResult> again = session->Generate(edited, nullptr, Greedy(5));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->reused_tokens, 4);
  EXPECT_EQ(again->tokens, fresh.tokens);
}

// Sliding window 3, 4 tokens per step: the cache needs 3 - 1 + 4 = 6 slots and has one block of
// 16, so going back more than 16 - 3 + 1 = 14 positions would read keys that later positions
// overwrote.
TEST_F(SessionTest, SlidingCachesLimitHowFarBackASessionGoes) {
  const Plan plan = TinyPlan(KvKind::kSliding, 3);
  EXPECT_EQ(Session::MaxRewind(plan, 32), 14);
  EXPECT_EQ(Session::MaxRewind(plan, 6), INT64_MAX);  // capacity >= max_length: nothing overwritten
  EXPECT_EQ(Session::MaxRewind(TinyPlan(KvKind::kFull, 0), 32), INT64_MAX);
  absl::StatusOr<std::shared_ptr<Model>> model = Open(plan);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<int32_t> history = {2, 0, 1, 1, 0, 2, 1, 1, 0, 2, 2, 0,
                                        1, 2, 0, 0, 1, 2, 2, 1, 0, 1, 0, 2};
  for (const int64_t keep : {10, 9}) {  // drops 14 (allowed), then 15 (not)
    std::unique_ptr<Session> session = *(*model)->NewSession();
    ASSERT_TRUE(session->Generate(history, nullptr, Greedy(1)).ok());
    ASSERT_EQ(session->history().size(), history.size());
    std::vector<int32_t> edited(history.begin(), history.begin() + keep);
    edited.insert(edited.end(), {3 - history[keep], 1, 0});
    absl::StatusOr<GenerateResult> result = session->Generate(edited, nullptr, Greedy(4, true));
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->reused_tokens, keep == 10 ? 10 : 0) << "keep " << keep;
    session.reset();
    const GenerateResult fresh = Fresh(**model, edited, Greedy(4, true));
    EXPECT_EQ(result->tokens, fresh.tokens) << "keep " << keep;
    EXPECT_EQ(LastRows(*result, result->logits_rows), LastRows(fresh, result->logits_rows))
        << "keep " << keep;
  }
}

// Prefix sharing (ModelOptions::share_kv_prefixes): a session whose prompt starts with what an
// idle session holds reads that session's KV blocks instead of prefilling them; the first write
// to a shared block copies it, so that neither session sees the other's later tokens. Every
// result must equal that of a model that shares nothing, on full caches and on a sliding ring.
class PrefixSharingTest : public SessionTest, public ::testing::WithParamInterface<KvKind> {
 protected:
  // Two sessions a and b of a sharing model (the parameter's cache kind, max_length 48), a model
  // that shares nothing to compare with, and their prompts: a 20-token "system prompt" (ids
  // (i * step + first) % kVocab), then a's {2, 2} and b's {0, 1, 3}.
  void OpenTwo(int step, int first) {
    const Plan plan = TinyPlan(GetParam(), GetParam() == KvKind::kSliding ? 3 : 0);
    absl::StatusOr<std::shared_ptr<Model>> model = Open(plan, 48, 2);
    ASSERT_TRUE(model.ok()) << model.status();
    share_kv_prefixes_ = false;
    absl::StatusOr<std::shared_ptr<Model>> alone = Open(plan, 48, 2);
    ASSERT_TRUE(alone.ok()) << alone.status();
    model_ = *std::move(model);
    alone_ = *std::move(alone);
    pa_.clear();
    for (int i = 0; i < 20; ++i) pa_.push_back((i * step + first) % kVocab);
    pb_ = pa_;
    pa_.insert(pa_.end(), {2, 2});
    pb_.insert(pb_.end(), {0, 1, 3});
    a_ = *model_->NewSession();
    b_ = *model_->NewSession();
  }

  // a's and b's results equal what fresh sessions of the non-sharing model generate (tokens
  // and logits), `max_new_tokens` each.
  void ExpectAsAlone(const GenerateResult& ra, const GenerateResult& rb, int64_t max_new_tokens) {
    for (const auto& [result, prompt] : {std::pair{&ra, &pa_}, std::pair{&rb, &pb_}}) {
      const GenerateResult fresh = Fresh(*alone_, *prompt, Greedy(max_new_tokens, true));
      EXPECT_EQ(result->tokens, fresh.tokens);
      EXPECT_EQ(LastRows(*result, result->logits_rows), LastRows(fresh, result->logits_rows));
    }
  }

  std::shared_ptr<Model> model_, alone_;
  std::vector<int32_t> pa_, pb_;
  std::unique_ptr<Session> a_, b_;
};

TEST_P(PrefixSharingTest, APromptPrefixAnIdleSessionHoldsIsSharedNotPrefilled) {
  const Plan plan = TinyPlan(GetParam(), GetParam() == KvKind::kSliding ? 3 : 0);
  absl::StatusOr<std::shared_ptr<Model>> model = Open(plan, 48, 3);
  ASSERT_TRUE(model.ok()) << model.status();
  share_kv_prefixes_ = false;
  absl::StatusOr<std::shared_ptr<Model>> alone = Open(plan, 48, 3);
  ASSERT_TRUE(alone.ok()) << alone.status();
  // A 20-token "system prompt", then each request's own words.
  std::vector<int32_t> system;
  for (int i = 0; i < 20; ++i) system.push_back((i * 7 + 3) % kVocab);
  const auto with = [&](std::vector<int32_t> head, std::initializer_list<int32_t> tail) {
    head.insert(head.end(), tail);
    return head;
  };
  std::unique_ptr<Session> a = *(*model)->NewSession();
  std::unique_ptr<Session> b = *(*model)->NewSession();
  const std::vector<int32_t> pa = with(system, {1, 2});
  absl::StatusOr<GenerateResult> ra = a->Generate(pa, nullptr, Greedy(2));
  ASSERT_TRUE(ra.ok()) << ra.status();
  EXPECT_EQ(ra->reused_tokens, 0);
  EXPECT_EQ((*model)->kv_pool_stats().shared, 0);

  // b: the same system prompt, other words: a's 20 positions are shared, 3 prefilled.
  const std::vector<int32_t> pb = with(system, {0, 0, 1});
  absl::StatusOr<GenerateResult> rb = b->Generate(pb, nullptr, Greedy(4, true));
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ(rb->reused_tokens, 20);
  EXPECT_EQ(rb->prefill_tokens, 3);
  EXPECT_EQ((*model)->kv_pool_stats().shared, 1);
  EXPECT_EQ((*model)->kv_pool_stats().shared_tokens, 20);
  const GenerateResult fb = Fresh(**alone, pb, Greedy(4, true));
  EXPECT_EQ(rb->tokens, fb.tokens);
  EXPECT_EQ(LastRows(*rb, rb->logits_rows), LastRows(fb, rb->logits_rows));

  // Both go on with their conversations: each wrote past the shared prefix into its own copies,
  // so each still holds exactly its own history (its own prefix reused, nothing shared again).
  const std::vector<int32_t> pa2 = with(a->history(), {2, 2, 0});
  const std::vector<int32_t> pb2 = with(b->history(), {1, 0});
  absl::StatusOr<GenerateResult> ra2 = a->Generate(pa2, nullptr, Greedy(3, true));
  absl::StatusOr<GenerateResult> rb2 = b->Generate(pb2, nullptr, Greedy(3, true));
  ASSERT_TRUE(ra2.ok()) << ra2.status();
  ASSERT_TRUE(rb2.ok()) << rb2.status();
  EXPECT_EQ(ra2->reused_tokens, static_cast<int64_t>(pa2.size()) - 3);
  EXPECT_EQ(rb2->reused_tokens, static_cast<int64_t>(pb2.size()) - 2);
  EXPECT_EQ((*model)->kv_pool_stats().shared, 1);
  for (const auto& [result, prompt] : {std::pair{&*ra2, &pa2}, std::pair{&*rb2, &pb2}}) {
    const GenerateResult fresh = Fresh(**alone, *prompt, Greedy(3, true));
    EXPECT_EQ(result->tokens, fresh.tokens);
    EXPECT_EQ(LastRows(*result, result->logits_rows), LastRows(fresh, result->logits_rows));
  }

  // A third session shares from the idle one holding the longest prefix (b's, 20 + 5 tokens);
  // a prefix shorter than one block more than its own is prefilled instead.
  std::unique_ptr<Session> c = *(*model)->NewSession();
  const std::vector<int32_t> pc = with(std::vector<int32_t>(pb2.begin(), pb2.begin() + 25), {3});
  absl::StatusOr<GenerateResult> rc = c->Generate(pc, nullptr, Greedy(2, true));
  ASSERT_TRUE(rc.ok()) << rc.status();
  EXPECT_EQ(rc->reused_tokens, 25);
  const GenerateResult fc = Fresh(**alone, pc, Greedy(2, true));
  EXPECT_EQ(rc->tokens, fc.tokens);
  EXPECT_EQ(LastRows(*rc, rc->logits_rows), LastRows(fc, rc->logits_rows));
  c->Reset();
  const std::vector<int32_t> short_prefix = with(std::vector<int32_t>(system.begin(),
                                                                      system.begin() + 15), {3});
  absl::StatusOr<GenerateResult> rs = c->Generate(short_prefix, nullptr, Greedy(1));
  ASSERT_TRUE(rs.ok()) << rs.status();
  EXPECT_EQ(rs->reused_tokens, 0);
  EXPECT_EQ((*model)->kv_pool_stats().shared, 2);
}

// A running session lends too: what its steps have cached of its prompt. Here a holds at its
// first token (its prompt prefilled) until b, with the same 20-token system prompt, is done.
TEST_P(PrefixSharingTest, ARunningSessionLendsWhatItsStepsCachedOfItsPrompt) {
  ASSERT_NO_FATAL_FAILURE(OpenTwo(3, 1));
  absl::StatusOr<GenerateResult> rb;
  absl::StatusOr<GenerateResult> ra = WhileHeldAtFirstToken(
      *a_, pa_, Greedy(6, true), [&] { rb = b_->Generate(pb_, nullptr, Greedy(6, true)); });
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ(rb->reused_tokens, 20);
  EXPECT_EQ(model_->kv_pool_stats().shared, 1);
  // Both as if nothing were shared: a went on writing past position 22 into its own copies.
  ExpectAsAlone(*ra, *rb, 6);
}

// Requests that arrive together: b starts while a is still prefilling the prefix they share (a
// holds after its first step, a chunk of at most 8 tokens, until b waits). b waits for a's steps
// instead of prefilling the prefix beside them; a shares it between two of its steps, once they
// cached it.
TEST_P(PrefixSharingTest, ARequestWaitsForARunningPrefillOfItsPrefix) {
  ASSERT_NO_FATAL_FAILURE(OpenTwo(5, 2));
  GenerateOptions oa = Greedy(4, true);
  oa.prefill_chunk_tokens = [] { return int64_t{8}; };
  std::atomic<int64_t> first_cached{0};
  oa.on_cached = [&](int64_t n) {
    int64_t none = 0;
    if (first_cached.compare_exchange_strong(none, n)) UntilAwaited(*model_);
  };
  absl::StatusOr<GenerateResult> ra, rb;
  std::thread thread([&] { ra = a_->Generate(pa_, nullptr, oa); });
  while (first_cached == 0) std::this_thread::yield();
  rb = b_->Generate(pb_, nullptr, Greedy(4, true));
  thread.join();
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_LT(first_cached, 20);  // b arrived before a had cached the prefix
  EXPECT_EQ(model_->kv_pool_stats().awaited, 1);
  EXPECT_EQ(model_->kv_pool_stats().shared, 1);
  EXPECT_EQ(model_->kv_pool_stats().shared_tokens, 20);
  EXPECT_EQ(rb->reused_tokens, 20);
  EXPECT_EQ(rb->prefill_tokens, 3);
  ExpectAsAlone(*ra, *rb, 4);
}

// A waiting request whose lender ends before caching the prefix (here: cancelled at its first
// step) chooses again: a's caches, idle now, hold only what its first step wrote (at most 8
// tokens, less than one block more than b's own), so b prefills its prompt itself.
TEST_P(PrefixSharingTest, AWaitEndsWithTheLendersGeneration) {
  ASSERT_NO_FATAL_FAILURE(OpenTwo(5, 2));
  GenerateOptions oa = Greedy(4);
  oa.prefill_chunk_tokens = [] { return int64_t{8}; };
  std::atomic<bool> first{false};
  oa.on_cached = [&](int64_t) {
    if (first.exchange(true)) return;
    UntilAwaited(*model_);
    a_->Cancel();
  };
  absl::StatusOr<GenerateResult> ra, rb;
  std::thread thread([&] { ra = a_->Generate(pa_, nullptr, oa); });
  while (!first) std::this_thread::yield();
  rb = b_->Generate(pb_, nullptr, Greedy(4));
  thread.join();
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_TRUE(ra->cancelled);
  EXPECT_EQ(model_->kv_pool_stats().awaited, 1);
  EXPECT_EQ(model_->kv_pool_stats().shared, 0);
  EXPECT_EQ(rb->reused_tokens, 0);
  EXPECT_EQ(rb->prefill_tokens, static_cast<int64_t>(pb_.size()));
}

INSTANTIATE_TEST_SUITE_P(FullAndSliding, PrefixSharingTest,
                         ::testing::Values(KvKind::kFull, KvKind::kSliding),
                         [](const ::testing::TestParamInfo<KvKind>& info) {
                           return info.param == KvKind::kFull ? "Full" : "Sliding";
                         });

TEST_F(SessionTest, ASlidingRingOverwrittenPastThePrefixIsNotShared) {
  const Plan plan = TinyPlan(KvKind::kSliding, 3);
  absl::StatusOr<std::shared_ptr<Model>> model = Open(plan, 48, 2);
  ASSERT_TRUE(model.ok()) << model.status();
  const int64_t rewind = Session::MaxRewind(plan, 48);
  ASSERT_LT(rewind, 30);
  std::vector<int32_t> long_prompt;
  for (int i = 0; i < 20 + rewind + 1; ++i) long_prompt.push_back((i * 5 + 1) % kVocab);
  std::unique_ptr<Session> a = *(*model)->NewSession();
  ASSERT_TRUE(a->Generate(long_prompt, nullptr, Greedy(1)).ok());
  // a's ring moved more than `rewind` positions past 20: what position 20 needs is gone.
  std::vector<int32_t> prompt(long_prompt.begin(), long_prompt.begin() + 20);
  prompt.push_back((long_prompt[20] + 1) % kVocab);
  std::unique_ptr<Session> b = *(*model)->NewSession();
  absl::StatusOr<GenerateResult> rb = b->Generate(prompt, nullptr, Greedy(2));
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ(rb->reused_tokens, 0);
  EXPECT_EQ((*model)->kv_pool_stats().shared, 0);
}

TEST_F(SessionTest, CancelEndsTheRunningGenerationAndOnlyIt) {
  absl::StatusOr<std::shared_ptr<Model>> model = Open(TinyPlan(KvKind::kFull, 0));
  ASSERT_TRUE(model.ok()) << model.status();
  std::unique_ptr<Session> session = *(*model)->NewSession();
  // Cancelled from the token callback (another thread in a server; a signal in spark-run).
  GenerateOptions options = Greedy(8);
  int seen = 0;
  Session* raw = session.get();
  options.on_token = [&](int32_t) {
    if (++seen == 2) raw->Cancel();
    return true;
  };
  absl::StatusOr<GenerateResult> result = session->Generate({2, 0, 1}, nullptr, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->cancelled);
  EXPECT_EQ(result->tokens.size(), 2u);
  EXPECT_EQ(session->history().size(), 3u + 1u);
  // The request is cleared: the next generation runs to its end.
  absl::StatusOr<GenerateResult> next = session->Generate({2, 0, 1}, nullptr, Greedy(8));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_FALSE(next->cancelled);
  EXPECT_EQ(next->tokens.size(), 8u);
  // Cancelled before it starts: nothing runs, nothing is cached beyond what was reused.
  session->Reset();
  session->Cancel();
  absl::StatusOr<GenerateResult> none = session->Generate({2, 0, 1, 2, 1}, nullptr, Greedy(8));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->cancelled);
  EXPECT_TRUE(none->tokens.empty());
  EXPECT_TRUE(session->history().empty());
}

TEST_F(SessionTest, SessionsOfOneModelKeepTheirOwnCaches) {
  absl::StatusOr<std::shared_ptr<Model>> model = Open(TinyPlan(KvKind::kFull, 0), 32, 2);
  ASSERT_TRUE(model.ok()) << model.status();
  std::unique_ptr<Session> a = *(*model)->NewSession();
  std::unique_ptr<Session> b = *(*model)->NewSession();
  EXPECT_TRUE(ErrorContains((*model)->NewSession().status(),
                            "this model was opened for 2 sessions at once"));
  const std::vector<int32_t> pa = {2, 0, 0, 0, 1}, pb = {2, 1, 1, 1, 0, 1};
  ASSERT_TRUE(a->Generate(pa, nullptr, Greedy(2)).ok());
  ASSERT_TRUE(b->Generate(pb, nullptr, Greedy(2)).ok());
  std::vector<int32_t> more = a->history();
  more.insert(more.end(), {1, 2, 1});
  // From two threads at once: their steps take turns on the one executor.
  absl::StatusOr<GenerateResult> ra, rb;
  std::vector<int32_t> more_b = b->history();
  more_b.insert(more_b.end(), {0, 0});
  std::thread ta([&] { ra = a->Generate(more, nullptr, Greedy(6)); });
  std::thread tb([&] { rb = b->Generate(more_b, nullptr, Greedy(6)); });
  ta.join();
  tb.join();
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_GT(ra->reused_tokens, 0);
  EXPECT_GT(rb->reused_tokens, 0);
  a.reset();
  b.reset();
  EXPECT_EQ(ra->tokens, Fresh(**model, more, Greedy(6)).tokens);
  EXPECT_EQ(rb->tokens, Fresh(**model, more_b, Greedy(6)).tokens);
}

TEST_F(SessionTest, SoftTokensAreNeverReusedFromTheCache) {
  absl::StatusOr<std::shared_ptr<Model>> model = Open(TinyPlan(KvKind::kFull, 0));
  ASSERT_TRUE(model.ok()) << model.status();
  std::unique_ptr<Session> session = *(*model)->NewSession();
  SoftTokens soft;
  soft.hidden = kHidden;
  soft.embeddings = {0.5f, 0.5f};
  soft.positions = {1};
  const std::vector<int32_t> prompt = {2, 0, 1, 1};
  ASSERT_TRUE(session->Generate(prompt, &soft, Greedy(2)).ok());
  // Same ids, but the embedding at position 1 came from soft tokens: recomputed.
  absl::StatusOr<GenerateResult> plain = session->Generate(prompt, nullptr, Greedy(2));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->reused_tokens, 0);
  absl::StatusOr<GenerateResult> with_soft = session->Generate(prompt, &soft, Greedy(2));
  ASSERT_TRUE(with_soft.ok()) << with_soft.status();
  EXPECT_EQ(with_soft->reused_tokens, 0);
}

// max_sessions 0: as many sessions as the memory estimate fits, up to kAutoSessions (the tiny
// model on the host: all of them).
TEST_F(SessionTest, ZeroSessionsOpensAsManyAsFit) {
  absl::StatusOr<std::shared_ptr<Model>> model = Open(TinyPlan(KvKind::kFull, 0), 32, 0);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->max_sessions(), kAutoSessions);
  EXPECT_EQ((*model)->estimate().options.batch, kAutoSessions);
  std::vector<std::unique_ptr<Session>> sessions;
  for (int64_t i = 0; i < kAutoSessions; ++i) sessions.push_back(*(*model)->NewSession());
  EXPECT_TRUE(ErrorContains((*model)->NewSession().status(), "sessions at once"));
  // kKvPoolFit: kAutoSessions sessions, the pool as large as the estimate fits (here: all).
  sessions.clear();
  absl::StatusOr<std::shared_ptr<Model>> fit = Open(TinyPlan(KvKind::kFull, 0), 32, 0, kKvPoolFit);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ((*fit)->max_sessions(), kAutoSessions);
  EXPECT_EQ((*fit)->kv_pool_sessions(), kAutoSessions);
}

// An overcommitted pool: the full caches' blocks for 1 session at full length (32 tokens: 2
// blocks) shared by 2 and then 4 sessions generating together. Each session waits at its first
// token until all have one (at most 200 ms), so that they hold blocks at once: then the pool runs
// out as they grow, and a session that finds no free block evicts an idle session's caches or
// gives up its own, waits and is recomputed. Every one still generates what it generates alone,
// logits included.
TEST_F(SessionTest, AnOvercommittedPoolPreemptsAndRecomputesSessions) {
  const std::vector<std::vector<int32_t>> prompts = {
      {2, 0, 1, 1, 0, 2, 1}, {2, 1, 1, 0}, {2, 0, 0, 1, 2, 2, 1, 0, 1, 1, 2}, {2, 2, 1}};
  // (Without logits a resumed generation goes on from what its caches hold; with them, from the
  // first position whose row was lost with the failed call.)
  for (const bool logits : {false, true}) {
  for (const KvKind kind : {KvKind::kFull, KvKind::kSliding}) {
    for (const size_t n : {size_t{2}, size_t{4}}) {
      SCOPED_TRACE(absl::StrCat(kind == KvKind::kFull ? "full" : "sliding", ", ", n, " sessions",
                                logits ? ", logits" : ""));
      absl::StatusOr<std::shared_ptr<Model>> model =
          Open(TinyPlan(kind, kind == KvKind::kFull ? 0 : 6), 32, 4, 1);
      ASSERT_TRUE(model.ok()) << model.status();
      EXPECT_EQ((*model)->max_sessions(), 4);
      EXPECT_EQ((*model)->kv_pool_sessions(), 1);
      EXPECT_EQ((*model)->estimate().options.batch, 1);
      EXPECT_EQ((*model)->estimate().options.sessions, 4);
      std::vector<std::unique_ptr<Session>> sessions;
      for (size_t i = 0; i < n; ++i) sessions.push_back(*(*model)->NewSession());
      std::mutex mutex;
      std::condition_variable all_started;
      size_t started = 0;
      const auto first_token = [&] {
        std::unique_lock<std::mutex> lock(mutex);
        if (++started == n) all_started.notify_all();
        all_started.wait_for(lock, std::chrono::milliseconds(200), [&] { return started >= n; });
      };
      std::vector<absl::StatusOr<GenerateResult>> together(n);
      std::vector<std::thread> threads;
      for (size_t i = 0; i < n; ++i) {
        threads.emplace_back([&, i] {
          GenerateOptions options = Greedy(18, logits);
          bool first = true;
          options.on_token = [&](int32_t) {
            if (first) first_token();
            first = false;
            return true;
          };
          together[i] = sessions[i]->Generate(prompts[i], nullptr, options);
        });
      }
      for (std::thread& t : threads) t.join();
      const Model::KvPoolStats stats = (*model)->kv_pool_stats();
      if (kind == KvKind::kFull) EXPECT_GE(stats.preempted, 1);
      EXPECT_GT(stats.preempted + stats.evicted, 0);
      sessions.clear();
      for (size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(together[i].ok()) << together[i].status();
        const GenerateResult alone = Fresh(**model, prompts[i], Greedy(18, logits));
        EXPECT_EQ(together[i]->tokens, alone.tokens) << "session " << i;
        EXPECT_EQ(together[i]->reused_tokens, 0);
        EXPECT_EQ(together[i]->cached_tokens, alone.cached_tokens);
        ASSERT_EQ(together[i]->logits_rows, alone.logits_rows);
        for (size_t j = 0; j < alone.logits.size(); ++j) {
          ASSERT_NEAR(together[i]->logits[j], alone.logits[j], 1e-5) << "session " << i << " " << j;
        }
      }
    }
  }
  }
}

// A prompt prefilled while another session generates is cut into chunks that leave room in each
// step for the other's decode token (max_tokens 4: chunks of 3, so that the batched steps can
// mix the two instead of the prompt's chunks holding the other's tokens up). Here a waits at its
// first token until b is done, so b's calls are its own: 24 prompt tokens in 8 chunks (6 at full
// steps) and 3 decode steps. Both generate what they generate alone.
TEST_F(SessionTest, PromptChunksLeaveRoomForOtherSessionsDecodeTokens) {
  share_kv_prefixes_ = false;  // the run alone below prefills pb, not b's blocks of it
  absl::StatusOr<std::shared_ptr<Model>> model = Open(TinyPlan(KvKind::kFull, 0), 64, 3);
  ASSERT_TRUE(model.ok()) << model.status();
  std::unique_ptr<Session> a = *(*model)->NewSession();
  std::unique_ptr<Session> b = *(*model)->NewSession();
  const std::vector<int32_t> pa = {2, 0, 1}, pb = {2, 1, 0, 0, 1, 2, 2, 1, 0, 1, 1, 2,
                                                   0, 1, 2, 2, 0, 1, 0, 2, 1, 1, 0, 2};
  absl::StatusOr<GenerateResult> rb;
  int64_t b_calls = 0;
  const absl::StatusOr<GenerateResult> ra = WhileHeldAtFirstToken(*a, pa, Greedy(12), [&] {
    EXPECT_EQ((*model)->generating_sessions(), 1);
    const int64_t calls_before = (*model)->batching_stats().calls;
    rb = b->Generate(pb, nullptr, Greedy(4));
    b_calls = (*model)->batching_stats().calls - calls_before;
  });
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ(b_calls, 8 + 3);
  // Alone, the prompt takes whole steps: 6 chunks.
  const int64_t calls_alone = (*model)->batching_stats().calls;
  const GenerateResult alone = Fresh(**model, pb, Greedy(4));
  EXPECT_EQ((*model)->batching_stats().calls - calls_alone, 6 + 3);
  EXPECT_EQ(rb->tokens, alone.tokens);
  a.reset();
  b.reset();
  EXPECT_EQ(ra->tokens, Fresh(**model, pa, Greedy(12)).tokens);
}

// The least recently used idle session gives its blocks up first: it forgets what its caches
// held (its next generation prefills everything) and generates as before.
TEST_F(SessionTest, AnOvercommittedPoolEvictsIdleSessionsFirst) {
  absl::StatusOr<std::shared_ptr<Model>> model = Open(TinyPlan(KvKind::kFull, 0), 32, 3, 1);
  ASSERT_TRUE(model.ok()) << model.status();
  std::unique_ptr<Session> a = *(*model)->NewSession();
  std::unique_ptr<Session> b = *(*model)->NewSession();
  const std::vector<int32_t> pa = {2, 0, 1, 1, 0}, pb = {2, 1, 0, 0, 1, 2, 2, 1, 0, 1, 1, 2, 0, 1};
  ASSERT_TRUE(a->Generate(pa, nullptr, Greedy(4)).ok());
  EXPECT_EQ(a->history().size(), pa.size() + 3);
  // b needs both blocks of the pool: a's go.
  absl::StatusOr<GenerateResult> rb = b->Generate(pb, nullptr, Greedy(12));
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_TRUE(a->history().empty());
  EXPECT_EQ((*model)->kv_pool_stats().evicted, 1);
  EXPECT_EQ((*model)->kv_pool_stats().preempted, 0);
  absl::StatusOr<GenerateResult> again = a->Generate(pa, nullptr, Greedy(4));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->reused_tokens, 0);
  a.reset();
  b.reset();
  EXPECT_EQ(again->tokens, Fresh(**model, pa, Greedy(4)).tokens);
  EXPECT_EQ(rb->tokens, Fresh(**model, pb, Greedy(12)).tokens);
}

TEST_F(SessionTest, OpenModelRefusesBadOptions) {
  Plan plan = TinyPlan(KvKind::kFull, 0);
  EXPECT_TRUE(ErrorContains(Open(plan, 32, -1).status(),
                            "max_sessions must be at least 1 (or 0: as many as fit), got -1"));
  EXPECT_TRUE(ErrorContains(Open(plan, 32, 2, 3).status(),
                            "the KV cache pool's full-length sessions must be 0 (every session's), "
                            "-1 (as many as fit) or in [1, 2] (the sessions), got 3"));
  EXPECT_TRUE(ErrorContains(Open(plan, 32, 2, -2).status(), "got -2"));
  EXPECT_TRUE(ErrorContains(Open(plan, 65).status(),
                            "max length 65 exceeds the model's max_position_embeddings 64"));
  EngineOptions engine_options;
  engine_options.device = DeviceMode::kHost;
  engine_options.module_path = {"lib", ""};
  ModelOptions options;
  options.artifact = "missing.cubin";
  EXPECT_TRUE(ErrorContains(Engine(engine_options).OpenModel(options).status(),
                            "--module-path entry 2 is empty"));
  engine_options.module_path.clear();
  EXPECT_EQ(Engine(engine_options).OpenModel(options).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(ErrorContains(ParseDeviceMode("gpu").status(), "expected auto, cuda or host"));
}

}  // namespace
}  // namespace rt
}  // namespace spark
