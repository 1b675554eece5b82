// Safetensors checkpoints (https://github.com/huggingface/safetensors, format):
//   u64 little-endian N | N bytes of JSON header | data area
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the data area) and may hold "__metadata__" (string values).
//
// Checkpoint maps the files read-only (MAP_PRIVATE) and validates every header before exposing a
// tensor: header length within the file and at most 16 MiB, the header a JSON object, each entry
// well formed with a known dtype, offsets inside the data area, end - begin == product(shape) *
// dtype size (overflow-safe), no two tensors overlapping, no name twice (within or across files).
#ifndef SPARK_RUNTIME_SAFETENSORS_H_
#define SPARK_RUNTIME_SAFETENSORS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spark/runtime/element_type.h"
#include "spark/runtime/plan.h"

namespace spark {
namespace rt {

// A header larger than this is rejected before parsing. Real headers are about 100 KiB (a Gemma
// 4 31B shard's); 16 MiB leaves a margin of over 100x while bounding what parsing a hostile header
// takes (about 20 bytes of memory per byte of JSON).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 16ull << 20;
// The index file a sharded checkpoint directory holds.
inline constexpr char kSafetensorsIndexName[] = "model.safetensors.index.json";

// One tensor of a mapped checkpoint; `data` stays valid while the Checkpoint lives.
struct TensorView {
  std::string name;
  std::string dtype;  // as in the file: "BF16", "F32", "F16", "I64", "I32", ...
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  uint64_t num_bytes = 0;
};

// Bytes per element of a safetensors dtype name, or 0 when the name is unknown. Known: BOOL, U8,
// I8, F8_E4M3, F8_E5M2, F8_E8M0 (1 byte); U16, I16, F16, BF16 (2); U32, I32, F32 (4); U64, I64,
// F64 (8).
int SafetensorsDTypeSize(absl::string_view dtype);

// (The names of Spark's element types: SafetensorsDTypeName and DTypeFromSafetensors,
// element_type.h.)

// Parses and validates one whole safetensors file held in memory (as Checkpoint::Open does for
// each mapped file); the views point into `image`. `origin` names the file in errors.
absl::StatusOr<std::vector<TensorView>> ParseSafetensorsImage(absl::string_view origin,
                                                              absl::string_view image);

// A model.safetensors.index.json: the shard files it names, in order of first appearance, and
// its weight map (tensor name -> file name in the same directory).
struct SafetensorsIndex {
  std::vector<std::string> files;
  std::vector<std::pair<std::string, std::string>> weight_map;
};

// Parses an index file's text. kInvalidArgument for JSON that is not an object with a
// "weight_map" object of plain file names (no '/').
absl::StatusOr<SafetensorsIndex> ParseSafetensorsIndex(absl::string_view text,
                                                       absl::string_view origin);

class Checkpoint {
 public:
  // One mapped file of the checkpoint.
  struct File {
    std::string path;
    const uint8_t* data = nullptr;  // the whole file
    uint64_t size = 0;
  };

  // Opens a checkpoint: a `.safetensors` file, or a directory. A directory uses
  // model.safetensors.index.json (its "weight_map": tensor name -> file name in the directory)
  // when present, else model.safetensors, else the model-*.safetensors shards, else every
  // *.safetensors file in it (sorted by name). kNotFound when the path
  // or a file named by the index does not exist, or the directory has no safetensors file;
  // kInvalidArgument for a malformed file or index.
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& dir_or_file);

  ~Checkpoint();
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  // The tensor called `name`, or nullptr.
  const TensorView* Find(absl::string_view name) const;
  // Every tensor: files in order, each file's tensors in header order.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // Sum of the tensors' num_bytes.
  uint64_t total_bytes() const { return total_bytes_; }
  // The path Open() was given.
  const std::string& path() const { return path_; }
  // The mapped files (e.g. to register them with the GPU on an integrated device).
  const std::vector<File>& files() const { return files_; }

 private:
  struct Mapping;
  Checkpoint() = default;

  std::string path_;
  std::vector<std::unique_ptr<Mapping>> mappings_;
  std::vector<File> files_;
  std::vector<TensorView> tensors_;
  std::vector<size_t> tensor_files_;  // index into files_ of each tensor
  absl::flat_hash_map<std::string, size_t> index_;
  uint64_t total_bytes_ = 0;

  friend class CheckpointBuilder;
};

// Checks every plan weight against the checkpoint before anything runs: present (kNotFound
// naming the tensor and the checkpoint, and the importer's weight prefix when it may be the
// cause), same shape and same dtype (kInvalidArgument: "weight model.x: expected shape
// [4096, 1536], found [2048, 1536]"). `subject` names what lists the weights in the messages:
// "the plan" at run time; spark-import passes "the config" (it checks before anything is
// compiled).
absl::Status CheckPlanWeights(const Plan& plan, const Checkpoint& checkpoint,
                              absl::string_view subject = "the plan");

// A tensor held in memory, for writing small safetensors files (dumps, tests, golden data).
struct OwnedTensor {
  std::string name;
  std::string dtype;  // safetensors name, e.g. "F32"
  std::vector<int64_t> shape;
  std::string bytes;  // product(shape) * dtype size bytes, little-endian
};

// Writes `tensors` to `path` in order, data contiguous, the header padded with spaces to a
// multiple of 8 bytes. kInvalidArgument for an unknown dtype, a size that does not match the
// shape, an empty, reserved ("__metadata__") or repeated name.
// kReplace creates or truncates `path`; kRefuse creates it only where nothing is (an existing
// file or symbolic link is kAlreadyExists: O_EXCL | O_NOFOLLOW).
enum class ExistingFile { kReplace, kRefuse };
absl::Status WriteSafetensors(const std::string& path, const std::vector<OwnedTensor>& tensors,
                              ExistingFile existing = ExistingFile::kReplace);

// What a streamed safetensors file holds, tensor by tensor (WriteSafetensorsStreamed).
struct TensorHeader {
  std::string name;
  std::string dtype;  // safetensors name
  std::vector<int64_t> shape;
};

// Writes a safetensors file one tensor at a time, for checkpoints larger than memory
// (spark-quantize): the header from `tensors`, padded so that the data starts 16-byte aligned
// (16-byte vector loads read weights in place on an integrated GPU), then for each tensor, in
// order, the bytes `produce(i)` returns (its size must match the dtype and shape; the view needs
// to stay valid only until the next call, so a producer can point into a mapping). `metadata`
// (string pairs, e.g. {"format", "pt"}) goes into the header's "__metadata__" when not empty.
// `path` must not exist (as WriteNewFile); on any error the partial file is removed.
absl::Status WriteSafetensorsStreamed(
    const std::string& path, const std::vector<TensorHeader>& tensors,
    const std::function<absl::StatusOr<absl::string_view>(size_t index)>& produce,
    const std::vector<std::pair<std::string, std::string>>& metadata = {});

// Reads a whole safetensors file into memory (validated as Checkpoint::Open does), tensors in
// header order.
absl::StatusOr<std::vector<OwnedTensor>> ReadSafetensorsFile(const std::string& path);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SAFETENSORS_H_
