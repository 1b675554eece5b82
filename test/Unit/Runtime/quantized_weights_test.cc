// The quantized weight formats (quantized_weights.h: the values of E2M1 codes and e4m3 bytes),
// ModelOpt's rounding as spark-quantize implements it (quantize.h), and the host reference of
// the quantized linears against an independent dequantise-then-multiply.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "spark/runtime/kernel_abi.h"
#include "spark/runtime/host_kernel_dispatch.h"
#include "spark/runtime/host_kernels.h"
#include "spark/runtime/quantize.h"
#include "spark/runtime/quantized_weights.h"

namespace spark {
namespace {

using quant::E2M1MagnitudeCode;
using quant::E2M1Value;
using quant::E4M3FromFloat;
using quant::E4M3Value;

TEST(QuantizedWeightsTest, E2M1CodesHaveTheFormatsValues) {
  const float expected[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (unsigned code = 0; code < 16; ++code) {
    EXPECT_EQ(E2M1Value(code), expected[code]) << code;
    EXPECT_EQ(std::signbit(E2M1Value(code)), code >= 8) << code;
  }
  // Element 2j is the low nibble of byte j.
  const unsigned char row[2] = {0x21, 0xf7};
  EXPECT_EQ(quant::PackedE2M1Code(row, 0), 1u);
  EXPECT_EQ(quant::PackedE2M1Code(row, 1), 2u);
  EXPECT_EQ(quant::PackedE2M1Code(row, 2), 7u);
  EXPECT_EQ(quant::PackedE2M1Code(row, 3), 15u);
}

TEST(QuantizedWeightsTest, E4M3BytesHaveTheFormatsValues) {
  EXPECT_EQ(E4M3Value(0x00), 0.0f);
  EXPECT_EQ(E4M3Value(0x01), 0.001953125f);  // 2^-9, the smallest subnormal
  EXPECT_EQ(E4M3Value(0x07), 7 * 0.001953125f);
  EXPECT_EQ(E4M3Value(0x08), 0.015625f);      // 2^-6, the smallest normal
  EXPECT_EQ(E4M3Value(0x38), 1.0f);
  EXPECT_EQ(E4M3Value(0x3c), 1.5f);
  EXPECT_EQ(E4M3Value(0x7e), 448.0f);
  EXPECT_EQ(E4M3Value(0xb8), -1.0f);
  EXPECT_TRUE(std::isnan(E4M3Value(0x7f)));
  EXPECT_TRUE(std::isnan(E4M3Value(0xff)));
  EXPECT_TRUE(quant::E4M3IsNaN(0x7f) && quant::E4M3IsNaN(0xff) && !quant::E4M3IsNaN(0x7e));
  // Every normal byte is (1 + m/8) 2^(e-7).
  for (int bits = 0x08; bits < 0x7f; ++bits) {
    const int e = bits >> 3, m = bits & 7;
    EXPECT_EQ(E4M3Value(static_cast<unsigned char>(bits)), std::ldexp(1.0 + m / 8.0, e - 7)) << bits;
  }
}

TEST(QuantizeTest, E4M3RoundsToNearestEvenAndSaturates) {
  for (int bits = 0; bits < 256; ++bits) {
    if (quant::E4M3IsNaN(static_cast<unsigned char>(bits))) continue;
    EXPECT_EQ(E4M3FromFloat(E4M3Value(static_cast<unsigned char>(bits))), bits) << bits;
  }
  EXPECT_EQ(E4M3FromFloat(1.0625f), 0x38);       // halfway between 1 and 1.125: even (1)
  EXPECT_EQ(E4M3FromFloat(1.1875f), 0x3a);       // halfway between 1.125 and 1.25: even (1.25)
  EXPECT_EQ(E4M3FromFloat(0.0009765625f), 0x00); // 2^-10, halfway to the smallest subnormal
  EXPECT_EQ(E4M3FromFloat(0.0029296875f), 0x02); // 1.5 x 2^-9: even (2 x 2^-9)
  EXPECT_EQ(E4M3FromFloat(500.0f), 0x7e);        // saturates at 448
  EXPECT_EQ(E4M3FromFloat(-1e9f), 0xfe);
  EXPECT_EQ(E4M3FromFloat(-0.0f), 0x80);         // the sign is kept, as torch's cast keeps it
  EXPECT_EQ(E4M3FromFloat(-1e-6f), 0x80);
  EXPECT_EQ(E4M3FromFloat(std::numeric_limits<float>::quiet_NaN()), 0x7f);
}

TEST(QuantizeTest, E2M1TiesGoToTheEvenCode) {
  EXPECT_EQ(E2M1MagnitudeCode(0.0f), 0);
  EXPECT_EQ(E2M1MagnitudeCode(0.25f), 0);
  EXPECT_EQ(E2M1MagnitudeCode(0.26f), 1);
  EXPECT_EQ(E2M1MagnitudeCode(0.75f), 2);
  EXPECT_EQ(E2M1MagnitudeCode(1.25f), 2);
  EXPECT_EQ(E2M1MagnitudeCode(1.75f), 4);
  EXPECT_EQ(E2M1MagnitudeCode(2.5f), 4);
  EXPECT_EQ(E2M1MagnitudeCode(3.5f), 6);
  EXPECT_EQ(E2M1MagnitudeCode(5.0f), 6);
  EXPECT_EQ(E2M1MagnitudeCode(5.01f), 7);
  EXPECT_EQ(E2M1MagnitudeCode(100.0f), 7);
}

std::vector<uint16_t> Bf16(const std::vector<float>& values) {
  std::vector<uint16_t> out;
  for (float v : values) out.push_back(rt::F32ToBf16(v));
  return out;
}

// One row of 16: amax 6 gives tensor scale 6 / 2688 and block scale 448 (0x7e), so x = w / (448
// x 6 / 2688) = w: the codes are w's nearest E2M1 values.
TEST(QuantizeTest, Nvfp4FollowsModelOptsRules) {
  const std::vector<float> w = {6, -6, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f,
                                5, -0.3f, 0, -0.0f, 1, 2, 3, 4};
  const quant::Nvfp4Weight q = quant::QuantizeNvfp4(Bf16(w).data(), 1, 16);
  EXPECT_EQ(q.tensor_scale, 6.0f / 2688.0f);
  ASSERT_EQ(q.block_scales.size(), 1u);
  EXPECT_EQ(static_cast<uint8_t>(q.block_scales[0]), 0x7e);
  const uint8_t codes[16] = {7, 15, 0, 2, 2, 4, 4, 6, 6, 9, 0, 0, 2, 4, 5, 6};
  ASSERT_EQ(q.codes.size(), 8u);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(quant::PackedE2M1Code(reinterpret_cast<const unsigned char*>(q.codes.data()), i),
              codes[i])
        << i;
  }
  // An all-zero tensor: scales 1, codes 0.
  const quant::Nvfp4Weight zero = quant::QuantizeNvfp4(Bf16(std::vector<float>(32, 0.0f)).data(), 1, 32);
  EXPECT_EQ(zero.tensor_scale, 1.0f);
  EXPECT_EQ(static_cast<uint8_t>(zero.block_scales[0]), 0x38);
  EXPECT_EQ(zero.codes, std::string(16, '\0'));
}

TEST(QuantizeTest, Fp8ScalesByAmaxOver448) {
  const quant::Fp8Weight q = quant::QuantizeFp8(Bf16({1.0f, -0.5f, 0.25f, 0.0f}).data(), 4);
  EXPECT_EQ(q.scale, 1.0f / 448.0f);
  ASSERT_EQ(q.elements.size(), 4u);
  EXPECT_EQ(static_cast<uint8_t>(q.elements[0]), 0x7e);  // 448
  EXPECT_EQ(static_cast<uint8_t>(q.elements[1]), 0xf6);  // -224
  EXPECT_EQ(static_cast<uint8_t>(q.elements[2]), 0x6e);  // 112
  EXPECT_EQ(static_cast<uint8_t>(q.elements[3]), 0x00);
}

// The host linears equal a plain f64 dot over the dequantised weight.
TEST(QuantizedLinearTest, HostReferenceDequantisesExactly) {
  const int T = 3, out = 5, in = 32;
  std::vector<unsigned char> codes(out * in / 2), blocks(out * in / 16), fp8(out * in);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<unsigned char>(i * 37 + 11);
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<unsigned char>(0x30 + i % 9);
  for (size_t i = 0; i < fp8.size(); ++i) {
    fp8[i] = static_cast<unsigned char>((i * 53 + 7) % 256);
    if (quant::E4M3IsNaN(fp8[i])) fp8[i] = 0x41;
  }
  const float tensor_scale = 0.03125f;
  std::vector<float> scales(out);
  for (int o = 0; o < out; ++o) scales[o] = 0.001f * (o + 1);
  std::vector<float> x(T * in);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i));
  std::vector<float> y4(T * out), y8(T * out), y8row(T * out);
  rt::host::LinearNvfp4(x.data(), codes.data(), blocks.data(), &tensor_scale, y4.data(), T, out, in);
  rt::host::LinearFp8(x.data(), fp8.data(), scales.data(), y8.data(), T, out, in, 1);
  rt::host::LinearFp8(x.data(), fp8.data(), scales.data(), y8row.data(), T, out, in, out);
  for (int t = 0; t < T; ++t) {
    for (int o = 0; o < out; ++o) {
      double want4 = 0, want8 = 0, want8row = 0;
      for (int i = 0; i < in; ++i) {
        const unsigned code = quant::PackedE2M1Code(codes.data() + o * in / 2, i);
        const float w4 = E2M1Value(code) * (E4M3Value(blocks[o * in / 16 + i / 16]) * tensor_scale);
        want4 += static_cast<double>(x[t * in + i]) * w4;
        want8 += static_cast<double>(x[t * in + i]) * (E4M3Value(fp8[o * in + i]) * scales[0]);
        want8row += static_cast<double>(x[t * in + i]) * (E4M3Value(fp8[o * in + i]) * scales[o]);
      }
      EXPECT_EQ(y4[t * out + o], static_cast<float>(want4));
      EXPECT_EQ(y8[t * out + o], static_cast<float>(want8));
      EXPECT_EQ(y8row[t * out + o], static_cast<float>(want8row));
    }
  }
}

// The quantized MoE expert ops compute what the quantized linears compute on each expert's own
// matrices (gate, up: rows [0, I) and [I, 2I) of its gate_up, each with its own tensor or row
// scales; down), gelu-gated and weighted as moe_gate_up / moe_down.
TEST(QuantizedExpertsTest, EachExpertIsAQuantizedLinear) {
  const int T = 2, E = 3, I = 2, H = 32, K = 2;
  std::vector<unsigned char> codes(E * 2 * I * H / 2), blocks(E * 2 * I * H / 16);
  std::vector<unsigned char> down_codes(E * H * I * 8 / 2), down_blocks(E * H * I * 8 / 16);
  std::vector<unsigned char> fp8(E * 2 * I * H);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<unsigned char>(i * 29 + 3);
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<unsigned char>(0x30 + i % 7);
  for (size_t i = 0; i < down_codes.size(); ++i) down_codes[i] = static_cast<unsigned char>(i * 13 + 5);
  for (size_t i = 0; i < down_blocks.size(); ++i) down_blocks[i] = static_cast<unsigned char>(0x28 + i % 5);
  for (size_t i = 0; i < fp8.size(); ++i) {
    fp8[i] = static_cast<unsigned char>((i * 53 + 7) % 256);
    if (quant::E4M3IsNaN(fp8[i])) fp8[i] = 0x41;
  }
  std::vector<float> tensor_scales(E * 2), down_scales(E), row_scales(E * 2 * I);
  for (int i = 0; i < E * 2; ++i) tensor_scales[i] = 0.01f * (i + 1);
  for (int i = 0; i < E; ++i) down_scales[i] = 0.02f * (i + 1);
  for (int i = 0; i < E * 2 * I; ++i) row_scales[i] = 0.001f * (i + 3);
  std::vector<float> x(T * H);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i));
  const std::vector<int32_t> idx = {2, 0, 1, 2};
  std::vector<float> act4(T * K * I), act8(T * K * I), act8row(T * K * I);
  rt::host::MoeGateUpNvfp4(x.data(), codes.data(), blocks.data(), tensor_scales.data(), idx.data(),
                           act4.data(), T, H, I, E, K, abi::kMoeGemv);
  rt::host::MoeGateUpFp8(x.data(), fp8.data(), tensor_scales.data(), idx.data(), act8.data(), T, H,
                         I, E, K, 1, abi::kMoeGemv);
  rt::host::MoeGateUpFp8(x.data(), fp8.data(), row_scales.data(), idx.data(), act8row.data(), T,
                         H, I, E, K, I, abi::kMoeGemv);
  // gelu(gate) * up as the host's gelu_mul computes it.
  const auto gelu_mul = [](float g, float u) {
    float y;
    rt::host::GeluMul(&g, &u, &y, 1, 1);
    return y;
  };
  for (int t = 0; t < T; ++t) {
    for (int k = 0; k < K; ++k) {
      const int e = idx[t * K + k];
      float g4[I], u4[I], g8[I], u8[I], g8r[I], u8r[I];
      const size_t half = static_cast<size_t>(I) * H;  // elements of one matrix
      const unsigned char* c = codes.data() + e * 2 * half / 2;
      const unsigned char* b = blocks.data() + e * 2 * half / 16;
      const unsigned char* q = fp8.data() + e * 2 * half;
      rt::host::LinearNvfp4(x.data() + t * H, c, b, &tensor_scales[2 * e], g4, 1, I, H);
      rt::host::LinearNvfp4(x.data() + t * H, c + half / 2, b + half / 16, &tensor_scales[2 * e + 1],
                            u4, 1, I, H);
      rt::host::LinearFp8(x.data() + t * H, q, &tensor_scales[2 * e], g8, 1, I, H, 1);
      rt::host::LinearFp8(x.data() + t * H, q + half, &tensor_scales[2 * e + 1], u8, 1, I, H, 1);
      rt::host::LinearFp8(x.data() + t * H, q, &row_scales[2 * I * e], g8r, 1, I, H, I);
      rt::host::LinearFp8(x.data() + t * H, q + half, &row_scales[2 * I * e + I], u8r, 1, I, H, I);
      for (int i = 0; i < I; ++i) {
        const size_t at = (static_cast<size_t>(t) * K + k) * I + i;
        EXPECT_FLOAT_EQ(act4[at], gelu_mul(g4[i], u4[i])) << t << " " << k << " " << i;
        EXPECT_FLOAT_EQ(act8[at], gelu_mul(g8[i], u8[i])) << t << " " << k << " " << i;
        EXPECT_FLOAT_EQ(act8row[at], gelu_mul(g8r[i], u8r[i])) << t << " " << k << " " << i;
      }
    }
  }
  // moe_down_nvfp4 (intermediate 16 here: whole blocks): the weighted sum of each expert's linear.
  const int I2 = 16;
  std::vector<float> a(T * K * I2), w = {0.5f, 0.25f, 0.75f, 0.125f}, y(T * 8);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::cos(static_cast<float>(i));
  rt::host::MoeDownNvfp4(a.data(), down_codes.data(), down_blocks.data(), down_scales.data(),
                         w.data(), idx.data(), y.data(), nullptr, T, 8, I2, E, K, abi::kMoeGemv);
  for (int t = 0; t < T; ++t) {
    double want[8] = {};
    for (int k = 0; k < K; ++k) {
      const int e = idx[t * K + k];
      float out[8];
      rt::host::LinearNvfp4(a.data() + (t * K + k) * I2, down_codes.data() + e * 8 * I2 / 2,
                            down_blocks.data() + e * 8 * I2 / 16, &down_scales[e], out, 1, 8, I2);
      for (int h = 0; h < 8; ++h) want[h] += static_cast<double>(w[t * K + k]) * out[h];
    }
    for (int h = 0; h < 8; ++h) EXPECT_FLOAT_EQ(y[t * 8 + h], static_cast<float>(want[h]));
  }
  // The registry's rule: FP8 scales per matrix (1) or per row (the matrix's rows).
  using rt::HostArg;
  std::vector<HostArg> args = {
      HostArg::Ptr(x.data()), HostArg::Ptr(fp8.data()), HostArg::Ptr(row_scales.data()),
      HostArg::Ptr(idx.data()), HostArg::Ptr(act8.data()), HostArg::I32(T), HostArg::I32(H),
      HostArg::I32(I), HostArg::I32(E), HostArg::I32(K), HostArg::I32(3), HostArg::I32(abi::kMoeGemv)};
  const absl::Status bad = rt::RunHostKernel("moe_gate_up_fp8", args);
  EXPECT_EQ(bad.message(), "host kernel 'moe_gate_up_fp8': scales_per_matrix must be 1 or "
                           "intermediate = 2, found 3");
  args[10] = HostArg::I32(I);
  EXPECT_TRUE(rt::RunHostKernel("moe_gate_up_fp8", args).ok());
}

// The registry's rules of the quantized linears (kMultipleOf16, kOneOrEqual), as every checker
// of them reports them (op_rules.cc: the plan reader, the host dispatch).
TEST(QuantizedLinearTest, RulesAreChecked) {
  using rt::HostArg;
  std::vector<float> x(64), y(64), scale(8, 1.0f);
  std::vector<unsigned char> w(1024), blocks(64);
  const std::vector<HostArg> nvfp4 = {
      HostArg::Ptr(x.data()),      HostArg::Ptr(w.data()), HostArg::Ptr(blocks.data()),
      HostArg::Ptr(scale.data()),  HostArg::Ptr(y.data()), HostArg::I32(1),
      HostArg::I32(2),             HostArg::I32(24)};
  const absl::Status narrow = rt::RunHostKernel("linear_nvfp4", nvfp4);
  EXPECT_EQ(narrow.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(narrow.message(),
            "host kernel 'linear_nvfp4': in_features must be a multiple of 16, found 24");
  const std::vector<HostArg> fp8 = {
      HostArg::Ptr(x.data()), HostArg::Ptr(w.data()), HostArg::Ptr(scale.data()),
      HostArg::Ptr(y.data()), HostArg::I32(1),        HostArg::I32(5),
      HostArg::I32(8),        HostArg::I32(3)};
  const absl::Status counts = rt::RunHostKernel("linear_fp8", fp8);
  EXPECT_EQ(counts.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(counts.message(),
            "host kernel 'linear_fp8': scale_count must be 1 or out_features = 5, found 3");
  std::vector<HostArg> per_row = fp8;
  per_row[7] = HostArg::I32(5);
  EXPECT_TRUE(rt::RunHostKernel("linear_fp8", per_row).ok());
}

// W4A4 activations: a row quantized by QuantizeNvfp4Row is the row quantized as a one-row NVFP4
// weight (the same rules, the row's amax as the tensor's), in kernel_abi.h's packed layout.
TEST(Fp4ActivationsTest, ARowIsQuantizedAsAOneRowWeight) {
  constexpr int64_t kCols = 192;  // 12 blocks: 12 scale bytes padded to 16
  std::vector<uint16_t> bf16(kCols);
  std::vector<float> x(kCols);
  for (int64_t i = 0; i < kCols; ++i) {
    bf16[i] = rt::F32ToBf16(std::sin(0.37f * i) * (i < 16 ? 0.001f : i < 64 ? 3.0f : 40.0f));
    x[i] = rt::Bf16ToF32(bf16[i]);
  }
  for (int i = 96; i < 112; ++i) x[i] = 0.0f, bf16[i] = 0;  // an all-zero block
  const quant::Nvfp4Weight weight = quant::QuantizeNvfp4(bf16.data(), 1, kCols);
  std::vector<uint8_t> row(abi::Nvfp4RowBytes(kCols), 0xee);
  ASSERT_EQ(row.size(), 16u + kCols / 2 + 16u);
  quant::QuantizeNvfp4Row(x.data(), kCols, row.data());
  float global;
  std::memcpy(&global, row.data(), 4);
  EXPECT_EQ(global, weight.tensor_scale);
  EXPECT_EQ(std::string(row.begin() + 4, row.begin() + 16), std::string(12, '\0'));
  EXPECT_EQ(std::string(row.begin() + abi::kNvfp4RowCodesOffset,
                        row.begin() + abi::Nvfp4RowScalesOffset(kCols)),
            weight.codes);
  EXPECT_EQ(std::string(row.begin() + abi::Nvfp4RowScalesOffset(kCols),
                        row.begin() + abi::Nvfp4RowScalesOffset(kCols) + kCols / 16),
            weight.block_scales);
  EXPECT_EQ(weight.block_scales[6], static_cast<char>(0x38));  // the zero block: scale 1
  EXPECT_EQ(std::string(row.end() - 4, row.end()), std::string(4, '\0'));  // padding
  // A row of zeros: global scale 1, codes 0.
  std::vector<float> zeros(kCols, 0.0f);
  quant::QuantizeNvfp4Row(zeros.data(), kCols, row.data());
  std::memcpy(&global, row.data(), 4);
  EXPECT_EQ(global, 1.0f);
  EXPECT_EQ(row[abi::kNvfp4RowCodesOffset], 0);
}

// linear_nvfp4_a4 computes linear_nvfp4 on the dequantised activations: e2m1(code) x block scale
// x the row's global scale.
TEST(Fp4ActivationsTest, TheW4A4ProductIsTheProductOfTheDequantisedActivations) {
  constexpr int32_t kT = 3, kOut = 5, kIn = 128;
  const int32_t words = static_cast<int32_t>(abi::Nvfp4RowWords(kIn));
  std::vector<float> x(kT * kIn);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.11f * i) * (i % 7 == 0 ? 9.0f : 1.0f);
  std::vector<uint16_t> w_bf16(kOut * kIn);
  for (size_t i = 0; i < w_bf16.size(); ++i) w_bf16[i] = rt::F32ToBf16(std::sin(0.05f * i));
  const quant::Nvfp4Weight w = quant::QuantizeNvfp4(w_bf16.data(), kOut, kIn);
  std::vector<float> rows(kT * words), dequantised(kT * kIn), y_a4(kT * kOut), y_a16(kT * kOut);
  rt::host::QuantizeNvfp4Rows(x.data(), rows.data(), kT, kIn, words);
  for (int t = 0; t < kT; ++t) {
    const auto* row = reinterpret_cast<const unsigned char*>(rows.data() + t * words);
    float global;
    std::memcpy(&global, row, 4);
    for (int i = 0; i < kIn; ++i) {
      dequantised[t * kIn + i] =
          E2M1Value(quant::PackedE2M1Code(row + abi::kNvfp4RowCodesOffset, i)) *
          E4M3Value(row[abi::Nvfp4RowScalesOffset(kIn) + i / 16]) * global;
    }
  }
  const auto* codes = reinterpret_cast<const unsigned char*>(w.codes.data());
  const auto* scales = reinterpret_cast<const unsigned char*>(w.block_scales.data());
  rt::host::LinearNvfp4A4(rows.data(), codes, scales, &w.tensor_scale, y_a4.data(), kT, kOut,
                          kIn, words);
  rt::host::LinearNvfp4(dequantised.data(), codes, scales, &w.tensor_scale, y_a16.data(), kT,
                        kOut, kIn);
  double worst = 0.0, largest = 0.0, moved = 0.0;
  for (int i = 0; i < kT * kOut; ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(y_a4[i] - y_a16[i])));
    largest = std::max(largest, static_cast<double>(std::fabs(y_a16[i])));
  }
  EXPECT_LE(worst, 1e-6 * largest);
  // ... and not the product of the activations as they were (W4A16): quantization moved them.
  std::vector<float> y_plain(kT * kOut);
  rt::host::LinearNvfp4(x.data(), codes, scales, &w.tensor_scale, y_plain.data(), kT, kOut, kIn);
  for (int i = 0; i < kT * kOut; ++i) moved = std::max(moved, static_cast<double>(std::fabs(y_plain[i] - y_a4[i])));
  EXPECT_GT(moved, 1e-3 * largest);
}

// The rules of the W4A4 ops: whole FP4 MMA k-steps and the packed row's size.
TEST(Fp4ActivationsTest, RulesAreChecked) {
  using rt::HostArg;
  std::vector<float> x(256), q(256);
  std::vector<HostArg> args = {HostArg::Ptr(x.data()), HostArg::Ptr(q.data()), HostArg::I32(1),
                               HostArg::I32(48), HostArg::I32(16)};
  absl::Status status = rt::RunHostKernel("quantize_nvfp4_rows", args);
  EXPECT_EQ(status.message(),
            "host kernel 'quantize_nvfp4_rows': cols must be a multiple of 64, found 48");
  args[3] = HostArg::I32(64);
  args[4] = HostArg::I32(15);
  status = rt::RunHostKernel("quantize_nvfp4_rows", args);
  EXPECT_EQ(status.message(),
            "host kernel 'quantize_nvfp4_rows': row_words must be 16 (the words of a packed "
            "NVFP4 row of cols = 64), found 15");
  args[4] = HostArg::I32(16);
  EXPECT_TRUE(rt::RunHostKernel("quantize_nvfp4_rows", args).ok());
}

}  // namespace
}  // namespace spark
