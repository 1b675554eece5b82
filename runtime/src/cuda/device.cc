// ListDevices (spark/runtime/device.h) over the dlopen'd driver.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cuda/cuda_driver.h"
#include "spark/runtime/device.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {
namespace {

absl::StatusOr<int> Attribute(const DriverApi* api, CUdevice device,
                              CUdevice_attribute attribute) {
  int value = 0;
  SPARK_CU_RETURN_IF_ERROR(api, api->cuDeviceGetAttribute(&value, attribute, device));
  return value;
}

// Free and total memory as the device's primary context sees them. Retains the primary context
// (creating it if needed), and restores the calling thread's current context afterwards.
absl::Status QueryMemory(const DriverApi* api, CUdevice device, DeviceInfo* info) {
  CUcontext previous = nullptr;
  SPARK_CU_RETURN_IF_ERROR(api, api->cuCtxGetCurrent(&previous));
  CUcontext context = nullptr;
  SPARK_CU_RETURN_IF_ERROR(api, api->cuDevicePrimaryCtxRetain(&context, device));
  size_t free_bytes = 0, total_bytes = 0;
  CUresult result = api->cuCtxSetCurrent(context);
  if (result == cu::kSuccess) result = api->cuMemGetInfo(&free_bytes, &total_bytes);
  api->cuCtxSetCurrent(previous);
  api->cuDevicePrimaryCtxRelease(device);
  if (result != cu::kSuccess) {
    return CuResultToStatus(*api, result, "cuMemGetInfo(&free_bytes, &total_bytes)", __FILE__,
                            __LINE__);
  }
  info->free_bytes = free_bytes;
  info->total_bytes = total_bytes;
  return absl::OkStatus();
}

absl::StatusOr<DeviceInfo> QueryDevice(const DriverApi* api, int ordinal) {
  CUdevice device = 0;
  SPARK_CU_RETURN_IF_ERROR(api, api->cuDeviceGet(&device, ordinal));
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  SPARK_CU_RETURN_IF_ERROR(api, api->cuDeviceGetName(name, sizeof(name) - 1, device));
  info.name = name;
  SPARK_ASSIGN_OR_RETURN(info.cc_major, Attribute(api, device, cu::kAttrComputeCapabilityMajor));
  SPARK_ASSIGN_OR_RETURN(info.cc_minor, Attribute(api, device, cu::kAttrComputeCapabilityMinor));
  SPARK_ASSIGN_OR_RETURN(const int integrated, Attribute(api, device, cu::kAttrIntegrated));
  info.integrated = integrated != 0;
  SPARK_ASSIGN_OR_RETURN(info.multiprocessors,
                         Attribute(api, device, cu::kAttrMultiprocessorCount));
  SPARK_RETURN_IF_ERROR(QueryMemory(api, device, &info));
  return info;
}

}  // namespace

absl::StatusOr<std::vector<DeviceInfo>> ListDevices() {
  SPARK_ASSIGN_OR_RETURN(const DriverApi* api, LoadDriver());
  int count = 0;
  SPARK_CU_RETURN_IF_ERROR(api, api->cuDeviceGetCount(&count));
  if (count == 0) {
    return absl::UnavailableError(
        "the CUDA driver reports no device; check nvidia-smi, or run with --device host");
  }
  std::vector<DeviceInfo> devices;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    SPARK_ASSIGN_OR_RETURN(DeviceInfo info, QueryDevice(api, ordinal));
    devices.push_back(std::move(info));
  }
  return devices;
}

}  // namespace rt
}  // namespace spark
