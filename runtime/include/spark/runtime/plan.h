// The execution plan in memory, as read from a `.spark.plan` section (docs/plan-format.md).
// ParsePlanSection validates everything before returning: version, every id and offset in bounds,
// every step's arguments against the kernel ABI (kernel_abi.h). Code that holds a Plan may index
// its vectors with the ids it contains without further checks.
#ifndef SPARK_RUNTIME_PLAN_H_
#define SPARK_RUNTIME_PLAN_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spark/runtime/element_type.h"
#include "spark/runtime/kernel_abi.h"

namespace spark {
namespace rt {

// An activation buffer in the arena: [max_tokens, row_shape...] of `dtype` at `offset`.
struct BufferInfo {
  std::string name;  // the SSA value it holds, for dumps and errors
  DType dtype = DType::kF32;
  std::vector<int64_t> row_shape;  // shape of one token's row
  uint64_t offset = 0;             // bytes from the arena base
  uint64_t row_bytes() const;      // bytes of one token's row
};

// What the runtime does to a weight's checkpoint bytes when it loads them.
enum class WeightTransform {
  kNone,
  // f32 elements become 1 / x (compressed-tensors stores NVFP4 tensor scales inverted; the
  // kernels multiply by the scale). Such a weight is computed once into its own memory.
  kReciprocal,
};
// "none" / "reciprocal" (the plan's spelling of "transform").
absl::string_view WeightTransformName(WeightTransform transform);
absl::StatusOr<WeightTransform> ParseWeightTransform(absl::string_view name);

// The rank's slice of a weight of a tensor-parallel plan (Plan::ranks > 1; docs/multi-gpu.md):
// the checkpoint tensor (or the whole assembled from parts) has `parts` times the weight's shape
// along `axis`; that dimension is `chunks` equal chunks one after the other (2 for the MoE
// experts' fused gate_up: the gate rows, then the up rows), each split into `parts` equal
// slices, and rank r reads slice ShardPart(r) of every chunk. `parts` divides the plan's ranks:
// fewer parts than ranks replicate each slice on ranks / parts consecutive ranks (the KV heads
// of a model with fewer KV heads than ranks). axis -1: the whole tensor on every rank.
struct WeightShard {
  int64_t axis = -1;
  int64_t parts = 1;
  int64_t chunks = 1;
  bool sharded() const { return axis >= 0; }
  // The slice rank `rank` of `ranks` reads: rank * parts / ranks.
  int64_t PartOf(int64_t rank, int64_t ranks) const { return rank * parts / ranks; }
  bool operator==(const WeightShard& o) const {
    return axis == o.axis && parts == o.parts && chunks == o.chunks;
  }
};

// A checkpoint tensor the plan reads.
struct WeightInfo {
  std::string name;  // full checkpoint name, e.g. model.language_model.norm.weight
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;
  // A weight the checkpoint stores in pieces (MoE experts one matrix per expert): the checkpoint
  // tensors it is the concatenation of, in order (row-major bytes), each of `part_shape` and
  // `dtype`; `name` then only names the whole. Empty: the checkpoint tensor `name` itself.
  std::vector<std::string> parts;
  std::vector<int64_t> part_shape;
  WeightTransform transform = WeightTransform::kNone;
  // A tensor-parallel plan's weights: `shape` is one rank's; the checkpoint's is
  // CheckpointShape().
  WeightShard shard;
  uint64_t num_bytes() const;  // one rank's
  // True when the runtime puts the weight together in memory of its own when it loads it (so an
  // integrated GPU cannot read it in place): assembled from parts, transformed, or a slice that
  // is not one run of the checkpoint's bytes (any shard but whole rows of axis 0).
  bool CopiedAtLoad() const {
    return !parts.empty() || transform != WeightTransform::kNone ||
           (shard.sharded() && (shard.axis != 0 || shard.chunks != 1));
  }
  // The shape of the whole weight in the checkpoint: `shape` with the sharded axis times
  // shard.parts.
  std::vector<int64_t> CheckpointShape() const;
};

enum class KvKind { kFull, kSliding };

// One KV cache (one per non-shared attention layer). Capacity in token slots is decided by the
// runtime: full caches hold --max-length tokens, sliding ones min(max_length,
// window - 1 + max_tokens) (docs/plan-format.md explains why).
struct KvCacheInfo {
  std::string name;
  KvKind kind = KvKind::kFull;
  int64_t window = 0;  // sliding only
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  DType dtype = DType::kF32;  // element type of K and V: kF32 or kBF16
  // Bytes of one part (K or V) of `capacity` slots.
  uint64_t part_bytes(int64_t capacity) const;
  // The kernel ABI's cache_dtype of this cache (abi::KvCacheDType).
  int abi_dtype() const;
};

enum class ArgRefKind {
  kBuffer,          // index = buffer id
  kWeight,          // index = weight id
  kKCache,          // index = kv cache id (K part)
  kVCache,          // index = kv cache id (V part)
  kKvCapacity,      // index = kv cache id; value = its capacity in slots (i32)
  kKvBlockTable,    // index = kv cache id; the block table of its capacity group (a pointer)
  kNull,            // a null pointer
  kNumTokens,       // tokens in this step (i32)
  kNumSoftTokens,   // soft-token rows in this step (i32)
  kI32,             // literal
  kF32,             // literal
};

struct StepArg {
  ArgRefKind kind = ArgRefKind::kNull;
  int64_t index = 0;  // buffer / weight / kv cache id
  int32_t i32 = 0;
  float f32 = 0.0f;
};

// True for the literal arguments (i32 / f32 values) the compiler compiles into the step's entry
// point as constants: they are not kernel parameters (the entry takes the other arguments, in
// order), but the host reference executor still receives them.
inline bool IsEntryLiteral(const StepArg& arg) {
  return arg.kind == ArgRefKind::kI32 || arg.kind == ArgRefKind::kF32;
}

// A step: a kernel launch, or, for an op the registry runs without a kernel (a transfer: a copy
// within the device), the runtime's own data movement. IsLaunch says which; a transfer has no
// kernel, grid, block or shared memory (empty and zero).
// The largest Step::shared_bytes a plan may hold: the most shared memory any NVIDIA GPU gives
// one block (227 KiB, sm_90 / sm_100); a device with less refuses it when the image loads.
inline constexpr int kMaxStepSharedBytes = 227 * 1024;

struct Step {
  abi::OpId op = abi::OpId::kCopy;  // kernel-level op (kernel_ops.def); OpName(step) names it
  std::string kernel;  // entry point symbol in the cubin (launches)
  std::string source;  // the tensor-level op it came from, e.g. "layers.3.attention"
  // Its grid for a call of T tokens: abi::LaunchBlocks(grid, T) blocks (1-D; launches).
  abi::GridRule grid;
  int block[3] = {1, 1, 1};
  // Dynamic shared memory every launch of the step gets (0 from spark-compile: the registry's
  // per-call sizes come on top, LaunchSharedBytes); at most kMaxStepSharedBytes.
  int shared_bytes = 0;
  std::vector<StepArg> args;  // in kernel ABI order
  // One of the steps that only turn the last hidden state into logits (the final norm, the LM
  // head, the softcap): a suffix of `steps`, of row-local ops (abi::RowLocal). A call that needs
  // the logits of its last token only runs them on that row (one token, buffers offset to it),
  // one that needs no logits (an early prefill chunk) not at all; every row only when all logits
  // are asked for (docs/plan-format.md "The logits tail").
  bool logits_tail = false;
};

// A program: the steps a call of [min_tokens, max_tokens] tokens runs, with or without soft-token
// rows (docs/plan-format.md "Programs"). The programs of a plan cover every call size exactly
// once; the one of one token without soft rows is the decode program.
struct Program {
  std::string name;  // "decode", "prefill_16_256", "prefill_soft_1_15", ...
  int64_t min_tokens = 1;
  int64_t max_tokens = 1;
  bool soft_tokens = false;     // for calls with soft-token rows (a plan with a merge only)
  std::vector<int64_t> steps;   // indices into Plan::steps, increasing
};

// Model facts the runtime needs (from the imported config).
struct ModelInfo {
  std::string variant;       // e.g. "gemma4-e2b-like"
  std::string architecture;  // config.json's, e.g. "Gemma4ForConditionalGeneration"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t max_position_embeddings = 0;
  std::vector<int64_t> eos_token_ids;
  int64_t bos_token_id = 2;
  int64_t pad_token_id = 0;
  std::vector<int64_t> soft_token_ids;  // image / audio / video placeholder ids
  std::string weight_prefix;            // "model.language_model." or "model."
  // The image placeholder and the markers around an image's soft tokens (each image of a prompt
  // is boi + soft tokens + eoi); -1 when the model has none.
  int64_t image_token_id = -1;
  int64_t boi_token_id = -1;
  int64_t eoi_token_id = -1;
};

struct Plan {
  uint32_t version = 0;
  std::string target;         // e.g. "sm_121a"
  // The ranks of a tensor-parallel plan (spark-compile --tensor-parallel N, docs/multi-gpu.md):
  // every rank runs this plan on its slices of the weights (WeightInfo::shard) and its share of
  // the KV heads, the collectives (all_reduce, all_gather transfer steps) joining them. 1: one
  // device runs the whole model.
  int64_t ranks = 1;
  int64_t max_tokens = 0;     // rows every activation buffer has room for (prefill chunk)
  uint64_t arena_bytes = 0;   // size of the activation arena
  // The element type of every activation buffer (the registry's kAct arguments, the logits and
  // the soft-token embeddings): kF32, or kBF16 (bf16 storage; kernels compute in f32 and round
  // what they store: kernel_abi.h ActivationPrecision). Workspaces are f32 either way.
  DType activation_precision = DType::kF32;
  ModelInfo model;
  // Entry point buffers. soft_embeddings/soft_indices are -1 if the model has no merge.
  int64_t input_ids = -1;        // i32 [T]
  int64_t input_positions = -1;  // i32 [T]
  int64_t soft_embeddings = -1;  // activation_precision [max_tokens, hidden]
  int64_t soft_indices = -1;     // i32 [max_tokens]
  // i32 [T]: the last key position each token sees on vision-bidirectional attention layers (its
  // own position, or the end of its image block: kernel_abi.h attention). -1 when the model's
  // attention is causal everywhere (use_bidirectional_attention not "vision").
  int64_t input_last_visible = -1;
  // i32 [T, abi::kSamplingParamWords]: each row's sampling parameters (abi::SamplingParams).
  int64_t input_sampling = -1;
  // i32 [T]: each token's row of the block tables (kernel_abi.h KvSlot): which sequence of the
  // step it belongs to. -1 in a plan without attention.
  int64_t input_sequences = -1;
  int64_t output_logits = -1;    // activation_precision [T, vocab]
  // i32 [T]: each row's next token, which the plan's last step (a `sample` step of the logits
  // tail) draws from its logits row.
  int64_t output_tokens = -1;
  std::vector<BufferInfo> buffers;
  std::vector<WeightInfo> weights;
  std::vector<KvCacheInfo> kv_caches;
  // Every step of every program, in order; each is in at least one program.
  std::vector<Step> steps;
  std::vector<Program> programs;

  // The image encoder (a multimodal model's vision tower, docs/plan-format.md "The image
  // encoder"), or null. It is a plan of its own kind: no KV caches, no ids, positions, sampling
  // or logits; its tokens are the patches of one image, its inputs
  //   input_pixel_patches    activation_precision [T, 768]: the patches' pixel values in [0, 1]
  //                          (image.h ImagePatches::pixels)
  //   input_patch_positions  i32 [T, 2]: each patch's (x, y)
  // and its output
  //   output_embeddings      activation_precision [T, model.hidden_size]: the image's soft
  //                          tokens in its first T / 9 rows.
  // Its model facts are the text plan's; its weights are the vision tower's checkpoint tensors.
  std::shared_ptr<const Plan> image_encoder;
  int64_t input_pixel_patches = -1;
  int64_t input_patch_positions = -1;
  int64_t output_embeddings = -1;
  // True for an image encoder plan (it has the pixel_patches input).
  bool is_image_encoder() const { return input_pixel_patches >= 0; }
};

// The values of a pixel patch (16 x 16 pixels x RGB) the image encoder takes.
inline constexpr int64_t kPixelPatchValues = 768;

// The value of i32 argument `arg` of `step` (an index: abi::ops::<op>::<name>): its literal, or
// num_tokens for the runtime's token count; 0 when the op has no such argument. The second form
// finds the argument by its registry name (for tests and tools).
int64_t StepSizeArg(const Step& step, int arg, int64_t num_tokens);
int64_t StepSizeArg(const Step& step, const char* name, int64_t num_tokens);

// The program of a call of `num_tokens` tokens (1..max_tokens), with soft-token rows or not;
// nullptr when the plan has none (ValidatePlan guarantees one for every valid call).
const Program* ProgramOf(const Plan& plan, int64_t num_tokens, bool soft_tokens);

// True when `step` belongs in the program of calls of `num_tokens` tokens with or without soft
// rows, as the registry's `runs` of its op says (kernel_ops.def): a MoE expert op on its path
// (abi::MoePathFor), moe_combine after a grouped moe_down, attention_merge of a split attention
// (AttentionSplits > 1), scatter_rows with soft rows, every other op always. The compiler builds
// the programs with it (BuildPrograms) and ValidatePlan checks them with it; the executors only
// run programs.
bool StepRuns(const Step& step, int64_t num_tokens, bool soft_tokens);

// The dynamic shared memory a launch of `step` (of `plan`) for a call of `num_tokens` tokens
// gets: the step's own shared_bytes plus what the registry gives its op at that size and the
// plan's activation precision (abi::CallSharedBytes: the dense linears' tensor-core tiles), so
// that decode launches of a step carry none of its prefill tiles' memory. Both executors launch
// with it.
int LaunchSharedBytes(const Plan& plan, const Step& step, int64_t num_tokens);

// Sets plan->programs from plan->steps: the decode program (one token, no soft rows), then the
// calls of 2..max_tokens tokens (and, when the plan has soft inputs, of 1..max_tokens tokens with
// soft rows) grouped into maximal ranges of sizes that run the same steps (StepRuns).
void BuildPrograms(Plan* plan);

// The spec of a step's op, and its name in plans ("rms_norm").
inline const abi::OpSpec& SpecOf(const Step& step) { return abi::Spec(step.op); }
// True for a kernel launch, false for a transfer (the op's abi::Execution).
inline bool IsLaunch(const Step& step) { return SpecOf(step).kernel(); }
// A transfer step of `op` with `args` (no kernel, grid or block).
Step TransferStep(abi::OpId op, std::string source, std::vector<StepArg> args);
inline const char* OpName(const Step& step) { return abi::Spec(step.op).op; }

// The entry point spark-compile generates for a launch `step` (entry_point.h): its op's device
// function and its literal arguments. ValidatePlan refuses a launch whose `kernel` is anything
// else. Empty for a transfer.
std::string EntryPointOf(const Step& step);

// Parses and validates the contents of a `.spark.plan` section: the header, then the plan buffer
// (FlatBuffers, runtime/schema/plan.fbs) through its generated verifier, the enum codes and
// limits, and ValidatePlan. `origin` names the file in error messages.
absl::StatusOr<Plan> ParsePlanSection(absl::string_view section, absl::string_view origin);

// Serialises a plan to section bytes: the 32-byte header (magic, kPlanVersion, flags 0, payload
// size, FNV-1a checksum) followed by the plan buffer, no padding. This is the one writer of the
// format: the compiler writes its plans through it, and ParsePlanSection(SerializePlanSection(p))
// gives back p. Deterministic: the same plan gives the same bytes. It does not validate: call
// ValidatePlan first.
std::string SerializePlanSection(const Plan& plan);

// The plan as JSON for people and scripts, indented by `indent` spaces per level (-1: compact):
// what spark-run --dump-plan prints (docs/plan-format.md "The JSON dump"). Nothing reads it
// back; f32 literals are written in the shortest form that reads back to the same float.
std::string PlanJsonText(const Plan& plan, int indent);

// Checks everything about an in-memory plan that ParsePlanSection checks after reading the buffer:
// the target name, every id, offset and size in bounds (overflow-safe), dtypes, the entry point
// buffers, and every step against the kernel ABI (op known, argument count and kinds, launch
// configuration). kInvalidArgument naming `origin` and the offending field otherwise.
absl::Status ValidatePlan(const Plan& plan, absl::string_view origin);

// The JSON dump's name of an argument kind: "buffer", "weight", "k_cache", "v_cache",
// "kv_capacity", "kv_block_table", "null", "num_tokens", "num_soft_tokens", "i32", "f32".
absl::string_view ArgRefKindName(ArgRefKind kind);

// Capacity in token slots of `cache` per sequence for a run of at most `max_length` tokens
// processed in steps of at most `max_tokens`: max_length for a full cache, min(max_length,
// window - 1 + max_tokens) for a sliding one (docs/plan-format.md), rounded up to a whole number
// of blocks (abi::kKvBlockRows). (Defined with the executors, in executor.cc.)
int64_t KvCapacity(const KvCacheInfo& cache, int64_t max_length, int64_t max_tokens);

// The pool's sizing rule, shared by the KV block pool and the memory estimator: the caches of
// the largest capacity (the full-length ones) hold blocks for `full_length_sequences`, every
// other cache (sliding rings) for all `sequences`. Returns how many sequences' blocks each of
// `caches` holds, in their order. (Defined with KvCapacity, in executor.cc.)
std::vector<int64_t> KvSequencesHeld(const std::vector<KvCacheInfo>& caches, int64_t max_length,
                                     int64_t max_tokens, int64_t sequences,
                                     int64_t full_length_sequences);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_PLAN_H_
