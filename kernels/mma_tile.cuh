// One output tile of C = A @ B^T on tensor cores (`mma.sync.m16n8k16` bf16, f32 accumulation),
// 64 or 128 x 128 (GroupedTile, DenseTile, DenseSplitTile below), shared by the dense GEMM
// (linear.cu) and the grouped MoE GEMM (moe.cu).
//
// A is activations (f32 or bf16 storage, common.cuh ActIn), B weights in checkpoint layout
// [rows, K]: bf16, or quantized (NVFP4, FP8) and converted to bf16 on the way to shared memory
// (the B sources below); the caller says where each tile row lives, so that A rows may be
// gathered (the tokens routed to one expert) and B rows interleaved (an expert's gate and up
// rows), and how many rows of each operand are real: rows past those counts are zeros, and their
// row functions are never called. (No null row pointers: when zero rows were chosen by comparing
// a row pointer with null, the clang-built grouped moe_down of Gemma 4 26B-A4B in NVFP4 read
// 16 bytes at null + the K offset on the H200 (compute-sanitizer, 2026-12-02), although its PTX
// and SASS predicate that load on the pointer; the cause was not found, and with row counts the
// same image runs clean.)
//   - f32 A is split into two bf16 terms, a = hi + lo (hi = bf16(a), lo = bf16(a - hi)), both
//     multiplied with the exact bf16 B: ~16 mantissa bits of a per product (relative error
//     ~2^-17) instead of 2^-9 for a plain bf16 cast, at 2x the MMA work. Pipeline: K runs in
//     steps of 32 through shared-memory stages; bf16 B goes from global to shared memory
//     with cp.async (no registers), A (and quantized B) through registers, converted on the way;
//     while the warps multiply step k, the cp.async operands of step k + 1 are in flight and the
//     register operands of step k + 2 are being loaded (with three stages the cp.async
//     operands run two steps ahead), one barrier per step.
//   - bf16 A is already an MMA operand: A goes to shared memory by cp.async, and each product
//     takes one MMA, the exact product of the bf16 inputs with f32 accumulation.
// Fragments come from shared memory with ldmatrix.
// 256 threads (8 warps, 2 x 4, each kBM / 2 x 32 of the tile); K % 8 == 0 and 16-byte aligned
// rows are the caller's to check. Shared memory: Smem<Cfg>, the caller's (static or dynamic).
#ifndef SPARK_KERNELS_MMA_TILE_CUH_
#define SPARK_KERNELS_MMA_TILE_CUH_

#include "common.cuh"

namespace spk {
namespace mma {

constexpr int kThreads = 256;
constexpr int kBN = 128;   // B rows (outputs) per tile
constexpr int kBK = 32;    // K per shared-memory stage
constexpr int kPad = 8;    // bf16 padding per shared row (conflict-free ldmatrix)
constexpr int kLds = kBK + kPad;  // 40 bf16 = 80 bytes per shared row

// A tile shape: kBM A rows (tokens) x kBN B rows, the 8 warps as 2 x 4, each kBM / 2 x 32 of the
// tile (kMBlocks 16-row blocks of 4 8-column blocks); and the shared-memory stages of each A
// path: kSplitStages for f32 A (hi and lo halves), kPlainStages for bf16 A. A kernel uses one A
// path (the module's activation precision), so only that path's stages matter to it.
//   GroupedTile     the grouped MoE experts (moe.cu): 64-row tiles (an expert's slots come 64 at
//                   a time), two stages: 40 KiB of static shared memory beside the slot lists.
//   DenseTile       the dense linears' prefill with bf16 activations (linear.cu): 128-row tiles
//                   (half the shared-memory loads per product and twice the products per barrier
//                   of 64-row ones), three stages (the copies two steps ahead): 60 KiB.
//   DenseSplitTile  the same with f32 activations: 64-row tiles (128 rows of hi and lo halves
//                   took 166 registers, and a linear's decode GEMV, in the same entry, would run
//                   at half the occupancy), two stages: 40 KiB (a third stage measured no faster
//                   on the H100, bench/results/2026-12-07-h100-dense-tiles.md).
// The dense tiles live in the dynamic shared memory the registry gives calls past the
// small-batch sizes (abi::kLinearTileSharedBytes, abi::kLinearSplitTileSharedBytes).
// (bf16 A in three stages of 64-row tiles gave NaN outputs on the H100 for one op-check case
// (linear T=100 out=520 in=704) on 2026-12-07, in 45 KiB of static shared memory; not
// understood. DenseTile's three stages passed the whole op check of the linears on the H100,
// that case included, memcheck and racecheck clean: kernels/README.md.)
struct GroupedTile {
  static constexpr int kBM = 64;
  static constexpr int kSplitStages = 2;
  static constexpr int kPlainStages = 2;
};
struct DenseTile {
  static constexpr int kBM = 128;
  static constexpr int kSplitStages = 2;
  static constexpr int kPlainStages = 3;
};
struct DenseSplitTile {
  static constexpr int kBM = 64;
  static constexpr int kSplitStages = 2;
  static constexpr int kPlainStages = 2;
};

using SharedRows = uint16_t (*)[kLds];  // a stage's rows of one operand

// A tile's shared memory: two layouts of the same bytes, one per activation precision (the
// module's: act_bf16()).
template <class Cfg>
struct Smem {
  struct Split {  // f32 A split into hi + lo halves
    uint16_t a_hi[Cfg::kSplitStages][Cfg::kBM][kLds];
    uint16_t a_lo[Cfg::kSplitStages][Cfg::kBM][kLds];
    uint16_t b[Cfg::kSplitStages][kBN][kLds];
  };
  struct Plain {  // bf16 A
    uint16_t a[Cfg::kPlainStages][Cfg::kBM][kLds];
    uint16_t b[Cfg::kPlainStages][kBN][kLds];
  };
  union {
    Split split;
    Plain plain;
  };
};
static_assert(sizeof(Smem<GroupedTile>) == 40 * 1024, "GroupedTile shared memory");
static_assert(sizeof(Smem<DenseTile>) <= spark::abi::kLinearTileSharedBytes &&
                  sizeof(Smem<DenseSplitTile>) <= spark::abi::kLinearSplitTileSharedBytes,
              "a dense tile's shared memory exceeds what the registry gives a linear's call");

// The stages of the layout the A path uses: kCount of them; a (the hi halves of f32 A), lo
// (f32 A only) and b rows of stage st.
template <class Cfg, bool kSplitA>
struct Stages;
template <class Cfg>
struct Stages<Cfg, true> {
  static constexpr int kCount = Cfg::kSplitStages;
  static SPK_MEMBER SharedRows a(Smem<Cfg>& s, int st) { return s.split.a_hi[st]; }
  static SPK_MEMBER SharedRows lo(Smem<Cfg>& s, int st) { return s.split.a_lo[st]; }
  static SPK_MEMBER SharedRows b(Smem<Cfg>& s, int st) { return s.split.b[st]; }
};
template <class Cfg>
struct Stages<Cfg, false> {
  static constexpr int kCount = Cfg::kPlainStages;
  static SPK_MEMBER SharedRows a(Smem<Cfg>& s, int st) { return s.plain.a[st]; }
  static SPK_MEMBER SharedRows b(Smem<Cfg>& s, int st) { return s.plain.b[st]; }
};

template <class Cfg>
struct Accum {
  static constexpr int kMBlocks = Cfg::kBM / 32;  // 16-row blocks per warp
  float v[kMBlocks][4][4];  // [16-row block][8-column block][fragment element]
};

namespace detail {

// A of one K step in registers, f32: kBM x 32 f32 = kBM * 8 float4, kChunks per thread.
template <class Cfg>
struct ARegs {
  static constexpr int kChunks = Cfg::kBM * kBK / 4 / kThreads;
  float4 v[kChunks];
};

// Loads f32 A of the K step starting at k0; rows at or past a_rows and columns at or past
// k_size are zeros.
template <class Cfg, class ARow>
SPK_DEVICE void load_a(ARegs<Cfg>& g, const ARow& a_row, int a_rows, int k_size, int k0) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < ARegs<Cfg>::kChunks; ++i) {
    const int idx = tid + i * kThreads;
    const int row = idx >> 3, c4 = idx & 7;
    const int k = k0 + c4 * 4;
    g.v[i] = (row < a_rows && k < k_size) ? ldg_f4(a_row(row).f32() + k)
                                           : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

// Starts the copy of bf16 A of the K step at k0 into `a` (a stage's A rows; the kBM x 32 bf16
// tile in 16-byte chunks, kBM / 64 per thread); rows at or past a_rows and columns at or past
// k_size are stored as zeros directly. The caller commits the group.
template <class Cfg, class ARow>
SPK_DEVICE void copy_a_async(SharedRows a, const ARow& a_row, int a_rows, int k_size, int k0) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < Cfg::kBM * kBK / 8 / kThreads; ++i) {
    const int idx = tid + i * kThreads;
    const int row = idx >> 2, c8 = idx & 3;
    const int k = k0 + c8 * 8;
    uint16_t* dst = &a[row][c8 * 8];
    if (row < a_rows && k < k_size) {
      cp_async16(dst, a_row(row).bf16() + k);
    } else {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}

// Stores A as hi and lo bf16 halves into a stage's rows.
template <class Cfg>
SPK_DEVICE void store_a(const ARegs<Cfg>& g, SharedRows hi, SharedRows lo) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < ARegs<Cfg>::kChunks; ++i) {
    const int idx = tid + i * kThreads;
    const int row = idx >> 3, c4 = idx & 7;
    const float4 v = g.v[i];
    uint32_t h01, l01, h23, l23;
    split_bf16x2(v.x, v.y, h01, l01);
    split_bf16x2(v.z, v.w, h23, l23);
    *reinterpret_cast<uint2*>(&hi[row][c4 * 4]) = make_uint2(h01, h23);
    *reinterpret_cast<uint2*>(&lo[row][c4 * 4]) = make_uint2(l01, l23);
  }
}

// Starts the copy of B of the K step at k0 into `b` (a stage's B rows; two 16-byte chunks per
// thread of the 128 x 32 bf16 tile); rows at or past b_rows and columns at or past k_size are
// stored as zeros directly. The caller commits the group.
template <class BRow>
SPK_DEVICE void copy_b_async(SharedRows b, const BRow& b_row, int b_rows, int k_size, int k0) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = tid + i * kThreads;
    const int row = idx >> 2, c8 = idx & 3;
    const int k = k0 + c8 * 8;
    uint16_t* dst = &b[row][c8 * 8];
    if (row < b_rows && k < k_size) {
      cp_async16(dst, b_row(row) + k);
    } else {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}

// This thread's place in the tile: its warp's kBM / 2 x 32 part (rows wm.., columns wn..) and its
// ldmatrix row addresses (see ldmatrix_x4): A matrices 0..3 are (rows 0-7, k 0-7), (rows 8-15,
// k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) of a 16 x 16 block = a0..a3; B matrices are
// (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) of 16 B rows = b0, b1 of one
// 8-column block, then b0, b1 of the next.
template <class Cfg>
struct Lanes {
  int wm, wn, a_r, a_k, b_n, b_k;
  SPK_MEMBER Lanes()
      : wm((warp_id() >> 2) * (Cfg::kBM / 2)),
        wn((warp_id() & 3) * 32),
        a_r(lane_id() & 15),
        a_k((lane_id() >> 4) * 8),
        b_n((lane_id() >> 4) * 8 + (lane_id() & 7)),
        b_k(((lane_id() >> 3) & 1) * 8) {}
};

template <class Cfg>
SPK_DEVICE void zero(Accum<Cfg>& acc) {
#pragma unroll
  for (int i = 0; i < Accum<Cfg>::kMBlocks; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc.v[i][j][e] = 0.0f;
}

// acc += the products of stage `st` (K = kBK) for this thread's fragments: the hi half of A
// times B, after the lo half when kSplit (f32 A: lo first, then hi, as the split adds them).
// Per 16 k, the warp's B fragments are loaded once and each 16-row block's A fragments in turn
// (fewer registers live than all A fragments at once).
template <bool kSplit, class Cfg>
SPK_DEVICE void multiply_stage(Smem<Cfg>& s, int st, const Lanes<Cfg>& l, Accum<Cfg>& acc) {
  using St = Stages<Cfg, kSplit>;
  const SharedRows a_hi = St::a(s, st), b_rows = St::b(s, st);
#pragma unroll
  for (int kk = 0; kk < kBK; kk += 16) {
    uint32_t b[2][4];
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) ldmatrix_x4(b[jj], &b_rows[l.wn + jj * 16 + l.b_n][kk + l.b_k]);
#pragma unroll
    for (int i = 0; i < Accum<Cfg>::kMBlocks; ++i) {
      uint32_t ah[4], al[4];
      ldmatrix_x4(ah, &a_hi[l.wm + i * 16 + l.a_r][kk + l.a_k]);
      if constexpr (kSplit) ldmatrix_x4(al, &St::lo(s, st)[l.wm + i * 16 + l.a_r][kk + l.a_k]);
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if constexpr (kSplit) {
            mma_bf16_16816(acc.v[i][2 * jj + h], al, b[jj][2 * h], b[jj][2 * h + 1]);
          }
          mma_bf16_16816(acc.v[i][2 * jj + h], ah, b[jj][2 * h], b[jj][2 * h + 1]);
        }
      }
    }
  }
}

// The K-step pipeline of every tile, over Stages<Cfg, kSplitA>::kCount = S shared-memory stages.
// A: bf16 storage goes to shared memory by cp.async and takes one MMA per product; f32 (kSplitA)
// comes through registers, split into hi + lo (two MMAs). B: a source (below) either copies its
// step by cp.async (kAsync) or loads it into registers and converts it on the way to shared
// memory (quantized weights). Asynchronous copies run S - 1 steps ahead (one commit group per
// step, empty past the end, so that waiting for "all but the S - 2 newest" always means "this
// step's"); register operands are loaded two steps ahead and stored one step ahead. One barrier
// per step: stage ks % S holds step ks, and every warp is done with step ks - 1, whose stage
// (ks - 1) % S takes the copies of step ks + S - 1 (and, for S = 2, the register stores of step
// ks + 1, whose stage (ks + 1) % S was last read at step ks + 1 - S <= ks - 1).
template <bool kSplitA, class Cfg, class ARow, class BSource>
SPK_DEVICE void tile_pipeline(Smem<Cfg>& s, const ARow& a_row, int a_rows, BSource& b, int k_size,
                              Accum<Cfg>& acc) {
  using St = Stages<Cfg, kSplitA>;
  constexpr int S = St::kCount;
  const Lanes<Cfg> l;
  const int ksteps = (k_size + kBK - 1) / kBK;
  zero(acc);

  __syncthreads();  // a previous call's last step is consumed by every warp
  ARegs<Cfg> regs;
  if constexpr (kSplitA) load_a(regs, a_row, a_rows, k_size, 0);
  if constexpr (!BSource::kAsync) b.load(k_size, 0);
  // The asynchronous copies of steps 0 .. S - 2.
  for (int p = 0; p < S - 1; ++p) {
    if (p < ksteps) {
      if constexpr (!kSplitA) copy_a_async<Cfg>(St::a(s, p), a_row, a_rows, k_size, p * kBK);
      if constexpr (BSource::kAsync) b.copy_async(St::b(s, p), k_size, p * kBK);
    }
    cp_async_commit();
  }
  // The register operands of step 0 stored, of step 1 loaded.
  if constexpr (kSplitA) {
    store_a(regs, St::a(s, 0), St::lo(s, 0));
    if (ksteps > 1) load_a(regs, a_row, a_rows, k_size, kBK);
  }
  if constexpr (!BSource::kAsync) {
    b.store(St::b(s, 0));
    if (ksteps > 1) b.load(k_size, kBK);
  }
  for (int ks = 0; ks < ksteps; ++ks) {
    cp_async_wait_pending<S - 2>();
    __syncthreads();
    const int ahead = ks + S - 1;
    if (ahead < ksteps) {
      const int st = ahead % S;
      if constexpr (!kSplitA) copy_a_async<Cfg>(St::a(s, st), a_row, a_rows, k_size, ahead * kBK);
      if constexpr (BSource::kAsync) b.copy_async(St::b(s, st), k_size, ahead * kBK);
    }
    cp_async_commit();
    if (ks + 1 < ksteps) {
      const int st = (ks + 1) % S, k2 = (ks + 2) * kBK;
      if constexpr (kSplitA) {
        store_a(regs, St::a(s, st), St::lo(s, st));
        if (ks + 2 < ksteps) load_a(regs, a_row, a_rows, k_size, k2);
      }
      if constexpr (!BSource::kAsync) {
        b.store(St::b(s, st));
        if (ks + 2 < ksteps) b.load(k_size, k2);
      }
    }
    multiply_stage<kSplitA>(s, ks % S, l, acc);
  }
}

}  // namespace detail

// ---- B sources: where each K step's 128 x 32 B tile comes from ----

// bf16 rows (weights in checkpoint layout): b_row(n) (n < b_rows <= 128) returns the row's
// address; rows past b_rows are zeros. Copied by cp.async.
template <class BRow>
struct Bf16Rows {
  static constexpr bool kAsync = true;
  const BRow& b_row;
  int b_rows;
  SPK_MEMBER void copy_async(SharedRows dst, int k_size, int k0) const {
    detail::copy_b_async(dst, b_row, b_rows, k_size, k0);
  }
  SPK_MEMBER void load(int, int) {}
  SPK_MEMBER void store(SharedRows) const {}
};

// The rows of a quantized weight a B source reads: codes (or elements) and block scales of row
// n.
struct QuantRow {
  const unsigned char* codes;
  const unsigned char* scales;  // NVFP4 block scales; unused for FP8
};

// NVFP4 rows (K a multiple of 16, rows 8-byte aligned): b_row(n) (n < b_rows <= 128) returns the
// row's QuantRow; rows past b_rows are zeros.
// Each thread converts half a row per step (16 codes and their block scale) into bf16: code x
// block scale is exact in bf16 (at most 6 significant bits); the tensor scale is the caller's
// to apply to the accumulators.
template <class BRow>
struct Nvfp4Rows {
  static constexpr bool kAsync = false;
  const BRow& b_row;
  int b_rows;
  uint2 codes = {0u, 0u};
  uint32_t scale = 0u;
  SPK_MEMBER void load(int k_size, int k0) {
    const int n = threadIdx.x >> 1, k = k0 + (threadIdx.x & 1) * 16;
    if (n < b_rows && k < k_size) {
      const QuantRow q = b_row(n);
      codes = __ldg(reinterpret_cast<const uint2*>(q.codes + k / 2));
      scale = __ldg(q.scales + k / 16);
    } else {
      codes = make_uint2(0u, 0u);
      scale = 0u;
    }
  }
  SPK_MEMBER void store(SharedRows b) const {
    const float sc = e4m3_to_f32(scale);
    uint32_t packed[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t word = i < 4 ? codes.x : codes.y, shift = (i & 3) * 8;
      packed[i] =
          pack_bf16x2(e2m1_to_f32(word >> shift) * sc, e2m1_to_f32(word >> (shift + 4)) * sc);
    }
    uint16_t* dst = &b[threadIdx.x >> 1][(threadIdx.x & 1) * 16];
    *reinterpret_cast<uint4*>(dst) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    *reinterpret_cast<uint4*>(dst + 8) = make_uint4(packed[4], packed[5], packed[6], packed[7]);
  }
};

// FP8 rows (K a multiple of 16, rows 16-byte aligned): b_row(n) (n < b_rows <= 128) returns the
// row's QuantRow (scales unused); rows past b_rows are zeros. Each thread converts half a row
// per step (16 e4m3 elements, exact in bf16); the per-tensor or per-row scale is the caller's to
// apply to the accumulators.
template <class BRow>
struct Fp8Rows {
  static constexpr bool kAsync = false;
  const BRow& b_row;
  int b_rows;
  uint4 elements = {0u, 0u, 0u, 0u};
  SPK_MEMBER void load(int k_size, int k0) {
    const int n = threadIdx.x >> 1, k = k0 + (threadIdx.x & 1) * 16;
    elements = n < b_rows && k < k_size ? ldg_u4(b_row(n).codes + k) : make_uint4(0u, 0u, 0u, 0u);
  }
  SPK_MEMBER void store(SharedRows b) const {
    const uint32_t words[4] = {elements.x, elements.y, elements.z, elements.w};
    uint32_t packed[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t word = words[i / 2], shift = (i & 1) * 16;
      packed[i] = pack_bf16x2(e4m3_to_f32(word >> shift), e4m3_to_f32(word >> (shift + 8)));
    }
    uint16_t* dst = &b[threadIdx.x >> 1][(threadIdx.x & 1) * 16];
    *reinterpret_cast<uint4*>(dst) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    *reinterpret_cast<uint4*>(dst + 8) = make_uint4(packed[4], packed[5], packed[6], packed[7]);
  }
};

// acc = A_tile @ B_tile^T over K = k_size, B from `b` (a source above), in a tile of shape Cfg
// (its shared memory `s`). a_row(r) (r < a_rows <= Cfg::kBM) returns the row as an ActIn; rows
// past a_rows are zeros. It and the source's row function are called again at every K step, so
// they should be cheap (e.g. a lookup in shared memory). Every thread of the block must call
// this; it may be called again at once for the next tile (it begins with a barrier). The
// module's activation precision picks the A path (folded at code generation).
template <class Cfg, class ARow, class BSource>
SPK_DEVICE void tile_mma_from(Smem<Cfg>& s, const ARow& a_row, int a_rows, BSource& b,
                              int k_size, Accum<Cfg>& acc) {
  if (act_bf16()) {
    detail::tile_pipeline<false>(s, a_row, a_rows, b, k_size, acc);
  } else {
    detail::tile_pipeline<true>(s, a_row, a_rows, b, k_size, acc);
  }
}

// The same with bf16 B rows: b_row(n) (n < b_rows <= 128) returns the row's address.
template <class Cfg, class ARow, class BRow>
SPK_DEVICE void tile_mma(Smem<Cfg>& s, const ARow& a_row, int a_rows, const BRow& b_row,
                         int b_rows, int k_size, Accum<Cfg>& acc) {
  Bf16Rows<BRow> b{b_row, b_rows};
  tile_mma_from(s, a_row, a_rows, b, k_size, acc);
}

// How many of a tile's `tile_rows` rows starting at `first` are real when there are `total`.
SPK_DEVICE int rows_in_tile(int64_t first, int64_t total, int tile_rows) {
  const int64_t left = total - first;
  return left <= 0 ? 0 : left < tile_rows ? static_cast<int>(left) : tile_rows;
}

// Calls out(row, col, c0, c1) for this thread's share of the tile: c0 at (row, col), c1 at
// (row, col + 1), row < Cfg::kBM and col < 128 (even) relative to the tile.
template <class Cfg, class Out>
SPK_DEVICE void for_each_pair(const Accum<Cfg>& acc, const Out& out) {
  const int lane = lane_id(), warp = warp_id();
  const int g = lane >> 2, tig = lane & 3;
  const int wm = (warp >> 2) * (Cfg::kBM / 2), wn = (warp & 3) * 32;
#pragma unroll
  for (int i = 0; i < Accum<Cfg>::kMBlocks; ++i) {
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
