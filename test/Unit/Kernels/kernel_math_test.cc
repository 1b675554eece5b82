// Accuracy of the kernel library's libdevice-free math (kernels/math.cuh), compiled as host C++
// against long double references. On the device, 2^x comes from ex2.approx.f32 (max relative
// error ~2^-22) instead of exp2f; everything else is the same code.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"
#include "kernels/math.cuh"

namespace {

TEST(KernelMathTest, TanhIsAccurate) {
  double max_abs = 0.0;
  for (int i = -2000000; i <= 2000000; ++i) {
    const float x = static_cast<float>(i) * 1e-5f;  // [-20, 20]
    const long double ref = tanhl(static_cast<long double>(x));
    max_abs = std::max(max_abs, static_cast<double>(fabsl(spk::spk_tanhf(x) - ref)));
  }
  EXPECT_LT(max_abs, 2e-7);
  EXPECT_EQ(spk::spk_tanhf(100.0f), 1.0f);
  EXPECT_EQ(spk::spk_tanhf(-100.0f), -1.0f);
  EXPECT_EQ(spk::spk_tanhf(INFINITY), 1.0f);
  EXPECT_TRUE(std::isnan(spk::spk_tanhf(NAN)));
  EXPECT_EQ(spk::spk_tanhf(0.0f), 0.0f);
}

TEST(KernelMathTest, ExpIsAccurate) {
  double max_rel = 0.0;
  for (int i = -2000000; i <= 2000000; ++i) {
    const float x = static_cast<float>(i) * 4e-5f;  // [-80, 80]
    const long double ref = expl(static_cast<long double>(x));
    max_rel = std::max(max_rel, static_cast<double>(fabsl((spk::spk_expf(x) - ref) / ref)));
  }
  EXPECT_LT(max_rel, 2e-7);
  EXPECT_EQ(spk::spk_expf(-INFINITY), 0.0f);
  EXPECT_EQ(spk::spk_expf(0.0f), 1.0f);
}

TEST(KernelMathTest, GeluMatchesTanhFormula) {
  double max_err = 0.0;
  for (int i = -1000000; i <= 1000000; ++i) {
    const float x = static_cast<float>(i) * 1e-5f;  // [-10, 10]
    const long double xd = x;
    const long double ref =
        0.5L * xd * (1.0L + tanhl(0.7978845608028654L * (xd + 0.044715L * xd * xd * xd)));
    const long double err = fabsl(spk::spk_gelu(x) - ref) / std::max(1.0L, fabsl(ref));
    max_err = std::max(max_err, static_cast<double>(err));
  }
  EXPECT_LT(max_err, 3e-7);
}

TEST(KernelMathTest, SinCosAreAccurateForLargeAngles) {
  double max_abs = 0.0;
  uint64_t s = 12345;
  for (int i = 0; i < 1000000; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const float a = (static_cast<float>(s >> 40) / 16777216.0f - 0.5f) * 600000.0f;
    float sn, cs;
    spk::spk_sincos(a, &sn, &cs);
    max_abs = std::max(max_abs, static_cast<double>(fabsl(sn - sinl(static_cast<long double>(a)))));
    max_abs = std::max(max_abs, static_cast<double>(fabsl(cs - cosl(static_cast<long double>(a)))));
  }
  EXPECT_LT(max_abs, 1.2e-7);
}

// RoPE inverse frequencies must equal the reference's f32 powf bit for bit (one ulp of inv_freq
// moves the angle at position p by p * 2^-24). Checked for Gemma 4's two RoPE configurations.
TEST(KernelMathTest, RopePowMatchesPowfForGemmaConfigs) {
  struct Config {
    float theta;
    int head_dim;
  };
  for (const Config& c : {Config{10000.0f, 256}, Config{1000000.0f, 512}}) {
    for (int i = 0; i < c.head_dim / 2; ++i) {
      const float e = static_cast<float>(2 * i) / static_cast<float>(c.head_dim);
      EXPECT_EQ(spk::spk_pow_rope(c.theta, e), std::pow(c.theta, e))
          << "theta " << c.theta << " head_dim " << c.head_dim << " pair " << i;
    }
  }
}

TEST(KernelMathTest, DoubleLogExpAreAccurate) {
  for (double x : {1e-300, 1e-10, 0.5, 0.7071, 1.0, 1.5, 2.0, 10000.0, 1e6, 1e300}) {
    EXPECT_NEAR(spk::spk_log_d(x), std::log(x), 4e-16 * std::max(1.0, std::fabs(std::log(x))));
  }
  for (double y : {-700.0, -20.0, -1.0, -1e-9, 0.0, 0.3, 1.0, 13.8155, 100.0, 700.0}) {
    EXPECT_NEAR(spk::spk_exp_d(y), std::exp(y), 4e-16 * std::exp(y));
  }
}

TEST(KernelMathTest, Bf16ConversionIsExact) {
  EXPECT_EQ(spk::bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(spk::bf16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(spk::bf16lo_to_f32(0x40003f80u), 1.0f);
  EXPECT_EQ(spk::bf16hi_to_f32(0x40003f80u), 2.0f);
}

}  // namespace
