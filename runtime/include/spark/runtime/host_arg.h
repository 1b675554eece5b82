// One resolved argument of a kernel call on host memory, and its conversion to the C type of a
// kernel's parameter. Plain C++ (no Abseil): spark-op-check's CPU emulation of the CUDA kernels
// includes it in a translation unit that force-includes its CUDA emulation header.
#ifndef SPARK_RUNTIME_HOST_ARG_H_
#define SPARK_RUNTIME_HOST_ARG_H_

#include <cstdint>
#include <type_traits>

#include "spark/runtime/kernel_abi.h"

namespace spark {
namespace rt {

// A host pointer, an i32 or an f32 (by `kind`).
struct HostArg {
  abi::ArgKind kind = abi::ArgKind::kPtr;
  void* ptr = nullptr;
  int32_t i32 = 0;
  float f32 = 0.0f;

  static HostArg Ptr(const void* p) { return {abi::ArgKind::kPtr, const_cast<void*>(p), 0, 0.0f}; }
  static HostArg I32(int32_t v) { return {abi::ArgKind::kI32, nullptr, v, 0.0f}; }
  static HostArg F32(float v) { return {abi::ArgKind::kF32, nullptr, 0, v}; }
};

// A checked argument as the C type T of its parameter (a pointer, int or float).
template <typename T>
T HostArgAs(const HostArg& arg) {
  if constexpr (std::is_pointer<T>::value) {
    return static_cast<T>(arg.ptr);
  } else if constexpr (std::is_same<T, float>::value) {
    return arg.f32;
  } else {
    static_assert(std::is_same<T, int>::value, "registry arguments are pointers, int or float");
    return arg.i32;
  }
}

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_HOST_ARG_H_
