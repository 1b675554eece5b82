// Host allocations sized from input files (the plan's arena and KV caches, whole files, parsed
// JSON) can fail under ulimit -v or a cgroup limit. The public API never throws: these helpers
// turn std::bad_alloc (and std::length_error, a size beyond what a container holds) into
// kResourceExhausted. Internal to the runtime.
#ifndef SPARK_RUNTIME_SRC_HOST_ALLOCATION_H_
#define SPARK_RUNTIME_SRC_HOST_ALLOCATION_H_

#include <cstdint>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace spark {
namespace rt {

// kResourceExhausted "out of host memory: cannot allocate <what> (<bytes> bytes); ...".
inline absl::Status HostAllocationError(absl::string_view what, uint64_t bytes) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "out of host memory: cannot allocate ", what,
      bytes > 0 ? absl::StrCat(" (", bytes, " bytes)") : "",
      "; free memory, or raise this process's limit (ulimit -v, the container's or cgroup's "
      "memory limit)"));
}

// Runs `allocate()` (returning absl::Status, or void); an allocation failure inside it becomes
// HostAllocationError(what, bytes).
template <typename Allocate>
absl::Status WithHostAllocation(absl::string_view what, uint64_t bytes, Allocate&& allocate) {
  try {
    if constexpr (std::is_void_v<decltype(allocate())>) {
      std::forward<Allocate>(allocate)();
      return absl::OkStatus();
    } else {
      return std::forward<Allocate>(allocate)();
    }
  } catch (const std::bad_alloc&) {
    return HostAllocationError(what, bytes);
  } catch (const std::length_error&) {
    return HostAllocationError(what, bytes);
  }
}

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_HOST_ALLOCATION_H_
