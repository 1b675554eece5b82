// The continuous-batching wrapper (batching_executor.h): Run calls of several threads are merged
// into batched steps within max_tokens, first come first served; a failing merged step is retried
// call by call so that an error is the failing call's alone.
#include "batching_executor.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "runtime_test_util.h"
#include "spark/runtime/executor.h"

namespace spark {
namespace rt {
namespace {

using testing_util::ErrorContains;

// Records the steps it runs; a token id of 99 fails the step it is in. Each call's token is its
// first id + 1. The first step waits until `release` is set, so that the other threads' calls
// queue behind it.
class RecordingExecutor : public Executor {
 public:
  absl::StatusOr<std::unique_ptr<SequenceState>> NewSequence(int64_t max_length) override {
    return std::make_unique<SequenceState>(this, max_length);
  }
  absl::Status RunBatch(absl::Span<const SequenceStep> parts,
                        std::vector<StepResult>* results) override {
    {
      std::unique_lock<std::mutex> lock(mutex);
      if (steps.empty()) {
        entered = true;
        released.wait(lock, [&] { return release; });
      }
      steps.push_back(static_cast<int>(parts.size()));
    }
    results->assign(parts.size(), StepResult());
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].call.ids[0] == 99) return absl::InvalidArgumentError("token id 99 is bad");
      (*results)[i].token = parts[i].call.ids[0] + 1;
    }
    return absl::OkStatus();
  }
  std::string name() const override { return "recording"; }
  MemoryUsage memory_usage() const override { return MemoryUsage(); }

  void Release() {
    std::lock_guard<std::mutex> lock(mutex);
    release = true;
    released.notify_all();
  }

  std::mutex mutex;
  std::condition_variable released;
  bool release = false;
  std::atomic<bool> entered{false};  // the first step is running
  std::vector<int> steps;            // calls per step
};

// Runs, from `ids.size()` threads, one call each of ids[i] (`tokens` tokens) on sequences of the
// batching executor, after a first call that holds the executor until the others are queued.
struct Outcome {
  std::vector<absl::Status> status;
  std::vector<int32_t> token;
};
Outcome RunConcurrently(BatchingExecutor& batching, RecordingExecutor& inner,
                        const std::vector<int32_t>& ids, int tokens) {
  const int n = static_cast<int>(ids.size());
  std::vector<std::unique_ptr<SequenceState>> seqs;
  for (int i = 0; i <= n; ++i) seqs.push_back(*batching.NewSequence(64));
  Outcome out;
  out.status.resize(n);
  out.token.assign(n, -1);
  std::vector<std::vector<int32_t>> call_ids(n + 1), call_positions(n + 1);
  const auto run = [&](int i, int32_t id) {
    call_ids[i].assign(tokens, id);
    for (int t = 0; t < tokens; ++t) call_positions[i].push_back(t);
    StepCall call;
    call.ids = call_ids[i];
    call.positions = call_positions[i];
    StepResult result;
    const absl::Status status = batching.Run(*seqs[i], call, &result);
    if (i < n) out.status[i] = status, out.token[i] = result.token;
  };
  std::thread first([&] { run(n, 1); });
  while (!inner.entered) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::vector<std::thread> others;
  for (int i = 0; i < n; ++i) others.emplace_back([&, i] { run(i, ids[i]); });
  // All of them queue behind the blocked first step.
  while (batching.stats().queued < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  inner.Release();
  first.join();
  for (std::thread& t : others) t.join();
  return out;
}

TEST(BatchingExecutorTest, CallsThatQueueBehindAStepShareTheNextOne) {
  auto inner = std::make_unique<RecordingExecutor>();
  RecordingExecutor& recording = *inner;
  BatchingExecutor batching(std::move(inner), /*max_tokens=*/8);
  const Outcome out = RunConcurrently(batching, recording, {10, 20, 30, 40}, 1);
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(out.status[i].ok()) << out.status[i];
    EXPECT_EQ(out.token[i], 10 * (i + 1) + 1) << i;  // each call gets its own result
  }
  // The first call alone, then the four queued ones in one step.
  EXPECT_EQ(recording.steps, (std::vector<int>{1, 4}));
  const BatchingStats stats = batching.stats();
  EXPECT_EQ(stats.steps, 2);
  EXPECT_EQ(stats.calls, 5);
  EXPECT_EQ(stats.merged_steps, 1);
  EXPECT_EQ(stats.max_calls, 4);
}

TEST(BatchingExecutorTest, AStepTakesCallsWithinMaxTokens) {
  auto inner = std::make_unique<RecordingExecutor>();
  RecordingExecutor& recording = *inner;
  BatchingExecutor batching(std::move(inner), /*max_tokens=*/8);
  // Four calls of 3 tokens: two fit a step of 8.
  const Outcome out = RunConcurrently(batching, recording, {1, 2, 3, 4}, 3);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(out.status[i].ok()) << out.status[i];
  EXPECT_EQ(recording.steps, (std::vector<int>{1, 2, 2}));
}

TEST(BatchingExecutorTest, AFailingCallFailsAloneInAMergedStep) {
  auto inner = std::make_unique<RecordingExecutor>();
  RecordingExecutor& recording = *inner;
  BatchingExecutor batching(std::move(inner), /*max_tokens=*/8);
  const Outcome out = RunConcurrently(batching, recording, {5, 99, 7}, 1);
  EXPECT_TRUE(out.status[0].ok()) << out.status[0];
  EXPECT_TRUE(ErrorContains(out.status[1], "token id 99 is bad"));
  EXPECT_TRUE(out.status[2].ok()) << out.status[2];
  EXPECT_EQ(out.token[0], 6);
  EXPECT_EQ(out.token[2], 8);
  // The merged step of three failed; each call then ran alone.
  EXPECT_EQ(recording.steps, (std::vector<int>{1, 3, 1, 1, 1}));
}

}  // namespace
}  // namespace rt
}  // namespace spark
