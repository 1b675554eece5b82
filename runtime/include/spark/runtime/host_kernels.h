// Host reference kernels: one plain C++ function per kernel-level op of the registry
// (kernel_ops.def), with exactly the op's argument list (docs/plan-format.md gives the semantics). They are the oracle the CUDA
// kernels are tested against and what `spark-run --device host` executes.
//
// Argument types: activations are `float*`, token ids / positions / expert indices `int32_t*`,
// weights `const uint16_t*` holding bfloat16 bits (checkpoint layout), KV caches `float*`.
// Arithmetic is float32; reductions accumulate in double. Element-wise ops, rms_norm and rope may
// run in place (y == x); the others need distinct input and output buffers.
#ifndef SPARK_RUNTIME_HOST_KERNELS_H_
#define SPARK_RUNTIME_HOST_KERNELS_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "spark/runtime/kernel_abi.h"

namespace spark {
namespace rt {

// bfloat16 bits -> float32 (the bf16 value is the high half of the f32 pattern).
inline float Bf16ToF32(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

// float32 -> bfloat16 bits, round to nearest even (NaN stays NaN). Used by tests and tools.
uint16_t F32ToBf16(float value);

// gelu, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
float GeluTanh(float x);

namespace host {

// One function per op of the registry, host::<Name> of type abi::ops::<op>::Fn (kernel_ops.def
// documents each op): a definition in host_kernels.cc with other parameters does not compile.
// Notes beyond the registry's:
//   - RmsNorm, ResidualRmsNorm, RmsNormRope, Rope and the elementwise ops may run in place
//     (y == x; ResidualRmsNorm also y == residual); the others need distinct buffers;
//   - KvWrite and Attention reinterpret the caches by cache_dtype (abi::KvCacheDType), which
//     RunHostKernel checks before calling;
//   - the MoE expert ops do nothing when num_tokens is outside [tokens_from, tokens_to].
#define SPARK_HOST_DECLARE_KERNEL(Name, op, block_size, skip, flops) abi::ops::op::Fn Name;
SPARK_KERNEL_OPS(SPARK_HOST_DECLARE_KERNEL)
#undef SPARK_HOST_DECLARE_KERNEL

}  // namespace host

// One resolved argument of a kernel call: a host pointer, an i32 or an f32 (by `kind`).
struct HostArg {
  abi::ArgKind kind = abi::ArgKind::kPtr;
  void* ptr = nullptr;
  int32_t i32 = 0;
  float f32 = 0.0f;

  static HostArg Ptr(const void* p) { return {abi::ArgKind::kPtr, const_cast<void*>(p), 0, 0.0f}; }
  static HostArg I32(int32_t v) { return {abi::ArgKind::kI32, nullptr, v, 0.0f}; }
  static HostArg F32(float v) { return {abi::ArgKind::kF32, nullptr, 0, v}; }
};

// Runs the host kernel of `op` with `args` in kernel ABI order. Returns INVALID_ARGUMENT, naming
// the op and the argument, for a wrong argument count or kind, a null pointer where one is
// required, sizes that are negative, or a broken rule of the registry (e.g. q_heads not a
// multiple of kv_heads). The string form also refuses an op the registry does not know.
absl::Status RunHostKernel(abi::OpId op, absl::Span<const HostArg> args);
absl::Status RunHostKernel(const std::string& op, absl::Span<const HostArg> args);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_HOST_KERNELS_H_
