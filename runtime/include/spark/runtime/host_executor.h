// The host reference executor: runs every step of a plan with the host kernels (host_kernels.h)
// on an activation arena and KV caches in host memory. Weights are read in place (bf16, e.g. from
// the checkpoint's memory mapping). What `spark-run --device host` runs, and the GPU tests'
// oracle.
#ifndef SPARK_RUNTIME_HOST_EXECUTOR_H_
#define SPARK_RUNTIME_HOST_EXECUTOR_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/plan.h"

namespace spark {
namespace rt {

// `plan` and the memory behind `weights` (indexed by weight id, see BindWeights) must outlive the
// executor. INVALID_ARGUMENT if the plan lacks an entry buffer or the weights do not match it.
absl::StatusOr<std::unique_ptr<Executor>> CreateHostExecutor(const Plan& plan,
                                                             std::vector<WeightData> weights);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_HOST_EXECUTOR_H_
