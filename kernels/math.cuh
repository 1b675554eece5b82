// Math functions of the Spark kernel library, written so that they need no libdevice.
//
// The library is compiled by clang-22 to NVPTX bitcode with `-nocudalib`: no libdevice is linked,
// so nothing here may call a CUDA math function that clang's CUDA headers implement with a
// `__nv_*` libdevice call (expf, tanhf, powf, sinf, fmaf, sqrtf, __expf, __uint_as_float, ...).
// The device versions use clang builtins that NVPTX lowers to single instructions (fma.rn,
// sqrt.rn, div.rn, cvt.rni, max), or inline PTX (`ex2.approx.f32`). The same code compiles with
// nvcc (the GPU check harness) through the SPK_* primitives, which have the same IEEE semantics
// there, and as plain host C++ (test/gpu/math_accuracy_check.cc measures the accuracy below
// against long double; on the host 2^x comes from exp2f instead of ex2.approx).
//
// Accuracy:
//   spk_exp2f   ex2.approx.f32 (PTX ISA: max relative error ~2^-22 over the full range)
//   spk_expf    ~2^-22 relative: the argument x*log2(e) is carried in two floats, so there is
//               no |x| * 2^-24 argument-rounding error
//   spk_tanhf   odd Taylor polynomial to x^19 below |x| = 0.55 (truncation < 3e-9 relative),
//               1 - 2/(e^{2|x|} + 1) above; a few 1e-7 absolute
//   spk_rsqrtf  1 / sqrt.rn(x) with div.rn: <= 1.5 ulp (what pow(x, -0.5) gives, within 1 ulp)
//   spk_sincos  sin/cos of an f32 angle |a| < 2^24: Cody-Waite reduction by pi/2 in double,
//               float polynomials (musl __sindf/__cosdf) on |r| <= pi/4: ~1 ulp
//   spk_pow_rope theta^e via double log/exp: the correctly rounded float except near ties
#ifndef SPARK_KERNELS_MATH_CUH_
#define SPARK_KERNELS_MATH_CUH_

#include <stdint.h>

#include <cmath>    // host versions of the primitives only
#include <cstring>

#if defined(__CUDACC__)
#define SPK_HD static __host__ __device__ __forceinline__
#else
#define SPK_HD static inline
#endif

#if defined(__clang__) && defined(__CUDA__) && defined(__CUDA_ARCH__)
#define SPK_CLANG_DEVICE 1
#else
#define SPK_CLANG_DEVICE 0
#endif
#if defined(__CUDA_ARCH__)
#define SPK_ON_DEVICE 1
#define SPK_UNROLL _Pragma("unroll")
#else
#define SPK_ON_DEVICE 0
#define SPK_UNROLL
#endif

namespace spk {

// ------------------------------------------------------------------------------------------------
// Primitives spelled differently by clang device code (builtins, no libdevice), nvcc device code
// (intrinsics) and host code.
// ------------------------------------------------------------------------------------------------
SPK_HD float u32_as_f32(uint32_t u) {
#if SPK_CLANG_DEVICE
  return __builtin_bit_cast(float, u);
#elif SPK_ON_DEVICE
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
SPK_HD uint32_t f32_as_u32(float f) {
#if SPK_CLANG_DEVICE
  return __builtin_bit_cast(uint32_t, f);
#elif SPK_ON_DEVICE
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
SPK_HD int64_t f64_as_i64(double d) {
#if SPK_CLANG_DEVICE
  return __builtin_bit_cast(int64_t, d);
#elif SPK_ON_DEVICE
  return __double_as_longlong(d);
#else
  int64_t i;
  std::memcpy(&i, &d, 8);
  return i;
#endif
}
SPK_HD double i64_as_f64(int64_t i) {
#if SPK_CLANG_DEVICE
  return __builtin_bit_cast(double, i);
#elif SPK_ON_DEVICE
  return __longlong_as_double(i);
#else
  double d;
  std::memcpy(&d, &i, 8);
  return d;
#endif
}
SPK_HD float fmaf_(float a, float b, float c) {
#if SPK_CLANG_DEVICE
  return __builtin_fmaf(a, b, c);
#elif SPK_ON_DEVICE
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
SPK_HD double fma_(double a, double b, double c) {
#if SPK_CLANG_DEVICE
  return __builtin_fma(a, b, c);
#elif SPK_ON_DEVICE
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
SPK_HD float sqrtf_(float x) {
#if SPK_CLANG_DEVICE
  return __builtin_sqrtf(x);
#elif SPK_ON_DEVICE
  return __fsqrt_rn(x);
#else
  return std::sqrt(x);
#endif
}
SPK_HD double sqrt_(double x) {
#if SPK_CLANG_DEVICE
  return __builtin_sqrt(x);
#elif SPK_ON_DEVICE
  return __dsqrt_rn(x);
#else
  return std::sqrt(x);
#endif
}
SPK_HD float fabsf_(float x) {
#if SPK_CLANG_DEVICE
  return __builtin_fabsf(x);
#elif SPK_ON_DEVICE
  return fabsf(x);
#else
  return std::fabs(x);
#endif
}
SPK_HD float fmaxf_(float a, float b) {
#if SPK_CLANG_DEVICE
  return __builtin_fmaxf(a, b);
#elif SPK_ON_DEVICE
  return fmaxf(a, b);
#else
  return std::fmax(a, b);
#endif
}
SPK_HD double rint_(double x) {
#if SPK_CLANG_DEVICE
  return __builtin_rint(x);
#elif SPK_ON_DEVICE
  return rint(x);
#else
  return std::rint(x);
#endif
}
// The high 64 bits of the 128-bit product a * b.
SPK_HD unsigned long long mulhi_u64(unsigned long long a, unsigned long long b) {
#if SPK_CLANG_DEVICE
  unsigned long long r;
  asm("mul.hi.u64 %0, %1, %2;" : "=l"(r) : "l"(a), "l"(b));
  return r;
#elif SPK_ON_DEVICE
  return __umul64hi(a, b);
#else
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}
SPK_HD float inff_() { return u32_as_f32(0x7f800000u); }
SPK_HD float nanf_() { return u32_as_f32(0x7fc00000u); }

// bf16 bits -> f32 (exact).
SPK_HD float bf16_to_f32(unsigned short b) { return u32_as_f32(static_cast<uint32_t>(b) << 16); }
SPK_HD float bf16lo_to_f32(uint32_t w) { return u32_as_f32(w << 16); }
SPK_HD float bf16hi_to_f32(uint32_t w) { return u32_as_f32(w & 0xffff0000u); }

// ------------------------------------------------------------------------------------------------
// Single precision.
// ------------------------------------------------------------------------------------------------
SPK_HD float spk_exp2f(float x) {
#if SPK_ON_DEVICE && !defined(SPARK_KERNEL_EMULATION)
  float r;
  asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return std::exp2(x);
#endif
}

// e^x. x*log2(e) = hi + lo exactly up to ~2^-48 relative (fma recovers the rounding error of the
// product), and 2^(hi+lo) = 2^hi * (1 + lo*ln2) since |lo| < 2^-17.
SPK_HD float spk_expf(float x) {
  const float kLog2e = 1.44269502162933349609375f;     // float(log2(e))
  const float kLog2eLo = 1.925963033500011079e-08f;    // log2(e) - kLog2e
  const float hi = x * kLog2e;
  if (!(fabsf_(hi) < 126.0f)) return spk_exp2f(hi);    // overflow/underflow/inf/nan
  const float lo = fmaf_(x, kLog2e, -hi) + x * kLog2eLo;
  const float r = spk_exp2f(hi);
  return fmaf_(r, lo * 0.693147180559945309f, r);
}

// tanh(x).
SPK_HD float spk_tanhf(float x) {
  const float ax = fabsf_(x);
  if (ax < 0.55f) {
    // tanh x = x + x z P(z), z = x^2, P = Taylor coefficients x^3 .. x^19.
    const float z = x * x;
    float p = -2.391291142e-04f;
    p = fmaf_(p, z, 5.900274409e-04f);
    p = fmaf_(p, z, -1.455834387e-03f);
    p = fmaf_(p, z, 3.592128037e-03f);
    p = fmaf_(p, z, -8.863235530e-03f);
    p = fmaf_(p, z, 2.186948854e-02f);
    p = fmaf_(p, z, -5.396825397e-02f);
    p = fmaf_(p, z, 1.333333333e-01f);
    p = fmaf_(p, z, -3.333333333e-01f);
    return fmaf_(x * z, p, x);
  }
  if (!(ax == ax)) return x;  // NaN
  const float e = spk_expf(2.0f * ax);  // inf for large |x|: t = 1
  const float t = 1.0f - 2.0f / (e + 1.0f);
  return x < 0.0f ? -t : t;
}

// gelu with the tanh approximation (torch's gelu(approximate="tanh")).
SPK_HD float spk_gelu(float x) {
  const float kBeta = 0.7978845608028654f;  // sqrt(2/pi)
  const float kKappa = 0.044715f;
  const float inner = kBeta * (x + kKappa * x * x * x);
  return 0.5f * x * (1.0f + spk_tanhf(inner));
}

// (x)^-0.5 with correctly rounded sqrt and division.
SPK_HD float spk_rsqrtf(float x) { return 1.0f / sqrtf_(x); }

// ------------------------------------------------------------------------------------------------
// RoPE helpers (double where it buys exactness; a few dozen operations per frequency/angle).
// ------------------------------------------------------------------------------------------------

// ln(x) for finite x > 0: x = 2^k m, m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s),
// s = (m-1)/(m+1), |s| < 0.1716, series to s^29 (truncation < 1e-24).
SPK_HD double spk_log_d(double x) {
  int64_t bits = f64_as_i64(x);
  int k = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
  bits = (bits & 0x000fffffffffffffLL) | 0x3ff0000000000000LL;
  double m = i64_as_f64(bits);
  if (m > 1.4142135623730951) {
    m *= 0.5;
    k += 1;
  }
  const double s = (m - 1.0) / (m + 1.0);
  const double z = s * s;
  double p = 1.0 / 29.0;
SPK_UNROLL
  for (int n = 27; n >= 1; n -= 2) p = fma_(p, z, 1.0 / n);
  const double kLn2Hi = 6.93147180369123816490e-01;
  const double kLn2Lo = 1.90821492927058770002e-10;
  const double kd = static_cast<double>(k);
  return fma_(kd, kLn2Hi, fma_(kd, kLn2Lo, 2.0 * s * p));
}

// e^y for |y| < 700: y = k ln2 + r, |r| <= ln2/2, Taylor to r^17 (truncation < 1e-20).
SPK_HD double spk_exp_d(double y) {
  const double kInvLn2 = 1.44269504088896338700e+00;
  const double kLn2Hi = 6.93147180369123816490e-01;
  const double kLn2Lo = 1.90821492927058770002e-10;
  const double k = rint_(y * kInvLn2);
  const double r = fma_(-k, kLn2Lo, fma_(-k, kLn2Hi, y));
  // 1/n! for n = 17 .. 0
  const double kInvFact[18] = {
      1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320,
      1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600, 1.0 / 6227020800.0,
      1.0 / 87178291200.0, 1.0 / 1307674368000.0, 1.0 / 20922789888000.0,
      1.0 / 355687428096000.0};
  double p = kInvFact[17];
SPK_UNROLL
  for (int n = 16; n >= 0; --n) p = fma_(p, r, kInvFact[n]);
  const int64_t ki = static_cast<int64_t>(k);
  return p * i64_as_f64((ki + 1023) << 52);
}

// float(theta^e), theta > 0, |e ln theta| < 700: the correctly rounded powf except near ties.
SPK_HD float spk_pow_rope(float theta, float e) {
  return static_cast<float>(spk_exp_d(static_cast<double>(e) * spk_log_d(static_cast<double>(theta))));
}

// sin and cos of an f32 angle, |a| < 2^24.
SPK_HD void spk_sincos(float a, float* s_out, float* c_out) {
  const double kTwoOverPi = 6.36619772367581382433e-01;
  const double kPio2Hi = 1.57079632673412561417e+00;  // first 33 bits of pi/2
  const double kPio2Lo = 6.07710050650619224932e-11;  // pi/2 - kPio2Hi
  const double ad = static_cast<double>(a);
  const double kd = rint_(ad * kTwoOverPi);
  const double rd = fma_(-kd, kPio2Lo, fma_(-kd, kPio2Hi, ad));
  const int q = static_cast<int>(static_cast<int64_t>(kd) & 3);
  // Polynomials in double on the double remainder (cheap: 8 fma), rounded once at the end.
  const double z = rd * rd;
  double ps = 2.7183114939898219064e-06;  // musl __sindf
  ps = fma_(ps, z, -1.9839334836096632e-04);
  ps = fma_(ps, z, 8.3333293858894631756e-03);
  ps = fma_(ps, z, -1.66666666416265235595e-01);
  const double sr = fma_(rd * z, ps, rd);
  double pc = 2.43904487962774090654e-05;  // musl __cosdf
  pc = fma_(pc, z, -1.38867637746099294692e-03);
  pc = fma_(pc, z, 4.16666233237390631894e-02);
  pc = fma_(pc, z, -4.99999997251031003120e-01);
  const double cr = fma_(z, pc, 1.0);
  double s, c;
  switch (q) {
    case 0: s = sr; c = cr; break;
    case 1: s = cr; c = -sr; break;
    case 2: s = -sr; c = -cr; break;
    default: s = -cr; c = sr; break;
  }
  *s_out = static_cast<float>(s);
  *c_out = static_cast<float>(c);
}

}  // namespace spk

#endif  // SPARK_KERNELS_MATH_CUH_
