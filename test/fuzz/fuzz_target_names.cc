// Fuzzes the module resolver's name handling: target names (ParseTarget,
// ParseComputeCapability), artifact stems (ModuleStem) and image file names
// (IsModuleCandidateName).
//
// Input: "<name>\n<stem>" (no newline: the stem is "model").
// Invariants: an accepted target prints a name that parses back to the same target and that,
// between "<stem>." and ".cubin" / ".ptx" (by kind), is a candidate name of the stem; the stem of
// "<stem>.cubin" is the stem when the stem has no '/' and no '.'.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "fuzz_check.h"
#include "spark/runtime/module_resolver.h"
#include "spark/runtime/target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const absl::string_view name = input.substr(0, newline);
  const absl::string_view stem =
      newline == absl::string_view::npos ? absl::string_view("model") : input.substr(newline + 1);

  (void)spark::rt::ParseComputeCapability(name);
  (void)spark::rt::ModuleStem(name);
  (void)spark::rt::IsModuleCandidateName(name, stem);

  absl::StatusOr<spark::rt::Target> target = spark::rt::ParseTarget(name);
  if (!target.ok()) {
    SPARK_FUZZ_CHECK(!target.status().message().empty());
    return 0;
  }
  const std::string canonical = target->ToString();
  absl::StatusOr<spark::rt::Target> again = spark::rt::ParseTarget(canonical);
  SPARK_FUZZ_CHECK(again.ok() && *again == *target);
  const std::string file =
      absl::StrCat(stem, ".", canonical, target->is_cubin() ? ".cubin" : ".ptx");
  SPARK_FUZZ_CHECK(spark::rt::IsModuleCandidateName(file, stem));
  if (!stem.empty() && !absl::StrContains(stem, "/") && !absl::StrContains(stem, ".")) {
    SPARK_FUZZ_CHECK(spark::rt::ModuleStem(absl::StrCat(stem, ".cubin")) == stem);
    SPARK_FUZZ_CHECK(spark::rt::ModuleStem(file) == stem);
  }
  return 0;
}
