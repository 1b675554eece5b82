// The runtime's public API, top half: an Engine opens Models; a Model is one compiled model placed
// on a device (the image the module resolver chose, or the host reference), its memory estimated,
// its weights bound once, immutable afterwards and shared by its Sessions (session.h), which
// generate. spark-run and spark-serve are clients of this API and of session.h:
//
//   Engine engine(EngineOptions{...});
//   SPARK_ASSIGN_OR_RETURN(std::shared_ptr<Model> model, engine.OpenModel({"m.cubin", "ckpt/"}));
//   SPARK_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, model->NewSession());
//   SPARK_ASSIGN_OR_RETURN(GenerateResult result, session->Generate(prompt_ids, nullptr, options));
#ifndef SPARK_RUNTIME_ENGINE_H_
#define SPARK_RUNTIME_ENGINE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spark/runtime/artifact.h"
#include "spark/runtime/device.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/load_phases.h"
#include "spark/runtime/memory_estimator.h"
#include "spark/runtime/module_resolver.h"
#include "spark/runtime/plan.h"
#include "spark/runtime/step_profile.h"

namespace spark {
namespace rt {

class Checkpoint;
class Model;
class Session;
struct GenerateOptions;

// Where a model runs. kAuto: the first CUDA device when the driver loads, a device exists and the
// resolver finds an image for it; otherwise the host, with a notice saying why.
enum class DeviceMode { kAuto, kCuda, kHost };

// "auto", "cuda" or "host"; INVALID_ARGUMENT naming the choices otherwise.
absl::StatusOr<DeviceMode> ParseDeviceMode(absl::string_view text);

struct EngineOptions {
  DeviceMode device = DeviceMode::kAuto;
  // The module resolver's search path (module_resolver.h): --module-path entries, in order;
  // SPARK_MODULE_PATH; the install prefix (searched as <prefix>/lib/spark, empty: not searched).
  std::vector<std::string> module_path;
  std::string env_module_path;
  std::string install_prefix;
  double device_memory_utilization = 0.9;  // fraction of the memory pool a model may use
  bool use_graphs = true;                  // CUDA: replay decode steps as a CUDA graph
  // One-line notices: the fallback to the host, a PTX JIT, weights copied instead of mapped.
  std::function<void(absl::string_view)> on_notice;
  // Weight upload progress in bytes (discrete GPUs).
  std::function<void(uint64_t done, uint64_t total)> on_progress;
  // OpenModel's milestones, for a client to report them as they happen: the model is placed
  // (artifact(), image(), resolution(), device() are set; nothing else is), and its memory
  // estimate is made (called whether or not it fits).
  std::function<void(const Model& placed)> on_placed;
  std::function<void(const MemoryEstimate& estimate)> on_estimate;
};

// The most sessions ModelOptions::max_sessions = 0 opens a model for (the most decode tokens of
// one step whose attention still splits over the KV length: docs/plan-format.md).
inline constexpr int64_t kAutoSessions = 32;
// ModelOptions::kv_pool_sessions: as many full-length sessions as the memory estimate fits.
inline constexpr int64_t kKvPoolFit = -1;

// OK when a model compiled into `plan` has the ranks the caller expects (`expected`, from
// spark-run --tensor-parallel; 0: whatever it has); INVALID_ARGUMENT saying how to compile it
// otherwise.
absl::Status CheckTensorParallel(const Plan& plan, int64_t expected);

struct ModelOptions {
  std::string artifact;  // the compiled model named by the user (model.cubin)
  std::string weights;   // checkpoint directory or .safetensors file
  // Tokens per session (prompt and output); 0: min(4096, the model's max_position_embeddings).
  int64_t max_length = 0;
  // Sessions that may hold KV caches at once: the estimate counts this many (NewSession refuses
  // more); sessions generating at once share batched steps. 0: the most, up to kAutoSessions,
  // whose KV caches the memory estimate fits (1 when none does: the estimate then refuses it);
  // with kv_pool_sessions = kKvPoolFit, kAutoSessions.
  int64_t max_sessions = 1;
  // How many sessions' full-length KV caches the pool holds (Executor::ReserveSequences): 0, every
  // session's (the estimate refuses what does not fit); kKvPoolFit, the most, up to max_sessions,
  // that the memory estimate fits (at least 1); N in [1, max_sessions], N. With fewer than
  // max_sessions the pool is overcommitted: sessions take blocks as they grow, and a session whose
  // step finds none free takes those of the least recently used idle session (which forgets what
  // it held), or else gives up its own, waits for another generation to end and recomputes what
  // it had (Session::Generate): no request fails for want of blocks.
  int64_t kv_pool_sessions = 0;
  // Prefix sharing: a generation whose prompt starts with at least one KV block
  // (abi::kKvBlockRows tokens) more than its own session's caches hold, and that an idle session
  // holds, shares that session's blocks of it instead of prefilling it (Session::Generate).
  bool share_kv_prefixes = true;
  bool profile = false;  // time every step (RunProfile; CUDA launches without a graph)
  std::string dump_dir;  // when set: every step's outputs to DIR/runNNN.safetensors (must exist)
  // The ranks the caller expects the plan to have (spark-run --tensor-parallel N): refused when
  // the plan was compiled for another number (spark-compile --tensor-parallel). 0: the plan's.
  int64_t tensor_parallel = 0;
};

class Model : public std::enable_shared_from_this<Model> {
 public:
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const Artifact& artifact() const { return *artifact_; }  // the artifact named
  // The image running: the resolver's choice on CUDA, the named artifact on the host.
  const Artifact& image() const;
  const Plan& plan() const { return image().plan; }
  const ModelInfo& info() const { return plan().model; }
  bool on_cuda() const { return resolution_ != nullptr; }
  const DeviceInfo& device() const { return device_; }  // CUDA only
  const Resolution* resolution() const { return resolution_.get(); }  // null on the host
  const MemoryEstimate& estimate() const { return estimate_; }
  int64_t max_length() const { return max_length_; }
  int64_t max_sessions() const { return max_sessions_; }
  // Sessions whose full-length KV caches the pool holds (ModelOptions::kv_pool_sessions): below
  // max_sessions() when the pool is overcommitted.
  int64_t kv_pool_sessions() const { return kv_pool_sessions_; }
  // Sessions that gave up KV blocks so far (overcommitted pool): idle ones evicted, running ones
  // preempted (and recomputed); and generations that shared another session's blocks of their
  // prompt's prefix (ModelOptions::share_kv_prefixes), with the prompt tokens those held.
  // `awaited`: generations that waited for a running session's steps to cache the prefix they
  // share (requests arriving together), instead of prefilling it beside it.
  struct KvPoolStats {
    int64_t evicted = 0;
    int64_t preempted = 0;
    int64_t shared = 0;
    int64_t shared_tokens = 0;
    int64_t awaited = 0;
  };
  KvPoolStats kv_pool_stats() const;
  // ModelOptions::share_kv_prefixes.
  bool shares_kv_prefixes() const { return share_kv_prefixes_; }
  // Sessions in Generate now.
  int64_t generating_sessions() const;
  std::string executor_name() const;
  MemoryUsage memory_usage() const;
  const RunProfile* profile() const;  // with ModelOptions::profile
  // How the steps of sessions generating at once were merged (continuous batching).
  BatchingStats batching_stats() const;
  // What opening it took, phase by phase, in order (artifact, checkpoint, resolver, weights,
  // module load, KV cache pool, ...): the cold start before the first prefill.
  const std::vector<LoadPhase>& load_phases() const { return load_phases_; }

  // A session with empty KV caches of max_length() tokens. RESOURCE_EXHAUSTED when
  // max_sessions() sessions are alive, or the caches cannot be allocated.
  absl::StatusOr<std::unique_ptr<Session>> NewSession();

  // Images (a multimodal model compiled with its vision tower: Plan::image_encoder). Whether the
  // model takes images, and the most patches of one image (9 per soft token: spark-compile
  // --max-image-tokens) its encoder takes; 0 without one.
  bool takes_images() const { return image_encoder_ != nullptr; }
  // OK when the model takes images; else FAILED_PRECONDITION saying why and how to get an image
  // encoder.
  absl::Status CheckTakesImages() const;
  int64_t max_image_patches() const;
  // The soft tokens of one image, [patches / 9, hidden] f32, from its pixel patches and their
  // positions (image.h PreprocessImage; Executor::EncodeImage says what is checked). One image at
  // a time (callers from several threads wait their turn). FAILED_PRECONDITION for a model
  // without an image encoder, naming how to get one.
  absl::StatusOr<std::vector<float>> EncodeImage(absl::Span<const float> pixel_patches,
                                                 absl::Span<const int32_t> patch_positions) const;

 private:
  friend class Engine;
  friend class Session;
  Model() = default;
  // A session's life and generations, for the overcommitted pool (under sessions_mutex_).
  // Ending: `session` is no longer evictable (before it frees its caches); Ended: it is gone.
  void SessionEnding(Session& session);
  void SessionEnded();
  // Starting: `session` is running (no longer evictable): its history is its thread's.
  void GenerationStarts(Session& session);
  // Ended: `update` (the session's new history) runs under the lock, then `session` is idle,
  // evictable, the least recently used last.
  void GenerationEnds(Session& session, const std::function<void()>& update);
  // A step of running `session` found too few free KV blocks: drops the blocks of the least
  // recently used idle session holding any (which forgets its history) and returns false; when
  // none does, drops `session`'s own blocks, waits until another generation ends or gives up
  // blocks (or only waiting ones run, or `options` or the session is cancelled) and returns true:
  // `session`'s caches hold nothing now.
  absl::StatusOr<bool> MakeRoomForKv(Session& session, const GenerateOptions& options);
  // Prefix sharing for running `session`, whose own caches hold `own` tokens of `prompt`: the
  // session whose cached ids share the longest prefix with prompt[0 .. size - 2] lends its
  // blocks of that prefix (Executor::ShareKv: `session` gives up its own), when that is at least
  // own + abi::kKvBlockRows tokens, without soft tokens, and within what the lender's sliding
  // caches still hold (Session::MaxRewind). Lenders: idle sessions (their history) and running
  // ones (the part of their prompt their steps have written so far; a step that ended but was not
  // reported yet may have written max_tokens more positions, which the sliding-cache check
  // counts). Returns the prefix length (0: none shared, nothing changed).
  // When a running session's prompt shares a longer prefix that its steps have not cached yet
  // (requests that arrive together), `session` waits for them instead (while the pool holds
  // every session's caches, so that no step of the lender waits for blocks in turn): the lender
  // shares the prefix from Lent, between two of its own steps, when its caches hold exactly what
  // its steps wrote. Waiting ends early when the lender's generation ends (then the choice above
  // is made again), or on `cancel` / the session's Cancel.
  absl::StatusOr<int64_t> SharePrefix(Session& session, absl::Span<const int32_t> prompt,
                                      int64_t own, const std::atomic<bool>* cancel);
  // A running session's prompt (no soft tokens), `held` positions of it cached, and later how
  // many positions its steps have cached (Lent): what SharePrefix may lend from it.
  void StartLending(Session& session, absl::Span<const int32_t> prompt, int64_t held);
  void Lent(Session& session, int64_t held);

  std::unique_ptr<Artifact> artifact_;
  std::unique_ptr<Resolution> resolution_;
  DeviceInfo device_;
  std::unique_ptr<Checkpoint> checkpoint_;
  MemoryEstimate estimate_;
  std::vector<LoadPhase> load_phases_;
  int64_t max_length_ = 0;
  int64_t max_sessions_ = 1;
  // Runs one step at a time, merging the calls of sessions that generate from several threads
  // into batched steps (the runtime's BatchingExecutor).
  std::unique_ptr<Executor> executor_;
  // The image encoder's executor (its own weights and arena), and the lock of its one image at a
  // time.
  std::unique_ptr<Executor> image_encoder_;
  mutable std::mutex image_encoder_mutex_;
  std::function<BatchingStats()> batching_stats_;
  int64_t kv_pool_sessions_ = 1;
  bool share_kv_prefixes_ = true;
  mutable std::mutex sessions_mutex_;
  int64_t live_sessions_ = 0;
  std::condition_variable kv_changed_;
  std::list<Session*> idle_;  // idle sessions, least recently used first
  std::list<Session*> running_sessions_;  // sessions in Generate
  // A session waiting in SharePrefix for `lender`'s steps to cache their first `tokens` prompt
  // ids; Lent (or the lender's GenerationEnds) sets `shared` (0: not shared) or `status`.
  struct PrefixWait {
    Session* lender = nullptr;
    Session* waiter = nullptr;
    int64_t tokens = 0;
    int64_t shared = -1;
    absl::Status status;
  };
  std::list<PrefixWait*> prefix_waits_;
  std::condition_variable prefix_shared_;
  int64_t running_ = 0;       // sessions in Generate
  int64_t waiting_ = 0;       // of which waiting for KV blocks (MakeRoomForKv)
  uint64_t kv_epoch_ = 0;     // counts generations ended and blocks given up
  KvPoolStats kv_pool_stats_;
};

class Engine {
 public:
  explicit Engine(EngineOptions options) : options_(std::move(options)) {}

  // Loads the artifact, places it (DeviceMode; the resolver picks the image for the device),
  // checks the checkpoint against the plan (names, dtypes, shapes), estimates memory for
  // max_sessions sessions of max_length tokens and refuses (RESOURCE_EXHAUSTED, with the estimate
  // and advice) when it does not fit, then binds the weights. Every error names what to fix.
  absl::StatusOr<std::shared_ptr<Model>> OpenModel(const ModelOptions& options) const;

  const EngineOptions& options() const { return options_; }

 private:
  void Notice(absl::string_view text) const {
    if (options_.on_notice) options_.on_notice(text);
  }

  EngineOptions options_;
};

// The host as an estimator device: its memory is the pool (like an integrated GPU's).
absl::StatusOr<DeviceMemory> HostMemory();

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_ENGINE_H_
