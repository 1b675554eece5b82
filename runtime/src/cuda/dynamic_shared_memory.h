// The dynamic shared memory of a plan's kernels on a CUDA device: how much each kernel's largest
// call gets (plan.h LaunchSharedBytes: the plan's shared_bytes plus the registry's per-call size),
// and the opt-in the driver requires before a launch may take it. Without the opt-in a launch
// may take only 48 KiB less the kernel's static shared memory (an image whose linear had 40 KiB
// static and 40 KiB dynamic was refused, CUDA_ERROR_INVALID_VALUE, on the H200), so every kernel
// that gets any opts in, once, at its largest.
#ifndef SPARK_RUNTIME_SRC_CUDA_DYNAMIC_SHARED_MEMORY_H_
#define SPARK_RUNTIME_SRC_CUDA_DYNAMIC_SHARED_MEMORY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "cuda/cuda_driver.h"
#include "spark/runtime/plan.h"

namespace spark {
namespace rt {

// A kernel's largest dynamic shared memory and the first step whose call of max_tokens tokens
// gets it.
struct DynamicSharedNeed {
  std::string kernel;
  int step = -1;
  int bytes = 0;
};

// One entry per kernel that any of the plan's launches gives dynamic shared memory, in the order
// of the kernels' first steps. `plan` must have passed ValidatePlan.
std::vector<DynamicSharedNeed> DynamicSharedNeeds(const Plan& plan);

// cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) for `function`, `need`'s kernel; an error
// names the kernel, its step, op and size and `device_name`, which does not give that much.
absl::Status OptInDynamicShared(const DriverApi& api, CUfunction function, const Plan& plan,
                                const DynamicSharedNeed& need, absl::string_view device_name);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_CUDA_DYNAMIC_SHARED_MEMORY_H_
