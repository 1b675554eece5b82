#include "scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spark/runtime/image_prompt.h"

namespace spark {
namespace serve {

bool Job::Wait(std::vector<Piece>* pieces, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return done_ || !pieces_.empty(); });
  for (Piece& piece : pieces_) pieces->push_back(std::move(piece));
  pieces_.clear();
  return done_;
}

void Job::Push(absl::string_view text, rt::TextChannel channel) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pieces_.push_back({std::string(text), channel});
  }
  changed_.notify_all();
}

void Job::Finish(Outcome outcome) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    outcome_ = std::move(outcome);
    done_ = true;
  }
  changed_.notify_all();
}

void Histogram::Observe(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t bucket =
      std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin();
  ++counts_[bucket];
  sum_ += seconds;
  ++count_;
}

std::string Histogram::Format(const std::string& name, const std::string& help) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out = absl::StrCat("# HELP ", name, " ", help, "\n# TYPE ", name, " histogram\n");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    absl::StrAppend(&out, name, "_bucket{le=\"", absl::StrFormat("%g", bounds_[i]), "\"} ",
                    cumulative, "\n");
  }
  absl::StrAppend(&out, name, "_bucket{le=\"+Inf\"} ", count_, "\n", name, "_sum ",
                  absl::StrFormat("%.6f", sum_), "\n", name, "_count ", count_, "\n");
  return out;
}

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(std::shared_ptr<rt::Model> model,
                                                             const rt::Tokenizer& tokenizer,
                                                             int64_t max_queue) {
  std::unique_ptr<Scheduler> scheduler(new Scheduler(std::move(model), tokenizer, max_queue));
  const int64_t sessions = std::max<int64_t>(1, scheduler->model_->max_sessions());
  for (int64_t i = 0; i < sessions; ++i) {
    absl::StatusOr<std::unique_ptr<rt::Session>> session = scheduler->model_->NewSession();
    if (!session.ok()) return session.status();
    scheduler->free_sessions_.push_back(*std::move(session));
  }
  scheduler->stats_.max_length = scheduler->model_->max_length();
  scheduler->stats_.sessions = sessions;
  for (int64_t i = 0; i < sessions; ++i) {
    scheduler->workers_.emplace_back([s = scheduler.get()] { s->Work(); });
  }
  return scheduler;
}

Scheduler::Scheduler(std::shared_ptr<rt::Model> model, const rt::Tokenizer& tokenizer,
                     int64_t max_queue)
    : model_(std::move(model)),
      tokenizer_(tokenizer),
      max_queue_(max_queue),
      time_to_first_token_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      inter_token_latency_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}) {}

Scheduler::~Scheduler() {
  Shutdown();
  for (std::thread& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
}

absl::StatusOr<std::shared_ptr<Job>> Scheduler::Submit(GenerationRequest request) {
  auto job = std::make_shared<Job>(std::move(request));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return absl::UnavailableError("the server is shutting down");
    if (static_cast<int64_t>(queue_.size()) >= max_queue_) {
      return absl::UnavailableError(absl::StrCat(
          "the server is busy: ", queue_.size(), " requests are waiting (--max-queue ", max_queue_,
          "); retry later"));
    }
    queue_.push_back(job);
    ++stats_.queued;
  }
  wake_.notify_all();
  return job;
}

void Scheduler::Shutdown() {
  std::deque<std::shared_ptr<Job>> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    for (const std::shared_ptr<Job>& job : running_) job->Cancel();
    dropped.swap(queue_);
    stats_.queued = 0;
    stats_.finished += static_cast<int64_t>(dropped.size());
    stats_.cancelled += static_cast<int64_t>(dropped.size());
  }
  for (const std::shared_ptr<Job>& job : dropped) {
    Job::Outcome outcome;
    outcome.status = absl::UnavailableError("the server is shutting down");
    job->Finish(std::move(outcome));
  }
  wake_.notify_all();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::unique_ptr<rt::Session> Scheduler::TakeSession(const std::vector<int32_t>& prompt) {
  const bool sharing = model_->shares_kv_prefixes();
  // Without sharing: the longest common prefix. With it: a session whose whole history the
  // prompt continues (its conversation's next turn; the longest), else an empty one, else the
  // least recently used (free_sessions_ holds them in the order they were freed).
  size_t best = 0, best_common = 0;
  bool best_whole = false;
  for (size_t i = 0; i < free_sessions_.size(); ++i) {
    const std::vector<int32_t> history = free_sessions_[i]->history();
    const size_t n = std::min(history.size(), prompt.size());
    size_t common = 0;
    while (common < n && history[common] == prompt[common]) ++common;
    const bool whole = common == history.size();  // taking it overwrites nothing
    const bool better = sharing ? whole && (!best_whole || common > best_common)
                                : common > best_common;
    if (better) best = i, best_common = common, best_whole = whole;
  }
  std::unique_ptr<rt::Session> session = std::move(free_sessions_[best]);
  free_sessions_.erase(free_sessions_.begin() + static_cast<std::ptrdiff_t>(best));
  return session;
}

void Scheduler::Work() {
  while (true) {
    std::shared_ptr<Job> job;
    std::unique_ptr<rt::Session> session;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // One worker per session: a free session exists whenever this worker waits.
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;  // Shutdown finished the queued jobs
      job = queue_.front();
      queue_.pop_front();
      --stats_.queued;
      session = TakeSession(job->request().prompt);
      running_.push_back(job);
      stats_.running = static_cast<int64_t>(running_.size());
    }
    Run(*job, *session);
    std::lock_guard<std::mutex> lock(mutex_);
    running_.erase(std::find(running_.begin(), running_.end(), job));
    stats_.running = static_cast<int64_t>(running_.size());
    free_sessions_.push_back(std::move(session));
    stats_.cache_tokens = 0;
    for (const std::unique_ptr<rt::Session>& free : free_sessions_) {
      stats_.cache_tokens += static_cast<int64_t>(free->history().size());
    }
  }
}

void Scheduler::Run(Job& job, rt::Session& session) {
  const GenerationRequest& request = job.request();
  Job::Outcome outcome;
  if (job.cancel_flag()->load()) {
    outcome.status = absl::CancelledError("cancelled before it ran");
  } else {
    std::vector<int32_t> stop_ids = request.generate.stop_token_ids;
    const rt::ModelInfo& info = model_->info();
    stop_ids.insert(stop_ids.end(), info.eos_token_ids.begin(), info.eos_token_ids.end());
    rt::TextStream stream(tokenizer_, request.stop_strings, std::move(stop_ids),
                          [&job](absl::string_view text, rt::TextChannel channel) {
                            job.Push(text, channel);
                          });
    rt::GenerateOptions options = request.generate;
    options.cancel = job.cancel_flag();
    using Clock = std::chrono::steady_clock;
    Clock::time_point last = Clock::now();
    bool first = true;
    options.on_token = [&](int32_t id) {
      const Clock::time_point now = Clock::now();
      if (first) {
        time_to_first_token_.Observe(std::chrono::duration<double>(now - job.queued_at).count());
        first = false;
      } else {
        inter_token_latency_.Observe(std::chrono::duration<double>(now - last).count());
      }
      last = now;
      return stream.OnToken(id);
    };
    // The request's images: encoded by the vision tower now (one image at a time across the
    // server's requests: Model::EncodeImage), their soft tokens merged into the prompt.
    rt::SoftTokens soft;
    absl::Status images = absl::OkStatus();
    if (!request.images.empty()) {
      absl::StatusOr<rt::SoftTokens> encoded =
          rt::EncodeImagesAt(*model_, request.images, request.image_positions);
      if (encoded.ok()) {
        soft = *std::move(encoded);
      } else {
        images = encoded.status();
      }
    }
    absl::StatusOr<rt::GenerateResult> result =
        images.ok() ? session.Generate(request.prompt, request.images.empty() ? nullptr : &soft,
                                       options)
                    : absl::StatusOr<rt::GenerateResult>(images);
    stream.Finish();
    if (!result.ok()) {
      outcome.status = result.status();
    } else if (!stream.error().ok()) {
      outcome.status = stream.error();
    } else {
      outcome.result = *std::move(result);
    }
    outcome.text = stream.text();
    outcome.reasoning = stream.thinking();
    outcome.tool_calls = stream.tool_calls();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.finished;
    if (!outcome.status.ok() || outcome.result.cancelled) ++stats_.cancelled;
    if (outcome.status.ok()) {
      stats_.prompt_tokens += static_cast<int64_t>(request.prompt.size());
      stats_.generated_tokens += static_cast<int64_t>(outcome.result.tokens.size());
      stats_.prefill_reused_tokens += outcome.result.reused_tokens;
    }
  }
  job.Finish(std::move(outcome));
}

std::string Scheduler::FormatMetrics() const {
  const SchedulerStats s = stats();
  std::string out;
  const auto metric = [&](const char* name, const char* type, const char* help, int64_t value) {
    absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name, " ",
                    value, "\n");
  };
  metric("spark_queue_depth", "gauge", "Requests waiting to run.", s.queued);
  metric("spark_requests_running", "gauge", "Requests generating now.", s.running);
  metric("spark_requests_finished_total", "counter", "Generations ended, any way.", s.finished);
  metric("spark_requests_cancelled_total", "counter",
         "Generations cancelled (client gone, server stopping).", s.cancelled);
  metric("spark_prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
         s.prompt_tokens);
  metric("spark_generation_tokens_total", "counter", "Tokens generated.", s.generated_tokens);
  metric("spark_prefix_cache_hit_tokens_total", "counter",
         "Prompt tokens served from the KV cache instead of prefilled.", s.prefill_reused_tokens);
  const rt::Model::KvPoolStats pool = model_->kv_pool_stats();
  metric("spark_prefix_cache_shared_tokens_total", "counter",
         "Of the hits, prompt tokens read from another session's KV blocks (prefix sharing).",
         pool.shared_tokens);
  metric("spark_prefix_cache_awaited_total", "counter",
         "Requests that waited for a running request to prefill the prompt prefix they share "
         "(arriving together) instead of prefilling it beside it.",
         pool.awaited);
  absl::StrAppend(&out,
                  "# HELP spark_prefix_cache_hit_ratio Prompt tokens served from the KV cache over "
                  "all prompt tokens of finished requests.\n# TYPE spark_prefix_cache_hit_ratio "
                  "gauge\nspark_prefix_cache_hit_ratio ",
                  s.prompt_tokens > 0 ? static_cast<double>(s.prefill_reused_tokens) /
                                            static_cast<double>(s.prompt_tokens)
                                      : 0.0,
                  "\n");
  metric("spark_kv_cache_tokens", "gauge", "Positions the free sessions' KV caches hold.",
         s.cache_tokens);
  metric("spark_kv_cache_capacity_tokens", "gauge", "Positions one session's KV cache can hold.",
         s.max_length);
  metric("spark_sessions", "gauge", "Sessions: requests that may generate at once.", s.sessions);
  metric("spark_kv_pool_full_length_sessions", "gauge",
         "Sessions the KV cache pool holds at full length (fewer than spark_sessions: "
         "overcommitted).",
         model_->kv_pool_sessions());
  metric("spark_kv_pool_evictions_total", "counter",
         "Idle sessions whose KV caches another request took (overcommitted pool).", pool.evicted);
  metric("spark_kv_pool_preemptions_total", "counter",
         "Requests that gave up their KV blocks, waited and were recomputed (overcommitted pool).",
         pool.preempted);
  out += time_to_first_token_.Format("spark_time_to_first_token_seconds",
                                     "From arrival to the first generated token.");
  out += inter_token_latency_.Format("spark_inter_token_latency_seconds",
                                     "Between consecutive generated tokens of a request.");
  return out;
}

}  // namespace serve
}  // namespace spark
