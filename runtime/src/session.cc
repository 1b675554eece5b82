#include "spark/runtime/session.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "spark/runtime/engine.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/generator.h"
#include "spark/runtime/plan.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {
namespace {

// Adds `part` (a generation resumed at options.cached_prefix = part_start) to `total`, the
// generation so far: counters and timings summed, the stop flags and cached_tokens the last
// part's, and, with collect_logits, the rows of positions `total` has none for yet
// (`next_row`: the position of its next row).
void Merge(GenerateResult part, int64_t part_start, int64_t* next_row, int64_t vocab,
           GenerateResult* total) {
  total->stopped_at_eos = part.stopped_at_eos;
  total->stopped_by_caller = part.stopped_by_caller;
  total->cancelled = part.cancelled;
  total->cached_tokens = part.cached_tokens;
  const int64_t skip = std::clamp<int64_t>(*next_row - part_start, 0, part.logits_rows);
  if (part.logits_rows > skip && vocab > 0) {
    total->logits.insert(total->logits.end(), part.logits.begin() + skip * vocab,
                         part.logits.end());
    total->logits_rows += part.logits_rows - skip;
    *next_row += part.logits_rows - skip;
  }
  total->prefill_tokens += part.prefill_tokens;
  total->prefill_seconds += part.prefill_seconds;
  total->decode_tokens += part.decode_tokens;
  total->decode_seconds += part.decode_seconds;
  for (std::string& notice : part.notices) total->notices.push_back(std::move(notice));
}

}  // namespace

Session::Session(std::shared_ptr<Model> model, std::unique_ptr<SequenceState> sequence)
    : model_(std::move(model)), sequence_(std::move(sequence)) {}

Session::~Session() {
  model_->SessionEnding(*this);  // no longer evictable by other sessions
  sequence_.reset();  // frees the caches while the model (and its executor) is alive
  model_->SessionEnded();
}

int64_t Session::max_length() const { return sequence_->max_length(); }

std::vector<int32_t> Session::history() const {
  std::lock_guard<std::mutex> lock(model_->sessions_mutex_);
  return history_;
}

void Session::Reset() {
  std::lock_guard<std::mutex> lock(model_->sessions_mutex_);
  history_.clear();
}

int64_t Session::MaxRewind(const Plan& plan, int64_t max_length) {
  int64_t limit = std::numeric_limits<int64_t>::max();
  for (const KvCacheInfo& cache : plan.kv_caches) {
    const int64_t capacity = KvCapacity(cache, max_length, plan.max_tokens);
    if (cache.kind != KvKind::kSliding || capacity >= max_length) continue;
    // Position p lives in ring slot p % capacity of its sequence (its blocks: kernel_abi.h KvSlot).
    // Resuming at position p after positions up to L were written:
    // the writes of (p, L] destroyed positions (p - C, L - C], and p needs p - W + 1 .. p - 1,
    // so L - p <= C - W, i.e. at most C - W + 1 positions of history dropped.
    limit = std::min(limit, capacity - cache.window + 1);
  }
  return limit;
}

absl::StatusOr<GenerateResult> Session::Generate(absl::Span<const int32_t> prompt,
                                                 const SoftTokens* soft, GenerateOptions options) {
  const Plan& plan = model_->plan();
  // Running: other sessions no longer evict this one's blocks (Model::MakeRoomForKv), so
  // history_ is this thread's until GenerationEnds.
  model_->GenerationStarts(*this);
  const absl::StatusOr<GenerateResult> result = [&]() -> absl::StatusOr<GenerateResult> {
    int64_t reuse = 0;
    if (soft == nullptr && !history_has_soft_tokens_ && !prompt.empty()) {
      const size_t limit = std::min(history_.size(), prompt.size() - 1);
      while (static_cast<size_t>(reuse) < limit && history_[reuse] == prompt[reuse]) ++reuse;
      const int64_t dropped = static_cast<int64_t>(history_.size()) - reuse;
      if (dropped > MaxRewind(plan, max_length())) reuse = 0;
    }
    if (soft == nullptr) {
      // A longer prefix in an idle session's caches: share its blocks (this session's own are
      // given up).
      SPARK_ASSIGN_OR_RETURN(const int64_t shared, model_->SharePrefix(*this, prompt, reuse,
                                                                              options.cancel));
      if (shared > 0) reuse = shared;  // (history_ is set when the generation ends)
      // While it runs, others may share what its steps cache of this prompt.
      model_->StartLending(*this, prompt, reuse);
    }
    return GenerateResuming(prompt, soft, options, reuse);
  }();
  cancel_.store(false, std::memory_order_relaxed);
  model_->GenerationEnds(*this, [&] {
    if (!result.ok()) {
      // What the caches hold is unknown after a failed step: start over next time. (Positions
      // are always written before they are read, so a full prefill needs no clearing.)
      history_.clear();
      history_has_soft_tokens_ = false;
      return;
    }
    // The caches hold the first cached_tokens ids of prompt + generated tokens.
    const int64_t held = result->cached_tokens;
    const int64_t from_prompt = std::min<int64_t>(held, static_cast<int64_t>(prompt.size()));
    history_.assign(prompt.begin(), prompt.begin() + from_prompt);
    history_.insert(history_.end(), result->tokens.begin(),
                    result->tokens.begin() + (held - from_prompt));
    history_has_soft_tokens_ = soft != nullptr;
  });
  return result;
}

absl::StatusOr<GenerateResult> Session::GenerateResuming(absl::Span<const int32_t> prompt,
                                                         const SoftTokens* soft,
                                                         const GenerateOptions& options,
                                                         int64_t reuse) {
  const Plan& plan = model_->plan();
  // Every id sampled so far, across resumptions (on_token sees each once).
  std::vector<int32_t> generated;
  GenerateOptions run = options;
  run.cached_prefix = reuse;
  run.session_cancel = &cancel_;
  if (!run.prefill_chunk_tokens) {
    // Room beside each prompt chunk for one decode token of every other generating session (at
    // least half the step stays the chunk's, for prefill throughput).
    const int64_t max_tokens = plan.max_tokens;
    run.prefill_chunk_tokens = [this, max_tokens] {
      const int64_t others = model_->generating_sessions() - 1;
      return std::max(max_tokens - others, (max_tokens + 1) / 2);
    };
  }
  run.on_token = [&](int32_t id) {
    generated.push_back(id);
    return !options.on_token || options.on_token(id);
  };
  if (soft == nullptr) {
    run.on_cached = [&](int64_t n) {
      model_->Lent(*this, n);
      if (options.on_cached) options.on_cached(n);
    };
  }
  std::vector<int32_t> ids(prompt.begin(), prompt.end());
  GenerateResult total;
  total.reused_tokens = reuse;
  int64_t next_row = reuse;  // the position of the next logits row (collect_logits)
  for (;;) {
    const size_t sampled_before = generated.size();
    absl::StatusOr<GenerateResult> part =
        rt::Generate(*model_->executor_, *sequence_, plan, ids, soft, run);
    if (part.ok()) {
      Merge(*std::move(part), run.cached_prefix, &next_row, plan.model.vocab_size, &total);
      total.tokens = std::move(generated);
      return total;
    }
    if (!IsKvPoolExhausted(part.status())) return part.status();
    // An overcommitted pool had too few free blocks for this step (which ran nothing): another
    // session's blocks were freed, or this one's (then what it held must be recomputed).
    SPARK_ASSIGN_OR_RETURN(const bool lost_own, model_->MakeRoomForKv(*this, run));
    // What the caches still hold: every position before the last id this call sampled (whose
    // step ended), or, when it sampled none, the prefix it started from.
    const int64_t prompt_size = static_cast<int64_t>(prompt.size());
    int64_t held = generated.size() == sampled_before
                       ? run.cached_prefix
                       : prompt_size + static_cast<int64_t>(generated.size()) - 1;
    if (lost_own) held = 0;
    // The logits rows of the failed call are lost with it: recompute from the first one missing.
    if (options.collect_logits) held = std::min(held, next_row);
    ids.assign(prompt.begin(), prompt.end());
    ids.insert(ids.end(), generated.begin(), generated.end());
    run.cached_prefix = std::min<int64_t>(held, static_cast<int64_t>(ids.size()) - 1);
    // (At least 1: a call that sampled its last token ends without another step.)
    run.max_new_tokens = options.max_new_tokens - static_cast<int64_t>(generated.size());
  }
}

}  // namespace rt
}  // namespace spark
