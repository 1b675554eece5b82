// The collectives of a tensor-parallel plan (Plan::ranks > 1, docs/multi-gpu.md): the all_reduce
// and all_gather transfer steps (kernel_ops.def) join the ranks, each rank's executor calling its
// Communicator. The host executor uses the in-process communicator below (every rank a thread of
// one process: spark-run --device host runs a tensor-parallel plan that way, and CI tests the
// sharding with it); the CUDA executor calls NCCL (nccl.h) on device memory instead.
#ifndef SPARK_RUNTIME_COLLECTIVES_H_
#define SPARK_RUNTIME_COLLECTIVES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"

namespace spark {
namespace rt {

// One rank's end of a group of `ranks()` ranks. Every rank calls the same collectives in the same
// order with the same counts (each rank runs the same program); a call returns when every rank
// has made it. Values are f32 (the host executor computes in f32).
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int ranks() const = 0;
  // x[i] = the sum over the ranks of their x[i], i < count: added in rank order, so every rank
  // gets the same bits.
  virtual absl::Status AllReduce(float* x, int64_t count) = 0;
  // out[r * count + i] = rank r's x[i]: the ranks' x one after the other.
  virtual absl::Status AllGather(const float* x, float* out, int64_t count) = 0;
  // Makes every rank's pending and later calls fail (a rank that failed before reaching a
  // collective would otherwise leave the others waiting), until Reset.
  virtual void Abort() = 0;
  // Clears an Abort once no rank is inside a call.
  virtual void Reset() = 0;
};

// `ranks` communicators of one group whose ranks are threads of this process (in rank order).
// The group lives as long as any of them.
std::vector<std::unique_ptr<Communicator>> MakeInProcessCommunicators(int ranks);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_COLLECTIVES_H_
