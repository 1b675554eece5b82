// The CUDA devices of this machine, as the driver reports them. Works on machines without a GPU
// or driver: ListDevices() then returns kUnavailable ("cannot load the CUDA driver ...").
#ifndef SPARK_RUNTIME_DEVICE_H_
#define SPARK_RUNTIME_DEVICE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace spark {
namespace rt {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;  // e.g. "NVIDIA H200", "NVIDIA GB10"
  int cc_major = 0;
  int cc_minor = 0;
  bool integrated = false;   // CU_DEVICE_ATTRIBUTE_INTEGRATED: GPU and CPU share host memory
  uint64_t total_bytes = 0;  // cuMemGetInfo total (cuDeviceTotalMem)
  uint64_t free_bytes = 0;   // cuMemGetInfo free, in the device's primary context
  int multiprocessors = 0;
};

// Every device, by ordinal. kUnavailable when the driver cannot be loaded or reports no device;
// kInternal for unexpected driver errors.
absl::StatusOr<std::vector<DeviceInfo>> ListDevices();

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_DEVICE_H_
