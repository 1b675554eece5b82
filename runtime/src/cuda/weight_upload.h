// Copying the weights of a discrete GPU from the checkpoint to the device at close to the
// host-to-device bandwidth (cold start, issue 23). A plain cuMemcpyHtoD from the mapped
// checkpoint copies through the driver's own small pinned buffer, one piece at a time, and faults
// in every page of the mapping on the way. Here several threads each read chunks of the
// checkpoint with pread (page cache to pinned memory in the kernel, no faults on the mapping) into
// two pinned staging buffers of their own and copy them with cuMemcpyHtoDAsync on their own
// stream, so reading the next chunk overlaps the copy of the last and the threads overlap each
// other.
#ifndef SPARK_RUNTIME_SRC_CUDA_WEIGHT_UPLOAD_H_
#define SPARK_RUNTIME_SRC_CUDA_WEIGHT_UPLOAD_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "cuda/cuda_driver.h"
#include "spark/runtime/safetensors.h"

namespace spark {
namespace rt {

// `bytes` bytes at `source` (host memory: usually inside a mapped checkpoint file) to
// `destination` on the device.
struct HostToDeviceCopy {
  const uint8_t* source = nullptr;
  uint64_t bytes = 0;
  CUdeviceptr destination = 0;
};

// The copies cut into pieces of at most `chunk_bytes` (> 0), in order; empty copies dropped.
std::vector<HostToDeviceCopy> SplitIntoChunks(absl::Span<const HostToDeviceCopy> copies,
                                              uint64_t chunk_bytes);

// Where `bytes` bytes at `source` lie in one of `files`: the file's index and the offset in it;
// index -1 when they are not wholly inside one file.
struct FileRange {
  int file = -1;
  uint64_t offset = 0;
};
FileRange FindInFiles(absl::Span<const Checkpoint::File> files, const uint8_t* source,
                      uint64_t bytes);

struct StagedUploadOptions {
  // Each thread has its own stream and two buffers; 0: one per CPU core, at most 16. Reading the
  // page cache into the buffers is what limits the rate. On the H200 machine (16 cores, 55.5 GB/s
  // pinned host-to-device), 31B's 57.18 GiB: 44 GB/s with 16 threads of 8 MiB buffers, 50 with
  // 4 MiB, 36 with 16 MiB; 8 threads 45, 12 threads 49; 26B-A4B: 8.8 GB/s with 2 threads of
  // 32 MiB, 16 with 4 (bench/results/2026-12-06-h200-cold-start.md).
  int threads = 0;
  uint64_t chunk_bytes = 4ull << 20;        // the size of one staging buffer
  // Called on the calling thread as chunks land (bytes done, bytes in all).
  std::function<void(uint64_t done, uint64_t total)> on_progress;
};

// SPARK_UPLOAD_THREADS and SPARK_UPLOAD_CHUNK_MIB (positive integers), when set, replace
// `options`' thread count and chunk size (docs/cli.md); another value is an InvalidArgument error.
absl::Status ReadUploadTuning(StagedUploadOptions* options);

// Performs `copies` in `context` (a device's primary context) through pinned staging buffers, as
// the header says. Sources inside one of `files` are read from the file by its path (a file that
// cannot be opened or read falls back to copying from the mapping); others are copied from
// memory. Returns the first error of any thread, after every thread stopped.
absl::Status UploadStaged(const DriverApi& api, CUcontext context,
                          absl::Span<const HostToDeviceCopy> copies,
                          absl::Span<const Checkpoint::File> files,
                          const StagedUploadOptions& options);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_CUDA_WEIGHT_UPLOAD_H_
