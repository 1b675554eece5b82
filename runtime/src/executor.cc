#include "spark/runtime/executor.h"

#include <algorithm>
#include <cstring>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "checked_math.h"
#include "file_util.h"
#include "host_allocation.h"
#include "little_endian.h"
#include "spark/runtime/element_type.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/plan.h"
#include "spark/runtime/safetensors.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {
namespace {

// Forwards to `inner` (whose sequences it hands out) and writes the outputs of each Run call's steps to one safetensors file.
class DumpingExecutor final : public Executor {
 public:
  DumpingExecutor(std::unique_ptr<Executor> inner, std::string dir)
      : inner_(std::move(inner)), dir_(std::move(dir)) {
    inner_->set_step_observer([this](const StepOutput& output) { return Collect(output); });
  }
  ~DumpingExecutor() override { ReleaseOwnSequence(); }

  absl::Status ReserveSequences(int64_t max_length, int64_t sequences,
                                int64_t full_length_sequences) override {
    return inner_->ReserveSequences(max_length, sequences, full_length_sequences);
  }
  absl::StatusOr<int64_t> DropKv(SequenceState& sequence) override { return inner_->DropKv(sequence); }
  absl::Status ShareKv(SequenceState& from, SequenceState& to, int64_t tokens) override {
    return inner_->ShareKv(from, to, tokens);
  }
  absl::StatusOr<std::unique_ptr<SequenceState>> NewSequence(int64_t max_length) override {
    return inner_->NewSequence(max_length);
  }

  absl::Status RunBatch(absl::Span<const SequenceStep> parts,
                        std::vector<StepResult>* results) override {
    tensors_.clear();
    const absl::Status run = inner_->RunBatch(parts, results);
    // Written even when a step failed: the outputs up to it are what one wants to look at.
    const std::string path = JoinPath(dir_, absl::StrFormat("run%03d.safetensors", calls_++));
    // Never through a file or link already there (the directory may be someone else's).
    const absl::Status write = WriteSafetensors(path, tensors_, ExistingFile::kRefuse);
    tensors_.clear();
    return run.ok() ? write : run;
  }

  absl::Status CopyToMemory(SequenceState& sequence, const MemoryRegion& region,
                            absl::Span<const uint8_t> bytes) override {
    return inner_->CopyToMemory(sequence, region, bytes);
  }
  absl::Status CopyFromMemory(SequenceState& sequence, const MemoryRegion& region,
                              absl::Span<uint8_t> bytes) override {
    return inner_->CopyFromMemory(sequence, region, bytes);
  }
  absl::Status RunProgram(SequenceState& sequence, int32_t num_tokens,
                          int32_t num_soft_tokens) override {
    return inner_->RunProgram(sequence, num_tokens, num_soft_tokens);
  }
  std::string name() const override { return inner_->name(); }
  MemoryUsage memory_usage() const override { return inner_->memory_usage(); }
  const RunProfile* profile() const override { return inner_->profile(); }

 private:
  absl::Status Collect(const StepOutput& output) {
    OwnedTensor tensor;
    tensor.name = output.name;
    tensor.dtype = std::string(SafetensorsDTypeName(output.dtype));
    tensor.shape = output.shape;
    tensor.bytes.assign(static_cast<const char*>(output.data), output.num_bytes);
    tensors_.push_back(std::move(tensor));
    return absl::OkStatus();
  }

  std::unique_ptr<Executor> inner_;
  std::string dir_;
  int calls_ = 0;
  std::vector<OwnedTensor> tensors_;
};

}  // namespace

absl::Status Executor::CheckOwnSequence(const SequenceState& sequence) const {
  if (sequence.owner() == this) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(name(), " executor: the sequence was not made by this executor"));
}

absl::Status Executor::CopyToMemory(SequenceState&, const MemoryRegion&,
                                    absl::Span<const uint8_t>) {
  return absl::UnimplementedError(absl::StrCat(name(), " executor: no direct memory access"));
}
absl::Status Executor::CopyFromMemory(SequenceState&, const MemoryRegion&, absl::Span<uint8_t>) {
  return absl::UnimplementedError(absl::StrCat(name(), " executor: no direct memory access"));
}
absl::Status Executor::RunProgram(SequenceState&, int32_t, int32_t) {
  return absl::UnimplementedError(absl::StrCat(name(), " executor: no direct program runs"));
}

absl::StatusOr<std::vector<float>> Executor::EncodeImage(absl::Span<const float>,
                                                         absl::Span<const int32_t>) {
  return absl::UnimplementedError(absl::StrCat(name(), " executor: no image encoder"));
}

absl::Status CheckImageEncoderCall(const Plan& plan, absl::Span<const float> pixel_patches,
                                   absl::Span<const int32_t> patch_positions) {
  if (!plan.is_image_encoder()) {
    return absl::FailedPreconditionError("this executor's plan is not an image encoder");
  }
  const int64_t pooled = int64_t{9};  // 3 x 3 patches per soft token (image.h)
  const int64_t patches = static_cast<int64_t>(patch_positions.size() / 2);
  if (patch_positions.size() % 2 != 0 ||
      static_cast<int64_t>(pixel_patches.size()) != patches * kPixelPatchValues) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an image's pixel patches (", pixel_patches.size(), " values) and positions (",
        patch_positions.size(), " values) do not describe the same patches (", kPixelPatchValues,
        " values and 2 coordinates each)"));
  }
  if (patches < pooled || patches % pooled != 0 || patches > plan.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an image of ", patches, " patches: the image encoder takes a multiple of ", pooled,
        " from ", pooled, " to ", plan.max_tokens, " (", plan.max_tokens / pooled,
        " soft tokens, spark-compile --max-image-tokens)"));
  }
  int64_t table_size = std::numeric_limits<int64_t>::max();
  for (const Step& step : plan.steps) {
    if (step.op == abi::OpId::kPatchPositionEmbedding) {
      table_size = std::min(table_size,
                            StepSizeArg(step, abi::ops::patch_position_embedding::table_size, 0));
    }
  }
  for (size_t i = 0; i < patch_positions.size(); ++i) {
    if (patch_positions[i] < 0 || patch_positions[i] >= table_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "patch ", i / 2, " has ", i % 2 == 0 ? "x" : "y", " = ", patch_positions[i],
          ", outside the vision tower's position table [0, ", table_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status Executor::Prepare(int64_t max_length) {
  own_sequence_.reset();  // its caches are freed before the new ones are allocated
  SPARK_ASSIGN_OR_RETURN(own_sequence_, NewSequence(max_length));
  return absl::OkStatus();
}

absl::Status Executor::RunStep(absl::Span<const int32_t> ids,
                               absl::Span<const int32_t> positions, const SoftTokenChunk* soft,
                               std::vector<float>* logits) {
  if (own_sequence_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(name(), " executor: Prepare must be called before RunStep"));
  }
  StepCall call;
  call.ids = ids;
  call.positions = positions;
  call.soft = soft;
  call.rows = LogitRows::kAll;
  StepResult result;
  SPARK_RETURN_IF_ERROR(Run(*own_sequence_, call, &result));
  *logits = std::move(result.logits);
  return absl::OkStatus();
}

absl::Status Executor::ReserveSequences(int64_t, int64_t, int64_t) { return absl::OkStatus(); }
absl::StatusOr<int64_t> Executor::DropKv(SequenceState&) { return 0; }
absl::Status Executor::CheckSharePair(const SequenceState& from, const SequenceState& to) const {
  SPARK_RETURN_IF_ERROR(CheckOwnSequence(from));
  SPARK_RETURN_IF_ERROR(CheckOwnSequence(to));
  if (&from == &to) return absl::InvalidArgumentError("a sequence cannot share its own KV blocks");
  return absl::OkStatus();
}

absl::Status Executor::ShareKv(SequenceState&, SequenceState&, int64_t) {
  return absl::UnimplementedError(absl::StrCat(name(), " cannot share KV cache blocks"));
}

namespace {
constexpr absl::string_view kKvPoolExhaustedPayload = "spark.kv_pool_exhausted";
}  // namespace

absl::Status KvPoolExhausted(absl::string_view message) {
  absl::Status status = absl::ResourceExhaustedError(message);
  status.SetPayload(kKvPoolExhaustedPayload, absl::Cord("1"));
  return status;
}

bool IsKvPoolExhausted(const absl::Status& status) {
  return absl::IsResourceExhausted(status) &&
         status.GetPayload(kKvPoolExhaustedPayload).has_value();
}

absl::Status Executor::Run(SequenceState& sequence, const StepCall& call, StepResult* result) {
  std::vector<StepResult> results;
  const SequenceStep part{&sequence, call};
  SPARK_RETURN_IF_ERROR(RunBatch(absl::MakeConstSpan(&part, 1), &results));
  *result = std::move(results[0]);
  return absl::OkStatus();
}

int64_t KvCapacity(const KvCacheInfo& cache, int64_t max_length, int64_t max_tokens) {
  const int64_t slots = cache.kind == KvKind::kFull
                            ? max_length
                            : std::min(max_length, cache.window - 1 + max_tokens);
  return (slots + abi::kKvBlockRows - 1) / abi::kKvBlockRows * abi::kKvBlockRows;
}

std::vector<int64_t> KvSequencesHeld(const std::vector<KvCacheInfo>& caches, int64_t max_length,
                                     int64_t max_tokens, int64_t sequences,
                                     int64_t full_length_sequences) {
  int64_t largest = 0;  // (a plan without KV caches has none)
  for (const KvCacheInfo& cache : caches) {
    largest = std::max(largest, KvCapacity(cache, max_length, max_tokens));
  }
  std::vector<int64_t> held;
  held.reserve(caches.size());
  for (const KvCacheInfo& cache : caches) {
    held.push_back(KvCapacity(cache, max_length, max_tokens) == largest ? full_length_sequences
                                                                        : sequences);
  }
  return held;
}

namespace {

// The weight `info` says to compute from the checkpoint bytes `stored` (its tensor or parts):
// for kReciprocal, 1 / x of every little-endian f32 element (ValidatePlan admits it on f32
// weights only), in memory the result owns.
absl::StatusOr<WeightData> TransformedWeight(const WeightInfo& info, const WeightData& stored) {
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  SPARK_RETURN_IF_ERROR(WithHostAllocation(absl::StrCat("weight ", PrintableText(info.name)),
                                           stored.num_bytes,
                                           [&] { bytes->resize(stored.num_bytes); }));
  CopyWeightBytes(stored, bytes->data());
  for (uint64_t i = 0; i + 4 <= bytes->size(); i += 4) {
    const uint32_t bits = LoadLittleEndian<uint32_t>(reinterpret_cast<const char*>(&(*bytes)[i]));
    float x;
    std::memcpy(&x, &bits, sizeof(x));
    const float inverse = 1.0f / x;
    uint32_t out;
    std::memcpy(&out, &inverse, sizeof(out));
    for (int b = 0; b < 4; ++b) (*bytes)[i + b] = static_cast<uint8_t>(out >> (8 * b));
  }
  WeightData weight;
  weight.data = bytes->data();
  weight.num_bytes = bytes->size();
  weight.computed = std::move(bytes);
  return weight;
}

// The bytes of rank `rank`'s slice of `whole` (the weight's checkpoint bytes: its tensor, or its
// parts one after the other): for every index of the axes before the sharded one and every
// chunk, one run of the slice's rows (WeightShard), adjacent runs joined. The runs point into
// the checkpoint; one run is the weight in place, several are assembled like parts.
WeightData ShardOf(const WeightInfo& info, const WeightData& whole, int64_t rank, int64_t ranks) {
  const std::vector<int64_t> shape = info.CheckpointShape();
  const WeightShard& shard = info.shard;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < shard.axis; ++d) outer *= shape[d];
  for (size_t d = shard.axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t dim = shape[shard.axis];
  const int64_t chunk = dim / shard.chunks;
  const int64_t slice = chunk / shard.parts;
  const int64_t part = shard.PartOf(rank, ranks);
  // Elements to bytes (packed float4: two per byte; ValidatePlan keeps runs on whole bytes).
  const auto bytes = [&](int64_t elements) {
    return *CheckedTensorBytes({elements}, info.dtype);
  };
  // The whole's bytes as pieces: one tensor, or its parts.
  std::vector<WeightPart> pieces = whole.assembled()
                                       ? whole.parts
                                       : std::vector<WeightPart>{{whole.data, whole.num_bytes}};
  WeightData out;
  size_t piece = 0;
  uint64_t piece_start = 0;  // offset of pieces[piece] in the whole
  const auto add = [&](uint64_t offset, uint64_t length) {
    while (length > 0) {
      while (offset >= piece_start + pieces[piece].num_bytes) {
        piece_start += pieces[piece].num_bytes;
        ++piece;
      }
      const uint64_t within = offset - piece_start;
      const uint64_t take = std::min(length, pieces[piece].num_bytes - within);
      const uint8_t* data = pieces[piece].data + within;
      if (!out.parts.empty() &&
          out.parts.back().data + out.parts.back().num_bytes == data) {
        out.parts.back().num_bytes += take;
      } else {
        out.parts.push_back({data, take});
      }
      out.num_bytes += take;
      offset += take;
      length -= take;
    }
  };
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < shard.chunks; ++c) {
      add(bytes((o * dim + c * chunk + part * slice) * inner), bytes(slice * inner));
    }
  }
  if (out.parts.size() == 1) {  // one run: the weight in place
    out.data = out.parts[0].data;
    out.parts.clear();
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<WeightData>> BindWeights(const Plan& plan,
                                                    const Checkpoint& checkpoint, int64_t rank) {
  if (rank < 0 || rank >= plan.ranks) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " of a plan of ", plan.ranks,
                                                   plan.ranks == 1 ? " rank" : " ranks"));
  }
  SPARK_RETURN_IF_ERROR(CheckPlanWeights(plan, checkpoint));
  std::vector<WeightData> weights;
  weights.reserve(plan.weights.size());
  const auto find = [&](const std::string& name) -> absl::StatusOr<const TensorView*> {
    const TensorView* tensor = checkpoint.Find(name);
    if (tensor == nullptr) {
      return absl::NotFoundError(
          PrintableText(absl::StrCat("weight ", name, " is not in the checkpoint")));
    }
    return tensor;
  };
  for (const WeightInfo& info : plan.weights) {
    WeightData weight;
    if (info.parts.empty()) {
      SPARK_ASSIGN_OR_RETURN(const TensorView* tensor, find(info.name));
      weight.data = tensor->data;
      weight.num_bytes = tensor->num_bytes;
    } else {
      for (const std::string& part : info.parts) {
        SPARK_ASSIGN_OR_RETURN(const TensorView* tensor, find(part));
        weight.parts.push_back({tensor->data, tensor->num_bytes});
        weight.num_bytes += tensor->num_bytes;  // CheckPlanWeights checked each part's size
      }
    }
    if (info.shard.sharded()) weight = ShardOf(info, weight, rank, plan.ranks);
    if (info.transform != WeightTransform::kNone) {
      SPARK_ASSIGN_OR_RETURN(weight, TransformedWeight(info, weight));
    }
    weights.push_back(std::move(weight));
  }
  return weights;
}

void CopyWeightBytes(const WeightData& weight, uint8_t* dst) {
  if (!weight.assembled()) {
    if (weight.num_bytes > 0) std::memcpy(dst, weight.data, weight.num_bytes);
    return;
  }
  for (const WeightPart& part : weight.parts) {
    if (part.num_bytes > 0) std::memcpy(dst, part.data, part.num_bytes);
    dst += part.num_bytes;
  }
}

WeightPlacement PlaceIntegratedWeights(const Plan& plan, const std::vector<WeightData>& weights) {
  WeightPlacement placement;
  placement.copied.assign(weights.size(), false);
  for (size_t w = 0; w < weights.size() && w < plan.weights.size(); ++w) {
    const uintptr_t address = reinterpret_cast<uintptr_t>(weights[w].data);
    const uintptr_t element = static_cast<uintptr_t>(std::max(1, DTypeSize(plan.weights[w].dtype)));
    const bool vector_sized = weights[w].num_bytes >= kWeightVectorAlignment;
    if (weights[w].num_bytes > 0 &&
        (weights[w].assembled() || weights[w].computed != nullptr || address % element != 0 ||
         (vector_sized && address % kWeightVectorAlignment != 0))) {
      placement.copied[w] = true;
      ++placement.num_copied;
      placement.copied_bytes += weights[w].num_bytes;
    }
  }
  return placement;
}

std::unique_ptr<Executor> WithStepDump(std::unique_ptr<Executor> executor, std::string dir) {
  return std::make_unique<DumpingExecutor>(std::move(executor), std::move(dir));
}

}  // namespace rt
}  // namespace spark
