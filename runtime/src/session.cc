#include "spark/runtime/session.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "spark/runtime/engine.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/generator.h"
#include "spark/runtime/plan.h"

namespace spark {
namespace rt {

Session::Session(std::shared_ptr<Model> model, std::unique_ptr<SequenceState> sequence)
    : model_(std::move(model)), sequence_(std::move(sequence)) {}

Session::~Session() {
  sequence_.reset();  // frees the caches while the model (and its executor) is alive
  model_->SessionEnded();
}

int64_t Session::max_length() const { return sequence_->max_length(); }

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
  int64_t reuse = 0;
  if (soft == nullptr && !history_has_soft_tokens_ && !prompt.empty()) {
    const size_t limit = std::min(history_.size(), prompt.size() - 1);
    while (static_cast<size_t>(reuse) < limit && history_[reuse] == prompt[reuse]) ++reuse;
    const int64_t dropped = static_cast<int64_t>(history_.size()) - reuse;
    if (dropped > MaxRewind(plan, max_length())) reuse = 0;
  }
  options.cached_prefix = reuse;
  options.session_cancel = &cancel_;
  absl::StatusOr<GenerateResult> result =
      rt::Generate(*model_->executor_, *sequence_, plan, prompt, soft, options);
  cancel_.store(false, std::memory_order_relaxed);
  if (!result.ok()) {
    // What the caches hold is unknown after a failed step: start over next time. (Positions are
    // always written before they are read, so a full prefill needs no clearing.)
    history_.clear();
    history_has_soft_tokens_ = false;
    return result;
  }
  // The caches hold the first cached_tokens ids of prompt + generated tokens.
  const int64_t held = result->cached_tokens;
  const int64_t from_prompt = std::min<int64_t>(held, static_cast<int64_t>(prompt.size()));
  history_.assign(prompt.begin(), prompt.begin() + from_prompt);
  history_.insert(history_.end(), result->tokens.begin(),
                  result->tokens.begin() + (held - from_prompt));
  history_has_soft_tokens_ = soft != nullptr;
  return result;
}

}  // namespace rt
}  // namespace spark
