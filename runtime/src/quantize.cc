#include "spark/runtime/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "spark/runtime/host_kernels.h"
#include "spark/runtime/kernel_abi.h"
#include "spark/runtime/quantized_weights.h"

namespace spark {
namespace quant {
namespace {

// The smallest block scale (the smallest e4m3 subnormal, 2^-9): ModelOpt clamps to it before the
// cast, so that a block far below the tensor's amax keeps its codes.
constexpr float kMinBlockScale = 0.001953125f;

// The largest |w| of n bf16 values, as f32 (exact: a bf16 value is an f32 value).
float AbsMax(const uint16_t* bf16, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(rt::Bf16ToF32(bf16[i])));
  return amax;
}

// Runs body(begin, end) over [0, n) split into `threads` contiguous ranges, on as many threads.
template <class Body>
void ParallelFor(int64_t n, int threads, const Body& body) {
  threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, n)));
  if (threads == 1) {
    body(int64_t{0}, n);
    return;
  }
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back(body, n * t / threads, n * (t + 1) / threads);
  }
  for (std::thread& worker : workers) worker.join();
}

// AbsMax over n values on `threads` threads (max is exact: the order does not matter).
float ParallelAbsMax(const uint16_t* bf16, int64_t n, int threads) {
  const int parts = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, n)));
  std::vector<float> partial(static_cast<size_t>(parts), 0.0f);
  ParallelFor(parts, parts, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      partial[p] = AbsMax(bf16 + n * p / parts, n * (p + 1) / parts - n * p / parts);
    }
  });
  return *std::max_element(partial.begin(), partial.end());
}

}  // namespace

uint8_t E4M3FromFloat(float value) {
  if (std::isnan(value)) return 0x7f;
  const uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(value));
  constexpr double kMinNormal = 0.015625;  // 2^-6
  if (a < kMinNormal) {
    // Subnormals step by 2^-9; nearbyint rounds half to even (the default rounding mode). 8
    // steps are 2^-6, the smallest normal (0x08), which the code below also spells 1 << 3.
    return static_cast<uint8_t>(sign | static_cast<int>(std::nearbyint(a * 512.0)));
  }
  int exponent;
  const double fraction = std::frexp(a, &exponent);  // a = fraction x 2^exponent, [0.5, 1)
  int biased = exponent - 1 + 7;                       // a = (2 fraction) x 2^(exponent - 1)
  int mantissa = static_cast<int>(std::nearbyint((2.0 * fraction - 1.0) * 8.0));
  if (mantissa == 8) {
    mantissa = 0;
    ++biased;
  }
  if (biased > 15 || (biased == 15 && mantissa == 7)) return sign | 0x7e;  // saturate at 448
  return static_cast<uint8_t>(sign | (biased << 3) | mantissa);
}

uint8_t E2M1MagnitudeCode(float magnitude) {
  // ModelOpt's cast: the number of bounds below the value, plus one at the bounds whose upper
  // neighbour has the even code (0.75 -> 1.0, 1.75 -> 2.0, 3.5 -> 4.0).
  static constexpr float kBounds[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  uint8_t code = 0;
  for (const float bound : kBounds) code += magnitude > bound ? 1 : 0;
  if (magnitude == 0.75f || magnitude == 1.75f || magnitude == 3.5f) ++code;
  return code;
}

namespace {

// One NVFP4 block of 16 values (f32; bf16 weights are widened exactly) under `tensor_scale`
// (divisor = 6 x tensor_scale, rounded to f32 once by the caller): its e4m3 block scale, and its
// codes ORed into `codes` (a row's packed codes; the block's elements start at `first`, even).
uint8_t QuantizeNvfp4Block(const float* block, float tensor_scale, float divisor, int64_t first,
                           uint8_t* codes) {
  float amax = 0.0f;
  for (int i = 0; i < kNvfp4BlockSize; ++i) amax = std::max(amax, std::fabs(block[i]));
  float block_scale = amax / divisor;
  if (block_scale == 0.0f) block_scale = 1.0f;
  block_scale = std::max(block_scale, kMinBlockScale);  // never rounds to 0
  const uint8_t scale = E4M3FromFloat(block_scale);
  const float den = E4M3Value(scale) * tensor_scale;
  for (int i = 0; i < kNvfp4BlockSize; ++i) {
    const float w = block[i];
    const uint8_t code = E2M1MagnitudeCode(std::fabs(w / den)) | (w < 0.0f ? 8 : 0);
    const int64_t element = first + i;
    codes[element / 2] = static_cast<uint8_t>(codes[element / 2] | (code << ((element & 1) * 4)));
  }
  return scale;
}

}  // namespace

Nvfp4Weight QuantizeNvfp4(const uint16_t* bf16, int64_t rows, int64_t cols, int threads) {
  Nvfp4Weight out;
  const int64_t blocks = cols / kNvfp4BlockSize;
  out.codes.assign(static_cast<size_t>(rows * cols / 2), '\0');
  out.block_scales.assign(static_cast<size_t>(rows * blocks), '\0');
  const float amax = ParallelAbsMax(bf16, rows * cols, threads);
  out.tensor_scale = amax == 0.0f ? 1.0f : amax / (kE2M1Max * kE4M3Max);
  const float divisor = kE2M1Max * out.tensor_scale;  // 6 x tensor_scale, rounded to f32
  ParallelFor(rows, threads, [&](int64_t row_begin, int64_t row_end) {
    float block[kNvfp4BlockSize];
    for (int64_t r = row_begin; r < row_end; ++r) {
      uint8_t* codes = reinterpret_cast<uint8_t*>(&out.codes[r * (cols / 2)]);
      for (int64_t b = 0; b < blocks; ++b) {
        for (int i = 0; i < kNvfp4BlockSize; ++i) {
          block[i] = rt::Bf16ToF32(bf16[r * cols + b * kNvfp4BlockSize + i]);
        }
        out.block_scales[r * blocks + b] = static_cast<char>(
            QuantizeNvfp4Block(block, out.tensor_scale, divisor, b * kNvfp4BlockSize, codes));
      }
    }
  });
  return out;
}

void QuantizeNvfp4Row(const float* x, int64_t cols, uint8_t* row) {
  std::fill(row, row + abi::Nvfp4RowBytes(cols), uint8_t{0});
  float amax = 0.0f;
  for (int64_t i = 0; i < cols; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float global = amax == 0.0f ? 1.0f : amax / (kE2M1Max * kE4M3Max);
  std::memcpy(row, &global, sizeof(global));
  const float divisor = kE2M1Max * global;
  uint8_t* codes = row + abi::kNvfp4RowCodesOffset;
  uint8_t* scales = row + abi::Nvfp4RowScalesOffset(cols);
  for (int64_t b = 0; b < cols / kNvfp4BlockSize; ++b) {
    scales[b] = QuantizeNvfp4Block(x + b * kNvfp4BlockSize, global, divisor, b * kNvfp4BlockSize,
                                   codes);
  }
}

Fp8Weight QuantizeFp8(const uint16_t* bf16, int64_t count, int threads) {
  Fp8Weight out;
  const float amax = ParallelAbsMax(bf16, count, threads);
  out.scale = amax == 0.0f ? 1.0f : amax / kE4M3Max;
  out.elements.resize(static_cast<size_t>(count));
  ParallelFor(count, threads, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      out.elements[i] = static_cast<char>(E4M3FromFloat(rt::Bf16ToF32(bf16[i]) / out.scale));
    }
  });
  return out;
}

}  // namespace quant
}  // namespace spark
