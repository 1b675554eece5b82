// The kernel ABI: the op registry (kernel_ops.def: every kernel-level op a plan can contain, its
// arguments in call order with their roles, element types and extents, its rules) turned into
// tables and types, plus the definitions the kernels, the host reference and the runtime share.
// The single source of truth of
//   - the compiler (generates one `gpu.func` entry per specialised step that calls the device
//     function, and writes each plan step's `args` in this order),
//   - the kernel library (`kernels/`, implements `extern "C" __device__ void spark_<op>(...)`
//     with the type abi::ops::<op>::Fn, checked at compile time),
//   - the runtime (validates plan steps against it; the host reference executor implements every
//     op with exactly these arguments, checked at compile time too).
// Plain C++17, no dependencies: the runtime owns it and the compiler includes it.
//
// Conventions (docs/plan-format.md has the full semantics of each op):
//   - activations are row-major with a leading token dimension T (`num_tokens`), of the plan's
//     activation element type (ActivationPrecision below: float32, or bfloat16 storage);
//   - weights are in checkpoint layout (a Linear weight is [out, in]): bfloat16, or quantized
//     (NVFP4: packed float4 e2m1 codes with float8 e4m3 block scales and an f32 tensor scale;
//     FP8: float8 e4m3 with f32 scales; quantized_weights.h decodes them);
//   - KV caches are pools of blocks of kKvBlockRows rows of [kv_heads, head_dim] float32 or
//     bfloat16 (the plan's cache dtype, passed to kv_write and attention as `cache_dtype`:
//     KvCacheDType below); token t of a step belongs to the sequence of row sequences[t] of the
//     cache's block table, and its position p lives in slot KvSlot(that row, capacity, p) (paged
//     KV cache, below);
//   - every device function must be correct for any gridDim.x >= 1 (grid-stride loops over its
//     work units) and for blockDim.x == kernel.block_size.
#ifndef SPARK_RUNTIME_KERNEL_ABI_H_
#define SPARK_RUNTIME_KERNEL_ABI_H_

#include <cstddef>
#include <cstring>
#include <initializer_list>

#include "spark/runtime/kernel_ops.def"

// Helpers compiled into the kernels too (SPARK_ABI_HD), so that the runtime, the host reference
// and the device code share one definition.
#if defined(__CUDACC__)
#define SPARK_ABI_HD __host__ __device__
#else
#define SPARK_ABI_HD
#endif
#define SPARK_ABI_CONSTEXPR_FN SPARK_ABI_HD constexpr

namespace spark {
namespace abi {

// i32 words of one token row of the plan's sampling input (SamplingParams below).
inline constexpr int kSamplingParamWords = 8;

// ---- The op registry, derived ----
// kernel_ops.def lists every op once; everything below is generated from it.

// What one argument of a device function is, at the C level.
enum class ArgKind : int {
  kPtr = 0,  // a device pointer (activation buffer, weight, KV-cache part, or null)
  kI32 = 1,  // a 32-bit signed integer
  kF32 = 2,  // a 32-bit float
};

// What an argument is to the plan and the runtime.
enum class Role : int {
  // Pointers to activation buffers of the arena (per-token rows).
  kInput,      // read
  kOutput,     // written
  kInOut,      // updated in place (rounded like an output)
  kWorkspace,  // scratch the op writes and a later op (or itself) reads (f32 or i32 always)
  // Other pointers.
  kWeight,                     // a checkpoint tensor
  kWeightScale,                // a checkpoint tensor of dequantisation scales (the runtime
                               // checks at load that every value is finite and >= 0)
  kKCacheRead, kVCacheRead,    // a KV cache part, read
  kKCacheWrite, kVCacheWrite,  // a KV cache part, written
  kPositions,                  // the plan's positions input (i32 [T])
  kLastVisible,                // null or the plan's last_visible input (i32 [T])
  kSampling,                   // the plan's sampling input (SamplingParams per token row)
  kSequences,                  // the plan's sequences input (i32 [T]: each token's block-table row)
  kKvBlockTable,               // the block table of the op's KV cache (paged KV cache, below)
  // i32 values the runtime supplies per step.
  kNumTokens,      // tokens in the step
  kNumSoftTokens,  // soft-token rows in the step
  kKvCapacity,     // the capacity in slots of the op's KV cache
  // Literals (compiled into the entry point).
  kSize,        // an i32 >= 0
  kTokenId,     // an i32 token id, -1 = unused
  kWindow,      // an i32: the sliding window of the op's KV cache, 0 for a full cache
  kCacheDType,  // an i32 KvCacheDType: the element type of the op's KV cache
  kMoePath,     // an i32 MoePath: which path of a MoE expert op the entry holds
  kParam,       // an f32
};

// The element type of what a pointer argument points to (or of a scalar argument). kAct: the
// plan's activation element type (f32, or bf16 under kActivationBF16: ActivationPrecision
// below). kCache: the element type of the op's KV cache (KvCacheDType, passed as the kCacheDType
// argument). kF8E4M3: float8 e4m3fn bytes; kF4E2M1: float4 e2m1 codes packed two to a byte
// (element 2j in the low nibble), so an extent counts codes and the bytes are half of it.
enum class ElementType : int { kF32, kBF16, kI32, kAct, kCache, kF8E4M3, kF4E2M1 };
enum class Nullability : int { kRequired, kNullable };

// What a slot of kind `kind` takes, in the plan's argument spellings (for errors).
SPARK_ABI_CONSTEXPR_FN const char* SlotDescription(ArgKind kind) {
  return kind == ArgKind::kPtr   ? "a pointer (buffer, weight, k_cache, v_cache or null)"
         : kind == ArgKind::kI32 ? "an i32 (i32, num_tokens, num_soft_tokens or kv_capacity)"
                                 : "an f32 (f32)";
}
SPARK_ABI_CONSTEXPR_FN bool IsScalarRole(Role role) { return role >= Role::kNumTokens; }
SPARK_ABI_CONSTEXPR_FN bool IsRuntimeValue(Role role) {
  return role == Role::kNumTokens || role == Role::kNumSoftTokens || role == Role::kKvCapacity;
}
// Pointers whose memory the op writes.
SPARK_ABI_CONSTEXPR_FN bool IsWrittenRole(Role role) {
  return role == Role::kOutput || role == Role::kInOut || role == Role::kWorkspace ||
         role == Role::kKCacheWrite || role == Role::kVCacheWrite;
}
// Checkpoint tensors (weights and their dequantisation scales).
SPARK_ABI_CONSTEXPR_FN bool IsWeightRole(Role role) {
  return role == Role::kWeight || role == Role::kWeightScale;
}
// Activation buffers (an arena region with one row per token).
SPARK_ABI_CONSTEXPR_FN bool IsActivationRole(Role role) { return role <= Role::kWorkspace; }
SPARK_ABI_CONSTEXPR_FN ArgKind KindOf(Role role, ElementType element) {
  return !IsScalarRole(role) ? ArgKind::kPtr
         : element == ElementType::kF32 ? ArgKind::kF32
                                         : ArgKind::kI32;
}

// What a pointer argument must hold, in elements, over the op's size arguments (by index):
// multiplier x the product of the factors / divisor (a divisor the rules make exact: the block
// scales of NVFP4 hold one element per 16 weights).
struct Extent {
  enum Kind : int {
    kScalar,     // not a pointer
    kPerToken,   // multiplier x factors elements in each token row
    kTotal,      // multiplier x factors elements (a weight)
    kRecords,    // the attention workspace: factors = {split_rows, q_heads, head_dim, max_splits}
    kCacheRows,  // a KV cache part of rows factors = {kv_heads, head_dim}
    kBlockTable, // the block table of the op's KV cache (KvSlot), bound by the runtime
  };
  Kind kind = kScalar;
  long long multiplier = 1;
  long long divisor = 1;
  int num_factors = 0;
  int factors[4] = {-1, -1, -1, -1};

  constexpr Extent() = default;
  constexpr Extent(Kind k, long long m, std::initializer_list<int> f, long long d = 1)
      : kind(k), multiplier(m), divisor(d) {
    for (int v : f) factors[num_factors++] = v;
  }
};
constexpr Extent Scalar() { return Extent(); }
constexpr Extent PerToken(long long m, std::initializer_list<int> f) {
  return Extent(Extent::kPerToken, m, f);
}
constexpr Extent Total(long long m, std::initializer_list<int> f) {
  return Extent(Extent::kTotal, m, f);
}
// One element per `block` of the product (a weight's block scales).
constexpr Extent Blocks(long long block, std::initializer_list<int> f) {
  return Extent(Extent::kTotal, 1, f, block);
}
constexpr Extent Records(std::initializer_list<int> f) { return Extent(Extent::kRecords, 1, f); }
constexpr Extent CacheRows(std::initializer_list<int> f) {
  return Extent(Extent::kCacheRows, 1, f);
}
constexpr Extent BlockTable() { return Extent(Extent::kBlockTable, 1, {}); }

struct ArgSpec {
  const char* name = nullptr;
  ArgKind kind = ArgKind::kPtr;
  Role role = Role::kInput;
  ElementType element = ElementType::kF32;
  bool nullable = false;  // a pointer that may be null (the weight of a weight-less RMSNorm)
  Extent extent;
  // A pointer to what the op computes (kOutput, kInOut).
  constexpr bool output() const { return role == Role::kOutput || role == Role::kInOut; }
};

// A relation between an op's size arguments (a, b: argument indices; b = -1 when unused).
enum class RuleKind : int {
  kEnd,            // terminates an op's rule list
  kPositive,       // a > 0
  kEven,           // a % 2 == 0
  kAtMostHalf,     // 2 a <= b
  kPositiveParam,  // f32 a > 0
  kNonZeroParam,   // f32 a != 0
  kDivides,        // a >= 1 and b % a == 0
  kOneTo,          // 1 <= a <= b
  kLess,           // a < b
  kMultipleOf16,   // a % 16 == 0 (a dimension quantized in blocks of 16)
  kMultipleOf4,    // a % 4 == 0 (a head split into four quarters: rope_2d)
  kOneOrEqual,     // a == 1 or a == b (one scale per tensor, or one per row)
  kZeroOrOne,      // a == 0 or a == 1
  kWholeKvBlocks,  // a > 0 and a % kKvBlockRows == 0 (a KV cache capacity)
  kMultipleOf64,   // a % 64 == 0 (a dimension of NVFP4 activations: whole FP4 MMA k-steps)
  kNvfp4RowWords,  // a == Nvfp4RowWords(b) (the f32 words of one packed NVFP4 activation row)
};
struct Rule {
  RuleKind kind;
  int a;
  int b;
};

// For which calls a step is part of the program (kernel_ops.def `runs`; plan.h StepRuns): the
// compiler puts a step into the programs of the token counts it does something for.
enum class Runs : int {
  kAlways,
  kOnItsPath,        // a MoE expert op: its MoePath is the one of the call's token count
  kWhenSplit,        // attention_merge: AttentionSplits > 1
  kWhenGrouped,      // moe_combine: the call's token count takes the grouped path
  kWithSoftTokens,   // scatter_rows: calls with soft-token rows
};

// The arithmetic of an op (for profiles): multiplier x the product of `factors` per token
// (kPerToken) or per key attended (kPerKey).
enum FlopsKind : int { kNone, kPerToken, kPerKey };
struct OpFlops {
  FlopsKind kind = kNone;
  long long multiplier = 0;
  int num_factors = 0;
  int factors[4] = {-1, -1, -1, -1};
  constexpr OpFlops() = default;
  constexpr OpFlops(FlopsKind k, long long m, std::initializer_list<int> f)
      : kind(k), multiplier(m) {
    for (int v : f) factors[num_factors++] = v;
  }
};
constexpr OpFlops Flops(FlopsKind kind, long long m, std::initializer_list<int> f) {
  return OpFlops(kind, m, f);
}

// The C type of an argument on the device: activations void* (their element type is the
// module's activation precision, ActivationPrecision), token ids / positions / indices int*,
// weights unsigned short* holding bf16 bits (unsigned char* for float8 and packed float4 codes,
// float* for f32 scales), KV caches void* (their element type is an
// argument); pointers the op does not write are const. The host reference (HostFn) takes
// activations as float*: the host executor widens bf16 activations to f32 around each call.
enum class Side : int { kDevice, kHost };
template <ElementType E, Side S> struct ElementCType;
template <Side S> struct ElementCType<ElementType::kF32, S> { using type = float; };
template <Side S> struct ElementCType<ElementType::kBF16, S> { using type = unsigned short; };
template <Side S> struct ElementCType<ElementType::kI32, S> { using type = int; };
template <> struct ElementCType<ElementType::kAct, Side::kDevice> { using type = void; };
template <> struct ElementCType<ElementType::kAct, Side::kHost> { using type = float; };
template <Side S> struct ElementCType<ElementType::kCache, S> { using type = void; };
template <Side S> struct ElementCType<ElementType::kF8E4M3, S> { using type = unsigned char; };
template <Side S> struct ElementCType<ElementType::kF4E2M1, S> { using type = unsigned char; };
template <bool kScalar, bool kWritten, typename T> struct ArgCTypeImpl { using type = const T*; };
template <typename T> struct ArgCTypeImpl<false, true, T> { using type = T*; };
template <bool kWritten, typename T> struct ArgCTypeImpl<true, kWritten, T> { using type = T; };
template <Role R, ElementType E, Side S>
using ArgCType = typename ArgCTypeImpl<IsScalarRole(R), IsWrittenRole(R),
                                       typename ElementCType<E, S>::type>::type;
// void(A...) from the list `void, A...` the registry macros produce.
template <typename R, typename... A> struct FunctionOfImpl { using type = R(A...); };
template <typename... T> using FunctionOf = typename FunctionOfImpl<T...>::type;

// Per op, in namespace abi::ops::<op>: `enum Arg` (each argument's index by its name, kNumArgs,
// kNoArg), kArgs (ArgSpec in call order), kRules (ending with kEnd), kFlops, Fn, the C
// function type of the device function spark_<op>, and HostFn, that of host::<Name>.
#define SPARK_ABI_IGNORE(...)
#define SPARK_ABI_ARG_ENUM(name, role, element, nullability, extent) name,
#define SPARK_ABI_ARG_SPEC(name, role, element, nullability, extent)                          \
  {#name, ::spark::abi::KindOf(::spark::abi::Role::role, ::spark::abi::ElementType::element), \
   ::spark::abi::Role::role, ::spark::abi::ElementType::element,                              \
   ::spark::abi::Nullability::nullability == ::spark::abi::Nullability::kNullable, extent},
#define SPARK_ABI_RULE_SPEC(kind, a, b) {::spark::abi::RuleKind::kind, a, b},
#define SPARK_ABI_ARG_CTYPE(name, role, element, nullability, extent)                  \
  , ::spark::abi::ArgCType<::spark::abi::Role::role, ::spark::abi::ElementType::element, \
                           ::spark::abi::Side::kDevice>
#define SPARK_ABI_ARG_HOST_CTYPE(name, role, element, nullability, extent)             \
  , ::spark::abi::ArgCType<::spark::abi::Role::role, ::spark::abi::ElementType::element, \
                           ::spark::abi::Side::kHost>
#define SPARK_ABI_DEFINE_OP(Name, op, block_size, runs, flops)                                 \
  namespace op {                                                                               \
  enum Arg : int {                                                                             \
    SPARK_OP_ARGS_##op(SPARK_ABI_ARG_ENUM, SPARK_ABI_IGNORE) kNumArgs, kNoArg = -1             \
  };                                                                                           \
  inline constexpr ArgSpec kArgs[] = {SPARK_OP_ARGS_##op(SPARK_ABI_ARG_SPEC, SPARK_ABI_IGNORE)}; \
  inline constexpr Rule kRules[] = {                                                           \
      SPARK_OP_ARGS_##op(SPARK_ABI_IGNORE, SPARK_ABI_RULE_SPEC){RuleKind::kEnd, kNoArg, kNoArg}}; \
  inline constexpr OpFlops kFlops = flops;                                                     \
  using Fn = FunctionOf<void SPARK_OP_ARGS_##op(SPARK_ABI_ARG_CTYPE, SPARK_ABI_IGNORE)>;       \
  using HostFn = FunctionOf<void SPARK_OP_ARGS_##op(SPARK_ABI_ARG_HOST_CTYPE, SPARK_ABI_IGNORE)>; \
  }

// Every op of the registry: the kernel ops, then the transfer ops.
#define SPARK_ALL_OPS(X) SPARK_KERNEL_OPS(X) SPARK_TRANSFER_OPS(X)

namespace ops {
SPARK_ALL_OPS(SPARK_ABI_DEFINE_OP)
}  // namespace ops

// The op of a plan step.
#define SPARK_ABI_OP_ENUM(Name, op, block_size, runs, flops) k##Name,
enum class OpId : int { SPARK_ALL_OPS(SPARK_ABI_OP_ENUM) kCount };
#undef SPARK_ABI_OP_ENUM

// How a step of an op runs.
enum class Execution : int {
  kKernel,    // a launch of the op's device function (a Launch step of the plan)
  kTransfer,  // the runtime moves the data itself: a device copy (a Transfer step of the plan)
};

struct OpSpec {
  OpId id;
  const char* op;        // plan step op name, e.g. "rms_norm"
  const char* symbol;    // device function, e.g. "spark_rms_norm" (kKernel ops only)
  Execution execution;
  int block_size;        // required blockDim.x (kKernel ops; 0 for transfers)
  int num_args;          // computed from the registry
  const ArgSpec* args;   // in call order
  const Rule* rules;     // ending with RuleKind::kEnd
  Runs runs;
  OpFlops flops;
  constexpr bool kernel() const { return execution == Execution::kKernel; }
};

#define SPARK_ABI_OP_SPEC(Name, op, block_size, runs, flops, execution, symbol)              \
  {OpId::k##Name, #op, symbol, Execution::execution, block_size, ops::op::kNumArgs,          \
   ops::op::kArgs, ops::op::kRules, Runs::runs, ops::op::kFlops},
#define SPARK_ABI_KERNEL_SPEC(Name, op, block_size, runs, flops) \
  SPARK_ABI_OP_SPEC(Name, op, block_size, runs, flops, kKernel, "spark_" #op)
#define SPARK_ABI_TRANSFER_SPEC(Name, op, block_size, runs, flops) \
  SPARK_ABI_OP_SPEC(Name, op, block_size, runs, flops, kTransfer, "")
// clang-format off
inline constexpr OpSpec kOps[] = {SPARK_KERNEL_OPS(SPARK_ABI_KERNEL_SPEC)
                                  SPARK_TRANSFER_OPS(SPARK_ABI_TRANSFER_SPEC)};
// clang-format on
#undef SPARK_ABI_KERNEL_SPEC
#undef SPARK_ABI_TRANSFER_SPEC
#undef SPARK_ABI_OP_SPEC

inline constexpr int kNumOps = static_cast<int>(sizeof(kOps) / sizeof(kOps[0]));
static_assert(kNumOps == static_cast<int>(OpId::kCount), "one OpSpec per OpId");

// The spec of an op by id (kOps is in OpId order).
SPARK_ABI_CONSTEXPR_FN const OpSpec& Spec(OpId id) { return kOps[static_cast<int>(id)]; }

// True when each token row of the op's outputs depends only on the same row of its inputs (and
// on weights and literals): every pointer is a per-token buffer row or a weight, and the op takes
// no KV cache, soft-token count, attention records or last_visible. Such an op can run on one
// row of a step by offsetting its buffers (the plan's logits tail: plan.h Step::logits_tail).
SPARK_ABI_CONSTEXPR_FN bool RowLocal(const OpSpec& spec) {
  for (int i = 0; i < spec.num_args; ++i) {
    const ArgSpec& arg = spec.args[i];
    if (IsWeightRole(arg.role) || arg.role == Role::kNumTokens) continue;
    if (IsScalarRole(arg.role)) {
      if (IsRuntimeValue(arg.role)) return false;  // soft-token count, cache capacity
      continue;
    }
    if (arg.extent.kind != Extent::kPerToken) return false;
    // The sampling parameters are per-token rows of an input too.
    if (!IsActivationRole(arg.role) && arg.role != Role::kSampling) return false;
  }
  return true;
}

// ---- Sampling (the `sample` op) ----
// One token row's sampling parameters, as the runtime writes them into the plan's sampling input
// (kSamplingParamWords i32 words per row: this struct's bytes, little-endian).
struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy
  int top_k = 0;             // 0 (or >= the vocabulary): no limit; 1: greedy
  float top_p = 1.0f;        // in (0, 1]; 1: no limit
  int reserved = 0;
  unsigned long long seed = 0;
  // Which draw of the seed's stream this row takes (the generator passes the position the sampled
  // token will have, so a seed gives the same tokens whatever the KV cache already held).
  unsigned long long counter = 0;
};
static_assert(sizeof(SamplingParams) == 4 * kSamplingParamWords, "SamplingParams is 8 words");

SPARK_ABI_CONSTEXPR_FN bool SamplingIsGreedy(const SamplingParams& p) {
  return !(p.temperature > 0.0f) || p.top_k == 1;
}

// The order-preserving key of a logit: a larger logit has a larger key; NaN has key 0, below
// -inf (0x007fffff), so that it is never chosen over a number.
SPARK_ABI_HD inline unsigned SamplingKey(float logit) {
  unsigned bits = 0;
  __builtin_memcpy(&bits, &logit, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0u;  // NaN
  return (bits & 0x80000000u) != 0u ? ~bits : bits | 0x80000000u;
}

// The weights of the candidates are fixed-point integers: floor(exp((logit - max) / temperature)
// * 2^SamplingWeightBits(vocab)), each at most 2^bits, so that their sum over the vocabulary
// stays below 2^62. Sums of integers do not depend on their order: the kernel and the host
// reference add them in different orders and get the same totals.
SPARK_ABI_CONSTEXPR_FN int SamplingWeightBits(int vocab) {
  int log2 = 0;
  while (log2 < 31 && (1ll << log2) < vocab) ++log2;
  return 62 - log2;
}

// The smallest mass a nucleus of top_p must reach out of `total` (ceil(top_p * total), at least
// 1 and at most total): computed in double the same way on the host and the device.
SPARK_ABI_HD inline unsigned long long SamplingNucleusMass(float top_p,
                                                           unsigned long long total) {
  const double want = static_cast<double>(top_p) * static_cast<double>(total);
  if (!(want < static_cast<double>(total))) return total;
  unsigned long long need = want > 0.0 ? static_cast<unsigned long long>(want) : 0ull;
  if (static_cast<double>(need) < want) ++need;
  return need < 1ull ? 1ull : need > total ? total : need;
}

// The row's random draw: splitmix64 of (seed, counter), a uniform 64-bit value. The chosen token
// is the first candidate, in index order, whose running weight sum exceeds
// floor(total * draw / 2^64).
SPARK_ABI_CONSTEXPR_FN unsigned long long SamplingDraw(unsigned long long seed,
                                                      unsigned long long counter) {
  unsigned long long z = seed + (counter + 1ull) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

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

// ---- Paged KV cache ----
// Every KV cache is a pool of blocks of kKvBlockRows slots; the sequences of a step own blocks
// of it. The runtime groups the caches by capacity (the slots a sequence may hold in them,
// KvCapacity in plan.h: a multiple of kKvBlockRows) and keeps, per group, a block table that
// the kernels read: i32 [rows, capacity / kKvBlockRows], row r listing the blocks of the step's
// r-th sequence (sequences[t] = r for its tokens), -1 where a block is not allocated. Position
// p of a sequence lives in block row[(p / kKvBlockRows) % (capacity / kKvBlockRows)], slot
// p % kKvBlockRows of it: a full cache (capacity >= every position) grows block by block, a
// sliding cache reuses its ring of capacity / kKvBlockRows blocks. One sequence whose row is
// 0, 1, 2, ... gives slot p % capacity.
inline constexpr int kKvBlockRows = 16;

// The slot (row of the pool) of position p >= 0 of the sequence whose block-table row is `row`
// in a cache group of `capacity` slots per sequence; -1 when its block is not allocated.
SPARK_ABI_HD inline long long KvSlot(const int* row, int capacity, int p) {
  const int blocks = capacity / kKvBlockRows;
  const int block = row[(p / kKvBlockRows) % (blocks > 0 ? blocks : 1)];
  return block < 0 ? -1 : static_cast<long long>(block) * kKvBlockRows + p % kKvBlockRows;
}

// ---- Activation precision ----
// The element type of activation buffers (ElementType::kAct). kActivationF32: f32.
// kActivationBF16: bf16 storage (half the bytes); kernels read bf16 and widen to f32, compute in
// f32, and round what they store to bf16 (nearest even). Workspaces (attention and MoE partials)
// stay f32, token ids and indices i32. The compiler defines the kernels'
// `spark_activation_precision` (an i32 constant of the generated module, so that each kernel's
// loads and stores fold at code generation); the plan records it (every kAct buffer has that
// dtype) and the host reference executor widens and rounds the same way.
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
SPARK_ABI_HD constexpr int AttentionRecordFloats(int head_dim) { return head_dim + 4; }

// The most splits a step may use (the merge kernel keeps one weight per split in shared memory).
inline constexpr int kMaxAttentionSplits = 64;

// How many key ranges each (token, query head) of a step of num_tokens tokens is split into: all
// of max_splits (at most kMaxAttentionSplits) when the workspace holds that many for every token,
// else none. All or nothing, so that a token's attention is summed in the same order in every
// step that splits: a sequence's decode tokens give the same results alone or batched with other
// sequences' (continuous batching), and a prefill chunk too once it is past the split limit.
SPARK_ABI_HD constexpr int AttentionSplits(int num_tokens, int max_splits, int split_rows) {
  const int s = max_splits > kMaxAttentionSplits ? kMaxAttentionSplits : max_splits;
  if (num_tokens <= 0 || s <= 1 || static_cast<long long>(s) * num_tokens > split_rows) return 1;
  return s;
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
// spark-compile's default max_tokens: prefill runs in steps of this many tokens. Every weight is
// read once per step, so the step size is the best measured (issue 23; H200, 4096-token prefill,
// bench/results/2026-12-06-h200-cold-start.md): 26B-A4B 980 tokens/s at 64, 4,375 at 512, 5,016 at
// 1024, 5,084 at 2048; 31B 1,160 / 1,224 / 1,219 at 512 / 1024 / 2048. The activation arena grows
// in proportion (31B, f32: 2.04 GiB at 1024).
inline constexpr int kDefaultMaxStepTokens = 1024;

// ---- Launch grids ----
// The most blocks a launch gets (every kernel grid-strides, so any grid is correct): 2048 blocks
// fill the GPUs Spark targets several times over (H200: 132 SMs; GB10: 48) at up to 16 resident
// blocks per SM. The GPU harnesses launch with it too.
inline constexpr int kMaxLaunchBlocks = 2048;

// A step's grid as a function of the call's token count T (plan.h Step::grid):
// clamp(ceil(max(T * per_token, fixed) / divisor), 1, kMaxLaunchBlocks) blocks, so that every
// call is launched with the blocks its own tokens need (a decode call with those of one token).
struct GridRule {
  long long per_token = 0;
  long long fixed = 0;
  long long divisor = 1;
};
// The largest per_token / fixed / divisor a plan may hold (T * per_token stays far inside int64).
inline constexpr long long kMaxGridRuleTerm = 1LL << 31;
SPARK_ABI_HD constexpr int LaunchBlocks(const GridRule& rule, long long num_tokens) {
  const long long work = num_tokens * rule.per_token > rule.fixed ? num_tokens * rule.per_token
                                                                  : rule.fixed;
  const long long divisor = rule.divisor > 0 ? rule.divisor : 1;
  const long long blocks = (work + divisor - 1) / divisor;
  return blocks < 1 ? 1 : blocks > kMaxLaunchBlocks ? kMaxLaunchBlocks : static_cast<int>(blocks);
}

// ---- MoE experts grouped by expert ----
// Each MoE expert op has two paths, and each entry point holds one (its `path` literal, Role
// kMoePath), so that the decode entries carry only the GEMV code and registers:
//   kMoeGemv     one token row at a time (decode and short prefill chunks);
//   kMoeGrouped  grouped by expert on tensor cores: moe_gate_up always, moe_down when given a
//                `partials` workspace (MoeDownGrouped), whose rows moe_combine then sums.
// The compiler gives calls of at least kMoeGroupMinTokens tokens the grouped steps (plan.h
// StepRuns), fewer tokens the GEMV steps.
enum MoePath : int { kMoeGemv = 0, kMoeGrouped = 1 };
inline constexpr int kMoeGroupMinTokens = 16;
SPARK_ABI_HD constexpr int MoePathFor(long long num_tokens) {
  return num_tokens >= kMoeGroupMinTokens ? kMoeGrouped : kMoeGemv;
}
// Whether moe_down of `path` writes each slot's row to `partials` (and not y).
SPARK_ABI_HD constexpr bool MoeDownGrouped(int path, bool has_partials) {
  return path == kMoeGrouped && has_partials;
}

// ---- Dynamic shared memory of a call ----
// The dense linears (linear, linear_nvfp4, linear_fp8) multiply calls of more than
// kLinearSmallBatchMaxTokens tokens in tensor-core tiles whose pipeline stages live in dynamic
// shared memory (kernels/mma_tile.cuh): kLinearTileSharedBytes with bf16 activations (128 x 128
// tiles, three stages), kLinearSplitTileSharedBytes with f32 (64 x 128, two stages of hi and lo
// halves); calls of fewer tokens (decode) take the GEMV paths and get none, so that their
// occupancy is not cut by memory they do not use. A launch gets its step's Step::shared_bytes plus
// CallSharedBytes(op, T, activations are bf16) (plan.h LaunchSharedBytes); within GB10's 99 KB
// per block with the kernels' static shared memory. A kernel checks what it got
// (dynamic_shared_bytes()) and takes a GEMV path when it is less.
inline constexpr int kLinearSmallBatchMaxTokens = 16;
inline constexpr int kLinearTileSharedBytes = 61440;
inline constexpr int kLinearSplitTileSharedBytes = 40960;
SPARK_ABI_HD constexpr int CallSharedBytes(OpId op, long long num_tokens, bool bf16_activations) {
  const bool dense_linear =
      op == OpId::kLinear || op == OpId::kLinearNvfp4 || op == OpId::kLinearFp8;
  if (!dense_linear || num_tokens <= kLinearSmallBatchMaxTokens) return 0;
  return bf16_activations ? kLinearTileSharedBytes : kLinearSplitTileSharedBytes;
}

// ---- NVFP4 activations (W4A4: spark-compile --fp4-activations) ----
// quantize_nvfp4_rows writes each token row of `cols` activations (cols % 64 == 0) as one packed
// row of an f32 workspace, which linear_nvfp4_a4 reads. Byte layout of a row:
//   [0, 4)                        the row's global scale g (f32)
//   [4, 16)                       zero
//   [16, 16 + cols / 2)           E2M1 codes, two per byte, element 2j in the low nibble (as
//                                 ModelOpt's NVFP4 weights)
//   [16 + cols / 2, + cols / 16)  e4m3 block scales, one per 16 elements, then zeros up to a
//                                 multiple of 16 bytes
// so that codes and scales start 16-byte aligned and the row is Nvfp4RowWords(cols) words.
inline constexpr int kNvfp4RowCodesOffset = 16;
SPARK_ABI_HD constexpr long long Nvfp4RowScalesOffset(long long cols) {
  return kNvfp4RowCodesOffset + cols / 2;
}
SPARK_ABI_HD constexpr long long Nvfp4RowBytes(long long cols) {
  return Nvfp4RowScalesOffset(cols) + (cols / 16 + 15) / 16 * 16;
}
SPARK_ABI_HD constexpr long long Nvfp4RowWords(long long cols) { return Nvfp4RowBytes(cols) / 4; }

// Returns the spec for `op` (a plan's op name), or nullptr when the op is unknown.
inline const OpSpec* FindOp(const char* op) {
  for (const OpSpec& k : kOps) {
    if (std::strcmp(k.op, op) == 0) return &k;
  }
  return nullptr;
}

// The index of `spec`'s argument called `name`, or -1. (Code that knows its op uses the
// registry's indices instead: abi::ops::attention::partials.)
inline int FindArg(const OpSpec& spec, const char* name) {
  for (int i = 0; i < spec.num_args; ++i) {
    if (std::strcmp(spec.args[i].name, name) == 0) return i;
  }
  return -1;
}

// The index of the first argument of `spec` with `role`, or -1.
SPARK_ABI_CONSTEXPR_FN int FindRole(const OpSpec& spec, Role role) {
  for (int i = 0; i < spec.num_args; ++i) {
    if (spec.args[i].role == role) return i;
  }
  return -1;
}

}  // namespace abi
}  // namespace spark

#endif  // SPARK_RUNTIME_KERNEL_ABI_H_
