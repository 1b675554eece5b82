// A tensor-parallel plan's ranks as one executor (docs/multi-gpu.md): every call runs on each
// rank's executor at once, one thread per rank (each rank's executor runs the same program on its
// weight slices and KV heads; their collectives meet in the communicator), and returns rank 0's
// results after checking that every rank drew the same tokens. Internal to the runtime; the
// Model puts it in place of a single executor (engine.cc) when the plan has several ranks.
//
// A rank that fails aborts the communicator, so that the others return from a collective they
// wait in instead of hanging; the call then returns the first failure, and the communicator is
// reset for the next call.
#ifndef SPARK_RUNTIME_SRC_TENSOR_PARALLEL_EXECUTOR_H_
#define SPARK_RUNTIME_SRC_TENSOR_PARALLEL_EXECUTOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "spark/runtime/executor.h"

namespace spark {
namespace rt {

class TensorParallelExecutor final : public Executor {
 public:
  // `ranks[r]` runs rank r; `abort` makes every rank's pending and later collectives fail,
  // `reset` (once every rank has returned) makes the group usable again where it can be.
  TensorParallelExecutor(std::vector<std::unique_ptr<Executor>> ranks,
                         std::function<void()> abort, std::function<void()> reset);
  ~TensorParallelExecutor() override;

  absl::Status ReserveSequences(int64_t max_length, int64_t sequences,
                                int64_t full_length_sequences) override;
  absl::StatusOr<int64_t> DropKv(SequenceState& sequence) override;
  absl::Status ShareKv(SequenceState& from, SequenceState& to, int64_t tokens) override;
  absl::StatusOr<std::unique_ptr<SequenceState>> NewSequence(int64_t max_length) override;
  absl::Status RunBatch(absl::Span<const SequenceStep> parts,
                        std::vector<StepResult>* results) override;
  // "host x 2 ranks (tensor parallel)": rank 0's name and the number of ranks.
  std::string name() const override;
  // Rank 0's (every rank holds as much: the estimate is one rank's too).
  MemoryUsage memory_usage() const override;
  // Profiles and step observers are rank 0's: its steps, on its slices (a collective's time
  // includes waiting for the other ranks).
  const RunProfile* profile() const override { return ranks_[0]->profile(); }
  void set_profile(std::unique_ptr<RunProfile> profile) override {
    ranks_[0]->set_profile(std::move(profile));
  }
  // Every rank observes (an executor that observes runs the logits tail on every row, and the
  // ranks must run one program: their collectives meet), rank 0 with `observer`, the others with
  // one that does nothing.
  void set_step_observer(StepObserver observer) override;

 private:
  // Runs `work(rank)` for every rank at once (rank 0 on the calling thread) and returns the first
  // failure, by rank; a failing rank aborts the communicator.
  absl::Status OnEveryRank(const std::function<absl::Status(int rank)>& work);

  struct Workers;
  std::vector<std::unique_ptr<Executor>> ranks_;
  std::function<void()> abort_;
  std::function<void()> reset_;
  std::unique_ptr<Workers> workers_;
};

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_TENSOR_PARALLEL_EXECUTOR_H_
