#include "spark/runtime/host_executor.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "host_allocation.h"
#include "kv_block_pool.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/host_kernel_dispatch.h"
#include "spark/runtime/host_kernels.h"
#include "spark/runtime/plan.h"
#include "spark/runtime/status_macros.h"
#include "spark/runtime/collectives.h"
#include "step_args.h"

namespace spark {
namespace rt {
namespace {

uint64_t AddressOf(const void* p) { return reinterpret_cast<uintptr_t>(p); }

class HostExecutor final : public Executor {
 public:
  HostExecutor(const Plan& plan, std::vector<WeightData> weights, HostKernelRunner kernel_runner,
               std::unique_ptr<Communicator> communicator)
      : plan_(plan),
        weights_(std::move(weights)),
        kernel_runner_(std::move(kernel_runner)),
        communicator_(std::move(communicator)) {}
  ~HostExecutor() override { ReleaseOwnSequence(); }

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
  absl::Status RunProgram(SequenceState& sequence, int32_t num_tokens,
                          int32_t num_soft_tokens) override;
  absl::StatusOr<std::vector<float>> EncodeImage(
      absl::Span<const float> pixel_patches, absl::Span<const int32_t> patch_positions) override;
  std::string name() const override { return "host"; }
  MemoryUsage memory_usage() const override {
    MemoryUsage usage;
    usage.peak_allocated_bytes = peak_allocated_bytes_;
    return usage;
  }

 private:
  struct KvCache {  // the pool of one cache: f32 or bf16 elements (KvCacheInfo::dtype), 8-byte aligned
    std::vector<uint64_t> k;
    std::vector<uint64_t> v;
  };
  class Sequence final : public SequenceState {
   public:
    Sequence(HostExecutor* executor, int64_t max_length, SequenceBlocks blocks)
        : SequenceState(executor, max_length), executor(executor), blocks(std::move(blocks)) {}
    ~Sequence() override { executor->ReleaseSequence(*this); }

    HostExecutor* const executor;
    SequenceBlocks blocks;  // guarded by executor->pool_mutex_
  };

  absl::Status AllocateArena();
  void ReleaseSequence(Sequence& sequence);
  // Allocates the blocks the positions of each part need (copying those it shares: CopyBlocks)
  // and makes part r's block tables row r of the step's tables.
  absl::Status BindSequences(absl::Span<const SequenceStep> parts);
  // Copy-on-write: each copy's block into its new one, in every cache of its group (K and V).
  void CopyBlocks(absl::Span<const BlockCopy> copies);
  // Calls fn(part, block_bytes) for the K and the V part of every cache of capacity group
  // `group` (the part's pool, blocks of block_bytes).
  template <typename Fn>
  void ForEachPart(int group, Fn fn);
  // The freed blocks' keys and values become NaN (all bits set), so that a step reading a
  // position its sequence no longer holds shows in its logits instead of finding the old bytes
  // still there (a block given back is often the next one handed out). Blocks another sequence
  // still shares are never freed, so they keep theirs. Under pool_mutex_.
  void FillWithNaN(absl::Span<const FreedBlock> freed);
  // Where the `size` bytes `region` names in `sequence`'s memory lie (one piece for the arena,
  // one per block for a cache), after checking they fit.
  struct RegionPiece {
    uint8_t* data = nullptr;
    uint64_t offset = 0;  // within the region's bytes
    uint64_t bytes = 0;
  };
  // For a write, the blocks it touches are made the sequence's own first (copy-on-write).
  absl::StatusOr<std::vector<RegionPiece>> RegionPieces(SequenceState& state,
                                                        const MemoryRegion& region, uint64_t size,
                                                        bool write);
  uint8_t* BufferData(int64_t buffer) {
    return reinterpret_cast<uint8_t*>(arena_.data()) + plan_.buffers[buffer].offset;
  }
  void WriteInputs(const BatchLayout& layout);
  // The call's program over its tokens: a batch's (`layout`), or nullptr for tokens at positions
  // 0, 1, ... (a whole-sequence program, the image encoder), for the profile.
  absl::Status RunSteps(int32_t num_tokens, int32_t num_soft_tokens, const BatchLayout* layout,
                        int32_t tail_rows);
  absl::Status ObserveStep(int step_index, int32_t num_tokens);
  // bf16 activations (Plan::activation_precision): the host reference computes on f32 buffers
  // (abi::ops::<op>::HostFn). Points the step's activation arguments (kAct) at f32 copies of
  // `rows` rows of their buffers from where the arguments point (one copy per buffer, so that
  // aliased arguments stay aliased); WriteBackWidened rounds the copies of the buffers the step
  // wrote back to bf16 (nearest even), as the kernels round each value they store.
  void WidenActivations(const Step& step, int32_t rows, std::vector<HostArg>* args);
  void WriteBackWidened(const Step& step);

  struct WidenedBuffer {
    int64_t buffer = 0;
    uint8_t* data = nullptr;  // the rows in the arena
    std::vector<float> values;
  };

  // A collective step (all_reduce, all_gather) through the communicator, on the step's f32
  // arguments; without one, the host reference (one rank).
  absl::Status RunCollective(const Step& step, absl::Span<const HostArg> args);

  const Plan& plan_;
  std::vector<WeightData> weights_;
  HostKernelRunner kernel_runner_;  // empty: the host references
  std::unique_ptr<Communicator> communicator_;  // a tensor-parallel plan's rank, else null
  std::vector<std::vector<uint64_t>> aligned_copies_;  // of weights misaligned in the checkpoint
  std::vector<WidenedBuffer> widened_;  // of the step running (bf16 activations only)
  std::vector<uint64_t> arena_;  // arena_bytes, 8-byte aligned; empty until the first sequence
  ArgBindings bindings_;         // arena, weights, the KV pool and the block tables
  std::mutex pool_mutex_;        // sequences may be released from other threads
  KvBlockPool pool_;
  std::vector<KvCache> kv_caches_;             // by kv cache id
  std::vector<std::vector<int32_t>> tables_;   // by capacity group: [max_tokens, columns]
  uint64_t pool_bytes_ = 0;
  uint64_t allocated_bytes_ = 0;
  uint64_t peak_allocated_bytes_ = 0;
};

absl::Status HostExecutor::AllocateArena() {
  if (!arena_.empty() || plan_.arena_bytes == 0) return absl::OkStatus();
  SPARK_RETURN_IF_ERROR(WithHostAllocation("the activation arena", plan_.arena_bytes, [&] {
    arena_.assign((plan_.arena_bytes + sizeof(uint64_t) - 1) / sizeof(uint64_t), 0);
  }));
  bindings_.arena = AddressOf(arena_.data());
  // A weight whose checkpoint offset is not a multiple of its element size (safetensors does not
  // require it) is read from an aligned copy: the reference loads its elements as C++ objects.
  // So is a weight assembled from parts (MoE experts stored one matrix per expert).
  for (size_t w = 0; w < weights_.size(); ++w) {
    const uint64_t element = static_cast<uint64_t>(std::max(1, DTypeSize(plan_.weights[w].dtype)));
    const uint8_t* data = weights_[w].data;
    if (weights_[w].assembled() || (data != nullptr && AddressOf(data) % element != 0)) {
      SPARK_RETURN_IF_ERROR(WithHostAllocation(
          absl::StrCat("a copy of weight ", plan_.weights[w].name), weights_[w].num_bytes,
          [&] { aligned_copies_.emplace_back((weights_[w].num_bytes + 7) / 8); }));
      CopyWeightBytes(weights_[w], reinterpret_cast<uint8_t*>(aligned_copies_.back().data()));
      data = reinterpret_cast<const uint8_t*>(aligned_copies_.back().data());
      allocated_bytes_ += aligned_copies_.back().size() * sizeof(uint64_t);
    }
    bindings_.weights.push_back(AddressOf(data));
  }
  allocated_bytes_ += arena_.size() * sizeof(uint64_t);
  return absl::OkStatus();
}

absl::Status HostExecutor::ReserveSequences(int64_t max_length, int64_t sequences,
                                            int64_t full_length_sequences) {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  SPARK_RETURN_IF_ERROR(pool_.CheckNoLiveSequences());
  SPARK_ASSIGN_OR_RETURN(KvBlockPool pool,
                         KvBlockPool::Make(plan_, max_length, sequences, full_length_sequences));
  SPARK_RETURN_IF_ERROR(AllocateArena());
  kv_caches_.clear();
  tables_.clear();
  allocated_bytes_ -= pool_bytes_;
  pool_bytes_ = 0;
  pool_ = KvBlockPool();
  std::vector<KvCache> caches(plan_.kv_caches.size());
  for (size_t i = 0; i < plan_.kv_caches.size(); ++i) {
    const KvCacheInfo& info = plan_.kv_caches[i];
    const int64_t slots = pool.NumBlocks(pool.GroupOf(static_cast<int64_t>(i))) * abi::kKvBlockRows;
    const uint64_t part_bytes = info.part_bytes(slots);
    SPARK_RETURN_IF_ERROR(WithHostAllocation(
        absl::StrCat("kv cache ", i, " (K and V, ", slots, " slots in blocks of ",
                     abi::kKvBlockRows, ")"),
        2 * part_bytes, [&] {
          const size_t words = static_cast<size_t>((part_bytes + 7) / 8);
          caches[i].k.assign(words, 0);
          caches[i].v.assign(words, 0);
        }));
    pool_bytes_ += (caches[i].k.size() + caches[i].v.size()) * 8;
  }
  kv_caches_ = std::move(caches);
  for (int g = 0; g < pool.num_groups(); ++g) {
    tables_.emplace_back(static_cast<size_t>(plan_.max_tokens * pool.Columns(g)), -1);
    pool_bytes_ += tables_.back().size() * sizeof(int32_t);
  }
  pool_ = std::move(pool);
  bindings_.k_caches.clear();
  bindings_.v_caches.clear();
  bindings_.block_tables.clear();
  for (size_t i = 0; i < kv_caches_.size(); ++i) {
    bindings_.k_caches.push_back(AddressOf(kv_caches_[i].k.data()));
    bindings_.v_caches.push_back(AddressOf(kv_caches_[i].v.data()));
    bindings_.block_tables.push_back(
        AddressOf(tables_[static_cast<size_t>(pool_.GroupOf(static_cast<int64_t>(i)))].data()));
  }
  bindings_.kv_capacities = pool_.CacheCapacities();
  allocated_bytes_ += pool_bytes_;
  peak_allocated_bytes_ = std::max(peak_allocated_bytes_, allocated_bytes_);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SequenceState>> HostExecutor::NewSequence(int64_t max_length) {
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

void HostExecutor::ReleaseSequence(Sequence& sequence) {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  pool_.Release(sequence.blocks);
}

absl::StatusOr<int64_t> HostExecutor::DropKv(SequenceState& sequence) {
  SPARK_RETURN_IF_ERROR(CheckOwnSequence(sequence));
  std::lock_guard<std::mutex> lock(pool_mutex_);
  std::vector<FreedBlock> freed;
  const int64_t count = pool_.Drop(static_cast<Sequence&>(sequence).blocks, &freed);
  FillWithNaN(freed);
  return count;
}

template <typename Fn>
void HostExecutor::ForEachPart(int group, Fn fn) {
  for (size_t i = 0; i < kv_caches_.size(); ++i) {
    if (pool_.GroupOf(static_cast<int64_t>(i)) != group) continue;
    const uint64_t block_bytes = plan_.kv_caches[i].part_bytes(abi::kKvBlockRows);
    for (std::vector<uint64_t>* part : {&kv_caches_[i].k, &kv_caches_[i].v}) {
      fn(reinterpret_cast<uint8_t*>(part->data()), block_bytes);
    }
  }
}

void HostExecutor::FillWithNaN(absl::Span<const FreedBlock> freed) {
  for (const FreedBlock& f : freed) {
    ForEachPart(f.group, [&](uint8_t* base, uint64_t block_bytes) {
      std::memset(base + f.block * block_bytes, 0xff, block_bytes);
    });
  }
}

absl::Status HostExecutor::ShareKv(SequenceState& from, SequenceState& to, int64_t tokens) {
  SPARK_RETURN_IF_ERROR(CheckSharePair(from, to));
  std::lock_guard<std::mutex> lock(pool_mutex_);
  std::vector<FreedBlock> freed;
  SPARK_RETURN_IF_ERROR(pool_.Share(static_cast<Sequence&>(from).blocks,
                                    static_cast<Sequence&>(to).blocks, tokens, &freed));
  FillWithNaN(freed);
  return absl::OkStatus();
}

void HostExecutor::CopyBlocks(absl::Span<const BlockCopy> copies) {
  for (const BlockCopy& copy : copies) {
    ForEachPart(copy.group, [&](uint8_t* base, uint64_t block_bytes) {
      std::memcpy(base + copy.to * block_bytes, base + copy.from * block_bytes, block_bytes);
    });
  }
}

absl::Status HostExecutor::RunBatch(absl::Span<const SequenceStep> parts,
                                    std::vector<StepResult>* results) {
  for (const SequenceStep& part : parts) {
    if (part.sequence != nullptr) SPARK_RETURN_IF_ERROR(CheckOwnSequence(*part.sequence));
  }
  SPARK_ASSIGN_OR_RETURN(const BatchLayout layout, LayOutBatch(plan_, parts));
  SPARK_RETURN_IF_ERROR(BindSequences(parts));
  WriteInputs(layout);
  const int32_t num_tokens = layout.num_tokens();
  // A step observer sees every row of every step: the logits tail runs on all rows then.
  SPARK_RETURN_IF_ERROR(RunSteps(num_tokens, layout.num_soft_tokens(), &layout,
                                 step_observer() ? num_tokens : layout.tail_rows));
  results->assign(parts.size(), StepResult());
  const int32_t* tokens = reinterpret_cast<const int32_t*>(BufferData(plan_.output_tokens));
  for (size_t i = 0; i < parts.size(); ++i) {
    if (layout.token_row[i] >= 0) (*results)[i].token = tokens[layout.token_row[i]];
  }
  if (layout.all_rows) {
    std::vector<float> logits(static_cast<size_t>(num_tokens * plan_.model.vocab_size));
    ActivationsToF32(BufferData(plan_.output_logits), plan_.activation_precision,
                     absl::MakeSpan(logits));
    GatherLogitRows(layout, parts, logits, plan_.model.vocab_size, results);
  }
  return absl::OkStatus();
}

absl::Status HostExecutor::BindSequences(absl::Span<const SequenceStep> parts) {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  std::vector<BlockCopy> copies;
  for (size_t r = 0; r < parts.size(); ++r) {
    Sequence& sequence = static_cast<Sequence&>(*parts[r].sequence);
    const absl::Status grown = pool_.Grow(sequence.blocks, parts[r].call.positions, &copies);
    // The copies of the parts that grew are made even when a later part cannot grow: their
    // tables name the new blocks already.
    CopyBlocks(copies);
    copies.clear();
    SPARK_RETURN_IF_ERROR(grown);
    for (size_t g = 0; g < tables_.size(); ++g) {
      const std::vector<int32_t>& row = sequence.blocks.tables[g];
      std::copy(row.begin(), row.end(), tables_[g].begin() + r * row.size());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<HostExecutor::RegionPiece>> HostExecutor::RegionPieces(
    SequenceState& state, const MemoryRegion& region, uint64_t size, bool write) {
  SPARK_RETURN_IF_ERROR(CheckOwnSequence(state));
  Sequence& sequence = static_cast<Sequence&>(state);
  SPARK_RETURN_IF_ERROR(CheckMemoryRegion(plan_, pool_.CacheCapacities(), region, size));
  if (region.kind == MemoryRegion::Kind::kArena) {
    return std::vector<RegionPiece>{
        {reinterpret_cast<uint8_t*>(arena_.data()) + region.offset, 0, size}};
  }
  KvCache& cache = kv_caches_[static_cast<size_t>(region.cache)];
  uint8_t* base = reinterpret_cast<uint8_t*>(region.kind == MemoryRegion::Kind::kKCache
                                                  ? cache.k.data()
                                                  : cache.v.data());
  std::lock_guard<std::mutex> lock(pool_mutex_);
  std::vector<BlockCopy> copies;
  const absl::StatusOr<std::vector<PoolPiece>> pieces =
      pool_.MapRange(sequence.blocks, pool_.GroupOf(region.cache),
                     plan_.kv_caches[static_cast<size_t>(region.cache)].part_bytes(1),
                     region.offset, size, write ? &copies : nullptr);
  CopyBlocks(copies);  // those made before a failure too: the table names them
  SPARK_RETURN_IF_ERROR(pieces.status());
  std::vector<RegionPiece> out;
  for (const PoolPiece& piece : *pieces) {
    out.push_back({base + piece.pool_offset, piece.offset, piece.bytes});
  }
  return out;
}

absl::Status HostExecutor::CopyToMemory(SequenceState& sequence, const MemoryRegion& region,
                                        absl::Span<const uint8_t> bytes) {
  SPARK_ASSIGN_OR_RETURN(const std::vector<RegionPiece> pieces,
                         RegionPieces(sequence, region, bytes.size(), /*write=*/true));
  for (const RegionPiece& piece : pieces) {
    std::memcpy(piece.data, bytes.data() + piece.offset, piece.bytes);
  }
  return absl::OkStatus();
}

absl::Status HostExecutor::CopyFromMemory(SequenceState& sequence, const MemoryRegion& region,
                                          absl::Span<uint8_t> bytes) {
  SPARK_ASSIGN_OR_RETURN(const std::vector<RegionPiece> pieces,
                         RegionPieces(sequence, region, bytes.size(), /*write=*/false));
  for (const RegionPiece& piece : pieces) {
    std::memcpy(bytes.data() + piece.offset, piece.data, piece.bytes);
  }
  return absl::OkStatus();
}

absl::Status HostExecutor::RunProgram(SequenceState& state, int32_t num_tokens,
                                      int32_t num_soft_tokens) {
  SPARK_RETURN_IF_ERROR(CheckOwnSequence(state));
  SPARK_RETURN_IF_ERROR(CheckProgramCall(plan_, num_tokens, num_soft_tokens));
  // Every block of the sequence is allocated: the program reads whatever the caches hold.
  const std::vector<int32_t> every_block = pool_.EveryBlockPosition();
  SequenceStep part;
  part.sequence = &state;
  part.call.positions = every_block;
  SPARK_RETURN_IF_ERROR(BindSequences(absl::MakeConstSpan(&part, 1)));
  if (plan_.input_sequences >= 0) {  // every token is the sequence's: row 0 of the tables
    std::fill_n(reinterpret_cast<int32_t*>(BufferData(plan_.input_sequences)), num_tokens, 0);
  }
  return RunSteps(num_tokens, num_soft_tokens, /*layout=*/nullptr, num_tokens);
}

absl::StatusOr<std::vector<float>> HostExecutor::EncodeImage(
    absl::Span<const float> pixel_patches, absl::Span<const int32_t> patch_positions) {
  SPARK_RETURN_IF_ERROR(CheckImageEncoderCall(plan_, pixel_patches, patch_positions));
  SPARK_RETURN_IF_ERROR(AllocateArena());
  const int32_t patches = static_cast<int32_t>(patch_positions.size() / 2);
  ActivationsFromF32(pixel_patches, plan_.activation_precision,
                     BufferData(plan_.input_pixel_patches));
  std::memcpy(BufferData(plan_.input_patch_positions), patch_positions.data(),
              patch_positions.size() * sizeof(int32_t));
  SPARK_RETURN_IF_ERROR(RunSteps(patches, /*num_soft_tokens=*/0, /*layout=*/nullptr,
                                 /*tail_rows=*/0));
  std::vector<float> embeddings(static_cast<size_t>(patches / 9 * plan_.model.hidden_size));
  ActivationsToF32(BufferData(plan_.output_embeddings), plan_.activation_precision,
                   absl::MakeSpan(embeddings));
  return embeddings;
}

void HostExecutor::WriteInputs(const BatchLayout& layout) {
  const size_t n = layout.ids.size();
  std::memcpy(BufferData(plan_.input_sampling), layout.sampling.data(),
              n * sizeof(abi::SamplingParams));
  std::memcpy(BufferData(plan_.input_ids), layout.ids.data(), n * sizeof(int32_t));
  std::memcpy(BufferData(plan_.input_positions), layout.positions.data(), n * sizeof(int32_t));
  if (plan_.input_sequences >= 0) {
    std::memcpy(BufferData(plan_.input_sequences), layout.sequences.data(), n * sizeof(int32_t));
  }
  if (plan_.input_last_visible >= 0) {
    std::memcpy(BufferData(plan_.input_last_visible), layout.last_visible.data(),
                n * sizeof(int32_t));
  }
  if (layout.soft_indices.empty()) return;
  ActivationsFromF32(layout.soft_embeddings, plan_.activation_precision,
                     BufferData(plan_.soft_embeddings));
  std::memcpy(BufferData(plan_.soft_indices), layout.soft_indices.data(),
              layout.soft_indices.size() * sizeof(int32_t));
}

absl::Status HostExecutor::RunSteps(int32_t num_tokens, int32_t num_soft_tokens,
                                    const BatchLayout* layout, int32_t tail_rows) {
  std::vector<HostArg> args;
  RunProfile* const profile = mutable_profile();
  std::vector<int32_t> positions;  // the profile's: the layout's, or 0, 1, ...
  if (profile != nullptr && layout == nullptr) {
    positions.resize(static_cast<size_t>(num_tokens));
    std::iota(positions.begin(), positions.end(), 0);
  }
  const absl::Span<const int32_t> profiled =
      layout != nullptr ? absl::MakeConstSpan(layout->positions) : absl::MakeConstSpan(positions);
  const bool decode_step = layout != nullptr && layout->decode_step();
  // The call's program (the decode program for one token), as the CUDA executor runs it; the
  // logits tail on the rows asked for.
  for (const ProgramLaunch& launch : ProgramFor(plan_, num_tokens, num_soft_tokens, tail_rows)) {
    const size_t i = static_cast<size_t>(launch.step);
    const Step& step = plan_.steps[i];
    const absl::Time start = profile != nullptr ? absl::Now() : absl::InfinitePast();
    args.clear();
    for (const ResolvedArg& r : ResolveStepArgs(plan_, step, bindings_, launch.num_tokens,
                                                num_soft_tokens, launch.first_row)) {
      args.push_back(
          {r.kind, reinterpret_cast<void*>(static_cast<uintptr_t>(r.address)), r.i32, r.f32});
    }
    // A kernel runner takes the activations as stored; the references compute in f32.
    const bool run_kernel = kernel_runner_ != nullptr && IsLaunch(step);
    const bool widen = !run_kernel && plan_.activation_precision == DType::kBF16;
    // Rows the op may touch: its tokens, or the soft rows scatter_rows reads (a tail step reads
    // none).
    if (widen) {
      WidenActivations(step,
                       step.logits_tail ? launch.num_tokens
                                        : std::max(launch.num_tokens, num_soft_tokens),
                       &args);
    }
    absl::Status status;
    if (step.op == abi::OpId::kAllReduce || step.op == abi::OpId::kAllGather) {
      status = RunCollective(step, args);
    } else if (run_kernel) {
      status = CheckHostArgs(step.op, args);
      if (status.ok()) status = kernel_runner_(step.op, args, launch.blocks,
                                                LaunchSharedBytes(plan_, step, launch.num_tokens));
    } else {
      status = RunHostKernel(step.op, args);
    }
    if (profile != nullptr) {
      profile->Record(i, profiled, decode_step, absl::ToDoubleSeconds(absl::Now() - start),
                      launch.num_tokens);
    }
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat(DescribeStep(static_cast<int>(i), step), ": ",
                                                      status.message()));
    }
    if (widen) WriteBackWidened(step);
    if (step_observer()) SPARK_RETURN_IF_ERROR(ObserveStep(static_cast<int>(i), num_tokens));
  }
  return absl::OkStatus();
}

absl::Status HostExecutor::RunCollective(const Step& step, absl::Span<const HostArg> args) {
  SPARK_RETURN_IF_ERROR(CheckHostArgs(step.op, args));
  if (communicator_ == nullptr) {
    if (plan_.ranks != 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "a plan of ", plan_.ranks, " ranks runs on one executor per rank, joined by a "
          "communicator (tensor parallel); this executor has none"));
    }
    return RunHostKernel(step.op, args);
  }
  if (step.op == abi::OpId::kAllReduce) {
    using abi::ops::all_reduce::Arg;
    return communicator_->AllReduce(
        static_cast<float*>(args[Arg::x].ptr),
        static_cast<int64_t>(args[Arg::num_tokens].i32) * args[Arg::cols].i32);
  }
  using abi::ops::all_gather::Arg;
  const int64_t tokens = args[Arg::num_tokens].i32, cols = args[Arg::cols].i32;
  const int64_t ranks = args[Arg::ranks].i32;
  float* gathered = static_cast<float*>(args[Arg::gathered].ptr);
  SPARK_RETURN_IF_ERROR(communicator_->AllGather(static_cast<const float*>(args[Arg::x].ptr),
                                                 gathered, tokens * cols));
  // The ranks' x one after the other -> each rank's columns side by side in every row.
  float* y = static_cast<float*>(args[Arg::y].ptr);
  for (int64_t r = 0; r < ranks; ++r) {
    for (int64_t t = 0; t < tokens; ++t) {
      std::memcpy(y + (t * ranks + r) * cols, gathered + (r * tokens + t) * cols,
                  cols * sizeof(float));
    }
  }
  return absl::OkStatus();
}

void HostExecutor::WidenActivations(const Step& step, int32_t rows, std::vector<HostArg>* args) {
  widened_.clear();
  const abi::OpSpec& spec = SpecOf(step);
  const int64_t step_rows = std::min<int64_t>(rows, plan_.max_tokens);
  for (int a = 0; a < spec.num_args; ++a) {
    if (spec.args[a].element != abi::ElementType::kAct) continue;
    if (step.args[a].kind != ArgRefKind::kBuffer) continue;  // null (ValidatePlan allows it)
    const int64_t buffer = step.args[a].index;
    auto found = std::find_if(widened_.begin(), widened_.end(),
                              [&](const WidenedBuffer& w) { return w.buffer == buffer; });
    if (found == widened_.end()) {
      const BufferInfo& info = plan_.buffers[buffer];
      WidenedBuffer w;
      w.buffer = buffer;
      w.data = static_cast<uint8_t*>((*args)[a].ptr);
      int64_t row_elements = 1;
      for (int64_t d : info.row_shape) row_elements *= d;  // validated: no overflow
      w.values.resize(static_cast<size_t>(step_rows * row_elements));
      ActivationsToF32(w.data, info.dtype, absl::MakeSpan(w.values));
      widened_.push_back(std::move(w));
      found = widened_.end() - 1;
    }
    (*args)[a].ptr = found->values.data();
  }
}

void HostExecutor::WriteBackWidened(const Step& step) {
  const abi::OpSpec& spec = SpecOf(step);
  for (const WidenedBuffer& w : widened_) {
    bool written = false;
    for (int a = 0; a < spec.num_args; ++a) {
      written |= step.args[a].kind == ArgRefKind::kBuffer && step.args[a].index == w.buffer &&
                 abi::IsWrittenRole(spec.args[a].role);
    }
    if (written) ActivationsFromF32(w.values, plan_.buffers[w.buffer].dtype, w.data);
  }
  widened_.clear();
}

absl::Status HostExecutor::ObserveStep(int step_index, int32_t num_tokens) {
  for (const OutputBuffer& output : StepOutputBuffers(step_index, plan_.steps[step_index])) {
    SPARK_RETURN_IF_ERROR(step_observer()(
        MakeStepOutput(plan_, step_index, output, num_tokens, BufferData(output.buffer))));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> CreateHostExecutor(const Plan& plan,
                                                             std::vector<WeightData> weights,
                                                             HostKernelRunner kernel_runner,
                                                             std::unique_ptr<Communicator> communicator) {
  SPARK_RETURN_IF_ERROR(CheckBoundWeights(plan, weights));
  if (communicator != nullptr && communicator->ranks() != plan.ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("a communicator of ", communicator->ranks(), " ranks for a plan of ",
                     plan.ranks));
  }
  return std::unique_ptr<Executor>(new HostExecutor(plan, std::move(weights),
                                                    std::move(kernel_runner),
                                                    std::move(communicator)));
}

}  // namespace rt
}  // namespace spark
