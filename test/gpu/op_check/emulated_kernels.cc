// The kernel library compiled for the CPU emulation (emulated_kernels.h). Built with
// -DSPARK_KERNEL_EMULATION -include emulation/cuda_emu.h (CMakeLists.txt).
#include "test/gpu/op_check/emulated_kernels.h"

#include <cstddef>
#include <type_traits>
#include <utility>

// The activation precision is a variable set per launch here; spark-compile makes it a constant
// of each module.
#define SPARK_ACTIVATION_PRECISION_VARIABLE
#include "kernels/attention.cu"
#include "kernels/elementwise.cu"
#include "kernels/embedding.cu"
#include "kernels/linear.cu"
#include "kernels/linear_fp4.cu"
#include "kernels/moe.cu"
#include "kernels/rms_norm.cu"
#include "kernels/rope.cu"
#include "kernels/sample.cu"
#include "kernels/vision.cu"

extern "C" {
int spark_activation_precision = 0;
}

namespace spark {
namespace op_check {
namespace {

template <typename... A, size_t... I>
void LaunchWith(void (*kernel)(A...), const rt::HostArg* args, int blocks, int block_size,
                int shared_bytes, std::index_sequence<I...>) {
  spk_emu::Launch(kernel, blocks, block_size, shared_bytes, rt::HostArgAs<A>(args[I])...);
}
template <typename... A>
void Launch(void (*kernel)(A...), const rt::HostArg* args, int blocks, int block_size,
            int shared_bytes) {
  LaunchWith(kernel, args, blocks, block_size, shared_bytes, std::index_sequence_for<A...>());
}

}  // namespace

bool RunEmulatedKernel(abi::OpId op, const rt::HostArg* args, int blocks, int shared_bytes,
                       int activation_precision) {
  spark_activation_precision = activation_precision;
  switch (op) {
#define SPARK_EMULATED_CASE(Name, op_name, block_size, runs, flops)   \
  case abi::OpId::k##Name:                                            \
    Launch(&spark_##op_name, args, blocks, block_size, shared_bytes); \
    return true;
    SPARK_KERNEL_OPS(SPARK_EMULATED_CASE)
#undef SPARK_EMULATED_CASE
    default:
      return false;
  }
}

}  // namespace op_check
}  // namespace spark
