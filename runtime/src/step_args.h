// Executor helpers shared by the host and CUDA executors: plan checks, step input checks, and
// resolution of a step's arguments to addresses and scalars. Internal to the runtime.
#ifndef SPARK_RUNTIME_SRC_STEP_ARGS_H_
#define SPARK_RUNTIME_SRC_STEP_ARGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/kernel_abi.h"
#include "spark/runtime/plan.h"

namespace spark {
namespace rt {

// Checks that `weights` matches plan.weights in count and sizes (ParsePlanSection has checked the
// rest of the plan: entry buffers, dtypes, alignment, argument kinds).
absl::Status CheckBoundWeights(const Plan& plan, absl::Span<const WeightData> weights);

// Checks one Run call: 1..max_tokens tokens, as many positions as ids, each id in [0, vocab),
// each position in [0, max_length), soft rows consistent with the plan, and sampling parameters
// in range (a finite temperature >= 0, top_k >= 0, top_p in (0, 1]).
absl::Status CheckStepInputs(const Plan& plan, int64_t max_length, const StepCall& call);

// The rows of one batched step (Executor::RunBatch): the parts' tokens reordered so that the rows
// whose logits are needed come last, one per kLast part in part order (the logits tail runs on
// the last `tail_rows` rows, ProgramFor), the other tokens before them in their parts' order.
// Reordering is sound: every op but attention is row-local, attention reads the cache that
// kv_write filled with every row of the step first, and each row carries its own position and
// sequence (block-table row = its part's index).
struct BatchLayout {
  std::vector<int32_t> ids, positions, sequences, last_visible;  // last_visible: empty if unused
  std::vector<abi::SamplingParams> sampling;                      // per row
  std::vector<float> soft_embeddings;  // [soft rows, hidden]
  std::vector<int32_t> soft_indices;   // the step row each soft row replaces
  int32_t tail_rows = 0;               // 0 (no part draws), the drawing parts, every row (all_rows)
  bool all_rows = false;               // a part asks for every row's logits (LogitRows::kAll)
  std::vector<int32_t> token_row;      // per part: the row whose drawn token is its, or -1
  std::vector<std::vector<int32_t>> rows_of;  // per part: the row of each of its tokens
  int32_t num_tokens() const { return static_cast<int32_t>(ids.size()); }
  int32_t num_soft_tokens() const { return static_cast<int32_t>(soft_indices.size()); }
  // A decode step: every row its part's one token and drawn (no soft rows, no part asking for
  // every row's logits), so each row is its own sequence's next token.
  bool decode_step() const {
    return soft_indices.empty() && tail_rows == num_tokens() && !all_rows;
  }
};

// Checks every part (CheckStepInputs against its sequence's max_length, sequences distinct,
// tokens and soft rows together within max_tokens) and lays the step out.
absl::StatusOr<BatchLayout> LayOutBatch(const Plan& plan, absl::Span<const SequenceStep> parts);

// Each kAll part's logits, its tokens' rows of `logits` (every row of the step, [T, vocab] f32)
// in its token order, into its result.
void GatherLogitRows(const BatchLayout& layout, absl::Span<const SequenceStep> parts,
                     absl::Span<const float> logits, int64_t vocab,
                     std::vector<StepResult>* results);

// A call of `num_tokens` tokens with `num_soft_tokens` soft rows is one the plan has a program for
// (1..max_tokens tokens; soft rows only in a plan with a merge, at most max_tokens of them).
absl::Status CheckProgramCall(const Plan& plan, int64_t num_tokens, int64_t num_soft_tokens);

// The memory `region` names, `size` bytes of it, lies within the arena (arena_bytes) or the cache
// part (of `capacities[cache]` slots); INVALID_ARGUMENT otherwise.
absl::Status CheckMemoryRegion(const Plan& plan, absl::Span<const int64_t> capacities,
                               const MemoryRegion& region, uint64_t size);


// Device (or host) addresses of everything a step argument can point to.
struct ArgBindings {
  uint64_t arena = 0;
  std::vector<uint64_t> weights;   // by weight id
  std::vector<uint64_t> k_caches;  // by kv cache id
  std::vector<uint64_t> v_caches;
  std::vector<int64_t> kv_capacities;
  std::vector<uint64_t> block_tables;  // by kv cache id: its capacity group's table
};

// One argument, ready to pass: an address (kPtr, 0 for null), an i32 or an f32.
struct ResolvedArg {
  abi::ArgKind kind = abi::ArgKind::kPtr;
  uint64_t address = 0;
  int32_t i32 = 0;
  float f32 = 0.0f;
};

// The arguments of `step` for a launch with `num_tokens` tokens and `num_soft_tokens` soft rows.
// Buffers start at token row `first_row` (ProgramLaunch::first_row).
std::vector<ResolvedArg> ResolveStepArgs(const Plan& plan, const Step& step,
                                         const ArgBindings& bindings, int32_t num_tokens,
                                         int32_t num_soft_tokens, int32_t first_row = 0);

// The buffers a step writes (for dumps), with their StepOutput names.
struct OutputBuffer {
  std::string name;
  int64_t buffer = 0;
};
std::vector<OutputBuffer> StepOutputBuffers(int step_index, const Step& step);

// StepOutput for buffer `buffer` holding `num_tokens` rows at `data` (host memory).
StepOutput MakeStepOutput(const Plan& plan, int step_index, const OutputBuffer& output,
                          int32_t num_tokens, const void* data);

// Activations between the f32 the API speaks and their storage in a buffer of `dtype` (kF32, or
// kBF16: rounded to nearest even): out.size() / values.size() elements.
void ActivationsToF32(const void* data, DType dtype, absl::Span<float> out);
void ActivationsFromF32(absl::Span<const float> values, DType dtype, void* data);

// "step 12 (layers.0.attention, op attention, kernel spark_attention__i8_i1_...)", for error messages.
std::string DescribeStep(int step_index, const Step& step);

// One launch of an executor call: a step, its blocks (abi::LaunchBlocks of its grid rule for the
// tokens it is given), the token count it is given and the first token row its buffers start at
// (a logits-tail step run on the last row only: num_tokens 1, first_row = the call's last row;
// 0 otherwise).
struct ProgramLaunch {
  int step = 0;
  int blocks = 1;
  int32_t num_tokens = 0;
  int32_t first_row = 0;
};

// The launches of a call of `num_tokens` tokens and `num_soft_tokens` soft rows whose logits tail
// (Step::logits_tail) runs on its last `tail_rows` rows (0: not at all; num_tokens: every row):
// the steps of its program (ProgramOf), each with the blocks of its own token count, the tail
// steps those of the `tail_rows`-token program on those rows. Empty for a call no program
// covers.
std::vector<ProgramLaunch> ProgramFor(const Plan& plan, int64_t num_tokens,
                                      int64_t num_soft_tokens, int64_t tail_rows);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_STEP_ARGS_H_
