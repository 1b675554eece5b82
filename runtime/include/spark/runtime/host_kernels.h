// Host reference kernels: one plain C++ function per kernel-level op of the registry
// (kernel_ops.def), with exactly the op's argument list (docs/plan-format.md gives the semantics). They are the oracle the CUDA
// kernels are tested against and what `spark-run --device host` executes.
//
// Argument types (abi::ops::<op>::HostFn): activations are `float*` (for a plan with bf16
// activations the host executor widens them to f32 around each call and rounds what the op
// wrote back to bf16), token ids / positions / expert indices `int32_t*`,
// weights `const uint16_t*` holding bfloat16 bits (checkpoint layout), KV caches `float*`.
// Arithmetic is float32; reductions accumulate in double. Element-wise ops, rms_norm and rope may
// run in place (y == x); the others need distinct input and output buffers.
#ifndef SPARK_RUNTIME_HOST_KERNELS_H_
#define SPARK_RUNTIME_HOST_KERNELS_H_

#include <cstdint>
#include <cstring>

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

// One function per op of the registry, host::<Name> of type abi::ops::<op>::HostFn (kernel_ops.def
// documents each op): a definition in host_kernels.cc with other parameters does not compile.
// Notes beyond the registry's:
//   - RmsNorm, ResidualRmsNorm, RmsNormRope, Rope and the elementwise ops may run in place
//     (y == x; ResidualRmsNorm also y == residual); the others need distinct buffers;
//   - KvWrite and Attention reinterpret the caches by cache_dtype (abi::KvCacheDType), which
//     RunHostKernel checks before calling;
//   - the MoE expert ops compute the same on either path (abi::MoePath); only where moe_down
//     writes (y, or partials: abi::MoeDownGrouped) depends on it.
#define SPARK_HOST_DECLARE_KERNEL(Name, op, block_size, runs, flops) abi::ops::op::HostFn Name;
SPARK_ALL_OPS(SPARK_HOST_DECLARE_KERNEL)
#undef SPARK_HOST_DECLARE_KERNEL

}  // namespace host

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_HOST_KERNELS_H_
