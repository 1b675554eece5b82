// y[T, out] = x[T, in] @ w[out, in]^T with w bf16 (checkpoint layout), x and y f32, f32
// accumulation.
//
// Three paths, chosen per call:
//   1. num_tokens >= kMmaMinTokens, in % 8 == 0, 16-byte aligned x and w, blockDim.x == 256:
//      tensor-core tiles with `mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32` (sm_80+, including
//      sm_121a). A block computes a 64-token x 128-row tile of y, K in steps of 32 staged through
//      shared memory (register prefetch of the next step overlaps the MMAs). The f32 activations
//      are split into two bf16 terms, x = hi + lo (hi = bf16(x), lo = bf16(x - hi)), and both are
//      multiplied with the (exact) bf16 weights, so the product carries ~16 mantissa bits of x:
//      relative error ~2^-17 per product instead of 2^-9 for a plain bf16 cast. The cost is 2x
//      MMA work, which prefill (memory- and latency-bound in this simple kernel) hides.
//   2. otherwise, in % 8 == 0 and aligned: decode GEMV, one warp per output row (grid-stride over
//      rows), 16-byte loads of 8 bf16 weights (8 per lane issued together), up to 8 tokens per
//      pass so that a weight row is read from memory once per 8 tokens; warp-shuffle reduction.
//   3. otherwise: the same warp-per-row scheme with scalar loads.
// Grid: any size; a good launch is ceil(out/8) blocks for decode and
// ceil(T/64) * ceil(out/128) (or more) for prefill -- both paths grid-stride.
#include "common.cuh"

namespace spk {
namespace linear {
namespace {

constexpr int kMmaMinTokens = 16;
constexpr int kGemvUnroll = 8;  // 16-byte weight loads in flight per lane (decode GEMV)
constexpr int kBM = 64;    // tokens per tile
constexpr int kBN = 128;   // output rows per tile
constexpr int kBK = 32;    // K per shared-memory stage
constexpr int kPad = 8;    // bf16 padding per shared row (conflict-free fragment loads)
constexpr int kLds = kBK + kPad;  // 40 bf16 = 80 bytes per shared row

// ---- GEMV (decode) ----

// Token tile of TT tokens starting at t0 for row r, vector loads. Lane j handles 8-element
// chunks j, j+32, ...
template <int TT>
SPK_DEVICE void gemv_row_vec(const float* x, const unsigned short* w, float* y, int t0, int nt,
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
          const float* xr = x + static_cast<int64_t>(t0 + j) * in + c * 8;
          const float4 a = ldg_f4(xr), b = ldg_f4(xr + 4);
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
SPK_DEVICE void gemv_row_scalar(const float* x, const unsigned short* w, float* y, int t0, int nt,
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
      if (j < nt) acc[j] = fmaf_(wk, ldg_f(x + static_cast<int64_t>(t0 + j) * in + k), acc[j]);
  }
#pragma unroll
  for (int j = 0; j < TT; ++j) {
    const float s = warp_sum(acc[j]);
    if (lane == 0 && j < nt) y[static_cast<int64_t>(t0 + j) * out + r] = s;
  }
}

template <int TT, bool kVec>
SPK_DEVICE void gemv(const float* x, const unsigned short* w, float* y, int T, int out, int in) {
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
SPK_DEVICE void gemv_dispatch(const float* x, const unsigned short* w, float* y, int T, int out,
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

// ---- tensor-core tiles (prefill) ----

struct TileRegs {
  float4 x[2];  // two float4 of the X tile (64 x 32 f32 = 512 float4 / 256 threads)
  uint4 w[2];   // two uint4 of the W tile (128 x 32 bf16 = 512 uint4 / 256 threads)
};

// Loads the K step starting at k0 of the tile (m0 tokens, n0 rows) into registers, zero-filling
// everything outside [T) x [out) x [in).
SPK_DEVICE void load_tile(TileRegs& g, const float* x, const unsigned short* w, int T, int out,
                          int in, int m0, int n0, int k0) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = tid + i * 256;  // 0..511
    const int row = idx >> 3, c4 = idx & 7;
    const int t = m0 + row, k = k0 + c4 * 4;
    g.x[i] = (t < T && k < in) ? ldg_f4(x + static_cast<int64_t>(t) * in + k)
                               : make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = tid + i * 256;
    const int row = idx >> 2, c8 = idx & 3;
    const int n = n0 + row, k = k0 + c8 * 8;
    g.w[i] = (n < out && k < in) ? ldg_u4(w + static_cast<int64_t>(n) * in + k)
                                 : make_uint4(0u, 0u, 0u, 0u);
  }
}

SPK_DEVICE void store_tile(const TileRegs& g, uint16_t (*xs_hi)[kLds], uint16_t (*xs_lo)[kLds],
                           uint16_t (*ws)[kLds]) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = tid + i * 256;
    const int row = idx >> 3, c4 = idx & 7;
    const float4 v = g.x[i];
    const uint32_t h01 = pack_bf16x2(v.x, v.y), h23 = pack_bf16x2(v.z, v.w);
    const uint32_t l01 = pack_bf16x2(v.x - bf16lo_to_f32(h01), v.y - bf16hi_to_f32(h01));
    const uint32_t l23 = pack_bf16x2(v.z - bf16lo_to_f32(h23), v.w - bf16hi_to_f32(h23));
    *reinterpret_cast<uint2*>(&xs_hi[row][c4 * 4]) = make_uint2(h01, h23);
    *reinterpret_cast<uint2*>(&xs_lo[row][c4 * 4]) = make_uint2(l01, l23);
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = tid + i * 256;
    const int row = idx >> 2, c8 = idx & 3;
    *reinterpret_cast<uint4*>(&ws[row][c8 * 8]) = g.w[i];
  }
}

SPK_DEVICE uint32_t lds32(const uint16_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

SPK_DEVICE void gemm_mma(const float* x, const unsigned short* w, float* y, int T, int out,
                         int in) {
  __shared__ __align__(16) uint16_t xs_hi[kBM][kLds];
  __shared__ __align__(16) uint16_t xs_lo[kBM][kLds];
  __shared__ __align__(16) uint16_t ws[kBN][kLds];

  const int lane = lane_id(), warp = warp_id();
  const int g = lane >> 2, tig = lane & 3;
  const int wm = (warp >> 2) * 32;  // warp's 32 tokens within the tile
  const int wn = (warp & 3) * 32;   // warp's 32 rows within the tile
  const int mt = (T + kBM - 1) / kBM;
  const int nt = (out + kBN - 1) / kBN;
  const int ksteps = (in + kBK - 1) / kBK;

  for (int64_t tile = blockIdx.x; tile < static_cast<int64_t>(mt) * nt; tile += gridDim.x) {
    // Consecutive blocks take consecutive token tiles of the same weight tile (L2 reuse).
    const int m0 = static_cast<int>(tile % mt) * kBM;
    const int n0 = static_cast<int>(tile / mt) * kBN;
    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    TileRegs regs;
    load_tile(regs, x, w, T, out, in, m0, n0, 0);
    for (int ks = 0; ks < ksteps; ++ks) {
      __syncthreads();  // previous step's fragments are consumed
      store_tile(regs, xs_hi, xs_lo, ws);
      __syncthreads();
      if (ks + 1 < ksteps) load_tile(regs, x, w, T, out, in, m0, n0, (ks + 1) * kBK);
#pragma unroll
      for (int kk = 0; kk < kBK; kk += 16) {
        uint32_t ah[2][4], al[2][4];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int r0 = wm + i * 16 + g;
          const int c0 = kk + tig * 2;
          ah[i][0] = lds32(&xs_hi[r0][c0]);
          ah[i][1] = lds32(&xs_hi[r0 + 8][c0]);
          ah[i][2] = lds32(&xs_hi[r0][c0 + 8]);
          ah[i][3] = lds32(&xs_hi[r0 + 8][c0 + 8]);
          al[i][0] = lds32(&xs_lo[r0][c0]);
          al[i][1] = lds32(&xs_lo[r0 + 8][c0]);
          al[i][2] = lds32(&xs_lo[r0][c0 + 8]);
          al[i][3] = lds32(&xs_lo[r0 + 8][c0 + 8]);
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int n = wn + j * 8 + g;
          const uint32_t b0 = lds32(&ws[n][kk + tig * 2]);
          const uint32_t b1 = lds32(&ws[n][kk + tig * 2 + 8]);
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            mma_bf16_16816(acc[i][j], al[i], b0, b1);
            mma_bf16_16816(acc[i][j], ah[i], b0, b1);
          }
        }
      }
    }
    // Epilogue: c0,c1 at (row g, cols 2 tig, 2 tig + 1), c2,c3 at row g + 8.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int col = n0 + wn + j * 8 + tig * 2;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int t = m0 + wm + i * 16 + g + h * 8;
          if (t >= T) continue;
          float* yr = y + static_cast<int64_t>(t) * out;
          if (col < out) yr[col] = acc[i][j][2 * h];
          if (col + 1 < out) yr[col + 1] = acc[i][j][2 * h + 1];
        }
      }
    }
  }
}

}  // namespace
}  // namespace linear
}  // namespace spk

SPK_EXPORT void spark_linear(const float* x, const unsigned short* w, float* y, int num_tokens,
                             int out_features, int in_features) {
  using namespace spk::linear;
  if (num_tokens <= 0 || out_features <= 0) return;
  if (in_features <= 0) {  // empty reduction: y = 0
    const int64_t n = static_cast<int64_t>(num_tokens) * out_features;
    for (int64_t i = spk::global_thread(); i < n; i += spk::grid_threads()) y[i] = 0.0f;
    return;
  }
  const bool vec = (in_features % 8) == 0 && spk::aligned16(x) && spk::aligned16(w);
  if (vec && num_tokens >= kMmaMinTokens && blockDim.x == 256) {
    gemm_mma(x, w, y, num_tokens, out_features, in_features);
  } else if (vec) {
    gemv_dispatch<true>(x, w, y, num_tokens, out_features, in_features);
  } else {
    gemv_dispatch<false>(x, w, y, num_tokens, out_features, in_features);
  }
}
