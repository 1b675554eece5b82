// Shared by the libFuzzer targets: SPARK_FUZZ_CHECK, an invariant that must hold for every input
// (a violation prints what broke and aborts, which libFuzzer records as a crash with the input
// saved), and WrapPlanJson for the targets that mutate plan JSON.
#ifndef SPARK_TEST_FUZZ_FUZZ_CHECK_H_
#define SPARK_TEST_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/string_view.h"
#include "spark/runtime/plan_format.h"

#define SPARK_FUZZ_CHECK(condition)                                                 \
  do {                                                                              \
    if (!(condition)) {                                                             \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, \
                   #condition);                                                     \
      std::abort();                                                                 \
    }                                                                               \
  } while (false)

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

#endif  // SPARK_TEST_FUZZ_FUZZ_CHECK_H_
