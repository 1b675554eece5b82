#include "batching_executor.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {

namespace {
// How long the next step's leader waits for the sessions of the last step to queue their calls.
constexpr std::chrono::microseconds kGatherWait{2000};

// One call waiting for (or served by) a step.
struct Pending {
  SequenceStep part;
  StepResult result;
  absl::Status status;
  bool done = false;
  int64_t soft_rows() const {
    return part.call.soft == nullptr ? 0 : static_cast<int64_t>(part.call.soft->indices.size());
  }
};
}  // namespace

struct BatchingExecutor::State {
  std::unique_ptr<Executor> inner;
  int64_t max_tokens = 1;
  mutable std::mutex mutex;
  std::condition_variable changed;
  std::deque<Pending*> queue;
  bool busy = false;  // a step (or another call) is running on `inner`
  BatchingStats stats;
  int64_t last_step_calls = 0;  // how many calls the last step served

  // Runs `fn` on `inner` while nothing else does.
  template <typename Fn>
  auto Exclusive(Fn fn) -> decltype(fn()) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return !busy; });
    busy = true;
    lock.unlock();
    auto result = fn();
    lock.lock();
    busy = false;
    changed.notify_all();
    return result;
  }

  // The calls of the next step: the first queued, then every later one, in arrival order, whose
  // tokens and soft rows still fit max_tokens (a call that does not fit leaves room for the
  // decode tokens behind it; it is first, and taken, in the next step).
  std::vector<Pending*> TakeStep() {
    std::vector<Pending*> step;
    int64_t tokens = 0, soft_rows = 0;
    for (auto it = queue.begin(); it != queue.end();) {
      Pending* next = *it;
      const int64_t n = static_cast<int64_t>(next->part.call.ids.size());
      if (!step.empty() &&
          (tokens + n > max_tokens || soft_rows + next->soft_rows() > max_tokens)) {
        ++it;
        continue;
      }
      step.push_back(next);
      it = queue.erase(it);
      tokens += n;
      soft_rows += next->soft_rows();
    }
    return step;
  }

  // Runs the step's calls as one batched step; when it fails and there were several, each alone
  // (so that one call's error, a bad input or no free KV block, is its own).
  void RunStep(const std::vector<Pending*>& step) {
    std::vector<SequenceStep> parts;
    for (Pending* p : step) parts.push_back(p->part);
    std::vector<StepResult> results;
    absl::Status status = inner->RunBatch(parts, &results);
    if (status.ok()) {
      for (size_t i = 0; i < step.size(); ++i) step[i]->result = std::move(results[i]);
    } else if (step.size() == 1) {
      step[0]->status = status;
    } else {
      for (Pending* p : step) {
        std::vector<StepResult> one;
        p->status = inner->RunBatch(absl::MakeConstSpan(&p->part, 1), &one);
        if (p->status.ok()) p->result = std::move(one[0]);
      }
    }
  }
};

BatchingExecutor::BatchingExecutor(std::unique_ptr<Executor> inner, int64_t max_tokens)
    : state_(std::make_unique<State>()) {
  state_->inner = std::move(inner);
  state_->max_tokens = std::max<int64_t>(1, max_tokens);
}

BatchingExecutor::~BatchingExecutor() { ReleaseOwnSequence(); }

absl::Status BatchingExecutor::ReserveSequences(int64_t max_length, int64_t sequences,
                                                int64_t full_length_sequences) {
  return state_->Exclusive([&] {
    return state_->inner->ReserveSequences(max_length, sequences, full_length_sequences);
  });
}

absl::StatusOr<int64_t> BatchingExecutor::DropKv(SequenceState& sequence) {
  return state_->Exclusive([&] { return state_->inner->DropKv(sequence); });
}

absl::Status BatchingExecutor::ShareKv(SequenceState& from, SequenceState& to, int64_t tokens) {
  return state_->Exclusive([&] { return state_->inner->ShareKv(from, to, tokens); });
}

absl::StatusOr<std::unique_ptr<SequenceState>> BatchingExecutor::NewSequence(int64_t max_length) {
  return state_->Exclusive([&] { return state_->inner->NewSequence(max_length); });
}

absl::Status BatchingExecutor::RunBatch(absl::Span<const SequenceStep> parts,
                                        std::vector<StepResult>* results) {
  State& s = *state_;
  if (parts.size() != 1) {
    return s.Exclusive([&] { return s.inner->RunBatch(parts, results); });
  }
  Pending mine;
  mine.part = parts[0];
  std::unique_lock<std::mutex> lock(s.mutex);
  s.queue.push_back(&mine);
  s.changed.notify_all();  // a leader may be gathering the calls of the next step
  while (!mine.done) {
    if (s.busy) {
      s.changed.wait(lock);
      continue;
    }
    // This thread runs the next step (its own call may be in it or, behind a full step, not).
    s.busy = true;
    // The sessions of the last step come back for their next token within microseconds (the
    // generator's work between two steps): wait briefly until as many calls are queued, so that
    // they share one step instead of alternating between two half-full ones. A session that has
    // finished costs this wait once.
    const auto deadline = std::chrono::steady_clock::now() + kGatherWait;
    while (static_cast<int64_t>(s.queue.size()) < s.last_step_calls &&
           s.changed.wait_until(lock, deadline) != std::cv_status::timeout) {
    }
    const std::vector<Pending*> step = s.TakeStep();
    s.last_step_calls = static_cast<int64_t>(step.size());
    lock.unlock();
    s.RunStep(step);
    lock.lock();
    for (Pending* p : step) p->done = true;
    ++s.stats.steps;
    s.stats.calls += static_cast<int64_t>(step.size());
    if (step.size() > 1) ++s.stats.merged_steps;
    const auto is_decode = [](const Pending* p) { return p->part.call.ids.size() == 1; };
    if (std::any_of(step.begin(), step.end(), is_decode) &&
        !std::all_of(step.begin(), step.end(), is_decode)) {
      ++s.stats.mixed_steps;
    }
    s.stats.max_calls = std::max<int64_t>(s.stats.max_calls, static_cast<int64_t>(step.size()));
    s.busy = false;
    s.changed.notify_all();
  }
  results->assign(1, std::move(mine.result));
  return mine.status;
}

absl::Status BatchingExecutor::CopyToMemory(SequenceState& sequence, const MemoryRegion& region,
                                            absl::Span<const uint8_t> bytes) {
  return state_->Exclusive([&] { return state_->inner->CopyToMemory(sequence, region, bytes); });
}

absl::Status BatchingExecutor::CopyFromMemory(SequenceState& sequence, const MemoryRegion& region,
                                              absl::Span<uint8_t> bytes) {
  return state_->Exclusive([&] { return state_->inner->CopyFromMemory(sequence, region, bytes); });
}

absl::Status BatchingExecutor::RunProgram(SequenceState& sequence, int32_t num_tokens,
                                          int32_t num_soft_tokens) {
  return state_->Exclusive(
      [&] { return state_->inner->RunProgram(sequence, num_tokens, num_soft_tokens); });
}

std::string BatchingExecutor::name() const { return state_->inner->name(); }

MemoryUsage BatchingExecutor::memory_usage() const {
  return state_->Exclusive([&] { return state_->inner->memory_usage(); });
}

const RunProfile* BatchingExecutor::profile() const { return state_->inner->profile(); }

BatchingStats BatchingExecutor::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  BatchingStats stats = state_->stats;
  stats.queued = static_cast<int64_t>(state_->queue.size());
  return stats;
}

}  // namespace rt
}  // namespace spark
