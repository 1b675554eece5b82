#include "spark/runtime/host_kernel_dispatch.h"
#include "spark/runtime/host_kernels.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "runtime_test_util.h"
#include "spark/runtime/kernel_abi.h"

namespace spark {
namespace rt {
namespace {

using testing_util::ErrorContains;

constexpr float kTol = 1e-5f;

// The KV cache ops' block tables (kernel_abi.h "Paged KV cache"): one sequence (every token's
// row 0) whose table row is 0, 1, 2, ...: position p lives in slot p % capacity.
const int32_t* FirstSequence() {
  static const std::vector<int32_t> zeros(1024, 0);
  return zeros.data();
}
const int32_t* IdentityTable() {
  static const std::vector<int32_t> table = [] {
    std::vector<int32_t> t(64);
    for (int i = 0; i < 64; ++i) t[i] = i;
    return t;
  }();
  return table.data();
}

std::vector<uint16_t> Bf16(const std::vector<float>& values) {
  std::vector<uint16_t> out;
  for (float v : values) out.push_back(F32ToBf16(v));
  return out;
}

void ExpectNear(const std::vector<float>& actual, const std::vector<float>& expected,
                float tol = kTol) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tol) << "element " << i;
  }
}

TEST(Bf16Test, ConvertsExactValuesAndRoundsToNearestEven) {
  EXPECT_EQ(F32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToF32(0x3f80), 1.0f);
  EXPECT_EQ(Bf16ToF32(F32ToBf16(-2.5f)), -2.5f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(NAN))));
}

TEST(HostKernelsTest, EmbeddingScalesRowsAndZeroesOutOfRangeIds) {
  const std::vector<uint16_t> table = Bf16({1, 2, 3, 4, 5, 6});  // [3, 2]
  const std::vector<int32_t> ids = {2, 0, 3, -1};
  std::vector<float> y(8, 7.0f);
  host::Embedding(ids.data(), table.data(), y.data(), 4, 3, 2, 2.0f);
  ExpectNear(y, {10, 12, 2, 4, 0, 0, 0, 0});
}

TEST(HostKernelsTest, RmsNormMultipliesByWeightNotOnePlusWeight) {
  const std::vector<float> x = {1, 2, 3, 4};
  const std::vector<uint16_t> w = Bf16({1, 2, 0.5f, 1});
  std::vector<float> y(4);
  host::RmsNorm(x.data(), w.data(), y.data(), 1, 1, 4, 0.0f);
  const float inv = 1.0f / std::sqrt(7.5f);  // mean of squares = 30 / 4
  ExpectNear(y, {inv, 4 * inv, 1.5f * inv, 4 * inv});
}

TEST(HostKernelsTest, RmsNormWithoutWeightAndWithGroupsNormalisesEachGroup) {
  const std::vector<float> x = {3, 4, 0, 2};  // [1 token, 2 groups, 2 cols]
  std::vector<float> y(4);
  host::RmsNorm(x.data(), nullptr, y.data(), 1, 2, 2, 0.0f);
  const float inv0 = 1.0f / std::sqrt(12.5f);
  const float inv1 = 1.0f / std::sqrt(2.0f);
  ExpectNear(y, {3 * inv0, 4 * inv0, 0, 2 * inv1});
}

TEST(HostKernelsTest, RmsNormAddsEpsilonInsideThePower) {
  const std::vector<float> x = {1, 1};
  std::vector<float> y(2);
  host::RmsNorm(x.data(), nullptr, y.data(), 1, 1, 2, 3.0f);  // (1 + 3)^-0.5
  ExpectNear(y, {0.5f, 0.5f});
}

TEST(HostKernelsTest, RmsNormRunsInPlace) {
  std::vector<float> x = {1, 2, 3, 4};
  host::RmsNorm(x.data(), nullptr, x.data(), 1, 1, 4, 0.0f);
  const float inv = 1.0f / std::sqrt(7.5f);
  ExpectNear(x, {inv, 2 * inv, 3 * inv, 4 * inv});
}

// The fused norms compute exactly what their two unfused steps compute, in place too.
TEST(HostKernelsTest, ResidualRmsNormIsRmsNormThenAdd) {
  const std::vector<float> x = {1, -2, 3, 4, 0.5f, -1, 2, 8};
  const std::vector<float> residual = {10, 20, 30, 40, -1, -2, -3, -4};
  const std::vector<uint16_t> w = Bf16({0.5f, 1, 2, -1});
  std::vector<float> normed(8), expected(8), fused(8);
  host::RmsNorm(x.data(), w.data(), normed.data(), 2, 1, 4, 1e-6f);
  host::Add(residual.data(), normed.data(), expected.data(), 2, 4);
  host::ResidualRmsNorm(x.data(), w.data(), residual.data(), fused.data(), 2, 4, 1e-6f);
  EXPECT_EQ(fused, expected);
  std::vector<float> in_place = residual;  // y aliases the residual
  host::ResidualRmsNorm(x.data(), w.data(), in_place.data(), in_place.data(), 2, 4, 1e-6f);
  EXPECT_EQ(in_place, expected);
  host::RmsNorm(x.data(), nullptr, normed.data(), 2, 1, 4, 1e-6f);  // weight-less
  host::Add(residual.data(), normed.data(), expected.data(), 2, 4);
  host::ResidualRmsNorm(x.data(), nullptr, residual.data(), fused.data(), 2, 4, 1e-6f);
  EXPECT_EQ(fused, expected);
}

TEST(HostKernelsTest, ResidualRmsNormScaleIsResidualRmsNormThenScalarMul) {
  const std::vector<float> x = {1, -2, 3, 4, 0.5f, -1, 2, 8};
  const std::vector<float> residual = {10.1f, 20, 30, 40, -1, -2, -3.3f, -4};
  const std::vector<uint16_t> w = Bf16({0.5f, 1, 2, -1});
  const std::vector<uint16_t> s = Bf16({0.37f});
  std::vector<float> sum(8), expected(8), fused(8);
  host::ResidualRmsNorm(x.data(), w.data(), residual.data(), sum.data(), 2, 4, 1e-6f);
  host::ScalarMul(sum.data(), s.data(), expected.data(), 2, 4);
  host::ResidualRmsNormScale(x.data(), w.data(), residual.data(), s.data(), fused.data(), 2, 4,
                             1e-6f, /*round_sum=*/0);
  EXPECT_EQ(fused, expected);
  // round_sum: the sum is stored as bf16 before the product, as the unfused ops under bf16
  // activations store it.
  for (float& v : sum) v = Bf16ToF32(F32ToBf16(v));
  host::ScalarMul(sum.data(), s.data(), expected.data(), 2, 4);
  std::vector<float> in_place = residual;  // y aliases the residual
  host::ResidualRmsNormScale(x.data(), w.data(), in_place.data(), s.data(), in_place.data(), 2, 4,
                             1e-6f, /*round_sum=*/1);
  EXPECT_EQ(in_place, expected);
  EXPECT_NE(in_place, fused);  // the rounding changed something
}

TEST(HostKernelsTest, RmsNormRopeIsRmsNormThenRope) {
  // 2 tokens x 2 heads x head_dim 4, one of two pairs rotating.
  std::vector<float> x(16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i) - 1.5f;
  const std::vector<uint16_t> w = Bf16({1, 0.5f, 2, -1});
  const std::vector<int32_t> positions = {3, 700};
  std::vector<float> normed(16), expected(16), fused(16);
  host::RmsNorm(x.data(), w.data(), normed.data(), 2, 2, 4, 1e-6f);
  host::Rope(normed.data(), positions.data(), expected.data(), 2, 2, 4, 1, 10000.0f, 1.0f);
  host::RmsNormRope(x.data(), w.data(), positions.data(), fused.data(), 2, 2, 4, 1, 10000.0f,
                    1.0f, 1e-6f);
  EXPECT_EQ(fused, expected);
  std::vector<float> in_place = x;
  host::RmsNormRope(in_place.data(), w.data(), positions.data(), in_place.data(), 2, 2, 4, 1,
                    10000.0f, 1.0f, 1e-6f);
  EXPECT_EQ(in_place, expected);
}

TEST(RunHostKernelTest, FusedNormsCheckTheirSizes) {
  float x[4] = {1, 2, 3, 4}, y[4];
  int32_t positions[1] = {0};
  const std::vector<HostArg> residual_norm = {
      HostArg::Ptr(x), HostArg::Ptr(nullptr), HostArg::Ptr(x), HostArg::Ptr(y),
      HostArg::I32(1), HostArg::I32(0), HostArg::F32(1e-6f)};
  EXPECT_TRUE(ErrorContains(RunHostKernel("residual_rms_norm", residual_norm),
                            "cols must be positive"));
  const std::vector<HostArg> norm_rope = {
      HostArg::Ptr(x), HostArg::Ptr(nullptr), HostArg::Ptr(positions), HostArg::Ptr(y),
      HostArg::I32(1), HostArg::I32(1), HostArg::I32(4), HostArg::I32(3),
      HostArg::F32(10000.0f), HostArg::F32(1.0f), HostArg::F32(1e-6f)};
  EXPECT_TRUE(ErrorContains(RunHostKernel("rms_norm_rope", norm_rope),
                            "rotated_pairs must be at most head_dim / 2, found 3 and 4"));
}

TEST(HostKernelsTest, LinearComputesXTimesWTransposed) {
  const std::vector<float> x = {1, 2, 3, -1, 0, 1};          // [2, 3]
  const std::vector<uint16_t> w = Bf16({1, 0, 0, 1, 1, 1});  // [2 out, 3 in]
  std::vector<float> y(4);
  host::Linear(x.data(), w.data(), y.data(), 2, 2, 3);
  ExpectNear(y, {1, 6, -1, 0});
}

TEST(HostKernelsTest, ElementwiseOps) {
  const std::vector<float> a = {1, -2, 3, 0.5f};
  const std::vector<float> b = {2, 3, -1, 4};
  std::vector<float> y(4);
  host::Add(a.data(), b.data(), y.data(), 2, 2);
  ExpectNear(y, {3, 1, 2, 4.5f});
  host::Mul(a.data(), b.data(), y.data(), 2, 2);
  ExpectNear(y, {2, -6, -3, 2});
  host::Scale(a.data(), y.data(), 1, 4, -2.0f);
  ExpectNear(y, {-2, 4, -6, -1});
  const std::vector<uint16_t> s = Bf16({0.25f});
  host::ScalarMul(a.data(), s.data(), y.data(), 4, 1);
  ExpectNear(y, {0.25f, -0.5f, 0.75f, 0.125f});
  host::Copy(a.data(), y.data(), 2, 2);
  ExpectNear(y, a);
}

TEST(HostKernelsTest, GeluUsesTheTanhApproximation) {
  const std::vector<float> x = {0, 1, -1, 2};
  std::vector<float> y(4);
  host::Gelu(x.data(), y.data(), 1, 4);
  ExpectNear(y, {0, 0.84119199f, -0.15880801f, 1.95459769f});
  const std::vector<float> b = {5, 2, -2, 1};
  host::GeluMul(x.data(), b.data(), y.data(), 2, 2);
  ExpectNear(y, {0, 1.68238398f, 0.31761602f, 1.95459769f});
}

TEST(HostKernelsTest, SoftcapIsCapTimesTanhOfXOverCap) {
  const std::vector<float> x = {0, 30, -30, 100};
  std::vector<float> y(4);
  host::Softcap(x.data(), y.data(), 1, 4, 30.0f);
  ExpectNear(y, {0, 22.8478247f, -22.8478247f, 29.9237390f}, 1e-4f);
}

TEST(HostKernelsTest, RopeAtPositionZeroIsIdentity) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};  // [1 token, 2 heads, 4]
  const std::vector<int32_t> pos = {0};
  std::vector<float> y(8);
  host::Rope(x.data(), pos.data(), y.data(), 1, 2, 4, 2, 10000.0f, 1.0f);
  ExpectNear(y, x);
}

TEST(HostKernelsTest, RopeRotatesHalvesByPositionTimesInverseFrequency) {
  const std::vector<float> x = {1, 2, 3, 4};  // pairs (0, 2) and (1, 3)
  const std::vector<int32_t> pos = {1};
  std::vector<float> y(4);
  host::Rope(x.data(), pos.data(), y.data(), 1, 1, 4, 2, 10000.0f, 1.0f);
  const double a0 = 1.0, a1 = 0.01;  // inv_freq = 10000^(-2i/4)
  ExpectNear(y, {static_cast<float>(1 * std::cos(a0) - 3 * std::sin(a0)),
                 static_cast<float>(2 * std::cos(a1) - 4 * std::sin(a1)),
                 static_cast<float>(3 * std::cos(a0) + 1 * std::sin(a0)),
                 static_cast<float>(4 * std::cos(a1) + 2 * std::sin(a1))});
}

TEST(HostKernelsTest, RopePartialRotationUsesTheFullHeadDimInTheExponent) {
  // head_dim 8, 2 of 4 pairs rotate: pair 1 rotates by theta^(-2/8), pairs 2 and 3 pass through.
  const std::vector<float> x = {1, 1, 1, 1, 0, 0, 0, 0};
  const std::vector<int32_t> pos = {3};
  std::vector<float> y(8);
  host::Rope(x.data(), pos.data(), y.data(), 1, 1, 8, 2, 16.0f, 1.0f);
  const double a1 = 3.0 * std::pow(16.0, -2.0 / 8.0);
  ExpectNear(y, {static_cast<float>(std::cos(3.0)), static_cast<float>(std::cos(a1)), 1, 1,
                 static_cast<float>(std::sin(3.0)), static_cast<float>(std::sin(a1)), 0, 0});
}

TEST(HostKernelsTest, RopeFactorDividesTheFrequency) {
  const std::vector<float> x = {1, 2, 3, 4};
  const std::vector<int32_t> pos_one = {1}, pos_two = {2};
  std::vector<float> scaled(4), plain(4);
  host::Rope(x.data(), pos_two.data(), scaled.data(), 1, 1, 4, 2, 100.0f, 2.0f);
  host::Rope(x.data(), pos_one.data(), plain.data(), 1, 1, 4, 2, 100.0f, 1.0f);
  ExpectNear(scaled, plain);
}

TEST(HostKernelsTest, KvWriteUsesPositionModuloCapacity) {
  const std::vector<float> k = {1, 2, 3, 4}, v = {5, 6, 7, 8};  // [2 tokens, 1 head, 2]
  const std::vector<int32_t> pos = {16 + 1, 16 + 2};
  std::vector<float> kc(32, 0.0f), vc(32, 0.0f);  // capacity 16
  host::KvWrite(k.data(), v.data(), pos.data(), FirstSequence(), IdentityTable(), kc.data(),
                vc.data(), 2, 1, 2, 16, abi::kCacheF32);
  std::vector<float> want_k(32, 0.0f), want_v(32, 0.0f);
  for (int i = 0; i < 4; ++i) want_k[2 + i] = k[i], want_v[2 + i] = v[i];  // slots 1 and 2
  ExpectNear(kc, want_k);
  ExpectNear(vc, want_v);
}

// Tokens of two sequences in one step: each goes to a block of its own sequence's table row;
// a token whose block is not allocated (-1) writes nothing.
TEST(HostKernelsTest, KvWriteFollowsEachTokensBlockTableRow) {
  const int kBlock = abi::kKvBlockRows, capacity = 2 * kBlock;  // 2 table columns per sequence
  const std::vector<float> k = {1, 2, 3}, v = {4, 5, 6};  // [3 tokens, 1 head, 1]
  const std::vector<int32_t> pos = {17, 3, 5}, seqs = {0, 1, 1};
  // Sequence 0 holds blocks {5, 2}; sequence 1 has no block for positions 0..15 yet.
  const std::vector<int32_t> table = {5, 2, -1, 7};
  std::vector<float> kc(8 * kBlock, 0.0f), vc(8 * kBlock, 0.0f);
  host::KvWrite(k.data(), v.data(), pos.data(), seqs.data(), table.data(), kc.data(), vc.data(),
                3, 1, 1, capacity, abi::kCacheF32);
  std::vector<float> want_k(8 * kBlock, 0.0f), want_v(8 * kBlock, 0.0f);
  want_k[2 * kBlock + 1] = 1, want_v[2 * kBlock + 1] = 4;  // position 17: block 2, slot 1
  ExpectNear(kc, want_k);
  ExpectNear(vc, want_v);
}

// Attention reads each token's keys through its own sequence's row: two sequences with the same
// positions but different blocks see different values.
TEST(HostKernelsTest, AttentionReadsEachTokensOwnSequence) {
  const int kBlock = abi::kKvBlockRows;
  std::vector<float> kc(2 * kBlock, 0.0f), vc(2 * kBlock, 0.0f);
  for (int s = 0; s < kBlock; ++s) vc[s] = 1.0f, vc[kBlock + s] = 3.0f;  // block 0: 1, block 1: 3
  const std::vector<float> q = {0, 0};
  const std::vector<int32_t> pos = {4, 4}, seqs = {1, 0}, table = {0, 1};  // row 0: block 0
  std::vector<float> y(2);
  host::Attention(q.data(), pos.data(), seqs.data(), table.data(), kc.data(), vc.data(), y.data(),
                  nullptr, 2, 1, 1, 1, kBlock, 0, 1.0f, 1, 0, abi::kCacheF32, nullptr);
  ExpectNear(y, {3, 1});
}

TEST(HostKernelsTest, KvWriteToABf16CacheRoundsToNearestEven) {
  // bf16 keeps 8 significant bits: around 1 the step is 2^-7. 1 + 2^-8 is halfway between 1 and
  // 1 + 2^-7 and goes to the even 1; 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6 and
  // goes to the even 1 + 2^-6; 1 + 2^-8 + 2^-12 is past halfway and goes up.
  const float a = 1.0f + std::ldexp(1.0f, -8), b = 1.0f + 3 * std::ldexp(1.0f, -8);
  const float c = 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -12);
  const std::vector<float> k = {a, b, c, -2.5f}, v = {-a, -b, -c, 1e-3f};  // [1 token, 1, 4]
  const std::vector<int32_t> pos = {16 + 1};
  std::vector<uint16_t> kc(64, 0xFFFF), vc(64, 0xFFFF);  // capacity 16
  host::KvWrite(k.data(), v.data(), pos.data(), FirstSequence(), IdentityTable(), kc.data(),
                vc.data(), 1, 1, 4, 16, abi::kCacheBF16);
  const std::vector<float> want_k = {1.0f, 1.0f + std::ldexp(1.0f, -6),
                                     1.0f + std::ldexp(1.0f, -7), -2.5f};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(kc[i], 0xFFFF) << "slot 0 is not position 17's";
    EXPECT_EQ(Bf16ToF32(kc[4 + i]), want_k[i]) << i;
    EXPECT_EQ(Bf16ToF32(vc[4 + i]), i < 3 ? -want_k[i] : Bf16ToF32(F32ToBf16(1e-3f))) << i;
  }
}

// Attention over a bf16 cache is attention over an f32 cache holding the bf16-rounded values,
// split or not.
TEST(HostKernelsTest, AttentionOverABf16CacheReadsTheRoundedValues) {
  const int T = 2, q_heads = 2, kv_heads = 1, head_dim = 4, capacity = 48;
  std::vector<float> q(T * q_heads * head_dim), k(capacity * head_dim), v(k.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.3f * i);
  for (size_t i = 0; i < k.size(); ++i) k[i] = std::cos(0.13f * i), v[i] = std::sin(0.05f * i);
  std::vector<int32_t> all(capacity);
  for (int i = 0; i < capacity; ++i) all[i] = i;
  std::vector<uint16_t> kb(k.size()), vb(v.size());
  host::KvWrite(k.data(), v.data(), all.data(), FirstSequence(), IdentityTable(), kb.data(),
                vb.data(), capacity, 1, head_dim, capacity, abi::kCacheBF16);
  std::vector<float> kr(k.size()), vr(v.size());
  for (size_t i = 0; i < k.size(); ++i) kr[i] = Bf16ToF32(kb[i]), vr[i] = Bf16ToF32(vb[i]);
  const std::vector<int32_t> pos = {37, 38};
  for (int max_splits : {1, 4}) {
    std::vector<float> want(q.size()), got(q.size());
    std::vector<float> parts_f32(8 * q_heads * abi::AttentionRecordFloats(head_dim));
    std::vector<float> parts_bf16(parts_f32.size());
    float* pf = max_splits > 1 ? parts_f32.data() : nullptr;
    float* pb = max_splits > 1 ? parts_bf16.data() : nullptr;
    host::Attention(q.data(), pos.data(), FirstSequence(), IdentityTable(), kr.data(), vr.data(),
                    want.data(), pf, T, q_heads,
                    kv_heads, head_dim, capacity, 0, 0.5f, max_splits, 8, abi::kCacheF32, nullptr);
    host::Attention(q.data(), pos.data(), FirstSequence(), IdentityTable(), kb.data(), vb.data(),
                    got.data(), pb, T, q_heads,
                    kv_heads, head_dim, capacity, 0, 0.5f, max_splits, 8, abi::kCacheBF16, nullptr);
    if (max_splits > 1) {
      EXPECT_EQ(parts_bf16, parts_f32);
      host::AttentionMerge(pf, want.data(), T, q_heads, head_dim, max_splits, 8);
      host::AttentionMerge(pb, got.data(), T, q_heads, head_dim, max_splits, 8);
    }
    EXPECT_EQ(got, want) << "max_splits " << max_splits;
  }
}

TEST(RunHostKernelTest, CacheOpsRejectAnUnknownCacheDType) {
  float x[4] = {1, 2, 3, 4}, cache[64] = {}, y[4];
  int32_t positions[1] = {0}, sequences[1] = {0}, table[1] = {0};
  const std::vector<HostArg> write = {
      HostArg::Ptr(x), HostArg::Ptr(x), HostArg::Ptr(positions), HostArg::Ptr(sequences),
      HostArg::Ptr(table), HostArg::Ptr(cache), HostArg::Ptr(cache), HostArg::I32(1),
      HostArg::I32(1), HostArg::I32(4), HostArg::I32(16), HostArg::I32(2)};
  EXPECT_TRUE(ErrorContains(RunHostKernel("kv_write", write),
                            "cache_dtype 2 is neither 0 (f32) nor 1 (bf16)"));
  const std::vector<HostArg> attend = {
      HostArg::Ptr(x), HostArg::Ptr(positions), HostArg::Ptr(sequences), HostArg::Ptr(table),
      HostArg::Ptr(cache), HostArg::Ptr(cache), HostArg::Ptr(y), HostArg::Ptr(nullptr),
      HostArg::I32(1), HostArg::I32(1), HostArg::I32(1), HostArg::I32(4), HostArg::I32(16),
      HostArg::I32(0), HostArg::F32(1.0f), HostArg::I32(1),
      HostArg::I32(0), HostArg::I32(7), HostArg::Ptr(nullptr)};
  EXPECT_TRUE(ErrorContains(RunHostKernel("attention", attend),
                            "cache_dtype 7 is neither 0 (f32) nor 1 (bf16)"));
}

// Attention over a cache [capacity, 1 kv head, 2] filled from `keys`/`values` by position.
struct SmallCache {
  explicit SmallCache(int capacity) : k(capacity * 2, 0.0f), v(capacity * 2, 0.0f), cap(capacity) {}
  void Put(int position, std::vector<float> key, std::vector<float> value) {
    const int slot = position % cap;
    k[slot * 2] = key[0], k[slot * 2 + 1] = key[1];
    v[slot * 2] = value[0], v[slot * 2 + 1] = value[1];
  }
  std::vector<float> Attend(std::vector<float> q, int position, int window, float scale = 1.0f) {
    const std::vector<int32_t> pos = {position};
    std::vector<float> y(2);
    host::Attention(q.data(), pos.data(), FirstSequence(), IdentityTable(), k.data(), v.data(),
                    y.data(), nullptr, 1, 1, 1, 2, cap,
                    window, scale, 1, 0, abi::kCacheF32, nullptr);
    return y;
  }
  std::vector<float> k, v;
  int cap;
};

TEST(HostKernelsTest, AttentionWithOneKeyReturnsItsValue) {
  SmallCache cache(16);
  cache.Put(0, {0.3f, -2}, {7, -8});
  ExpectNear(cache.Attend({1, 5}, 0, 0), {7, -8});
}

TEST(HostKernelsTest, AttentionSoftmaxWeightsValuesByScaledScores) {
  SmallCache cache(16);
  cache.Put(0, {1, 0}, {1, 0});
  cache.Put(1, {0, 0}, {0, 1});
  // scores 2 * [1, 0]: weights e^2 / (e^2 + 1) and 1 / (e^2 + 1).
  const float w0 = static_cast<float>(std::exp(2.0) / (std::exp(2.0) + 1.0));
  ExpectNear(cache.Attend({1, 0}, 1, 0, 2.0f), {w0, 1 - w0});
}

TEST(HostKernelsTest, AttentionIsCausal) {
  SmallCache cache(16);
  cache.Put(0, {0, 0}, {1, 1});
  cache.Put(1, {0, 0}, {3, 3});
  cache.Put(2, {0, 0}, {100, 100});  // in the future of position 1
  ExpectNear(cache.Attend({1, 1}, 1, 0), {2, 2});
}

TEST(HostKernelsTest, SlidingWindowExcludesOldKeys) {
  SmallCache cache(16);
  cache.Put(0, {0, 0}, {100, 100});
  cache.Put(1, {0, 0}, {100, 100});
  cache.Put(2, {0, 0}, {1, 2});
  cache.Put(3, {0, 0}, {3, 4});
  // window 2: position 3 sees keys 2 and 3 only.
  ExpectNear(cache.Attend({1, 1}, 3, 2), {2, 3});
  // window 0: everything up to 3.
  ExpectNear(cache.Attend({1, 1}, 3, 0), {51, 51.5f});
}

TEST(HostKernelsTest, SlidingWindowReadsRingBufferSlots) {
  SmallCache cache(16);               // one block
  cache.Put(16, {0, 0}, {1, 1});      // slot 0
  cache.Put(17, {0, 0}, {3, 5});      // slot 1
  cache.Put(15, {0, 0}, {100, 100});  // slot 15, outside the window of position 17
  ExpectNear(cache.Attend({1, 1}, 17, 2), {2, 3});
}

TEST(HostKernelsTest, AttentionMapsQueryHeadsToKvHeadGroups) {
  // 4 query heads, 2 kv heads, head_dim 1, one cached position: heads 0,1 -> kv 0; 2,3 -> kv 1.
  const std::vector<float> q = {1, 1, 1, 1};
  const std::vector<int32_t> pos = {0};
  std::vector<float> kc(32, 0.0f), vc(32, 0.0f);  // capacity 16
  vc[0] = 10, vc[1] = 20;
  std::vector<float> y(4);
  host::Attention(q.data(), pos.data(), FirstSequence(), IdentityTable(), kc.data(), vc.data(),
                  y.data(), nullptr, 1, 4, 2, 1, 16, 0, 1.0f, 1, 0, abi::kCacheF32, nullptr);
  ExpectNear(y, {10, 10, 20, 20});
}

TEST(HostKernelsTest, AttentionTokensOfOneStepSeeEachOtherCausally) {
  const std::vector<float> q = {0, 0};  // 2 tokens, 1 head, head_dim 1
  const std::vector<int32_t> pos = {0, 1};
  std::vector<float> kc(16, 0.0f), vc(16, 0.0f);  // capacity 16
  vc[0] = 2, vc[1] = 4;
  std::vector<float> y(2);
  host::Attention(q.data(), pos.data(), FirstSequence(), IdentityTable(), kc.data(), vc.data(),
                  y.data(), nullptr, 2, 1, 1, 1, 16, 0, 1.0f, 1, 0, abi::kCacheF32, nullptr);
  ExpectNear(y, {2, 3});
}

// The vision-bidirectional mask (gemma4-architecture.md 6.5, transformers'
// get_block_sequence_ids_for_mask): key j is visible to the query at p iff j > p - W (sliding;
// no bound for W = 0) and (j <= p or block[p] == block[j] >= 0). With q = 0 every visible key
// weighs the same, so the output is the mean of the visible values; the values are the key
// positions. `block` holds one id per position 0..T-1 (-1: text).
std::vector<float> MeanOfVisiblePositions(const std::vector<int>& block, int window) {
  const int n = static_cast<int>(block.size());
  std::vector<float> mean(n);
  for (int p = 0; p < n; ++p) {
    double sum = 0.0;
    int count = 0;
    for (int j = 0; j < n; ++j) {
      const bool in_window = window == 0 || j > p - window;
      const bool same_block = block[p] >= 0 && block[p] == block[j];
      if (in_window && (j <= p || same_block)) sum += j, ++count;
    }
    mean[p] = static_cast<float>(sum / count);
  }
  return mean;
}

// Spark's encoding of the same blocks: last_visible[t] = the last position of t's block (t itself
// outside blocks), as generator.h's LastVisiblePositions computes it from soft-token positions.
std::vector<float> AttendWithBlocks(const std::vector<int>& block, int window, bool with_blocks) {
  const int n = static_cast<int>(block.size());
  std::vector<int32_t> pos(n), last(n);
  for (int t = 0; t < n; ++t) pos[t] = last[t] = t;
  for (int t = n - 1; t >= 0; --t) {
    if (block[t] >= 0 && t + 1 < n && block[t + 1] == block[t]) last[t] = last[t + 1];
  }
  const int capacity = (n + abi::kKvBlockRows - 1) / abi::kKvBlockRows * abi::kKvBlockRows;
  std::vector<float> q(n, 0.0f), kc(capacity), vc(capacity), y(n, -1.0f);
  for (int t = 0; t < n; ++t) vc[t] = static_cast<float>(t);
  host::Attention(q.data(), pos.data(), FirstSequence(), IdentityTable(), kc.data(), vc.data(),
                  y.data(), nullptr, n, 1, 1, 1, capacity, window, 1.0f, 1, 0, abi::kCacheF32, with_blocks ? last.data() : nullptr);
  return y;
}

TEST(HostKernelsTest, VisionBlockTokensSeeTheirWholeBlockOnSlidingLayers) {
  // text, text, image (4 tokens), text, text; a window larger than the prompt.
  const std::vector<int> block = {-1, -1, 0, 0, 0, 0, -1, -1};
  const std::vector<float> y = AttendWithBlocks(block, 16, true);
  ExpectNear(y, MeanOfVisiblePositions(block, 16));
  EXPECT_NEAR(y[2], (0 + 1 + 2 + 3 + 4 + 5) / 6.0f, kTol);  // the block's first token: all of it
  EXPECT_NEAR(y[1], 0.5f, kTol);                             // text before the block: causal
}

TEST(HostKernelsTest, VisionBlockKeepsTheSlidingWindowOneSided) {
  // A window of 3 shorter than the block: the block's last tokens no longer see its first ones,
  // its first tokens see its last ones.
  const std::vector<int> block = {-1, 0, 0, 0, 0, 0, 0, -1};
  ExpectNear(AttendWithBlocks(block, 3, true), MeanOfVisiblePositions(block, 3));
}

TEST(HostKernelsTest, TwoVisionBlocksDoNotSeeEachOther) {
  // Two images separated by a text token (the processor puts boi/eoi tokens between them).
  const std::vector<int> block = {-1, 0, 0, 0, -1, 1, 1, 1, -1};
  ExpectNear(AttendWithBlocks(block, 8, true), MeanOfVisiblePositions(block, 8));
}

TEST(HostKernelsTest, AttentionWithoutLastVisibleIsCausalOverBlocks) {
  // Full-attention layers (no last_visible) and models without the vision mask: causal.
  const std::vector<int> block = {-1, 0, 0, 0, -1};
  const std::vector<int> causal(block.size(), -1);
  ExpectNear(AttendWithBlocks(block, 0, false), MeanOfVisiblePositions(causal, 0));
  ExpectNear(AttendWithBlocks(block, 2, false), MeanOfVisiblePositions(causal, 2));
}

TEST(HostKernelsTest, AttentionKeysOfTheMask) {
  EXPECT_EQ(abi::AttentionKeys(5, 0, 5).begin, 0);   // causal
  EXPECT_EQ(abi::AttentionKeys(5, 0, 5).count, 6);
  EXPECT_EQ(abi::AttentionKeys(5, 3, 5).begin, 3);   // sliding: 3 keys including itself
  EXPECT_EQ(abi::AttentionKeys(5, 3, 5).count, 3);
  EXPECT_EQ(abi::AttentionKeys(5, 3, 9).begin, 3);   // block end 9: keys 3..9
  EXPECT_EQ(abi::AttentionKeys(5, 3, 9).count, 7);
  EXPECT_EQ(abi::AttentionKeys(5, 3, 2).count, 3);   // a last below p does not shrink it
  EXPECT_EQ(abi::AttentionKeys(-1, 3, 4).count, 0);  // no token
}

TEST(HostKernelsTest, AttentionSplitsAsManyAsTheWorkspaceHolds) {
  EXPECT_EQ(abi::AttentionSplits(1, 8, 512), 8);    // decode: all of max_splits
  EXPECT_EQ(abi::AttentionSplits(64, 8, 512), 8);   // 8 x 64 records fit in 512
  EXPECT_EQ(abi::AttentionSplits(65, 8, 512), 1);   // all or nothing: 8 x 65 do not
  EXPECT_EQ(abi::AttentionSplits(257, 8, 512), 1);  // not two per token: unsplit
  EXPECT_EQ(abi::AttentionSplits(512, 8, 512), 1);
  EXPECT_EQ(abi::AttentionSplits(1, 1, 512), 1);    // max_splits 1: never split
  EXPECT_EQ(abi::AttentionSplits(1, 1000, 5000), abi::kMaxAttentionSplits);
  EXPECT_EQ(abi::AttentionSplits(100, 1000, 5000), 1);  // 64 x 100 > 5000
  EXPECT_EQ(abi::AttentionSplits(0, 8, 512), 1);
}

TEST(HostKernelsTest, AttentionSplitRangesCoverEveryKeyOnceInWholeWarpSteps) {
  for (int n : {0, 1, 15, 16, 17, 100, 1023, 1024, 8192}) {
    for (int s : {1, 2, 3, 8, 16, 64}) {
      int next = 0;
      for (int j = 0; j < s; ++j) {
        const abi::KeyRange r = abi::AttentionSplitRange(n, s, j);
        EXPECT_EQ(r.begin, next) << "n=" << n << " s=" << s << " j=" << j;
        EXPECT_GE(r.count, 0);
        if (r.begin + r.count < n) EXPECT_EQ(r.count % 16, 0) << "n=" << n << " s=" << s;
        next = r.begin + r.count;
      }
      EXPECT_EQ(next, n) << "n=" << n << " s=" << s;
    }
  }
}

// Random q, K, V; attention split into key ranges and merged equals attention in one piece.
TEST(HostKernelsTest, SplitAttentionMergesToTheUnsplitResult) {
  const int T = 3, q_heads = 4, kv_heads = 2, head_dim = 8, capacity = 208, window = 0;
  const int max_splits = 8, split_rows = 24;  // 24 / 3 tokens: 8 splits each
  ASSERT_EQ(abi::AttentionSplits(T, max_splits, split_rows), 8);
  std::vector<float> q(T * q_heads * head_dim), kc(capacity * kv_heads * head_dim),
      vc(kc.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * i);
  for (size_t i = 0; i < kc.size(); ++i) kc[i] = std::cos(0.11f * i), vc[i] = std::sin(0.07f * i);
  const std::vector<int32_t> pos = {150, 151, 152};
  std::vector<float> direct(q.size()), merged(q.size(), -7.0f);
  std::vector<float> partials(split_rows * q_heads * abi::AttentionRecordFloats(head_dim), -9.0f);
  host::Attention(q.data(), pos.data(), FirstSequence(), IdentityTable(), kc.data(), vc.data(),
                  direct.data(), nullptr, T, q_heads, kv_heads, head_dim, capacity, window, 1.0f, 1, 0, abi::kCacheF32, nullptr);
  host::Attention(q.data(), pos.data(), FirstSequence(), IdentityTable(), kc.data(), vc.data(),
                  merged.data(), partials.data(), T,
                  q_heads, kv_heads, head_dim, capacity, window, 1.0f, max_splits, split_rows,
                  abi::kCacheF32, nullptr);
  for (float v : merged) EXPECT_EQ(v, -7.0f);  // split: y is the merge's to write
  host::AttentionMerge(partials.data(), merged.data(), T, q_heads, head_dim, max_splits,
                       split_rows);
  for (size_t i = 0; i < q.size(); ++i) EXPECT_NEAR(merged[i], direct[i], 1e-5) << i;
}

TEST(HostKernelsTest, AttentionMergeOfSplitsWithoutKeysIsZero) {
  // Position -1 (not a token): no split has keys, the result is zeros.
  const std::vector<float> q = {1, 2}, kc(32, 1.0f), vc(32, 3.0f);
  const std::vector<int32_t> pos = {-1};
  std::vector<float> partials(4 * abi::AttentionRecordFloats(2), 5.0f), y = {9, 9};
  host::Attention(q.data(), pos.data(), FirstSequence(), IdentityTable(), kc.data(), vc.data(),
                  y.data(), partials.data(), 1, 1, 1, 2, 16, 0, 1.0f, 4, 4, abi::kCacheF32,
                  nullptr);
  host::AttentionMerge(partials.data(), y.data(), 1, 1, 2, 4, 4);
  ExpectNear(y, {0, 0});
}

TEST(HostKernelsTest, AttentionMergeWritesNothingWhenTheStepIsNotSplit) {
  std::vector<float> partials(8, 1.0f), y = {9, 9};
  host::AttentionMerge(partials.data(), y.data(), 1, 1, 2, 1, 0);  // max_splits 1
  ExpectNear(y, {9, 9});
}

struct TopK {
  std::vector<uint16_t> per_expert_scale = Bf16({1, 1, 1, 1});
  std::vector<float> weights;
  std::vector<int32_t> indices;
  void Run(const std::vector<float>& logits, int top_k, float logit_scale = 1.0f) {
    weights.assign(top_k, 0.0f);
    indices.assign(top_k, -1);
    host::MoeTopK(logits.data(), per_expert_scale.data(), weights.data(), indices.data(), 1, 4,
                  top_k, logit_scale);
  }
};

TEST(HostKernelsTest, MoeTopKRenormalisesTheSelectedProbabilities) {
  TopK topk;
  // logits [2, 4, 0, 0] * 0.7071 = [sqrt 2, 2 sqrt 2, 0, 0]: experts 1 then 0.
  topk.Run({2, 4, 0, 0}, 2, static_cast<float>(std::sqrt(0.5)));
  EXPECT_EQ(topk.indices, (std::vector<int32_t>{1, 0}));
  const float w1 = static_cast<float>(1.0 / (1.0 + std::exp(-std::sqrt(2.0))));
  ExpectNear(topk.weights, {w1, 1 - w1});
}

TEST(HostKernelsTest, MoeTopKTiesPickTheLowerIndexAndScalesPerExpert) {
  TopK topk;
  topk.per_expert_scale = Bf16({1, 3, 0.5f, 1});
  topk.Run({1, 2, 2, 0}, 2);
  EXPECT_EQ(topk.indices, (std::vector<int32_t>{1, 2}));
  ExpectNear(topk.weights, {1.5f, 0.25f});
  topk.Run({1, 2, 2, 0}, 1);
  EXPECT_EQ(topk.indices, (std::vector<int32_t>{1}));
  ExpectNear(topk.weights, {3});
}

TEST(HostKernelsTest, MoeTopKScalesLogitsBeforeTheSoftmax) {
  // The same logits with a smaller logit_scale give a flatter distribution: weights of the two
  // selected experts [e^1, e^0.5] / sum at scale 0.5, [e^2, e^1] / sum at scale 1.
  TopK topk;
  topk.Run({0, 2, 1, 0}, 2, 0.5f);
  EXPECT_EQ(topk.indices, (std::vector<int32_t>{1, 2}));
  const float w_half = static_cast<float>(1.0 / (1.0 + std::exp(-0.5)));
  ExpectNear(topk.weights, {w_half, 1 - w_half});
  topk.Run({0, 2, 1, 0}, 2, 1.0f);
  const float w_one = static_cast<float>(1.0 / (1.0 + std::exp(-1.0)));
  ExpectNear(topk.weights, {w_one, 1 - w_one});
}

TEST(HostKernelsTest, MoeGateUpSplitsGateAndUpRows) {
  // hidden 2, intermediate 1, 2 experts: gate_up[e] = [gate row; up row].
  const std::vector<uint16_t> gate_up = Bf16({9, 9, 9, 9, /*expert 1*/ 1, 0, 2, 0});
  const std::vector<float> x = {1, 0};
  const std::vector<int32_t> idx = {1, 5};  // top_k 2; index 5 is out of range -> zero row
  std::vector<float> act(2, 7.0f);
  host::MoeGateUp(x.data(), gate_up.data(), idx.data(), act.data(), 1, 2, 1, 2, 2, abi::kMoeGemv);
  ExpectNear(act, {0.84119199f * 2, 0});
}

TEST(HostKernelsTest, MoeDownSumsWeightedExpertOutputs) {
  // hidden 2, intermediate 1, 2 experts, top_k 2: down[e] [2, 1].
  const std::vector<uint16_t> down = Bf16({1, 2, 3, 4});
  const std::vector<float> act = {1, 2};
  const std::vector<float> w = {0.5f, 0.25f};
  const std::vector<int32_t> idx = {0, 1};
  std::vector<float> y(2);
  host::MoeDown(act.data(), down.data(), w.data(), idx.data(), y.data(), nullptr, 1, 2, 1, 2, 2, abi::kMoeGemv);
  ExpectNear(y, {0.5f * 1 + 0.25f * 3 * 2, 0.5f * 2 + 0.25f * 4 * 2});
}

// A step of kMoeGroupMinTokens tokens with a workspace: each slot's weighted row goes to the
// workspace (zeros for an invalid index), y is left alone, and MoeCombine sums a token's rows.
TEST(HostKernelsTest, GroupedMoeDownWritesSlotRowsThatCombineSums) {
  const int T = abi::kMoeGroupMinTokens;
  ASSERT_TRUE(abi::MoeDownGrouped(abi::kMoeGrouped, true));
  ASSERT_FALSE(abi::MoeDownGrouped(abi::kMoeGemv, true));
  ASSERT_FALSE(abi::MoeDownGrouped(abi::kMoeGrouped, false));
  ASSERT_EQ(abi::MoePathFor(T), abi::kMoeGrouped);
  ASSERT_EQ(abi::MoePathFor(T - 1), abi::kMoeGemv);
  const std::vector<uint16_t> down = Bf16({1, 2, 3, 4});  // hidden 2, intermediate 1, 2 experts
  std::vector<float> act(T * 2), w(T * 2);
  std::vector<int32_t> idx(T * 2);
  for (int s = 0; s < T * 2; ++s) {
    act[s] = 1.0f + s;
    w[s] = 0.25f;
    idx[s] = s % 2;
  }
  idx[3] = -1;  // token 1, k 1: invalid
  std::vector<float> direct(T * 2), y(T * 2, 7.0f), partials(T * 2 * 2, -1.0f);
  host::MoeDown(act.data(), down.data(), w.data(), idx.data(), direct.data(), nullptr, T, 2, 1, 2,
                2, abi::kMoeGemv);
  host::MoeDown(act.data(), down.data(), w.data(), idx.data(), y.data(), partials.data(), T, 2, 1,
                2, 2, abi::kMoeGrouped);
  for (float v : y) EXPECT_EQ(v, 7.0f);
  // Slot 2 (token 1, k 0): expert 0, act 3: 0.25 * 3 * [1, 2].
  EXPECT_FLOAT_EQ(partials[2 * 2], 0.75f);
  EXPECT_FLOAT_EQ(partials[2 * 2 + 1], 1.5f);
  EXPECT_EQ(partials[3 * 2], 0.0f);
  EXPECT_EQ(partials[3 * 2 + 1], 0.0f);
  host::MoeCombine(partials.data(), y.data(), T, 2, 2);
  ExpectNear(y, direct);
}

// moe_combine sums whatever call it is in (the programs run it only after a grouped moe_down).
TEST(HostKernelsTest, MoeCombineSumsEachTokensSlotRows) {
  std::vector<float> partials = {1, 2, 3, 4}, y = {9, 9};  // 1 token, top_k 2, hidden 2
  host::MoeCombine(partials.data(), y.data(), 1, 2, 2);
  ExpectNear(y, {4, 6});
}

TEST(HostKernelsTest, ScatterRowsSkipsNegativeAndTooLargeIndices) {
  std::vector<float> dest = {0, 0, 1, 1, 2, 2};  // [3, 2]
  const std::vector<int32_t> idx = {2, -1, 3, 0, 1};
  const std::vector<float> updates = {10, 11, 20, 21, 30, 31, 40, 41, 50, 51};
  host::ScatterRows(dest.data(), idx.data(), updates.data(), 3, 4, 2);  // update 4 not used
  ExpectNear(dest, {40, 41, 1, 1, 10, 11});
}

TEST(HostKernelsTest, MaskTokensReplacesPlaceholderIds) {
  const std::vector<int32_t> ids = {5, 258880, -1, 258884, 7};
  std::vector<int32_t> y(5);
  host::MaskTokens(ids.data(), y.data(), 5, 258880, 258884, -1, 0);
  EXPECT_EQ(y, (std::vector<int32_t>{5, 0, -1, 0, 7}));
}

TEST(HostKernelsTest, SelectGroupPicksOneGroupPerToken) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // [2, 3, 2]
  std::vector<float> y(4);
  host::SelectGroup(x.data(), y.data(), 2, 3, 2, 1);
  ExpectNear(y, {3, 4, 9, 10});
}

// ---- dispatcher ----

TEST(RunHostKernelTest, EveryAbiOpHasAHostKernel) {
  for (const abi::OpSpec& spec : abi::kOps) {
    const absl::Status status = RunHostKernel(spec.op, {});
    EXPECT_TRUE(ErrorContains(status, "expects")) << spec.op;
  }
}

TEST(RunHostKernelTest, DispatchesWithAbiArguments) {
  std::vector<float> x = {1, 2, 3, 4};
  std::vector<float> y(4);
  const std::vector<HostArg> args = {HostArg::Ptr(x.data()), HostArg::Ptr(y.data()),
                                     HostArg::I32(2), HostArg::I32(2), HostArg::F32(3.0f)};
  ASSERT_TRUE(RunHostKernel("scale", args).ok());
  ExpectNear(y, {3, 6, 9, 12});
}

TEST(RunHostKernelTest, WeightLessRmsNormAcceptsNullWeight) {
  std::vector<float> x = {2, 2};
  std::vector<float> y(2);
  const std::vector<HostArg> args = {
      HostArg::Ptr(x.data()), HostArg::Ptr(nullptr), HostArg::Ptr(y.data()), HostArg::I32(1),
      HostArg::I32(1),        HostArg::I32(2),       HostArg::F32(0.0f)};
  ASSERT_TRUE(RunHostKernel("rms_norm", args).ok());
  ExpectNear(y, {1, 1});
}

TEST(RunHostKernelTest, RejectsUnknownOp) {
  const absl::Status status = RunHostKernel("conv2d", {});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ErrorContains(status, "no host kernel for op 'conv2d'"));
}

TEST(RunHostKernelTest, RejectsWrongArity) {
  const absl::Status status = RunHostKernel("copy", {HostArg::I32(1)});
  EXPECT_TRUE(ErrorContains(status, "'copy': expects 4 arguments, got 1"));
}

TEST(RunHostKernelTest, RejectsWrongKind) {
  float x = 0, y = 0;
  const std::vector<HostArg> args = {HostArg::Ptr(&x), HostArg::Ptr(&y), HostArg::F32(1),
                                     HostArg::I32(1)};
  EXPECT_TRUE(
      ErrorContains(RunHostKernel("copy", args), "argument 2 'num_tokens' must be i32, got f32"));
}

TEST(RunHostKernelTest, RejectsNullPointer) {
  float y = 0;
  const std::vector<HostArg> args = {HostArg::Ptr(nullptr), HostArg::Ptr(&y), HostArg::I32(1),
                                     HostArg::I32(1)};
  EXPECT_TRUE(ErrorContains(RunHostKernel("copy", args), "argument 0 'x' is null"));
}

TEST(RunHostKernelTest, RejectsNegativeSizes) {
  float x = 0, y = 0;
  const std::vector<HostArg> args = {HostArg::Ptr(&x), HostArg::Ptr(&y), HostArg::I32(-1),
                                     HostArg::I32(1)};
  EXPECT_TRUE(
      ErrorContains(RunHostKernel("copy", args), "'num_tokens' must not be negative, got -1"));
}

TEST(RunHostKernelTest, RejectsInconsistentAttentionHeads) {
  float buf[4] = {};
  int32_t pos = 0;
  const std::vector<HostArg> args = {
      HostArg::Ptr(buf), HostArg::Ptr(&pos), HostArg::Ptr(&pos), HostArg::Ptr(&pos),
      HostArg::Ptr(buf), HostArg::Ptr(buf), HostArg::Ptr(buf), HostArg::Ptr(nullptr),
      HostArg::I32(1),   HostArg::I32(3),    HostArg::I32(2),   HostArg::I32(1),
      HostArg::I32(16),  HostArg::I32(0),
      HostArg::F32(1),   HostArg::I32(1),    HostArg::I32(0),   HostArg::I32(abi::kCacheF32),
      HostArg::Ptr(nullptr)};
  EXPECT_TRUE(ErrorContains(RunHostKernel("attention", args),
                            "q_heads must be a multiple of kv_heads >= 1, found 3 and 2"));
}

TEST(RunHostKernelTest, RejectsTopKAboveNumExperts) {
  float buf[4] = {};
  uint16_t w[4] = {};
  int32_t idx[4] = {};
  const std::vector<HostArg> args = {HostArg::Ptr(buf), HostArg::Ptr(w),   HostArg::Ptr(buf),
                                     HostArg::Ptr(idx), HostArg::I32(1),   HostArg::I32(2),
                                     HostArg::I32(3),   HostArg::F32(1)};
  EXPECT_TRUE(
      ErrorContains(RunHostKernel("moe_topk", args), "top_k must be in [1, num_experts = 2], found 3"));
}

}  // namespace
}  // namespace rt
}  // namespace spark
