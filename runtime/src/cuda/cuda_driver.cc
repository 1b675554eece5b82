#include "cuda/cuda_driver.h"

#include <dlfcn.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "file_util.h"

namespace spark {
namespace rt {
namespace {

constexpr char kDriverLibrary[] = "libcuda.so.1";
constexpr absl::string_view kUseHost = "run with --device host";

absl::StatusCode CodeFor(CUresult result) {
  switch (result) {
    case cu::kErrorNoDevice:
    case cu::kErrorStubLibrary:
    case cu::kErrorDeviceUnavailable:
    case cu::kErrorDeinitialized:
    case cu::kErrorSystemNotReady:
    case cu::kErrorSystemDriverMismatch:
    case cu::kErrorCompatNotSupportedOnDevice:
      return absl::StatusCode::kUnavailable;
    case cu::kErrorOutOfMemory:
      return absl::StatusCode::kResourceExhausted;
    default:
      return absl::StatusCode::kInternal;
  }
}

// Resolves every symbol of the table; returns the names that are missing.
std::vector<std::string> ResolveSymbols(void* library, DriverApi* api) {
  std::vector<std::string> missing;
#define SPARK_CUDA_DRIVER_RESOLVE(member, symbol, params)                        \
  api->member = reinterpret_cast<decltype(api->member)>(::dlsym(library, symbol)); \
  if (api->member == nullptr) missing.push_back(symbol);
  SPARK_CUDA_DRIVER_SYMBOLS(SPARK_CUDA_DRIVER_RESOLVE)
#undef SPARK_CUDA_DRIVER_RESOLVE
  return missing;
}

absl::Status Initialize(const char* library, DriverApi* api) {
  const CUresult result = api->cuInit(0);
  if (result != cu::kSuccess) {
    const absl::Status status = CuResultToStatus(*api, result, "cuInit(0)", __FILE__, __LINE__);
    return absl::UnavailableError(absl::StrCat(
        "the CUDA driver (", library, ") loaded but cannot initialise: ", status.message(),
        "; check that nvidia-smi lists the GPU, or ", kUseHost));
  }
  if (api->cuDriverGetVersion(&api->driver_version) != cu::kSuccess) api->driver_version = 0;
  return absl::OkStatus();
}

}  // namespace

absl::Status CuResultToStatus(const DriverApi& api, CUresult result, const char* call,
                              const char* file, int line) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName == nullptr || api.cuGetErrorName(result, &name) != cu::kSuccess) {
    name = nullptr;
  }
  if (api.cuGetErrorString == nullptr || api.cuGetErrorString(result, &text) != cu::kSuccess) {
    text = nullptr;
  }
  const std::string error =
      name != nullptr ? std::string(name) : absl::StrCat("CUDA error ", result);
  return absl::Status(CodeFor(result),
                      absl::StrCat(call, " failed: ", error, text != nullptr ? " (" : "",
                                   text != nullptr ? text : "", text != nullptr ? ")" : "",
                                   " at ", Basename(file), ":", line));
}

absl::StatusOr<const DriverApi*> LoadDriverFrom(const char* library) {
  ::dlerror();
  void* handle = ::dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = ::dlerror();
    return absl::UnavailableError(absl::StrCat(
        "cannot load the CUDA driver (", library, "): ", error != nullptr ? error : "unknown error",
        "; install the NVIDIA driver or ", kUseHost));
  }
  auto api = std::make_unique<DriverApi>();
  api->library = handle;
  const std::vector<std::string> missing = ResolveSymbols(handle, api.get());
  if (!missing.empty()) {
    ::dlclose(handle);
    return absl::UnavailableError(absl::StrCat(
        "the CUDA driver (", library, ") lacks ", absl::StrJoin(missing, ", "),
        ": it is older than this runtime needs (a CUDA 12 or later driver); update the NVIDIA "
        "driver or ", kUseHost));
  }
  const absl::Status status = Initialize(library, api.get());
  if (!status.ok()) {
    ::dlclose(handle);
    return status;
  }
  return api.release();
}

absl::StatusOr<const DriverApi*> LoadDriver() {
  static const absl::StatusOr<const DriverApi*>* const kDriver =
      new absl::StatusOr<const DriverApi*>(LoadDriverFrom(kDriverLibrary));
  return *kDriver;
}

}  // namespace rt
}  // namespace spark
