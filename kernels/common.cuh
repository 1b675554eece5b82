// Shared device helpers of the Spark kernel library: indexing, vector loads, bf16 packing, warp
// and block reductions. The math functions are in math.cuh (see there for why nothing may call
// libdevice).
//
// Conventions for every exported function (runtime/include/spark/runtime/kernel_abi.h):
//   - `extern "C" __device__ void spark_<op>(...)` is the whole kernel body; the compiler wraps it
//     in a generated `gpu.func` entry. It must be correct for any gridDim.x >= 1 (grid-stride
//     loops) and for blockDim.x == the ABI block size;
//   - pointers are generic; weights are bf16 bits (`const unsigned short*`; quantized ones
//     `const unsigned char*` with their scales, kernel_ops.def), activations
//     `void*` of the module's activation type (f32 or bf16: read and written through ActIn /
//     ActOut below), workspaces f32, ids/positions/indices int32;
//   - vector (16-byte) loads are used only after checking the alignment of the pointer and of
//     the row pitch; otherwise a scalar path runs.
#ifndef SPARK_KERNELS_COMMON_CUH_
#define SPARK_KERNELS_COMMON_CUH_

#include <stdint.h>

#include "math.cuh"
#include "spark/runtime/kernel_abi.h"

#define SPK_DEVICE static __device__ __forceinline__
#define SPK_MEMBER __device__ __forceinline__  // a member function of a device type
#define SPK_EXPORT extern "C" __device__
// An exported function inlined into every generated entry, so that the entry's literal arguments
// fold into it (a function called from several entries is otherwise compiled once, for all of
// them). For ops whose entries must not carry each other's code: the MoE expert ops, whose
// decode entries would otherwise get the grouped tensor-core path's registers.
// (clang-built library only: nvcc, which builds the kernel bench, ignores the attribute on a
// non-inline function and would warn.)
#if defined(__clang__)
#define SPK_EXPORT_INLINE extern "C" __device__ __attribute__((always_inline))
#else
#define SPK_EXPORT_INLINE SPK_EXPORT
#endif

// Every device function of the registry (kernel_ops.def), declared with its registry type. A .cu
// that defines some of them ends with SPARK_CHECK_KERNEL_SIGNATURES(): a definition whose
// parameters differ from the registry's is a second overload of the C name, and taking its
// address there fails to compile ("reference to overloaded function could not be resolved").
#define SPK_DECLARE_KERNEL(Name, op, block_size, runs, flops) \
  extern "C" __device__ ::spark::abi::ops::op::Fn spark_##op;
SPARK_KERNEL_OPS(SPK_DECLARE_KERNEL)
#undef SPK_DECLARE_KERNEL
template <typename A, typename B> struct SpkSameType { static constexpr bool value = false; };
template <typename A> struct SpkSameType<A, A> { static constexpr bool value = true; };
#define SPK_CHECK_KERNEL_SIGNATURE(Name, op, block_size, runs, flops)              \
  static_assert(SpkSameType<decltype(&spark_##op), ::spark::abi::ops::op::Fn*>::value, \
                "spark_" #op " does not have the type kernel_ops.def gives it");
#define SPARK_CHECK_KERNEL_SIGNATURES() SPARK_KERNEL_OPS(SPK_CHECK_KERNEL_SIGNATURE)

namespace spk {

// ------------------------------------------------------------------------------------------------
// Indexing.
// ------------------------------------------------------------------------------------------------
SPK_DEVICE int lane_id() { return static_cast<int>(threadIdx.x & 31u); }
SPK_DEVICE int warp_id() { return static_cast<int>(threadIdx.x >> 5); }
SPK_DEVICE int num_warps() { return static_cast<int>(blockDim.x >> 5); }
SPK_DEVICE int64_t global_thread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
SPK_DEVICE int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }
// Set bits of v: the clang builtin (llvm.ctpop, `popc` in PTX) rather than CUDA's __popc, which
// clang resolves through libdevice (not linked).
SPK_DEVICE int popc(unsigned v) { return __builtin_popcount(v); }
SPK_DEVICE int64_t global_warp() {
  return static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
}
SPK_DEVICE int64_t grid_warps() { return static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5); }

SPK_DEVICE bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
SPK_DEVICE bool aligned8(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 7u) == 0; }

// ------------------------------------------------------------------------------------------------
// Loads. Read-only data (weights, and inputs a kernel never writes) goes through the
// non-coherent path.
// ------------------------------------------------------------------------------------------------
SPK_DEVICE uint4 ldg_u4(const void* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
SPK_DEVICE float4 ldg_f4(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }
SPK_DEVICE float ldg_f(const float* p) { return __ldg(p); }
SPK_DEVICE float ldg_bf16(const unsigned short* p) { return bf16_to_f32(__ldg(p)); }
SPK_DEVICE int ldg_i(const int* p) { return __ldg(p); }

// Unpacks 8 bf16 (one uint4) to f32.
SPK_DEVICE void unpack_bf16x8(const uint4& v, float f[8]) {
  f[0] = bf16lo_to_f32(v.x);
  f[1] = bf16hi_to_f32(v.x);
  f[2] = bf16lo_to_f32(v.y);
  f[3] = bf16hi_to_f32(v.y);
  f[4] = bf16lo_to_f32(v.z);
  f[5] = bf16hi_to_f32(v.z);
  f[6] = bf16lo_to_f32(v.w);
  f[7] = bf16hi_to_f32(v.w);
}

// acc + w[0..7] . (a.x, a.y, a.z, a.w, b.x, ..., b.w), one fused multiply-add at a time, in
// index order (the GEMV and MoE paths share it, so their rounding is the same).
SPK_DEVICE float dot8_acc(const float w[8], const float4& a, const float4& b, float acc) {
  acc = fmaf_(w[0], a.x, acc);
  acc = fmaf_(w[1], a.y, acc);
  acc = fmaf_(w[2], a.z, acc);
  acc = fmaf_(w[3], a.w, acc);
  acc = fmaf_(w[4], b.x, acc);
  acc = fmaf_(w[5], b.y, acc);
  acc = fmaf_(w[6], b.z, acc);
  return fmaf_(w[7], b.w, acc);
}

// ------------------------------------------------------------------------------------------------
// Quantized weight elements (runtime/include/spark/runtime/quantized_weights.h has the formats
// and the host forms; these are the device forms, equal to them for every code, NaN included).
// ------------------------------------------------------------------------------------------------
// The value of the E2M1 code in the low 4 bits of `code`: the f32 pattern is built directly
// (magnitudes 1 .. 6 of codes 2-7 are 0x3f000000 + (m << 22); code 1 is 0.5).
SPK_DEVICE float e2m1_to_f32(uint32_t code) {
  const uint32_t m = code & 7u;
  const uint32_t magnitude = m >= 2u ? 0x3f000000u + (m << 22) : (m != 0u ? 0x3f000000u : 0u);
  return u32_as_f32(magnitude | ((code & 8u) << 28));
}
// The value of an e4m3fn byte (low 8 bits of `bits`).
SPK_DEVICE float e4m3_to_f32(uint32_t bits) {
  const uint32_t e = (bits >> 3) & 15u, m = bits & 7u;
  const float magnitude = e == 0u                ? static_cast<float>(m) * 0.001953125f  // m 2^-9
                          : (bits & 0x7fu) == 0x7fu ? u32_as_f32(0x7fc00000u)          // NaN
                                                 : u32_as_f32(((e + 120u) << 23) | (m << 20));
  return (bits & 0x80u) != 0u ? -magnitude : magnitude;
}

// ------------------------------------------------------------------------------------------------
// Inline PTX. SPARK_KERNEL_EMULATION (a CPU emulation of the CUDA execution model used to test
// kernel logic without a GPU) supplies host versions of these few instructions.
// ------------------------------------------------------------------------------------------------
#if defined(SPARK_KERNEL_EMULATION)
uint32_t spk_emu_pack_bf16x2(float lo, float hi);
void spk_emu_mma_bf16_16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1);
void spk_emu_ldmatrix_x4(uint32_t d[4], const void* row);
void spk_emu_ldmatrix_x4_trans(uint32_t d[4], const void* row);
void spk_emu_f16x2_to_f32x2(uint32_t v, float& lo, float& hi);
void spk_emu_cp_async16(void* shared_dst, const void* global_src);
void spk_emu_cp_async4(void* shared_dst, const void* global_src);
void spk_emu_mma_nvfp4_m16n8k64(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1,
                                uint32_t scale_a, uint32_t scale_b);
void spk_emu_cp_async_commit();
void spk_emu_cp_async_wait(int pending);
#endif

// Packs two f32 into bf16x2 with round-to-nearest-even; `lo` goes to the low half (the element
// with the smaller index in mma fragments). PTX cvt puts its first source into the upper half.
SPK_DEVICE uint32_t pack_bf16x2(float lo, float hi) {
#if defined(SPARK_KERNEL_EMULATION)
  return spk_emu_pack_bf16x2(lo, hi);
#else
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#endif
}

// Two f32 values as two bf16x2 MMA operand terms, x = hi + lo: hi = bf16(x), lo = bf16(x - hi)
// (~16 significant bits of x in all; `x0` in the low halves). The f32 tensor-core paths multiply
// both terms, so that a product keeps ~2^-17 relative accuracy instead of bf16's 2^-9.
SPK_DEVICE void split_bf16x2(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  hi = pack_bf16x2(x0, x1);
  lo = pack_bf16x2(x0 - bf16lo_to_f32(hi), x1 - bf16hi_to_f32(hi));
}

// The two f16 values of v (low half, high half) as f32 (exact).
SPK_DEVICE void f16x2_to_f32x2(uint32_t v, float& lo, float& hi) {
#if defined(SPARK_KERNEL_EMULATION)
  spk_emu_f16x2_to_f32x2(v, lo, hi);
#else
  asm("{\n.reg .f16 l, h;\nmov.b32 {l, h}, %2;\ncvt.f32.f16 %0, l;\ncvt.f32.f16 %1, h;\n}"
      : "=f"(lo), "=f"(hi)
      : "r"(v));
#endif
}

// Two E2M1 codes, in bits 12-15 and 28-31 of t, as f32 values times 2^-14 (multiply by
// kE2m1ViaF16 to undo), exactly: the sign moves to bit 15 of its half and exponent + mantissa to
// bits 9-11, which makes an f16 of value e2m1 x 2^-14 (code 1, 0.5, an f16 subnormal), and cvt
// widens the pair. Four integer operations and two conversions per pair of codes, against about
// ten operations per code in e2m1_to_f32: on the H200 the NVFP4 decode GEMV is bound by these
// instructions, not by memory (bench/results/2026-12-02-h200-31b-nvfp4.md).
constexpr float kE2m1ViaF16 = 16384.0f;  // 2^14
SPK_DEVICE void e2m1x2_to_f32x2_via_f16(uint32_t t, float& lo, float& hi) {
  f16x2_to_f32x2((t & 0x80008000u) | ((t >> 3) & 0x0e000e00u), lo, hi);
}

// Two e4m3fn bytes, in bits 0-7 and 16-23 of t, as f32 values times 2^-8 (multiply by
// kE4m3ViaF16 to undo), exactly for every code but NaN: sign to bit 15, exponent + mantissa to
// bits 7-13 make an f16 of value e4m3 x 2^-8 (subnormals included). A NaN code (0x7f, 0xff)
// becomes a finite value here: callers check e4m3_has_nan first.
constexpr float kE4m3ViaF16 = 256.0f;  // 2^8
SPK_DEVICE void e4m3x2_to_f32x2_via_f16(uint32_t t, float& lo, float& hi) {
  f16x2_to_f32x2(((t << 7) & 0x3f803f80u) | ((t << 8) & 0x80008000u), lo, hi);
}
// Whether any of the four e4m3fn bytes of v is a NaN code (low 7 bits all ones: adding 1 to
// them sets the byte's top bit, without a carry into the next byte).
SPK_DEVICE bool e4m3_has_nan(uint32_t v) {
  return (((v & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u) != 0u;
}

// ------------------------------------------------------------------------------------------------
// Activations (kernel_abi.h ActivationPrecision): f32, or bf16 storage. spark-compile defines
// `spark_activation_precision` as a constant of every generated module, so act_bf16() folds and
// each kernel carries only its mode's loads and stores. Kernels take activation pointers as
// void* and go through ActIn / ActOut: reads widen to f32, writes round to bf16 (nearest even).
// Workspaces (attention and MoE partials) are plain f32. The kernel bench's nvcc build and
// spark-op-check's CPU emulation define SPARK_ACTIVATION_PRECISION_VARIABLE and their own
// variable.
// ------------------------------------------------------------------------------------------------
#if defined(SPARK_ACTIVATION_PRECISION_VARIABLE)
extern "C" __device__ int spark_activation_precision;
#else
extern "C" __device__ const int spark_activation_precision;
#endif

SPK_DEVICE bool act_bf16() {
  return spark_activation_precision == spark::abi::kActivationBF16;
}
// Bytes of one activation element.
SPK_DEVICE int act_bytes() { return act_bf16() ? 2 : 4; }
SPK_DEVICE unsigned short f32_to_bf16(float v) {
  return static_cast<unsigned short>(pack_bf16x2(v, 0.0f) & 0xffffu);
}
SPK_DEVICE float4 unpack_bf16x4(uint2 v) {
  return make_float4(bf16lo_to_f32(v.x), bf16hi_to_f32(v.x), bf16lo_to_f32(v.y),
                     bf16hi_to_f32(v.y));
}

// A read-only activation buffer. Indices are in elements. ld4 / ldg4 load elements i .. i + 3
// (i % 4 == 0, an aligned4() buffer: 16 bytes for f32, 8 for bf16).
struct ActIn {
  const void* p;
  SPK_MEMBER const float* f32() const { return static_cast<const float*>(p); }
  SPK_MEMBER const unsigned short* bf16() const { return static_cast<const unsigned short*>(p); }
  SPK_MEMBER bool null() const { return p == nullptr; }
  SPK_MEMBER ActIn operator+(int64_t n) const {
    return {static_cast<const char*>(p) + n * act_bytes()};
  }
  SPK_MEMBER float operator[](int64_t i) const {
    return act_bf16() ? bf16_to_f32(bf16()[i]) : f32()[i];
  }
  // Through the non-coherent path (data no thread of the kernel writes).
  SPK_MEMBER float ldg(int64_t i) const {
    return act_bf16() ? bf16_to_f32(__ldg(bf16() + i)) : __ldg(f32() + i);
  }
  SPK_MEMBER float4 ld4(int64_t i) const {
    return act_bf16() ? unpack_bf16x4(*reinterpret_cast<const uint2*>(bf16() + i))
                      : *reinterpret_cast<const float4*>(f32() + i);
  }
  SPK_MEMBER float4 ldg4(int64_t i) const {
    return act_bf16() ? unpack_bf16x4(__ldg(reinterpret_cast<const uint2*>(bf16() + i)))
                      : __ldg(reinterpret_cast<const float4*>(f32() + i));
  }
  // Elements i .. i + 7 into a (first four) and b (last four), non-coherent: one 16-byte load
  // for bf16, two for f32 (16-byte aligned row and i % 8 == 0).
  SPK_MEMBER void ldg8(int64_t i, float4& a, float4& b) const {
    if (act_bf16()) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(bf16() + i));
      a = unpack_bf16x4(make_uint2(v.x, v.y));
      b = unpack_bf16x4(make_uint2(v.z, v.w));
    } else {
      a = __ldg(reinterpret_cast<const float4*>(f32() + i));
      b = __ldg(reinterpret_cast<const float4*>(f32() + i + 4));
    }
  }
  SPK_MEMBER bool aligned4() const { return act_bf16() ? aligned8(p) : aligned16(p); }
};

// A written activation buffer: y[i] = v stores v (rounded to bf16 under bf16 storage);
// reading y[i] gives the stored value back as f32.
struct ActOut {
  void* p;
  struct Element {
    void* p;
    int64_t i;
    SPK_MEMBER void operator=(float v) const {
      if (act_bf16()) {
        static_cast<unsigned short*>(p)[i] = f32_to_bf16(v);
      } else {
        static_cast<float*>(p)[i] = v;
      }
    }
    SPK_MEMBER operator float() const { return ActIn{p}[i]; }
  };
  SPK_MEMBER operator ActIn() const { return {p}; }
  SPK_MEMBER bool null() const { return p == nullptr; }
  SPK_MEMBER ActOut operator+(int64_t n) const { return {static_cast<char*>(p) + n * act_bytes()}; }
  SPK_MEMBER Element operator[](int64_t i) const { return {p, i}; }
  SPK_MEMBER float4 ld4(int64_t i) const { return ActIn{p}.ld4(i); }
  SPK_MEMBER void st4(int64_t i, float4 v) const {
    if (act_bf16()) {
      *reinterpret_cast<uint2*>(static_cast<unsigned short*>(p) + i) =
          make_uint2(pack_bf16x2(v.x, v.y), pack_bf16x2(v.z, v.w));
    } else {
      *reinterpret_cast<float4*>(static_cast<float*>(p) + i) = v;
    }
  }
  SPK_MEMBER bool aligned4() const { return act_bf16() ? aligned8(p) : aligned16(p); }
};

// This thread's share of sum(row[c]^2): elements start, start + stride, ... (with vec: float4
// groups start, start + stride, ... of an aligned4() row, cols % 4 == 0), f32 fused
// multiply-adds in index order. The norms add the shares with block_sum / warp_sum.
SPK_DEVICE float sum_squares(ActIn row, int cols, bool vec, int start, int stride) {
  float ss = 0.0f;
  if (vec) {
    for (int c = start; c < cols / 4; c += stride) {
      const float4 v = row.ld4(4 * c);
      ss = fmaf_(v.x, v.x, ss);
      ss = fmaf_(v.y, v.y, ss);
      ss = fmaf_(v.z, v.z, ss);
      ss = fmaf_(v.w, v.w, ss);
    }
  } else {
    for (int c = start; c < cols; c += stride) ss = fmaf_(row[c], row[c], ss);
  }
  return ss;
}

// D = A * B + C for one warp: m16n8k16, A row-major bf16 (4 regs of bf16x2), B column-major
// bf16 (2 regs), C/D f32 (4 regs). Fragment layout (PTX ISA, "mma.m16n8k16"), with
// g = lane / 4 and q = lane % 4:
//   a0: A[g][2q, 2q+1]    a1: A[g+8][2q, 2q+1]    a2: A[g][2q+8, 2q+9]    a3: A[g+8][2q+8, 2q+9]
//   b0: B[2q, 2q+1][g]    b1: B[2q+8, 2q+9][g]
//   c0, c1: C[g][2q, 2q+1]                        c2, c3: C[g+8][2q, 2q+1]
SPK_DEVICE void mma_bf16_16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#if defined(SPARK_KERNEL_EMULATION)
  spk_emu_mma_bf16_16816(c, a, b0, b1);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Block-scaled FP4 on tensor cores (sm_120a / sm_121a only: SPK_HAS_FP4_MMA; GB10 has no
// tcgen05 / wgmma): D = A * B + C for one warp, m16n8k64, A and B E2M1 codes (eight per register,
// the lower k in the lower nibble), each 16 k-elements of a row of A and of a column of B scaled
// by a ue4m3 byte (`.kind::mxf4nvf4.block_scale.scale_vec::4X`, PTX ISA 8.7+), C / D f32. With
// g = lane / 4, q = lane % 4 (PTX ISA "Matrix Fragments for mma.m16n8k64"; CUTLASS's
// SM120_16x8x64_TN_VS agrees):
//   a[i] nibble j: A[g + 8 (i & 1)][8q + j + 32 (i >> 1)]     b[i] nibble j: B[8q + j + 32 i][g]
//   c[i]: C[g + 8 (i >> 1)][2q + (i & 1)]
//   scale_a (thread-id-a 0: lanes 4g and 4g + 1 give rows g and g + 8; the others are ignored):
//     byte b = the scale of A[row][16b .. 16b + 15]
//   scale_b (thread-id-b 0: lane 4g gives column g): byte b = the scale of B[16b .. 16b + 15][g]
// so with A and B stored row-major (K contiguous, two codes per byte) a[i] is the 32-bit word at
// byte 4q + 16 (i >> 1) of row g + 8 (i & 1)'s 32 bytes of the k-step, and a scale register is a
// row's 4 consecutive scale bytes. The hardware's accumulation order and rounding inside the
// instruction are unspecified (PTX); the CPU emulation sums exactly and rounds once.
#if defined(SPARK_KERNEL_EMULATION) || defined(__CUDA_ARCH_FEAT_SM120_ALL) || \
    defined(__CUDA_ARCH_FEAT_SM121_ALL)
#define SPK_HAS_FP4_MMA 1
SPK_DEVICE void mma_nvfp4_m16n8k64(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1,
                                   uint32_t scale_a, uint32_t scale_b) {
#if defined(SPARK_KERNEL_EMULATION)
  spk_emu_mma_nvfp4_m16n8k64(c, a, b0, b1, scale_a, scale_b);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1."
      "f32.ue4m3 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3}, %10, {0, 0}, "
      "%11, {0, 0};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(scale_a),
        "r"(scale_b));
#endif
}
#else
#define SPK_HAS_FP4_MMA 0
#endif

// The block's dynamic shared memory (16-byte aligned), and how many bytes of it the launch gave
// (%dynamic_smem_size; rt::LaunchSharedBytes says how many a step's launch gets).
#if !defined(SPARK_KERNEL_EMULATION)
// Left undefined in the library: ptxas and the driver make it the launch's dynamic shared memory
// (with spark_activation_precision the library's undefined symbols, kernel-library-*.test).
extern "C" __shared__ __align__(16) unsigned char spark_dynamic_shared[];
#endif
SPK_DEVICE unsigned char* dynamic_shared() {
#if defined(SPARK_KERNEL_EMULATION)
  return spk_emu_dynamic_shared();
#else
  return spark_dynamic_shared;
#endif
}
SPK_DEVICE uint32_t dynamic_shared_bytes() {
#if defined(SPARK_KERNEL_EMULATION)
  return spk_emu_dynamic_shared_bytes();
#else
  uint32_t n;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
  return n;
#endif
}

// How many multiprocessors the GPU has (%nsmid: an upper bound of the SM ids, the SM count on
// every GPU spark targets), for kernels that size their work units to fill the GPU.
SPK_DEVICE int multiprocessor_count() {
#if defined(SPARK_KERNEL_EMULATION)
  return spk_emu_multiprocessor_count();
#else
  uint32_t n;
  asm("mov.u32 %0, %%nsmid;" : "=r"(n));
  return static_cast<int>(n);
#endif
}

#if !defined(SPARK_KERNEL_EMULATION)
// The 32-bit shared-window address of a generic pointer into shared memory.
SPK_DEVICE uint32_t shared_addr(const void* p) {
  uint32_t a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
#endif

// Four 8 x 8 bf16 matrices from shared memory into mma fragments (ldmatrix .x4): lane l gives the
// 16-byte-aligned address of row l % 8 of matrix l / 8; d[m] receives matrix m's elements
// (row lane / 4, columns 2 (lane % 4) and 2 (lane % 4) + 1), the layout of an mma operand
// register. Warp-collective: all 32 lanes take part.
SPK_DEVICE void ldmatrix_x4(uint32_t d[4], const void* row) {
#if defined(SPARK_KERNEL_EMULATION)
  spk_emu_ldmatrix_x4(d, row);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(shared_addr(row))
               : "memory");
#endif
}

// ldmatrix .x4 .trans: as ldmatrix_x4, each matrix transposed on the way: d[m] receives matrix
// m's elements (rows 2 (lane % 4) and 2 (lane % 4) + 1, column lane / 4), the layout of an mma B
// operand register when the stored rows are its k index (keys of a V tile stored key-major).
SPK_DEVICE void ldmatrix_x4_trans(uint32_t d[4], const void* row) {
#if defined(SPARK_KERNEL_EMULATION)
  spk_emu_ldmatrix_x4_trans(d, row);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(shared_addr(row))
               : "memory");
#endif
}

// Asynchronous 16-byte copy global -> shared (cp.async.cg: cached in L2 only). The copies a thread
// issued are complete and visible to itself after cp_async_wait_all(), to the block after a
// barrier that follows it. Both addresses 16-byte aligned.
#if !defined(SPARK_KERNEL_EMULATION)
// The global-window address of a generic pointer into global memory.
SPK_DEVICE uint64_t global_addr(const void* p) {
  uint64_t a;
  asm("cvta.to.global.u64 %0, %1;" : "=l"(a) : "l"(p));
  return a;
}
#endif
SPK_DEVICE void cp_async16(void* shared_dst, const void* global_src) {
#if defined(SPARK_KERNEL_EMULATION)
  spk_emu_cp_async16(shared_dst, global_src);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(shared_addr(shared_dst)),
               "l"(global_addr(global_src))
               : "memory");
#endif
}
// Asynchronous 4-byte copy global -> shared (cp.async.ca), as cp_async16; both addresses 4-byte
// aligned.
SPK_DEVICE void cp_async4(void* shared_dst, const void* global_src) {
#if defined(SPARK_KERNEL_EMULATION)
  spk_emu_cp_async4(shared_dst, global_src);
#else
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(shared_addr(shared_dst)),
               "l"(global_addr(global_src))
               : "memory");
#endif
}
SPK_DEVICE void cp_async_commit() {
#if defined(SPARK_KERNEL_EMULATION)
  spk_emu_cp_async_commit();
#else
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
SPK_DEVICE void cp_async_wait_all() {
#if defined(SPARK_KERNEL_EMULATION)
  spk_emu_cp_async_wait(0);
#else
  asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
}
// Waits until at most `kPending` of this thread's most recent groups are still in flight (the
// older ones are complete and visible to itself).
template <int kPending>
SPK_DEVICE void cp_async_wait_pending() {
#if defined(SPARK_KERNEL_EMULATION)
  spk_emu_cp_async_wait(kPending);
#else
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
#endif
}

// ------------------------------------------------------------------------------------------------
// Reductions. Block reductions need blockDim.x to be a multiple of 32 (every ABI block size is),
// use a 32-entry shared scratch, give every thread the result, and end with a barrier so the
// scratch can be reused at once. All threads of the block must call them.
// ------------------------------------------------------------------------------------------------
SPK_DEVICE float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
SPK_DEVICE float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf_(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
SPK_DEVICE float block_sum(float v, float* scratch32) {
  v = warp_sum(v);
  const int lane = lane_id(), warp = warp_id(), nw = num_warps();
  if (lane == 0) scratch32[warp] = v;
  __syncthreads();
  float r = lane < nw ? scratch32[lane] : 0.0f;
  r = warp_sum(r);
  __syncthreads();
  return r;
}
SPK_DEVICE float block_max(float v, float* scratch32) {
  v = warp_max(v);
  const int lane = lane_id(), warp = warp_id(), nw = num_warps();
  if (lane == 0) scratch32[warp] = v;
  __syncthreads();
  float r = lane < nw ? scratch32[lane] : -inff_();
  r = warp_max(r);
  __syncthreads();
  return r;
}

}  // namespace spk

#endif  // SPARK_KERNELS_COMMON_CUH_
