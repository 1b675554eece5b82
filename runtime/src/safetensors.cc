#include "spark/runtime/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "checked_math.h"
#include "file_util.h"
#include "host_allocation.h"
#include "json_document.h"
#include "little_endian.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/quantized_weights.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {

struct Checkpoint::Mapping {
  std::unique_ptr<MappedFile> file;
};

namespace {

constexpr uint64_t kLengthBytes = 8;
constexpr absl::string_view kMetadataKey = "__metadata__";
constexpr absl::string_view kSafetensorsExtension = ".safetensors";

struct DTypeEntry {
  const char* name;
  int size;
};
constexpr DTypeEntry kDTypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1},
    {"U16", 2},  {"I16", 2}, {"F16", 2}, {"BF16", 2},    {"U32", 4},     {"I32", 4},
    {"F32", 4},  {"U64", 8}, {"I64", 8}, {"F64", 8},
};

std::string KnownDTypes() {
  std::vector<absl::string_view> names;
  for (const DTypeEntry& entry : kDTypes) names.push_back(entry.name);
  return absl::StrJoin(names, ", ");
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// The errors below name tensors, dtypes and files from the checkpoint: made printable
// (PrintableText).
absl::Status FileError(absl::string_view path, absl::string_view message) {
  return absl::InvalidArgumentError(PrintableText(absl::StrCat(path, ": ", message)));
}

absl::Status TensorError(absl::string_view path, absl::string_view name,
                         absl::string_view message) {
  return absl::InvalidArgumentError(
      PrintableText(absl::StrCat(path, ": tensor ", name, ": ", message)));
}

// A JSON array of integers >= 0, or nullopt.
absl::optional<std::vector<int64_t>> NonNegativeInts(const Json* json) {
  if (json == nullptr || !json->is_array()) return absl::nullopt;
  std::vector<int64_t> values;
  for (const Json& element : *json) {
    if (!IsJsonInt(element) || JsonInt(element) < 0) return absl::nullopt;
    values.push_back(JsonInt(element));
  }
  return values;
}

// The JSON header of a safetensors file of `size` bytes at `data`; sets *data_start to the offset
// of the data area.
absl::StatusOr<Json> ReadHeaderJson(absl::string_view path, const uint8_t* data, uint64_t size,
                                    uint64_t* data_start) {
  if (size < kLengthBytes) {
    return FileError(path, absl::StrCat("truncated safetensors file: ", size,
                                        " bytes, the header length alone needs 8"));
  }
  const uint64_t header_bytes = LoadLittleEndian<uint64_t>(reinterpret_cast<const char*>(data));
  if (header_bytes > size - kLengthBytes) {
    return FileError(path, absl::StrCat("safetensors header length ", header_bytes,
                                        " exceeds the rest of the file (", size - kLengthBytes,
                                        " bytes); the file is truncated or not safetensors"));
  }
  if (header_bytes > kMaxSafetensorsHeaderBytes) {
    return FileError(path, absl::StrCat("safetensors header length ", header_bytes,
                                        " is above the limit of ", kMaxSafetensorsHeaderBytes,
                                        " bytes (16 MiB; real headers are about 100 KiB); the "
                                        "file is damaged"));
  }
  const absl::string_view text(reinterpret_cast<const char*>(data) + kLengthBytes, header_bytes);
  absl::StatusOr<Json> header;
  SPARK_RETURN_IF_ERROR(
      WithHostAllocation(PrintableText(absl::StrCat("the parsed safetensors header of ", path)), 0,
                         [&] { header = ParseJson(text); }));
  if (!header.ok()) {
    return FileError(path, absl::StrCat("the safetensors header is not valid JSON: ",
                                        header.status().message()));
  }
  if (!header->is_object()) {
    return FileError(path, absl::StrCat("the safetensors header must be a JSON object, found ",
                                        JsonTypeName(*header)));
  }
  *data_start = kLengthBytes + header_bytes;
  return header;
}

absl::Status CheckMetadata(absl::string_view path, const Json& metadata) {
  bool all_strings = metadata.is_object();
  if (all_strings) {
    for (const auto& member : metadata.items()) {
      all_strings = all_strings && member.value().is_string();
    }
  }
  if (all_strings) return absl::OkStatus();
  return FileError(path, "__metadata__ must be an object of string values");
}

// One header entry -> a view into the data area [data + data_start, data + size).
absl::StatusOr<TensorView> ReadEntry(absl::string_view path, const std::string& name,
                                     const Json& entry, const uint8_t* data, uint64_t data_start,
                                     uint64_t size) {
  if (!entry.is_object()) {
    return TensorError(path, name, absl::StrCat("expected an object, found ", JsonTypeName(entry)));
  }
  const Json* dtype = FindMember(entry, "dtype");
  if (dtype == nullptr || !dtype->is_string()) {
    return TensorError(path, name, "missing \"dtype\" string");
  }
  const int dtype_size = SafetensorsDTypeSize(dtype->get_ref<const std::string&>());
  if (dtype_size == 0) {
    return TensorError(path, name, absl::StrCat("unknown dtype \"", dtype->get_ref<const std::string&>(),
                                                "\" (known: ", KnownDTypes(), ")"));
  }
  const absl::optional<std::vector<int64_t>> shape = NonNegativeInts(FindMember(entry, "shape"));
  if (!shape) return TensorError(path, name, "\"shape\" must be an array of integers >= 0");
  const absl::optional<std::vector<int64_t>> offsets = NonNegativeInts(FindMember(entry, "data_offsets"));
  if (!offsets || offsets->size() != 2) {
    return TensorError(path, name, "\"data_offsets\" must be [begin, end], integers >= 0");
  }
  const uint64_t begin = (*offsets)[0], end = (*offsets)[1];
  const uint64_t data_size = size - data_start;
  if (begin > end || end > data_size) {
    return TensorError(path, name,
                       absl::StrCat("data_offsets [", begin, ", ", end,
                                    "] are not a range inside the data area (", data_size,
                                    " bytes); the file is truncated or damaged"));
  }
  const absl::optional<uint64_t> expected = CheckedShapeBytes(*shape, dtype_size);
  if (!expected || *expected != end - begin) {
    return TensorError(path, name,
                       absl::StrCat("data_offsets span ", end - begin, " bytes, but ",
                                    dtype->get_ref<const std::string&>(), " ", ShapeText(*shape), " needs ",
                                    expected ? absl::StrCat(*expected) : "more than 2^64"));
  }
  TensorView view;
  view.name = name;
  view.dtype = dtype->get_ref<const std::string&>();
  view.shape = *shape;
  view.data = data + data_start + begin;
  view.num_bytes = end - begin;
  return view;
}

// Rejects tensors whose byte ranges overlap (empty tensors overlap nothing).
absl::Status CheckNoOverlap(absl::string_view path, const std::vector<TensorView>& tensors) {
  std::vector<const TensorView*> sorted;
  for (const TensorView& tensor : tensors) {
    if (tensor.num_bytes > 0) sorted.push_back(&tensor);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorView* a, const TensorView* b) { return a->data < b->data; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    const TensorView& previous = *sorted[i - 1];
    if (sorted[i]->data < previous.data + previous.num_bytes) {
      return FileError(path, absl::StrCat("tensors ", previous.name, " and ", sorted[i]->name,
                                          " overlap in the data area; the file is damaged"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<TensorView>> ParseSafetensorsImage(absl::string_view origin,
                                                              absl::string_view image) {
  const absl::string_view path = origin;
  const uint8_t* data = reinterpret_cast<const uint8_t*>(image.data());
  const uint64_t size = image.size();
  uint64_t data_start = 0;
  SPARK_ASSIGN_OR_RETURN(const Json header, ReadHeaderJson(path, data, size, &data_start));
  std::vector<TensorView> tensors;
  for (const auto& member : header.items()) {
    if (member.key() == kMetadataKey) {
      SPARK_RETURN_IF_ERROR(CheckMetadata(path, member.value()));
      continue;
    }
    SPARK_ASSIGN_OR_RETURN(TensorView tensor,
                           ReadEntry(path, member.key(), member.value(), data, data_start, size));
    tensors.push_back(std::move(tensor));
  }
  SPARK_RETURN_IF_ERROR(CheckNoOverlap(path, tensors));
  return tensors;
}

absl::StatusOr<SafetensorsIndex> ParseSafetensorsIndex(absl::string_view text,
                                                       absl::string_view index_path) {
  absl::StatusOr<Json> json = ParseJson(text);
  if (!json.ok()) {
    return FileError(index_path, absl::StrCat("not valid JSON: ", json.status().message()));
  }
  const Json* weight_map = FindMember(*json, "weight_map");
  if (weight_map == nullptr || !weight_map->is_object()) {
    return FileError(index_path, "expected an object with a \"weight_map\" object");
  }
  SafetensorsIndex index;
  absl::flat_hash_set<std::string> seen;
  for (const auto& member : weight_map->items()) {
    const std::string file = member.value().is_string() ? member.value().get<std::string>() : "";
    if (file.empty() || absl::StrContains(file, "/")) {
      return FileError(index_path, absl::StrCat("weight_map[\"", member.key(),
                                                "\"] must be a file name in the same "
                                                "directory, found ",
                                                SerializeJson(member.value())));
    }
    if (seen.insert(file).second) index.files.push_back(file);
    index.weight_map.emplace_back(member.key(), file);
  }
  return index;
}

namespace {

absl::StatusOr<std::vector<std::string>> SafetensorsFilesIn(const std::string& dir) {
  SPARK_ASSIGN_OR_RETURN(const std::vector<std::string> names, ListDirectory(dir));
  std::vector<std::string> files;
  // The transformers layout: one model.safetensors, or model-*.safetensors shards. Other
  // safetensors files in the directory (test goldens, adapters) are not part of the model.
  for (const std::string& name : names) {
    if (name == "model.safetensors") return std::vector<std::string>{name};
  }
  for (const std::string& name : names) {
    if (absl::StartsWith(name, "model-") && absl::EndsWith(name, kSafetensorsExtension)) {
      files.push_back(name);
    }
  }
  if (!files.empty()) return files;
  for (const std::string& name : names) {
    if (absl::EndsWith(name, kSafetensorsExtension)) files.push_back(name);
  }
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat(
        dir, " has no *.safetensors file and no ", kSafetensorsIndexName,
        "; point the checkpoint path at the model's directory or at a .safetensors file"));
  }
  return files;
}

}  // namespace

// Builds a Checkpoint file by file (friend of Checkpoint).
class CheckpointBuilder {
 public:
  explicit CheckpointBuilder(const std::string& path) : checkpoint_(new Checkpoint()) {
    checkpoint_->path_ = path;
  }

  absl::Status AddFile(const std::string& path) {
    SPARK_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
    SPARK_ASSIGN_OR_RETURN(std::vector<TensorView> tensors,
                           ParseSafetensorsImage(path, file->view()));
    Checkpoint& checkpoint = *checkpoint_;
    const size_t file_index = checkpoint.files_.size();
    for (TensorView& tensor : tensors) {
      const auto inserted = checkpoint.index_.emplace(tensor.name, checkpoint.tensors_.size());
      if (!inserted.second) {
        return absl::InvalidArgumentError(PrintableText(absl::StrCat(
            "tensor ", tensor.name, " appears twice: in ", FileOf(inserted.first->second),
            " and in ", path, "; the checkpoint is inconsistent")));
      }
      checkpoint.total_bytes_ += tensor.num_bytes;  // bounded by the mapped file sizes
      checkpoint.tensors_.push_back(std::move(tensor));
      checkpoint.tensor_files_.push_back(file_index);
    }
    checkpoint.files_.push_back({path, file->data(), file->size()});
    checkpoint.mappings_.push_back(std::make_unique<Checkpoint::Mapping>());
    checkpoint.mappings_.back()->file = std::move(file);
    return absl::OkStatus();
  }

  // The index says `tensor` is in `file_path`: check that it is.
  absl::Status CheckIndexEntry(const std::string& index_path, const std::string& tensor,
                               const std::string& file_path) const {
    const auto it = checkpoint_->index_.find(tensor);
    if (it != checkpoint_->index_.end() && FileOf(it->second) == file_path) {
      return absl::OkStatus();
    }
    return FileError(index_path, absl::StrCat("weight_map maps ", tensor, " to ", file_path,
                                              ", but that file has no tensor ", tensor,
                                              "; the index does not match the shards"));
  }

  std::unique_ptr<Checkpoint> Finish() { return std::move(checkpoint_); }

 private:
  // The path of the file holding tensor number `tensor`.
  const std::string& FileOf(size_t tensor) const {
    return checkpoint_->files_[checkpoint_->tensor_files_[tensor]].path;
  }

  std::unique_ptr<Checkpoint> checkpoint_;
};

namespace {

absl::Status AddIndexedDirectory(const std::string& dir, CheckpointBuilder* builder) {
  const std::string index_path = JoinPath(dir, kSafetensorsIndexName);
  SPARK_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(index_path));
  SPARK_ASSIGN_OR_RETURN(const SafetensorsIndex index, ParseSafetensorsIndex(text, index_path));
  for (const std::string& file : index.files) {
    SPARK_RETURN_IF_ERROR(builder->AddFile(JoinPath(dir, file)));
  }
  for (const auto& entry : index.weight_map) {
    SPARK_RETURN_IF_ERROR(
        builder->CheckIndexEntry(index_path, entry.first, JoinPath(dir, entry.second)));
  }
  return absl::OkStatus();
}

absl::Status AddDirectory(const std::string& dir, CheckpointBuilder* builder) {
  // An index that is not a regular file (a FIFO, a directory) is refused when read, not skipped.
  if (FileMode(JoinPath(dir, kSafetensorsIndexName)).ok()) {
    return AddIndexedDirectory(dir, builder);
  }
  SPARK_ASSIGN_OR_RETURN(const std::vector<std::string> files, SafetensorsFilesIn(dir));
  for (const std::string& file : files) {
    SPARK_RETURN_IF_ERROR(builder->AddFile(JoinPath(dir, file)));
  }
  return absl::OkStatus();
}

std::string NotFoundHint(const Plan& plan, const std::string& name, const Checkpoint& checkpoint) {
  const std::string& prefix = plan.model.weight_prefix;
  absl::string_view suffix = name;
  if (!prefix.empty()) absl::ConsumePrefix(&suffix, prefix);
  const std::string dotted_suffix = absl::StrCat(".", suffix);
  for (const TensorView& tensor : checkpoint.tensors()) {
    if (tensor.name == suffix || absl::EndsWith(tensor.name, dotted_suffix)) {
      return absl::StrCat("; the checkpoint has ", tensor.name, ": the importer's weight prefix \"",
                          prefix, "\" may not match this checkpoint, re-import the model with "
                          "the prefix its tensors use");
    }
  }
  return absl::StrCat("; is this the checkpoint the model was imported from? (the importer's "
                      "weight prefix is \"", prefix, "\")");
}

// The checkpoint tensors weight `w` is read from: itself, or each of its parts (name, dtype and
// part shape), in order.
std::vector<WeightInfo> CheckpointTensorsOf(const WeightInfo& w) {
  if (w.parts.empty()) return {w};
  std::vector<WeightInfo> tensors;
  tensors.reserve(w.parts.size());
  for (const std::string& part : w.parts) {
    WeightInfo tensor{part, w.dtype, w.part_shape, {}, {}};
    tensor.transform = w.transform;
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

absl::Status CheckAllPresent(const Plan& plan, const Checkpoint& checkpoint,
                             absl::string_view subject) {
  std::string first_missing, first_of;
  size_t missing = 0, total = 0;
  bool assembled = false;  // a weight is made of parts: count checkpoint tensors, not weights
  for (const WeightInfo& weight : plan.weights) {
    assembled = assembled || !weight.parts.empty();
    for (const WeightInfo& tensor : CheckpointTensorsOf(weight)) {
      ++total;
      if (checkpoint.Find(tensor.name) != nullptr) continue;
      if (missing++ == 0) {
        first_missing = tensor.name;
        if (!weight.parts.empty()) first_of = absl::StrCat(", a part of ", weight.name, ",");
      }
    }
  }
  if (missing == 0) return absl::OkStatus();
  return absl::NotFoundError(PrintableText(absl::StrCat(
      "weight ", first_missing, first_of, " is not in the checkpoint ", checkpoint.path(), " (",
      missing, " of ", subject, "'s ", total, assembled ? " checkpoint tensors" : " weights",
      " are missing)",
      NotFoundHint(plan, first_missing, checkpoint))));
}

absl::Status CheckWeight(const WeightInfo& weight, const TensorView& tensor,
                         absl::string_view subject) {
  // Packed float4 codes are stored as U8, two per byte along the last dimension (ModelOpt).
  const bool packed = weight.dtype == DType::kF4E2M1FN;
  const absl::string_view dtype = packed ? "U8" : SafetensorsDTypeName(weight.dtype);
  // A tensor-parallel plan's weight is a slice of the checkpoint's tensor.
  const std::vector<int64_t> whole = weight.CheckpointShape();
  std::vector<int64_t> shape = whole;
  if (packed && !shape.empty()) shape.back() /= 2;
  const std::string stored =
      packed ? absl::StrCat(" (", DTypeName(weight.dtype), " ", ShapeText(whole),
                            ", two codes per byte)")
             : std::string();
  if (tensor.dtype != dtype) {
    return absl::InvalidArgumentError(PrintableText(absl::StrCat(
        "weight ", weight.name, ": expected dtype ", dtype, stored, ", found ", tensor.dtype,
        "; ", subject, " expects ", DTypeName(weight.dtype),
        weight.dtype == DType::kBF16
            ? " here (a quantized or converted checkpoint needs its own import)"
            : " here: is this the checkpoint the model was imported from? (its quantization "
              "must match: spark-import reads it from the checkpoint's config)")));
  }
  if (tensor.shape != shape) {
    return absl::InvalidArgumentError(PrintableText(
        absl::StrCat("weight ", weight.name, ": expected shape ", ShapeText(shape), stored,
                     ", found ", ShapeText(tensor.shape),
                     "; the checkpoint is not the model variant ", subject, " describes")));
  }
  return absl::OkStatus();
}

// Every element of a scale tensor (f32 or float8 e4m3fn) is finite and >= 0; one the plan
// inverts (a compressed-tensors global scale) is finite and > 0, so that its reciprocal is too.
absl::Status CheckScaleValues(const WeightInfo& weight, const TensorView& tensor) {
  const auto bad = [&](uint64_t index, absl::string_view what) {
    return absl::InvalidArgumentError(PrintableText(absl::StrCat(
        "weight ", weight.name, ": element ", index, " is ", what,
        "; a dequantisation scale must be finite and >= 0 (the checkpoint is corrupt, or was "
        "not written by a quantizer)")));
  };
  if (weight.dtype == DType::kF32) {
    for (uint64_t i = 0; i < tensor.num_bytes / 4; ++i) {
      float value;
      std::memcpy(&value, tensor.data + 4 * i, sizeof(value));
      if (std::isnan(value)) return bad(i, "NaN");
      if (std::isinf(value)) return bad(i, "infinite");
      if (value < 0.0f) return bad(i, absl::StrCat("negative (", value, ")"));
      if (value == 0.0f && weight.transform == WeightTransform::kReciprocal) {
        return bad(i, "0, and the plan takes its reciprocal (a scale stored inverted)");
      }
    }
  } else if (weight.dtype == DType::kF8E4M3FN) {
    for (uint64_t i = 0; i < tensor.num_bytes; ++i) {
      const uint8_t bits = tensor.data[i];
      if (quant::E4M3IsNaN(bits)) return bad(i, "NaN");
      if ((bits & 0x80u) != 0 && bits != 0x80u) {
        return bad(i, absl::StrCat("negative (", quant::E4M3Value(bits), ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOwnedTensor(const OwnedTensor& tensor, absl::flat_hash_set<std::string>* names) {
  if (tensor.name.empty() || tensor.name == kMetadataKey) {
    return absl::InvalidArgumentError(
        PrintableText(absl::StrCat("cannot write a tensor named \"", tensor.name, "\"")));
  }
  if (!names->insert(tensor.name).second) {
    return absl::InvalidArgumentError(
        PrintableText(absl::StrCat("tensor ", tensor.name, " is given twice")));
  }
  const int dtype_size = SafetensorsDTypeSize(tensor.dtype);
  if (dtype_size == 0) {
    return absl::InvalidArgumentError(
        PrintableText(absl::StrCat("tensor ", tensor.name, ": unknown dtype \"", tensor.dtype,
                                   "\" (known: ", KnownDTypes(), ")")));
  }
  const absl::optional<uint64_t> expected = CheckedShapeBytes(tensor.shape, dtype_size);
  if (!expected || *expected != tensor.bytes.size()) {
    return absl::InvalidArgumentError(PrintableText(
        absl::StrCat("tensor ", tensor.name, ": ", tensor.bytes.size(), " bytes given, but ",
                     tensor.dtype, " ", ShapeText(tensor.shape), " needs ",
                     expected ? absl::StrCat(*expected) : "more than 2^64")));
  }
  return absl::OkStatus();
}

Json IntsJson(const std::vector<int64_t>& values) {
  Json array = Json::array();
  for (const int64_t value : values) array.push_back(JsonInteger(value));
  return array;
}

}  // namespace

int SafetensorsDTypeSize(absl::string_view dtype) {
  for (const DTypeEntry& entry : kDTypes) {
    if (dtype == entry.name) return entry.size;
  }
  return 0;
}

Checkpoint::~Checkpoint() = default;

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& dir_or_file) {
  CheckpointBuilder builder(dir_or_file);
  const absl::StatusOr<mode_t> mode = FileMode(dir_or_file);
  if (absl::IsNotFound(mode.status())) {
    return absl::NotFoundError(PrintableText(
        absl::StrCat("checkpoint ", dir_or_file,
                     " does not exist; name the model's directory or a .safetensors file")));
  }
  if (!mode.ok()) return mode.status();
  if (S_ISDIR(*mode)) {
    SPARK_RETURN_IF_ERROR(AddDirectory(dir_or_file, &builder));
  } else if (S_ISREG(*mode)) {
    SPARK_RETURN_IF_ERROR(builder.AddFile(dir_or_file));
  } else {
    return absl::InvalidArgumentError(PrintableText(
        absl::StrCat("checkpoint ", dir_or_file, " is ", FileTypeName(*mode),
                     ", not a directory or a .safetensors file; name the model's directory or a "
                     ".safetensors file")));
  }
  return builder.Finish();
}

const TensorView* Checkpoint::Find(absl::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

absl::Status CheckPlanWeights(const Plan& plan, const Checkpoint& checkpoint,
                              absl::string_view subject) {
  SPARK_RETURN_IF_ERROR(CheckAllPresent(plan, checkpoint, subject));
  for (const WeightInfo& weight : plan.weights) {
    for (const WeightInfo& tensor : CheckpointTensorsOf(weight)) {
      SPARK_RETURN_IF_ERROR(CheckWeight(tensor, *checkpoint.Find(tensor.name), subject));
    }
  }
  // The dequantisation scales the steps take (registry role kWeightScale): a NaN, infinite or
  // negative scale would silently turn the layer's outputs into garbage.
  std::vector<bool> is_scale(plan.weights.size(), false);
  for (const Step& step : plan.steps) {
    const abi::OpSpec& spec = abi::Spec(step.op);
    for (size_t i = 0; i < step.args.size() && i < static_cast<size_t>(spec.num_args); ++i) {
      if (spec.args[i].role == abi::Role::kWeightScale &&
          step.args[i].kind == ArgRefKind::kWeight && step.args[i].index >= 0 &&
          static_cast<size_t>(step.args[i].index) < is_scale.size()) {
        is_scale[step.args[i].index] = true;
      }
    }
  }
  for (size_t w = 0; w < plan.weights.size(); ++w) {
    if (!is_scale[w]) continue;
    for (const WeightInfo& tensor : CheckpointTensorsOf(plan.weights[w])) {
      SPARK_RETURN_IF_ERROR(CheckScaleValues(tensor, *checkpoint.Find(tensor.name)));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteSafetensors(const std::string& path, const std::vector<OwnedTensor>& tensors,
                              ExistingFile existing) {
  absl::flat_hash_set<std::string> names;
  Json header = Json::object();
  uint64_t offset = 0;
  for (const OwnedTensor& tensor : tensors) {
    SPARK_RETURN_IF_ERROR(CheckOwnedTensor(tensor, &names));
    const uint64_t end = offset + tensor.bytes.size();  // bounded by memory: no overflow
    Json entry = Json::object();
    AddMember(entry, "dtype", Json(tensor.dtype));
    AddMember(entry, "shape", IntsJson(tensor.shape));
    AddMember(entry, "data_offsets", IntsJson({static_cast<int64_t>(offset), static_cast<int64_t>(end)}));
    AddMember(header, tensor.name, std::move(entry));
    offset = end;
  }
  std::string header_text = SerializeJson(header);
  header_text.resize((header_text.size() + 7) / 8 * 8, ' ');
  std::string file;
  file.reserve(kLengthBytes + header_text.size() + offset);
  AppendLittleEndian<uint64_t>(header_text.size(), &file);
  file += header_text;
  for (const OwnedTensor& tensor : tensors) file += tensor.bytes;
  return existing == ExistingFile::kRefuse ? WriteNewFile(path, file)
                                           : WriteStringToFile(path, file);
}

absl::Status WriteSafetensorsStreamed(
    const std::string& path, const std::vector<TensorHeader>& tensors,
    const std::function<absl::StatusOr<absl::string_view>(size_t index)>& produce,
    const std::vector<std::pair<std::string, std::string>>& metadata) {
  absl::flat_hash_set<std::string> names;
  Json header = Json::object();
  if (!metadata.empty()) {
    Json pairs = Json::object();
    for (const auto& [key, value] : metadata) AddMember(pairs, key, Json(value));
    AddMember(header, std::string(kMetadataKey), std::move(pairs));
  }
  std::vector<uint64_t> sizes;
  uint64_t offset = 0;
  for (const TensorHeader& tensor : tensors) {
    const int dtype_size = SafetensorsDTypeSize(tensor.dtype);
    const absl::optional<uint64_t> bytes =
        dtype_size > 0 ? CheckedShapeBytes(tensor.shape, dtype_size) : absl::nullopt;
    if (!bytes) {
      return absl::InvalidArgumentError(PrintableText(
          absl::StrCat("tensor ", tensor.name, ": unknown dtype \"", tensor.dtype,
                       "\" or a shape too large ", ShapeText(tensor.shape))));
    }
    if (tensor.name.empty() || tensor.name == kMetadataKey || !names.insert(tensor.name).second) {
      return absl::InvalidArgumentError(
          PrintableText(absl::StrCat("cannot write a tensor named \"", tensor.name,
                                     "\" (empty, reserved or given twice)")));
    }
    Json entry = Json::object();
    AddMember(entry, "dtype", Json(tensor.dtype));
    AddMember(entry, "shape", IntsJson(tensor.shape));
    AddMember(entry, "data_offsets", IntsJson({static_cast<int64_t>(offset),
                                               static_cast<int64_t>(offset + *bytes)}));
    AddMember(header, tensor.name, std::move(entry));
    sizes.push_back(*bytes);
    offset += *bytes;
  }
  std::string header_text = SerializeJson(header);
  // 8 length bytes + the header end on a multiple of 16.
  header_text.resize((header_text.size() + kLengthBytes + 15) / 16 * 16 - kLengthBytes, ' ');
  std::string prefix;
  AppendLittleEndian<uint64_t>(header_text.size(), &prefix);
  prefix += header_text;
  SPARK_ASSIGN_OR_RETURN(std::unique_ptr<NewFileWriter> file, NewFileWriter::Create(path));
  SPARK_RETURN_IF_ERROR(file->Append(prefix));
  for (size_t i = 0; i < tensors.size(); ++i) {
    SPARK_ASSIGN_OR_RETURN(const absl::string_view bytes, produce(i));
    if (bytes.size() != sizes[i]) {
      return absl::InternalError(PrintableText(
          absl::StrCat("tensor ", tensors[i].name, ": ", bytes.size(), " bytes produced, ",
                       tensors[i].dtype, " ", ShapeText(tensors[i].shape), " needs ", sizes[i])));
    }
    SPARK_RETURN_IF_ERROR(file->Append(bytes));
  }
  return file->Close();
}

absl::StatusOr<std::vector<OwnedTensor>> ReadSafetensorsFile(const std::string& path) {
  SPARK_ASSIGN_OR_RETURN(const std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  SPARK_ASSIGN_OR_RETURN(const std::vector<TensorView> views,
                         ParseSafetensorsImage(path, file->view()));
  std::vector<OwnedTensor> tensors;
  for (const TensorView& view : views) {
    OwnedTensor tensor;
    tensor.name = view.name;
    tensor.dtype = view.dtype;
    tensor.shape = view.shape;
    tensor.bytes.assign(reinterpret_cast<const char*>(view.data), view.num_bytes);
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

}  // namespace rt
}  // namespace spark
