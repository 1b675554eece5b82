// Runs a host reference kernel from a list of resolved arguments, checked against the op registry
// (kernel_ops.def): what the host executor calls for every plan step. The kernels themselves are
// in host_kernels.h (plain C++, no Abseil: the GPU check harnesses compile them as they are).
#ifndef SPARK_RUNTIME_HOST_KERNEL_DISPATCH_H_
#define SPARK_RUNTIME_HOST_KERNEL_DISPATCH_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "spark/runtime/host_arg.h"
#include "spark/runtime/host_kernels.h"
#include "spark/runtime/kernel_abi.h"

namespace spark {
namespace rt {

// Runs the host kernel of `op` with `args` in kernel ABI order. Returns INVALID_ARGUMENT, naming
// the op and the argument, for a wrong argument count or kind, a null pointer where one is
// required, sizes that are negative, or a broken rule of the registry (e.g. q_heads not a
// multiple of kv_heads). The string form also refuses an op the registry does not know.
absl::Status RunHostKernel(abi::OpId op, absl::Span<const HostArg> args);
// The checks RunHostKernel makes before calling: the registry's arity, kinds, non-null pointers,
// sizes and rules. For other implementations of the ops on host memory (HostKernelRunner).
absl::Status CheckHostArgs(abi::OpId op, absl::Span<const HostArg> args);
absl::Status RunHostKernel(const std::string& op, absl::Span<const HostArg> args);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_HOST_KERNEL_DISPATCH_H_
