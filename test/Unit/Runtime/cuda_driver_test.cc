#include "cuda/cuda_driver.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "loader_test_util.h"
#include "spark/runtime/device.h"

namespace spark {
namespace rt {
namespace {

using test::StatusIs;

constexpr char kNoDriverPrefix[] = "cannot load the CUDA driver (libcuda.so.1): ";

TEST(CudaDriverTest, MissingDriverIsUnavailableWithInstructions) {
  const absl::StatusOr<const DriverApi*> api = LoadDriver();
  if (api.ok()) GTEST_SKIP() << "libcuda.so.1 loaded: this machine has a driver";
  // A machine may have libcuda without a usable GPU; then the message is the cuInit one.
  if (!absl::StartsWith(api.status().message(), "cannot load")) {
    EXPECT_TRUE(StatusIs(api.status(), absl::StatusCode::kUnavailable,
                         "loaded but cannot initialise"));
    return;
  }
  EXPECT_TRUE(StatusIs(api.status(), absl::StatusCode::kUnavailable, kNoDriverPrefix));
  EXPECT_TRUE(absl::StartsWith(api.status().message(), kNoDriverPrefix)) << api.status();
  EXPECT_TRUE(absl::EndsWith(api.status().message(),
                             "; install the NVIDIA driver or run with --device host"))
      << api.status();
  EXPECT_EQ(LoadDriver().status(), api.status());  // cached
}

TEST(CudaDriverTest, LoadDriverFromNamesTheLibraryAndDlerror) {
  const absl::StatusOr<const DriverApi*> api = LoadDriverFrom("libspark-no-such-driver.so");
  EXPECT_TRUE(StatusIs(api.status(), absl::StatusCode::kUnavailable,
                       "cannot load the CUDA driver (libspark-no-such-driver.so): "
                       "libspark-no-such-driver.so: cannot open shared object file"));
}

TEST(CudaDriverTest, LibraryWithoutDriverSymbolsIsUnavailable) {
  // libc is loadable but has none of the driver's entry points.
  const absl::StatusOr<const DriverApi*> api = LoadDriverFrom("libc.so.6");
  EXPECT_TRUE(StatusIs(api.status(), absl::StatusCode::kUnavailable,
                       "the CUDA driver (libc.so.6) lacks cuInit, cuDriverGetVersion"));
  EXPECT_TRUE(StatusIs(api.status(), absl::StatusCode::kUnavailable,
                       "it is older than this runtime needs (a CUDA 12 or later driver); update "
                       "the NVIDIA driver or run with --device host"));
}

// A fake driver error table for CuResultToStatus.
CUresult FakeErrorName(CUresult error, const char** name) {
  *name = error == cu::kErrorOutOfMemory ? "CUDA_ERROR_OUT_OF_MEMORY"
          : error == cu::kErrorNoDevice  ? "CUDA_ERROR_NO_DEVICE"
                                         : "CUDA_ERROR_LAUNCH_FAILED";
  return cu::kSuccess;
}
CUresult FakeErrorString(CUresult error, const char** text) {
  *text = error == cu::kErrorOutOfMemory ? "out of memory" : "something failed";
  return cu::kSuccess;
}
CUresult FailWith(CUresult result) { return result; }

absl::Status CallThroughMacro(const DriverApi* api, CUresult result) {
  SPARK_CU_RETURN_IF_ERROR(api, FailWith(result));
  return absl::OkStatus();
}

TEST(CudaDriverTest, MacroMapsResultsToStatuses) {
  DriverApi api;
  api.cuGetErrorName = FakeErrorName;
  api.cuGetErrorString = FakeErrorString;
  EXPECT_TRUE(CallThroughMacro(&api, cu::kSuccess).ok());
  EXPECT_TRUE(StatusIs(CallThroughMacro(&api, cu::kErrorOutOfMemory),
                       absl::StatusCode::kResourceExhausted,
                       "FailWith(result) failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory) at "
                       "cuda_driver_test.cc:"));
  EXPECT_TRUE(StatusIs(CallThroughMacro(&api, cu::kErrorNoDevice),
                       absl::StatusCode::kUnavailable, "CUDA_ERROR_NO_DEVICE"));
  EXPECT_TRUE(StatusIs(CallThroughMacro(&api, 719), absl::StatusCode::kInternal,
                       "CUDA_ERROR_LAUNCH_FAILED (something failed)"));
}

TEST(CudaDriverTest, StatusWithoutErrorNameFunctions) {
  const DriverApi api;  // nothing resolved
  EXPECT_TRUE(StatusIs(CuResultToStatus(api, 999, "cuFoo()", "/a/b/x.cc", 7),
                       absl::StatusCode::kInternal, "cuFoo() failed: CUDA error 999 at x.cc:7"));
}

TEST(CudaDriverTest, ListDevicesReportsTheDriverStatus) {
  const absl::StatusOr<std::vector<DeviceInfo>> devices = ListDevices();
  if (!LoadDriver().ok()) {
    EXPECT_EQ(devices.status(), LoadDriver().status());
    return;
  }
  ASSERT_TRUE(devices.ok()) << devices.status();
  for (const DeviceInfo& device : *devices) {
    EXPECT_FALSE(device.name.empty());
    EXPECT_GE(device.cc_major, 5);
    EXPECT_GT(device.total_bytes, 0u);
    EXPECT_LE(device.free_bytes, device.total_bytes);
    EXPECT_GT(device.multiprocessors, 0);
  }
}

}  // namespace
}  // namespace rt
}  // namespace spark
