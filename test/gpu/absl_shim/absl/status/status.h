// Minimal Abseil stand-in (see ../strings/string_view.h): absl::Status with the few factories the
// host reference kernels use.
#ifndef SPARK_TEST_GPU_ABSL_SHIM_STATUS_STATUS_H_
#define SPARK_TEST_GPU_ABSL_SHIM_STATUS_STATUS_H_
#include <string>
#include <utility>
#include "absl/strings/string_view.h"
namespace absl {
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 3,
  kFailedPrecondition = 9,
  kInternal = 13,
  kUnavailable = 14,
  kUnimplemented = 12,
};
class Status {
 public:
  Status() = default;
  Status(StatusCode code, absl::string_view message) : code_(code), message_(message) {}
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  absl::string_view message() const { return message_; }
  std::string ToString() const { return ok() ? "OK" : message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};
inline Status OkStatus() { return Status(); }
inline Status InvalidArgumentError(absl::string_view m) {
  return Status(StatusCode::kInvalidArgument, m);
}
inline Status FailedPreconditionError(absl::string_view m) {
  return Status(StatusCode::kFailedPrecondition, m);
}
inline Status InternalError(absl::string_view m) { return Status(StatusCode::kInternal, m); }
inline Status UnavailableError(absl::string_view m) { return Status(StatusCode::kUnavailable, m); }
inline Status UnimplementedError(absl::string_view m) {
  return Status(StatusCode::kUnimplemented, m);
}
}  // namespace absl
#endif
