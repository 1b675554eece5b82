// The values of quantized weight elements, for the host reference, the runtime's checks and the
// tools (plain C++17, host and device: SPARK_ABI_HD). The kernels decode with the faster forms
// of kernels/common.cuh (e2m1_to_f32, e4m3_to_f32), which the kernel checks compare with these.
//
// ModelOpt's layouts (NVIDIA TensorRT-Model-Optimizer, modelopt/torch/quantization/qtensor):
//   - NVFP4: a weight [out, in] is stored as E2M1 codes two to a byte, element 2j in the low
//     nibble ([out, in / 2] bytes), one float8 e4m3fn block scale per 16 inputs of a row
//     ([out, in / 16]) and one f32 tensor scale; w = e2m1(code) * (e4m3(block) * tensor_scale).
//   - FP8: float8 e4m3fn elements [out, in] and an f32 scale per tensor or per output row;
//     w = e4m3(q) * scale.
// E2M1: 1 sign bit (8), 2 exponent bits, 1 mantissa bit; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6.
// E4M3FN: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits, subnormals of step 2^-9, largest
// finite 448 (0x7e); 0x7f / 0xff are NaN and there are no infinities.
#ifndef SPARK_RUNTIME_QUANTIZED_WEIGHTS_H_
#define SPARK_RUNTIME_QUANTIZED_WEIGHTS_H_

#include "spark/runtime/kernel_abi.h"

namespace spark {
namespace quant {

// Inputs per NVFP4 block scale.
inline constexpr int kNvfp4BlockSize = 16;
// Largest magnitudes of the two element types.
inline constexpr float kE2M1Max = 6.0f;
inline constexpr float kE4M3Max = 448.0f;

// The value of an E2M1 code (its low 4 bits).
SPARK_ABI_HD inline float E2M1Value(unsigned code) {
  const unsigned m = code & 7u;
  // Magnitudes 0, 0.5, 1, 1.5 (codes 0-3) are m / 2; 2, 3, 4, 6 (codes 4-7) are
  // (2 + (m & 1)) << ((m >> 1) - 2). Written without a table, for device code.
  const float magnitude = m < 4u ? 0.5f * static_cast<float>(m)
                                 : static_cast<float>((2u + (m & 1u)) << ((m >> 1) - 2u));
  return (code & 8u) != 0 ? -magnitude : magnitude;
}

// True for the two NaN encodings of e4m3fn.
SPARK_ABI_HD constexpr bool E4M3IsNaN(unsigned char bits) { return (bits & 0x7fu) == 0x7fu; }

// The value of an e4m3fn byte (NaN for 0x7f / 0xff).
SPARK_ABI_HD inline float E4M3Value(unsigned char bits) {
  const unsigned exponent = (bits >> 3) & 15u, mantissa = bits & 7u;
  float magnitude;
  if (E4M3IsNaN(bits)) {
    magnitude = __builtin_nanf("");
  } else if (exponent == 0) {
    magnitude = static_cast<float>(mantissa) * 0.001953125f;  // m x 2^-9
  } else {
    // (8 + m) x 2^(e - 10), exactly: a power of two times a small integer.
    const int shift = static_cast<int>(exponent) - 10;
    const float integer = static_cast<float>(8u + mantissa);
    magnitude = shift >= 0 ? integer * static_cast<float>(1u << shift)
                           : integer / static_cast<float>(1u << -shift);
  }
  return (bits & 0x80u) != 0 ? -magnitude : magnitude;
}

// The E2M1 code of element i of a packed row (two codes per byte, element 2j in the low nibble).
SPARK_ABI_HD inline unsigned PackedE2M1Code(const unsigned char* row, long long i) {
  const unsigned byte = row[i >> 1];
  return (i & 1) != 0 ? byte >> 4 : byte & 15u;
}

}  // namespace quant
}  // namespace spark

#endif  // SPARK_RUNTIME_QUANTIZED_WEIGHTS_H_
