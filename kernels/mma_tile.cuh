// One 64 x 128 output tile of C = A @ B^T on tensor cores (`mma.sync.m16n8k16` bf16, f32
// accumulation), shared by the dense GEMM (linear.cu) and the grouped MoE GEMM (moe.cu).
//
// A is f32 (activations), B bf16 (weights, checkpoint layout [rows, K]); the caller says where
// each tile row lives (a row pointer, or null for a zero row), so that A rows may be gathered
// (the tokens routed to one expert) and B rows interleaved (an expert's gate and up rows). The
// f32 A is split into two bf16 terms, a = hi + lo (hi = bf16(a), lo = bf16(a - hi)), both
// multiplied with the exact bf16 B: ~16 mantissa bits of a per product (relative error ~2^-17)
// instead of 2^-9 for a plain bf16 cast, at 2x the MMA work. (With bf16 activations every A
// element is already a bf16 value, lo is 0, and the tile is the exact product of the bf16
// inputs.) K is staged through shared memory 32 at a time with a register prefetch of the next
// step. 256 threads (8 warps, 2 x 4, each 32 x 32 of the tile); K % 8 == 0 and 16-byte aligned
// rows are the caller's to check.
#ifndef SPARK_KERNELS_MMA_TILE_CUH_
#define SPARK_KERNELS_MMA_TILE_CUH_

#include "common.cuh"

namespace spk {
namespace mma {

constexpr int kThreads = 256;
constexpr int kBM = 64;    // A rows (tokens) per tile
constexpr int kBN = 128;   // B rows (outputs) per tile
constexpr int kBK = 32;    // K per shared-memory stage
constexpr int kPad = 8;    // bf16 padding per shared row (conflict-free fragment loads)
constexpr int kLds = kBK + kPad;  // 40 bf16 = 80 bytes per shared row

struct Smem {
  uint16_t a_hi[kBM][kLds];
  uint16_t a_lo[kBM][kLds];
  uint16_t b[kBN][kLds];
};

struct Accum {
  float v[2][4][4];  // [16-row block][8-column block][fragment element]
};

namespace detail {

struct TileRegs {
  float4 a[2];  // two float4 of the A tile (64 x 32 f32 = 512 float4 / 256 threads)
  uint4 b[2];   // two uint4 of the B tile (128 x 32 bf16 = 512 uint4 / 256 threads)
};

// Loads the K step starting at k0 into registers; rows whose pointer is null and columns at or
// past k_size are zeros.
template <class ARow, class BRow>
SPK_DEVICE void load(TileRegs& g, const ARow& a_row, const BRow& b_row, int k_size, int k0) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = tid + i * kThreads;  // 0..511
    const int row = idx >> 3, c4 = idx & 7;
    const int k = k0 + c4 * 4;
    const float* p = a_row(row);
    g.a[i] = (p != nullptr && k < k_size) ? ldg_f4(p + k) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = tid + i * kThreads;
    const int row = idx >> 2, c8 = idx & 3;
    const int k = k0 + c8 * 8;
    const unsigned short* p = b_row(row);
    g.b[i] = (p != nullptr && k < k_size) ? ldg_u4(p + k) : make_uint4(0u, 0u, 0u, 0u);
  }
}

SPK_DEVICE void store(const TileRegs& g, Smem& s) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = tid + i * kThreads;
    const int row = idx >> 3, c4 = idx & 7;
    const float4 v = g.a[i];
    const uint32_t h01 = pack_bf16x2(v.x, v.y), h23 = pack_bf16x2(v.z, v.w);
    const uint32_t l01 = pack_bf16x2(v.x - bf16lo_to_f32(h01), v.y - bf16hi_to_f32(h01));
    const uint32_t l23 = pack_bf16x2(v.z - bf16lo_to_f32(h23), v.w - bf16hi_to_f32(h23));
    *reinterpret_cast<uint2*>(&s.a_hi[row][c4 * 4]) = make_uint2(h01, h23);
    *reinterpret_cast<uint2*>(&s.a_lo[row][c4 * 4]) = make_uint2(l01, l23);
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = tid + i * kThreads;
    const int row = idx >> 2, c8 = idx & 3;
    *reinterpret_cast<uint4*>(&s.b[row][c8 * 8]) = g.b[i];
  }
}

SPK_DEVICE uint32_t lds32(const uint16_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

}  // namespace detail

// acc = A_tile @ B_tile^T over K = k_size. a_row(r) (r < 64) and b_row(n) (n < 128) return the
// row's address or null; they are called again at every K step, so they should be cheap (e.g. a
// lookup in shared memory). Every thread of the block must call this.
template <class ARow, class BRow>
SPK_DEVICE void tile_mma(Smem& s, const ARow& a_row, const BRow& b_row, int k_size, Accum& acc) {
  const int lane = lane_id(), warp = warp_id();
  const int g = lane >> 2, tig = lane & 3;
  const int wm = (warp >> 2) * 32;  // warp's 32 A rows within the tile
  const int wn = (warp & 3) * 32;   // warp's 32 B rows within the tile
  const int ksteps = (k_size + kBK - 1) / kBK;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc.v[i][j][e] = 0.0f;

  detail::TileRegs regs;
  detail::load(regs, a_row, b_row, k_size, 0);
  for (int ks = 0; ks < ksteps; ++ks) {
    __syncthreads();  // previous step's fragments are consumed
    detail::store(regs, s);
    __syncthreads();
    if (ks + 1 < ksteps) detail::load(regs, a_row, b_row, k_size, (ks + 1) * kBK);
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t ah[2][4], al[2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int r0 = wm + i * 16 + g;
        const int c0 = kk + tig * 2;
        ah[i][0] = detail::lds32(&s.a_hi[r0][c0]);
        ah[i][1] = detail::lds32(&s.a_hi[r0 + 8][c0]);
        ah[i][2] = detail::lds32(&s.a_hi[r0][c0 + 8]);
        ah[i][3] = detail::lds32(&s.a_hi[r0 + 8][c0 + 8]);
        al[i][0] = detail::lds32(&s.a_lo[r0][c0]);
        al[i][1] = detail::lds32(&s.a_lo[r0 + 8][c0]);
        al[i][2] = detail::lds32(&s.a_lo[r0][c0 + 8]);
        al[i][3] = detail::lds32(&s.a_lo[r0 + 8][c0 + 8]);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int n = wn + j * 8 + g;
        const uint32_t b0 = detail::lds32(&s.b[n][kk + tig * 2]);
        const uint32_t b1 = detail::lds32(&s.b[n][kk + tig * 2 + 8]);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          mma_bf16_16816(acc.v[i][j], al[i], b0, b1);
          mma_bf16_16816(acc.v[i][j], ah[i], b0, b1);
        }
      }
    }
  }
}

// Calls out(row, col, c0, c1) for this thread's share of the tile: c0 at (row, col), c1 at
// (row, col + 1), row < 64 and col < 128 (even) relative to the tile.
template <class Out>
SPK_DEVICE void for_each_pair(const Accum& acc, const Out& out) {
  const int lane = lane_id(), warp = warp_id();
  const int g = lane >> 2, tig = lane & 3;
  const int wm = (warp >> 2) * 32, wn = (warp & 3) * 32;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int col = wn + j * 8 + tig * 2;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        out(wm + i * 16 + g + h * 8, col, acc.v[i][j][2 * h], acc.v[i][j][2 * h + 1]);
      }
    }
  }
}

}  // namespace mma
}  // namespace spk

#endif  // SPARK_KERNELS_MMA_TILE_CUH_
