// Minimal Abseil stand-in (see string_view.h): absl::StrCat via ostringstream.
#ifndef SPARK_TEST_GPU_ABSL_SHIM_STRINGS_STR_CAT_H_
#define SPARK_TEST_GPU_ABSL_SHIM_STRINGS_STR_CAT_H_
#include <sstream>
#include <string>
#include "absl/strings/string_view.h"
namespace absl {
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  (void)std::initializer_list<int>{((os << args), 0)...};
  return os.str();
}
}  // namespace absl
#endif
