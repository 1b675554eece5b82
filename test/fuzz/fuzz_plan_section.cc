// Fuzzes the `.spark.plan` reader (ParsePlanSection: header, checksum, FlatBuffers verifier,
// reader, ValidatePlan).
//
// Input: a mode byte, then the payload. An even mode byte passes the payload as the raw section;
// an odd one wraps it as the plan buffer of a section with a correct header and checksum, so
// that the mutations reach the verifier and the plan validation instead of stopping at the
// checksum.
//
// Invariants: a rejection carries a message; an accepted plan serializes, parses back and
// serializes to the same bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fuzz_check.h"
#include "fuzz_plan_payload.h"
#include "spark/runtime/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view payload(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string section =
      (data[0] & 1) ? spark::fuzz::WrapPlanPayload(payload) : std::string(payload);

  absl::StatusOr<spark::rt::Plan> plan = spark::rt::ParsePlanSection(section, "fuzz.plan");
  if (!plan.ok()) {
    SPARK_FUZZ_CHECK(!plan.status().message().empty());
    return 0;
  }
  const std::string written = spark::rt::SerializePlanSection(*plan);
  absl::StatusOr<spark::rt::Plan> reread = spark::rt::ParsePlanSection(written, "fuzz.plan");
  SPARK_FUZZ_CHECK(reread.ok());
  SPARK_FUZZ_CHECK(spark::rt::SerializePlanSection(*reread) == written);
  return 0;
}
