// What an executor has allocated (executor.h), for comparison with the memory estimate
// (memory_estimator.h).
#ifndef SPARK_RUNTIME_MEMORY_USAGE_H_
#define SPARK_RUNTIME_MEMORY_USAGE_H_

#include <cstdint>

namespace spark {
namespace rt {

// What an executor measured of its own memory use (Executor::memory_usage); spark-run prints it
// next to the estimate.
struct MemoryUsage {
  // High-water mark of the executor's own allocations: weights copied to the device, KV caches,
  // activation arena. On the host executor the weights are read from the mapped checkpoint and
  // are not counted.
  uint64_t peak_allocated_bytes = 0;
  uint64_t weight_bytes = 0;      // of which weights (0 when they are used in place)
  uint64_t registered_bytes = 0;  // checkpoint bytes registered with an integrated GPU, in place
  // CUDA only: the driver's used device memory (total - free, cuMemGetInfo) at its highest after
  // NewSequence or a Run, minus its value right after the context was created. Counts what the
  // executor allocated plus what the driver allocated for it (module, graph, launch resources),
  // not the context itself. 0 on the host.
  uint64_t driver_used_bytes = 0;
};

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_MEMORY_USAGE_H_
