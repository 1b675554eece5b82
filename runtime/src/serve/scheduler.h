// spark-serve's scheduler: requests (GenerationRequest) wait in a bounded queue and run in arrival
// order on the model's sessions, up to max_sessions() at once: one worker thread per session, and
// the sessions' steps merged into batched steps by the runtime (continuous batching over the
// paged KV cache, runtime/src/batching_executor.h). A request takes the free session whose KV
// cache holds the longest prefix of its prompt (the earlier turns of its chat), which it then does
// not prefill again. It knows sessions, not HTTP: the HTTP layer submits a request and reads its
// Job's events.
#ifndef SPARK_RUNTIME_SRC_SERVE_SCHEDULER_H_
#define SPARK_RUNTIME_SRC_SERVE_SCHEDULER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api_types.h"
#include "spark/runtime/engine.h"
#include "spark/runtime/generator.h"
#include "spark/runtime/session.h"
#include "spark/runtime/text_stream.h"
#include "spark/runtime/tokenizer.h"

namespace spark {
namespace serve {

// One request in flight. The worker pushes text pieces and finally the result; the client side
// (an HTTP handler) takes them. Cancel() (client gone, server stopping) ends it after the current
// step, or before it starts.
class Job {
 public:
  explicit Job(GenerationRequest request) : request_(std::move(request)) {}

  const GenerationRequest& request() const { return request_; }

  struct Piece {
    std::string text;
    rt::TextChannel channel = rt::TextChannel::kAnswer;
  };
  // What the generation produced, once it is over.
  struct Outcome {
    absl::Status status;  // OK, or why it failed (CANCELLED when cancelled before it ran)
    rt::GenerateResult result;
    std::string text, reasoning;
    std::vector<std::string> tool_calls;  // each call's text (TextStream::tool_calls)
  };

  // Client side: waits up to `timeout` for pieces; moves them to `pieces`. True once the job is
  // over and every piece has been taken.
  bool Wait(std::vector<Piece>* pieces, std::chrono::milliseconds timeout);
  // The outcome; only after Wait returned true.
  const Outcome& outcome() const { return outcome_; }
  void Cancel() { cancel_.store(true); }

  // Worker side.
  const std::atomic<bool>* cancel_flag() const { return &cancel_; }
  void Push(absl::string_view text, rt::TextChannel channel);
  void Finish(Outcome outcome);

  // Timing (for /metrics): when it was queued, and when its first token came.
  const std::chrono::steady_clock::time_point queued_at = std::chrono::steady_clock::now();

 private:
  GenerationRequest request_;
  std::atomic<bool> cancel_{false};
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Piece> pieces_;
  bool done_ = false;
  Outcome outcome_;
};

// Latency histogram in Prometheus' form: cumulative counts per upper bound (seconds), sum, count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void Observe(double seconds);
  // "# TYPE name histogram" and its lines.
  std::string Format(const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

struct SchedulerStats {
  int64_t queued = 0;              // waiting
  int64_t running = 0;             // generating now (at most the model's max_sessions)
  int64_t finished = 0;            // ended (any way) since start
  int64_t cancelled = 0;           // of which cancelled (client gone, shutdown)
  int64_t prompt_tokens = 0;       // of finished requests
  int64_t generated_tokens = 0;
  int64_t prefill_reused_tokens = 0;  // prompt tokens served from the KV cache
  int64_t cache_tokens = 0;        // positions the free sessions' KV caches hold now
  int64_t max_length = 0;          // per session
  int64_t sessions = 0;            // sessions (requests that may run at once)
};

class Scheduler {
 public:
  // `model` and `tokenizer` must outlive the scheduler. Makes model->max_sessions() sessions and
  // starts a worker for each.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(std::shared_ptr<rt::Model> model,
                                                           const rt::Tokenizer& tokenizer,
                                                           int64_t max_queue);
  ~Scheduler();

  // Queues `request`. UNAVAILABLE when the queue holds max_queue requests already, or after
  // Shutdown.
  absl::StatusOr<std::shared_ptr<Job>> Submit(GenerationRequest request);

  // Cancels the running requests and every queued one (they end with what they have), takes no
  // new ones, and stops the workers.
  void Shutdown();

  SchedulerStats stats() const;
  // The /metrics text of the scheduler's counters and histograms.
  std::string FormatMetrics() const;

 private:
  Scheduler(std::shared_ptr<rt::Model> model, const rt::Tokenizer& tokenizer, int64_t max_queue);
  void Work();
  void Run(Job& job, rt::Session& session);
  // The free session to run `prompt` on (removed from the free list): without prefix sharing,
  // the one whose history shares the longest prefix with it; with it (rt::ModelOptions::
  // share_kv_prefixes), one whose whole history the prompt continues (a conversation's next
  // turn, or an empty session), else the least recently used: the prompt's prefix is then
  // shared from whichever idle session holds it (Session::Generate), which keeps its own
  // conversation. Needs mutex_ and a free session.
  std::unique_ptr<rt::Session> TakeSession(const std::vector<int32_t>& prompt);

  std::shared_ptr<rt::Model> model_;
  const rt::Tokenizer& tokenizer_;
  const int64_t max_queue_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::unique_ptr<rt::Session>> free_sessions_;
  std::vector<std::shared_ptr<Job>> running_;
  bool stopping_ = false;
  SchedulerStats stats_;
  Histogram time_to_first_token_;
  Histogram inter_token_latency_;
  std::vector<std::thread> workers_;
};

}  // namespace serve
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_SERVE_SCHEDULER_H_
