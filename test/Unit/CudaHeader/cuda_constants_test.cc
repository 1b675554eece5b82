// The CUDA driver constants the runtime declares by hand (runtime/src/cuda/cuda_driver.h: the
// runtime never includes cuda.h, so that it builds and starts without the toolkit) are cuda.h's:
// compiled, and this file only, against the toolkit's header where the build has one
// (test/Unit/CMakeLists.txt adds it then). A value that differs does not compile.
#include <cuda.h>

#include <cstddef>

#include "cuda/cuda_driver.h"
#include "gtest/gtest.h"

namespace spark {
namespace rt {
namespace {

static_assert(static_cast<long long>(cu::kSuccess) == static_cast<long long>(CUDA_SUCCESS), "cu::kSuccess is not cuda.h's CUDA_SUCCESS");
static_assert(static_cast<long long>(cu::kErrorOutOfMemory) == static_cast<long long>(CUDA_ERROR_OUT_OF_MEMORY), "cu::kErrorOutOfMemory is not cuda.h's CUDA_ERROR_OUT_OF_MEMORY");
static_assert(static_cast<long long>(cu::kErrorNotInitialized) == static_cast<long long>(CUDA_ERROR_NOT_INITIALIZED), "cu::kErrorNotInitialized is not cuda.h's CUDA_ERROR_NOT_INITIALIZED");
static_assert(static_cast<long long>(cu::kErrorDeinitialized) == static_cast<long long>(CUDA_ERROR_DEINITIALIZED), "cu::kErrorDeinitialized is not cuda.h's CUDA_ERROR_DEINITIALIZED");
static_assert(static_cast<long long>(cu::kErrorStubLibrary) == static_cast<long long>(CUDA_ERROR_STUB_LIBRARY), "cu::kErrorStubLibrary is not cuda.h's CUDA_ERROR_STUB_LIBRARY");
static_assert(static_cast<long long>(cu::kErrorDeviceUnavailable) == static_cast<long long>(CUDA_ERROR_DEVICE_UNAVAILABLE), "cu::kErrorDeviceUnavailable is not cuda.h's CUDA_ERROR_DEVICE_UNAVAILABLE");
static_assert(static_cast<long long>(cu::kErrorNoDevice) == static_cast<long long>(CUDA_ERROR_NO_DEVICE), "cu::kErrorNoDevice is not cuda.h's CUDA_ERROR_NO_DEVICE");
static_assert(static_cast<long long>(cu::kErrorSystemNotReady) == static_cast<long long>(CUDA_ERROR_SYSTEM_NOT_READY), "cu::kErrorSystemNotReady is not cuda.h's CUDA_ERROR_SYSTEM_NOT_READY");
static_assert(static_cast<long long>(cu::kErrorSystemDriverMismatch) == static_cast<long long>(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH), "cu::kErrorSystemDriverMismatch is not cuda.h's CUDA_ERROR_SYSTEM_DRIVER_MISMATCH");
static_assert(static_cast<long long>(cu::kErrorCompatNotSupportedOnDevice) == static_cast<long long>(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE), "cu::kErrorCompatNotSupportedOnDevice is not cuda.h's CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE");
static_assert(static_cast<long long>(cu::kAttrMultiprocessorCount) == static_cast<long long>(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), "cu::kAttrMultiprocessorCount is not cuda.h's CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT");
static_assert(static_cast<long long>(cu::kAttrIntegrated) == static_cast<long long>(CU_DEVICE_ATTRIBUTE_INTEGRATED), "cu::kAttrIntegrated is not cuda.h's CU_DEVICE_ATTRIBUTE_INTEGRATED");
static_assert(static_cast<long long>(cu::kAttrCanMapHostMemory) == static_cast<long long>(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY), "cu::kAttrCanMapHostMemory is not cuda.h's CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY");
static_assert(static_cast<long long>(cu::kAttrComputeCapabilityMajor) == static_cast<long long>(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), "cu::kAttrComputeCapabilityMajor is not cuda.h's CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR");
static_assert(static_cast<long long>(cu::kAttrComputeCapabilityMinor) == static_cast<long long>(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), "cu::kAttrComputeCapabilityMinor is not cuda.h's CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR");
static_assert(static_cast<long long>(cu::kAttrPageableMemoryAccess) == static_cast<long long>(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS), "cu::kAttrPageableMemoryAccess is not cuda.h's CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS");
static_assert(static_cast<long long>(cu::kAttrMaxSharedMemoryPerBlockOptin) == static_cast<long long>(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN), "cu::kAttrMaxSharedMemoryPerBlockOptin is not cuda.h's CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN");
static_assert(static_cast<long long>(cu::kFuncAttrMaxDynamicSharedSizeBytes) == static_cast<long long>(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES), "cu::kFuncAttrMaxDynamicSharedSizeBytes is not cuda.h's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES");
static_assert(static_cast<long long>(cu::kJitInfoLogBuffer) == static_cast<long long>(CU_JIT_INFO_LOG_BUFFER), "cu::kJitInfoLogBuffer is not cuda.h's CU_JIT_INFO_LOG_BUFFER");
static_assert(static_cast<long long>(cu::kJitInfoLogBufferSizeBytes) == static_cast<long long>(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES), "cu::kJitInfoLogBufferSizeBytes is not cuda.h's CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES");
static_assert(static_cast<long long>(cu::kJitErrorLogBuffer) == static_cast<long long>(CU_JIT_ERROR_LOG_BUFFER), "cu::kJitErrorLogBuffer is not cuda.h's CU_JIT_ERROR_LOG_BUFFER");
static_assert(static_cast<long long>(cu::kJitErrorLogBufferSizeBytes) == static_cast<long long>(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES), "cu::kJitErrorLogBufferSizeBytes is not cuda.h's CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES");
static_assert(static_cast<long long>(cu::kJitLogVerbose) == static_cast<long long>(CU_JIT_LOG_VERBOSE), "cu::kJitLogVerbose is not cuda.h's CU_JIT_LOG_VERBOSE");
static_assert(static_cast<long long>(cu::kStreamCaptureModeGlobal) == static_cast<long long>(CU_STREAM_CAPTURE_MODE_GLOBAL), "cu::kStreamCaptureModeGlobal is not cuda.h's CU_STREAM_CAPTURE_MODE_GLOBAL");
static_assert(static_cast<long long>(cu::kStreamCaptureModeThreadLocal) == static_cast<long long>(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cu::kStreamCaptureModeThreadLocal is not cuda.h's CU_STREAM_CAPTURE_MODE_THREAD_LOCAL");
static_assert(static_cast<long long>(cu::kEventDefault) == static_cast<long long>(CU_EVENT_DEFAULT), "cu::kEventDefault is not cuda.h's CU_EVENT_DEFAULT");
static_assert(static_cast<long long>(cu::kEventDisableTiming) == static_cast<long long>(CU_EVENT_DISABLE_TIMING), "cu::kEventDisableTiming is not cuda.h's CU_EVENT_DISABLE_TIMING");
static_assert(static_cast<long long>(cu::kMemHostRegisterDeviceMap) == static_cast<long long>(CU_MEMHOSTREGISTER_DEVICEMAP), "cu::kMemHostRegisterDeviceMap is not cuda.h's CU_MEMHOSTREGISTER_DEVICEMAP");
static_assert(static_cast<long long>(cu::kMemHostRegisterReadOnly) == static_cast<long long>(CU_MEMHOSTREGISTER_READ_ONLY), "cu::kMemHostRegisterReadOnly is not cuda.h's CU_MEMHOSTREGISTER_READ_ONLY");
static_assert(static_cast<long long>(cu::kMemoryTypeDevice) == static_cast<long long>(CU_MEMORYTYPE_DEVICE), "cu::kMemoryTypeDevice is not cuda.h's CU_MEMORYTYPE_DEVICE");
// CudaMemcpy2D is laid out as cuda.h's CUDA_MEMCPY2D (cuMemcpy2DAsync reads it).
static_assert(sizeof(CudaMemcpy2D) == sizeof(CUDA_MEMCPY2D), "CudaMemcpy2D's size is not CUDA_MEMCPY2D's");
#define SPARK_MEMCPY2D_FIELD(f) static_assert(offsetof(CudaMemcpy2D, f) == offsetof(CUDA_MEMCPY2D, f), "CudaMemcpy2D::" #f " is not where CUDA_MEMCPY2D has it");
SPARK_MEMCPY2D_FIELD(srcXInBytes) SPARK_MEMCPY2D_FIELD(srcY) SPARK_MEMCPY2D_FIELD(srcMemoryType)
SPARK_MEMCPY2D_FIELD(srcHost) SPARK_MEMCPY2D_FIELD(srcDevice) SPARK_MEMCPY2D_FIELD(srcArray)
SPARK_MEMCPY2D_FIELD(srcPitch) SPARK_MEMCPY2D_FIELD(dstXInBytes) SPARK_MEMCPY2D_FIELD(dstY)
SPARK_MEMCPY2D_FIELD(dstMemoryType) SPARK_MEMCPY2D_FIELD(dstHost) SPARK_MEMCPY2D_FIELD(dstDevice)
SPARK_MEMCPY2D_FIELD(dstArray) SPARK_MEMCPY2D_FIELD(dstPitch) SPARK_MEMCPY2D_FIELD(WidthInBytes)
SPARK_MEMCPY2D_FIELD(Height)
#undef SPARK_MEMCPY2D_FIELD
static_assert(static_cast<long long>(cu::kStreamNonBlocking) == static_cast<long long>(CU_STREAM_NON_BLOCKING), "cu::kStreamNonBlocking is not cuda.h's CU_STREAM_NON_BLOCKING");

TEST(CudaDriverConstantsTest, AreTheToolkitHeadersValues) {
  // The static_asserts above are the check; this records which header they were checked against.
  EXPECT_GE(CUDA_VERSION, 12000) << "cuda.h of CUDA " << CUDA_VERSION;
  EXPECT_EQ(cu::kSuccess, static_cast<int>(CUDA_SUCCESS));
}

}  // namespace
}  // namespace rt
}  // namespace spark
