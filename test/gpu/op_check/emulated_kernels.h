// spark-op-check's CPU emulation of the CUDA kernels (`run --device emulated`): the kernel
// library's own sources (kernels/*.cu) compiled as host C++ with emulation/cuda_emu.h, each
// registry op launched on its grid with every block's threads as cooperative fibers. It checks
// the kernels' logic (indexing, grid-stride loops, reductions, barriers, shuffles, the mma.sync
// and ldmatrix fragment layouts, alignment checks: a misaligned vector load stops the run) on a
// machine without a GPU; not timing, the memory model, or ex2.approx's accuracy (2^x is exact
// here). The GPU check of record is the same check on the GPU (`--device cuda`).
//
// Plain C++ (no Abseil; rt::HostArg is host_arg.h's): the emulated translation unit force-includes cuda_emu.h, whose macros
// (__device__, __shared__, ...) must not meet other headers.
#ifndef SPARK_TEST_GPU_OP_CHECK_EMULATED_KERNELS_H_
#define SPARK_TEST_GPU_OP_CHECK_EMULATED_KERNELS_H_

#include <cstdint>

#include "spark/runtime/host_arg.h"
#include "spark/runtime/kernel_abi.h"

namespace spark {
namespace op_check {

// Runs spark_<op>(args...) on `blocks` blocks of the op's registry block size with
// `shared_bytes` of dynamic shared memory (rt::LaunchSharedBytes), with the activation precision
// `activation_precision` (abi::ActivationPrecision). `args` must hold the op's num_args
// arguments of the registry's kinds (the host executor checked them). False for an op without a
// kernel (a transfer).
bool RunEmulatedKernel(abi::OpId op, const rt::HostArg* args, int blocks, int shared_bytes,
                       int activation_precision);

}  // namespace op_check
}  // namespace spark

#endif  // SPARK_TEST_GPU_OP_CHECK_EMULATED_KERNELS_H_
