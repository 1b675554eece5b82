// Minimal header-only stand-in for Abseil, used ONLY by test/gpu/run_kernel_checks.sh and
// run_emulated_checks.sh to compile the host reference kernels (runtime/src/host_kernels.cc)
// without Abseil's libraries (the GPU machine has none). It covers exactly what that file uses;
// the CMake build always uses the real Abseil.
#ifndef SPARK_TEST_GPU_ABSL_SHIM_STRINGS_STRING_VIEW_H_
#define SPARK_TEST_GPU_ABSL_SHIM_STRINGS_STRING_VIEW_H_
#include <string_view>
namespace absl {
using string_view = std::string_view;
}  // namespace absl
#endif
