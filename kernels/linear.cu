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
//   2. otherwise, vector-friendly and aligned: decode GEMV, a warp per output row or, for the
//      quantized formats at one or two tokens, per 2-4 rows (grid-stride over rows; each
//      activation load serves all of them), 16-byte weight loads (8 per lane issued together:
//      8 bf16, 32 NVFP4 codes or 16 FP8 elements each), up to 8 tokens per pass so that a weight
//      row is read from memory once per 8 tokens; warp-shuffle reduction.
//   3. otherwise: the same warp-per-row scheme with scalar loads.
// Vector-friendly: in % 8 == 0 (bf16), in % 32 == 0 (NVFP4: 16 bytes of codes, two block
// scales), in % 16 == 0 (FP8).
// Grid: any size; a good launch is ceil(out/8) blocks for decode and
// ceil(T/64) * ceil(out/128) (or more) for prefill -- both paths grid-stride.
#include "common.cuh"
#include "mma_tile.cuh"
#include "weight_formats.cuh"

namespace spk {
namespace linear {
namespace {

constexpr int kMmaMinTokens = 16;
constexpr int kGemvUnroll = 8;  // 16-byte weight loads in flight per lane (decode GEMV)

// ---- weight formats: weight_formats.cuh ----
using weights::Bf16Weights;
using weights::Fp8Weights;
using weights::Nvfp4Weights;

// ---- GEMV (decode) ----

// Token tile of TT tokens starting at t0 for the R rows r0 .. r0 + R - 1 (those below `out`),
// vector loads. Lane j handles chunks j, j+32, ... of every row.
template <int TT, int R, class W>
SPK_DEVICE void gemv_rows_vec(ActIn x, const W& w, ActOut y, int t0, int nt, int64_t r0, int out,
                              int in) {
  // A step covers kGemvUnroll chunks per lane (kGemvUnroll / R of each row): all their weight
  // loads are issued before any arithmetic, so a warp has kGemvUnroll x 512 bytes in flight.
  // (The kernel's register count is set by the tensor-core path, ~2 blocks of 256 threads per
  // SM, so decode bandwidth rests on this per-warp parallelism rather than on occupancy.) Each
  // 8-element group of activations is loaded once for the R rows: with a lane's chunk 32
  // elements wide (NVFP4), the activation loads, not the weights, would bound a one-row warp.
  constexpr int kChunk = W::kChunk, kGroups = W::kGroups;
  constexpr int kU = kGemvUnroll / R;
  constexpr int kSetsPerGroup = kChunk / kGroups / 8;
  static_assert(kGemvUnroll % R == 0 && kChunk % (8 * kGroups) == 0, "GEMV shape");
  const int lane = lane_id();
  const int chunks = in / kChunk;
  int64_t row[R];  // rows past the end read the last row (valid memory) and store nothing
#pragma unroll
  for (int q = 0; q < R; ++q) row[q] = r0 + q < out ? r0 + q : out - 1;
  float acc[R][TT];
#pragma unroll
  for (int q = 0; q < R; ++q)
#pragma unroll
    for (int j = 0; j < TT; ++j) acc[q][j] = 0.0f;
  for (int c0 = 0; c0 < chunks; c0 += 32 * kU) {
    uint4 wv[R][kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int c = c0 + u * 32 + lane;
#pragma unroll
      for (int q = 0; q < R; ++q)
        wv[q][u] = c < chunks ? w.load(row[q], c) : make_uint4(0u, 0u, 0u, 0u);
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int c = c0 + u * 32 + lane;
      if (c >= chunks) continue;
      float scale[R][kGroups];
#pragma unroll
      for (int q = 0; q < R; ++q) w.group_scales(row[q], c, scale[q]);
#pragma unroll
      for (int grp = 0; grp < kGroups; ++grp) {
        // One scale group: with kGroups == 1 the products go straight into acc (one running sum
        // in index order, as the MoE paths sum); otherwise into part, scaled at the group's end.
        float part[R][TT];
#pragma unroll
        for (int q = 0; q < R; ++q)
#pragma unroll
          for (int j = 0; j < TT; ++j) part[q][j] = kGroups == 1 ? acc[q][j] : 0.0f;
#pragma unroll
        for (int set = 0; set < kSetsPerGroup; ++set) {
          const int g = grp * kSetsPerGroup + set;
          const int64_t xk = static_cast<int64_t>(c) * kChunk + g * 8;
          if constexpr (R == 1) {
            // One row: the group's activations token by token (8 registers at a time).
            float f[8];
            w.decode8(wv[0][u], g, f);
#pragma unroll
            for (int j = 0; j < TT; ++j) {
              if (j < nt) {
                float4 a, b;
                x.ldg8(static_cast<int64_t>(t0 + j) * in + xk, a, b);
                part[0][j] = dot8_acc(f, a, b, part[0][j]);
              }
            }
          } else {
            // R rows (TT <= 2): the group's activations of every token first, then each row's
            // weights decoded in turn (8 registers of them at a time, not R x 8).
            float4 a[TT], b[TT];
#pragma unroll
            for (int j = 0; j < TT; ++j)
              if (j < nt) x.ldg8(static_cast<int64_t>(t0 + j) * in + xk, a[j], b[j]);
#pragma unroll
            for (int q = 0; q < R; ++q) {
              float f[8];
              w.decode8(wv[q][u], g, f);
#pragma unroll
              for (int j = 0; j < TT; ++j)
                if (j < nt) part[q][j] = dot8_acc(f, a[j], b[j], part[q][j]);
            }
          }
        }
#pragma unroll
        for (int q = 0; q < R; ++q)
#pragma unroll
          for (int j = 0; j < TT; ++j)
            acc[q][j] = kGroups == 1 ? part[q][j] : fmaf_(part[q][j], scale[q][grp], acc[q][j]);
      }
    }
  }
#pragma unroll
  for (int q = 0; q < R; ++q) {
    // decode8() gives weights / kDecodedUnit (a power of two: exact).
    const float row_scale = w.row_scale(row[q]) * W::kDecodedUnit;
#pragma unroll
    for (int j = 0; j < TT; ++j) {
      const float s = warp_sum(acc[q][j]) * row_scale;
      if (lane == 0 && j < nt && r0 + q < out) y[static_cast<int64_t>(t0 + j) * out + r0 + q] = s;
    }
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

// Rows per warp of the vector GEMV: the format's kGemvRows at one token, fewer as the token tile
// grows (its accumulators and decoded weights are R x TT and R x 8 registers).
// (A variable template: nvcc refuses a constexpr host function in device code.)
template <int TT, class W>
constexpr int kGemvRowsAt =
    TT == 1 ? W::kGemvRows : TT == 2 && W::kGemvRows >= 2 ? W::kGemvRows / 2 : 1;

template <int TT, bool kVec, class W>
SPK_DEVICE void gemv(ActIn x, const W& w, ActOut y, int T, int out, int in) {
  constexpr int R = kVec ? kGemvRowsAt<TT, W> : 1;
  for (int64_t r0 = global_warp() * R; r0 < out; r0 += grid_warps() * R) {
    for (int t0 = 0; t0 < T; t0 += TT) {
      const int nt = T - t0 < TT ? T - t0 : TT;
      if (kVec)
        gemv_rows_vec<TT, R>(x, w, y, t0, nt, r0, out, in);
      else
        gemv_row_scalar<TT>(x, w, y, t0, nt, r0, out, in);
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
    const auto x_row = [&](int r) -> ActIn { return x + static_cast<int64_t>(m0 + r) * in; };
    mma::Accum acc;
    w.tile(smem, x_row, mma::rows_in_tile(m0, T, mma::kBM), n0, out, acc);
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
  // One tensor scale for all rows (run() returns before reading it when out_features <= 0).
  spk::linear::run(x,
                   spk::linear::Nvfp4Weights{w, block_scale, tensor_scale, out_features,
                                             in_features},
                   y, num_tokens, out_features, in_features);
}

SPK_EXPORT void spark_linear_fp8(const void* x, const unsigned char* w, const float* scale,
                                 void* y, int num_tokens, int out_features, int in_features,
                                 int scale_count) {
  const int rows_per_scale = scale_count == 1 ? out_features : 1;
  spk::linear::run(x, spk::linear::Fp8Weights{w, scale, rows_per_scale, in_features}, y,
                   num_tokens, out_features, in_features);
}

SPARK_CHECK_KERNEL_SIGNATURES()
