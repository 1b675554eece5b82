#include "spark/runtime/generator.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/safetensors.h"
#include "spark/runtime/sampler.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {
namespace {

constexpr int64_t kDefaultMaxLength = 4096;

const OwnedTensor* FindTensor(const std::vector<OwnedTensor>& tensors, absl::string_view name) {
  for (const OwnedTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

absl::StatusOr<const OwnedTensor*> RequireTensor(const std::string& path,
                                                 const std::vector<OwnedTensor>& tensors,
                                                 absl::string_view name) {
  const OwnedTensor* tensor = FindTensor(tensors, name);
  if (tensor != nullptr) return tensor;
  std::vector<std::string> names;
  for (const OwnedTensor& t : tensors) names.push_back(t.name);
  return absl::InvalidArgumentError(
      absl::StrCat("soft-token file ", path, " has no tensor '", name,
                   "' (it needs 'embeddings' F32 [n, hidden] and 'positions' I64 [n]; found: ",
                   names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
}

absl::StatusOr<std::vector<int64_t>> ReadPositions(const std::string& path,
                                                   const OwnedTensor& tensor) {
  const bool is_i64 = tensor.dtype == "I64";
  if ((!is_i64 && tensor.dtype != "I32") || tensor.shape.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("soft-token file ", path,
                                                   ": 'positions' must be I64 or I32 [n], got ",
                                                   tensor.dtype, " of rank ", tensor.shape.size()));
  }
  const int64_t n = tensor.shape[0];
  std::vector<int64_t> positions(n);
  for (int64_t i = 0; i < n; ++i) {
    if (is_i64) {
      std::memcpy(&positions[i], tensor.bytes.data() + i * 8, 8);
    } else {
      int32_t p;
      std::memcpy(&p, tensor.bytes.data() + i * 4, 4);
      positions[i] = p;
    }
  }
  return positions;
}

bool IsEos(const ModelInfo& model, int32_t token) {
  return std::find(model.eos_token_ids.begin(), model.eos_token_ids.end(), token) !=
         model.eos_token_ids.end();
}

absl::Status CheckSoftTokens(const Plan& plan, const SoftTokens& soft) {
  if (plan.soft_embeddings < 0) {
    return absl::InvalidArgumentError(
        "soft tokens were given, but the model was compiled without a soft-token merge");
  }
  if (soft.hidden != plan.model.hidden_size) {
    return absl::InvalidArgumentError(absl::StrCat("soft-token embeddings are ", soft.hidden,
                                                   " wide; the model's hidden size is ",
                                                   plan.model.hidden_size));
  }
  if (soft.embeddings.size() != soft.positions.size() * static_cast<size_t>(soft.hidden)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "soft tokens: ", soft.positions.size(), " positions need ",
        soft.positions.size() * soft.hidden, " embedding floats, got ", soft.embeddings.size()));
  }
  return absl::OkStatus();
}

// The soft rows whose position falls in [start, start + count), rebased to the chunk.
struct SoftChunkRows {
  std::vector<float> embeddings;
  std::vector<int32_t> indices;
};

SoftChunkRows SelectSoftRows(const SoftTokens& soft, int64_t start, int64_t count) {
  SoftChunkRows rows;
  for (size_t n = 0; n < soft.positions.size(); ++n) {
    const int64_t p = soft.positions[n];
    if (p < start || p >= start + count) continue;
    rows.indices.push_back(static_cast<int32_t>(p - start));
    const float* src = soft.embeddings.data() + n * soft.hidden;
    rows.embeddings.insert(rows.embeddings.end(), src, src + soft.hidden);
  }
  return rows;
}

// The state of one generation.
class Generation {
 public:
  Generation(Executor& executor, SequenceState& sequence, const Plan& plan,
             const GenerateOptions& options)
      : executor_(executor), sequence_(sequence), plan_(plan), options_(options) {}

  absl::Status Prefill(absl::Span<const int32_t> prompt, const SoftTokens* soft);
  absl::Status Decode(int64_t prompt_length, int64_t max_new_tokens);
  GenerateResult& result() { return result_; }

 private:
  bool Cancelled() const {
    return (options_.cancel != nullptr && options_.cancel->load(std::memory_order_relaxed)) ||
           (options_.session_cancel != nullptr &&
            options_.session_cancel->load(std::memory_order_relaxed));
  }
  // Runs one executor step over `ids` at consecutive positions. With `sample`, the step draws
  // the next token on the executor (next_token_); every logits row is kept with collect_logits.
  absl::Status Run(absl::Span<const int32_t> ids, int64_t first_position,
                   const SoftTokenChunk* soft, bool sample);

  Executor& executor_;
  SequenceState& sequence_;
  const Plan& plan_;
  const GenerateOptions& options_;
  StepResult step_;
  int32_t next_token_ = -1;
  GenerateResult result_;
};

absl::Status Generation::Run(absl::Span<const int32_t> ids, int64_t first_position,
                             const SoftTokenChunk* soft, bool sample) {
  std::vector<int32_t> positions(ids.size());
  std::iota(positions.begin(), positions.end(), static_cast<int32_t>(first_position));
  StepCall call;
  call.ids = ids;
  call.positions = positions;
  call.soft = soft;
  call.rows = options_.collect_logits ? LogitRows::kAll
              : sample                ? LogitRows::kLast
                                      : LogitRows::kNone;
  // The draw's counter is the position the sampled token takes: the same seed gives the same
  // tokens however much of the prompt the caches already held.
  call.sampling = SamplingParamsFor(options_.sampler, first_position + ids.size());
  SPARK_RETURN_IF_ERROR(executor_.Run(sequence_, call, &step_));
  const int64_t vocab = plan_.model.vocab_size;
  const int64_t expected_rows = call.rows == LogitRows::kAll ? static_cast<int64_t>(ids.size()) : 0;
  if (static_cast<int64_t>(step_.logits.size()) != expected_rows * vocab ||
      (call.rows != LogitRows::kNone && (step_.token < 0 || step_.token >= vocab))) {
    return absl::InternalError(absl::StrCat(
        executor_.name(), " executor returned token ", step_.token, " and ", step_.logits.size(),
        " logits, expected a token in [0, ", vocab, ") and ", expected_rows, " rows of ", vocab));
  }
  if (options_.collect_logits) {
    result_.logits.insert(result_.logits.end(), step_.logits.begin(), step_.logits.end());
    result_.logits_rows += expected_rows;
  }
  if (call.rows != LogitRows::kNone) next_token_ = step_.token;
  result_.cached_tokens = first_position + static_cast<int64_t>(ids.size());
  if (options_.on_cached) options_.on_cached(result_.cached_tokens);
  return absl::OkStatus();
}

absl::Status Generation::Prefill(absl::Span<const int32_t> prompt, const SoftTokens* soft) {
  const absl::Time start = absl::Now();
  const int64_t cached = options_.cached_prefix;
  result_.reused_tokens = cached;
  result_.cached_tokens = cached;
  const absl::Span<const int32_t> rest = prompt.subspan(cached);
  const int64_t length = static_cast<int64_t>(rest.size());
  // Image blocks matter only to a model with vision-bidirectional attention. (A session reuses
  // no prefix when soft tokens are given: positions here are the prompt's.)
  std::vector<int32_t> last_visible;
  if (soft != nullptr && plan_.input_last_visible >= 0) {
    last_visible = LastVisiblePositions(length, *soft);
  }
  // The chunks: planned up front (image blocks kept whole), or sized one at a time as
  // options_.prefill_chunk_tokens says.
  const bool sized_per_chunk = options_.prefill_chunk_tokens && last_visible.empty();
  std::vector<PrefillChunk> chunks;
  if (!sized_per_chunk) {
    SPARK_ASSIGN_OR_RETURN(chunks, PlanPrefillChunks(length, plan_.max_tokens, last_visible));
  }
  for (size_t c = 0;; ++c) {
    if (sized_per_chunk) {
      const int64_t begin = chunks.empty() ? 0 : chunks.back().end;
      if (begin >= length) break;
      const int64_t size =
          std::clamp<int64_t>(options_.prefill_chunk_tokens(), 1, plan_.max_tokens);
      chunks.push_back({begin, std::min(begin + size, length)});
    } else if (c >= chunks.size()) {
      break;
    }
    if (Cancelled()) {
      result_.cancelled = true;
      break;
    }
    const PrefillChunk& chunk = chunks[c];
    const int64_t count = chunk.end - chunk.begin;
    SoftChunkRows rows;
    if (soft != nullptr) rows = SelectSoftRows(*soft, chunk.begin, count);
    SoftTokenChunk soft_chunk{rows.embeddings, rows.indices};
    if (!last_visible.empty() && !rows.indices.empty()) {
      soft_chunk.last_visible = absl::MakeConstSpan(last_visible).subspan(chunk.begin, count);
    }
    SPARK_RETURN_IF_ERROR(Run(rest.subspan(chunk.begin, count), cached + chunk.begin,
                              rows.indices.empty() ? nullptr : &soft_chunk,
                              /*sample=*/chunk.end == length));
  }
  result_.prefill_tokens = result_.cached_tokens - cached;
  result_.prefill_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return absl::OkStatus();
}

absl::Status Generation::Decode(int64_t prompt_length, int64_t max_new_tokens) {
  const absl::Time start = absl::Now();
  while (true) {
    result_.tokens.push_back(next_token_);
    const bool stop = IsEos(plan_.model, next_token_) ||
                      std::find(options_.stop_token_ids.begin(), options_.stop_token_ids.end(),
                                next_token_) != options_.stop_token_ids.end();
    if (options_.on_token && !options_.on_token(next_token_) && !stop) {
      result_.stopped_by_caller = true;
      break;
    }
    if (stop) {
      result_.stopped_at_eos = true;
      break;
    }
    if (static_cast<int64_t>(result_.tokens.size()) >= max_new_tokens) break;
    if (Cancelled()) {
      result_.cancelled = true;
      break;
    }
    const int64_t position = prompt_length + static_cast<int64_t>(result_.tokens.size()) - 1;
    const int32_t input = next_token_;
    SPARK_RETURN_IF_ERROR(Run(absl::MakeConstSpan(&input, 1), position, nullptr, /*sample=*/true));
    ++result_.decode_tokens;
  }
  result_.decode_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return absl::OkStatus();
}

double Rate(int64_t tokens, double seconds) { return seconds > 0.0 ? tokens / seconds : 0.0; }

}  // namespace

double GenerateResult::prefill_tokens_per_second() const {
  return Rate(prefill_tokens, prefill_seconds);
}

double GenerateResult::decode_tokens_per_second() const {
  return Rate(decode_tokens, decode_seconds);
}

std::vector<int32_t> LastVisiblePositions(int64_t prompt_length, const SoftTokens& soft) {
  std::vector<bool> is_soft(static_cast<size_t>(prompt_length), false);
  for (const int64_t p : soft.positions) {
    if (p >= 0 && p < prompt_length) is_soft[p] = true;
  }
  std::vector<int32_t> last(static_cast<size_t>(prompt_length));
  for (int64_t p = prompt_length - 1; p >= 0; --p) {
    const bool continues = is_soft[p] && p + 1 < prompt_length && is_soft[p + 1];
    last[p] = continues ? last[p + 1] : static_cast<int32_t>(p);
  }
  return last;
}

absl::StatusOr<std::vector<PrefillChunk>> PlanPrefillChunks(
    int64_t prompt_length, int64_t max_tokens, absl::Span<const int32_t> last_visible) {
  if (max_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the plan's max_tokens must be positive, got ", max_tokens));
  }
  std::vector<PrefillChunk> chunks;
  for (int64_t begin = 0; begin < prompt_length;) {
    int64_t end = std::min(begin + max_tokens, prompt_length);
    if (!last_visible.empty() && end < prompt_length && last_visible[end - 1] >= end) {
      // Position end - 1 belongs to a block that goes on: end the chunk before the block.
      const int32_t block_last = last_visible[end - 1];
      int64_t block_begin = end - 1;
      while (block_begin > 0 && last_visible[block_begin - 1] == block_last) --block_begin;
      if (block_begin <= begin) {
        const int64_t block_tokens = block_last - block_begin + 1;
        return absl::InvalidArgumentError(absl::StrCat(
            "the image block at prompt positions ", block_begin, "..", block_last, " has ",
            block_tokens, " soft tokens, more than the ", max_tokens,
            " tokens one step of this plan processes (its max_tokens); the tokens of an image "
            "attend to each other and must be processed in one step: recompile with "
            "spark-compile --max-tokens ",
            block_tokens, " (or more)"));
      }
      end = block_begin;
    }
    chunks.push_back({begin, end});
    begin = end;
  }
  return chunks;
}

absl::StatusOr<SoftTokens> LoadSoftTokens(const std::string& path, int64_t hidden) {
  SPARK_ASSIGN_OR_RETURN(std::vector<OwnedTensor> tensors, ReadSafetensorsFile(path));
  SPARK_ASSIGN_OR_RETURN(const OwnedTensor* embeddings, RequireTensor(path, tensors, "embeddings"));
  SPARK_ASSIGN_OR_RETURN(const OwnedTensor* positions, RequireTensor(path, tensors, "positions"));
  if (embeddings->dtype != "F32" || embeddings->shape.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("soft-token file ", path, ": 'embeddings' must be F32 [n, hidden], got ",
                     embeddings->dtype, " of rank ", embeddings->shape.size()));
  }
  if (embeddings->shape[1] != hidden) {
    return absl::InvalidArgumentError(absl::StrCat("soft-token file ", path, ": 'embeddings' are ",
                                                   embeddings->shape[1],
                                                   " wide; the model's hidden size is ", hidden));
  }
  SoftTokens soft;
  soft.hidden = hidden;
  SPARK_ASSIGN_OR_RETURN(soft.positions, ReadPositions(path, *positions));
  if (static_cast<int64_t>(soft.positions.size()) != embeddings->shape[0]) {
    return absl::InvalidArgumentError(absl::StrCat("soft-token file ", path, ": ",
                                                   embeddings->shape[0], " embedding rows but ",
                                                   soft.positions.size(), " positions"));
  }
  soft.embeddings.resize(embeddings->bytes.size() / sizeof(float));
  std::memcpy(soft.embeddings.data(), embeddings->bytes.data(),
              soft.embeddings.size() * sizeof(float));
  return soft;
}

absl::StatusOr<std::vector<int32_t>> ParseTokenIds(absl::string_view text) {
  if (absl::StripAsciiWhitespace(text).empty()) {
    return absl::InvalidArgumentError("the prompt is empty: give token ids like 2,818,5192");
  }
  std::vector<int32_t> ids;
  int index = 0;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int32_t id = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad token id '", part, "' at index ", index,
                       ": expected comma-separated integers like 2,818,5192"));
    }
    ids.push_back(id);
    ++index;
  }
  return ids;
}

absl::StatusOr<int64_t> ResolveMaxLength(const ModelInfo& model, int64_t requested) {
  const int64_t limit = model.max_position_embeddings;
  if (requested == 0) return limit > 0 ? std::min(kDefaultMaxLength, limit) : kDefaultMaxLength;
  if (requested < 0 || requested > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("max length must be positive and below 2^31, got ", requested));
  }
  if (limit > 0 && requested > limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max length ", requested, " exceeds the model's max_position_embeddings ", limit));
  }
  return requested;
}

absl::Status ValidatePrompt(const ModelInfo& model, absl::Span<const int32_t> prompt,
                            int64_t max_length) {
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt is empty");
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= model.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("prompt token ", i, " is ", prompt[i],
                                                     ", outside the vocabulary [0, ",
                                                     model.vocab_size, ")"));
    }
  }
  if (static_cast<int64_t>(prompt.size()) > max_length) {
    return absl::InvalidArgumentError(absl::StrCat("the prompt has ", prompt.size(),
                                                   " tokens, more than the max length ", max_length,
                                                   " (raise --max-length)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<GenerateResult> Generate(Executor& executor, SequenceState& sequence,
                                        const Plan& plan, absl::Span<const int32_t> prompt,
                                        const SoftTokens* soft, const GenerateOptions& options) {
  SPARK_RETURN_IF_ERROR(ValidateSamplerOptions(options.sampler));
  const int64_t max_length = sequence.max_length();
  SPARK_RETURN_IF_ERROR(ValidatePrompt(plan.model, prompt, max_length));
  if (soft != nullptr) SPARK_RETURN_IF_ERROR(CheckSoftTokens(plan, *soft));
  if (options.max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max new tokens must be at least 1, got ", options.max_new_tokens));
  }
  const int64_t prompt_length = static_cast<int64_t>(prompt.size());
  if (options.cached_prefix < 0 || options.cached_prefix >= prompt_length ||
      (soft != nullptr && options.cached_prefix > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cached_prefix ", options.cached_prefix, " is not in [0, ", prompt_length,
        ") (the last prompt token is always run)", soft != nullptr ? ", or soft tokens were given" : ""));
  }
  Generation generation(executor, sequence, plan, options);
  const int64_t room = max_length - prompt_length;
  const int64_t max_new_tokens = std::min(options.max_new_tokens, room);
  if (max_new_tokens < options.max_new_tokens) {
    generation.result().notices.push_back(
        absl::StrCat("the prompt (", prompt_length, " tokens) + ", options.max_new_tokens,
                     " new tokens exceed the max length ", max_length, "; generating at most ",
                     max_new_tokens));
  }
  if (max_new_tokens == 0) return std::move(generation.result());
  SPARK_RETURN_IF_ERROR(generation.Prefill(prompt, soft));
  if (generation.result().cancelled) return std::move(generation.result());
  SPARK_RETURN_IF_ERROR(generation.Decode(prompt_length, max_new_tokens));
  return std::move(generation.result());
}

absl::Status WriteLogits(const std::string& path, const GenerateResult& result, int64_t vocab) {
  OwnedTensor tensor;
  tensor.name = "logits";
  tensor.dtype = "F32";
  tensor.shape = {result.logits_rows, vocab};
  tensor.bytes.assign(reinterpret_cast<const char*>(result.logits.data()),
                      result.logits.size() * sizeof(float));
  return WriteSafetensors(path, {tensor});
}

absl::Status WriteSoftTokens(const std::string& path, const SoftTokens& soft) {
  OwnedTensor embeddings;
  embeddings.name = "embeddings";
  embeddings.dtype = "F32";
  embeddings.shape = {static_cast<int64_t>(soft.positions.size()), soft.hidden};
  embeddings.bytes.assign(reinterpret_cast<const char*>(soft.embeddings.data()),
                          soft.embeddings.size() * sizeof(float));
  OwnedTensor positions;
  positions.name = "positions";
  positions.dtype = "I64";
  positions.shape = {static_cast<int64_t>(soft.positions.size())};
  positions.bytes.assign(reinterpret_cast<const char*>(soft.positions.data()),
                         soft.positions.size() * sizeof(int64_t));
  return WriteSafetensors(path, {embeddings, positions});
}

}  // namespace rt
}  // namespace spark
