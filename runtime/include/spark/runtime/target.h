// GPU target names, as spark-compile's --target takes them and plans record them. Shared by the
// runtime (module resolution) and the compiler (kernel library lookup, target validation).
//
//   sm_<M><m>a    arch-specific image: runs only on compute capability exactly M.m
//   sm_<M><m>f    family image: runs on compute capability M.x with x >= m
//   sm_<M><m>     generic image: runs on compute capability M.x with x >= m
//   compute_<M><m> PTX for the virtual architecture M.m: the driver JIT-compiles it for any device
//                 of compute capability >= M.m
// <M> is one or two digits without a leading zero, <m> exactly one digit: sm_90a is 9.0, sm_121a
// is 12.1.
#ifndef SPARK_RUNTIME_TARGET_H_
#define SPARK_RUNTIME_TARGET_H_

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spark {
namespace rt {

enum class TargetKind { kArch, kFamily, kGeneric, kPtx };

struct Target {
  TargetKind kind = TargetKind::kGeneric;
  int major = 0;
  int minor = 0;

  // The canonical name, e.g. "sm_121a", "compute_90".
  std::string ToString() const;
  // True for the cubin kinds (kArch, kFamily, kGeneric).
  bool is_cubin() const { return kind != TargetKind::kPtx; }

  friend bool operator==(const Target& a, const Target& b) {
    return a.kind == b.kind && a.major == b.major && a.minor == b.minor;
  }
};

// Parses a target name; kInvalidArgument, saying what is expected, for anything else.
absl::StatusOr<Target> ParseTarget(absl::string_view name);

// Parses a compute capability written "M.m" (e.g. "9.0", "12.1"), as --device-cc takes it.
absl::StatusOr<std::pair<int, int>> ParseComputeCapability(absl::string_view text);

// The arch-specific target to compile for a device of compute capability major.minor: sm_<M><m>a
// from 9.0 up (where arch-specific features exist), sm_<M><m> below.
Target NativeTargetFor(int major, int minor);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_TARGET_H_
