// Helpers shared by the runtime unit tests.
#ifndef SPARK_TEST_UNIT_RUNTIME_RUNTIME_TEST_UTIL_H_
#define SPARK_TEST_UNIT_RUNTIME_RUNTIME_TEST_UTIL_H_

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace spark {
namespace rt {
namespace testing_util {

// Passes when `status` is an error whose message contains `needle`.
inline ::testing::AssertionResult ErrorContains(const absl::Status& status,
                                                absl::string_view needle) {
  if (!status.ok() && absl::StrContains(status.message(), needle)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "status " << status << " does not contain '" << needle << "'";
}

}  // namespace testing_util
}  // namespace rt
}  // namespace spark

#endif  // SPARK_TEST_UNIT_RUNTIME_RUNTIME_TEST_UTIL_H_
