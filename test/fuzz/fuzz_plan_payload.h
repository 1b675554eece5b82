// For the libFuzzer targets that mutate plan buffers (fuzz_plan_section, fuzz_plan_execution).
#ifndef SPARK_TEST_FUZZ_FUZZ_PLAN_PAYLOAD_H_
#define SPARK_TEST_FUZZ_FUZZ_PLAN_PAYLOAD_H_

#include <cstring>
#include <string>

#include "absl/strings/string_view.h"
#include "spark/runtime/plan_format.h"

namespace spark {
namespace fuzz {

// A `.spark.plan` section around `payload` (a FlatBuffers plan buffer, plan.fbs), with a correct
// header and checksum, so that mutations of the buffer reach the verifier, the reader and the
// plan validation instead of stopping at the checksum.
inline std::string WrapPlanPayload(absl::string_view payload) {
  plan_format::Header header;
  std::memcpy(header.magic, plan_format::kMagic, sizeof(header.magic));
  header.version = plan_format::kPlanVersion;
  header.flags = 0;
  header.payload_size = payload.size();
  header.checksum = plan_format::Fnv1a64(payload.data(), payload.size());
  std::string section(reinterpret_cast<const char*>(&header), sizeof(header));
  section.append(payload.data(), payload.size());
  return section;
}

}  // namespace fuzz
}  // namespace spark

#endif  // SPARK_TEST_FUZZ_FUZZ_PLAN_PAYLOAD_H_
