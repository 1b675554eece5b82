// Quantising bf16 weights into NVIDIA ModelOpt's NVFP4 and FP8 layouts, with ModelOpt's rounding
// (NVIDIA/Model-Optimizer 211c6b34, modelopt/torch/quantization/qtensor/nvfp4_tensor.py and
// fp8_tensor.py, the dynamic weight path): what spark-quantize writes. quantized_weights.h
// decodes the results.
//
// NVFP4, per weight [rows, cols] (cols % 16 == 0), all arithmetic in f32:
//   tensor_scale = amax(|w|) / (6 * 448)       (1 when amax is 0, where ModelOpt's would be 0:
//                                               both dequantise the tensor to zeros)
//   block_scale  = e4m3(max(amax(|w| over 16 inputs) / (6 * tensor_scale), 2^-9)), with a
//                  block amax of 0 giving 1 before the clamp
//   code         = the nearest E2M1 value of w / (e4m3 value x tensor_scale), ties to the even
//                  code, |x| > 6 -> 6, sign bit when w < 0; packed two to a byte (element 2j in
//                  the low nibble).
// FP8, per tensor: scale = amax(|w|) / 448 (1 when amax is 0, as ModelOpt's export gives),
// q = e4m3(w / scale).
// e4m3: round to nearest, ties to even; magnitudes above 448 saturate to 448 (ModelOpt never
// produces them); the sign is kept (-0 and negatives that round to 0 give 0x80, as torch's
// cast does).
#ifndef SPARK_RUNTIME_QUANTIZE_H_
#define SPARK_RUNTIME_QUANTIZE_H_

#include <cstdint>
#include <string>

namespace spark {
namespace quant {

// The e4m3fn byte nearest to `value` (NaN -> 0x7f).
uint8_t E4M3FromFloat(float value);

// The E2M1 magnitude code (0..7) nearest to `magnitude` >= 0, ties to the even code.
uint8_t E2M1MagnitudeCode(float magnitude);

struct Nvfp4Weight {
  std::string codes;         // [rows, cols / 2] bytes
  std::string block_scales;  // [rows, cols / 16] e4m3 bytes
  float tensor_scale = 1.0f;
};
// `bf16` holds rows x cols bfloat16 bit patterns; cols % 16 == 0 (the caller's to check). The
// work is split over `threads` threads (the result does not depend on it).
Nvfp4Weight QuantizeNvfp4(const uint16_t* bf16, int64_t rows, int64_t cols, int threads = 1);

struct Fp8Weight {
  std::string elements;  // count e4m3 bytes
  float scale = 1.0f;
};
// One row of `cols` activations (cols % 64 == 0) as NVFP4 with its own global scale (W4A4,
// quantize_nvfp4_rows): the NVFP4 rules above with the row as the tensor (global scale amax /
// (6 * 448), 1 for a row of zeros), written to `row` in kernel_abi.h's packed row layout
// (Nvfp4RowBytes(cols) bytes, padding zeroed).
void QuantizeNvfp4Row(const float* x, int64_t cols, uint8_t* row);

Fp8Weight QuantizeFp8(const uint16_t* bf16, int64_t count, int threads = 1);

}  // namespace quant
}  // namespace spark

#endif  // SPARK_RUNTIME_QUANTIZE_H_
