#include "spark/runtime/cuda_executor.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
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
#include "cuda/cuda_driver.h"
#include "cuda/dynamic_shared_memory.h"
#include "cuda/nccl.h"
#include "cuda/weight_upload.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/artifact.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/load_phases.h"
#include "spark/runtime/memory_estimator.h"
#include "spark/runtime/plan.h"
#include "spark/runtime/safetensors.h"
#include "spark/runtime/status_macros.h"
#include "kv_block_pool.h"
#include "step_args.h"

namespace spark {
namespace rt {
namespace {

// Device allocations that hold several parts (weights, KV caches) align each part to this.
constexpr uint64_t kPartAlignment = 256;
constexpr size_t kJitLogBytes = 16 * 1024;

uint64_t AlignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// `status` with `context` prepended to its message.
absl::Status WithContext(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

class CudaExecutor final : public Executor {
 public:
  CudaExecutor(const DriverApi* api, const Artifact& artifact, const Checkpoint& checkpoint,
               const CudaExecutorOptions& options)
      : api_(api),
        artifact_(artifact),
        plan_(options.plan != nullptr ? *options.plan : artifact.plan),
        checkpoint_(checkpoint),
        options_(options) {}
  ~CudaExecutor() override;

  // Context, stream, module, kernels, weights.
  absl::Status Init();

  absl::Status ReserveSequences(int64_t max_length, int64_t sequences,
                                int64_t full_length_sequences) override;
  absl::StatusOr<int64_t> DropKv(SequenceState& sequence) override;
  absl::Status ShareKv(SequenceState& from, SequenceState& to, int64_t tokens) override;
  absl::StatusOr<std::unique_ptr<SequenceState>> NewSequence(int64_t max_length) override;
  absl::Status RunBatch(absl::Span<const SequenceStep> parts,
                        std::vector<StepResult>* results) override;
  absl::Status CopyToMemory(SequenceState& sequence, const MemoryRegion& region,
                            absl::Span<const uint8_t> bytes) override;
  absl::Status CopyFromMemory(SequenceState& sequence, const MemoryRegion& region,
                              absl::Span<uint8_t> bytes) override;
  absl::StatusOr<std::vector<float>> EncodeImage(
      absl::Span<const float> pixel_patches, absl::Span<const int32_t> patch_positions) override;
  absl::Status RunProgram(SequenceState& sequence, int32_t num_tokens,
                          int32_t num_soft_tokens) override;
  std::string name() const override {
    return absl::StrCat("cuda:", options_.device.ordinal, " (", options_.device.name, ")");
  }
  MemoryUsage memory_usage() const override { return usage_; }

 private:
  absl::Status LoadModule();
  absl::Status LoadFunctions();
  absl::Status BindDeviceWeights();
  absl::Status RegisterWeights(const std::vector<WeightData>& host,
                               const StagedUploadOptions& upload);
  absl::Status UploadWeights(const std::vector<WeightData>& host,
                             const StagedUploadOptions& upload);
  // A device allocation and its size.
  struct DeviceBlock {
    CUdeviceptr address = 0;
    uint64_t bytes = 0;
  };
  // One sequence: the KV blocks it holds in the pool.
  class Sequence final : public SequenceState {
   public:
    Sequence(CudaExecutor* executor, int64_t max_length, SequenceBlocks blocks)
        : SequenceState(executor, max_length), executor(executor), blocks(std::move(blocks)) {}
    ~Sequence() override { executor->ReleaseSequence(this); }

    CudaExecutor* const executor;
    SequenceBlocks blocks;  // guarded by executor->pool_mutex_
  };
  absl::Status AllocateArena();
  // Allocates the blocks the positions of each part need (copying those it shares: CopyBlocks)
  // and copies part r's block tables into row r of the step's tables on the device.
  absl::Status BindSequences(absl::Span<const SequenceStep> parts);
  // Copy-on-write, on the stream (before the steps that follow): each copy's block into its new
  // one, in every cache of its group (K and V).
  absl::Status CopyBlocks(absl::Span<const BlockCopy> copies);
  // Where the `size` bytes `region` names in `sequence`'s memory lie on the device (one piece
  // for the arena, one per block for a cache), after checking they fit.
  struct RegionPiece {
    CUdeviceptr address = 0;
    uint64_t offset = 0;  // within the region's bytes
    uint64_t bytes = 0;
  };
  // For a write, the blocks it touches are made the sequence's own first (copy-on-write).
  absl::StatusOr<std::vector<RegionPiece>> RegionPieces(SequenceState& state,
                                                        const MemoryRegion& region, uint64_t size,
                                                        bool write);
  void ReleaseSequence(Sequence* sequence);
  // cuMemAlloc / cuMemFree that keep usage_.peak_allocated_bytes.
  absl::Status Allocate(DeviceBlock* block, uint64_t bytes);
  void Free(DeviceBlock* block);
  // Reads the driver's free memory and raises usage_.driver_used_bytes.
  absl::Status SampleDriverMemory();
  void Notice(absl::string_view text) const {
    if (options_.on_notice) options_.on_notice(text);
  }

  CUdeviceptr BufferAddress(int64_t buffer) const {
    return arena_.address + plan_.buffers[buffer].offset;
  }
  absl::Status CopyInputs(const BatchLayout& layout);
  absl::Status Launch(const ProgramLaunch& launch, int32_t num_soft_tokens);
  // A transfer step (no kernel): the data movement of its op, on the stream.
  absl::Status Transfer(const Step& step, absl::Span<const ResolvedArg> args);
  // The NCCL communicator of a plan with collectives (options_.nccl, or one of one rank).
  absl::Status JoinCommunicator();
  // The launches of ProgramFor(plan_, num_tokens, num_soft_tokens, tail_rows).
  absl::Status LaunchSteps(int32_t num_tokens, int32_t num_soft_tokens, int32_t tail_rows);
  // Profiling: one event before each step and one after the last.
  absl::Status CreateStepEvents();
  absl::Status RecordStepTimes(int32_t num_tokens, int32_t num_soft_tokens, int32_t tail_rows,
                               bool decode_step);
  absl::Status ObserveStep(int step_index, int32_t num_tokens);
  // A decode step of `num_tokens` sequences (one token each, every row sampled), replayed from
  // the graph captured for that many on its first use.
  absl::Status LaunchDecodeGraph(int32_t num_tokens);

  const DriverApi* api_;
  const Artifact& artifact_;
  const Plan& plan_;
  const Checkpoint& checkpoint_;
  CudaExecutorOptions options_;

  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  CUmodule module_ = nullptr;
  std::vector<CUfunction> functions_;  // by step index
  DeviceBlock weight_block_;           // discrete devices: every weight
  std::vector<void*> registered_;      // integrated devices: registered host ranges
  DeviceBlock arena_;   // allocated with the KV pool, shared by every sequence
  ArgBindings bindings_;  // arena, weights, the KV pool and the block tables
  std::mutex pool_mutex_;  // sequences may be released from other threads
  KvBlockPool pool_;
  DeviceBlock kv_block_;  // every cache's pool (K and V), then the block tables of each group
  std::vector<CUdeviceptr> tables_;  // by capacity group: i32 [max_tokens, columns]
  std::vector<int32_t> table_staging_;  // the step's table rows on their way to the device
  BatchLayout layout_;  // the step's inputs on their way to the device
  std::vector<int32_t> tokens_staging_;  // the drawn tokens on their way back
  // Decode steps of 1, 2, ... sequences, by token count: a graph's arguments are the arena, the
  // pool and the tables, the same for every step of that size.
  std::map<int32_t, CUgraphExec> decode_graphs_;
  std::vector<uint8_t> staging_;  // step outputs copied back for the observer, bf16 logits
  std::vector<uint8_t> input_staging_;  // bf16 soft-token rows on their way to the device
  std::vector<CUevent> step_events_;  // profiling only
  uint64_t allocated_bytes_ = 0;  // now
  size_t used_at_context_ = 0;  // total - free right after the context was created
  MemoryUsage usage_;
};

CudaExecutor::~CudaExecutor() {
  ReleaseOwnSequence();  // its blocks, while the context and stream exist
  if (context_ == nullptr) return;
  // Teardown cannot report errors; every resource is released best-effort.
  api_->cuCtxSetCurrent(context_);
  if (stream_ != nullptr) api_->cuStreamSynchronize(stream_);
  for (auto& [tokens, graph] : decode_graphs_) api_->cuGraphExecDestroy(graph);
  Free(&kv_block_);
  Free(&arena_);
  Free(&weight_block_);
  for (void* pointer : registered_) api_->cuMemHostUnregister(pointer);
  for (CUevent event : step_events_) api_->cuEventDestroy(event);
  if (module_ != nullptr) api_->cuModuleUnload(module_);
  if (stream_ != nullptr) api_->cuStreamDestroy(stream_);
  api_->cuDevicePrimaryCtxRelease(device_);
}

absl::Status CudaExecutor::Init() {
  LoadClock clock(options_.on_phase);
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuDeviceGet(&device_, options_.device.ordinal));
  CUcontext context = nullptr;
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuDevicePrimaryCtxRetain(&context, device_));
  context_ = context;
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuCtxSetCurrent(context_));
  size_t free_bytes = 0, total_bytes = 0;
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuMemGetInfo(&free_bytes, &total_bytes));
  used_at_context_ = total_bytes - free_bytes;
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuStreamCreate(&stream_, cu::kStreamNonBlocking));
  clock.Lap("CUDA context");
  SPARK_RETURN_IF_ERROR(LoadModule());
  SPARK_RETURN_IF_ERROR(LoadFunctions());
  clock.Lap("module load");
  SPARK_RETURN_IF_ERROR(JoinCommunicator());
  if (options_.nccl != nullptr) clock.Lap("NCCL");
  SPARK_RETURN_IF_ERROR(BindDeviceWeights());
  const bool in_place = usage_.registered_bytes > 0;
  clock.Lap(in_place ? "weights (in place)" : "weights (copy to the device)",
            in_place ? usage_.registered_bytes : usage_.weight_bytes, /*copied=*/!in_place);
  return absl::OkStatus();
}

absl::Status CudaExecutor::JoinCommunicator() {
  if (options_.nccl != nullptr) {
    if (options_.nccl->ranks() != plan_.ranks || options_.nccl->rank() != options_.rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", options_.rank, " of a plan of ", plan_.ranks, " ranks given NCCL rank ",
          options_.nccl->rank(), " of ", options_.nccl->ranks()));
    }
    return absl::OkStatus();
  }
  const bool collectives = std::any_of(plan_.steps.begin(), plan_.steps.end(), [](const Step& s) {
    return s.op == abi::OpId::kAllReduce || s.op == abi::OpId::kAllGather;
  });
  if (!collectives) return absl::OkStatus();
  if (plan_.ranks != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a plan of ", plan_.ranks, " ranks runs on ", plan_.ranks,
        " executors joined by an NCCL communicator; this one was made without one"));
  }
  // One rank's collectives (spark-op-check's plans): through NCCL all the same.
  SPARK_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<NcclCommunicator>> comms,
                         NcclCommunicator::ForLocalDevices({options_.device.ordinal}));
  options_.nccl = comms[0];
  return absl::OkStatus();
}

absl::Status CudaExecutor::LoadModule() {
  if (artifact_.is_ptx) {
    Notice(absl::StrCat("JIT-compiling PTX ", artifact_.target, " from ", artifact_.path,
                        " with the driver (once; the driver caches the result)"));
  }
  std::string error_log(kJitLogBytes, '\0');
  CUjit_option options[] = {cu::kJitErrorLogBuffer, cu::kJitErrorLogBufferSizeBytes};
  void* values[] = {&error_log[0], reinterpret_cast<void*>(static_cast<uintptr_t>(kJitLogBytes))};
  const CUresult result =
      api_->cuModuleLoadDataEx(&module_, artifact_.image.data(), 2, options, values);
  if (result == cu::kSuccess) return absl::OkStatus();
  module_ = nullptr;
  error_log.resize(std::strlen(error_log.c_str()));
  const absl::Status status =
      CuResultToStatus(*api_, result, "cuModuleLoadDataEx(image)", __FILE__, __LINE__);
  return WithContext(
      status, absl::StrCat("cannot load ", artifact_.path, " (", artifact_.target, ") on ", name(),
                           error_log.empty() ? "" : "; JIT log: ", error_log));
}

absl::Status CudaExecutor::LoadFunctions() {
  std::map<std::string, CUfunction> by_name;
  for (size_t i = 0; i < plan_.steps.size(); ++i) {
    const Step& step = plan_.steps[i];
    if (!IsLaunch(step)) {  // a transfer: no kernel (Transfer)
      functions_.push_back(nullptr);
      continue;
    }
    auto found = by_name.find(step.kernel);
    if (found == by_name.end()) {
      CUfunction function = nullptr;
      if (api_->cuModuleGetFunction(&function, module_, step.kernel.c_str()) != cu::kSuccess) {
        return absl::NotFoundError(PrintableText(absl::StrCat(
            "kernel ", step.kernel, " of step ", i, " (", step.source, ", op ", OpName(step),
            ") is not in ", artifact_.path, "; the image does not match its plan (recompile it)")));
      }
      found = by_name.emplace(step.kernel, function).first;
    }
    functions_.push_back(found->second);
  }
  for (const DynamicSharedNeed& need : DynamicSharedNeeds(plan_)) {
    SPARK_RETURN_IF_ERROR(
        OptInDynamicShared(*api_, by_name.at(need.kernel), plan_, need, name()));
  }
  return absl::OkStatus();
}

namespace {

// The copies that put `weight` at `address`: its checkpoint tensor, or its parts one after the
// other (a tensor-parallel slice, an assembled weight).
void AppendWeightCopies(const WeightData& weight, CUdeviceptr address,
                        std::vector<HostToDeviceCopy>* copies) {
  if (!weight.assembled()) {
    copies->push_back({weight.data, weight.num_bytes, address});
    return;
  }
  for (const WeightPart& part : weight.parts) {
    copies->push_back({part.data, part.num_bytes, address});
    address += part.num_bytes;
  }
}

}  // namespace

absl::Status CudaExecutor::BindDeviceWeights() {
  // SPARK_UPLOAD_THREADS / SPARK_UPLOAD_CHUNK_MIB: a bad value is refused on every GPU, whether
  // or not this one copies its weights.
  StagedUploadOptions upload;
  SPARK_RETURN_IF_ERROR(ReadUploadTuning(&upload));
  upload.on_progress = options_.on_progress;
  SPARK_ASSIGN_OR_RETURN(const std::vector<WeightData> host,
                         BindWeights(plan_, checkpoint_, options_.rank));
  if (options_.device.integrated) {
    const absl::Status registered = RegisterWeights(host, upload);
    if (registered.ok()) return registered;
    Notice(absl::StrCat("cannot use the checkpoint in place on the integrated GPU (",
                        registered.message(), "); copying the weights instead"));
  }
  return UploadWeights(host, upload);
}

// Integrated device: GPU and CPU share memory, so the mapped checkpoint files are registered
// (read-only) and the weights are read where they are, except those PlaceIntegratedWeights copies
// (not 16-byte aligned in their file: the kernels' vector loads need it).
absl::Status CudaExecutor::RegisterWeights(const std::vector<WeightData>& host,
                                           const StagedUploadOptions& upload) {
  const WeightPlacement placement = PlaceIntegratedWeights(plan_, host);
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  std::vector<CUdeviceptr> file_addresses;
  for (const Checkpoint::File& file : checkpoint_.files()) {
    void* pointer = const_cast<uint8_t*>(file.data);
    SPARK_CU_RETURN_IF_ERROR(api_, api_->cuMemHostRegister(pointer, AlignUp(file.size, page),
                                                           cu::kMemHostRegisterDeviceMap |
                                                               cu::kMemHostRegisterReadOnly));
    registered_.push_back(pointer);
    usage_.registered_bytes += file.size;
    CUdeviceptr address = 0;
    SPARK_CU_RETURN_IF_ERROR(api_, api_->cuMemHostGetDevicePointer(&address, pointer, 0));
    file_addresses.push_back(address);
  }
  if (placement.num_copied > 0) {
    Notice(absl::StrCat(placement.num_copied, " of ", host.size(), " weights (",
                        FormatBytes(placement.copied_bytes),
                        ") are not 16-byte aligned in the checkpoint files: copied, so that the "
                        "kernels' vector loads can read them; the rest is used in place"));
  }
  std::vector<uint64_t> copy_offsets(host.size(), 0);
  uint64_t copy_total = 0;
  for (size_t w = 0; w < host.size(); ++w) {
    if (!placement.copied[w]) continue;
    copy_offsets[w] = copy_total;
    copy_total = AlignUp(copy_total + host[w].num_bytes, kPartAlignment);
  }
  if (copy_total > 0) {
    SPARK_RETURN_IF_ERROR(Allocate(&weight_block_, copy_total));
    usage_.weight_bytes = copy_total;
  }
  std::vector<HostToDeviceCopy> copies;
  for (size_t w = 0; w < host.size(); ++w) {
    if (placement.copied[w]) {
      const CUdeviceptr address = weight_block_.address + copy_offsets[w];
      AppendWeightCopies(host[w], address, &copies);
      bindings_.weights.push_back(address);
      continue;
    }
    const FileRange range = FindInFiles(checkpoint_.files(), host[w].data, host[w].num_bytes);
    if (range.file < 0 && host[w].num_bytes > 0) {
      return absl::InternalError(PrintableText(
          absl::StrCat("weight ", plan_.weights[w].name, " is outside the mapped checkpoint")));
    }
    bindings_.weights.push_back(
        range.file < 0 ? 0 : file_addresses[static_cast<size_t>(range.file)] + range.offset);
  }
  return UploadStaged(*api_, context_, copies, checkpoint_.files(), upload);
}

// Discrete device: one allocation, each weight copied to its aligned part through pinned
// staging buffers by several threads (weight_upload.h).
absl::Status CudaExecutor::UploadWeights(const std::vector<WeightData>& host,
                                         const StagedUploadOptions& upload) {
  // (After a failed RegisterWeights: nothing of it stays.)
  for (void* pointer : registered_) api_->cuMemHostUnregister(pointer);
  registered_.clear();
  usage_.registered_bytes = 0;
  Free(&weight_block_);
  bindings_.weights.clear();
  std::vector<uint64_t> offsets;
  uint64_t total = 0;
  for (const WeightData& w : host) {
    offsets.push_back(total);
    total = AlignUp(total + w.num_bytes, kPartAlignment);
  }
  SPARK_RETURN_IF_ERROR(Allocate(&weight_block_, total));
  usage_.weight_bytes = total;
  std::vector<HostToDeviceCopy> copies;
  for (size_t w = 0; w < host.size(); ++w) {
    const CUdeviceptr address = weight_block_.address + offsets[w];
    bindings_.weights.push_back(address);
    AppendWeightCopies(host[w], address, &copies);
  }
  return UploadStaged(*api_, context_, copies, checkpoint_.files(), upload);
}

absl::Status CudaExecutor::Allocate(DeviceBlock* block, uint64_t bytes) {
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuMemAlloc(&block->address, bytes > 0 ? bytes : 1));
  block->bytes = bytes;
  allocated_bytes_ += bytes;
  usage_.peak_allocated_bytes = std::max(usage_.peak_allocated_bytes, allocated_bytes_);
  return absl::OkStatus();
}

void CudaExecutor::Free(DeviceBlock* block) {
  if (block->address == 0) return;
  api_->cuMemFree(block->address);
  allocated_bytes_ -= block->bytes;
  *block = DeviceBlock();
}

absl::Status CudaExecutor::SampleDriverMemory() {
  size_t free_bytes = 0, total_bytes = 0;
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuMemGetInfo(&free_bytes, &total_bytes));
  const size_t used = total_bytes - free_bytes;
  if (used > used_at_context_) {
    usage_.driver_used_bytes = std::max<uint64_t>(usage_.driver_used_bytes, used - used_at_context_);
  }
  return absl::OkStatus();
}

absl::Status CudaExecutor::AllocateArena() {
  if (arena_.address != 0) return absl::OkStatus();
  SPARK_RETURN_IF_ERROR(WithContext(Allocate(&arena_, plan_.arena_bytes),
                                    absl::StrCat("allocating the activation arena (",
                                                 plan_.arena_bytes, " bytes)")));
  bindings_.arena = arena_.address;
  return absl::OkStatus();
}

absl::Status CudaExecutor::ReserveSequences(int64_t max_length, int64_t sequences,
                                            int64_t full_length_sequences) {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  SPARK_RETURN_IF_ERROR(pool_.CheckNoLiveSequences());
  SPARK_ASSIGN_OR_RETURN(KvBlockPool pool,
                         KvBlockPool::Make(plan_, max_length, sequences, full_length_sequences));
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuCtxSetCurrent(context_));
  SPARK_RETURN_IF_ERROR(AllocateArena());
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuStreamSynchronize(stream_));
  Free(&kv_block_);
  pool_ = KvBlockPool();
  tables_.clear();
  // One allocation: K then V of each cache's pool, then each group's table.
  std::vector<uint64_t> offsets;
  uint64_t total = 0;
  for (size_t i = 0; i < plan_.kv_caches.size(); ++i) {
    const int64_t slots = pool.NumBlocks(pool.GroupOf(static_cast<int64_t>(i))) * abi::kKvBlockRows;
    const uint64_t bytes = plan_.kv_caches[i].part_bytes(slots);
    for (int part = 0; part < 2; ++part) {
      offsets.push_back(total);
      total = AlignUp(total + bytes, kPartAlignment);
    }
  }
  std::vector<uint64_t> table_offsets;
  for (int g = 0; g < pool.num_groups(); ++g) {
    table_offsets.push_back(total);
    total = AlignUp(total + static_cast<uint64_t>(plan_.max_tokens * pool.Columns(g)) * 4,
                    kPartAlignment);
  }
  SPARK_RETURN_IF_ERROR(WithContext(
      Allocate(&kv_block_, total),
      absl::StrCat("allocating the KV cache pool for ", sequences, " sequence(s) of ", max_length,
                   " tokens (", full_length_sequences, " at full length; ", total, " bytes)")));
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuMemsetD8(kv_block_.address, 0, total));
  // cuMemsetD8 runs on the legacy stream, with which stream_ (non-blocking) does not
  // synchronise: without this wait, the memset of a large pool could still be running when the
  // first step uploads its block tables and writes its keys, and zero them (the first generation
  // of a process then read zeros: seen on 31B, 2026-12-03).
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuCtxSynchronize());
  bindings_.k_caches.clear();
  bindings_.v_caches.clear();
  bindings_.block_tables.clear();
  for (int g = 0; g < pool.num_groups(); ++g) tables_.push_back(kv_block_.address + table_offsets[g]);
  for (size_t i = 0; i < plan_.kv_caches.size(); ++i) {
    bindings_.k_caches.push_back(kv_block_.address + offsets[2 * i]);
    bindings_.v_caches.push_back(kv_block_.address + offsets[2 * i + 1]);
    bindings_.block_tables.push_back(tables_[pool.GroupOf(static_cast<int64_t>(i))]);
  }
  pool_ = std::move(pool);
  bindings_.kv_capacities = pool_.CacheCapacities();
  // A captured graph binds the old pool's addresses.
  for (auto& [tokens, graph] : decode_graphs_) api_->cuGraphExecDestroy(graph);
  decode_graphs_.clear();
  return SampleDriverMemory();
}

void CudaExecutor::ReleaseSequence(Sequence* sequence) {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  pool_.Release(sequence->blocks);
}

absl::StatusOr<int64_t> CudaExecutor::DropKv(SequenceState& sequence) {
  SPARK_RETURN_IF_ERROR(CheckOwnSequence(sequence));
  // Bookkeeping only: the blocks' bytes are overwritten by whichever sequence takes them next,
  // in a later step on the same stream.
  std::lock_guard<std::mutex> lock(pool_mutex_);
  return pool_.Drop(static_cast<Sequence&>(sequence).blocks);
}

absl::Status CudaExecutor::ShareKv(SequenceState& from, SequenceState& to, int64_t tokens) {
  SPARK_RETURN_IF_ERROR(CheckSharePair(from, to));
  // Bookkeeping only, as DropKv: the shared blocks are read where they are.
  std::lock_guard<std::mutex> lock(pool_mutex_);
  return pool_.Share(static_cast<Sequence&>(from).blocks, static_cast<Sequence&>(to).blocks,
                     tokens);
}

absl::Status CudaExecutor::CopyBlocks(absl::Span<const BlockCopy> copies) {
  for (const BlockCopy& copy : copies) {
    for (size_t i = 0; i < plan_.kv_caches.size(); ++i) {
      if (pool_.GroupOf(static_cast<int64_t>(i)) != copy.group) continue;
      const uint64_t block_bytes = plan_.kv_caches[i].part_bytes(abi::kKvBlockRows);
      for (const CUdeviceptr base : {bindings_.k_caches[i], bindings_.v_caches[i]}) {
        SPARK_CU_RETURN_IF_ERROR(
            api_, api_->cuMemcpyDtoDAsync(base + copy.to * block_bytes,
                                          base + copy.from * block_bytes, block_bytes, stream_));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SequenceState>> CudaExecutor::NewSequence(int64_t max_length) {
  SPARK_ASSIGN_OR_RETURN(const bool reserve, pool_.NeedsReserve(max_length));
  if (reserve) {
    // Again for longer sequences, as many as before (one when none was reserved).
    SPARK_RETURN_IF_ERROR(ReserveSequences(max_length, std::max<int64_t>(1, pool_.sequences()),
                                           std::max<int64_t>(1, pool_.full_length_sequences())));
  }
  std::lock_guard<std::mutex> lock(pool_mutex_);
  return std::unique_ptr<SequenceState>(
      std::make_unique<Sequence>(this, max_length, pool_.NewSequence()));
}

absl::Status CudaExecutor::BindSequences(absl::Span<const SequenceStep> parts) {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  std::vector<BlockCopy> copies;
  for (const SequenceStep& part : parts) {
    const absl::Status grown =
        pool_.Grow(static_cast<Sequence&>(*part.sequence).blocks, part.call.positions, &copies);
    // The copies of the parts that grew are made even when a later part cannot grow: their
    // tables name the new blocks already.
    SPARK_RETURN_IF_ERROR(CopyBlocks(copies));
    copies.clear();
    SPARK_RETURN_IF_ERROR(grown);
  }
  // Each group's rows, one per part (the staging buffer lives until Run synchronises the
  // stream).
  table_staging_.clear();
  std::vector<size_t> starts;
  for (size_t g = 0; g < tables_.size(); ++g) {
    starts.push_back(table_staging_.size());
    for (const SequenceStep& part : parts) {
      const std::vector<int32_t>& row = static_cast<Sequence&>(*part.sequence).blocks.tables[g];
      table_staging_.insert(table_staging_.end(), row.begin(), row.end());
    }
  }
  for (size_t g = 0; g < tables_.size(); ++g) {
    const size_t end = g + 1 < starts.size() ? starts[g + 1] : table_staging_.size();
    SPARK_CU_RETURN_IF_ERROR(
        api_, api_->cuMemcpyHtoDAsync(tables_[g], table_staging_.data() + starts[g],
                                      (end - starts[g]) * 4, stream_));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CudaExecutor::RegionPiece>> CudaExecutor::RegionPieces(
    SequenceState& state, const MemoryRegion& region, uint64_t size, bool write) {
  SPARK_RETURN_IF_ERROR(CheckOwnSequence(state));
  Sequence& sequence = static_cast<Sequence&>(state);
  SPARK_RETURN_IF_ERROR(CheckMemoryRegion(plan_, pool_.CacheCapacities(), region, size));
  if (region.kind == MemoryRegion::Kind::kArena) {
    return std::vector<RegionPiece>{{arena_.address + region.offset, 0, size}};
  }
  const CUdeviceptr base = region.kind == MemoryRegion::Kind::kKCache
                               ? bindings_.k_caches[region.cache]
                               : bindings_.v_caches[region.cache];
  std::lock_guard<std::mutex> lock(pool_mutex_);
  std::vector<BlockCopy> copies;
  const absl::StatusOr<std::vector<PoolPiece>> pieces =
      pool_.MapRange(sequence.blocks, pool_.GroupOf(region.cache),
                     plan_.kv_caches[static_cast<size_t>(region.cache)].part_bytes(1),
                     region.offset, size, write ? &copies : nullptr);
  SPARK_RETURN_IF_ERROR(CopyBlocks(copies));  // those made before a failure too
  SPARK_RETURN_IF_ERROR(pieces.status());
  std::vector<RegionPiece> out;
  for (const PoolPiece& piece : *pieces) out.push_back({base + piece.pool_offset, piece.offset, piece.bytes});
  return out;
}

absl::Status CudaExecutor::CopyToMemory(SequenceState& sequence, const MemoryRegion& region,
                                        absl::Span<const uint8_t> bytes) {
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuCtxSetCurrent(context_));
  SPARK_ASSIGN_OR_RETURN(const std::vector<RegionPiece> pieces,
                         RegionPieces(sequence, region, bytes.size(), /*write=*/true));
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuStreamSynchronize(stream_));
  for (const RegionPiece& piece : pieces) {
    SPARK_CU_RETURN_IF_ERROR(
        api_, api_->cuMemcpyHtoD(piece.address, bytes.data() + piece.offset, piece.bytes));
  }
  return absl::OkStatus();
}

absl::Status CudaExecutor::CopyFromMemory(SequenceState& sequence, const MemoryRegion& region,
                                          absl::Span<uint8_t> bytes) {
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuCtxSetCurrent(context_));
  SPARK_ASSIGN_OR_RETURN(const std::vector<RegionPiece> pieces,
                         RegionPieces(sequence, region, bytes.size(), /*write=*/false));
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuStreamSynchronize(stream_));
  for (const RegionPiece& piece : pieces) {
    SPARK_CU_RETURN_IF_ERROR(
        api_, api_->cuMemcpyDtoH(bytes.data() + piece.offset, piece.address, piece.bytes));
  }
  return absl::OkStatus();
}

absl::Status CudaExecutor::RunProgram(SequenceState& state, int32_t num_tokens,
                                      int32_t num_soft_tokens) {
  SPARK_RETURN_IF_ERROR(CheckOwnSequence(state));
  SPARK_RETURN_IF_ERROR(CheckProgramCall(plan_, num_tokens, num_soft_tokens));
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuCtxSetCurrent(context_));
  // Every block of the sequence is allocated: the program reads whatever the caches hold.
  const std::vector<int32_t> every_block = pool_.EveryBlockPosition();
  SequenceStep part;
  part.sequence = &state;
  part.call.positions = every_block;
  SPARK_RETURN_IF_ERROR(BindSequences(absl::MakeConstSpan(&part, 1)));
  if (plan_.input_sequences >= 0) {  // every token is the sequence's: row 0 of the tables
    layout_.sequences.assign(static_cast<size_t>(num_tokens), 0);
    SPARK_CU_RETURN_IF_ERROR(
        api_, api_->cuMemcpyHtoDAsync(BufferAddress(plan_.input_sequences),
                                      layout_.sequences.data(), layout_.sequences.size() * 4,
                                      stream_));
  }
  SPARK_RETURN_IF_ERROR(LaunchSteps(num_tokens, num_soft_tokens, num_tokens));
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> CudaExecutor::EncodeImage(
    absl::Span<const float> pixel_patches, absl::Span<const int32_t> patch_positions) {
  SPARK_RETURN_IF_ERROR(CheckImageEncoderCall(plan_, pixel_patches, patch_positions));
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuCtxSetCurrent(context_));
  SPARK_RETURN_IF_ERROR(AllocateArena());
  const int32_t patches = static_cast<int32_t>(patch_positions.size() / 2);
  const bool bf16 = plan_.activation_precision == DType::kBF16;
  // The pixels in the plan's activation type (bf16 ones converted on the host).
  const void* pixels = pixel_patches.data();
  if (bf16) {
    input_staging_.resize(pixel_patches.size() * 2);
    ActivationsFromF32(pixel_patches, DType::kBF16, input_staging_.data());
    pixels = input_staging_.data();
  }
  SPARK_CU_RETURN_IF_ERROR(
      api_, api_->cuMemcpyHtoDAsync(BufferAddress(plan_.input_pixel_patches), pixels,
                                    pixel_patches.size() * (bf16 ? 2 : 4), stream_));
  SPARK_CU_RETURN_IF_ERROR(
      api_, api_->cuMemcpyHtoDAsync(BufferAddress(plan_.input_patch_positions),
                                    patch_positions.data(), patch_positions.size() * 4, stream_));
  SPARK_RETURN_IF_ERROR(LaunchSteps(patches, /*num_soft_tokens=*/0, /*tail_rows=*/0));
  std::vector<float> embeddings(static_cast<size_t>(patches / 9 * plan_.model.hidden_size));
  staging_.resize(embeddings.size() * (bf16 ? 2 : 4));
  SPARK_CU_RETURN_IF_ERROR(
      api_, api_->cuMemcpyDtoHAsync(staging_.data(), BufferAddress(plan_.output_embeddings),
                                    staging_.size(), stream_));
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuStreamSynchronize(stream_));
  ActivationsToF32(staging_.data(), plan_.activation_precision, absl::MakeSpan(embeddings));
  return embeddings;
}

absl::Status CudaExecutor::CopyInputs(const BatchLayout& layout) {
  // (`layout` is layout_, which lives until Run synchronises the stream, as the staging buffers.)
  const size_t n = layout.ids.size();
  const auto copy = [&](int64_t buffer, const void* data, size_t bytes) -> absl::Status {
    SPARK_CU_RETURN_IF_ERROR(
        api_, api_->cuMemcpyHtoDAsync(BufferAddress(buffer), data, bytes, stream_));
    return absl::OkStatus();
  };
  SPARK_RETURN_IF_ERROR(
      copy(plan_.input_sampling, layout.sampling.data(), n * sizeof(abi::SamplingParams)));
  SPARK_RETURN_IF_ERROR(copy(plan_.input_ids, layout.ids.data(), n * 4));
  SPARK_RETURN_IF_ERROR(copy(plan_.input_positions, layout.positions.data(), n * 4));
  if (plan_.input_sequences >= 0) {
    SPARK_RETURN_IF_ERROR(copy(plan_.input_sequences, layout.sequences.data(), n * 4));
  }
  if (plan_.input_last_visible >= 0) {
    SPARK_RETURN_IF_ERROR(copy(plan_.input_last_visible, layout.last_visible.data(), n * 4));
  }
  if (layout.soft_indices.empty()) return absl::OkStatus();
  // The soft tokens' rows in the plan's activation type (bf16 ones converted on the host).
  const void* embeddings = layout.soft_embeddings.data();
  uint64_t embedding_bytes = layout.soft_embeddings.size() * 4;
  if (plan_.activation_precision == DType::kBF16) {
    embedding_bytes = layout.soft_embeddings.size() * 2;
    input_staging_.resize(embedding_bytes);
    ActivationsFromF32(layout.soft_embeddings, DType::kBF16, input_staging_.data());
    embeddings = input_staging_.data();
  }
  SPARK_RETURN_IF_ERROR(copy(plan_.soft_embeddings, embeddings, embedding_bytes));
  return copy(plan_.soft_indices, layout.soft_indices.data(), layout.soft_indices.size() * 4);
}

absl::Status CudaExecutor::Launch(const ProgramLaunch& launch, int32_t num_soft_tokens) {
  const int step_index = launch.step;
  const Step& step = plan_.steps[step_index];
  const std::vector<ResolvedArg> args = ResolveStepArgs(
      plan_, step, bindings_, launch.num_tokens, num_soft_tokens, launch.first_row);
  if (!IsLaunch(step)) return Transfer(step, args);
  // Literal i32/f32 arguments are compiled into the entry point (docs/plan-format.md); the
  // entry's parameters are the other arguments, in order. Each parameter gets its own 8-byte
  // slot: a CUdeviceptr, or an i32 / f32 in the low 4 bytes.
  std::vector<uint64_t> slots;
  slots.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (IsEntryLiteral(step.args[i])) continue;
    uint64_t slot = 0;
    switch (args[i].kind) {
      case abi::ArgKind::kPtr:
        slot = args[i].address;
        break;
      case abi::ArgKind::kI32:
        std::memcpy(&slot, &args[i].i32, sizeof(int32_t));
        break;
      case abi::ArgKind::kF32:
        std::memcpy(&slot, &args[i].f32, sizeof(float));
        break;
    }
    slots.push_back(slot);
  }
  std::vector<void*> params(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) params[i] = &slots[i];
  SPARK_CU_RETURN_IF_ERROR(
      api_, api_->cuLaunchKernel(functions_[step_index], launch.blocks, 1, 1,
                                 step.block[0], step.block[1], step.block[2],
                                 LaunchSharedBytes(plan_, step, launch.num_tokens), stream_,
                                 params.data(), nullptr));
  return absl::OkStatus();
}

absl::Status CudaExecutor::Transfer(const Step& step, absl::Span<const ResolvedArg> args) {
  switch (step.op) {
    case abi::OpId::kCopy: {  // y = x over num_tokens rows of cols activations
      using abi::ops::copy::Arg;
      const uint64_t element_bytes = plan_.activation_precision == DType::kBF16 ? 2 : 4;
      const uint64_t bytes = static_cast<uint64_t>(args[Arg::num_tokens].i32) *
                             static_cast<uint64_t>(args[Arg::cols].i32) * element_bytes;
      if (bytes == 0 || args[Arg::x].address == args[Arg::y].address) return absl::OkStatus();
      SPARK_CU_RETURN_IF_ERROR(
          api_, api_->cuMemcpyDtoDAsync(args[Arg::y].address, args[Arg::x].address, bytes, stream_));
      return absl::OkStatus();
    }
    case abi::OpId::kAllReduce: {  // in place, through NCCL
      using abi::ops::all_reduce::Arg;
      const uint64_t count = static_cast<uint64_t>(args[Arg::num_tokens].i32) *
                             static_cast<uint64_t>(args[Arg::cols].i32);
      return options_.nccl->AllReduce(args[Arg::x].address, count, plan_.activation_precision,
                                      stream_);
    }
    case abi::OpId::kAllGather: {
      // NCCL puts the ranks' rows one after the other into `gathered` ([ranks, T, cols]); each
      // rank's block then goes to its columns of y ([T, ranks x cols]) in one pitched copy.
      using abi::ops::all_gather::Arg;
      const uint64_t element_bytes = plan_.activation_precision == DType::kBF16 ? 2 : 4;
      const uint64_t tokens = static_cast<uint64_t>(args[Arg::num_tokens].i32);
      const uint64_t cols = static_cast<uint64_t>(args[Arg::cols].i32);
      const uint64_t ranks = static_cast<uint64_t>(args[Arg::ranks].i32);
      if (tokens == 0) return absl::OkStatus();
      SPARK_RETURN_IF_ERROR(options_.nccl->AllGather(args[Arg::x].address,
                                                     args[Arg::gathered].address, tokens * cols,
                                                     plan_.activation_precision, stream_));
      for (uint64_t r = 0; r < ranks; ++r) {
        CudaMemcpy2D copy;
        copy.srcMemoryType = cu::kMemoryTypeDevice;
        copy.srcDevice = args[Arg::gathered].address + r * tokens * cols * element_bytes;
        copy.srcPitch = cols * element_bytes;
        copy.dstMemoryType = cu::kMemoryTypeDevice;
        copy.dstDevice = args[Arg::y].address + r * cols * element_bytes;
        copy.dstPitch = ranks * cols * element_bytes;
        copy.WidthInBytes = cols * element_bytes;
        copy.Height = tokens;
        SPARK_CU_RETURN_IF_ERROR(api_, api_->cuMemcpy2DAsync(&copy, stream_));
      }
      return absl::OkStatus();
    }
    default:
      return absl::InternalError(
          absl::StrCat("the CUDA executor has no transfer for op ", OpName(step)));
  }
}

absl::Status CudaExecutor::CreateStepEvents() {
  while (step_events_.size() < plan_.steps.size() + 1) {
    CUevent event = nullptr;
    SPARK_CU_RETURN_IF_ERROR(api_, api_->cuEventCreate(&event, cu::kEventDefault));
    step_events_.push_back(event);
  }
  return absl::OkStatus();
}

absl::Status CudaExecutor::RecordStepTimes(int32_t num_tokens, int32_t num_soft_tokens,
                                           int32_t tail_rows, bool decode_step) {
  const std::vector<ProgramLaunch> program =
      ProgramFor(plan_, num_tokens, num_soft_tokens, tail_rows);
  for (size_t k = 0; k < program.size(); ++k) {
    float ms = 0.0f;
    SPARK_CU_RETURN_IF_ERROR(api_,
                             api_->cuEventElapsedTime(&ms, step_events_[k], step_events_[k + 1]));
    mutable_profile()->Record(program[k].step, layout_.positions, decode_step, ms * 1e-3,
                              program[k].num_tokens);
  }
  return absl::OkStatus();
}

absl::Status CudaExecutor::LaunchSteps(int32_t num_tokens, int32_t num_soft_tokens,
                                       int32_t tail_rows) {
  const bool profiling = mutable_profile() != nullptr;
  if (profiling) SPARK_RETURN_IF_ERROR(CreateStepEvents());
  // The call's program (the decode program for one token), each step with the blocks of its
  // tokens; the logits tail on the rows asked for.
  const std::vector<ProgramLaunch> program =
      ProgramFor(plan_, num_tokens, num_soft_tokens, tail_rows);
  for (size_t k = 0; k < program.size(); ++k) {
    const int index = program[k].step;
    const Step& step = plan_.steps[index];
    if (profiling) SPARK_CU_RETURN_IF_ERROR(api_, api_->cuEventRecord(step_events_[k], stream_));
    SPARK_RETURN_IF_ERROR(
        WithContext(Launch(program[k], num_soft_tokens), DescribeStep(index, step)));
    if (step_observer()) {
      SPARK_RETURN_IF_ERROR(WithContext(ObserveStep(index, num_tokens), DescribeStep(index, step)));
    }
  }
  if (profiling) {
    SPARK_CU_RETURN_IF_ERROR(api_, api_->cuEventRecord(step_events_[program.size()], stream_));
  }
  return absl::OkStatus();
}

absl::Status CudaExecutor::ObserveStep(int step_index, int32_t num_tokens) {
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuStreamSynchronize(stream_));
  for (const OutputBuffer& output : StepOutputBuffers(step_index, plan_.steps[step_index])) {
    const uint64_t bytes = num_tokens * plan_.buffers[output.buffer].row_bytes();
    staging_.resize(bytes);
    SPARK_CU_RETURN_IF_ERROR(
        api_, api_->cuMemcpyDtoH(staging_.data(), BufferAddress(output.buffer), bytes));
    SPARK_RETURN_IF_ERROR(
        step_observer()(MakeStepOutput(plan_, step_index, output, num_tokens, staging_.data())));
  }
  return absl::OkStatus();
}

absl::Status CudaExecutor::LaunchDecodeGraph(int32_t num_tokens) {
  auto found = decode_graphs_.find(num_tokens);
  if (found == decode_graphs_.end()) {
    // Every argument is fixed for such a step (the ids, positions and sequences are read from the
    // arena, the block tables from the pool's memory), so the graph serves every decode step of
    // that many sequences, whichever they are.
    SPARK_CU_RETURN_IF_ERROR(
        api_, api_->cuStreamBeginCapture(stream_, cu::kStreamCaptureModeThreadLocal));
    const absl::Status launched = LaunchSteps(num_tokens, 0, num_tokens);
    CUgraph graph = nullptr;
    const CUresult ended = api_->cuStreamEndCapture(stream_, &graph);
    if (!launched.ok()) {
      if (graph != nullptr) api_->cuGraphDestroy(graph);
      return WithContext(launched, "capturing the decode graph");
    }
    SPARK_CU_RETURN_IF_ERROR(api_, ended);
    CUgraphExec exec = nullptr;
    const CUresult instantiated = api_->cuGraphInstantiateWithFlags(&exec, graph, 0);
    api_->cuGraphDestroy(graph);
    SPARK_CU_RETURN_IF_ERROR(api_, instantiated);
    found = decode_graphs_.emplace(num_tokens, exec).first;
  }
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuGraphLaunch(found->second, stream_));
  return absl::OkStatus();
}

absl::Status CudaExecutor::RunBatch(absl::Span<const SequenceStep> parts,
                                    std::vector<StepResult>* results) {
  for (const SequenceStep& part : parts) {
    if (part.sequence != nullptr) SPARK_RETURN_IF_ERROR(CheckOwnSequence(*part.sequence));
  }
  SPARK_ASSIGN_OR_RETURN(layout_, LayOutBatch(plan_, parts));
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuCtxSetCurrent(context_));
  SPARK_RETURN_IF_ERROR(BindSequences(parts));
  SPARK_RETURN_IF_ERROR(CopyInputs(layout_));
  const int32_t num_tokens = layout_.num_tokens();
  const int32_t num_soft = layout_.num_soft_tokens();
  const bool profiling = mutable_profile() != nullptr;
  const bool all_rows = layout_.all_rows;
  // Replaying a captured decode graph allocates nothing new: the driver's used memory is sampled
  // after every other step (the first decode step of each size captures its graph).
  bool may_allocate = true;
  // A step observer sees every row of every step: the logits tail runs on all rows then.
  const int32_t tail_rows = step_observer() ? num_tokens : layout_.tail_rows;
  const bool decode = layout_.decode_step();
  if (decode && options_.use_graphs && !step_observer() && !profiling) {
    may_allocate = decode_graphs_.count(num_tokens) == 0;
    SPARK_RETURN_IF_ERROR(LaunchDecodeGraph(num_tokens));
  } else {
    SPARK_RETURN_IF_ERROR(LaunchSteps(num_tokens, num_soft, tail_rows));
  }
  // The tokens were drawn on the device: 4 bytes a row cross to the host, and the logits only
  // when every row is asked for (bf16 ones are converted to f32 on the host).
  results->assign(parts.size(), StepResult());
  tokens_staging_.assign(static_cast<size_t>(num_tokens), -1);
  if (layout_.tail_rows > 0) {
    SPARK_CU_RETURN_IF_ERROR(
        api_, api_->cuMemcpyDtoHAsync(tokens_staging_.data(), BufferAddress(plan_.output_tokens),
                                      tokens_staging_.size() * 4, stream_));
  }
  const bool bf16 = plan_.activation_precision == DType::kBF16;
  std::vector<float> logits;  // every row's, when a part asks for its rows'
  if (all_rows) {
    logits.resize(static_cast<size_t>(num_tokens * plan_.model.vocab_size));
    const uint64_t bytes = logits.size() * (bf16 ? 2 : 4);
    if (bf16) staging_.resize(bytes);
    SPARK_CU_RETURN_IF_ERROR(
        api_, api_->cuMemcpyDtoHAsync(bf16 ? static_cast<void*>(staging_.data()) : logits.data(),
                                      BufferAddress(plan_.output_logits), bytes, stream_));
  }
  SPARK_CU_RETURN_IF_ERROR(api_, api_->cuStreamSynchronize(stream_));
  if (all_rows) {
    if (bf16) ActivationsToF32(staging_.data(), DType::kBF16, absl::MakeSpan(logits));
    GatherLogitRows(layout_, parts, logits, plan_.model.vocab_size, results);
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    if (layout_.token_row[i] >= 0) {
      (*results)[i].token = tokens_staging_[static_cast<size_t>(layout_.token_row[i])];
    }
  }
  if (profiling) {
    SPARK_RETURN_IF_ERROR(
        RecordStepTimes(num_tokens, num_soft, tail_rows, decode));
  }
  return may_allocate ? SampleDriverMemory() : absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> CreateCudaExecutor(const Artifact& artifact,
                                                             const Checkpoint& checkpoint,
                                                             const CudaExecutorOptions& options) {
  SPARK_ASSIGN_OR_RETURN(const DriverApi* api, LoadDriver());
  auto executor = std::make_unique<CudaExecutor>(api, artifact, checkpoint, options);
  SPARK_RETURN_IF_ERROR(executor->Init());
  return std::unique_ptr<Executor>(std::move(executor));
}

}  // namespace rt
}  // namespace spark
