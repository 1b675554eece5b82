// The CUDA executor: runs a plan's steps as kernel launches from the artifact's image (cubin, or
// PTX that the driver JIT-compiles), through the dlopen'd driver API. Decode steps (one token, no
// soft tokens) are captured once per sequence into a CUDA graph and replayed; with a step observer
// (dumps) or a profile every step is launched on its own instead.
#ifndef SPARK_RUNTIME_CUDA_EXECUTOR_H_
#define SPARK_RUNTIME_CUDA_EXECUTOR_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spark/runtime/artifact.h"
#include "spark/runtime/device.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/load_phases.h"
#include "spark/runtime/safetensors.h"

namespace spark {
namespace rt {

class NcclCommunicator;  // runtime/src/cuda/nccl.h

struct CudaExecutorOptions {
  DeviceInfo device;       // from ListDevices: ordinal, and `integrated` decides weight binding
  bool use_graphs = true;  // capture decode steps in a CUDA graph
  // One-line notices (e.g. that PTX is being JIT-compiled); may be empty.
  std::function<void(absl::string_view)> on_notice;
  // Weight upload progress in bytes (discrete devices only); may be empty.
  std::function<void(uint64_t done, uint64_t total)> on_progress;
  // The phases of creating it (CUDA context, module load, NCCL, weights); may be empty.
  LoadPhaseSink on_phase;
  // The plan to run when it is not artifact.plan: its image encoder (*artifact.plan.image_encoder,
  // whose kernels are in the same image). Must outlive the executor.
  const Plan* plan = nullptr;
  // A tensor-parallel plan (Plan::ranks > 1): this executor's rank (its weight slices) and the
  // NCCL communicator its all_reduce / all_gather steps call. A plan of one rank with collectives
  // (spark-op-check's) gets a communicator of its own, of one rank.
  int64_t rank = 0;
  std::shared_ptr<NcclCommunicator> nccl;
};

// Loads artifact.image into a module of the device's primary context and looks up the kernel of
// every step (kNotFound naming a missing kernel), then binds the weights: on an integrated device
// the checkpoint's mapped files are registered with the GPU and used in place, otherwise they are
// copied into one device allocation. NewSequence allocates a sequence's KV caches (and the shared
// activation arena with the first one). `artifact`
// and `checkpoint` must outlive the executor. kUnavailable without a driver.
absl::StatusOr<std::unique_ptr<Executor>> CreateCudaExecutor(const Artifact& artifact,
                                                             const Checkpoint& checkpoint,
                                                             const CudaExecutorOptions& options);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_CUDA_EXECUTOR_H_
