// NCCL, the collective library of NVIDIA GPUs, loaded at run time with dlopen (as the CUDA driver
// is: cuda_driver.h) so that the runtime needs it only when a plan has collectives: a
// tensor-parallel plan's all_reduce / all_gather steps (docs/multi-gpu.md). Never include nccl.h
// or link libnccl: the few types and constants used are declared here with nccl.h's values
// (NCCL 2.x). The library is SPARK_NCCL_LIBRARY when set, else "libnccl.so.2" from the loader's
// search path (Debian: libnccl2; NVIDIA's CUDA repositories; pip's nvidia-nccl-cu13 wheel with
// LD_LIBRARY_PATH pointing at its lib directory).
#ifndef SPARK_RUNTIME_SRC_CUDA_NCCL_H_
#define SPARK_RUNTIME_SRC_CUDA_NCCL_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cuda_driver.h"
#include "spark/runtime/element_type.h"

namespace spark {
namespace rt {

using ncclResult_t = int;
typedef struct ncclComm* ncclComm_t;
struct ncclUniqueId {
  char internal[128];  // NCCL_UNIQUE_ID_BYTES
};

namespace nccl {
inline constexpr ncclResult_t kSuccess = 0;
inline constexpr int kFloat32 = 7;   // ncclFloat32
inline constexpr int kBfloat16 = 9;  // ncclBfloat16
inline constexpr int kSum = 0;       // ncclSum
}  // namespace nccl

#define SPARK_NCCL_SYMBOLS(X)                                                                    \
  X(ncclGetVersion, ncclResult_t, (int* version))                                              \
  X(ncclGetErrorString, const char*, (ncclResult_t result))                                    \
  X(ncclGetUniqueId, ncclResult_t, (ncclUniqueId * id))                                        \
  X(ncclCommInitRank, ncclResult_t, (ncclComm_t * comm, int ranks, ncclUniqueId id, int rank)) \
  X(ncclCommInitAll, ncclResult_t, (ncclComm_t * comms, int count, const int* devices))       \
  X(ncclCommDestroy, ncclResult_t, (ncclComm_t comm))                                          \
  X(ncclCommAbort, ncclResult_t, (ncclComm_t comm))                                            \
  X(ncclAllReduce, ncclResult_t,                                                               \
    (const void* send, void* receive, size_t count, int dtype, int op, ncclComm_t comm,         \
     CUstream stream))                                                                          \
  X(ncclAllGather, ncclResult_t,                                                               \
    (const void* send, void* receive, size_t send_count, int dtype, ncclComm_t comm,            \
     CUstream stream))

struct NcclApi {
#define SPARK_NCCL_MEMBER(member, result, params) result(*member) params = nullptr;
  SPARK_NCCL_SYMBOLS(SPARK_NCCL_MEMBER)
#undef SPARK_NCCL_MEMBER
  int version = 0;  // ncclGetVersion, e.g. 22703
};

// Loads NCCL once per process (the result, or the error, is cached): kUnavailable naming the
// library, the loader's error and what to install when it cannot be loaded or lacks a symbol.
absl::StatusOr<const NcclApi*> LoadNccl();
// The same from `library`, not cached (for tests); leaked on success (NCCL stays loaded).
absl::StatusOr<const NcclApi*> LoadNcclFrom(const std::string& library);

// One rank's NCCL communicator, destroyed with it. Its calls are enqueued on the caller's stream
// (and so captured into CUDA graphs with it).
class NcclCommunicator {
 public:
  // A communicator of `count` ranks for the devices `ordinals` of this process, rank r on
  // ordinals[r] (ncclCommInitAll), in rank order.
  static absl::StatusOr<std::vector<std::shared_ptr<NcclCommunicator>>> ForLocalDevices(
      const std::vector<int>& ordinals);
  ~NcclCommunicator();

  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  // In place: x = the sum over the ranks of x (`count` elements of `dtype`: f32 or bf16).
  absl::Status AllReduce(CUdeviceptr x, size_t count, DType dtype, CUstream stream);
  // receive = every rank's `count` elements one after the other.
  absl::Status AllGather(CUdeviceptr send, CUdeviceptr receive, size_t count, DType dtype,
                         CUstream stream);
  // Ends every pending call with an error (a rank that failed leaves the others waiting); the
  // communicator cannot be used after it.
  void Abort();

 private:
  absl::Status Usable() const;  // FAILED_PRECONDITION after Abort
  NcclCommunicator(const NcclApi* api, ncclComm_t comm, int rank, int ranks)
      : api_(api), comm_(comm), rank_(rank), ranks_(ranks) {}
  const NcclApi* api_;
  ncclComm_t comm_;
  int rank_;
  int ranks_;
  bool aborted_ = false;
};

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_CUDA_NCCL_H_
