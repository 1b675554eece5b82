// Minimal stand-in for Abseil, used ONLY by test/gpu/run_kernel_checks.sh on machines without
// Abseil (the GPU machine) to compile the host reference kernels (runtime/src/host_kernels.cc).
// It covers exactly what that file uses; the real build always uses Abseil.
#ifndef SPARK_TEST_GPU_ABSL_SHIM_STRINGS_STRING_VIEW_H_
#define SPARK_TEST_GPU_ABSL_SHIM_STRINGS_STRING_VIEW_H_
#include <string_view>
namespace absl {
using string_view = std::string_view;
}  // namespace absl
#endif
