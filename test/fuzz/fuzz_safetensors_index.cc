// Fuzzes the reader of model.safetensors.index.json (ParseSafetensorsIndex).
//
// Invariants: a rejection carries a message; every accepted shard name is a non-empty plain file
// name (no '/'), listed once, and every weight_map entry names a listed shard.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "fuzz_check.h"
#include "spark/runtime/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<spark::rt::SafetensorsIndex> index =
      spark::rt::ParseSafetensorsIndex(text, "fuzz.index.json");
  if (!index.ok()) {
    SPARK_FUZZ_CHECK(!index.status().message().empty());
    return 0;
  }
  std::set<std::string> files;
  for (const std::string& file : index->files) {
    SPARK_FUZZ_CHECK(!file.empty() && !absl::StrContains(file, "/"));
    SPARK_FUZZ_CHECK(files.insert(file).second);
  }
  for (const auto& entry : index->weight_map) SPARK_FUZZ_CHECK(files.count(entry.second) == 1);
  return 0;
}
