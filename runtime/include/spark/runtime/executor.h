// The executor interface: runs a plan's steps for one chunk of tokens of one sequence, on the host
// (the reference, host_executor.h) or on a CUDA device (cuda_executor.h). The generator
// (generator.h) drives it; sessions (session.h) own its sequences.
#ifndef SPARK_RUNTIME_EXECUTOR_H_
#define SPARK_RUNTIME_EXECUTOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "spark/runtime/kernel_abi.h"
#include "spark/runtime/memory_usage.h"
#include "spark/runtime/plan.h"
#include "spark/runtime/step_profile.h"

namespace spark {
namespace rt {

class Checkpoint;

// Soft-token rows (image / audio embeddings) merged into one step's embeddings.
struct SoftTokenChunk {
  absl::Span<const float> embeddings;  // [indices.size(), hidden], row-major
  // Row of the step each embedding replaces, relative to the step's first token. Rows outside
  // [0, num_tokens) are skipped by the merge.
  absl::Span<const int32_t> indices;
  // For a plan with a last_visible input (Plan::input_last_visible: vision-bidirectional
  // attention, Gemma 4 26B/31B): one value per token of the step, the last position it sees on
  // those layers, in [its position, the step's last position] (the end of its image block, or its
  // own position). Empty: every token sees up to its own position (causal).
  absl::Span<const int32_t> last_visible;
};

// One output buffer of a step, for dumps (`spark-run --dump`).
struct StepOutput {
  int step_index = 0;
  const Step* step = nullptr;
  std::string name;  // "<step index>.<source>", plus ".<argument>" when the step has several
  int64_t buffer = -1;  // the plan buffer
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // [num_tokens, row_shape...]
  const void* data = nullptr;  // host memory, valid during the call
  uint64_t num_bytes = 0;
};
using StepObserver = std::function<absl::Status(const StepOutput&)>;

// How a call ends (the plan's logits tail, plan.h Step::logits_tail, whose last step draws the
// next token on the executor: kernel_ops.def sample):
//   kNone  the tail does not run: no token, no logits (a prefill chunk before the last);
//   kLast  the tail runs on the last row only and draws its next token; no logits cross to the
//          host (a decode step copies one token id);
//   kAll   the tail runs on every row, and every row's logits are copied too (--logits-out); the
//          token is the last row's.
enum class LogitRows { kNone, kLast, kAll };

// One executor call: ids.size() tokens (1..max_tokens) of one sequence.
struct StepCall {
  absl::Span<const int32_t> ids;
  absl::Span<const int32_t> positions;  // one per id, each in [0, sequence.max_length())
  const SoftTokenChunk* soft = nullptr;  // soft-token rows merged into this call (may be null)
  LogitRows rows = LogitRows::kLast;
  // How every row's token is drawn (abi::SamplingParams; the default is greedy). The generator
  // passes the sampler's options with counter = the position of the token drawn.
  abi::SamplingParams sampling;
};

// What a call returns.
struct StepResult {
  int32_t token = -1;         // the last row's next token (rows != kNone), else -1
  std::vector<float> logits;  // kAll: [ids.size(), vocab] floats; empty otherwise
};

class Executor;
class SequenceState;

// What a model's continuous batching did so far (Model::batching_stats; the runtime's
// BatchingExecutor merges the Run calls of concurrent sessions into batched steps).
struct BatchingStats {
  int64_t steps = 0;         // steps run (merged or not)
  int64_t calls = 0;         // Run calls served
  int64_t merged_steps = 0;  // steps of more than one call
  int64_t max_calls = 0;     // the most calls one step served
  int64_t mixed_steps = 0;   // steps that held a prefill chunk and other sequences' decode tokens
  int64_t queued = 0;        // calls waiting for a step now
};

// One sequence's share of a batched step (Executor::RunBatch): its call, as Run takes it.
struct SequenceStep {
  SequenceState* sequence = nullptr;
  StepCall call;
};

// A place in an executor's memory that a tool reads or writes directly (Executor::CopyToMemory):
// the activation arena, or the K or V part of one of a sequence's KV caches, from `offset` bytes
// (the sequence's view of the cache: its KvCapacity slots in position order modulo the capacity,
// wherever in the pool their blocks lie; a copy allocates the blocks it touches).
struct MemoryRegion {
  enum class Kind { kArena, kKCache, kVCache };
  Kind kind = Kind::kArena;
  int64_t cache = 0;    // the KV cache id, for kKCache / kVCache
  uint64_t offset = 0;  // bytes from the start of the arena or the cache part
};

// One sequence on an executor: the KV cache blocks it holds in the executor's pool. Made by
// Executor::NewSequence; the activation arena is the executor's, shared by its sequences (it
// holds nothing between steps). Steps of one executor run one at a
// time: a caller that runs several sequences from several threads serialises the Run calls.
class SequenceState {
 public:
  SequenceState(const Executor* owner, int64_t max_length)
      : owner_(owner), max_length_(max_length) {}
  virtual ~SequenceState() = default;
  SequenceState(const SequenceState&) = delete;
  SequenceState& operator=(const SequenceState&) = delete;

  const Executor* owner() const { return owner_; }
  int64_t max_length() const { return max_length_; }  // positions it has room for

 private:
  const Executor* owner_;
  int64_t max_length_;
};

// The error of a step whose sequences need more KV blocks than the pool has free (an
// overcommitted pool: Executor::ReserveSequences): RESOURCE_EXHAUSTED, marked so that
// IsKvPoolExhausted tells it from other exhaustion (memory that cannot be allocated).
absl::Status KvPoolExhausted(absl::string_view message);
bool IsKvPoolExhausted(const absl::Status& status);

class Executor {
 public:
  virtual ~Executor() = default;

  // Allocates the KV cache pool (kernel_abi.h "Paged KV cache": every cache a pool of blocks of
  // abi::kKvBlockRows tokens, KvCapacity slots per sequence) for `sequences` live sequences of up
  // to `max_length` tokens, the full caches' blocks for `full_length_sequences` of them (1 ..
  // sequences; fewer than `sequences` overcommits the pool: a step fails with KvPoolExhausted when
  // the live sequences together need more, see DropKv), and the activation arena.
  // FAILED_PRECONDITION while a sequence of the old pool is alive; RESOURCE_EXHAUSTED when the
  // memory cannot be allocated. The default (an executor without a pool) does nothing.
  virtual absl::Status ReserveSequences(int64_t max_length, int64_t sequences,
                                        int64_t full_length_sequences);

  // Returns every KV block `sequence` holds to the pool: what its caches held is gone, and its
  // next steps allocate blocks again from position 0 (a preempted or evicted sequence, which is
  // then recomputed). How many blocks were returned; the default (no pool) returns 0.
  virtual absl::StatusOr<int64_t> DropKv(SequenceState& sequence);

  // Makes `to` share `from`'s KV blocks of positions 0 .. tokens - 1 (prefix sharing: a prompt
  // prefix whose keys and values `from` computed): `to` first gives up what it held (as DropKv),
  // then reads those blocks where they are, no bytes copied; whichever of the two next writes a
  // shared block (a step, CopyToMemory) gets its own copy of it first (copy-on-write). The caller
  // vouches that `from`'s caches hold those positions (Session::Generate: an idle session whose
  // history starts with the prompt). Both made by this executor, not the same sequence;
  // INVALID_ARGUMENT for tokens outside [0, max_length]. UNIMPLEMENTED for an executor without a
  // pool (the default).
  virtual absl::Status ShareKv(SequenceState& from, SequenceState& to, int64_t tokens);

  // A sequence of up to `max_length` tokens (at most the pool's; without a pool yet, the pool is
  // reserved for one sequence of max_length), holding no KV blocks: each Run allocates the
  // blocks its positions need from the pool (KvPoolExhausted when it has too few free), and
  // the sequence returns them when it is destroyed. The weights were bound when the executor
  // was made. The sequence must not outlive the executor.
  virtual absl::StatusOr<std::unique_ptr<SequenceState>> NewSequence(int64_t max_length) = 0;

  // Runs one step over the tokens of several sequences (continuous batching): the calls' tokens
  // together (1..max_tokens of them, soft rows at most max_tokens), each token attending to its
  // own sequence's cache, each call ending as its rows say (a kAll call gets its own rows'
  // logits; the tail then runs on every row of the step) with its own sampling parameters;
  // (*results)[i] is parts[i]'s. Every sequence
  // at most once and made by this executor; each call is checked as Run checks it. A sequence's
  // results equal those of the same call run alone (up to the kernels' different paths for
  // other token counts: docs/design.md).
  virtual absl::Status RunBatch(absl::Span<const SequenceStep> parts,
                                std::vector<StepResult>* results) = 0;

  // Runs the program of the call's size on `sequence` (the tail as call.rows says) and fills
  // `result`: RunBatch of one part.
  absl::Status Run(SequenceState& sequence, const StepCall& call, StepResult* result);

  // One-sequence conveniences (tests, fuzzers): Prepare makes (or remakes, with empty caches)
  // the executor's own sequence; RunStep runs it greedily, returning every logits row.
  absl::Status Prepare(int64_t max_length);
  absl::Status RunStep(absl::Span<const int32_t> ids, absl::Span<const int32_t> positions,
                       const SoftTokenChunk* soft, std::vector<float>* logits);

  // For tools that drive single steps (test/gpu/op_check: the GPU op check): bytes copied into or
  // out of the arena or a sequence's KV caches (INVALID_ARGUMENT for a range outside them), and
  // RunProgram, which runs the program of a call of `num_tokens` tokens with `num_soft_tokens`
  // soft rows (the logits tail on every row) on what memory holds: it writes no input but the
  // sequences (every token is `sequence`'s, whose blocks are all allocated) and reads no output. UNIMPLEMENTED unless the executor supports them (the host and CUDA executors do).
  virtual absl::Status CopyToMemory(SequenceState& sequence, const MemoryRegion& region,
                                    absl::Span<const uint8_t> bytes);
  virtual absl::Status CopyFromMemory(SequenceState& sequence, const MemoryRegion& region,
                                      absl::Span<uint8_t> bytes);
  virtual absl::Status RunProgram(SequenceState& sequence, int32_t num_tokens,
                                  int32_t num_soft_tokens);

  // For an executor of an image encoder plan (Plan::is_image_encoder: a multimodal model's vision
  // tower): runs its program on the T = patch_positions.size() / 2 patches of one image,
  // `pixel_patches` [T, kPixelPatchValues] in [0, 1] and `patch_positions` [T, 2] (x, y), and
  // returns the image's soft tokens, the first T / 9 rows of its embeddings as f32
  // [T / 9, model.hidden_size]. INVALID_ARGUMENT for sizes that do not match, T outside
  // [9, max_tokens] or not a multiple of 9, or coordinates outside the position table
  // (CheckImageEncoderCall); UNIMPLEMENTED for an executor without one (the default).
  virtual absl::StatusOr<std::vector<float>> EncodeImage(absl::Span<const float> pixel_patches,
                                                         absl::Span<const int32_t> patch_positions);

  // "host" or "cuda:<ordinal> (<device name>)".
  virtual std::string name() const = 0;

  // The memory this executor has used so far (memory_usage.h).
  virtual MemoryUsage memory_usage() const = 0;

  // When set, called after every step with each of its output buffers (slow: for debugging).
  // (Virtual: a wrapper of several executors hands it to the one it reports.)
  virtual void set_step_observer(StepObserver observer) { step_observer_ = std::move(observer); }

  // When set, every step is timed on its own (the CUDA executor then launches the steps one by
  // one with events between them instead of replaying its decode graph) and recorded in
  // `profile`, which must be made for this executor's plan.
  virtual void set_profile(std::unique_ptr<RunProfile> profile) { profile_ = std::move(profile); }
  virtual const RunProfile* profile() const { return profile_.get(); }

 protected:
  const StepObserver& step_observer() const { return step_observer_; }
  RunProfile* mutable_profile() { return profile_.get(); }
  // Frees the sequence of Prepare. Every executor's destructor calls it first: that sequence
  // belongs to this executor (or, for a wrapper, to the one it wraps), which must still be whole
  // when the sequence releases its caches.
  void ReleaseOwnSequence() { own_sequence_.reset(); }
  // FAILED_PRECONDITION unless `sequence` was made by this executor (a wrapper such as
  // WithStepDump hands out, and forwards to, its inner executor's sequences).
  absl::Status CheckOwnSequence(const SequenceState& sequence) const;
  // ShareKv's arguments: both this executor's, not the same sequence.
  absl::Status CheckSharePair(const SequenceState& from, const SequenceState& to) const;

 private:
  StepObserver step_observer_;
  std::unique_ptr<RunProfile> profile_;
  std::unique_ptr<SequenceState> own_sequence_;  // Prepare / RunStep
};

// KvCapacity (the slots of each KV cache) is declared in plan.h.

// The checks of Executor::EncodeImage, shared by the executors: an image encoder plan, sizes that
// agree, a patch count in [9, plan.max_tokens] that is a multiple of 9, and coordinates inside
// the position table (the patch_position_embedding steps' table_size).
absl::Status CheckImageEncoderCall(const Plan& plan, absl::Span<const float> pixel_patches,
                                   absl::Span<const int32_t> patch_positions);

// The bytes of one checkpoint tensor.
struct WeightPart {
  const uint8_t* data = nullptr;
  uint64_t num_bytes = 0;
};

// The bytes of one plan weight, in checkpoint layout: one checkpoint tensor (`data`), or, for a
// weight assembled from parts (WeightInfo::parts), the parts in order (`data` null; the executor
// copies them one after the other into memory of its own). num_bytes is the whole weight's.
// A weight the plan transforms (WeightInfo::transform: a reciprocal scale) is computed when it is
// bound, parts assembled first: `data` then points into `computed`, host memory of its own that
// is not the checkpoint's (an integrated GPU cannot read it in place).
struct WeightData {
  const uint8_t* data = nullptr;
  uint64_t num_bytes = 0;
  std::vector<WeightPart> parts;
  std::shared_ptr<const std::vector<uint8_t>> computed;
  bool assembled() const { return !parts.empty(); }
};

// Copies the weight's bytes (its tensor, or its parts one after the other) to `dst`, which holds
// num_bytes.
void CopyWeightBytes(const WeightData& weight, uint8_t* dst);

// The data of every plan weight, indexed by weight id, after checking each against the checkpoint
// (name, dtype, shape). Pointers stay valid while `checkpoint` lives. For a tensor-parallel plan
// (Plan::ranks > 1), rank `rank`'s slices (WeightShard): a slice that is not one run of the
// checkpoint's bytes comes as parts.
absl::StatusOr<std::vector<WeightData>> BindWeights(const Plan& plan, const Checkpoint& checkpoint,
                                                    int64_t rank = 0);

// Where an executor on an integrated GPU (memory shared with the CPU) keeps each weight: read in
// place from the checkpoint's mapping, or copied. The kernels' fast paths load weights 16 bytes at
// a time (kWeightVectorAlignment), and safetensors does not align tensors: the safetensors library
// packs them back to back, so in a quantized checkpoint the U8 codes that follow the f32 scalars
// can start at any offset. A weight of 16 bytes or more that is not 16-byte aligned there, or one
// not aligned to its element size, is copied; read in place it would take the kernels' scalar
// fallback, several times slower. A weight assembled from parts, or computed (a transform), is
// always copied.
inline constexpr uint64_t kWeightVectorAlignment = 16;
struct WeightPlacement {
  std::vector<bool> copied;  // by weight id
  size_t num_copied = 0;
  uint64_t copied_bytes = 0;
};
WeightPlacement PlaceIntegratedWeights(const Plan& plan, const std::vector<WeightData>& weights);

// Wraps `executor` so that every RunStep call writes the outputs of all steps to
// `dir`/run<NNN>.safetensors (NNN counts the calls from 000), tensors named per StepOutput::name.
// `dir` must exist.
std::unique_ptr<Executor> WithStepDump(std::unique_ptr<Executor> executor, std::string dir);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_EXECUTOR_H_
