// The host reference executor: runs every step of a plan with the host kernels (host_kernels.h)
// on an activation arena and KV caches in host memory. Weights are read in place (bf16, e.g. from
// the checkpoint's memory mapping). What `spark-run --device host` runs, and the GPU tests'
// oracle.
#ifndef SPARK_RUNTIME_HOST_EXECUTOR_H_
#define SPARK_RUNTIME_HOST_EXECUTOR_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "spark/runtime/collectives.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/host_kernel_dispatch.h"
#include "spark/runtime/kernel_abi.h"
#include "spark/runtime/plan.h"

namespace spark {
namespace rt {

// Another implementation of the registry's kernel ops on host memory, run instead of the host
// references (spark-op-check's CPU emulation of the CUDA kernels): called for every launch step
// with the step's arguments, checked against the registry, its grid for the call
// (abi::LaunchBlocks) and its dynamic shared memory (LaunchSharedBytes). Activations stay in the
// arena's element type (the references get them widened to f32). Transfer steps run as always.
using HostKernelRunner = std::function<absl::Status(
    abi::OpId op, absl::Span<const HostArg> args, int blocks, int shared_bytes)>;

// `plan` and the memory behind `weights` (indexed by weight id, see BindWeights) must outlive the
// executor. INVALID_ARGUMENT if the plan lacks an entry buffer or the weights do not match it.
// Without `kernel_runner`, the host references run every step. A tensor-parallel plan's rank
// (Plan::ranks > 1; its weights bound for that rank) runs its collectives through
// `communicator` (collectives.h; tensor_parallel_executor.h joins the ranks' executors).
absl::StatusOr<std::unique_ptr<Executor>> CreateHostExecutor(
    const Plan& plan, std::vector<WeightData> weights, HostKernelRunner kernel_runner = {},
    std::unique_ptr<Communicator> communicator = nullptr);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_HOST_EXECUTOR_H_
