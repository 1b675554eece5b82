// One 64 x 128 output tile of C = A @ B^T on tensor cores (`mma.sync.m16n8k16` bf16, f32
// accumulation), shared by the dense GEMM (linear.cu) and the grouped MoE GEMM (moe.cu).
//
// A is activations (f32 or bf16 storage, common.cuh ActIn), B bf16 (weights, checkpoint layout
// [rows, K]); the caller says where each tile row lives (a row, or null for a zero row), so that
// A rows may be gathered (the tokens routed to one expert) and B rows interleaved (an expert's
// gate and up rows).
//   - f32 A is split into two bf16 terms, a = hi + lo (hi = bf16(a), lo = bf16(a - hi)), both
//     multiplied with the exact bf16 B: ~16 mantissa bits of a per product (relative error
//     ~2^-17) instead of 2^-9 for a plain bf16 cast, at 2x the MMA work. Pipeline: K runs in
//     steps of 32 through two shared-memory buffers; B goes from global to shared memory with
//     cp.async (no registers), A through registers (converted to hi + lo on the way); while the
//     warps multiply step k, B of step k + 1 is in flight and A of step k + 2 is being loaded,
//     with one barrier per step.
//   - bf16 A is already an MMA operand: A and B both go to shared memory by cp.async (step
//     k + 1 in flight while step k is multiplied) and each product takes one MMA, the exact
//     product of the bf16 inputs with f32 accumulation.
// Fragments come from shared memory with ldmatrix.
// 256 threads (8 warps, 2 x 4, each 32 x 32 of the tile); K % 8 == 0 and 16-byte aligned rows are
// the caller's to check. Shared memory: 40 KiB (Smem).
#ifndef SPARK_KERNELS_MMA_TILE_CUH_
#define SPARK_KERNELS_MMA_TILE_CUH_

#include "common.cuh"

namespace spk {
namespace mma {

constexpr int kThreads = 256;
constexpr int kBM = 64;    // A rows (tokens) per tile
constexpr int kBN = 128;   // B rows (outputs) per tile
constexpr int kBK = 32;    // K per shared-memory stage
constexpr int kPad = 8;    // bf16 padding per shared row (conflict-free ldmatrix)
constexpr int kLds = kBK + kPad;  // 40 bf16 = 80 bytes per shared row
constexpr int kStages = 2;

struct Smem {
  uint16_t a_hi[kStages][kBM][kLds];
  uint16_t a_lo[kStages][kBM][kLds];
  uint16_t b[kStages][kBN][kLds];
};

struct Accum {
  float v[2][4][4];  // [16-row block][8-column block][fragment element]
};

namespace detail {

// A of one K step in registers: two float4 per thread (64 x 32 f32 = 512 float4 / 256 threads).
struct ARegs {
  float4 v[2];
};

// Loads f32 A of the K step starting at k0; null rows and columns at or past k_size are zeros.
template <class ARow>
SPK_DEVICE void load_a(ARegs& g, const ARow& a_row, int k_size, int k0) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = tid + i * kThreads;  // 0..511
    const int row = idx >> 3, c4 = idx & 7;
    const int k = k0 + c4 * 4;
    const ActIn p = a_row(row);
    g.v[i] = (!p.null() && k < k_size) ? ldg_f4(p.f32() + k) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

// Starts the copy of bf16 A of the K step at k0 into a_hi of stage `st` (one 16-byte chunk per
// thread of the 64 x 32 bf16 tile); null rows and columns at or past k_size are stored as zeros
// directly. The caller commits the group.
template <class ARow>
SPK_DEVICE void copy_a_async(Smem& s, int st, const ARow& a_row, int k_size, int k0) {
  const int tid = threadIdx.x;
  const int row = tid >> 2, c8 = tid & 3;
  const int k = k0 + c8 * 8;
  const ActIn p = a_row(row);
  uint16_t* dst = &s.a_hi[st][row][c8 * 8];
  if (!p.null() && k < k_size) {
    cp_async16(dst, p.bf16() + k);
  } else {
    *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
  }
}

// Stores A as hi and lo bf16 halves into stage `st`.
SPK_DEVICE void store_a(const ARegs& g, Smem& s, int st) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = tid + i * kThreads;
    const int row = idx >> 3, c4 = idx & 7;
    const float4 v = g.v[i];
    const uint32_t h01 = pack_bf16x2(v.x, v.y), h23 = pack_bf16x2(v.z, v.w);
    const uint32_t l01 = pack_bf16x2(v.x - bf16lo_to_f32(h01), v.y - bf16hi_to_f32(h01));
    const uint32_t l23 = pack_bf16x2(v.z - bf16lo_to_f32(h23), v.w - bf16hi_to_f32(h23));
    *reinterpret_cast<uint2*>(&s.a_hi[st][row][c4 * 4]) = make_uint2(h01, h23);
    *reinterpret_cast<uint2*>(&s.a_lo[st][row][c4 * 4]) = make_uint2(l01, l23);
  }
}

// Starts the copy of B of the K step at k0 into stage `st` (two 16-byte chunks per thread of the
// 128 x 32 bf16 tile); rows whose pointer is null and columns at or past k_size are stored as
// zeros directly. The caller commits the group.
template <class BRow>
SPK_DEVICE void copy_b_async(Smem& s, int st, const BRow& b_row, int k_size, int k0) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = tid + i * kThreads;
    const int row = idx >> 2, c8 = idx & 3;
    const int k = k0 + c8 * 8;
    const unsigned short* p = b_row(row);
    uint16_t* dst = &s.b[st][row][c8 * 8];
    if (p != nullptr && k < k_size) {
      cp_async16(dst, p + k);
    } else {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}


// This thread's place in the tile: its warp's 32 x 32 part (rows wm.., columns wn..) and its
// ldmatrix row addresses (see ldmatrix_x4): A matrices 0..3 are (rows 0-7, k 0-7), (rows 8-15,
// k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) of a 16 x 16 block = a0..a3; B matrices are
// (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) of 16 B rows = b0, b1 of one
// 8-column block, then b0, b1 of the next.
struct Lanes {
  int wm, wn, a_r, a_k, b_n, b_k;
  SPK_MEMBER Lanes()
      : wm((warp_id() >> 2) * 32),
        wn((warp_id() & 3) * 32),
        a_r(lane_id() & 15),
        a_k((lane_id() >> 4) * 8),
        b_n((lane_id() >> 4) * 8 + (lane_id() & 7)),
        b_k(((lane_id() >> 3) & 1) * 8) {}
};

SPK_DEVICE void zero(Accum& acc) {
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc.v[i][j][e] = 0.0f;
}

// acc += the products of stage `st` (K = kBK) for this thread's fragments: the hi half of A
// times B, after the lo half when kSplit (f32 A: lo first, then hi, as the split adds them).
template <bool kSplit>
SPK_DEVICE void multiply_stage(Smem& s, int st, const Lanes& l, Accum& acc) {
#pragma unroll
  for (int kk = 0; kk < kBK; kk += 16) {
    uint32_t ah[2][4], al[2][4];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      ldmatrix_x4(ah[i], &s.a_hi[st][l.wm + i * 16 + l.a_r][kk + l.a_k]);
      if constexpr (kSplit) {
        ldmatrix_x4(al[i], &s.a_lo[st][l.wm + i * 16 + l.a_r][kk + l.a_k]);
      }
    }
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      uint32_t b[4];
      ldmatrix_x4(b, &s.b[st][l.wn + jj * 16 + l.b_n][kk + l.b_k]);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          if constexpr (kSplit) {
            mma_bf16_16816(acc.v[i][2 * jj + h], al[i], b[2 * h], b[2 * h + 1]);
          }
          mma_bf16_16816(acc.v[i][2 * jj + h], ah[i], b[2 * h], b[2 * h + 1]);
        }
      }
    }
  }
}

// The bf16-A tile (see the file comment): A and B by cp.async, one MMA per product.
template <class ARow, class BRow>
SPK_DEVICE void tile_mma_bf16(Smem& s, const ARow& a_row, const BRow& b_row, int k_size,
                              Accum& acc) {
  const Lanes l;
  const int ksteps = (k_size + kBK - 1) / kBK;
  zero(acc);

  __syncthreads();  // a previous call's last step is consumed by every warp
  copy_a_async(s, 0, a_row, k_size, 0);
  copy_b_async(s, 0, b_row, k_size, 0);
  cp_async_commit();
  for (int ks = 0; ks < ksteps; ++ks) {
    const int st = ks & 1;
    cp_async_wait_all();
    __syncthreads();  // stage st holds step ks; every warp is done with step ks - 1 (stage st ^ 1)
    if (ks + 1 < ksteps) {
      copy_a_async(s, st ^ 1, a_row, k_size, (ks + 1) * kBK);
      copy_b_async(s, st ^ 1, b_row, k_size, (ks + 1) * kBK);
      cp_async_commit();
    }
    multiply_stage<false>(s, st, l, acc);
  }
}

// The f32-A tile (see the file comment): A split into hi + lo, two MMAs per product.
template <class ARow, class BRow>
SPK_DEVICE void tile_mma_split(Smem& s, const ARow& a_row, const BRow& b_row, int k_size,
                               Accum& acc) {
  const Lanes l;
  const int ksteps = (k_size + kBK - 1) / kBK;
  zero(acc);

  __syncthreads();  // a previous call's last step is consumed by every warp
  detail::ARegs regs;
  detail::load_a(regs, a_row, k_size, 0);
  detail::copy_b_async(s, 0, b_row, k_size, 0);
  cp_async_commit();
  detail::store_a(regs, s, 0);
  if (ksteps > 1) detail::load_a(regs, a_row, k_size, kBK);
  for (int ks = 0; ks < ksteps; ++ks) {
    const int st = ks & 1;
    cp_async_wait_all();
    __syncthreads();  // stage st holds step ks; every warp is done with step ks - 1 (stage st ^ 1)
    if (ks + 1 < ksteps) {
      detail::copy_b_async(s, st ^ 1, b_row, k_size, (ks + 1) * kBK);
      cp_async_commit();
      detail::store_a(regs, s, st ^ 1);
      if (ks + 2 < ksteps) detail::load_a(regs, a_row, k_size, (ks + 2) * kBK);
    }
    multiply_stage<true>(s, st, l, acc);
  }
}

}  // namespace detail

// acc = A_tile @ B_tile^T over K = k_size. a_row(r) (r < 64) returns the row as an ActIn (null for
// a zero row), b_row(n) (n < 128) the row's address or null; they are called again at every K
// step, so they should be cheap (e.g. a lookup in shared memory). Every thread of the block must
// call this; it may be called again at once for the next tile (it begins with a barrier). The
// module's activation precision picks the path (folded at code generation).
template <class ARow, class BRow>
SPK_DEVICE void tile_mma(Smem& s, const ARow& a_row, const BRow& b_row, int k_size, Accum& acc) {
  if (act_bf16()) {
    detail::tile_mma_bf16(s, a_row, b_row, k_size, acc);
  } else {
    detail::tile_mma_split(s, a_row, b_row, k_size, acc);
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
