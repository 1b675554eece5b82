// Fuzzes the safetensors reader: one file's header and data area (ParseSafetensorsImage, what
// Checkpoint::Open does with each mapped file).
//
// Invariants: a rejection carries a message; every accepted tensor has a known dtype, lies
// inside the data area, spans exactly product(shape) * dtype size bytes, and no two overlap.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fuzz_check.h"
#include "spark/runtime/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view image(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<spark::rt::TensorView>> tensors =
      spark::rt::ParseSafetensorsImage("fuzz.safetensors", image);
  if (!tensors.ok()) {
    SPARK_FUZZ_CHECK(!tensors.status().message().empty());
    return 0;
  }
  std::vector<std::pair<const uint8_t*, uint64_t>> ranges;
  for (const spark::rt::TensorView& tensor : *tensors) {
    const int element = spark::rt::SafetensorsDTypeSize(tensor.dtype);
    SPARK_FUZZ_CHECK(element > 0);
    unsigned __int128 bytes = static_cast<unsigned __int128>(element);
    for (int64_t dim : tensor.shape) {
      SPARK_FUZZ_CHECK(dim >= 0);
      bytes *= static_cast<uint64_t>(dim);
      if (bytes > size) bytes = static_cast<unsigned __int128>(size) + 1;  // stays "too big"
    }
    SPARK_FUZZ_CHECK(bytes == tensor.num_bytes);
    SPARK_FUZZ_CHECK(tensor.num_bytes <= size);
    SPARK_FUZZ_CHECK(tensor.data >= data + 8);
    SPARK_FUZZ_CHECK(static_cast<uint64_t>(tensor.data - data) <= size - tensor.num_bytes);
    if (tensor.num_bytes > 0) ranges.emplace_back(tensor.data, tensor.num_bytes);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    SPARK_FUZZ_CHECK(ranges[i - 1].first + ranges[i - 1].second <= ranges[i].first);
  }
  return 0;
}
