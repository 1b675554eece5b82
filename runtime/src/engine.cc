#include "spark/runtime/engine.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "spark/runtime/artifact.h"
#include "spark/runtime/collectives.h"
#include "spark/runtime/cuda_executor.h"
#include "spark/runtime/device.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/generator.h"
#include "spark/runtime/host_executor.h"
#include "spark/runtime/memory_estimator.h"
#include "spark/runtime/module_resolver.h"
#include "spark/runtime/safetensors.h"
#include "spark/runtime/session.h"
#include "spark/runtime/status_macros.h"

#include "batching_executor.h"
#include "cuda/nccl.h"
#include "tensor_parallel_executor.h"

namespace spark {
namespace rt {
namespace {

absl::StatusOr<DeviceInfo> FirstDevice() {
  SPARK_ASSIGN_OR_RETURN(std::vector<DeviceInfo> devices, ListDevices());
  return devices.front();  // ListDevices fails rather than return no device
}

// A tensor-parallel plan on CUDA takes devices 0 .. ranks - 1 of this machine, all of one compute
// capability (the ranks share the image resolved for device 0).
absl::Status CheckRankDevices(const Plan& plan) {
  if (plan.ranks == 1) return absl::OkStatus();
  SPARK_ASSIGN_OR_RETURN(std::vector<DeviceInfo> devices, ListDevices());
  if (static_cast<int64_t>(devices.size()) < plan.ranks) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the model was compiled for ", plan.ranks, " ranks (spark-compile --tensor-parallel ",
        plan.ranks, "): it needs ", plan.ranks, " GPUs, one per rank, and this machine has ",
        devices.size(), "; run it on a machine with ", plan.ranks, " GPUs, compile it for ",
        devices.size() == 1 ? "one (no --tensor-parallel)" : "fewer ranks",
        ", or simulate the ranks on the host (--device host); docs/multi-gpu.md"));
  }
  for (int64_t r = 1; r < plan.ranks; ++r) {
    if (devices[r].cc_major != devices[0].cc_major || devices[r].cc_minor != devices[0].cc_minor) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", r, " would run on cuda:", r, " (", devices[r].name, ", cc ",
          devices[r].cc_major, ".", devices[r].cc_minor, "), rank 0 on cuda:0 (", devices[0].name,
          ", cc ", devices[0].cc_major, ".", devices[0].cc_minor,
          "): the ranks of one model share an image, so their GPUs must be of one kind"));
    }
  }
  return absl::OkStatus();
}

// The ranks of a tensor-parallel plan on CUDA devices 0 .. ranks - 1 (CheckRankDevices), one
// executor each, joined by NCCL communicators made for this process's devices.
absl::StatusOr<std::unique_ptr<Executor>> MakeCudaRanks(const Artifact& image,
                                                        const Checkpoint& checkpoint,
                                                        const Plan& run, bool graphs,
                                                        const EngineOptions& engine,
                                                        const LoadPhaseSink& on_phase) {
  SPARK_ASSIGN_OR_RETURN(std::vector<DeviceInfo> devices, ListDevices());
  std::vector<int> ordinals;
  for (int64_t r = 0; r < run.ranks; ++r) ordinals.push_back(devices[r].ordinal);
  SPARK_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<NcclCommunicator>> comms,
                         NcclCommunicator::ForLocalDevices(ordinals));
  std::vector<std::unique_ptr<Executor>> ranks;
  for (int64_t r = 0; r < run.ranks; ++r) {
    CudaExecutorOptions cuda;
    cuda.device = devices[r];
    cuda.use_graphs = graphs;
    cuda.on_notice = engine.on_notice;
    if (r == 0) {
      cuda.on_progress = engine.on_progress;
      cuda.on_phase = on_phase;  // (rank 0's; the others' take about as long, one after the other)
    }
    cuda.plan = &run;
    cuda.rank = r;
    cuda.nccl = comms[r];
    SPARK_ASSIGN_OR_RETURN(std::unique_ptr<Executor> rank,
                           CreateCudaExecutor(image, checkpoint, cuda));
    ranks.push_back(std::move(rank));
  }
  return std::unique_ptr<Executor>(new TensorParallelExecutor(
      std::move(ranks), [comms] { for (const auto& c : comms) c->Abort(); }, [] {}));
}

// The bytes of bound weights.
uint64_t WeightBytes(const std::vector<WeightData>& weights) {
  uint64_t bytes = 0;
  for (const WeightData& w : weights) bytes += w.num_bytes;
  return bytes;
}

}  // namespace

absl::Status CheckTensorParallel(const Plan& plan, int64_t expected) {
  if (expected == 0 || expected == plan.ranks) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--tensor-parallel ", expected, ": the model was compiled for ", plan.ranks,
      plan.ranks == 1 ? " rank (no tensor parallelism)" : " ranks",
      "; compile it with spark-compile --tensor-parallel ", expected,
      " (or leave --tensor-parallel out to run it as compiled)"));
}

absl::StatusOr<DeviceMode> ParseDeviceMode(absl::string_view text) {
  if (text == "auto") return DeviceMode::kAuto;
  if (text == "cuda") return DeviceMode::kCuda;
  if (text == "host") return DeviceMode::kHost;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --device '", text, "' (expected auto, cuda or host)"));
}

absl::StatusOr<DeviceMemory> HostMemory() {
  DeviceInfo host;
  host.name = "host";
  host.integrated = true;
  SPARK_ASSIGN_OR_RETURN(DeviceMemory memory, MeasureDeviceMemory(host));
  memory.source = "host memory (--device host)";
  return memory;
}

// ---- Model ----

Model::~Model() = default;

const Artifact& Model::image() const {
  return resolution_ != nullptr ? resolution_->artifact : *artifact_;
}

std::string Model::executor_name() const { return executor_->name(); }
MemoryUsage Model::memory_usage() const { return executor_->memory_usage(); }
const RunProfile* Model::profile() const { return executor_->profile(); }
BatchingStats Model::batching_stats() const { return batching_stats_(); }

absl::StatusOr<std::unique_ptr<Session>> Model::NewSession() {
  {
    std::lock_guard<std::mutex> lock(sessions_mutex_);
    if (live_sessions_ >= max_sessions_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "this model was opened for ", max_sessions_, max_sessions_ == 1 ? " session" : " sessions",
          " at once (the memory estimate counts that many KV caches), and ", live_sessions_,
          " are alive: end one, or open the model with more sessions"));
    }
    ++live_sessions_;
  }
  absl::StatusOr<std::unique_ptr<SequenceState>> sequence = executor_->NewSequence(max_length_);
  if (!sequence.ok()) {
    SessionEnded();
    return sequence.status();
  }
  // Sessions hold their model: a Model outlives every session of it.
  return std::unique_ptr<Session>(new Session(shared_from_this(), *std::move(sequence)));
}

void Model::SessionEnding(Session& session) {
  std::lock_guard<std::mutex> lock(sessions_mutex_);
  idle_.remove(&session);
}

void Model::SessionEnded() {
  std::lock_guard<std::mutex> lock(sessions_mutex_);
  --live_sessions_;
  ++kv_epoch_;  // its blocks are free
  kv_changed_.notify_all();
}

void Model::GenerationStarts(Session& session) {
  std::lock_guard<std::mutex> lock(sessions_mutex_);
  idle_.remove(&session);
  running_sessions_.push_back(&session);
  ++running_;
}

void Model::GenerationEnds(Session& session, const std::function<void()>& update) {
  std::lock_guard<std::mutex> lock(sessions_mutex_);
  update();
  session.lending_prompt_.clear();
  session.lending_held_ = 0;
  // Those waiting for this generation's steps choose again (its caches are idle now).
  bool ended_waits = false;
  for (PrefixWait* wait : prefix_waits_) {
    if (wait->lender != &session || wait->shared >= 0) continue;
    wait->shared = 0;
    ended_waits = true;
  }
  if (ended_waits) prefix_shared_.notify_all();
  running_sessions_.remove(&session);
  --running_;
  idle_.push_back(&session);
  ++kv_epoch_;
  kv_changed_.notify_all();
}

absl::StatusOr<bool> Model::MakeRoomForKv(Session& session, const GenerateOptions& options) {
  std::unique_lock<std::mutex> lock(sessions_mutex_);
  // The least recently used idle session that holds blocks gives them up.
  while (!idle_.empty()) {
    Session* idle = idle_.front();
    idle_.pop_front();  // back when its next generation ends
    SPARK_ASSIGN_OR_RETURN(const int64_t dropped, executor_->DropKv(*idle->sequence_));
    idle->history_.clear();
    idle->history_has_soft_tokens_ = false;
    if (dropped > 0) {
      ++kv_pool_stats_.evicted;
      return false;
    }
  }
  // None: this session gives up its own and waits for a generation to end or give up blocks.
  SPARK_ASSIGN_OR_RETURN(const int64_t dropped, executor_->DropKv(*session.sequence_));
  session.lending_held_ = 0;  // nothing to lend until it has recomputed
  if (dropped > 0) {
    ++kv_pool_stats_.preempted;
    ++kv_epoch_;
    kv_changed_.notify_all();
  }
  const uint64_t seen = kv_epoch_;
  const auto cancelled = [&] {
    return (options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed)) ||
           (options.session_cancel != nullptr &&
            options.session_cancel->load(std::memory_order_relaxed));
  };
  ++waiting_;
  // (Cancel flags are set without a notification: look at them every 50 ms.)
  while (!(kv_epoch_ != seen || !idle_.empty() || running_ == waiting_ || cancelled())) {
    kv_changed_.wait_for(lock, std::chrono::milliseconds(50));
  }
  --waiting_;
  return true;
}

absl::StatusOr<int64_t> Model::SharePrefix(Session& session, absl::Span<const int32_t> prompt,
                                           int64_t own, const std::atomic<bool>* cancel) {
  if (!share_kv_prefixes_ || prompt.size() < 2) return 0;
  std::unique_lock<std::mutex> lock(sessions_mutex_);
  const int64_t rewind = Session::MaxRewind(plan(), max_length_);
  const size_t limit = prompt.size() - 1;  // the last prompt token is prefilled for its logits
  const auto common_prefix = [&](absl::Span<const int32_t> ids, int64_t held) {
    const size_t end = std::min({static_cast<size_t>(held), ids.size(), limit});
    size_t common = 0;
    while (common < end && ids[common] == prompt[common]) ++common;
    return static_cast<int64_t>(common);
  };
  Session* lender = nullptr;
  int64_t longest = 0;
  bool waited = false;
  for (;;) {
    lender = nullptr;
    longest = own + abi::kKvBlockRows - 1;
    // ids[0 .. held) are cached; `written` positions may have been (the sliding caches' check).
    const auto consider = [&](Session* candidate, absl::Span<const int32_t> ids, int64_t held,
                              int64_t written) {
      const int64_t n = common_prefix(ids, held);
      // Past `rewind` positions after the prefix, its sliding caches overwrote what comes next
      // needs.
      if (n <= longest || written - n > rewind) return;
      lender = candidate;
      longest = n;
    };
    for (Session* idle : idle_) {
      if (idle == &session || idle->history_has_soft_tokens_) continue;
      const int64_t held = static_cast<int64_t>(idle->history_.size());
      consider(idle, idle->history_, held, held);
    }
    for (Session* running : running_sessions_) {
      if (running == &session || running->lending_held_ <= 0) continue;
      consider(running, running->lending_prompt_, running->lending_held_,
               running->lending_held_ + plan().max_tokens);
    }
    // Requests that arrive together: a running session whose steps have not yet cached the
    // longer prefix its prompt shares. Wait for them (Lent shares it) rather than prefill it a
    // second time beside them; only while the pool holds every session's caches.
    PrefixWait wait;
    wait.waiter = &session;
    wait.tokens = longest;
    if (!waited && kv_pool_sessions_ >= max_sessions_) {
      for (Session* running : running_sessions_) {
        if (running == &session || running->lending_prompt_.empty()) continue;
        const int64_t n = common_prefix(running->lending_prompt_, limit);
        if (n > wait.tokens && running->lending_held_ < n) {
          wait.lender = running;
          wait.tokens = n;
        }
      }
    }
    if (wait.lender == nullptr) break;
    waited = true;
    ++kv_pool_stats_.awaited;
    prefix_waits_.push_back(&wait);
    const auto cancelled = [&] {
      return (cancel != nullptr && cancel->load(std::memory_order_relaxed)) ||
             session.cancel_.load(std::memory_order_relaxed);
    };
    // (Cancel flags are set without a notification: look at them every 50 ms.)
    while (wait.shared < 0 && wait.status.ok() && !cancelled()) {
      prefix_shared_.wait_for(lock, std::chrono::milliseconds(50));
    }
    prefix_waits_.remove(&wait);
    SPARK_RETURN_IF_ERROR(wait.status);
    if (wait.shared > 0 || cancelled()) return std::max<int64_t>(wait.shared, 0);
    // The lender's generation ended first: choose again among what the caches hold now.
  }
  if (lender == nullptr) return 0;
  SPARK_RETURN_IF_ERROR(executor_->ShareKv(*lender->sequence_, *session.sequence_, longest));
  ++kv_pool_stats_.shared;
  kv_pool_stats_.shared_tokens += longest;
  return longest;
}

void Model::StartLending(Session& session, absl::Span<const int32_t> prompt, int64_t held) {
  std::lock_guard<std::mutex> lock(sessions_mutex_);
  session.lending_prompt_.assign(prompt.begin(), prompt.end());
  session.lending_held_ = held;
}

void Model::Lent(Session& session, int64_t held) {
  std::lock_guard<std::mutex> lock(sessions_mutex_);
  if (session.lending_prompt_.empty()) return;
  session.lending_held_ = held;
  // Sessions waiting for this one's steps to cache their prefix (SharePrefix): between two of its
  // steps its caches hold exactly `held` positions, so its sliding rings have moved held - tokens
  // positions past the prefix (at most one step's chunk, within what they keep).
  const int64_t rewind = Session::MaxRewind(plan(), max_length_);
  bool served = false;
  for (PrefixWait* wait : prefix_waits_) {
    if (wait->lender != &session || wait->shared >= 0 || held < wait->tokens) continue;
    served = true;
    if (held - wait->tokens > rewind) {
      wait->shared = 0;
      continue;
    }
    wait->status = executor_->ShareKv(*session.sequence_, *wait->waiter->sequence_, wait->tokens);
    if (!wait->status.ok()) continue;
    wait->shared = wait->tokens;
    ++kv_pool_stats_.shared;
    kv_pool_stats_.shared_tokens += wait->tokens;
  }
  if (served) prefix_shared_.notify_all();
}

int64_t Model::generating_sessions() const {
  std::lock_guard<std::mutex> lock(sessions_mutex_);
  return running_;
}

Model::KvPoolStats Model::kv_pool_stats() const {
  std::lock_guard<std::mutex> lock(sessions_mutex_);
  return kv_pool_stats_;
}

int64_t Model::max_image_patches() const {
  return plan().image_encoder ? plan().image_encoder->max_tokens : 0;
}

absl::Status Model::CheckTakesImages() const {
  if (image_encoder_ != nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      artifact_->path, " has no image encoder, so the model takes no images: it was imported "
      "without a vision tower (a config without vision_config, a checkpoint without "
      "model.vision_tower.* tensors, or spark-import --no-vision); import a multimodal "
      "checkpoint with its vision tower and compile it again"));
}

absl::StatusOr<std::vector<float>> Model::EncodeImage(
    absl::Span<const float> pixel_patches, absl::Span<const int32_t> patch_positions) const {
  SPARK_RETURN_IF_ERROR(CheckTakesImages());
  std::lock_guard<std::mutex> lock(image_encoder_mutex_);
  return image_encoder_->EncodeImage(pixel_patches, patch_positions);
}

// ---- Engine ----

absl::StatusOr<std::shared_ptr<Model>> Engine::OpenModel(const ModelOptions& options) const {
  if (options.max_sessions < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_sessions must be at least 1 (or 0: as many as fit), got ",
                     options.max_sessions));
  }
  const int64_t sessions_at_most = options.max_sessions > 0 ? options.max_sessions : kAutoSessions;
  if (options.kv_pool_sessions < kKvPoolFit || options.kv_pool_sessions > sessions_at_most) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the KV cache pool's full-length sessions must be 0 (every session's), ", kKvPoolFit,
        " (as many as fit) or in [1, ", sessions_at_most, "] (the sessions), got ",
        options.kv_pool_sessions));
  }
  // Checked here, not only when resolving: DeviceMode::kAuto falls back to the host on a
  // resolution error, which would turn this mistake into a notice.
  SPARK_RETURN_IF_ERROR(CheckModulePath(options_.module_path));
  std::shared_ptr<Model> model(new Model());
  const LoadPhaseSink record = [phases = &model->load_phases_](const LoadPhase& phase) {
    phases->push_back(phase);
  };
  LoadClock clock(record);
  SPARK_ASSIGN_OR_RETURN(Artifact artifact, LoadArtifact(options.artifact));
  model->artifact_ = std::make_unique<Artifact>(std::move(artifact));
  SPARK_ASSIGN_OR_RETURN(model->max_length_,
                         ResolveMaxLength(model->artifact_->plan.model, options.max_length));
  model->max_sessions_ = options.max_sessions;
  SPARK_RETURN_IF_ERROR(CheckTensorParallel(model->artifact_->plan, options.tensor_parallel));
  clock.Lap("artifact (read, plan checks)", model->artifact_->image.size());
  SPARK_ASSIGN_OR_RETURN(model->checkpoint_, Checkpoint::Open(options.weights));
  clock.Lap("checkpoint (map, headers)");

  // Placement: the GPU and the image the resolver picks for it, or the host.
  if (options_.device != DeviceMode::kHost) {
    absl::Status gpu = [&]() -> absl::Status {
      SPARK_ASSIGN_OR_RETURN(DeviceInfo device, FirstDevice());
      SPARK_RETURN_IF_ERROR(CheckRankDevices(model->artifact_->plan));
      ResolveRequest request;
      request.artifact_path = options.artifact;
      request.cc_major = device.cc_major;
      request.cc_minor = device.cc_minor;
      request.module_path = options_.module_path;
      request.env_module_path = options_.env_module_path;
      request.install_prefix = options_.install_prefix;
      SPARK_ASSIGN_OR_RETURN(Resolution resolution, ResolveModule(request));
      model->device_ = device;
      model->resolution_ = std::make_unique<Resolution>(std::move(resolution));
      return absl::OkStatus();
    }();
    if (!gpu.ok()) {
      if (options_.device == DeviceMode::kCuda) return gpu;
      Notice(absl::StrCat("running on the host: ", gpu.ToString()));
    }
    clock.Lap("device and module resolver");
  }
  const Plan& plan = model->plan();
  SPARK_RETURN_IF_ERROR(CheckPlanWeights(plan, *model->checkpoint_));
  if (plan.image_encoder) {
    SPARK_RETURN_IF_ERROR(CheckPlanWeights(*plan.image_encoder, *model->checkpoint_));
  }
  clock.Lap("weight checks");
  if (options_.on_placed) options_.on_placed(*model);

  // Memory: the estimate for max_sessions sequences of max_length tokens, refused when it does
  // not fit.
  SPARK_ASSIGN_OR_RETURN(const DeviceMemory memory, model->on_cuda()
                                                         ? MeasureDeviceMemory(model->device_)
                                                         : HostMemory());
  EstimateOptions estimate_options;
  estimate_options.max_length = model->max_length_;
  estimate_options.batch = options.max_sessions;
  estimate_options.utilization = options_.device_memory_utilization;
  // The host runs every rank of a tensor-parallel plan in this process: they share its memory.
  estimate_options.ranks_sharing_pool = model->on_cuda() ? 1 : plan.ranks;
  if (options.max_sessions == 0 && options.kv_pool_sessions == 0) {
    SPARK_ASSIGN_OR_RETURN(const int64_t fitting,
                           MaxFittingBatch(SizesFromPlan(plan), memory, estimate_options,
                                           kAutoSessions));
    model->max_sessions_ = estimate_options.batch = std::max<int64_t>(1, fitting);
    Notice(absl::StrCat("sessions: ", model->max_sessions_, " of ", model->max_length_,
                        " tokens (the most, up to ", kAutoSessions,
                        ", whose KV caches the memory estimate fits)"));
  } else if (options.max_sessions == 0) {
    model->max_sessions_ = kAutoSessions;
  }
  // The pool: every session's full-length caches, or fewer (overcommitted; the sliding caches'
  // rings are there for every session).
  estimate_options.sessions = model->max_sessions_;
  model->kv_pool_sessions_ = model->max_sessions_;
  if (options.kv_pool_sessions == kKvPoolFit) {
    SPARK_ASSIGN_OR_RETURN(const int64_t fitting,
                           MaxFittingBatch(SizesFromPlan(plan), memory, estimate_options,
                                           model->max_sessions_));
    model->kv_pool_sessions_ = std::max<int64_t>(1, fitting);
  } else if (options.kv_pool_sessions > 0) {
    model->kv_pool_sessions_ = options.kv_pool_sessions;
  }
  model->share_kv_prefixes_ = options.share_kv_prefixes;
  estimate_options.batch = model->kv_pool_sessions_;
  if (model->kv_pool_sessions_ < model->max_sessions_ || options.kv_pool_sessions == kKvPoolFit) {
    Notice(absl::StrCat(
        "sessions: ", model->max_sessions_, " of ", model->max_length_, " tokens, sharing a KV "
        "cache pool that holds ", model->kv_pool_sessions_, " at full length",
        options.kv_pool_sessions == kKvPoolFit
            ? absl::StrCat(" (the most, up to ", model->max_sessions_,
                           ", the memory estimate fits)")
            : "",
        model->kv_pool_sessions_ < model->max_sessions_
            ? ": a generation that finds no free block takes an idle session's, or waits and is "
              "recomputed"
            : ""));
  }
  SPARK_ASSIGN_OR_RETURN(model->estimate_, Estimate(SizesFromPlan(plan), memory, estimate_options));
  if (options_.on_estimate) options_.on_estimate(model->estimate_);
  SPARK_RETURN_IF_ERROR(CheckFits(model->estimate_));
  clock.Lap("memory estimate");

  // The executors, weights bound: one of the text plan, and one of its image encoder (a plan and
  // weights of its own, its kernels in the same image) when the model takes images, both on the
  // model's device.
  // Each reports its phases (the CUDA executor its own: context, module load, weights), named
  // after `part`.
  const auto make_executor = [&](const Plan& run, bool graphs, absl::string_view part)
      -> absl::StatusOr<std::unique_ptr<Executor>> {
    const LoadPhaseSink on_phase = [&record, part](LoadPhase phase) {
      phase.name = absl::StrCat(part, phase.name);
      record(phase);
    };
    LoadClock host_clock(on_phase);
    if (model->on_cuda() && run.ranks > 1) {
      return MakeCudaRanks(model->image(), *model->checkpoint_, run, graphs, options_, on_phase);
    }
    if (model->on_cuda()) {
      CudaExecutorOptions cuda;
      cuda.device = model->device_;
      cuda.use_graphs = graphs;
      cuda.on_notice = options_.on_notice;
      cuda.on_progress = options_.on_progress;
      cuda.on_phase = on_phase;
      cuda.plan = &run;
      return CreateCudaExecutor(model->image(), *model->checkpoint_, cuda);
    }
    if (run.ranks == 1) {
      SPARK_ASSIGN_OR_RETURN(std::vector<WeightData> weights,
                             BindWeights(run, *model->checkpoint_));
      host_clock.Lap("weights (in place)", WeightBytes(weights));
      return CreateHostExecutor(run, std::move(weights));
    }
    // A tensor-parallel plan: every rank a host executor of its weight slices, in this process.
    std::vector<std::unique_ptr<Communicator>> communicators =
        MakeInProcessCommunicators(static_cast<int>(run.ranks));
    std::vector<Communicator*> group;
    std::vector<std::unique_ptr<Executor>> ranks;
    for (int64_t r = 0; r < run.ranks; ++r) {
      group.push_back(communicators[r].get());
      SPARK_ASSIGN_OR_RETURN(std::vector<WeightData> weights,
                             BindWeights(run, *model->checkpoint_, r));
      SPARK_ASSIGN_OR_RETURN(std::unique_ptr<Executor> rank,
                             CreateHostExecutor(run, std::move(weights), {},
                                                std::move(communicators[r])));
      ranks.push_back(std::move(rank));
    }
    host_clock.Lap("weights (in place, every rank)");
    return std::unique_ptr<Executor>(new TensorParallelExecutor(
        std::move(ranks), [group] { for (Communicator* c : group) c->Abort(); },
        [group] { for (Communicator* c : group) c->Reset(); }));
  };
  SPARK_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor,
                         make_executor(plan, options_.use_graphs, ""));
  if (plan.image_encoder) {
    SPARK_ASSIGN_OR_RETURN(model->image_encoder_,
                           make_executor(*plan.image_encoder, /*graphs=*/false, "image encoder: "));
  }
  clock.Restart();
  if (options.profile) executor->set_profile(std::make_unique<RunProfile>(plan));
  if (!options.dump_dir.empty()) executor = WithStepDump(std::move(executor), options.dump_dir);
  // The KV cache pool the estimate counted: max_sessions sequences of max_length tokens, the full
  // caches for kv_pool_sessions of them.
  SPARK_RETURN_IF_ERROR(executor->ReserveSequences(model->max_length_, model->max_sessions_,
                                                   model->kv_pool_sessions_));
  clock.Lap("KV cache pool");
  // Sessions generating from several threads share its steps (continuous batching).
  auto batching = std::make_unique<BatchingExecutor>(std::move(executor), plan.max_tokens);
  BatchingExecutor* stats = batching.get();
  model->batching_stats_ = [stats] { return stats->stats(); };
  model->executor_ = std::move(batching);
  return model;
}

}  // namespace rt
}  // namespace spark
