// y[T, out] = x[T, in] @ w[out, in]^T with x and y activations (f32 or bf16 storage), f32
// accumulation, w in checkpoint layout: bf16 (spark_linear), NVFP4 (spark_linear_nvfp4: packed
// E2M1 codes, e4m3 block scales per 16 inputs, an f32 tensor scale) or FP8 (spark_linear_fp8:
// e4m3 elements, an f32 scale per tensor or per row). Quantized weights are dequantised in
// registers (W4A16 / W8A16): the GEMV reads only their bytes (0.5625 and 1 per weight), the
// tiles convert them to bf16 on the way to shared memory.
//
// Three paths, chosen per call:
//   1. num_tokens >= kMmaMinTokens, vector-friendly sizes (below), 16-byte aligned x and w,
//      blockDim.x == 256: tensor-core tiles with `mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32`
//      (sm_80+, including sm_121a; mma_tile.cuh). A block computes a 64-token x 128-row tile of
//      y, K in steps of 32 through two shared-memory stages (fragments by ldmatrix; the loads of
//      the next steps overlap the MMAs). bf16 weights go to shared memory by cp.async; quantized
//      ones through registers, as code x block scale in bf16 (exact), the tensor or row scale
//      applied to the accumulators. f32 activations are split into two bf16 terms, x = hi + lo,
//      both multiplied with the (exact) bf16 weights: relative error ~2^-17 per product instead
//      of 2^-9 for a plain bf16 cast, at 2x the MMA work; bf16 activations go to shared memory
//      by cp.async as they are and take one MMA per product.
//   2. otherwise, vector-friendly and aligned: decode GEMV, one warp per output row (grid-stride
//      over rows), 16-byte weight loads (8 per lane issued together: 8 bf16, 32 NVFP4 codes or
//      16 FP8 elements each), up to 8 tokens per pass so that a weight row is read from memory
//      once per 8 tokens; warp-shuffle reduction.
//   3. otherwise: the same warp-per-row scheme with scalar loads.
// Vector-friendly: in % 8 == 0 (bf16), in % 32 == 0 (NVFP4: 16 bytes of codes, two block
// scales), in % 16 == 0 (FP8).
// Grid: any size; a good launch is ceil(out/8) blocks for decode and
// ceil(T/64) * ceil(out/128) (or more) for prefill -- both paths grid-stride.
#include "common.cuh"
#include "mma_tile.cuh"

namespace spk {
namespace linear {
namespace {

constexpr int kMmaMinTokens = 16;
constexpr int kGemvUnroll = 8;  // 16-byte weight loads in flight per lane (decode GEMV)

// ---- weight formats ----
// How the paths read one weight format: a 16-byte chunk c of row r (kChunk elements) loaded and
// decoded to f32, a single element, the factor each row's dot product is multiplied by at the
// end (the tensor or row scale of a quantized weight), and the tile path's B source.

struct Bf16Weights {
  static constexpr int kChunk = 8;
  static constexpr int kGroups = 1;  // one running sum over the chunk (no per-group factor)
  static constexpr float kDecodedUnit = 1.0f;  // decode() gives the weights themselves
  const unsigned short* w;
  int in;
  SPK_MEMBER bool vector_ok() const { return in % 8 == 0 && aligned16(w); }
  SPK_MEMBER uint4 load(int64_t r, int c) const { return ldg_u4(w + r * in + c * 8); }
  SPK_MEMBER void decode(const uint4& raw, int64_t, int, float f[kChunk], float*) const {
    unpack_bf16x8(raw, f);
  }
  SPK_MEMBER float element(int64_t r, int k) const { return ldg_bf16(w + r * in + k); }
  SPK_MEMBER float row_scale(int64_t) const { return 1.0f; }
  template <class F>
  SPK_MEMBER void tile(mma::Smem& s, const F& a_row, int64_t n0, int out, mma::Accum& acc) const {
    const auto w_row = [&](int n) -> const unsigned short* {
      return n0 + n < out ? w + (n0 + n) * in : nullptr;
    };
    mma::tile_mma(s, a_row, w_row, in, acc);
  }
};

struct Nvfp4Weights {
  static constexpr int kChunk = 32;
  static constexpr int kGroups = 2;  // the chunk's two 16-code blocks, each with its own scale
  static constexpr float kDecodedUnit = 1.0f;  // the group scales carry the 2^14
  const unsigned char* w;            // [out, in / 2]
  const unsigned char* block_scale;  // [out, in / 16]
  const float* tensor_scale;         // [1]
  int in;
  // 16-byte code loads and 2-byte loads of scale pairs.
  SPK_MEMBER bool vector_ok() const {
    return in % 32 == 0 && aligned16(w) && (reinterpret_cast<uintptr_t>(block_scale) & 1u) == 0;
  }
  SPK_MEMBER uint4 load(int64_t r, int c) const { return ldg_u4(w + r * (in / 2) + c * 16); }
  // The chunk's 32 codes as f32 values times 2^-14 (e2m1x2_to_f32x2_via_f16) and the factors of
  // its two blocks (block scale x 2^14): the GEMV sums each block's products, then scales.
  SPK_MEMBER void decode(const uint4& raw, int64_t r, int c, float f[kChunk],
                         float group_scale[kGroups]) const {
    // Chunk c is blocks 2c and 2c + 1 (in % 32 == 0 and an even block_scale: 2-byte aligned).
    const uint32_t scales =
        __ldg(reinterpret_cast<const unsigned short*>(block_scale + r * (in / 16) + 2 * c));
    group_scale[0] = e4m3_to_f32(scales & 0xffu) * kE2m1ViaF16;
    group_scale[1] = e4m3_to_f32(scales >> 8) * kE2m1ViaF16;
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // Code k of the word (bits 4k .. 4k + 3) is element 8i + k; shifting the word left by
      // 12 - 4k puts codes k and k + 4 at the top of its two halves.
#pragma unroll
      for (int k = 0; k < 4; ++k)
        e2m1x2_to_f32x2_via_f16(words[i] << (12 - 4 * k), f[8 * i + k], f[8 * i + k + 4]);
    }
  }
  SPK_MEMBER float element(int64_t r, int k) const {
    const uint32_t byte = __ldg(w + r * (in / 2) + k / 2);
    return e2m1_to_f32(byte >> ((k & 1) * 4)) *
           e4m3_to_f32(__ldg(block_scale + r * (in / 16) + k / 16));
  }
  SPK_MEMBER float row_scale(int64_t) const { return __ldg(tensor_scale); }
  template <class F>
  SPK_MEMBER void tile(mma::Smem& s, const F& a_row, int64_t n0, int out, mma::Accum& acc) const {
    const auto w_row = [&](int n) -> mma::QuantRow {
      if (n0 + n >= out) return {nullptr, nullptr};
      return {w + (n0 + n) * (in / 2), block_scale + (n0 + n) * (in / 16)};
    };
    mma::Nvfp4Rows<decltype(w_row)> b{w_row};
    mma::tile_mma_from(s, a_row, b, in, acc);
  }
};

struct Fp8Weights {
  static constexpr int kChunk = 16;
  static constexpr int kGroups = 1;
  const unsigned char* w;  // [out, in]
  const float* scale;      // [scale_count]: one per tensor, or one per row
  int scale_count;
  int in;
  SPK_MEMBER bool vector_ok() const { return in % 16 == 0 && aligned16(w); }
  SPK_MEMBER uint4 load(int64_t r, int c) const { return ldg_u4(w + r * in + c * 16); }
  // The chunk's 16 elements as f32 values times 2^-8 (e4m3x2_to_f32x2_via_f16; a chunk holding
  // a NaN code takes the exact per-element decode, so that NaN stays NaN).
  static constexpr float kDecodedUnit = kE4m3ViaF16;
  SPK_MEMBER void decode(const uint4& raw, int64_t, int, float f[kChunk], float*) const {
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
    if (e4m3_has_nan(raw.x) || e4m3_has_nan(raw.y) || e4m3_has_nan(raw.z) ||
        e4m3_has_nan(raw.w)) {
#pragma unroll
      for (int i = 0; i < kChunk; ++i)
        f[i] = e4m3_to_f32(words[i / 4] >> ((i % 4) * 8)) * (1.0f / kE4m3ViaF16);
      return;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      e4m3x2_to_f32x2_via_f16(words[i], f[4 * i], f[4 * i + 2]);
      e4m3x2_to_f32x2_via_f16(words[i] >> 8, f[4 * i + 1], f[4 * i + 3]);
    }
  }
  SPK_MEMBER float element(int64_t r, int k) const { return e4m3_to_f32(__ldg(w + r * in + k)); }
  SPK_MEMBER float row_scale(int64_t r) const { return __ldg(scale + (scale_count == 1 ? 0 : r)); }
  template <class F>
  SPK_MEMBER void tile(mma::Smem& s, const F& a_row, int64_t n0, int out, mma::Accum& acc) const {
    const auto w_row = [&](int n) -> mma::QuantRow {
      return {n0 + n < out ? w + (n0 + n) * in : nullptr, nullptr};
    };
    mma::Fp8Rows<decltype(w_row)> b{w_row};
    mma::tile_mma_from(s, a_row, b, in, acc);
  }
};

// ---- GEMV (decode) ----

// Token tile of TT tokens starting at t0 for row r, vector loads. Lane j handles chunks j, j+32,
// ...
template <int TT, class W>
SPK_DEVICE void gemv_row_vec(ActIn x, const W& w, ActOut y, int t0, int nt, int64_t r, int out,
                             int in) {
  // A step covers kGemvUnroll chunks per lane: all their weight loads are issued before any
  // arithmetic, so a warp has kGemvUnroll x 512 bytes in flight. (The kernel's register count
  // is set by the tensor-core path, ~2 blocks of 256 threads per SM, so decode bandwidth rests
  // on this per-warp parallelism rather than on occupancy.)
  constexpr int kChunk = W::kChunk;
  const int lane = lane_id();
  const int chunks = in / kChunk;
  float acc[TT];
#pragma unroll
  for (int j = 0; j < TT; ++j) acc[j] = 0.0f;
  for (int c0 = 0; c0 < chunks; c0 += 32 * kGemvUnroll) {
    uint4 wv[kGemvUnroll];
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u) {
      const int c = c0 + u * 32 + lane;
      wv[u] = c < chunks ? w.load(r, c) : make_uint4(0u, 0u, 0u, 0u);
    }
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u) {
      const int c = c0 + u * 32 + lane;
      if (c >= chunks) continue;
      float wf[kChunk];
      float group_scale[W::kGroups];
      w.decode(wv[u], r, c, wf, group_scale);
#pragma unroll
      for (int j = 0; j < TT; ++j) {
        if (j < nt) {
          const int64_t x0 = static_cast<int64_t>(t0 + j) * in + c * kChunk;
          if constexpr (W::kGroups == 1) {
#pragma unroll
            for (int g = 0; g < kChunk / 8; ++g) {
              float4 a, b;
              x.ldg8(x0 + g * 8, a, b);
              acc[j] = dot8_acc(wf + g * 8, a, b, acc[j]);
            }
          } else {
            constexpr int kGroup = kChunk / W::kGroups;
#pragma unroll
            for (int q = 0; q < W::kGroups; ++q) {
              float part = 0.0f;
#pragma unroll
              for (int g = 0; g < kGroup / 8; ++g) {
                float4 a, b;
                x.ldg8(x0 + q * kGroup + g * 8, a, b);
                part = dot8_acc(wf + q * kGroup + g * 8, a, b, part);
              }
              acc[j] = fmaf_(part, group_scale[q], acc[j]);
            }
          }
        }
      }
    }
  }
  // decode() gives weights / kDecodedUnit (a power of two: exact).
  const float row_scale = w.row_scale(r) * W::kDecodedUnit;
#pragma unroll
  for (int j = 0; j < TT; ++j) {
    const float s = warp_sum(acc[j]) * row_scale;
    if (lane == 0 && j < nt) y[static_cast<int64_t>(t0 + j) * out + r] = s;
  }
}

template <int TT, class W>
SPK_DEVICE void gemv_row_scalar(ActIn x, const W& w, ActOut y, int t0, int nt, int64_t r,
                                int out, int in) {
  const int lane = lane_id();
  float acc[TT];
#pragma unroll
  for (int j = 0; j < TT; ++j) acc[j] = 0.0f;
  for (int k = lane; k < in; k += 32) {
    const float wk = w.element(r, k);
#pragma unroll
    for (int j = 0; j < TT; ++j)
      if (j < nt) acc[j] = fmaf_(wk, x.ldg(static_cast<int64_t>(t0 + j) * in + k), acc[j]);
  }
  const float row_scale = w.row_scale(r);
#pragma unroll
  for (int j = 0; j < TT; ++j) {
    const float s = warp_sum(acc[j]) * row_scale;
    if (lane == 0 && j < nt) y[static_cast<int64_t>(t0 + j) * out + r] = s;
  }
}

template <int TT, bool kVec, class W>
SPK_DEVICE void gemv(ActIn x, const W& w, ActOut y, int T, int out, int in) {
  for (int64_t r = global_warp(); r < out; r += grid_warps()) {
    for (int t0 = 0; t0 < T; t0 += TT) {
      const int nt = T - t0 < TT ? T - t0 : TT;
      if (kVec)
        gemv_row_vec<TT>(x, w, y, t0, nt, r, out, in);
      else
        gemv_row_scalar<TT>(x, w, y, t0, nt, r, out, in);
    }
  }
}

template <bool kVec, class W>
SPK_DEVICE void gemv_dispatch(ActIn x, const W& w, ActOut y, int T, int out, int in) {
  if (T == 1)
    gemv<1, kVec>(x, w, y, T, out, in);
  else if (T == 2)
    gemv<2, kVec>(x, w, y, T, out, in);
  else if (T <= 4)
    gemv<4, kVec>(x, w, y, T, out, in);
  else
    gemv<8, kVec>(x, w, y, T, out, in);
}

// ---- tensor-core tiles (prefill): mma_tile.cuh ----

template <class W>
SPK_DEVICE void gemm_mma(ActIn x, const W& w, ActOut y, int T, int out, int in) {
  __shared__ __align__(16) mma::Smem smem;
  const int mt = (T + mma::kBM - 1) / mma::kBM;
  const int nt = (out + mma::kBN - 1) / mma::kBN;
  for (int64_t tile = blockIdx.x; tile < static_cast<int64_t>(mt) * nt; tile += gridDim.x) {
    // Consecutive blocks take consecutive token tiles of the same weight tile (L2 reuse).
    const int m0 = static_cast<int>(tile % mt) * mma::kBM;
    const int n0 = static_cast<int>(tile / mt) * mma::kBN;
    const auto x_row = [&](int r) -> ActIn {
      return m0 + r < T ? x + static_cast<int64_t>(m0 + r) * in : ActIn{nullptr};
    };
    mma::Accum acc;
    w.tile(smem, x_row, n0, out, acc);
    mma::for_each_pair(acc, [&](int r, int c, float c0, float c1) {
      const int t = m0 + r, col = n0 + c;
      if (t >= T) return;
      const ActOut yr = y + static_cast<int64_t>(t) * out;
      if (col < out) yr[col] = c0 * w.row_scale(col);
      if (col + 1 < out) yr[col + 1] = c1 * w.row_scale(col + 1);
    });
  }
}

// The whole op for weights of format W.
template <class W>
SPK_DEVICE void run(const void* x_in, const W& w, void* y_out, int num_tokens, int out_features,
                    int in_features) {
  const ActIn x{x_in};
  const ActOut y{y_out};
  if (num_tokens <= 0 || out_features <= 0) return;
  if (in_features <= 0) {  // empty reduction: y = 0
    const int64_t n = static_cast<int64_t>(num_tokens) * out_features;
    for (int64_t i = global_thread(); i < n; i += grid_threads()) y[i] = 0.0f;
    return;
  }
  // 8-element activation loads (16 bytes of bf16, two of 16 of f32) and 16-byte weight loads.
  const bool vec = w.vector_ok() && aligned16(x_in);
  if (vec && num_tokens >= kMmaMinTokens && blockDim.x == 256) {
    gemm_mma(x, w, y, num_tokens, out_features, in_features);
  } else if (vec) {
    gemv_dispatch<true>(x, w, y, num_tokens, out_features, in_features);
  } else {
    gemv_dispatch<false>(x, w, y, num_tokens, out_features, in_features);
  }
}

}  // namespace
}  // namespace linear
}  // namespace spk

SPK_EXPORT void spark_linear(const void* x, const unsigned short* w, void* y, int num_tokens,
                             int out_features, int in_features) {
  spk::linear::run(x, spk::linear::Bf16Weights{w, in_features}, y, num_tokens, out_features,
                   in_features);
}

SPK_EXPORT void spark_linear_nvfp4(const void* x, const unsigned char* w,
                                   const unsigned char* block_scale, const float* tensor_scale,
                                   void* y, int num_tokens, int out_features, int in_features) {
  spk::linear::run(x, spk::linear::Nvfp4Weights{w, block_scale, tensor_scale, in_features}, y,
                   num_tokens, out_features, in_features);
}

SPK_EXPORT void spark_linear_fp8(const void* x, const unsigned char* w, const float* scale,
                                 void* y, int num_tokens, int out_features, int in_features,
                                 int scale_count) {
  spk::linear::run(x, spk::linear::Fp8Weights{w, scale, scale_count, in_features}, y, num_tokens,
                   out_features, in_features);
}

SPARK_CHECK_KERNEL_SIGNATURES()
