// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1") so that the runtime (and its
// tests) start on machines without a driver. Never include cuda.h or link libcuda: the few types
// and constants the runtime needs are declared here, with the values of CUDA 12/13's cuda.h
// (test/Unit/CudaHeader/cuda_constants_test.cc checks them against the toolkit's header).
// Every call goes through SPARK_CU_RETURN_IF_ERROR, which turns a CUresult into an absl::Status.
#ifndef SPARK_RUNTIME_SRC_CUDA_CUDA_DRIVER_H_
#define SPARK_RUNTIME_SRC_CUDA_CUDA_DRIVER_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "spark/runtime/device.h"

namespace spark {
namespace rt {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUdevice_attribute = int;
using CUfunction_attribute = int;
using CUjit_option = int;
using CUstreamCaptureMode = int;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphExec_st* CUgraphExec;

// CUDA_MEMCPY2D (cuda.h's CUDA_MEMCPY2D_v2): a copy of `Height` rows of `WidthInBytes` between
// pitched memory. The runtime fills only the device-to-device fields.
struct CudaMemcpy2D {
  size_t srcXInBytes = 0;
  size_t srcY = 0;
  int srcMemoryType = 0;  // CUmemorytype: cu::kMemoryTypeDevice
  const void* srcHost = nullptr;
  CUdeviceptr srcDevice = 0;
  void* srcArray = nullptr;
  size_t srcPitch = 0;
  size_t dstXInBytes = 0;
  size_t dstY = 0;
  int dstMemoryType = 0;
  void* dstHost = nullptr;
  CUdeviceptr dstDevice = 0;
  void* dstArray = nullptr;
  size_t dstPitch = 0;
  size_t WidthInBytes = 0;
  size_t Height = 0;
};

// Constants from cuda.h (same names, Google style).
namespace cu {
inline constexpr CUresult kSuccess = 0;
inline constexpr CUresult kErrorOutOfMemory = 2;
inline constexpr CUresult kErrorNotInitialized = 3;
inline constexpr CUresult kErrorDeinitialized = 4;
inline constexpr CUresult kErrorStubLibrary = 34;
inline constexpr CUresult kErrorDeviceUnavailable = 46;
inline constexpr CUresult kErrorNoDevice = 100;
inline constexpr CUresult kErrorSystemNotReady = 802;
inline constexpr CUresult kErrorSystemDriverMismatch = 803;
inline constexpr CUresult kErrorCompatNotSupportedOnDevice = 804;

inline constexpr CUdevice_attribute kAttrMultiprocessorCount = 16;
inline constexpr CUdevice_attribute kAttrIntegrated = 18;
inline constexpr CUdevice_attribute kAttrCanMapHostMemory = 19;
inline constexpr CUdevice_attribute kAttrComputeCapabilityMajor = 75;
inline constexpr CUdevice_attribute kAttrComputeCapabilityMinor = 76;
inline constexpr CUdevice_attribute kAttrPageableMemoryAccess = 88;
inline constexpr CUdevice_attribute kAttrMaxSharedMemoryPerBlockOptin = 97;

inline constexpr CUfunction_attribute kFuncAttrMaxDynamicSharedSizeBytes = 8;

inline constexpr CUjit_option kJitInfoLogBuffer = 3;
inline constexpr CUjit_option kJitInfoLogBufferSizeBytes = 4;
inline constexpr CUjit_option kJitErrorLogBuffer = 5;
inline constexpr CUjit_option kJitErrorLogBufferSizeBytes = 6;
inline constexpr CUjit_option kJitLogVerbose = 12;

inline constexpr unsigned int kStreamNonBlocking = 0x1;
inline constexpr unsigned int kEventDefault = 0x0;
inline constexpr unsigned int kEventDisableTiming = 0x2;
inline constexpr CUstreamCaptureMode kStreamCaptureModeGlobal = 0;
inline constexpr CUstreamCaptureMode kStreamCaptureModeThreadLocal = 1;
inline constexpr unsigned int kMemHostRegisterDeviceMap = 0x02;
inline constexpr unsigned int kMemHostRegisterReadOnly = 0x08;
inline constexpr int kMemoryTypeDevice = 2;  // CU_MEMORYTYPE_DEVICE
}  // namespace cu

// X(member, "exported symbol", (parameters)): every driver entry point the runtime uses. The
// member drops the ABI suffix (`cuMemAlloc` calls cuMemAlloc_v2), as cuda.h's macros do.
#define SPARK_CUDA_DRIVER_SYMBOLS(X)                                                            \
  X(cuInit, "cuInit", (unsigned int flags))                                                     \
  X(cuDriverGetVersion, "cuDriverGetVersion", (int* version))                                   \
  X(cuGetErrorName, "cuGetErrorName", (CUresult error, const char** name))                      \
  X(cuGetErrorString, "cuGetErrorString", (CUresult error, const char** text))                  \
  X(cuDeviceGetCount, "cuDeviceGetCount", (int* count))                                         \
  X(cuDeviceGet, "cuDeviceGet", (CUdevice * device, int ordinal))                               \
  X(cuDeviceGetName, "cuDeviceGetName", (char* name, int length, CUdevice device))              \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute",                                               \
    (int* value, CUdevice_attribute attribute, CUdevice device))                                \
  X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", (size_t * bytes, CUdevice device))                 \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext * context, CUdevice device)) \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice device))               \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", (CUcontext context))                                    \
  X(cuCtxGetCurrent, "cuCtxGetCurrent", (CUcontext * context))                                  \
  X(cuCtxSynchronize, "cuCtxSynchronize", ())                                                   \
  X(cuMemGetInfo, "cuMemGetInfo_v2", (size_t * free_bytes, size_t * total_bytes))               \
  X(cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr * pointer, size_t bytes))                         \
  X(cuMemFree, "cuMemFree_v2", (CUdeviceptr pointer))                                           \
  X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", (CUdeviceptr dst, const void* src, size_t bytes))          \
  X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", (void* dst, CUdeviceptr src, size_t bytes))                \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",                                                  \
    (CUdeviceptr dst, const void* src, size_t bytes, CUstream stream))                          \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2",                                                  \
    (void* dst, CUdeviceptr src, size_t bytes, CUstream stream))                                \
  X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2",                                                  \
    (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))                          \
  X(cuMemcpy2DAsync, "cuMemcpy2DAsync_v2", (const CudaMemcpy2D* copy, CUstream stream))        \
  X(cuMemsetD8, "cuMemsetD8_v2", (CUdeviceptr dst, unsigned char value, size_t count))          \
  X(cuMemHostRegister, "cuMemHostRegister_v2", (void* pointer, size_t bytes, unsigned int flags)) \
  X(cuMemHostUnregister, "cuMemHostUnregister", (void* pointer))                                \
  X(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2",                                  \
    (CUdeviceptr * device_pointer, void* host_pointer, unsigned int flags))                     \
  X(cuModuleLoadData, "cuModuleLoadData", (CUmodule * module, const void* image))               \
  X(cuModuleLoadDataEx, "cuModuleLoadDataEx",                                                   \
    (CUmodule * module, const void* image, unsigned int num_options, CUjit_option* options,     \
     void** option_values))                                                                     \
  X(cuModuleUnload, "cuModuleUnload", (CUmodule module))                                        \
  X(cuModuleGetFunction, "cuModuleGetFunction",                                                 \
    (CUfunction * function, CUmodule module, const char* name))                                 \
  X(cuFuncSetAttribute, "cuFuncSetAttribute",                                                   \
    (CUfunction function, CUfunction_attribute attribute, int value))                           \
  X(cuLaunchKernel, "cuLaunchKernel",                                                           \
    (CUfunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,        \
     unsigned int block_x, unsigned int block_y, unsigned int block_z,                          \
     unsigned int shared_bytes, CUstream stream, void** params, void** extra))                  \
  X(cuStreamCreate, "cuStreamCreate", (CUstream * stream, unsigned int flags))                  \
  X(cuStreamDestroy, "cuStreamDestroy_v2", (CUstream stream))                                   \
  X(cuStreamSynchronize, "cuStreamSynchronize", (CUstream stream))                              \
  X(cuEventCreate, "cuEventCreate", (CUevent * event, unsigned int flags))                      \
  X(cuEventRecord, "cuEventRecord", (CUevent event, CUstream stream))                           \
  X(cuEventSynchronize, "cuEventSynchronize", (CUevent event))                                  \
  X(cuEventElapsedTime, "cuEventElapsedTime", (float* milliseconds, CUevent start, CUevent end)) \
  X(cuEventDestroy, "cuEventDestroy_v2", (CUevent event))                                       \
  X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", (CUstream stream, CUstreamCaptureMode mode)) \
  X(cuStreamEndCapture, "cuStreamEndCapture", (CUstream stream, CUgraph * graph))               \
  X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags",                                 \
    (CUgraphExec * exec, CUgraph graph, unsigned long long flags))                              \
  X(cuGraphLaunch, "cuGraphLaunch", (CUgraphExec exec, CUstream stream))                        \
  X(cuGraphDestroy, "cuGraphDestroy", (CUgraph graph))                                          \
  X(cuGraphExecDestroy, "cuGraphExecDestroy", (CUgraphExec exec))

// The resolved driver entry points: api->cuMemAlloc(&pointer, bytes).
struct DriverApi {
#define SPARK_CUDA_DRIVER_MEMBER(member, symbol, params) CUresult(*member) params = nullptr;
  SPARK_CUDA_DRIVER_SYMBOLS(SPARK_CUDA_DRIVER_MEMBER)
#undef SPARK_CUDA_DRIVER_MEMBER
  void* library = nullptr;  // the dlopen handle
  int driver_version = 0;   // cuDriverGetVersion, e.g. 13000
};

// Loads libcuda.so.1 once per process, resolves every symbol and calls cuInit(0). The result (or
// the error) is cached. Errors: kUnavailable "cannot load the CUDA driver (libcuda.so.1):
// <dlerror>; install the NVIDIA driver or run with --device host" when dlopen fails; kUnavailable
// for a driver that lacks a symbol (too old) or whose cuInit reports no usable device.
absl::StatusOr<const DriverApi*> LoadDriver();

// The same from another library name, not cached (for tests). The returned object is leaked on
// success: the driver stays loaded for the life of the process.
absl::StatusOr<const DriverApi*> LoadDriverFrom(const char* library);

// The status for a failed driver call: kUnavailable for no-device / driver-install errors,
// kResourceExhausted for out-of-memory, kInternal otherwise; the message carries the error name
// and text (cuGetErrorName/cuGetErrorString), the call and file:line.
absl::Status CuResultToStatus(const DriverApi& api, CUresult result, const char* call,
                              const char* file, int line);

// Returns from the enclosing function with CuResultToStatus(...) when `expr` fails:
//   SPARK_CU_RETURN_IF_ERROR(api, api->cuMemAlloc(&pointer, bytes));
#define SPARK_CU_RETURN_IF_ERROR(api, expr)                                                  \
  do {                                                                                       \
    const ::spark::rt::CUresult spark_cu_result_ = (expr);                                   \
    if (spark_cu_result_ != ::spark::rt::cu::kSuccess) {                                     \
      return ::spark::rt::CuResultToStatus(*(api), spark_cu_result_, #expr, __FILE__, __LINE__); \
    }                                                                                        \
  } while (0)

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_CUDA_CUDA_DRIVER_H_
