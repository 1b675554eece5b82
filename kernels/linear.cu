// y[T, out] = x[T, in] @ w[out, in]^T with x and y activations (f32 or bf16 storage), f32
// accumulation, w in checkpoint layout: bf16 (spark_linear), NVFP4 (spark_linear_nvfp4: packed
// E2M1 codes, e4m3 block scales per 16 inputs, an f32 tensor scale) or FP8 (spark_linear_fp8:
// e4m3 elements, an f32 scale per tensor or per row). Quantized weights are dequantised in
// registers (W4A16 / W8A16): the GEMV reads only their bytes (0.5625 and 1 per weight), the
// tiles convert them to bf16 on the way to shared memory.
//
// Four paths, chosen per call:
//   1. 2 <= num_tokens <= kSmallBatchMaxTokens (decode steps of several sequences),
//      vector-friendly sizes (below), 16-byte aligned x and w, blockDim.x == 256: the
//      small-batch GEMV on tensor cores (below): 16, 32 or 64 output rows per block, its warps
//      splitting the input dimension; each weight read once per step, each activation once per
//      block's rows.
//   2. more tokens, the same conditions, and the launch's dynamic shared memory (what the
//      registry gives these calls, abi::CallSharedBytes): tensor-core tiles with
//      `mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32` (sm_80+, including sm_121a; mma_tile.cuh
//      DenseTile, DenseSplitTile). A block computes a 128-token x 128-row tile of y, K in steps
//      of 32 through three shared-memory stages, with bf16 activations, a 64-token one through
//      two with f32 (fragments by ldmatrix; the loads of the next steps overlap the MMAs). bf16
//      weights go to shared memory by cp.async; quantized ones through registers, as code x
//      block scale in bf16 (exact), the tensor or row scale applied to the accumulators.
//      f32 activations are split into two bf16 terms, x = hi + lo, both multiplied with the
//      (exact) bf16 weights: relative error ~2^-17 per product instead of 2^-9 for a plain bf16
//      cast, at 2x the MMA work; bf16 activations go to shared memory by cp.async as they are and
//      take one MMA per product.
//   3. otherwise, vector-friendly and aligned: decode GEMV, a warp per output row or, for the
//      quantized formats at one or two tokens, per 2-4 rows (grid-stride over rows; each
//      activation load serves all of them), 16-byte weight loads (8 per lane issued together:
//      8 bf16, 32 NVFP4 codes or 16 FP8 elements each), up to 8 tokens per pass so that a weight
//      row is read from memory once per 8 tokens; warp-shuffle reduction.
//   4. otherwise: the same warp-per-row scheme with scalar loads.
// Vector-friendly: in % 8 == 0 (bf16), in % 32 == 0 (NVFP4: 16 bytes of codes, two block
// scales), in % 16 == 0 (FP8).
// Grid: any size; a good launch is ceil(out/8) blocks for decode and
// ceil(T/64) * ceil(out/128) (or more) for prefill -- every path grid-strides.
#include "common.cuh"
#include "mma_tile.cuh"
#include "weight_formats.cuh"

namespace spk {
namespace linear {
namespace {

constexpr int kGemvUnroll = 8;  // 16-byte weight loads in flight per lane (decode GEMV)
// Past it the tiles are faster (H200, 31B shapes); the registry gives larger calls the tiles'
// shared memory.
constexpr int kSmallBatchMaxTokens = spark::abi::kLinearSmallBatchMaxTokens;

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

// ---- small-batch GEMV on tensor cores (decode steps of several sequences) ----
//
// The warp-per-row GEMV loads every activation once per output row: at 8 tokens those loads,
// not the weights, bound it (a 31B decode step of 8 tokens took 4.8x one token's time on the
// H200). Here a block of 8 warps takes 16 M output rows (M = 1, 2 or 4 m-tiles, as the
// format's registers allow) for all tokens: its warps split the input dimension, and each
// multiplies its part on tensor cores with each m-tile's 16 weight rows as the A operand of
// mma.m16n8k16 and 8 tokens as the B operand (NT such n-tiles), so that every weight is read
// from memory once per step and every activation once per 16 M rows. M is the largest that still
// gives every multiprocessor two blocks' work (small_batch_m_tiles): with 16 rows a block read
// as many activation bytes (f32, 8 tokens) as weight bytes, and 3.5x as many as NVFP4 weight
// bytes.
// A dot product does not care in which order k runs, so a fragment need not hold consecutive k:
// lane (g, q) (g = lane / 4, q = lane % 4) loads chunk q of a quad of chunks, of weight rows g
// and g + 8 of each m-tile and of token g, the loads the GEMV makes (16 bytes of each row per
// lane, a quad covering 64 contiguous bytes), and its k-step s takes elements 4s .. 4s + 3 of
// those chunks, the same elements in its A words (k slots 2q, 2q + 1 and 2q + 8, 2q + 9) as in
// its B words. Weights become bf16 exactly (bf16 as they are, NVFP4 code x block scale, FP8
// elements: at most 6 significant bits); f32 activations are split into hi + lo bf16 terms (two
// MMAs, as the tiles do: ~2^-17 relative error per product), bf16 activations take one. The 8
// warps' partial tiles are summed in shared memory in warp order (deterministic), the row scale
// applied last.

constexpr int kSmallBatchWarps = 8;   // warps of a block, splitting the input dimension
// m-tiles per block at most, as the entry's registers allow (under 128, so that its one-token
// GEMV keeps two blocks per multiprocessor; ptxas, sm_90a and sm_121a): 4 for bf16, 2 for NVFP4
// (4 took 255 registers), 1 for FP8 (2 took 219).
template <class W>
constexpr int kSmallBatchMaxMTiles = W::kChunk == 8 ? 4 : W::kChunk == 32 ? 2 : 1;
// Chunk quads a warp loads (for each of its M m-tiles) before multiplying: 4 / M for bf16
// (8 weights per 16-byte chunk), 1 for the formats whose chunks hold more (FP8 16, NVFP4 32),
// so that the loads in flight stay 8 x 16 bytes per lane (bf16) and the entry's registers under
// 128. (With 4 NVFP4 quads the entry needed 210 registers instead of 128, halving the occupancy
// of its one-token GEMV: 0.072 -> 0.106 ms on the H200.)
template <class W, int M>
constexpr int kSmallBatchUnroll = W::kChunk <= 8 ? 4 / M : 1;

// m-tiles per block for `out` rows: the largest power of two up to max_m whose blocks still
// number at least two per multiprocessor (the resident blocks of the entry), so that fewer, wider
// blocks do not leave multiprocessors idle.
SPK_DEVICE int small_batch_m_tiles(int out, int max_m) {
  const int64_t blocks_wanted = 2 * static_cast<int64_t>(multiprocessor_count());
  for (int m = max_m; m > 1; m /= 2) {
    if ((static_cast<int64_t>(out) + 16 * m - 1) / (16 * m) >= blocks_wanted) return m;
  }
  return 1;
}

// The 8 weights of group g of a loaded chunk as 4 bf16x2 words (element order, lower k in the low
// half), in units of 1 / kDecodedUnit with the group's scale applied: exact in bf16.
SPK_DEVICE void weight_words(const Bf16Weights&, const uint4& raw, int, float, uint32_t out[4]) {
  out[0] = raw.x;
  out[1] = raw.y;
  out[2] = raw.z;
  out[3] = raw.w;
}
template <class W>
SPK_DEVICE void weight_words(const W& w, const uint4& raw, int g, float scale, uint32_t out[4]) {
  float f[8];
  w.decode8(raw, g, f);
#pragma unroll
  for (int i = 0; i < 4; ++i) out[i] = pack_bf16x2(f[2 * i] * scale, f[2 * i + 1] * scale);
}

// Activations i .. i + 7 as 4 bf16x2 words: hi (and, for f32 storage, lo = x - hi); zeros when
// !real.
SPK_DEVICE void activation_words(ActIn x, int64_t i, bool real, uint32_t hi[4], uint32_t lo[4]) {
  if (!real) {
#pragma unroll
    for (int j = 0; j < 4; ++j) hi[j] = lo[j] = 0u;
  } else if (act_bf16()) {
    const uint4 v = ldg_u4(x.bf16() + i);
    hi[0] = v.x;
    hi[1] = v.y;
    hi[2] = v.z;
    hi[3] = v.w;
  } else {
    const float4 a = ldg_f4(x.f32() + i), b = ldg_f4(x.f32() + i + 4);
    const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) split_bf16x2(v[2 * j], v[2 * j + 1], hi[j], lo[j]);
  }
}

// This warp's part of rows r0 .. r0 + 16 M - 1 x tokens 0 .. 8 NT - 1 (C fragments: acc[m][nt]
// for m-tile m), in units of 1 / kDecodedUnit without the row scale. Rows at or past `out` read
// the last row and are not stored; tokens at or past T and chunks past the end are zeros (the
// MMAs still run: mma.sync needs every lane).
template <int M, int NT, class W>
SPK_DEVICE void small_batch_part(ActIn x, const W& w, int T, int64_t r0, int out, int in,
                                 float (&acc)[M][NT][4]) {
  constexpr int kSetsPerGroup = W::kChunk / W::kGroups / 8;
  constexpr int kStride = kSmallBatchWarps * 4;  // chunks between a warp's quads
  const int lane = lane_id(), g = lane >> 2, q = lane & 3;
  int64_t rows[M][2];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = r0 + 16 * m + 8 * h + g;
      rows[m][h] = r < out ? r : out - 1;
    }
  const int chunks = in / W::kChunk;
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[m][nt][e] = 0.0f;
  constexpr int kUnroll = kSmallBatchUnroll<W, M>;
  for (int base = warp_id() * 4; base < chunks; base += kStride * kUnroll) {
    uint4 raw[kUnroll][M][2];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = base + u * kStride + q;
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          raw[u][m][h] = c < chunks ? w.load(rows[m][h], c) : make_uint4(0u, 0u, 0u, 0u);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (base + u * kStride >= chunks) break;  // warp-uniform: no lane of the quad is real
      const int c = base + u * kStride + q;
      const bool real = c < chunks;
      float scale[M][2][W::kGroups];
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int grp = 0; grp < W::kGroups; ++grp) scale[m][h][grp] = 1.0f;
          if (real) w.group_scales(rows[m][h], c, scale[m][h]);
        }
#pragma unroll
      for (int set = 0; set < W::kChunk / 8; ++set) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int t = nt * 8 + g;
          uint32_t hi[4], lo[4];
          activation_words(x, static_cast<int64_t>(t) * in + static_cast<int64_t>(c) * W::kChunk +
                                  set * 8,
                           real && t < T, hi, lo);
          // The token fragments serve every m-tile.
#pragma unroll
          for (int m = 0; m < M; ++m) {
            uint32_t a_words[2][4];
#pragma unroll
            for (int h = 0; h < 2; ++h)
              weight_words(w, raw[u][m][h], set, scale[m][h][set / kSetsPerGroup], a_words[h]);
#pragma unroll
            for (int s = 0; s < 2; ++s) {
              const uint32_t a[4] = {a_words[0][2 * s], a_words[1][2 * s], a_words[0][2 * s + 1],
                                     a_words[1][2 * s + 1]};
              if (!act_bf16()) mma_bf16_16816(acc[m][nt], a, lo[2 * s], lo[2 * s + 1]);
              mma_bf16_16816(acc[m][nt], a, hi[2 * s], hi[2 * s + 1]);
            }
          }
        }
      }
    }
  }
}

// The whole op on the small-batch path (2 <= T <= 8 NT), tiles of 16 M rows grid-stride; `red`
// is shared memory for kSmallBatchWarps x NT x 128 floats (one m-tile's partials at a time).
template <int M, int NT, class W>
SPK_DEVICE void small_batch(ActIn x, const W& w, ActOut y, int T, int out, int in, float* red) {
  constexpr int kTileFloats = NT * 4 * 32;  // one warp's fragments of one m-tile
  const int64_t tiles = (static_cast<int64_t>(out) + 16 * M - 1) / (16 * M);
  const int lane = lane_id(), warp = warp_id();
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    float acc[M][NT][4];
    small_batch_part<M, NT>(x, w, T, tile * 16 * M, out, in, acc);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const int64_t r0 = (tile * M + m) * 16;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          red[warp * kTileFloats + (nt * 4 + e) * 32 + lane] = acc[m][nt][e];
      __syncthreads();
      for (int i = static_cast<int>(threadIdx.x); i < kTileFloats; i += blockDim.x) {
        float sum = 0.0f;
        for (int k = 0; k < kSmallBatchWarps; ++k) sum += red[k * kTileFloats + i];
        // Fragment element e of lane l: row g (+ 8 for e >= 2), token 2q + (e & 1) of its n-tile.
        const int l = i & 31, e = (i >> 5) & 3, nt = i >> 7;
        const int64_t row = r0 + (l >> 2) + (e >= 2 ? 8 : 0);
        const int t = nt * 8 + 2 * (l & 3) + (e & 1);
        if (row < out && t < T) {
          y[static_cast<int64_t>(t) * out + row] = sum * (w.row_scale(row) * W::kDecodedUnit);
        }
      }
      __syncthreads();  // red is rewritten by the next m-tile
    }
  }
}

template <int NT, class W>
SPK_DEVICE void small_batch_m(ActIn x, const W& w, ActOut y, int T, int out, int in, float* red) {
  constexpr int kMaxM = kSmallBatchMaxMTiles<W>;
  const int m = small_batch_m_tiles(out, kMaxM);
  if constexpr (kMaxM >= 4) {
    if (m == 4) return small_batch<4, NT>(x, w, y, T, out, in, red);
  }
  if constexpr (kMaxM >= 2) {
    if (m == 2) return small_batch<2, NT>(x, w, y, T, out, in, red);
  }
  small_batch<1, NT>(x, w, y, T, out, in, red);
}

template <class W>
SPK_DEVICE void small_batch_dispatch(ActIn x, const W& w, ActOut y, int T, int out, int in) {
  // One m-tile's partial tiles of the warps (static: calls of these sizes get no dynamic shared
  // memory).
  __shared__ __align__(16) float red[kSmallBatchWarps * 2 * 128];
  static_assert(kSmallBatchMaxTokens <= 16, "n-tiles");
  if (T <= 8)
    small_batch_m<1>(x, w, y, T, out, in, red);
  else
    small_batch_m<2>(x, w, y, T, out, in, red);
}

// ---- tensor-core tiles (prefill): mma_tile.cuh ----

// y over tiles of shape Tile, in the launch's dynamic shared memory.
template <class Tile, class W>
SPK_DEVICE void gemm_tiles(ActIn x, const W& w, ActOut y, int T, int out, int in) {
  mma::Smem<Tile>& smem = *reinterpret_cast<mma::Smem<Tile>*>(dynamic_shared());
  const int mt = (T + Tile::kBM - 1) / Tile::kBM;
  const int nt = (out + mma::kBN - 1) / mma::kBN;
  for (int64_t tile = blockIdx.x; tile < static_cast<int64_t>(mt) * nt; tile += gridDim.x) {
    // Consecutive blocks take consecutive token tiles of the same weight tile (L2 reuse).
    const int m0 = static_cast<int>(tile % mt) * Tile::kBM;
    const int n0 = static_cast<int>(tile / mt) * mma::kBN;
    const auto x_row = [&](int r) -> ActIn { return x + static_cast<int64_t>(m0 + r) * in; };
    mma::Accum<Tile> acc;
    w.tile(smem, x_row, mma::rows_in_tile(m0, T, Tile::kBM), n0, out, acc);
    mma::for_each_pair(acc, [&](int r, int c, float c0, float c1) {
      const int t = m0 + r, col = n0 + c;
      if (t >= T) return;
      const ActOut yr = y + static_cast<int64_t>(t) * out;
      if (col < out) yr[col] = c0 * w.row_scale(col);
      if (col + 1 < out) yr[col + 1] = c1 * w.row_scale(col + 1);
    });
  }
}

// f(Tile{}) with the tile shape of the module's activation precision (mma_tile.cuh): 128 x 128
// for bf16, 64 x 128 for f32 (hi and lo halves).
template <class F>
SPK_DEVICE void with_dense_tile(F&& f) {
  if (act_bf16()) {
    f(mma::DenseTile{});
  } else {
    f(mma::DenseSplitTile{});
  }
}

template <class W>
SPK_DEVICE void gemm_mma(ActIn x, const W& w, ActOut y, int T, int out, int in) {
  with_dense_tile([&](auto tile) { gemm_tiles<decltype(tile)>(x, w, y, T, out, in); });
}

// Whether the launch gave the dense tiles their shared memory.
SPK_DEVICE bool has_tile_memory() {
  bool enough = false;
  with_dense_tile([&](auto tile) {
    enough = dynamic_shared_bytes() >= sizeof(mma::Smem<decltype(tile)>);
  });
  return enough;
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
  // The tiles' stages are in the dynamic shared memory the registry gives calls of their sizes
  // (abi::CallSharedBytes); a launch given less (none of spark's) takes the GEMV.
  if (vec && num_tokens >= 2 && num_tokens <= kSmallBatchMaxTokens && blockDim.x == 256) {
    small_batch_dispatch(x, w, y, num_tokens, out_features, in_features);
  } else if (vec && num_tokens > kSmallBatchMaxTokens && blockDim.x == 256 && has_tile_memory()) {
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
