// Continuous batching at the executor's door: a wrapper that merges the Run calls of several
// threads (sessions of one model generating at once) into batched steps (Executor::RunBatch), so
// that one step reads the weights once for the tokens of every waiting sequence. Internal to the
// runtime; the Model puts it around its executor (engine.cc).
//
// The policy: a call arriving while no step runs runs at once (a lone stream pays nothing); calls
// arriving while a step runs queue, and the next step takes them first-come first-served while
// their tokens fit the plan's max_tokens (a prefill chunk of max_tokens fills a step alone; the
// decode tokens queued behind it run in the next one). The next step's leader first waits up to
// 2 ms until as many calls are queued as the last step served: the sessions of that step come
// back within microseconds, and without the wait they would alternate between two half-full
// steps. If a merged step fails, its calls run
// again one by one, so that an error is the failing call's alone. Every other call (new
// sequences, memory copies, RunProgram) runs while no step does.
#ifndef SPARK_RUNTIME_SRC_BATCHING_EXECUTOR_H_
#define SPARK_RUNTIME_SRC_BATCHING_EXECUTOR_H_

#include <cstdint>
#include <memory>

#include "spark/runtime/executor.h"

namespace spark {
namespace rt {

class BatchingExecutor final : public Executor {
 public:
  // `max_tokens`: the plan's (the most tokens one step takes).
  BatchingExecutor(std::unique_ptr<Executor> inner, int64_t max_tokens);
  ~BatchingExecutor() override;

  absl::Status ReserveSequences(int64_t max_length, int64_t sequences,
                                int64_t full_length_sequences) override;
  absl::StatusOr<int64_t> DropKv(SequenceState& sequence) override;
  absl::Status ShareKv(SequenceState& from, SequenceState& to, int64_t tokens) override;
  absl::StatusOr<std::unique_ptr<SequenceState>> NewSequence(int64_t max_length) override;
  // A step of one call (a session's): merged with the calls of other threads; of several: run
  // as given.
  absl::Status RunBatch(absl::Span<const SequenceStep> parts,
                        std::vector<StepResult>* results) override;
  absl::Status CopyToMemory(SequenceState& sequence, const MemoryRegion& region,
                            absl::Span<const uint8_t> bytes) override;
  absl::Status CopyFromMemory(SequenceState& sequence, const MemoryRegion& region,
                              absl::Span<uint8_t> bytes) override;
  absl::Status RunProgram(SequenceState& sequence, int32_t num_tokens,
                          int32_t num_soft_tokens) override;
  std::string name() const override;
  MemoryUsage memory_usage() const override;
  const RunProfile* profile() const override;

  BatchingStats stats() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_BATCHING_EXECUTOR_H_
