// The kernel ABI: for every kernel-level op a plan can contain, the ordered argument list of its
// device function. This header is the single source of truth shared by
//   - the compiler (generates one `gpu.func` entry per specialised step that calls the device
//     function, and writes each plan step's `args` in this order),
//   - the kernel library (`kernels/`, implements `extern "C" __device__ void spark_<op>(...)`),
//   - the runtime (validates plan steps against it; the host reference executor implements every
//     op with exactly these arguments).
// Plain C++17, no dependencies: the runtime owns it and the compiler includes it.
//
// Conventions (docs/plan-format.md has the full semantics of each op):
//   - activations are float32, row-major, with a leading token dimension T (`num_tokens`);
//   - weights are bfloat16 in checkpoint layout (a Linear weight is [out, in]);
//   - KV caches are [capacity, kv_heads, head_dim] of float32 or bfloat16 (the plan's cache
//     dtype, passed to kv_write and attention as `cache_dtype`: KvCacheDType below), token
//     position p lives in slot p % capacity;
//   - every device function must be correct for any gridDim.x >= 1 (grid-stride loops over its
//     work units) and for blockDim.x == kernel.block_size.
#ifndef SPARK_RUNTIME_KERNEL_ABI_H_
#define SPARK_RUNTIME_KERNEL_ABI_H_

#include <cstddef>
#include <cstring>

namespace spark {
namespace abi {

// What one argument of a device function is, at the C level.
enum class ArgKind : int {
  kPtr = 0,  // a device pointer (activation buffer, weight, KV-cache part, or null)
  kI32 = 1,  // a 32-bit signed integer
  kF32 = 2,  // a 32-bit float
};

struct ArgSpec {
  const char* name = nullptr;
  ArgKind kind = ArgKind::kPtr;
  bool nullable = false;  // a pointer that may be null (the weight of a weight-less RMSNorm)
  bool output = false;    // a pointer to what the op computes (not KV caches: state; not the
                          // attention workspace: scratch)
};

inline constexpr int kMaxArgs = 17;

struct KernelSpec {
  const char* op;          // plan step op name, e.g. "rms_norm"
  const char* symbol;      // device function, e.g. "spark_rms_norm"
  int block_size;          // required blockDim.x
  int num_args;
  ArgSpec args[kMaxArgs];  // in call order
};

#define SPARK_P(n) {n, ::spark::abi::ArgKind::kPtr}
#define SPARK_PN(n) {n, ::spark::abi::ArgKind::kPtr, true}
#define SPARK_O(n) {n, ::spark::abi::ArgKind::kPtr, false, true}
#define SPARK_I(n) {n, ::spark::abi::ArgKind::kI32}
#define SPARK_F(n) {n, ::spark::abi::ArgKind::kF32}

// clang-format off
inline constexpr KernelSpec kKernels[] = {
  // y[t, :] = table[ids[t], :] * scale. ids outside [0, vocab) produce a zero row (the runtime
  // rejects such ids before launching).
  {"embedding", "spark_embedding", 256, 7,
   {SPARK_P("ids"), SPARK_P("table"), SPARK_O("y"), SPARK_I("num_tokens"), SPARK_I("vocab"),
    SPARK_I("dim"), SPARK_F("scale")}},
  // Gemma 4 RMSNorm over the last dim of x [num_tokens * groups, cols]; weight may be null
  // (weight-less form): y = x * (mean(x^2) + eps)^-0.5 [* w].
  {"rms_norm", "spark_rms_norm", 256, 7,
   {SPARK_P("x"), SPARK_PN("weight"), SPARK_O("y"), SPARK_I("num_tokens"), SPARK_I("groups"),
    SPARK_I("cols"), SPARK_F("epsilon")}},
  // y = residual + rms_norm(x) [* w] over rows of `cols` (norm + residual add, fused: the
  // rms_norm above followed by add, in one pass). y may alias x or residual.
  {"residual_rms_norm", "spark_residual_rms_norm", 256, 7,
   {SPARK_P("x"), SPARK_PN("weight"), SPARK_P("residual"), SPARK_O("y"), SPARK_I("num_tokens"),
    SPARK_I("cols"), SPARK_F("epsilon")}},
  // rope(rms_norm(x) [* w]) per head of x [T, heads, head_dim] (q/k norm + RoPE, fused): the
  // rms_norm of each head row, then the rotation of rope below with the same arguments.
  // y may alias x.
  {"rms_norm_rope", "spark_rms_norm_rope", 256, 11,
   {SPARK_P("x"), SPARK_PN("weight"), SPARK_P("positions"), SPARK_O("y"), SPARK_I("num_tokens"),
    SPARK_I("heads"), SPARK_I("head_dim"), SPARK_I("rotated_pairs"), SPARK_F("theta"),
    SPARK_F("factor"), SPARK_F("epsilon")}},
  // y [T, out] = x [T, in] @ w[out, in]^T, f32 accumulation.
  {"linear", "spark_linear", 256, 6,
   {SPARK_P("x"), SPARK_P("w"), SPARK_O("y"), SPARK_I("num_tokens"), SPARK_I("out_features"),
    SPARK_I("in_features")}},
  // Elementwise over [T, cols].
  {"add", "spark_add", 256, 5,
   {SPARK_P("a"), SPARK_P("b"), SPARK_O("y"), SPARK_I("num_tokens"), SPARK_I("cols")}},
  {"mul", "spark_mul", 256, 5,
   {SPARK_P("a"), SPARK_P("b"), SPARK_O("y"), SPARK_I("num_tokens"), SPARK_I("cols")}},
  // y = x * factor.
  {"scale", "spark_scale", 256, 5,
   {SPARK_P("x"), SPARK_O("y"), SPARK_I("num_tokens"), SPARK_I("cols"), SPARK_F("factor")}},
  // y = x * s[0], s a bf16 [1] weight (Gemma 4's layer_scalar).
  {"scalar_mul", "spark_scalar_mul", 256, 5,
   {SPARK_P("x"), SPARK_P("s"), SPARK_O("y"), SPARK_I("num_tokens"), SPARK_I("cols")}},
  // y = gelu_tanh(x).
  {"gelu", "spark_gelu", 256, 4,
   {SPARK_P("x"), SPARK_O("y"), SPARK_I("num_tokens"), SPARK_I("cols")}},
  // y = gelu_tanh(a) * b (fused gate of the MLP).
  {"gelu_mul", "spark_gelu_mul", 256, 5,
   {SPARK_P("a"), SPARK_P("b"), SPARK_O("y"), SPARK_I("num_tokens"), SPARK_I("cols")}},
  // y = cap * tanh(x / cap).
  {"softcap", "spark_softcap", 256, 5,
   {SPARK_P("x"), SPARK_O("y"), SPARK_I("num_tokens"), SPARK_I("cols"), SPARK_F("cap")}},
  // Rotate-half RoPE on x [T, heads, head_dim] at positions[T]. For i < rotated_pairs:
  // inv_freq[i] = theta^(-2i/head_dim) / factor; other pairs pass through unchanged.
  {"rope", "spark_rope", 256, 9,
   {SPARK_P("x"), SPARK_P("positions"), SPARK_O("y"), SPARK_I("num_tokens"), SPARK_I("heads"),
    SPARK_I("head_dim"), SPARK_I("rotated_pairs"), SPARK_F("theta"), SPARK_F("factor")}},
  // Writes k, v [T, kv_heads, head_dim] into the cache slots positions[t] % capacity, rounded to
  // bf16 (nearest even) when cache_dtype is kCacheBF16.
  {"kv_write", "spark_kv_write", 256, 10,
   {SPARK_P("k"), SPARK_P("v"), SPARK_P("positions"), SPARK_P("k_cache"), SPARK_P("v_cache"),
    SPARK_I("num_tokens"), SPARK_I("kv_heads"), SPARK_I("head_dim"), SPARK_I("capacity"),
    SPARK_I("cache_dtype")}},
  // Causal (window == 0) or sliding-window (keys p-window < j <= p) grouped-query attention of
  // q [T, q_heads, head_dim] at positions[T] over the cache (which already holds these tokens).
  // last_visible (i32 [T], may be null): the last key position token t sees, in place of its own
  // position p when larger (keys p-window < j <= max(p, last_visible[t])): the end of the image
  // block a soft token belongs to on the vision-bidirectional sliding layers of Gemma 4 26B/31B
  // (those keys are tokens of the same step, written by its kv_write). Null: causal.
  // scores = q.k * scale, softmax in f32; query head h reads kv head h / (q_heads / kv_heads).
  // Split over the KV length (flash-decoding): with s = AttentionSplits(num_tokens, max_splits,
  // split_rows) > 1 (partials not null), each (token, head) is computed as s key ranges
  // (AttentionSplitRange) whose unnormalised partial results go to `partials` and y is not
  // written; attention_merge combines them into y. With s == 1, y is written directly.
  // cache_dtype: the element type of the caches (KvCacheDType); scores and softmax stay f32.
  {"attention", "spark_attention", 128, 17,
   {SPARK_P("q"), SPARK_P("positions"), SPARK_P("k_cache"), SPARK_P("v_cache"), SPARK_O("y"),
    SPARK_PN("partials"), SPARK_I("num_tokens"), SPARK_I("q_heads"), SPARK_I("kv_heads"),
    SPARK_I("head_dim"), SPARK_I("capacity"), SPARK_I("window"), SPARK_F("scale"),
    SPARK_I("max_splits"), SPARK_I("split_rows"), SPARK_I("cache_dtype"),
    SPARK_PN("last_visible")}},
  // y[t, h] = the softmax-weighted combination of the s partial results of attention above
  // (same num_tokens, max_splits and split_rows); nothing is written when s == 1.
  {"attention_merge", "spark_attention_merge", 128, 7,
   {SPARK_P("partials"), SPARK_O("y"), SPARK_I("num_tokens"), SPARK_I("q_heads"),
    SPARK_I("head_dim"), SPARK_I("max_splits"), SPARK_I("split_rows")}},
  // Gemma 4 MoE router's selection (architecture spec 9.1), from its logits [T, num_experts]:
  // p = softmax(logits * logit_scale) over experts in f32, top_k (ties: lower index),
  // renormalise, * per_expert_scale. The compiler computes the logits as rms_norm (weight: the
  // router scale) then linear (proj), and passes logit_scale = hidden^-0.5.
  {"moe_topk", "spark_moe_topk", 128, 8,
   {SPARK_P("logits"), SPARK_P("per_expert_scale"), SPARK_O("weights"), SPARK_O("indices"),
    SPARK_I("num_tokens"), SPARK_I("num_experts"), SPARK_I("top_k"), SPARK_F("logit_scale")}},
  // act[t, k, :] = gelu(gate) * up, [gate; up] = x[t] @ gate_up[indices[t, k]]^T; nothing when
  // num_tokens is outside [tokens_from, tokens_to] (the compiler gives decode and prefill steps
  // their own entries: a literal range lets each entry drop the other's code and registers).
  {"moe_gate_up", "spark_moe_gate_up", 256, 11,
   {SPARK_P("x"), SPARK_P("gate_up"), SPARK_P("indices"), SPARK_O("act"), SPARK_I("num_tokens"),
    SPARK_I("hidden"), SPARK_I("intermediate"), SPARK_I("num_experts"), SPARK_I("top_k"),
    SPARK_I("tokens_from"), SPARK_I("tokens_to")}},
  // y[t] = sum_k weights[t, k] * (act[t, k] @ down[indices[t, k]]^T). Grouped by expert
  // (MoeDownGrouped: a step of many tokens and a `partials` workspace [T, top_k, hidden]): each
  // slot's weighted row goes to partials[t, k] and y is not written; moe_combine sums them.
  // Nothing when num_tokens is outside [tokens_from, tokens_to] (as moe_gate_up).
  {"moe_down", "spark_moe_down", 256, 13,
   {SPARK_P("act"), SPARK_P("down"), SPARK_P("weights"), SPARK_P("indices"), SPARK_O("y"),
    SPARK_PN("partials"), SPARK_I("num_tokens"), SPARK_I("hidden"), SPARK_I("intermediate"),
    SPARK_I("num_experts"), SPARK_I("top_k"), SPARK_I("tokens_from"), SPARK_I("tokens_to")}},
  // y[t] = sum_k partials[t, k] (k in order) when the moe_down before it was grouped (same
  // num_tokens); nothing otherwise.
  {"moe_combine", "spark_moe_combine", 256, 5,
   {SPARK_P("partials"), SPARK_O("y"), SPARK_I("num_tokens"), SPARK_I("hidden"),
    SPARK_I("top_k")}},
  // In place: dest[indices[n], :] = updates[n, :] for n < num_updates; indices < 0 or
  // >= num_tokens are skipped (never written).
  {"scatter_rows", "spark_scatter_rows", 256, 6,
   {SPARK_O("dest"), SPARK_P("indices"), SPARK_P("updates"), SPARK_I("num_tokens"),
    SPARK_I("num_updates"), SPARK_I("cols")}},
  // y[t] = ids[t] if it is none of token_a/b/c, else replacement (-1 = unused slot).
  {"mask_tokens", "spark_mask_tokens", 256, 7,
   {SPARK_P("ids"), SPARK_O("y"), SPARK_I("num_tokens"), SPARK_I("token_a"), SPARK_I("token_b"),
    SPARK_I("token_c"), SPARK_I("replacement")}},
  // y[t, :] = x[t, index, :] for x [T, groups, cols].
  {"select_group", "spark_select_group", 256, 6,
   {SPARK_P("x"), SPARK_O("y"), SPARK_I("num_tokens"), SPARK_I("groups"), SPARK_I("cols"),
    SPARK_I("index")}},
  // y = x over [T, cols] (f32).
  {"copy", "spark_copy", 256, 4,
   {SPARK_P("x"), SPARK_O("y"), SPARK_I("num_tokens"), SPARK_I("cols")}},
};
// clang-format on

#undef SPARK_P
#undef SPARK_PN
#undef SPARK_O
#undef SPARK_I
#undef SPARK_F

// ---- KV cache element types ----
// The `cache_dtype` argument of kv_write and attention: how the K and V caches store their
// elements. bf16 halves the cache's memory and the bytes attention reads per key.
enum KvCacheDType : int {
  kCacheF32 = 0,
  kCacheBF16 = 1,
};
// Bytes of one cache element; 0 for a value that is no KvCacheDType.
constexpr int KvCacheElementBytes(int cache_dtype) {
  return cache_dtype == kCacheF32 ? 4 : cache_dtype == kCacheBF16 ? 2 : 0;
}

// ---- Activation precision ----
// What the values in activation buffers are. kActivationF32: f32 as computed. kActivationBF16:
// every f32 output of a step (the `output` arguments above; not workspaces, not int32 outputs)
// is rounded to bf16 (nearest even) as it is stored; storage stays f32. The compiler defines
// the kernels' `spark_activation_precision` (an i32 constant of the generated module, so that
// each kernel's rounding folds at code generation); the plan records it and the host reference
// executor rounds the same outputs.
enum ActivationPrecision : int {
  kActivationF32 = 0,
  kActivationBF16 = 1,
};
inline constexpr const char* kActivationPrecisionSymbol = "spark_activation_precision";

// ---- Attention split over the KV length (flash-decoding) ----
// The partial result of one (token, query head, split) is a record of AttentionRecordFloats
// floats: o[head_dim] (sum of exp(score - m) * v over the split's keys), then m (the split's
// largest score), then l (sum of exp(score - m)), then padding (so that records stay 16-byte
// aligned); a split without keys has o = 0, m = 0, l = 0 and is ignored by the merge.
// Record ((t * q_heads + h) * s + j) holds split j of token t, head h. The workspace holds
// split_rows * q_heads records, so s * num_tokens <= split_rows.
// These helpers are compiled into the kernels too (SPARK_ABI_HD), so that the runtime, the host
// reference and the device code share one definition.
#if defined(__CUDACC__)
#define SPARK_ABI_HD __host__ __device__
#else
#define SPARK_ABI_HD
#endif
SPARK_ABI_HD constexpr int AttentionRecordFloats(int head_dim) { return head_dim + 4; }

// The most splits a step may use (the merge kernel keeps one weight per split in shared memory).
inline constexpr int kMaxAttentionSplits = 64;

// How many key ranges each (token, query head) of a step of num_tokens tokens is split into:
// as many as the workspace holds, at most max_splits (and kMaxAttentionSplits).
SPARK_ABI_HD constexpr int AttentionSplits(int num_tokens, int max_splits, int split_rows) {
  if (num_tokens <= 0 || max_splits <= 1 || split_rows / 2 < num_tokens) return 1;
  int s = split_rows / num_tokens;
  if (s > max_splits) s = max_splits;
  return s > kMaxAttentionSplits ? kMaxAttentionSplits : s;
}

// A range of keys: [begin, begin + count).
struct KeyRange {
  int begin;
  int count;
};

// The keys the query at position p sees in attention: [begin, begin + count) in absolute
// positions. begin = max(0, p - window + 1) for a sliding window (window > 0), else 0; the last
// key is p, or `last` when larger (last_visible: a soft token's image block end). Empty for p < 0.
SPARK_ABI_HD constexpr KeyRange AttentionKeys(int p, int window, int last) {
  if (p < 0) return {0, 0};
  const int begin = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
  const int end = last > p ? last : p;
  return {begin, end - begin + 1};
}

// The keys of split j out of s, for a query that sees n keys: [begin, begin + count) relative to
// its first key. Splits are whole multiples of 16 keys (the kernel's 4 warps x 4 keys per step)
// except the last; trailing splits may be empty (count 0).
SPARK_ABI_HD constexpr KeyRange AttentionSplitRange(int n, int s, int j) {
  if (n <= 0 || s <= 0 || j < 0) return {0, 0};
  const long long per = ((static_cast<long long>(n) + s - 1) / s + 15) / 16 * 16;
  const long long begin = j * per < n ? j * per : n;
  const long long rest = n - begin;
  return {static_cast<int>(begin), static_cast<int>(rest < per ? rest : per)};
}

// ---- Step size ----
// The most tokens one step may process (a plan's max_tokens): sizes stay far inside the kernels'
// 32-bit arguments (65536 tokens x 262144 vocabulary = 2^34 logits per buffer is int64 only in the
// arena), and a longer prefill runs in several steps.
inline constexpr int kMaxStepTokens = 65536;

// ---- Launch grids ----
// The most blocks spark-compile gives a launch (every kernel grid-strides, so any grid is
// correct). Grids are sized for max_tokens, so a decode step of a large grid mostly schedules
// blocks with nothing to do (e.g. 43,008 for the 31B gelu_mul at max-tokens 512, of which 84 have
// work); 2048 blocks fill the GPUs Spark targets several times over (H200: 132 SMs; GB10: 48) at
// up to 16 resident blocks per SM, and bound that waste. The GPU harnesses launch with it too.
inline constexpr int kMaxLaunchBlocks = 2048;

// ---- MoE experts grouped by expert ----
// Steps of at least this many tokens run the experts grouped by expert on tensor cores
// (moe_gate_up always; moe_down when given a workspace, then moe_combine sums its rows).
inline constexpr int kMoeGroupMinTokens = 16;
SPARK_ABI_HD constexpr bool MoeDownGrouped(int num_tokens, bool has_partials) {
  return has_partials && num_tokens >= kMoeGroupMinTokens;
}

inline constexpr int kNumKernels = static_cast<int>(sizeof(kKernels) / sizeof(kKernels[0]));

// Returns the spec for `op`, or nullptr when the op is unknown.
inline const KernelSpec* FindKernel(const char* op) {
  for (const KernelSpec& k : kKernels) {
    if (std::strcmp(k.op, op) == 0) return &k;
  }
  return nullptr;
}

// The index of `spec`'s argument called `name`, or -1.
inline int FindArg(const KernelSpec& spec, const char* name) {
  for (int i = 0; i < spec.num_args; ++i) {
    if (std::strcmp(spec.args[i].name, name) == 0) return i;
  }
  return -1;
}

}  // namespace abi
}  // namespace spark

#endif  // SPARK_RUNTIME_KERNEL_ABI_H_
