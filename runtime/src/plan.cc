// Reader, validator and writer of the `.spark.plan` section (docs/plan-format.md).
#include "spark/runtime/plan.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checked_math.h"
#include "host_allocation.h"
#include "json_document.h"
#include "plan_generated.h"
#include "little_endian.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/entry_point.h"
#include "spark/runtime/kernel_abi.h"
#include "spark/runtime/plan_format.h"
#include "spark/runtime/target.h"
#include "spark/runtime/status_macros.h"
#include "step_bounds.h"

namespace spark {
namespace rt {
namespace {

namespace pf = ::spark::plan_format;
namespace fb = ::spark::rt::fb;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr absl::string_view kRecompile =
    "recompile the model with this release's spark-compile";

// ---------------------------------------------------------------------------------------------
// Errors

// "<origin>: plan <path>: <message>"; the top-level object has an empty path. Names from the
// plan in `message` (and the file name) are made printable (PrintableText).
absl::Status PlanError(absl::string_view origin, absl::string_view path,
                       absl::string_view message) {
  return absl::InvalidArgumentError(
      PrintableText(absl::StrCat(origin, ": plan", path.empty() ? "" : " ", path, ": ", message)));
}

std::string IndexPath(absl::string_view path, size_t index) {
  return absl::StrCat(path, "[", index, "]");
}

// "expected an integer in [min, max]" (or ">= min", or nothing for the whole int64 range).
std::string ExpectedInteger(int64_t min, int64_t max) {
  if (min == kInt64Min && max == kInt64Max) return "expected an integer";
  if (max == kInt64Max) return absl::StrCat("expected an integer >= ", min);
  return absl::StrCat("expected an integer in [", min, ", ", max, "]");
}

// The message for an array of a plan longer than plan_format.h allows.
std::string TooManyEntries(uint64_t count, uint64_t max_count) {
  return absl::StrCat("expected at most ", max_count,
                      " entries (this runtime's limit, over 15 times what the largest Gemma 4 "
                      "plan has), found ",
                      count, "; the file is damaged or was not written by spark-compile");
}

// ---------------------------------------------------------------------------------------------
// Section header

std::string HexBytes(absl::string_view bytes) {
  std::string out;
  for (const char c : bytes) absl::StrAppendFormat(&out, "%02x", static_cast<unsigned char>(c));
  return out;
}

// Checks the 32-byte header and the padding; returns the payload it frames.
absl::StatusOr<absl::string_view> ReadSectionPayload(absl::string_view section,
                                                     absl::string_view file) {
  const std::string origin = PrintableText(file);
  if (section.size() < pf::kHeaderSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": the .spark.plan section is truncated: it has ", section.size(),
        " bytes, the plan header alone needs ", pf::kHeaderSize,
        "; the file is damaged, recompile it with spark-compile"));
  }
  if (std::memcmp(section.data(), pf::kMagic, sizeof(pf::kMagic)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": the .spark.plan section does not start with the plan magic \"SPKPLAN\" ",
        "(found bytes ", HexBytes(section.substr(0, sizeof(pf::kMagic))),
        "); it was not written by spark-compile or is damaged"));
  }
  const uint32_t version = LoadLittleEndian<uint32_t>(section.data() + 8);
  if (version != pf::kPlanVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": plan version ", version,
                     " is not supported (this runtime reads version ", pf::kPlanVersion, "); ",
                     kRecompile));
  }
  const uint32_t flags = LoadLittleEndian<uint32_t>(section.data() + 12);
  if (flags != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: plan flags 0x%x are not supported (this runtime expects 0); %s", origin, flags,
        kRecompile));
  }
  const uint64_t payload_size = LoadLittleEndian<uint64_t>(section.data() + 16);
  if (payload_size > pf::kMaxPayloadSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": the plan header announces a plan of ", payload_size,
        " bytes, above the limit of ", pf::kMaxPayloadSize,
        "; the file is damaged, recompile it with spark-compile"));
  }
  const uint64_t available = section.size() - pf::kHeaderSize;
  if (payload_size > available) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": the .spark.plan section is truncated: its header announces a plan of ",
        payload_size, " bytes but only ", available,
        " follow; the file is damaged, recompile it with spark-compile"));
  }
  const absl::string_view payload = section.substr(pf::kHeaderSize, payload_size);
  const uint64_t expected = LoadLittleEndian<uint64_t>(section.data() + 24);
  const uint64_t actual = pf::Fnv1a64(payload.data(), payload.size());
  if (expected != actual) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: plan checksum mismatch (header 0x%016x, computed 0x%016x); the file is damaged, "
        "copy it again or recompile it with spark-compile",
        origin, expected, actual));
  }
  const absl::string_view padding = section.substr(pf::kHeaderSize + payload_size);
  const size_t junk = padding.find_first_not_of('\0');
  if (junk != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": the .spark.plan section has non-zero bytes after the plan (at section offset ",
        pf::kHeaderSize + payload_size + junk, "); the file is damaged"));
  }
  return payload;
}

// ---------------------------------------------------------------------------------------------
// FlatBuffers payload -> Plan. The generated verifier has checked the structure (offsets, sizes,
// required fields); this checks what it cannot: enum values (a verifier takes any byte), the
// array limits, op names and literal floats. ValidatePlan checks the meaning.

// The schema's enums are the runtime's, in the same order (plan.fbs says so; this checks it).
static_assert(static_cast<int>(fb::DType::f32) == static_cast<int>(DType::kF32) &&
                  static_cast<int>(fb::DType::bf16) == static_cast<int>(DType::kBF16) &&
                  static_cast<int>(fb::DType::i32) == static_cast<int>(DType::kI32) &&
                  static_cast<int>(fb::DType::f16) == static_cast<int>(DType::kF16) &&
                  static_cast<int>(fb::DType::u8) == static_cast<int>(DType::kU8) &&
                  static_cast<int>(fb::DType::f8E4M3FN) == static_cast<int>(DType::kF8E4M3FN) &&
                  static_cast<int>(fb::DType::f4E2M1FN) == static_cast<int>(DType::kF4E2M1FN) &&
                  static_cast<int>(fb::DType::MAX) + 1 == std::size(kAllDTypes),
              "plan.fbs DType and element_type.h DType must list the same types in one order");
static_assert(static_cast<int>(fb::ArgKind::buffer) == static_cast<int>(ArgRefKind::kBuffer) &&
                  static_cast<int>(fb::ArgKind::weight) == static_cast<int>(ArgRefKind::kWeight) &&
                  static_cast<int>(fb::ArgKind::k_cache) == static_cast<int>(ArgRefKind::kKCache) &&
                  static_cast<int>(fb::ArgKind::v_cache) == static_cast<int>(ArgRefKind::kVCache) &&
                  static_cast<int>(fb::ArgKind::kv_capacity) ==
                      static_cast<int>(ArgRefKind::kKvCapacity) &&
                  static_cast<int>(fb::ArgKind::kv_block_table) ==
                      static_cast<int>(ArgRefKind::kKvBlockTable) &&
                  static_cast<int>(fb::ArgKind::null_pointer) ==
                      static_cast<int>(ArgRefKind::kNull) &&
                  static_cast<int>(fb::ArgKind::num_tokens) ==
                      static_cast<int>(ArgRefKind::kNumTokens) &&
                  static_cast<int>(fb::ArgKind::num_soft_tokens) ==
                      static_cast<int>(ArgRefKind::kNumSoftTokens) &&
                  static_cast<int>(fb::ArgKind::i32) == static_cast<int>(ArgRefKind::kI32) &&
                  static_cast<int>(fb::ArgKind::f32) == static_cast<int>(ArgRefKind::kF32) &&
                  fb::ArgKind::MAX == fb::ArgKind::f32,
              "plan.fbs ArgKind and plan.h ArgRefKind must list the same kinds in one order");
static_assert(static_cast<int>(fb::WeightTransform::reciprocal) ==
                      static_cast<int>(WeightTransform::kReciprocal) &&
                  fb::WeightTransform::MAX == fb::WeightTransform::reciprocal,
              "plan.fbs WeightTransform and plan.h WeightTransform must agree");

// Keeps the first error met while reading; reads after an error return defaults.
class Errors {
 public:
  explicit Errors(absl::string_view origin) : origin_(origin) {}
  void Fail(absl::string_view path, absl::string_view message) {
    if (status_.ok()) status_ = PlanError(origin_, path, message);
  }
  const absl::Status& status() const { return status_; }

 private:
  absl::string_view origin_;
  absl::Status status_;
};

std::string Str(const flatbuffers::String* text) { return text ? text->str() : std::string(); }

// Vectors and structs are read with memcpy, never through references: the verifier checks the
// alignment of a vector's length, not of its elements, so a damaged buffer may hold an int64
// vector or an Arg vector at an address only 4-byte aligned (the fuzzer found one).
std::vector<int64_t> Longs(const flatbuffers::Vector<int64_t>* values) {
  if (values == nullptr) return {};
  std::vector<int64_t> out(values->size());
  if (!out.empty()) std::memcpy(out.data(), values->Data(), out.size() * sizeof(int64_t));
  return out;  // little-endian hosts only (plan_format.h)
}

template <typename Struct>
Struct CopyStruct(const void* data) {
  Struct out;
  std::memcpy(static_cast<void*>(&out), data, sizeof(Struct));
  return out;
}

// The enum value `code` of a schema enum with values 0..max, or an error naming the field.
template <typename Enum>
bool ReadEnum(Enum code, const char* what, absl::string_view path, Errors* errors) {
  const int value = static_cast<int>(code);
  if (value >= 0 && value <= static_cast<int>(Enum::MAX)) return true;
  errors->Fail(path, absl::StrCat("unknown ", what, " code ", value, " (this runtime reads plan "
                                  "version ", pf::kPlanVersion, ", which knows 0 to ",
                                  static_cast<int>(Enum::MAX), "); ", kRecompile));
  return false;
}

DType ReadDType(fb::DType code, absl::string_view path, Errors* errors) {
  return ReadEnum(code, "element type", path, errors) ? kAllDTypes[static_cast<int>(code)]
                                                      : DType::kF32;
}

ModelInfo ReadModel(const fb::Model& in) {
  ModelInfo model;
  model.variant = Str(in.variant());
  model.architecture = Str(in.architecture());
  model.vocab_size = in.vocab_size();
  model.hidden_size = in.hidden_size();
  model.num_layers = in.num_layers();
  model.max_position_embeddings = in.max_position_embeddings();
  model.eos_token_ids = Longs(in.eos_token_ids());
  model.bos_token_id = in.bos_token_id();
  model.pad_token_id = in.pad_token_id();
  model.soft_token_ids = Longs(in.soft_token_ids());
  model.weight_prefix = Str(in.weight_prefix());
  model.image_token_id = in.image_token_id();
  model.boi_token_id = in.boi_token_id();
  model.eoi_token_id = in.eoi_token_id();
  return model;
}

BufferInfo ReadBuffer(const fb::Buffer& in, const std::string& path, Errors* errors) {
  BufferInfo buffer;
  buffer.name = Str(in.name());
  buffer.dtype = ReadDType(in.dtype(), absl::StrCat(path, ".dtype"), errors);
  buffer.row_shape = Longs(in.row_shape());
  buffer.offset = in.offset();
  return buffer;
}

WeightInfo ReadWeight(const fb::Weight& in, const std::string& path, Errors* errors) {
  WeightInfo weight;
  weight.name = Str(in.name());
  weight.dtype = ReadDType(in.dtype(), absl::StrCat(path, ".dtype"), errors);
  weight.shape = Longs(in.shape());
  if (in.parts() != nullptr) {
    if (in.parts()->size() > pf::kMaxWeightParts) {
      errors->Fail(absl::StrCat(path, ".parts"),
                   TooManyEntries(in.parts()->size(), pf::kMaxWeightParts));
    } else {
      for (const flatbuffers::String* part : *in.parts()) weight.parts.push_back(Str(part));
    }
  }
  weight.part_shape = Longs(in.part_shape());
  if (ReadEnum(in.transform(), "weight transform", absl::StrCat(path, ".transform"), errors)) {
    weight.transform = static_cast<WeightTransform>(in.transform());
  }
  weight.shard = {in.shard_axis(), in.shard_parts(), in.shard_chunks()};
  return weight;
}

KvCacheInfo ReadKvCache(const fb::KvCache& in, const std::string& path, Errors* errors) {
  KvCacheInfo cache;
  cache.name = Str(in.name());
  if (ReadEnum(in.kind(), "KV cache kind", absl::StrCat(path, ".kind"), errors)) {
    cache.kind = in.kind() == fb::KvKind::sliding ? KvKind::kSliding : KvKind::kFull;
  }
  cache.window = in.window();
  cache.kv_heads = in.kv_heads();
  cache.head_dim = in.head_dim();
  cache.dtype = ReadDType(in.dtype(), absl::StrCat(path, ".dtype"), errors);
  return cache;
}

StepArg ReadArg(const fb::Arg& in, const std::string& path, Errors* errors) {
  StepArg arg;
  if (!ReadEnum(in.kind(), "argument kind", absl::StrCat(path, ".kind"), errors)) return arg;
  arg.kind = static_cast<ArgRefKind>(in.kind());
  arg.index = in.index();
  arg.i32 = in.i32();
  arg.f32 = in.f32();
  if (arg.kind == ArgRefKind::kF32 && !std::isfinite(arg.f32)) {
    errors->Fail(absl::StrCat(path, ".f32"),
                 absl::StrCat("expected a finite f32 literal, found ", arg.f32));
  }
  return arg;
}

// The args vector of a Launch or Transfer (structs copied out: the buffer may not align them).
void ReadArgs(const flatbuffers::Vector<const fb::Arg*>& in, const std::string& path, Errors* errors,
              std::vector<StepArg>* out) {
  const uint8_t* args = in.Data();
  for (flatbuffers::uoffset_t i = 0; i < in.size(); ++i) {
    out->push_back(ReadArg(CopyStruct<fb::Arg>(args + i * sizeof(fb::Arg)),
                           IndexPath(absl::StrCat(path, ".args"), i), errors));
  }
}

// The op named `op` of a step of kind `kind` ("launch" or "transfer"), which must be that kind
// of op in this runtime's registry.
void ReadStepOp(const std::string& op, bool launch, const std::string& path, Errors* errors,
                Step* step) {
  const abi::OpSpec* spec = abi::FindOp(op.c_str());
  if (spec == nullptr) {
    errors->Fail(path, absl::StrCat("unknown op \"", op,
                                    "\" (not in this runtime's op registry); ", kRecompile));
  } else if (spec->kernel() != launch) {
    errors->Fail(path, absl::StrCat("op \"", op, "\" is a ", spec->kernel() ? "kernel" : "transfer",
                                    " op, but the step is a ", launch ? "launch" : "transfer"));
  } else {
    step->op = spec->id;
  }
}

Step ReadStep(const fb::Step& in, const std::string& path, Errors* errors) {
  Step step;
  step.source = Str(in.source());
  step.logits_tail = in.logits_tail();
  if (const fb::Transfer* transfer = in.kind_as_Transfer()) {
    ReadStepOp(Str(transfer->op()), /*launch=*/false, path, errors, &step);
    step.block[0] = 0;
    step.grid = {0, 0, 0};
    ReadArgs(*transfer->args(), path, errors, &step.args);
    return step;
  }
  const fb::Launch* launch = in.kind_as_Launch();
  if (launch == nullptr) {
    errors->Fail(absl::StrCat(path, ".kind"),
                 absl::StrCat("unknown step kind ", static_cast<int>(in.kind_type()),
                              " (this runtime reads plan version ", pf::kPlanVersion,
                              ", whose steps are kernel launches and transfers); ", kRecompile));
    return step;
  }
  ReadStepOp(Str(launch->op()), /*launch=*/true, path, errors, &step);
  step.kernel = Str(launch->kernel());
  const auto grid = CopyStruct<fb::GridRule>(launch->grid());
  step.grid = {grid.per_token(), grid.fixed(), grid.divisor()};
  const auto block = CopyStruct<fb::Dim3>(launch->block());
  step.block[0] = block.x();
  step.block[1] = block.y();
  step.block[2] = block.z();
  step.shared_bytes = launch->shared_bytes();
  ReadArgs(*launch->args(), path, errors, &step.args);
  return step;
}

Program ReadProgram(const fb::Program& in, const std::string& path, Errors* errors) {
  Program program;
  program.name = Str(in.name());
  program.min_tokens = in.min_tokens();
  program.max_tokens = in.max_tokens();
  program.soft_tokens = in.soft_tokens();
  if (in.steps()->size() > pf::kMaxSteps) {
    errors->Fail(absl::StrCat(path, ".steps"), TooManyEntries(in.steps()->size(), pf::kMaxSteps));
  } else {
    program.steps = Longs(in.steps());
  }
  return program;
}

// Reads each element of `elements` (a plan array called `key`) with `read_one`; at most
// `max_count` of them (plan_format.h's limits: what a hostile plan can make the reader allocate
// is bounded).
template <typename T, typename Element, typename ReadOne>
std::vector<T> ReadArray(const flatbuffers::Vector<flatbuffers::Offset<Element>>& elements,
                         absl::string_view key, uint64_t max_count, Errors* errors,
                         ReadOne read_one) {
  std::vector<T> out;
  if (elements.size() > max_count) {
    errors->Fail(key, TooManyEntries(elements.size(), max_count));
    return out;
  }
  for (flatbuffers::uoffset_t i = 0; i < elements.size(); ++i) {
    out.push_back(read_one(*elements.Get(i), IndexPath(key, i), errors));
  }
  return out;
}

Plan PlanFromBuffer(const fb::Plan& in, Errors* errors) {
  Plan plan;
  plan.version = pf::kPlanVersion;
  plan.target = Str(in.target());
  plan.ranks = in.ranks();
  plan.max_tokens = in.max_tokens();
  plan.arena_bytes = in.arena_bytes();
  plan.activation_precision =
      ReadDType(in.activation_precision(), "activation_precision", errors);
  plan.model = ReadModel(*in.model());
  plan.input_ids = in.inputs()->ids();
  plan.input_positions = in.inputs()->positions();
  plan.soft_embeddings = in.inputs()->soft_embeddings();
  plan.soft_indices = in.inputs()->soft_indices();
  plan.input_last_visible = in.inputs()->last_visible();
  plan.input_sampling = in.inputs()->sampling();
  plan.input_sequences = in.inputs()->sequences();
  plan.input_pixel_patches = in.inputs()->pixel_patches();
  plan.input_patch_positions = in.inputs()->patch_positions();
  plan.output_logits = in.outputs()->logits();
  plan.output_tokens = in.outputs()->tokens();
  plan.output_embeddings = in.outputs()->embeddings();
  plan.buffers = ReadArray<BufferInfo>(*in.buffers(), "buffers", pf::kMaxBuffers, errors,
                                       ReadBuffer);
  plan.weights = ReadArray<WeightInfo>(*in.weights(), "weights", pf::kMaxWeights, errors,
                                       ReadWeight);
  plan.kv_caches = ReadArray<KvCacheInfo>(*in.kv_caches(), "kv_caches", pf::kMaxKvCaches, errors,
                                          ReadKvCache);
  plan.steps = ReadArray<Step>(*in.steps(), "steps", pf::kMaxSteps, errors, ReadStep);
  plan.programs = ReadArray<Program>(*in.programs(), "programs", pf::kMaxPrograms, errors,
                                     ReadProgram);
  if (in.image_encoder() != nullptr) {
    plan.image_encoder = std::make_shared<const Plan>(PlanFromBuffer(*in.image_encoder(), errors));
  }
  return plan;
}

// The most tables a plan buffer may hold (the verifier's bound on its work): a Gemma 4 31B plan
// has about 5,000.
constexpr flatbuffers::uoffset_t kMaxPlanTables = 1u << 20;

// Verifies `payload` as a plan buffer and reads it. The buffer is copied to 8-byte-aligned memory
// first: the section may sit at any offset of the file.
absl::StatusOr<Plan> ReadPlanPayload(absl::string_view payload, absl::string_view origin) {
  std::vector<uint64_t> aligned((payload.size() + 7) / 8);
  if (!payload.empty()) std::memcpy(aligned.data(), payload.data(), payload.size());
  const auto* bytes = reinterpret_cast<const uint8_t*>(aligned.data());
  if (payload.size() < 8 || !fb::PlanBufferHasIdentifier(bytes)) {
    return absl::InvalidArgumentError(PrintableText(absl::StrCat(
        origin, ": the plan does not carry the plan buffer identifier \"", fb::PlanIdentifier(),
        "\"; the file is damaged or was not written by spark-compile")));
  }
  flatbuffers::Verifier verifier(bytes, payload.size(), /*max_depth=*/16, kMaxPlanTables);
  if (!fb::VerifyPlanBuffer(verifier)) {
    return absl::InvalidArgumentError(PrintableText(absl::StrCat(
        origin, ": the plan buffer is malformed (FlatBuffers verification failed: an offset or "
        "size points outside it, or a required field is missing); the file is damaged, "
        "recompile it with spark-compile")));
  }
  Errors errors(origin);
  Plan plan = PlanFromBuffer(*fb::GetPlan(bytes), &errors);
  if (!errors.status().ok()) return errors.status();
  return plan;
}

// ---------------------------------------------------------------------------------------------
// Validation

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status CheckRange(absl::string_view origin, absl::string_view path, int64_t value,
                        int64_t min, int64_t max) {
  if (value >= min && value <= max) return absl::OkStatus();
  return PlanError(origin, path, absl::StrCat(ExpectedInteger(min, max), ", found ", value));
}

// `id` must index one of `count` things called `what` ("buffer", "weight", "kv cache").
absl::Status CheckId(absl::string_view origin, absl::string_view path, absl::string_view what,
                     int64_t id, size_t count) {
  if (id >= 0 && static_cast<uint64_t>(id) < count) return absl::OkStatus();
  return PlanError(origin, path,
                   absl::StrCat(what, " id ", id, " is out of range (the plan has ", count, " ",
                                what, count == 1 ? "" : "s", ")"));
}

absl::Status CheckDims(absl::string_view origin, absl::string_view path,
                       const std::vector<int64_t>& shape) {
  for (size_t i = 0; i < shape.size(); ++i) {
    SPARK_RETURN_IF_ERROR(CheckRange(origin, IndexPath(path, i), shape[i], 1, kInt64Max));
  }
  return absl::OkStatus();
}

// The limits of plan_format.h (ReadObjects applies them while reading).
absl::Status ValidateCounts(const Plan& plan, absl::string_view origin) {
  const struct {
    const char* key;
    size_t count;
    uint64_t max_count;
  } arrays[] = {{"buffers", plan.buffers.size(), pf::kMaxBuffers},
                {"weights", plan.weights.size(), pf::kMaxWeights},
                {"kv_caches", plan.kv_caches.size(), pf::kMaxKvCaches},
                {"steps", plan.steps.size(), pf::kMaxSteps},
                {"programs", plan.programs.size(), pf::kMaxPrograms}};
  for (const auto& array : arrays) {
    if (array.count > array.max_count) {
      return PlanError(origin, array.key, TooManyEntries(array.count, array.max_count));
    }
  }
  if (plan.steps.empty()) {
    return PlanError(origin, "steps",
                     "expected at least one step, found none (a plan computes the logits in its "
                     "steps); the file is damaged or was not written by spark-compile");
  }
  return absl::OkStatus();
}

absl::Status ValidateTopLevel(const Plan& plan, absl::string_view origin) {
  absl::StatusOr<Target> target = ParseTarget(plan.target);
  if (!target.ok()) return PlanError(origin, "target", target.status().message());
  SPARK_RETURN_IF_ERROR(CheckRange(origin, "max_tokens", plan.max_tokens, 1, kInt32Max));
  SPARK_RETURN_IF_ERROR(CheckRange(origin, "ranks", plan.ranks, 1, pf::kMaxRanks));
  if (plan.arena_bytes > static_cast<uint64_t>(kInt64Max)) {
    return PlanError(origin, "arena_bytes",
                     absl::StrCat("expected at most ", kInt64Max, ", found ", plan.arena_bytes));
  }
  if (plan.activation_precision != DType::kF32 && plan.activation_precision != DType::kBF16) {
    return PlanError(origin, "activation_precision",
                     absl::StrCat("expected \"f32\" or \"bf16\", found \"",
                                  DTypeName(plan.activation_precision), "\""));
  }
  return absl::OkStatus();
}

absl::Status CheckTokenIds(absl::string_view origin, absl::string_view path,
                           const std::vector<int64_t>& ids, int64_t vocab_size) {
  for (size_t i = 0; i < ids.size(); ++i) {
    SPARK_RETURN_IF_ERROR(CheckRange(origin, IndexPath(path, i), ids[i], 0, vocab_size - 1));
  }
  return absl::OkStatus();
}

absl::Status ValidateModel(const ModelInfo& model, absl::string_view origin) {
  SPARK_RETURN_IF_ERROR(CheckRange(origin, "model.vocab_size", model.vocab_size, 1, kInt32Max));
  SPARK_RETURN_IF_ERROR(
      CheckRange(origin, "model.hidden_size", model.hidden_size, 1, kInt32Max));
  SPARK_RETURN_IF_ERROR(CheckRange(origin, "model.num_layers", model.num_layers, 1, kInt32Max));
  SPARK_RETURN_IF_ERROR(CheckRange(origin, "model.max_position_embeddings",
                                   model.max_position_embeddings, 1, kInt64Max));
  if (model.eos_token_ids.empty()) {
    return PlanError(origin, "model.eos_token_ids", "expected at least one id, found none");
  }
  const int64_t last = model.vocab_size - 1;
  SPARK_RETURN_IF_ERROR(
      CheckTokenIds(origin, "model.eos_token_ids", model.eos_token_ids, model.vocab_size));
  SPARK_RETURN_IF_ERROR(CheckRange(origin, "model.bos_token_id", model.bos_token_id, 0, last));
  SPARK_RETURN_IF_ERROR(CheckRange(origin, "model.pad_token_id", model.pad_token_id, 0, last));
  for (const auto& [path, id] : {std::pair<const char*, int64_t>{"model.image_token_id",
                                                                 model.image_token_id},
                                 {"model.boi_token_id", model.boi_token_id},
                                 {"model.eoi_token_id", model.eoi_token_id}}) {
    SPARK_RETURN_IF_ERROR(CheckRange(origin, path, id, -1, last));
  }
  return CheckTokenIds(origin, "model.soft_token_ids", model.soft_token_ids, model.vocab_size);
}

absl::Status ValidateBuffer(const BufferInfo& buffer, const std::string& path, const Plan& plan,
                            absl::string_view origin) {
  // bf16 is the storage of activations under activation_precision bf16 (kernel_abi.h
  // ActivationPrecision); workspaces stay f32, ids and indices i32.
  if (buffer.dtype != DType::kF32 && buffer.dtype != DType::kBF16 && buffer.dtype != DType::kI32) {
    return PlanError(origin, absl::StrCat(path, ".dtype"),
                     absl::StrCat("buffers are f32, bf16 or i32, found ", DTypeName(buffer.dtype)));
  }
  if (buffer.dtype == DType::kBF16 && plan.activation_precision != DType::kBF16) {
    return PlanError(origin, absl::StrCat(path, ".dtype"),
                     "a bf16 buffer in a plan whose activation_precision is f32 (buffers are "
                     "f32 or i32 then)");
  }
  SPARK_RETURN_IF_ERROR(CheckDims(origin, absl::StrCat(path, ".row_shape"), buffer.row_shape));
  const uint64_t element_size = static_cast<uint64_t>(DTypeSize(buffer.dtype));
  if (buffer.offset % element_size != 0) {
    return PlanError(origin, absl::StrCat(path, ".offset"),
                     absl::StrCat("offset ", buffer.offset, " is not a multiple of ",
                                  element_size, " (the size of ", DTypeName(buffer.dtype), ")"));
  }
  const absl::optional<uint64_t> row_bytes = CheckedShapeBytes(buffer.row_shape, element_size);
  const absl::optional<uint64_t> bytes =
      row_bytes ? CheckedMul(*row_bytes, static_cast<uint64_t>(plan.max_tokens)) : absl::nullopt;
  const absl::optional<uint64_t> end = bytes ? CheckedAdd(buffer.offset, *bytes) : absl::nullopt;
  if (!end || *end > plan.arena_bytes) {
    return PlanError(
        origin, path,
        absl::StrCat("buffer ", buffer.name, " (", DTypeName(buffer.dtype), " ",
                     ShapeText(buffer.row_shape), " x ", plan.max_tokens, " rows at offset ",
                     buffer.offset, ") ends ",
                     end ? absl::StrCat("at byte ", *end) : std::string("past 2^64"),
                     ", beyond the arena of ", plan.arena_bytes, " bytes"));
  }
  return absl::OkStatus();
}

// A tensor-parallel plan's weight slice (WeightShard): an axis of the weight, parts dividing the
// plan's ranks, chunks dividing the axis; a plan of one rank has none.
absl::Status ValidateShard(const WeightInfo& weight, int64_t ranks, const std::string& path,
                           absl::string_view origin) {
  const WeightShard& shard = weight.shard;
  if (!shard.sharded()) {
    if (shard.axis != -1 || shard.parts != 1 || shard.chunks != 1) {
      return PlanError(origin, absl::StrCat(path, ".shard"),
                       absl::StrCat("a weight that is not sharded has axis -1, 1 part and 1 "
                                    "chunk, found axis ", shard.axis, ", ", shard.parts,
                                    " parts, ", shard.chunks, " chunks"));
    }
    return absl::OkStatus();
  }
  if (ranks == 1) {
    return PlanError(origin, absl::StrCat(path, ".shard"),
                     "a plan of one rank has no sharded weights");
  }
  if (shard.axis >= static_cast<int64_t>(weight.shape.size())) {
    return PlanError(origin, absl::StrCat(path, ".shard.axis"),
                     absl::StrCat("axis ", shard.axis, " of a weight of shape ",
                                  ShapeText(weight.shape)));
  }
  if (shard.parts < 2 || ranks % shard.parts != 0) {
    return PlanError(origin, absl::StrCat(path, ".shard.parts"),
                     absl::StrCat("expected 2 or more parts dividing the plan's ", ranks,
                                  " ranks, found ", shard.parts));
  }
  if (shard.chunks < 1 || weight.shape[shard.axis] % shard.chunks != 0) {
    return PlanError(origin, absl::StrCat(path, ".shard.chunks"),
                     absl::StrCat(shard.chunks, " chunks do not divide dimension ", shard.axis,
                                  " of ", ShapeText(weight.shape)));
  }
  // Packed float4 codes: a slice of the last axis starts on a whole byte.
  if (weight.dtype == DType::kF4E2M1FN && shard.axis + 1 == static_cast<int64_t>(weight.shape.size()) &&
      (weight.shape.back() / shard.chunks) % 2 != 0) {
    return PlanError(origin, absl::StrCat(path, ".shard"),
                     absl::StrCat("a slice of the last axis of f4E2M1FN ", ShapeText(weight.shape),
                                  " splits a byte of two codes"));
  }
  if (!CheckedTensorBytes(weight.CheckpointShape(), weight.dtype)) {
    return PlanError(origin, absl::StrCat(path, ".shard"), "the whole tensor is too large");
  }
  return absl::OkStatus();
}

absl::Status ValidateWeight(const WeightInfo& weight, int64_t ranks, const std::string& path,
                            absl::string_view origin) {
  if (weight.name.empty()) return PlanError(origin, absl::StrCat(path, ".name"), "empty name");
  // bf16 weights; quantized ones (f4E2M1FN codes, f8E4M3FN elements or block scales) with their
  // f32 scales.
  if (weight.dtype != DType::kBF16 && weight.dtype != DType::kF32 &&
      weight.dtype != DType::kF8E4M3FN && weight.dtype != DType::kF4E2M1FN) {
    return PlanError(origin, absl::StrCat(path, ".dtype"),
                     absl::StrCat("plan version ", pf::kPlanVersion,
                                  " weights are bf16, f32, f8E4M3FN or f4E2M1FN, found ",
                                  DTypeName(weight.dtype)));
  }
  SPARK_RETURN_IF_ERROR(CheckDims(origin, absl::StrCat(path, ".shape"), weight.shape));
  // Packed float4 codes are stored two to a byte along the last dimension (ModelOpt's layout).
  if (weight.dtype == DType::kF4E2M1FN &&
      (weight.shape.empty() || weight.shape.back() % 2 != 0)) {
    return PlanError(origin, absl::StrCat(path, ".shape"),
                     absl::StrCat("an f4E2M1FN weight has an even last dimension (two codes per "
                                  "byte), found ", ShapeText(weight.shape)));
  }
  if (!CheckedTensorBytes(weight.shape, weight.dtype)) {
    return PlanError(origin, absl::StrCat(path, ".shape"),
                     absl::StrCat(ShapeText(weight.shape), " is too large (over 2^64 bytes)"));
  }
  if (weight.transform == WeightTransform::kReciprocal && weight.dtype != DType::kF32) {
    return PlanError(origin, absl::StrCat(path, ".transform"),
                     absl::StrCat("the reciprocal of a ", DTypeName(weight.dtype),
                                  " weight: only f32 weights (scales) are inverted"));
  }
  SPARK_RETURN_IF_ERROR(ValidateShard(weight, ranks, path, origin));
  if (weight.parts.empty()) return absl::OkStatus();
  // A weight assembled from parts: part_shape x parts.size() elements make the whole weight.
  SPARK_RETURN_IF_ERROR(CheckDims(origin, absl::StrCat(path, ".part_shape"), weight.part_shape));
  absl::flat_hash_set<absl::string_view> names;
  for (size_t i = 0; i < weight.parts.size(); ++i) {
    if (weight.parts[i].empty() || !names.insert(weight.parts[i]).second) {
      return PlanError(origin, IndexPath(absl::StrCat(path, ".parts"), i),
                       weight.parts[i].empty()
                           ? std::string("empty part name")
                           : absl::StrCat("part ", weight.parts[i], " is given twice"));
    }
  }
  if (weight.dtype == DType::kF4E2M1FN &&
      (weight.part_shape.empty() || weight.part_shape.back() % 2 != 0)) {
    return PlanError(origin, absl::StrCat(path, ".part_shape"),
                     absl::StrCat("f4E2M1FN parts have an even last dimension (two codes per "
                                  "byte), found ", ShapeText(weight.part_shape)));
  }
  const absl::optional<uint64_t> part = CheckedTensorBytes(weight.part_shape, weight.dtype);
  const absl::optional<uint64_t> whole = CheckedTensorBytes(weight.CheckpointShape(), weight.dtype);
  if (!part || !whole || *part * weight.parts.size() != *whole) {
    return PlanError(origin, absl::StrCat(path, ".part_shape"),
                     absl::StrCat(weight.parts.size(), " parts of ", ShapeText(weight.part_shape),
                                  " do not make ", DTypeName(weight.dtype), " ",
                                  ShapeText(weight.CheckpointShape())));
  }
  return absl::OkStatus();
}

absl::Status ValidateWeights(const Plan& plan, absl::string_view origin) {
  // A name is given once, except that a tensor-parallel plan may read two slices of one tensor
  // (a tied embedding table: columns for the lookup, rows for the LM head).
  absl::flat_hash_map<std::string, size_t> first_index;
  for (size_t i = 0; i < plan.weights.size(); ++i) {
    const std::string path = IndexPath("weights", i);
    const WeightInfo& weight = plan.weights[i];
    SPARK_RETURN_IF_ERROR(ValidateWeight(weight, plan.ranks, path, origin));
    const auto inserted = first_index.emplace(
        absl::StrCat(weight.name, "/", weight.shard.axis, "/", weight.shard.parts, "/",
                     weight.shard.chunks),
        i);
    if (!inserted.second) {
      return PlanError(origin, path,
                       absl::StrCat("weight ", plan.weights[i].name, " is already weights[",
                                    inserted.first->second, "]"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateKvCache(const KvCacheInfo& cache, const std::string& path,
                             absl::string_view origin) {
  if (cache.kind == KvKind::kSliding) {
    SPARK_RETURN_IF_ERROR(
        CheckRange(origin, absl::StrCat(path, ".window"), cache.window, 1, kInt32Max));
  } else if (cache.window != 0) {
    return PlanError(origin, absl::StrCat(path, ".window"),
                     absl::StrCat("a full cache has no window, found ", cache.window));
  }
  if (cache.dtype != DType::kF32 && cache.dtype != DType::kBF16) {
    return PlanError(origin, absl::StrCat(path, ".dtype"),
                     absl::StrCat("a KV cache holds f32 or bf16, found ", DTypeName(cache.dtype)));
  }
  SPARK_RETURN_IF_ERROR(
      CheckRange(origin, absl::StrCat(path, ".kv_heads"), cache.kv_heads, 1, kInt32Max));
  return CheckRange(origin, absl::StrCat(path, ".head_dim"), cache.head_dim, 1, kInt32Max);
}

// An entry point buffer: in range, with the dtype and row shape the runtime reads or writes.
absl::Status CheckEntryBuffer(const Plan& plan, absl::string_view origin, absl::string_view path,
                              int64_t id, DType dtype, const std::vector<int64_t>& row_shape) {
  SPARK_RETURN_IF_ERROR(CheckId(origin, path, "buffer", id, plan.buffers.size()));
  const BufferInfo& buffer = plan.buffers[id];
  if (buffer.dtype != dtype || buffer.row_shape != row_shape) {
    return PlanError(origin, path,
                     absl::StrCat("buffer ", id, " (", buffer.name, ") is ",
                                  DTypeName(buffer.dtype), " ", ShapeText(buffer.row_shape),
                                  " per row; the runtime uses it as ", DTypeName(dtype), " ",
                                  ShapeText(row_shape)));
  }
  return absl::OkStatus();
}

// An image encoder's entry points: the pixel patches and their positions in, the embeddings out;
// none of a text plan's.
absl::Status ValidateEncoderEntryPoints(const Plan& plan, absl::string_view origin) {
  for (const auto& [path, id] :
       {std::pair<const char*, int64_t>{"inputs.ids", plan.input_ids},
        {"inputs.positions", plan.input_positions},
        {"inputs.soft_embeddings", plan.soft_embeddings},
        {"inputs.soft_indices", plan.soft_indices},
        {"inputs.last_visible", plan.input_last_visible},
        {"inputs.sampling", plan.input_sampling},
        {"inputs.sequences", plan.input_sequences},
        {"outputs.logits", plan.output_logits},
        {"outputs.tokens", plan.output_tokens}}) {
    if (id != -1) {
      return PlanError(origin, path,
                       absl::StrCat("expected -1 in an image encoder plan, found ", id));
    }
  }
  if (!plan.kv_caches.empty()) {
    return PlanError(origin, "kv_caches", "an image encoder plan has no KV caches");
  }
  if (plan.image_encoder) {
    return PlanError(origin, "image_encoder", "an image encoder plan has no image encoder");
  }
  SPARK_RETURN_IF_ERROR(CheckEntryBuffer(plan, origin, "inputs.pixel_patches",
                                         plan.input_pixel_patches, plan.activation_precision,
                                         {kPixelPatchValues}));
  SPARK_RETURN_IF_ERROR(CheckEntryBuffer(plan, origin, "inputs.patch_positions",
                                         plan.input_patch_positions, DType::kI32, {2}));
  return CheckEntryBuffer(plan, origin, "outputs.embeddings", plan.output_embeddings,
                          plan.activation_precision, {plan.model.hidden_size});
}

absl::Status ValidateEntryPoints(const Plan& plan, absl::string_view origin) {
  if (plan.is_image_encoder()) return ValidateEncoderEntryPoints(plan, origin);
  for (const auto& [path, id] :
       {std::pair<const char*, int64_t>{"inputs.patch_positions", plan.input_patch_positions},
        {"outputs.embeddings", plan.output_embeddings}}) {
    if (id != -1) {
      return PlanError(origin, path, absl::StrCat("expected -1 in a text plan, found ", id));
    }
  }
  SPARK_RETURN_IF_ERROR(
      CheckEntryBuffer(plan, origin, "inputs.ids", plan.input_ids, DType::kI32, {}));
  SPARK_RETURN_IF_ERROR(CheckEntryBuffer(plan, origin, "inputs.positions", plan.input_positions,
                                         DType::kI32, {}));
  // The logits and the soft-token embeddings are activations: of the plan's precision. The
  // executors convert them from and to the f32 the API speaks.
  SPARK_RETURN_IF_ERROR(CheckEntryBuffer(plan, origin, "outputs.logits", plan.output_logits,
                                         plan.activation_precision, {plan.model.vocab_size}));
  SPARK_RETURN_IF_ERROR(CheckEntryBuffer(plan, origin, "inputs.sampling", plan.input_sampling,
                                         DType::kI32, {abi::kSamplingParamWords}));
  SPARK_RETURN_IF_ERROR(
      CheckEntryBuffer(plan, origin, "outputs.tokens", plan.output_tokens, DType::kI32, {}));
  if (plan.input_last_visible >= 0) {
    SPARK_RETURN_IF_ERROR(CheckEntryBuffer(plan, origin, "inputs.last_visible",
                                           plan.input_last_visible, DType::kI32, {}));
  }
  if (plan.input_sequences >= 0) {
    SPARK_RETURN_IF_ERROR(CheckEntryBuffer(plan, origin, "inputs.sequences",
                                           plan.input_sequences, DType::kI32, {}));
  }
  if ((plan.soft_embeddings < 0) != (plan.soft_indices < 0)) {
    return PlanError(origin, "inputs",
                     "soft_embeddings and soft_indices must both be present or both absent");
  }
  if (plan.soft_embeddings < 0) return absl::OkStatus();
  SPARK_RETURN_IF_ERROR(CheckEntryBuffer(plan, origin, "inputs.soft_embeddings",
                                         plan.soft_embeddings, plan.activation_precision,
                                         {plan.model.hidden_size}));
  return CheckEntryBuffer(plan, origin, "inputs.soft_indices", plan.soft_indices, DType::kI32,
                          {});
}

std::string ArgNames(const abi::OpSpec& spec) {
  std::vector<absl::string_view> names;
  for (int i = 0; i < spec.num_args; ++i) names.push_back(spec.args[i].name);
  return absl::StrJoin(names, ", ");
}

abi::ArgKind SlotKindOf(ArgRefKind kind) {
  switch (kind) {
    case ArgRefKind::kBuffer:
    case ArgRefKind::kWeight:
    case ArgRefKind::kKCache:
    case ArgRefKind::kVCache:
    case ArgRefKind::kKvBlockTable:
    case ArgRefKind::kNull:
      return abi::ArgKind::kPtr;
    case ArgRefKind::kKvCapacity:
    case ArgRefKind::kNumTokens:
    case ArgRefKind::kNumSoftTokens:
    case ArgRefKind::kI32:
      return abi::ArgKind::kI32;
    case ArgRefKind::kF32:
      return abi::ArgKind::kF32;
  }
  return abi::ArgKind::kPtr;
}

// The id an argument refers to must exist.
absl::Status CheckArgTarget(const StepArg& arg, const Plan& plan, absl::string_view origin,
                            absl::string_view path) {
  switch (arg.kind) {
    case ArgRefKind::kBuffer:
      return CheckId(origin, path, "buffer", arg.index, plan.buffers.size());
    case ArgRefKind::kWeight:
      return CheckId(origin, path, "weight", arg.index, plan.weights.size());
    case ArgRefKind::kKCache:
    case ArgRefKind::kVCache:
    case ArgRefKind::kKvCapacity:
    case ArgRefKind::kKvBlockTable:
      return CheckId(origin, path, "kv cache", arg.index, plan.kv_caches.size());
    case ArgRefKind::kF32:
      if (std::isfinite(arg.f32)) return absl::OkStatus();
      return PlanError(origin, path, "f32 literal is not finite");
    default:
      return absl::OkStatus();
  }
}

// The launch spark-compile gives every step: a 1-D grid of 1 to kMaxLaunchBlocks blocks (every
// kernel grid-strides: kernel_abi.h) of the ABI's block size, 1-D too. Anything else is beyond
// what the kernels are written for (and [2^31-1, 65535, 65535] beyond what the GPU should run).
absl::Status CheckLaunch(const Step& step, const abi::OpSpec& spec,
                         absl::string_view origin, const std::string& path) {
  const struct {
    const char* key;
    long long value;
    long long min;
  } terms[] = {{"per_token", step.grid.per_token, 0},
               {"fixed", step.grid.fixed, 0},
               {"divisor", step.grid.divisor, 1}};
  for (const auto& term : terms) {
    SPARK_RETURN_IF_ERROR(CheckRange(origin, absl::StrCat(path, ".grid.", term.key), term.value,
                                     term.min, abi::kMaxGridRuleTerm));
  }
  for (int i = 1; i < 3; ++i) {
    if (step.block[i] == 1) continue;
    return PlanError(origin, IndexPath(absl::StrCat(path, ".block"), i),
                     absl::StrCat("expected 1 (kernels are launched in 1-D grids of 1-D "
                                  "blocks), found ",
                                  step.block[i]));
  }
  if (step.block[0] != spec.block_size) {
    return PlanError(origin, absl::StrCat(path, ".block[0]"),
                     absl::StrCat("the kernel ABI of ", spec.op, " requires blockDim.x == ",
                                  spec.block_size, ", found ", step.block[0]));
  }
  return CheckRange(origin, absl::StrCat(path, ".shared_bytes"), step.shared_bytes, 0,
                    kMaxStepSharedBytes);
}

}  // namespace

Step TransferStep(abi::OpId op, std::string source, std::vector<StepArg> args) {
  Step step;
  step.op = op;
  step.source = std::move(source);
  step.grid = {0, 0, 0};
  step.block[0] = 0;
  step.args = std::move(args);
  return step;
}

std::string EntryPointOf(const Step& step) {
  if (!IsLaunch(step)) return std::string();
  std::string name = EntryPointPrefix(SpecOf(step).symbol);
  for (const StepArg& arg : step.args) {
    if (arg.kind == ArgRefKind::kI32) AppendEntryLiteral(&name, arg.i32);
    if (arg.kind == ArgRefKind::kF32) AppendEntryLiteral(&name, arg.f32);
  }
  return name;
}

namespace {

absl::Status ValidateStep(const Step& step, size_t index, const Plan& plan,
                          absl::string_view origin) {
  const std::string path = IndexPath("steps", index);
  if (static_cast<unsigned>(step.op) >= static_cast<unsigned>(abi::OpId::kCount)) {
    return PlanError(origin, path, absl::StrCat("op id ", static_cast<int>(step.op),
                                                " is not in this runtime's kernel ABI"));
  }
  const abi::OpSpec* spec = &SpecOf(step);
  if (!spec->kernel()) {
    // A transfer: the runtime moves the data; nothing of a launch may be set.
    if (!step.kernel.empty() || step.grid.per_token != 0 || step.grid.fixed != 0 ||
        step.grid.divisor != 0 || step.block[0] != 0 || step.block[1] != 1 ||
        step.block[2] != 1 || step.shared_bytes != 0) {
      return PlanError(origin, path,
                       absl::StrCat(spec->op, " is a transfer: it takes no kernel, grid, block "
                                              "or shared memory"));
    }
  } else if (step.kernel.empty()) {
    return PlanError(origin, absl::StrCat(path, ".kernel"), "empty kernel symbol");
  } else {
    SPARK_RETURN_IF_ERROR(CheckLaunch(step, *spec, origin, path));
  }
  if (step.args.size() != static_cast<size_t>(spec->num_args)) {
    return PlanError(origin, absl::StrCat(path, ".args"),
                     absl::StrCat(spec->op, " takes ", spec->num_args, " arguments (",
                                  ArgNames(*spec), "), found ", step.args.size()));
  }
  for (size_t i = 0; i < step.args.size(); ++i) {
    const std::string arg_path = IndexPath(absl::StrCat(path, ".args"), i);
    const StepArg& arg = step.args[i];
    const abi::ArgSpec& slot = spec->args[i];
    if (SlotKindOf(arg.kind) != slot.kind) {
      return PlanError(origin, arg_path,
                       absl::StrCat("argument ", slot.name, " of ", spec->op, " is ",
                                    abi::SlotDescription(slot.kind), ", found ",
                                    ArgRefKindName(arg.kind)));
    }
    SPARK_RETURN_IF_ERROR(CheckArgTarget(arg, plan, origin, arg_path));
  }
  SPARK_RETURN_IF_ERROR(CheckStepBounds(plan, step, *spec, path, origin));
  // A collective joins the plan's ranks: its `ranks` is the plan's.
  if (step.op == abi::OpId::kAllReduce || step.op == abi::OpId::kAllGather) {
    const int64_t ranks = StepSizeArg(step, "ranks", 0);
    if (ranks != plan.ranks) {
      return PlanError(origin, path,
                       absl::StrCat(spec->op, " over ", ranks, " ranks in a plan of ", plan.ranks,
                                    plan.ranks == 1 ? " rank" : " ranks"));
    }
  }
  const std::string entry = EntryPointOf(step);
  if (step.kernel != entry) {
    return PlanError(origin, absl::StrCat(path, ".kernel"),
                     absl::StrCat("the step names kernel \"", step.kernel, "\", but its op and ",
                                  "literal arguments are those of \"", entry,
                                  "\" (an entry runs the sizes it was compiled for: the plan was "
                                  "edited or damaged); ",
                                  kRecompile));
  }
  return absl::OkStatus();
}

// Every KV cache is one a step reads or writes: the runtime allocates each for --max-length
// tokens, so an unused one would only take memory (gigabytes at long lengths).
absl::Status ValidateKvCachesUsed(const Plan& plan, absl::string_view origin) {
  std::vector<bool> used(plan.kv_caches.size(), false);
  for (const Step& step : plan.steps) {
    for (const StepArg& arg : step.args) {
      if (arg.kind == ArgRefKind::kKCache || arg.kind == ArgRefKind::kVCache ||
          arg.kind == ArgRefKind::kKvCapacity) {
        used[arg.index] = true;  // in range: ValidateStep
      }
    }
  }
  for (size_t i = 0; i < used.size(); ++i) {
    if (used[i]) continue;
    return PlanError(origin, IndexPath("kv_caches", i),
                     absl::StrCat("kv cache ", plan.kv_caches[i].name,
                                  " is used by no step, but would still be allocated for every "
                                  "token of --max-length; the file is damaged or was not written "
                                  "by spark-compile"));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Plan -> FlatBuffers payload (the section) and Plan -> JSON (--dump-plan)

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

Offset<fb::Model> ModelBuffer(FlatBufferBuilder& b, const ModelInfo& model) {
  return fb::CreateModel(b, b.CreateString(model.variant), b.CreateString(model.architecture),
                         model.vocab_size, model.hidden_size, model.num_layers,
                         model.max_position_embeddings, b.CreateVector(model.eos_token_ids),
                         model.bos_token_id, model.pad_token_id,
                         b.CreateVector(model.soft_token_ids), b.CreateString(model.weight_prefix),
                         model.image_token_id, model.boi_token_id, model.eoi_token_id);
}

Offset<fb::Buffer> BufferBuffer(FlatBufferBuilder& b, const BufferInfo& buffer) {
  return fb::CreateBuffer(b, b.CreateString(buffer.name), static_cast<fb::DType>(buffer.dtype),
                          b.CreateVector(buffer.row_shape), buffer.offset);
}

Offset<fb::Weight> WeightBuffer(FlatBufferBuilder& b, const WeightInfo& weight) {
  const auto name = b.CreateString(weight.name);
  const auto shape = b.CreateVector(weight.shape);
  Offset<flatbuffers::Vector<Offset<flatbuffers::String>>> parts;
  Offset<flatbuffers::Vector<int64_t>> part_shape;
  if (!weight.parts.empty()) {
    parts = b.CreateVectorOfStrings(weight.parts);
    part_shape = b.CreateVector(weight.part_shape);
  }
  return fb::CreateWeight(b, name, static_cast<fb::DType>(weight.dtype), shape, parts, part_shape,
                          static_cast<fb::WeightTransform>(weight.transform), weight.shard.axis,
                          weight.shard.parts, weight.shard.chunks);
}

Offset<fb::KvCache> KvCacheBuffer(FlatBufferBuilder& b, const KvCacheInfo& cache) {
  return fb::CreateKvCache(b, b.CreateString(cache.name),
                           cache.kind == KvKind::kSliding ? fb::KvKind::sliding : fb::KvKind::full,
                           cache.window, cache.kv_heads, cache.head_dim,
                           static_cast<fb::DType>(cache.dtype));
}

Offset<fb::Step> StepBuffer(FlatBufferBuilder& b, const Step& step) {
  std::vector<fb::Arg> args;
  for (const StepArg& arg : step.args) {
    args.emplace_back(static_cast<fb::ArgKind>(arg.kind), arg.i32, arg.index, arg.f32);
  }
  const auto source = b.CreateString(step.source);
  if (!IsLaunch(step)) {
    const auto transfer =
        fb::CreateTransfer(b, b.CreateString(OpName(step)), b.CreateVectorOfStructs(args));
    return fb::CreateStep(b, source, step.logits_tail, fb::StepKind::Transfer,
                          transfer.Union());
  }
  const fb::GridRule grid(step.grid.per_token, step.grid.fixed, step.grid.divisor);
  const fb::Dim3 block(step.block[0], step.block[1], step.block[2]);
  const auto launch =
      fb::CreateLaunch(b, b.CreateString(OpName(step)), b.CreateString(step.kernel), &grid,
                       &block, step.shared_bytes, b.CreateVectorOfStructs(args));
  return fb::CreateStep(b, source, step.logits_tail, fb::StepKind::Launch, launch.Union());
}

Offset<fb::Program> ProgramBuffer(FlatBufferBuilder& b, const Program& program) {
  return fb::CreateProgram(b, b.CreateString(program.name), program.min_tokens,
                           program.max_tokens, program.soft_tokens, b.CreateVector(program.steps));
}

template <typename T, typename Element>
Offset<flatbuffers::Vector<Offset<Element>>> ArrayBuffer(
    FlatBufferBuilder& b, const std::vector<T>& items,
    Offset<Element> (*to_buffer)(FlatBufferBuilder&, const T&)) {
  std::vector<Offset<Element>> offsets;
  offsets.reserve(items.size());
  for (const T& item : items) offsets.push_back(to_buffer(b, item));
  return b.CreateVector(offsets);
}

// The plan as a FlatBuffers buffer (plan.fbs). Every field is written, defaults too, so that a
// dump with flatc shows the whole plan.
Offset<fb::Plan> PlanTable(FlatBufferBuilder& b, const Plan& plan) {
  const auto image_encoder =
      plan.image_encoder ? PlanTable(b, *plan.image_encoder) : Offset<fb::Plan>();
  const auto target = b.CreateString(plan.target);
  const auto model = ModelBuffer(b, plan.model);
  const auto inputs =
      fb::CreateInputs(b, plan.input_ids, plan.input_positions, plan.soft_embeddings,
                       plan.soft_indices, plan.input_last_visible, plan.input_sampling,
                       plan.input_sequences, plan.input_pixel_patches,
                       plan.input_patch_positions);
  const auto outputs =
      fb::CreateOutputs(b, plan.output_logits, plan.output_tokens, plan.output_embeddings);
  const auto buffers = ArrayBuffer(b, plan.buffers, BufferBuffer);
  const auto weights = ArrayBuffer(b, plan.weights, WeightBuffer);
  const auto kv_caches = ArrayBuffer(b, plan.kv_caches, KvCacheBuffer);
  const auto steps = ArrayBuffer(b, plan.steps, StepBuffer);
  const auto programs = ArrayBuffer(b, plan.programs, ProgramBuffer);
  return fb::CreatePlan(b, target, plan.max_tokens, plan.arena_bytes,
                        static_cast<fb::DType>(plan.activation_precision), model, inputs, outputs,
                        buffers, weights, kv_caches, steps, programs, image_encoder,
                        plan.ranks);
}

std::string PlanPayload(const Plan& plan) {
  FlatBufferBuilder b(64 << 10);
  b.ForceDefaults(true);
  fb::FinishPlanBuffer(b, PlanTable(b, plan));
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

// Plan -> JSON, for humans and scripts (--dump-plan); nothing reads it back.

// How the JSON dump writes each argument kind ({"buffer": 3}, {"null": 1}, {"f32": 0.5}).
enum class ArgValue { kId, kOne, kI32, kF32 };
struct ArgKindInfo {
  ArgRefKind kind;
  const char* key;
  ArgValue value;
};
constexpr ArgKindInfo kArgKinds[] = {
    {ArgRefKind::kBuffer, "buffer", ArgValue::kId},
    {ArgRefKind::kWeight, "weight", ArgValue::kId},
    {ArgRefKind::kKCache, "k_cache", ArgValue::kId},
    {ArgRefKind::kVCache, "v_cache", ArgValue::kId},
    {ArgRefKind::kKvCapacity, "kv_capacity", ArgValue::kId},
    {ArgRefKind::kKvBlockTable, "kv_block_table", ArgValue::kId},
    {ArgRefKind::kNull, "null", ArgValue::kOne},
    {ArgRefKind::kNumTokens, "num_tokens", ArgValue::kOne},
    {ArgRefKind::kNumSoftTokens, "num_soft_tokens", ArgValue::kOne},
    {ArgRefKind::kI32, "i32", ArgValue::kI32},
    {ArgRefKind::kF32, "f32", ArgValue::kF32},
};

const ArgKindInfo& ArgKindInfoOf(ArgRefKind kind) {
  for (const ArgKindInfo& info : kArgKinds) {
    if (info.kind == kind) return info;
  }
  return kArgKinds[0];  // unreachable: the table covers the enum
}


Json IntArrayJson(const std::vector<int64_t>& values) {
  Json array = Json::array();
  for (const int64_t value : values) array.push_back(JsonInteger(value));
  return array;
}

Json Int3Json(const int values[3]) {
  return IntArrayJson({values[0], values[1], values[2]});
}

// The shortest decimal that reads back as `value` when parsed as a float, as a double.
double ShortestFloat(float value) {
  char buffer[32];
  for (int precision = 6; precision <= 9; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, static_cast<double>(value));
    if (std::strtof(buffer, nullptr) == value) break;
  }
  return std::strtod(buffer, nullptr);
}

Json ModelJson(const ModelInfo& model) {
  Json json = Json::object();
  AddMember(json, "variant", Json(model.variant));
  AddMember(json, "architecture", Json(model.architecture));
  AddMember(json, "vocab_size", JsonInteger(model.vocab_size));
  AddMember(json, "hidden_size", JsonInteger(model.hidden_size));
  AddMember(json, "num_layers", JsonInteger(model.num_layers));
  AddMember(json, "max_position_embeddings", JsonInteger(model.max_position_embeddings));
  AddMember(json, "eos_token_ids", IntArrayJson(model.eos_token_ids));
  AddMember(json, "bos_token_id", JsonInteger(model.bos_token_id));
  AddMember(json, "pad_token_id", JsonInteger(model.pad_token_id));
  AddMember(json, "soft_token_ids", IntArrayJson(model.soft_token_ids));
  AddMember(json, "weight_prefix", Json(model.weight_prefix));
  if (model.image_token_id >= 0) {
    AddMember(json, "image_token_id", JsonInteger(model.image_token_id));
    AddMember(json, "boi_token_id", JsonInteger(model.boi_token_id));
    AddMember(json, "eoi_token_id", JsonInteger(model.eoi_token_id));
  }
  return json;
}

Json InputsJson(const Plan& plan) {
  Json json = Json::object();
  if (plan.is_image_encoder()) {
    AddMember(json, "pixel_patches", JsonInteger(plan.input_pixel_patches));
    AddMember(json, "patch_positions", JsonInteger(plan.input_patch_positions));
    return json;
  }
  AddMember(json, "ids", JsonInteger(plan.input_ids));
  AddMember(json, "positions", JsonInteger(plan.input_positions));
  if (plan.soft_embeddings >= 0) AddMember(json, "soft_embeddings", JsonInteger(plan.soft_embeddings));
  if (plan.soft_indices >= 0) AddMember(json, "soft_indices", JsonInteger(plan.soft_indices));
  if (plan.input_last_visible >= 0) {
    AddMember(json, "last_visible", JsonInteger(plan.input_last_visible));
  }
  AddMember(json, "sampling", JsonInteger(plan.input_sampling));
  if (plan.input_sequences >= 0) AddMember(json, "sequences", JsonInteger(plan.input_sequences));
  return json;
}

Json BufferJson(const BufferInfo& buffer) {
  Json json = Json::object();
  AddMember(json, "name", Json(buffer.name));
  AddMember(json, "dtype", Json(std::string(DTypeName(buffer.dtype))));
  AddMember(json, "row_shape", IntArrayJson(buffer.row_shape));
  AddMember(json, "offset", JsonInteger(static_cast<int64_t>(buffer.offset)));
  return json;
}

Json WeightJson(const WeightInfo& weight) {
  Json json = Json::object();
  AddMember(json, "name", Json(weight.name));
  AddMember(json, "dtype", Json(std::string(DTypeName(weight.dtype))));
  AddMember(json, "shape", IntArrayJson(weight.shape));
  if (!weight.parts.empty()) {
    Json parts = Json::array();
    for (const std::string& part : weight.parts) parts.push_back(Json(part));
    AddMember(json, "parts", std::move(parts));
    AddMember(json, "part_shape", IntArrayJson(weight.part_shape));
  }
  if (weight.transform != WeightTransform::kNone) {
    AddMember(json, "transform", Json(std::string(WeightTransformName(weight.transform))));
  }
  if (weight.shard.sharded()) {
    Json shard = Json::object();
    AddMember(shard, "axis", JsonInteger(weight.shard.axis));
    AddMember(shard, "parts", JsonInteger(weight.shard.parts));
    AddMember(shard, "chunks", JsonInteger(weight.shard.chunks));
    AddMember(json, "shard", std::move(shard));
  }
  return json;
}

Json KvCacheJson(const KvCacheInfo& cache) {
  Json json = Json::object();
  AddMember(json, "name", Json(cache.name));
  AddMember(json, "kind", Json(cache.kind == KvKind::kSliding ? "sliding" : "full"));
  if (cache.kind == KvKind::kSliding || cache.window != 0) {
    AddMember(json, "window", JsonInteger(cache.window));
  }
  AddMember(json, "kv_heads", JsonInteger(cache.kv_heads));
  AddMember(json, "head_dim", JsonInteger(cache.head_dim));
  AddMember(json, "dtype", Json(std::string(DTypeName(cache.dtype))));
  return json;
}

Json ArgJson(const StepArg& arg) {
  const ArgKindInfo& info = ArgKindInfoOf(arg.kind);
  Json value;
  switch (info.value) {
    case ArgValue::kId: value = JsonInteger(arg.index); break;
    case ArgValue::kOne: value = JsonInteger(1); break;
    case ArgValue::kI32: value = JsonInteger(arg.i32); break;
    case ArgValue::kF32: value = Json(ShortestFloat(arg.f32)); break;
  }
  Json json = Json::object();
  AddMember(json, info.key, std::move(value));
  return json;
}

Json StepJson(const Step& step) {
  Json json = Json::object();
  AddMember(json, "op", Json(OpName(step)));
  if (!IsLaunch(step)) AddMember(json, "transfer", Json(true));
  if (IsLaunch(step)) AddMember(json, "kernel", Json(step.kernel));
  AddMember(json, "source", Json(step.source));
  if (IsLaunch(step)) {
    AddMember(json, "grid", Json::object({{"per_token", JsonInteger(step.grid.per_token)},
                                          {"fixed", JsonInteger(step.grid.fixed)},
                                          {"divisor", JsonInteger(step.grid.divisor)}}));
    AddMember(json, "block", Int3Json(step.block));
    AddMember(json, "shared_bytes", JsonInteger(step.shared_bytes));
  }
  Json args = Json::array();
  for (const StepArg& arg : step.args) args.push_back(ArgJson(arg));
  AddMember(json, "args", std::move(args));
  if (step.logits_tail) AddMember(json, "logits_tail", Json(true));
  return json;
}

template <typename T>
Json ArrayJson(const std::vector<T>& items, Json (*to_json)(const T&));

Json ProgramJson(const Program& program) {
  Json out = Json::object();
  AddMember(out, "name", Json(program.name));
  AddMember(out, "min_tokens", JsonInteger(program.min_tokens));
  AddMember(out, "max_tokens", JsonInteger(program.max_tokens));
  if (program.soft_tokens) AddMember(out, "soft_tokens", Json(true));
  Json steps = Json::array();
  for (int64_t step : program.steps) steps.push_back(JsonInteger(step));
  AddMember(out, "steps", std::move(steps));
  return out;
}

template <typename T>
Json ArrayJson(const std::vector<T>& items, Json (*to_json)(const T&)) {
  Json array = Json::array();
  for (const T& item : items) array.push_back(to_json(item));
  return array;
}

Json PlanJson(const Plan& plan) {
  Json json = Json::object();
  AddMember(json, "target", Json(plan.target));
  if (plan.ranks != 1) AddMember(json, "ranks", JsonInteger(plan.ranks));
  AddMember(json, "max_tokens", JsonInteger(plan.max_tokens));
  AddMember(json, "arena_bytes", JsonInteger(static_cast<int64_t>(plan.arena_bytes)));
  AddMember(json, "activation_precision",
           Json(std::string(DTypeName(plan.activation_precision))));
  AddMember(json, "model", ModelJson(plan.model));
  AddMember(json, "inputs", InputsJson(plan));
  Json outputs = Json::object();
  if (plan.is_image_encoder()) {
    AddMember(outputs, "embeddings", JsonInteger(plan.output_embeddings));
  } else {
    AddMember(outputs, "logits", JsonInteger(plan.output_logits));
    AddMember(outputs, "tokens", JsonInteger(plan.output_tokens));
  }
  AddMember(json, "outputs", std::move(outputs));
  AddMember(json, "buffers", ArrayJson(plan.buffers, BufferJson));
  AddMember(json, "weights", ArrayJson(plan.weights, WeightJson));
  AddMember(json, "kv_caches", ArrayJson(plan.kv_caches, KvCacheJson));
  AddMember(json, "steps", ArrayJson(plan.steps, StepJson));
  AddMember(json, "programs", ArrayJson(plan.programs, ProgramJson));
  if (plan.image_encoder) AddMember(json, "image_encoder", PlanJson(*plan.image_encoder));
  return json;
}

}  // namespace

uint64_t BufferInfo::row_bytes() const {
  return SaturatingShapeBytes(row_shape, static_cast<uint64_t>(DTypeSize(dtype)));
}

uint64_t KvCacheInfo::part_bytes(int64_t capacity) const {
  return SaturatingShapeBytes({capacity, kv_heads, head_dim},
                              static_cast<uint64_t>(DTypeSize(dtype)));
}

int KvCacheInfo::abi_dtype() const {
  return dtype == DType::kBF16 ? abi::kCacheBF16 : abi::kCacheF32;
}

absl::string_view WeightTransformName(WeightTransform transform) {
  switch (transform) {
    case WeightTransform::kNone:
      return "none";
    case WeightTransform::kReciprocal:
      return "reciprocal";
  }
  return "?";
}

absl::StatusOr<WeightTransform> ParseWeightTransform(absl::string_view name) {
  if (name == "reciprocal") return WeightTransform::kReciprocal;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown weight transform '", PrintableText(name),
                   "' (plan version ", pf::kPlanVersion, " knows \"reciprocal\")"));
}

uint64_t WeightInfo::num_bytes() const {
  return CheckedTensorBytes(shape, dtype).value_or(std::numeric_limits<uint64_t>::max());
}

std::vector<int64_t> WeightInfo::CheckpointShape() const {
  std::vector<int64_t> whole = shape;
  if (shard.sharded() && shard.axis < static_cast<int64_t>(whole.size())) {
    whole[shard.axis] *= shard.parts;
  }
  return whole;
}

absl::string_view ArgRefKindName(ArgRefKind kind) { return ArgKindInfoOf(kind).key; }

namespace {

// The programs (plan.h Program): each a range of call sizes, with or without soft rows, of
// increasing step indices that are exactly the steps that run at both ends of its range
// (StepRuns); together they cover every call of 1..max_tokens tokens exactly once (with soft rows
// too when the plan has soft inputs, and then only), and every step is in one of them.
absl::Status ValidatePrograms(const Plan& plan, absl::string_view origin) {
  if (plan.programs.empty()) {
    return PlanError(origin, "programs",
                     "expected at least one program, found none; the file is damaged or was not "
                     "written by spark-compile");
  }
  const bool has_soft_inputs = plan.soft_embeddings >= 0;
  std::vector<bool> used(plan.steps.size(), false);
  // Call sizes covered, per soft flag: (min, max, program index).
  std::vector<std::array<int64_t, 3>> ranges[2];
  for (size_t i = 0; i < plan.programs.size(); ++i) {
    const Program& program = plan.programs[i];
    const std::string path = IndexPath("programs", i);
    if (program.name.empty() || program.name.size() > 64 ||
        !std::all_of(program.name.begin(), program.name.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
        })) {
      return PlanError(origin, absl::StrCat(path, ".name"),
                       "expected 1 to 64 letters, digits or '_'");
    }
    for (size_t k = 0; k < i; ++k) {
      if (plan.programs[k].name == program.name) {
        return PlanError(origin, absl::StrCat(path, ".name"),
                         absl::StrCat("\"", program.name, "\" is also the name of programs[", k,
                                      "]"));
      }
    }
    SPARK_RETURN_IF_ERROR(CheckRange(origin, absl::StrCat(path, ".min_tokens"),
                                     program.min_tokens, 1, plan.max_tokens));
    SPARK_RETURN_IF_ERROR(CheckRange(origin, absl::StrCat(path, ".max_tokens"),
                                     program.max_tokens, program.min_tokens, plan.max_tokens));
    if (program.soft_tokens && !has_soft_inputs) {
      return PlanError(origin, absl::StrCat(path, ".soft_tokens"),
                       "a program for calls with soft-token rows, but the plan has no soft-token "
                       "inputs");
    }
    ranges[program.soft_tokens].push_back(
        {program.min_tokens, program.max_tokens, static_cast<int64_t>(i)});
    for (size_t k = 0; k < program.steps.size(); ++k) {
      const int64_t id = program.steps[k];
      if (id > (k == 0 ? -1 : program.steps[k - 1]) &&
          id < static_cast<int64_t>(plan.steps.size())) {
        continue;
      }
      return PlanError(origin, IndexPath(absl::StrCat(path, ".steps"), k),
                       absl::StrCat("expected a step id greater than the one before it and less "
                                    "than ", plan.steps.size(), ", found ", id));
    }
    size_t next = 0;  // into program.steps
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      const bool listed =
          next < program.steps.size() && program.steps[next] == static_cast<int64_t>(s);
      for (const int64_t tokens : {program.min_tokens, program.max_tokens}) {
        if (StepRuns(plan.steps[s], tokens, program.soft_tokens) == listed) continue;
        return PlanError(
            origin, path,
            absl::StrCat("step ", s, " (", PrintableText(plan.steps[s].source), ", op ",
                         OpName(plan.steps[s]), ") ", listed ? "does nothing" : "is needed",
                         " in a call of ", tokens, tokens == 1 ? " token" : " tokens",
                         program.soft_tokens ? " with soft-token rows" : "", ", but the program ",
                         listed ? "runs" : "does not run", " it"));
      }
      if (listed) {
        used[s] = true;
        ++next;
      }
    }
  }
  for (int soft = 0; soft < 2; ++soft) {
    if (soft == 1 && !has_soft_inputs) continue;
    std::sort(ranges[soft].begin(), ranges[soft].end());
    int64_t covered = 0;  // calls of 1..covered tokens have a program
    for (const auto& [min, max, index] : ranges[soft]) {
      if (min != covered + 1) {
        const bool overlap = min <= covered;
        const int64_t tokens = overlap ? min : covered + 1;
        return PlanError(
            origin, IndexPath("programs", index),
            absl::StrCat(overlap ? "overlaps another program: a call of " : "leaves a gap: a call of ",
                         tokens, tokens == 1 ? " token" : " tokens",
                         soft ? " with soft-token rows" : "",
                         overlap ? " has two programs" : " has none"));
      }
      covered = max;
    }
    if (covered != plan.max_tokens) {
      return PlanError(origin, "programs",
                       absl::StrCat("no program for calls of ", covered + 1, " to ",
                                    plan.max_tokens, " tokens",
                                    soft ? " with soft-token rows" : ""));
    }
  }
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    if (!used[s]) {
      return PlanError(origin, IndexPath("steps", s),
                       absl::StrCat("step ", s, " (", PrintableText(plan.steps[s].source),
                                    ") is in no program"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// The logits tail (plan.h Step::logits_tail): a suffix of the steps, of row-local ops, that
// writes the logits; no step before it reads what a tail step writes (it could not: the tail
// comes last). A call may then run the tail on its last row only, or skip it.
absl::Status ValidateLogitsTail(const Plan& plan, absl::string_view origin) {
  size_t first = plan.steps.size();
  while (first > 0 && plan.steps[first - 1].logits_tail) --first;
  for (size_t i = 0; i < first; ++i) {
    if (plan.steps[i].logits_tail) {
      return PlanError(origin, IndexPath("steps", i),
                       absl::StrCat("logits_tail on a step that is followed by step ", first - 1,
                                    ", which is not in the tail: the tail must be the last steps"));
    }
  }
  if (first == plan.steps.size()) return absl::OkStatus();
  bool writes_logits = false;
  for (size_t i = first; i < plan.steps.size(); ++i) {
    const Step& step = plan.steps[i];
    const abi::OpSpec& spec = SpecOf(step);
    if (!abi::RowLocal(spec)) {
      return PlanError(origin, IndexPath("steps", i),
                       absl::StrCat("logits_tail on ", spec.op, ", which is not row-local (it reads "
                                    "other tokens' rows, a KV cache or the soft tokens)"));
    }
    for (size_t a = 0; a < step.args.size(); ++a) {
      writes_logits |= step.args[a].kind == ArgRefKind::kBuffer &&
                       step.args[a].index == plan.output_logits &&
                       abi::IsWrittenRole(spec.args[a].role);
    }
  }
  if (!writes_logits) {
    return PlanError(origin, IndexPath("steps", first),
                     "the logits tail does not write outputs.logits");
  }
  return absl::OkStatus();
}

// The next token: one `sample` step reads outputs.logits after every step that writes them and
// writes outputs.tokens, which no other step writes; when the plan has a logits tail, the sample
// step is in it (the runtime reads the last row's token after a call that runs the tail).
absl::Status ValidateSampling(const Plan& plan, absl::string_view origin) {
  int64_t sample = -1, last_logits_writer = -1;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& step = plan.steps[i];
    const abi::OpSpec& spec = SpecOf(step);
    for (size_t a = 0; a < step.args.size(); ++a) {
      if (step.args[a].kind != ArgRefKind::kBuffer || !abi::IsWrittenRole(spec.args[a].role)) {
        continue;
      }
      if (step.args[a].index == plan.output_logits) last_logits_writer = static_cast<int64_t>(i);
      if (step.args[a].index != plan.output_tokens) continue;
      if (step.op != abi::OpId::kSample || sample >= 0) {
        return PlanError(origin, IndexPath("steps", i),
                         "writes outputs.tokens, which one sample step writes");
      }
      sample = static_cast<int64_t>(i);
    }
  }
  if (sample < 0) {
    return PlanError(origin, "outputs.tokens",
                     "no sample step writes it (spark-compile ends every plan with one)");
  }
  const Step& step = plan.steps[sample];
  if (step.args[abi::ops::sample::logits].index != plan.output_logits || sample < last_logits_writer) {
    return PlanError(origin, IndexPath("steps", sample),
                     "the sample step must read outputs.logits after every step that writes them");
  }
  if (plan.steps.back().logits_tail && !step.logits_tail) {
    return PlanError(origin, IndexPath("steps", sample),
                     "the sample step must be in the logits tail");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidatePlan(const Plan& plan, absl::string_view origin) {
  SPARK_RETURN_IF_ERROR(ValidateCounts(plan, origin));
  SPARK_RETURN_IF_ERROR(ValidateTopLevel(plan, origin));
  SPARK_RETURN_IF_ERROR(ValidateModel(plan.model, origin));
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    SPARK_RETURN_IF_ERROR(ValidateBuffer(plan.buffers[i], IndexPath("buffers", i), plan, origin));
  }
  SPARK_RETURN_IF_ERROR(ValidateWeights(plan, origin));
  for (size_t i = 0; i < plan.kv_caches.size(); ++i) {
    SPARK_RETURN_IF_ERROR(ValidateKvCache(plan.kv_caches[i], IndexPath("kv_caches", i), origin));
  }
  SPARK_RETURN_IF_ERROR(ValidateEntryPoints(plan, origin));
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    SPARK_RETURN_IF_ERROR(ValidateStep(plan.steps[i], i, plan, origin));
  }
  SPARK_RETURN_IF_ERROR(ValidateLogitsTail(plan, origin));
  if (!plan.is_image_encoder()) SPARK_RETURN_IF_ERROR(ValidateSampling(plan, origin));
  SPARK_RETURN_IF_ERROR(ValidateKvCachesUsed(plan, origin));
  // The programs are checked against steps already known to be valid.
  SPARK_RETURN_IF_ERROR(ValidatePrograms(plan, origin));
  if (!plan.image_encoder) return absl::OkStatus();
  const Plan& encoder = *plan.image_encoder;
  if (!encoder.is_image_encoder()) {
    return PlanError(origin, "image_encoder",
                     "expected an image encoder plan (inputs.pixel_patches), found a text plan");
  }
  if (encoder.target != plan.target || encoder.activation_precision != plan.activation_precision) {
    return PlanError(origin, "image_encoder",
                     "expected the target and activation precision of the text plan");
  }
  if (plan.model.image_token_id < 0 || plan.model.boi_token_id < 0 ||
      plan.model.eoi_token_id < 0 || plan.soft_embeddings < 0) {
    return PlanError(origin, "image_encoder",
                     "a plan with an image encoder needs model.image_token_id, boi_token_id, "
                     "eoi_token_id and the soft-token inputs");
  }
  return ValidatePlan(encoder, absl::StrCat(origin, " (image encoder)"));
}

namespace {

// ParsePlanSection, which may throw std::bad_alloc when the host is short of memory.
absl::StatusOr<Plan> ParsePlanSectionOrThrow(absl::string_view section, absl::string_view origin) {
  SPARK_ASSIGN_OR_RETURN(const absl::string_view payload, ReadSectionPayload(section, origin));
  SPARK_ASSIGN_OR_RETURN(Plan plan, ReadPlanPayload(payload, origin));
  SPARK_RETURN_IF_ERROR(ValidatePlan(plan, origin));
  return plan;
}

}  // namespace

absl::StatusOr<Plan> ParsePlanSection(absl::string_view section, absl::string_view origin) {
  absl::StatusOr<Plan> plan;
  SPARK_RETURN_IF_ERROR(
      WithHostAllocation(PrintableText(absl::StrCat("the parsed plan of ", origin)), 0,
                         [&] { plan = ParsePlanSectionOrThrow(section, origin); }));
  return plan;
}

std::string PlanJsonText(const Plan& plan, int indent) { return PlanJson(plan).dump(indent); }

std::string SerializePlanSection(const Plan& plan) {
  const std::string payload = PlanPayload(plan);
  std::string section(pf::kMagic, sizeof(pf::kMagic));
  AppendLittleEndian<uint32_t>(pf::kPlanVersion, &section);
  AppendLittleEndian<uint32_t>(0, &section);
  AppendLittleEndian<uint64_t>(payload.size(), &section);
  AppendLittleEndian<uint64_t>(pf::Fnv1a64(payload.data(), payload.size()), &section);
  section += payload;
  return section;
}

int64_t StepSizeArg(const Step& step, int arg, int64_t num_tokens) {
  if (arg < 0 || arg >= static_cast<int>(step.args.size())) return 0;
  if (step.args[arg].kind == ArgRefKind::kNumTokens) return num_tokens;
  return step.args[arg].kind == ArgRefKind::kI32 ? step.args[arg].i32 : 0;
}

int64_t StepSizeArg(const Step& step, const char* name, int64_t num_tokens) {
  return StepSizeArg(step, abi::FindArg(SpecOf(step), name), num_tokens);
}

bool StepRuns(const Step& step, int64_t num_tokens, bool soft_tokens) {
  const abi::OpSpec& spec = SpecOf(step);
  switch (spec.runs) {
    case abi::Runs::kAlways:
      return true;
    case abi::Runs::kWithSoftTokens:
      return soft_tokens;
    case abi::Runs::kOnItsPath:
      return StepSizeArg(step, abi::FindRole(spec, abi::Role::kMoePath), 0) ==
             abi::MoePathFor(num_tokens);
    case abi::Runs::kWhenGrouped:
      return abi::MoePathFor(num_tokens) == abi::kMoeGrouped;
    case abi::Runs::kWhenSplit:
      // Over the op's max_splits and split_rows (kernel_ops.def: ops that run so have both).
      return abi::AttentionSplits(static_cast<int>(num_tokens),
                                  static_cast<int>(StepSizeArg(step, "max_splits", 0)),
                                  static_cast<int>(StepSizeArg(step, "split_rows", 0))) > 1;
  }
  return true;
}

const Program* ProgramOf(const Plan& plan, int64_t num_tokens, bool soft_tokens) {
  for (const Program& program : plan.programs) {
    if (program.soft_tokens == soft_tokens && num_tokens >= program.min_tokens &&
        num_tokens <= program.max_tokens) {
      return &program;
    }
  }
  return nullptr;
}

int LaunchSharedBytes(const Plan& plan, const Step& step, int64_t num_tokens) {
  return step.shared_bytes + abi::CallSharedBytes(step.op, num_tokens,
                                                  plan.activation_precision == DType::kBF16);
}

void BuildPrograms(Plan* plan) {
  plan->programs.clear();
  // The steps whose membership depends on the call's size (the others run always, or with soft
  // rows: the same within a range of one kind).
  std::vector<size_t> varying;
  for (size_t s = 0; s < plan->steps.size(); ++s) {
    const abi::Runs runs = SpecOf(plan->steps[s]).runs;
    if (runs != abi::Runs::kAlways && runs != abi::Runs::kWithSoftTokens) varying.push_back(s);
  }
  const auto same_steps = [&](int64_t a, int64_t b, bool soft) {
    for (const size_t s : varying) {
      if (StepRuns(plan->steps[s], a, soft) != StepRuns(plan->steps[s], b, soft)) return false;
    }
    return true;
  };
  // The range from `from` up to at most `to` whose sizes run the same steps.
  const auto add_range = [&](int64_t from, int64_t to, bool soft) {
    Program program;
    program.min_tokens = from;
    program.soft_tokens = soft;
    for (size_t s = 0; s < plan->steps.size(); ++s) {
      if (StepRuns(plan->steps[s], from, soft)) program.steps.push_back(static_cast<int64_t>(s));
    }
    program.max_tokens = from;
    while (program.max_tokens < to && same_steps(from, program.max_tokens + 1, soft)) {
      ++program.max_tokens;
    }
    program.name = from == 1 && program.max_tokens == 1 && !soft
                       ? std::string("decode")
                       : absl::StrCat(soft ? "prefill_soft_" : "prefill_", program.min_tokens,
                                      "_", program.max_tokens);
    const int64_t next = program.max_tokens + 1;
    plan->programs.push_back(std::move(program));
    return next;
  };
  if (plan->max_tokens < 1) return;
  // One token on its own, so that decode runs the steps of one token and nothing else.
  add_range(1, 1, false);
  for (int64_t from = 2; from <= plan->max_tokens;) {
    from = add_range(from, plan->max_tokens, false);
  }
  if (plan->soft_embeddings >= 0) {
    for (int64_t from = 1; from <= plan->max_tokens;) {
      from = add_range(from, plan->max_tokens, true);
    }
  }
}

}  // namespace rt
}  // namespace spark
