#include "tensor_parallel_executor.h"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {
namespace {

// One sequence on every rank.
class RankSequences final : public SequenceState {
 public:
  RankSequences(const Executor* owner, int64_t max_length,
                std::vector<std::unique_ptr<SequenceState>> ranks)
      : SequenceState(owner, max_length), ranks(std::move(ranks)) {}
  std::vector<std::unique_ptr<SequenceState>> ranks;
};

}  // namespace

// A thread per rank but the first, waiting for the work of the next call.
struct TensorParallelExecutor::Workers {
  std::mutex mutex;
  std::condition_variable changed;
  const std::function<absl::Status(int)>* work = nullptr;
  uint64_t call = 0;       // counts the calls handed out
  int pending = 0;         // workers still running the current call
  bool stopping = false;
  std::vector<absl::Status> statuses;
  std::vector<std::thread> threads;
};

TensorParallelExecutor::TensorParallelExecutor(std::vector<std::unique_ptr<Executor>> ranks,
                                               std::function<void()> abort,
                                               std::function<void()> reset)
    : ranks_(std::move(ranks)),
      abort_(std::move(abort)),
      reset_(std::move(reset)),
      workers_(std::make_unique<Workers>()) {
  Workers& w = *workers_;
  w.statuses.resize(ranks_.size());
  for (size_t r = 1; r < ranks_.size(); ++r) {
    w.threads.emplace_back([&w, r] {
      uint64_t seen = 0;
      while (true) {
        const std::function<absl::Status(int)>* work;
        {
          std::unique_lock<std::mutex> lock(w.mutex);
          w.changed.wait(lock, [&] { return w.stopping || w.call != seen; });
          if (w.stopping) return;
          seen = w.call;
          work = w.work;
        }
        absl::Status status = (*work)(static_cast<int>(r));
        std::lock_guard<std::mutex> lock(w.mutex);
        w.statuses[r] = std::move(status);
        if (--w.pending == 0) w.changed.notify_all();
      }
    });
  }
}

TensorParallelExecutor::~TensorParallelExecutor() {
  ReleaseOwnSequence();
  {
    std::lock_guard<std::mutex> lock(workers_->mutex);
    workers_->stopping = true;
  }
  workers_->changed.notify_all();
  for (std::thread& thread : workers_->threads) thread.join();
}

absl::Status TensorParallelExecutor::OnEveryRank(
    const std::function<absl::Status(int rank)>& work) {
  Workers& w = *workers_;
  // A failing rank aborts the group, so that ranks waiting in a collective for it return.
  const std::function<absl::Status(int)> guarded = [&](int rank) {
    absl::Status status = work(rank);
    if (!status.ok()) abort_();
    return status;
  };
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    w.work = &guarded;
    w.pending = static_cast<int>(ranks_.size()) - 1;
    ++w.call;
  }
  w.changed.notify_all();
  w.statuses[0] = guarded(0);
  {
    std::unique_lock<std::mutex> lock(w.mutex);
    w.changed.wait(lock, [&] { return w.pending == 0; });
    w.work = nullptr;
  }
  // The first failure that is not another rank's abort, else the first failure.
  const absl::Status* first = nullptr;
  int first_rank = 0;
  for (size_t r = 0; r < w.statuses.size(); ++r) {
    const absl::Status& status = w.statuses[r];
    if (status.ok()) continue;
    if (first == nullptr || (first->code() == absl::StatusCode::kAborted &&
                             status.code() != absl::StatusCode::kAborted)) {
      first = &status;
      first_rank = static_cast<int>(r);
    }
  }
  if (first == nullptr) return absl::OkStatus();
  reset_();
  // Errors every rank meets alike (a checked call) are rank 0's own words.
  if (first_rank == 0) return *first;
  return absl::Status(first->code(), absl::StrCat("rank ", first_rank, ": ", first->message()));
}

absl::Status TensorParallelExecutor::ReserveSequences(int64_t max_length, int64_t sequences,
                                                      int64_t full_length_sequences) {
  return OnEveryRank([&](int r) {
    return ranks_[r]->ReserveSequences(max_length, sequences, full_length_sequences);
  });
}

absl::StatusOr<int64_t> TensorParallelExecutor::DropKv(SequenceState& state) {
  SPARK_RETURN_IF_ERROR(CheckOwnSequence(state));
  auto& sequence = static_cast<RankSequences&>(state);
  std::vector<int64_t> dropped(ranks_.size());
  SPARK_RETURN_IF_ERROR(OnEveryRank([&](int r) -> absl::Status {
    SPARK_ASSIGN_OR_RETURN(dropped[r], ranks_[r]->DropKv(*sequence.ranks[r]));
    return absl::OkStatus();
  }));
  return dropped[0];
}

absl::Status TensorParallelExecutor::ShareKv(SequenceState& from_state, SequenceState& to_state,
                                             int64_t tokens) {
  SPARK_RETURN_IF_ERROR(CheckOwnSequence(from_state));
  SPARK_RETURN_IF_ERROR(CheckOwnSequence(to_state));
  auto& from = static_cast<RankSequences&>(from_state);
  auto& to = static_cast<RankSequences&>(to_state);
  return OnEveryRank([&](int r) { return ranks_[r]->ShareKv(*from.ranks[r], *to.ranks[r], tokens); });
}

absl::StatusOr<std::unique_ptr<SequenceState>> TensorParallelExecutor::NewSequence(
    int64_t max_length) {
  std::vector<std::unique_ptr<SequenceState>> sequences(ranks_.size());
  SPARK_RETURN_IF_ERROR(OnEveryRank([&](int r) -> absl::Status {
    SPARK_ASSIGN_OR_RETURN(sequences[r], ranks_[r]->NewSequence(max_length));
    return absl::OkStatus();
  }));
  return std::unique_ptr<SequenceState>(
      new RankSequences(this, max_length, std::move(sequences)));
}

absl::Status TensorParallelExecutor::RunBatch(absl::Span<const SequenceStep> parts,
                                              std::vector<StepResult>* results) {
  for (const SequenceStep& part : parts) {
    if (part.sequence == nullptr) {
      return absl::InvalidArgumentError("a step part without a sequence");
    }
    SPARK_RETURN_IF_ERROR(CheckOwnSequence(*part.sequence));
  }
  std::vector<std::vector<StepResult>> rank_results(ranks_.size());
  SPARK_RETURN_IF_ERROR(OnEveryRank([&](int r) {
    std::vector<SequenceStep> rank_parts(parts.begin(), parts.end());
    for (SequenceStep& part : rank_parts) {
      part.sequence = static_cast<RankSequences*>(part.sequence)->ranks[r].get();
    }
    return ranks_[r]->RunBatch(rank_parts, &rank_results[r]);
  }));
  // Every rank computed the same logits (the all_gather gives each the whole row) and drew the
  // same tokens; a difference would make the ranks' caches diverge.
  for (size_t r = 1; r < ranks_.size(); ++r) {
    for (size_t i = 0; i < rank_results[0].size(); ++i) {
      if (rank_results[r][i].token != rank_results[0][i].token) {
        return absl::InternalError(absl::StrCat(
            "tensor parallel: rank ", r, " drew token ", rank_results[r][i].token,
            " where rank 0 drew ", rank_results[0][i].token, " (part ", i,
            "); the ranks' collectives do not give every rank the same values"));
      }
    }
  }
  *results = std::move(rank_results[0]);
  return absl::OkStatus();
}

std::string TensorParallelExecutor::name() const {
  return absl::StrCat(ranks_[0]->name(), " x ", ranks_.size(), " ranks (tensor parallel)");
}

void TensorParallelExecutor::set_step_observer(StepObserver observer) {
  for (size_t r = 1; r < ranks_.size(); ++r) {
    ranks_[r]->set_step_observer(
        observer ? StepObserver([](const StepOutput&) { return absl::OkStatus(); })
                 : StepObserver());
  }
  ranks_[0]->set_step_observer(std::move(observer));
}

MemoryUsage TensorParallelExecutor::memory_usage() const { return ranks_[0]->memory_usage(); }

}  // namespace rt
}  // namespace spark
