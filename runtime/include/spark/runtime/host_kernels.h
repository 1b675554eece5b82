// Host reference kernels: one plain C++ function per kernel-level op of kernel_abi.h, with exactly
// the op's argument list (docs/plan-format.md gives the semantics). They are the oracle the CUDA
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

void Embedding(const int32_t* ids, const uint16_t* table, float* y, int32_t num_tokens,
               int32_t vocab, int32_t dim, float scale);
// `weight` may be null (weight-less RMSNorm).
void RmsNorm(const float* x, const uint16_t* weight, float* y, int32_t num_tokens, int32_t groups,
             int32_t cols, float epsilon);
// y = residual + RmsNorm(x) over rows of `cols` (groups 1); y may alias x or residual.
void ResidualRmsNorm(const float* x, const uint16_t* weight, const float* residual, float* y,
                     int32_t num_tokens, int32_t cols, float epsilon);
// Rope(RmsNorm(x)) per head row of x [T, heads, head_dim]; y may alias x.
void RmsNormRope(const float* x, const uint16_t* weight, const int32_t* positions, float* y,
                 int32_t num_tokens, int32_t heads, int32_t head_dim, int32_t rotated_pairs,
                 float theta, float factor, float epsilon);
void Linear(const float* x, const uint16_t* w, float* y, int32_t num_tokens, int32_t out_features,
            int32_t in_features);
void Add(const float* a, const float* b, float* y, int32_t num_tokens, int32_t cols);
void Mul(const float* a, const float* b, float* y, int32_t num_tokens, int32_t cols);
void Scale(const float* x, float* y, int32_t num_tokens, int32_t cols, float factor);
void ScalarMul(const float* x, const uint16_t* s, float* y, int32_t num_tokens, int32_t cols);
void Gelu(const float* x, float* y, int32_t num_tokens, int32_t cols);
void GeluMul(const float* a, const float* b, float* y, int32_t num_tokens, int32_t cols);
void Softcap(const float* x, float* y, int32_t num_tokens, int32_t cols, float cap);
void Rope(const float* x, const int32_t* positions, float* y, int32_t num_tokens, int32_t heads,
          int32_t head_dim, int32_t rotated_pairs, float theta, float factor);
// The caches hold f32 or bf16 bits (uint16_t) as cache_dtype says (abi::KvCacheDType; the
// dispatch table checks the value before calling).
void KvWrite(const float* k, const float* v, const int32_t* positions, void* k_cache,
             void* v_cache, int32_t num_tokens, int32_t kv_heads, int32_t head_dim,
             int32_t capacity, int32_t cache_dtype);
// With partials null (or AttentionSplits(...) == 1) y is written; otherwise the partial records
// (kernel_abi.h) are, and AttentionMerge writes y from them. Token t sees the keys
// abi::AttentionKeys(positions[t], window, last_visible ? last_visible[t] : positions[t]).
void Attention(const float* q, const int32_t* positions, const void* k_cache, const void* v_cache,
               float* y, float* partials, int32_t num_tokens, int32_t q_heads, int32_t kv_heads,
               int32_t head_dim, int32_t capacity, int32_t window, float scale,
               int32_t max_splits, int32_t split_rows, int32_t cache_dtype,
               const int32_t* last_visible = nullptr);
void AttentionMerge(const float* partials, float* y, int32_t num_tokens, int32_t q_heads,
                    int32_t head_dim, int32_t max_splits, int32_t split_rows);
void MoeTopK(const float* logits, const uint16_t* per_expert_scale, float* weights,
             int32_t* indices, int32_t num_tokens, int32_t num_experts, int32_t top_k,
             float logit_scale);
// The MoE expert ops do nothing when num_tokens is outside [tokens_from, tokens_to].
void MoeGateUp(const float* x, const uint16_t* gate_up, const int32_t* indices, float* act,
               int32_t num_tokens, int32_t hidden, int32_t intermediate, int32_t num_experts,
               int32_t top_k, int32_t tokens_from, int32_t tokens_to);
// With partials and MoeDownGrouped(num_tokens, true), writes partials[t, k] = weights[t, k] *
// (act[t, k] @ down[e]^T) (zeros for an invalid index) instead of y; MoeCombine sums them.
void MoeDown(const float* act, const uint16_t* down, const float* weights, const int32_t* indices,
             float* y, float* partials, int32_t num_tokens, int32_t hidden, int32_t intermediate,
             int32_t num_experts, int32_t top_k, int32_t tokens_from, int32_t tokens_to);
void MoeCombine(const float* partials, float* y, int32_t num_tokens, int32_t hidden,
                int32_t top_k);
void ScatterRows(float* dest, const int32_t* indices, const float* updates, int32_t num_tokens,
                 int32_t num_updates, int32_t cols);
void MaskTokens(const int32_t* ids, int32_t* y, int32_t num_tokens, int32_t token_a,
                int32_t token_b, int32_t token_c, int32_t replacement);
void SelectGroup(const float* x, float* y, int32_t num_tokens, int32_t groups, int32_t cols,
                 int32_t index);
void Copy(const float* x, float* y, int32_t num_tokens, int32_t cols);

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
// the op and the argument, for an unknown op, a wrong argument count or kind, a null pointer
// where one is required, or sizes that are negative or inconsistent (e.g. q_heads not a multiple
// of kv_heads).
absl::Status RunHostKernel(const std::string& op, absl::Span<const HostArg> args);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_HOST_KERNELS_H_
