// Text generation over an Executor's sequence: validates the prompt, runs the prefill in chunks of
// at most plan.max_tokens tokens (never splitting an image block of a vision-bidirectional model),
// then decodes one token at a time until an EOS token, max_new_tokens or a cancellation. Sessions
// (session.h) call it with the prompt prefix their KV caches already hold.
#ifndef SPARK_RUNTIME_GENERATOR_H_
#define SPARK_RUNTIME_GENERATOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/plan.h"
#include "spark/runtime/sampler.h"

namespace spark {
namespace rt {

// Soft tokens (image / audio embeddings, already projected to the model width) and the absolute
// prompt positions they replace. Rows whose position is outside the prompt are skipped.
struct SoftTokens {
  int64_t hidden = 0;
  std::vector<float> embeddings;   // [positions.size(), hidden]
  std::vector<int64_t> positions;  // [n]
};

// Reads soft tokens from a safetensors file holding `embeddings` (F32 [n, hidden]) and `positions`
// (I64 or I32 [n]). INVALID_ARGUMENT naming the file for a missing tensor, a wrong dtype or rank,
// a width other than `hidden`, or a row count mismatch.
absl::StatusOr<SoftTokens> LoadSoftTokens(const std::string& path, int64_t hidden);

// Parses "2,818,5192" (spaces around ids allowed). INVALID_ARGUMENT naming the bad element.
absl::StatusOr<std::vector<int32_t>> ParseTokenIds(absl::string_view text);

// The sequence length to prepare for: `requested`, or min(4096, max_position_embeddings) when
// `requested` is 0. INVALID_ARGUMENT when negative or above max_position_embeddings.
absl::StatusOr<int64_t> ResolveMaxLength(const ModelInfo& model, int64_t requested);

// The prompt is non-empty, at most `max_length` long, and every id is in [0, vocab_size) (the
// error names the index and the value).
absl::Status ValidatePrompt(const ModelInfo& model, absl::Span<const int32_t> prompt,
                            int64_t max_length);

// Vision-bidirectional attention (a plan with a last_visible input: Gemma 4 26B/31B, config
// use_bidirectional_attention "vision"): each maximal run of consecutive soft-token positions of
// the prompt is one image block, whose tokens also see each other's later keys on sliding layers
// (gemma4-architecture.md 6.5). Returns, for each of the prompt_length positions, the last
// position of its block, or the position itself outside blocks. Soft rows outside the prompt are
// ignored.
std::vector<int32_t> LastVisiblePositions(int64_t prompt_length, const SoftTokens& soft);

// A prefill chunk: prompt positions [begin, end).
struct PrefillChunk {
  int64_t begin = 0;
  int64_t end = 0;
};

// Splits a prompt into chunks of at most max_tokens tokens. With last_visible (one value per
// prompt position, LastVisiblePositions) no chunk ends inside an image block: a chunk that would
// is shortened to end before the block. INVALID_ARGUMENT, with the fix, when a block alone is
// longer than max_tokens.
absl::StatusOr<std::vector<PrefillChunk>> PlanPrefillChunks(int64_t prompt_length,
                                                            int64_t max_tokens,
                                                            absl::Span<const int32_t> last_visible);

struct GenerateOptions {
  int64_t max_new_tokens = 32;  // >= 1; capped so that prompt + new tokens <= the sequence's length
  SamplerOptions sampler;
  bool collect_logits = false;  // keep one logits row per processed position (all rows copied)
  // Ids that end the generation besides the model's EOS ids (e.g. generation_config.json's
  // eos_token_id: Gemma 4's <turn|> 106 and <|tool_response> 50).
  std::vector<int32_t> stop_token_ids;
  // Called with each generated id as soon as it is sampled, the stopping id included; returning
  // false ends the generation after that id (stopped_by_caller). Null: no callback.
  std::function<bool(int32_t)> on_token;
  // When set and true, the generation ends before its next step (cancelled); may be set from
  // another thread or a signal handler.
  const std::atomic<bool>* cancel = nullptr;
  // The same, set by Session::Generate to its Cancel flag (callers leave it null).
  const std::atomic<bool>* session_cancel = nullptr;
  // When set, called before each prefill chunk: the most prompt tokens it may take (clamped to
  // [1, the plan's max_tokens]); Session::Generate leaves room beside the chunk for the decode
  // tokens of the model's other generating sessions, so that a long prompt does not hold up their
  // tokens (the steps are merged: batching_executor.h). Unset: max_tokens. Prompts whose soft
  // tokens form bidirectional image blocks are chunked at max_tokens (a block is one step).
  std::function<int64_t()> prefill_chunk_tokens;
  // Prompt positions [0, cached_prefix) whose keys and values the sequence already holds (from an
  // earlier generation with the same ids there): they are not prefilled again. At most
  // prompt.size() - 1 (the last prompt token is always run, for its logits).
  int64_t cached_prefix = 0;
  // When set, called after every step with n: positions [0, n) of prompt + generated tokens
  // hold their keys and values now (GenerateResult::cached_tokens so far). Session::Generate
  // lets other sessions share the prompt's part of them while this one runs.
  std::function<void(int64_t n)> on_cached;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids; ends with the EOS id when one stopped it
  bool stopped_at_eos = false;     // an EOS id or one of stop_token_ids ended it
  bool stopped_by_caller = false;  // on_token returned false
  bool cancelled = false;          // options.cancel was set
  // Positions [0, cached_tokens) of prompt + tokens whose keys and values the sequence holds
  // after the call: the prompt (or the part prefilled before a cancellation) and every generated
  // token but the last (which was sampled, never run).
  int64_t cached_tokens = 0;
  int64_t reused_tokens = 0;  // options.cached_prefix: prompt tokens not prefilled again
  // With collect_logits: [logits_rows, vocab], a row per processed position (every prompt
  // position after the cached prefix, then the input of each decode step).
  std::vector<float> logits;
  int64_t logits_rows = 0;
  int64_t prefill_tokens = 0;  // prompt tokens run (after the cached prefix)
  double prefill_seconds = 0.0;
  int64_t decode_tokens = 0;  // decode steps run (tokens after the first)
  double decode_seconds = 0.0;
  std::vector<std::string> notices;  // e.g. max_new_tokens capped by max_length

  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;
};

// Generates after `prompt` (and `soft`, which may be null) on `sequence`, a sequence of
// `executor` (whose plan is `plan`).
absl::StatusOr<GenerateResult> Generate(Executor& executor, SequenceState& sequence,
                                        const Plan& plan, absl::Span<const int32_t> prompt,
                                        const SoftTokens* soft, const GenerateOptions& options);

// Writes result.logits to `path` as one safetensors tensor "logits", F32 [logits_rows, vocab].
absl::Status WriteLogits(const std::string& path, const GenerateResult& result, int64_t vocab);

// Writes soft tokens as LoadSoftTokens reads them: `embeddings` F32 [n, hidden], `positions` I64
// [n] (spark-run --soft-tokens-out: an image's soft tokens, reusable with --soft-tokens).
absl::Status WriteSoftTokens(const std::string& path, const SoftTokens& soft);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_GENERATOR_H_
