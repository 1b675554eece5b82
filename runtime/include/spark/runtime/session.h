// The runtime's public API, bottom half: a Session is one sequence of a Model (engine.h): its KV
// caches and the ids they hold. Generate streams tokens (GenerateOptions::on_token) and reuses the
// caches for the prompt prefix they already hold, so a chat's next turn prefills only what is new;
// Cancel, from any thread or a signal handler, ends the running generation after its current step.
// Several sessions of one model may run from several threads: their steps are merged into batched
// steps; with an overcommitted KV pool (ModelOptions::kv_pool_sessions) a generation that finds
// no free block evicts an idle session's caches or is preempted and recomputed, never failed.
#ifndef SPARK_RUNTIME_SESSION_H_
#define SPARK_RUNTIME_SESSION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "spark/runtime/engine.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/generator.h"

namespace spark {
namespace rt {

class Session {
 public:
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Generates after `prompt` (and `soft`, which may be null), as rt::Generate does (generator.h),
  // on this session's caches. The longest prefix of `prompt` that the caches hold (the ids of the
  // earlier prompts and answers) is not prefilled again (result.reused_tokens), unless soft
  // tokens were given now or last time (their embeddings are not compared), or a sliding-window
  // cache has already overwritten what a shorter prefix needs (MaxRewind). options.cached_prefix
  // and options.session_cancel are the session's own (replaced); options.cancel, the caller's
  // flag, is honoured besides Cancel().
  absl::StatusOr<GenerateResult> Generate(absl::Span<const int32_t> prompt, const SoftTokens* soft,
                                          GenerateOptions options);

  // Ends the running Generate after its current step (result.cancelled), or the next one at once
  // when none runs. Thread-safe and async-signal-safe. Each Generate clears it when it returns.
  void Cancel() { cancel_.store(true, std::memory_order_relaxed); }

  // Forgets what the caches hold: the next Generate prefills its whole prompt.
  void Reset();

  // The ids whose keys and values the caches hold, positions 0.. in order (a copy: with an
  // overcommitted KV pool, another session's generation may evict an idle session's caches,
  // which then hold nothing).
  std::vector<int32_t> history() const;
  int64_t max_length() const;
  const Model& model() const { return *model_; }

  // How far back a generation may resume in caches that hold `held` positions of a sequence of
  // `max_length`: a sliding cache of capacity C < max_length and window W has overwritten the
  // keys position p needs once it held p + C - W + 2 positions (docs/design.md); full caches and
  // sliding caches of capacity max_length never do. The most positions of history that may be
  // dropped; INT64_MAX when there is no limit.
  static int64_t MaxRewind(const Plan& plan, int64_t max_length);

 private:
  friend class Model;
  Session(std::shared_ptr<Model> model, std::unique_ptr<SequenceState> sequence);
  // rt::Generate from the cached prefix `reuse`, resumed after each step that found too few free
  // KV blocks (an overcommitted pool) once Model::MakeRoomForKv made room: from what the caches
  // still hold, or from position 0 when this session's own blocks were given up.
  absl::StatusOr<GenerateResult> GenerateResuming(absl::Span<const int32_t> prompt,
                                                  const SoftTokens* soft,
                                                  const GenerateOptions& options, int64_t reuse);

  std::shared_ptr<Model> model_;
  std::unique_ptr<SequenceState> sequence_;
  // Guarded by the model's sessions_mutex_ while the session is idle (another session may evict
  // it then); the generating thread's while it runs.
  std::vector<int32_t> history_;
  bool history_has_soft_tokens_ = false;
  // While a generation without soft tokens runs: its prompt, and how many positions of it (and
  // of the tokens after it) the caches hold so far, for other sessions to share (Model::
  // SharePrefix). Guarded by the model's sessions_mutex_.
  std::vector<int32_t> lending_prompt_;
  int64_t lending_held_ = 0;
  std::atomic<bool> cancel_{false};
};

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SESSION_H_
