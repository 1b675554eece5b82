// For the libFuzzer targets that mutate plan JSON (fuzz_plan_section, fuzz_plan_execution).
#ifndef SPARK_TEST_FUZZ_FUZZ_PLAN_JSON_H_
#define SPARK_TEST_FUZZ_FUZZ_PLAN_JSON_H_

#include <cstring>
#include <string>

#include "absl/strings/string_view.h"
#include "spark/runtime/plan_format.h"

namespace spark {
namespace fuzz {

// A `.spark.plan` section around `json`, with a correct header and checksum, so that mutations
// of the JSON reach the JSON reader and the plan validation instead of stopping at the checksum.
inline std::string WrapPlanJson(absl::string_view json) {
  plan_format::Header header;
  std::memcpy(header.magic, plan_format::kMagic, sizeof(header.magic));
  header.version = plan_format::kPlanVersion;
  header.flags = 0;
  header.json_size = json.size();
  header.checksum = plan_format::Fnv1a64(json.data(), json.size());
  std::string section(reinterpret_cast<const char*>(&header), sizeof(header));
  section.append(json.data(), json.size());
  return section;
}

}  // namespace fuzz
}  // namespace spark

#endif  // SPARK_TEST_FUZZ_FUZZ_PLAN_JSON_H_
