// y[T, out] = x[T, in] @ w[out, in]^T with w bf16 (checkpoint layout), x and y activations (f32 or
// bf16 storage), f32 accumulation.
//
// Three paths, chosen per call:
//   1. num_tokens >= kMmaMinTokens, in % 8 == 0, 16-byte aligned x and w, blockDim.x == 256:
//      tensor-core tiles with `mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32` (sm_80+, including
//      sm_121a; mma_tile.cuh). A block computes a 64-token x 128-row tile of y, K in steps of 32
//      through two shared-memory stages (weights by cp.async, activations through registers,
//      fragments by ldmatrix; the loads of the next steps overlap the MMAs). f32 activations
//      are split into two bf16 terms, x = hi + lo, both multiplied with the (exact) bf16
//      weights: relative error ~2^-17 per product instead of 2^-9 for a plain bf16 cast, at 2x
//      the MMA work; bf16 activations go to shared memory by cp.async as they are and take one
//      MMA per product.
//   2. otherwise, in % 8 == 0 and aligned: decode GEMV, one warp per output row (grid-stride over
//      rows), 16-byte loads of 8 bf16 weights (8 per lane issued together), up to 8 tokens per
//      pass so that a weight row is read from memory once per 8 tokens; warp-shuffle reduction.
//   3. otherwise: the same warp-per-row scheme with scalar loads.
// Grid: any size; a good launch is ceil(out/8) blocks for decode and
// ceil(T/64) * ceil(out/128) (or more) for prefill -- both paths grid-stride.
#include "common.cuh"
#include "mma_tile.cuh"

namespace spk {
namespace linear {
namespace {

constexpr int kMmaMinTokens = 16;
constexpr int kGemvUnroll = 8;  // 16-byte weight loads in flight per lane (decode GEMV)

// ---- GEMV (decode) ----

// Token tile of TT tokens starting at t0 for row r, vector loads. Lane j handles 8-element
// chunks j, j+32, ...
template <int TT>
SPK_DEVICE void gemv_row_vec(ActIn x, const unsigned short* w, ActOut y, int t0, int nt,
                             int64_t r, int out, int in) {
  // A step covers kGemvUnroll chunks per lane: all their weight loads are issued before any
  // arithmetic, so a warp has kGemvUnroll x 512 bytes in flight. (The kernel's register count
  // is set by the tensor-core path, ~2 blocks of 256 threads per SM, so decode bandwidth rests
  // on this per-warp parallelism rather than on occupancy.)
  const int lane = lane_id();
  const int c8 = in / 8;
  const unsigned short* wr = w + r * in;
  float acc[TT];
#pragma unroll
  for (int j = 0; j < TT; ++j) acc[j] = 0.0f;
  for (int c0 = 0; c0 < c8; c0 += 32 * kGemvUnroll) {
    uint4 wv[kGemvUnroll];
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u) {
      const int c = c0 + u * 32 + lane;
      wv[u] = c < c8 ? ldg_u4(wr + c * 8) : make_uint4(0u, 0u, 0u, 0u);
    }
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u) {
      const int c = c0 + u * 32 + lane;
      if (c >= c8) continue;
      float wf[8];
      unpack_bf16x8(wv[u], wf);
#pragma unroll
      for (int j = 0; j < TT; ++j) {
        if (j < nt) {
          float4 a, b;
          x.ldg8(static_cast<int64_t>(t0 + j) * in + c * 8, a, b);
          acc[j] = dot8_acc(wf, a, b, acc[j]);
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < TT; ++j) {
    const float s = warp_sum(acc[j]);
    if (lane == 0 && j < nt) y[static_cast<int64_t>(t0 + j) * out + r] = s;
  }
}

template <int TT>
SPK_DEVICE void gemv_row_scalar(ActIn x, const unsigned short* w, ActOut y, int t0, int nt,
                                int64_t r, int out, int in) {
  const int lane = lane_id();
  const unsigned short* wr = w + r * in;
  float acc[TT];
#pragma unroll
  for (int j = 0; j < TT; ++j) acc[j] = 0.0f;
  for (int k = lane; k < in; k += 32) {
    const float wk = ldg_bf16(wr + k);
#pragma unroll
    for (int j = 0; j < TT; ++j)
      if (j < nt) acc[j] = fmaf_(wk, x.ldg(static_cast<int64_t>(t0 + j) * in + k), acc[j]);
  }
#pragma unroll
  for (int j = 0; j < TT; ++j) {
    const float s = warp_sum(acc[j]);
    if (lane == 0 && j < nt) y[static_cast<int64_t>(t0 + j) * out + r] = s;
  }
}

template <int TT, bool kVec>
SPK_DEVICE void gemv(ActIn x, const unsigned short* w, ActOut y, int T, int out, int in) {
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

template <bool kVec>
SPK_DEVICE void gemv_dispatch(ActIn x, const unsigned short* w, ActOut y, int T, int out,
                              int in) {
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

SPK_DEVICE void gemm_mma(ActIn x, const unsigned short* w, ActOut y, int T, int out, int in) {
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
    const auto w_row = [&](int n) -> const unsigned short* {
      return n0 + n < out ? w + static_cast<int64_t>(n0 + n) * in : nullptr;
    };
    mma::Accum acc;
    mma::tile_mma(smem, x_row, w_row, in, acc);
    mma::for_each_pair(acc, [&](int r, int c, float c0, float c1) {
      const int t = m0 + r, col = n0 + c;
      if (t >= T) return;
      const ActOut yr = y + static_cast<int64_t>(t) * out;
      if (col < out) yr[col] = c0;
      if (col + 1 < out) yr[col + 1] = c1;
    });
  }
}

}  // namespace
}  // namespace linear
}  // namespace spk

SPK_EXPORT void spark_linear(const void* x_in, const unsigned short* w, void* y_out,
                             int num_tokens, int out_features, int in_features) {
  using namespace spk::linear;
  const spk::ActIn x{x_in};
  const spk::ActOut y{y_out};
  if (num_tokens <= 0 || out_features <= 0) return;
  if (in_features <= 0) {  // empty reduction: y = 0
    const int64_t n = static_cast<int64_t>(num_tokens) * out_features;
    for (int64_t i = spk::global_thread(); i < n; i += spk::grid_threads()) y[i] = 0.0f;
    return;
  }
  // 8-element activation loads (16 bytes of bf16, two of 16 of f32) and 16-byte weight loads.
  const bool vec = (in_features % 8) == 0 && spk::aligned16(x_in) && spk::aligned16(w);
  if (vec && num_tokens >= kMmaMinTokens && blockDim.x == 256) {
    gemm_mma(x, w, y, num_tokens, out_features, in_features);
  } else if (vec) {
    gemv_dispatch<true>(x, w, y, num_tokens, out_features, in_features);
  } else {
    gemv_dispatch<false>(x, w, y, num_tokens, out_features, in_features);
  }
}

SPARK_CHECK_KERNEL_SIGNATURES()
