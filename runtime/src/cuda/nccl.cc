#include "nccl.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace spark {
namespace rt {
namespace {

constexpr char kInstall[] =
    "install NCCL 2 (Debian: libnccl2 from NVIDIA's CUDA repository; or pip's nvidia-nccl-cu13 "
    "with LD_LIBRARY_PATH at its lib directory), or set SPARK_NCCL_LIBRARY to libnccl.so.2's "
    "path; tensor-parallel models also run on the host (--device host)";

}  // namespace

absl::StatusOr<const NcclApi*> LoadNcclFrom(const std::string& library) {
  ::dlerror();
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = ::dlerror();
    return absl::UnavailableError(absl::StrCat("cannot load NCCL (", library, "): ",
                                               error != nullptr ? error : "unknown error",
                                               "; ", kInstall));
  }
  auto api = std::make_unique<NcclApi>();
  std::vector<std::string> missing;
#define SPARK_NCCL_RESOLVE(member, result, params)                                  \
  api->member = reinterpret_cast<decltype(api->member)>(::dlsym(handle, #member)); \
  if (api->member == nullptr) missing.push_back(#member);
  SPARK_NCCL_SYMBOLS(SPARK_NCCL_RESOLVE)
#undef SPARK_NCCL_RESOLVE
  if (!missing.empty()) {
    ::dlclose(handle);
    return absl::UnavailableError(absl::StrCat("NCCL (", library, ") lacks ",
                                               absl::StrJoin(missing, ", "),
                                               ": it is older than NCCL 2.12; ", kInstall));
  }
  if (api->ncclGetVersion(&api->version) != nccl::kSuccess) api->version = 0;
  return api.release();
}

namespace {

absl::Status NcclError(const NcclApi& api, ncclResult_t result, const char* call) {
  return absl::InternalError(absl::StrCat(call, " failed: NCCL error ", result, " (",
                                          api.ncclGetErrorString(result), ")"));
}

absl::StatusOr<int> NcclType(DType dtype) {
  if (dtype == DType::kF32) return nccl::kFloat32;
  if (dtype == DType::kBF16) return nccl::kBfloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("no NCCL collective of ", DTypeName(dtype), " activations"));
}

}  // namespace

absl::StatusOr<const NcclApi*> LoadNccl() {
  const char* env = std::getenv("SPARK_NCCL_LIBRARY");
  static const absl::StatusOr<const NcclApi*>* const kNccl = new absl::StatusOr<const NcclApi*>(
      LoadNcclFrom(env != nullptr && *env != '\0' ? env : "libnccl.so.2"));
  return *kNccl;
}

absl::StatusOr<std::vector<std::shared_ptr<NcclCommunicator>>> NcclCommunicator::ForLocalDevices(
    const std::vector<int>& ordinals) {
  const absl::StatusOr<const NcclApi*> api = LoadNccl();
  if (!api.ok()) return api.status();
  std::vector<ncclComm_t> comms(ordinals.size(), nullptr);
  const ncclResult_t result = (*api)->ncclCommInitAll(
      comms.data(), static_cast<int>(ordinals.size()), ordinals.data());
  if (result != nccl::kSuccess) return NcclError(**api, result, "ncclCommInitAll");
  std::vector<std::shared_ptr<NcclCommunicator>> out;
  for (size_t r = 0; r < comms.size(); ++r) {
    out.push_back(std::shared_ptr<NcclCommunicator>(new NcclCommunicator(
        *api, comms[r], static_cast<int>(r), static_cast<int>(comms.size()))));
  }
  return out;
}

NcclCommunicator::~NcclCommunicator() {
  if (!aborted_ && comm_ != nullptr) api_->ncclCommDestroy(comm_);
}

absl::Status NcclCommunicator::Usable() const {
  if (!aborted_) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "the NCCL communicator was aborted when a rank failed; open the model again");
}

absl::Status NcclCommunicator::AllReduce(CUdeviceptr x, size_t count, DType dtype,
                                         CUstream stream) {
  if (absl::Status usable = Usable(); !usable.ok()) return usable;
  absl::StatusOr<int> type = NcclType(dtype);
  if (!type.ok()) return type.status();
  void* data = reinterpret_cast<void*>(static_cast<uintptr_t>(x));
  const ncclResult_t result =
      api_->ncclAllReduce(data, data, count, *type, nccl::kSum, comm_, stream);
  return result == nccl::kSuccess ? absl::OkStatus() : NcclError(*api_, result, "ncclAllReduce");
}

absl::Status NcclCommunicator::AllGather(CUdeviceptr send, CUdeviceptr receive, size_t count,
                                         DType dtype, CUstream stream) {
  if (absl::Status usable = Usable(); !usable.ok()) return usable;
  absl::StatusOr<int> type = NcclType(dtype);
  if (!type.ok()) return type.status();
  const ncclResult_t result = api_->ncclAllGather(
      reinterpret_cast<const void*>(static_cast<uintptr_t>(send)),
      reinterpret_cast<void*>(static_cast<uintptr_t>(receive)), count, *type, comm_, stream);
  return result == nccl::kSuccess ? absl::OkStatus() : NcclError(*api_, result, "ncclAllGather");
}

void NcclCommunicator::Abort() {
  if (aborted_) return;
  aborted_ = true;
  api_->ncclCommAbort(comm_);
}

}  // namespace rt
}  // namespace spark
