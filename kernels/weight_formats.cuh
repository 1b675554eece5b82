// How the kernels read a weight matrix [rows, in] in each checkpoint format: bf16, NVFP4 (packed
// E2M1 codes, e4m3 block scales per 16 inputs, f32 scales per group of rows) and FP8 (e4m3
// elements, f32 scales per group of rows). Shared by the linears (linear.cu: one matrix) and the
// MoE experts (moe.cu: one matrix per expert, at an offset).
//
// A format type gives the paths what they need of one matrix:
//   kChunk, load(r, c)          16-byte chunk c of row r (kChunk elements)
//   kGroups, decode8(raw, g, f) its 8-element groups decoded to f32, in units of 1 / kDecodedUnit
//   group_scales(r, c, s)       the factors of the chunk's kGroups scale groups (NVFP4's blocks)
//   element(r, k)               one element (scalar paths), without the row scale
//   row_scale(r)                the factor row r's dot product is multiplied by at the end (the
//                               tensor scale of its group of rows, or its own row scale)
//   kGemvRows                   the rows one decode warp takes at once (linear.cu)
//   vector_ok()                 whether the 16-byte paths may read it (sizes and alignment)
//   tile(s, a_row, a_rows, n0, rows, acc)  acc = A tile @ B^T on tensor cores (mma_tile.cuh, a
//                               tile of the shape of s and acc; A rows a_row(r), r < a_rows),
//                               B row n of the tile = matrix row n0 + n (a zero row at or past
//                               `rows`);
//   tile_gate_up(s, a_row, a_rows, i0, half, acc)  the same over an expert's stacked gate and up
//                               halves (`half` rows each): B row n = gate row i0 + n / 2 for even
//                               n, up row i0 + n / 2 for odd n (zero rows past the half's end).
//                               The row scales are the caller's to apply to the accumulators.
// (The B row functions are written out per shape rather than composed from a row-index function:
// composed that way, clang's NVPTX build of the bf16-activation tile path read shared memory at
// misaligned addresses on the H200 (compute-sanitizer, 2026-12-02), which the nvcc build and the
// CPU emulation of the same source did not.)
// Scales of quantized formats: row r takes scale[r / rows_per_scale] (rows_per_scale = rows for
// one scale per tensor, 1 for one per row, or the rows of one of several stacked matrices: an
// expert's gate and up halves).
#ifndef SPARK_KERNELS_WEIGHT_FORMATS_CUH_
#define SPARK_KERNELS_WEIGHT_FORMATS_CUH_

#include "common.cuh"
#include "mma_tile.cuh"

namespace spk {
namespace weights {

// The real B rows of a gate/up tile starting at intermediate column i0 (B row n is gate or up row
// i0 + n / 2, real while that is below `half`).
SPK_DEVICE int gate_up_rows(int i0, int half) {
  return mma::rows_in_tile(2 * i0, 2 * half, mma::kBN);
}

// 8 f32 products of one group added to acc in index order.
SPK_DEVICE float dot_group(const float f[8], ActIn x, int64_t k, float acc) {
  float4 a, b;
  x.ldg8(k, a, b);
  return dot8_acc(f, a, b, acc);
}

struct Bf16Weights {
  static constexpr int kChunk = 8;
  static constexpr int kGroups = 1;  // one running sum over the chunk (no per-group factor)
  static constexpr float kDecodedUnit = 1.0f;  // decode8() gives the weights themselves
  static constexpr int kGemvRows = 1;
  const unsigned short* w;
  int in;
  SPK_MEMBER bool vector_ok() const { return in % 8 == 0 && aligned16(w); }
  SPK_MEMBER uint4 load(int64_t r, int c) const { return ldg_u4(w + r * in + c * 8); }
  SPK_MEMBER void decode8(const uint4& raw, int, float f[8]) const { unpack_bf16x8(raw, f); }
  SPK_MEMBER void group_scales(int64_t, int, float*) const {}
  SPK_MEMBER float element(int64_t r, int k) const { return ldg_bf16(w + r * in + k); }
  SPK_MEMBER float row_scale(int64_t) const { return 1.0f; }
  template <class Cfg, class A>
  SPK_MEMBER void tile(mma::Smem<Cfg>& s, const A& a_row, int a_rows, int64_t n0, int rows,
                       mma::Accum<Cfg>& acc) const {
    const auto w_row = [&](int n) -> const unsigned short* { return w + (n0 + n) * in; };
    mma::tile_mma(s, a_row, a_rows, w_row, mma::rows_in_tile(n0, rows, mma::kBN), in, acc);
  }
  template <class Cfg, class A>
  SPK_MEMBER void tile_gate_up(mma::Smem<Cfg>& s, const A& a_row, int a_rows, int i0, int half,
                               mma::Accum<Cfg>& acc) const {
    const auto w_row = [&](int n) -> const unsigned short* {
      const int i = i0 + (n >> 1);
      return w + static_cast<int64_t>((n & 1) ? half + i : i) * in;
    };
    mma::tile_mma(s, a_row, a_rows, w_row, gate_up_rows(i0, half), in, acc);
  }
};

struct Nvfp4Weights {
  static constexpr int kChunk = 32;
  static constexpr int kGroups = 2;  // the chunk's two 16-code blocks, each with its own scale
  static constexpr float kDecodedUnit = 1.0f;  // the group scales carry the 2^14
  static constexpr int kGemvRows = 4;
  const unsigned char* w;            // [rows, in / 2]
  const unsigned char* block_scale;  // [rows, in / 16]
  const float* tensor_scale;         // [rows / rows_per_scale]
  int rows_per_scale;
  int in;
  // 16-byte code loads and 2-byte loads of scale pairs.
  SPK_MEMBER bool vector_ok() const {
    return in % 32 == 0 && aligned16(w) && (reinterpret_cast<uintptr_t>(block_scale) & 1u) == 0;
  }
  SPK_MEMBER uint4 load(int64_t r, int c) const { return ldg_u4(w + r * (in / 2) + c * 16); }
  // Codes 8g .. 8g + 7 of the chunk (its word g) as f32 values times 2^-14
  // (e2m1x2_to_f32x2_via_f16); the factors of its two blocks are block scale x 2^14: the GEMV
  // sums each block's products, then scales them.
  SPK_MEMBER void decode8(const uint4& raw, int g, float f[8]) const {
    const uint32_t word = g == 0 ? raw.x : g == 1 ? raw.y : g == 2 ? raw.z : raw.w;
    // Code k of the word (bits 4k .. 4k + 3) is element k; shifting the word left by 12 - 4k
    // puts codes k and k + 4 at the top of its two halves.
#pragma unroll
    for (int k = 0; k < 4; ++k) e2m1x2_to_f32x2_via_f16(word << (12 - 4 * k), f[k], f[k + 4]);
  }
  SPK_MEMBER void group_scales(int64_t r, int c, float scale[kGroups]) const {
    // Chunk c is blocks 2c and 2c + 1 (in % 32 == 0 and an even block_scale: 2-byte aligned).
    const uint32_t scales =
        __ldg(reinterpret_cast<const unsigned short*>(block_scale + r * (in / 16) + 2 * c));
    scale[0] = e4m3_to_f32(scales & 0xffu) * kE2m1ViaF16;
    scale[1] = e4m3_to_f32(scales >> 8) * kE2m1ViaF16;
  }
  SPK_MEMBER float element(int64_t r, int k) const {
    const uint32_t byte = __ldg(w + r * (in / 2) + k / 2);
    return e2m1_to_f32(byte >> ((k & 1) * 4)) *
           e4m3_to_f32(__ldg(block_scale + r * (in / 16) + k / 16));
  }
  SPK_MEMBER float row_scale(int64_t r) const { return __ldg(tensor_scale + r / rows_per_scale); }
  template <class Cfg, class A>
  SPK_MEMBER void tile(mma::Smem<Cfg>& s, const A& a_row, int a_rows, int64_t n0, int rows,
                       mma::Accum<Cfg>& acc) const {
    const auto w_row = [&](int n) -> mma::QuantRow {
      return {w + (n0 + n) * (in / 2), block_scale + (n0 + n) * (in / 16)};
    };
    mma::Nvfp4Rows<decltype(w_row)> b{w_row, mma::rows_in_tile(n0, rows, mma::kBN)};
    mma::tile_mma_from(s, a_row, a_rows, b, in, acc);
  }
  template <class Cfg, class A>
  SPK_MEMBER void tile_gate_up(mma::Smem<Cfg>& s, const A& a_row, int a_rows, int i0, int half,
                               mma::Accum<Cfg>& acc) const {
    const auto w_row = [&](int n) -> mma::QuantRow {
      const int i = i0 + (n >> 1);
      const int64_t r = (n & 1) ? half + i : i;
      return {w + r * (in / 2), block_scale + r * (in / 16)};
    };
    mma::Nvfp4Rows<decltype(w_row)> b{w_row, gate_up_rows(i0, half)};
    mma::tile_mma_from(s, a_row, a_rows, b, in, acc);
  }
};

struct Fp8Weights {
  static constexpr int kChunk = 16;
  static constexpr int kGroups = 1;
  static constexpr int kGemvRows = 2;
  const unsigned char* w;  // [rows, in]
  const float* scale;      // [rows / rows_per_scale]
  int rows_per_scale;
  int in;
  SPK_MEMBER bool vector_ok() const { return in % 16 == 0 && aligned16(w); }
  SPK_MEMBER uint4 load(int64_t r, int c) const { return ldg_u4(w + r * in + c * 16); }
  // Elements 8g .. 8g + 7 of the chunk (its words 2g, 2g + 1) as f32 values times 2^-8
  // (e4m3x2_to_f32x2_via_f16; a group holding a NaN code takes the exact per-element decode, so
  // that NaN stays NaN).
  static constexpr float kDecodedUnit = kE4m3ViaF16;
  SPK_MEMBER void decode8(const uint4& raw, int g, float f[8]) const {
    const uint32_t words[2] = {g == 0 ? raw.x : raw.z, g == 0 ? raw.y : raw.w};
    if (e4m3_has_nan(words[0]) || e4m3_has_nan(words[1])) {
#pragma unroll
      for (int i = 0; i < 8; ++i)
        f[i] = e4m3_to_f32(words[i / 4] >> ((i % 4) * 8)) * (1.0f / kE4m3ViaF16);
      return;
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      e4m3x2_to_f32x2_via_f16(words[i], f[4 * i], f[4 * i + 2]);
      e4m3x2_to_f32x2_via_f16(words[i] >> 8, f[4 * i + 1], f[4 * i + 3]);
    }
  }
  SPK_MEMBER void group_scales(int64_t, int, float*) const {}
  SPK_MEMBER float element(int64_t r, int k) const { return e4m3_to_f32(__ldg(w + r * in + k)); }
  SPK_MEMBER float row_scale(int64_t r) const { return __ldg(scale + r / rows_per_scale); }
  template <class Cfg, class A>
  SPK_MEMBER void tile(mma::Smem<Cfg>& s, const A& a_row, int a_rows, int64_t n0, int rows,
                       mma::Accum<Cfg>& acc) const {
    const auto w_row = [&](int n) -> mma::QuantRow { return {w + (n0 + n) * in, nullptr}; };
    mma::Fp8Rows<decltype(w_row)> b{w_row, mma::rows_in_tile(n0, rows, mma::kBN)};
    mma::tile_mma_from(s, a_row, a_rows, b, in, acc);
  }
  template <class Cfg, class A>
  SPK_MEMBER void tile_gate_up(mma::Smem<Cfg>& s, const A& a_row, int a_rows, int i0, int half,
                               mma::Accum<Cfg>& acc) const {
    const auto w_row = [&](int n) -> mma::QuantRow {
      const int i = i0 + (n >> 1);
      return {w + static_cast<int64_t>((n & 1) ? half + i : i) * in, nullptr};
    };
    mma::Fp8Rows<decltype(w_row)> b{w_row, gate_up_rows(i0, half)};
    mma::tile_mma_from(s, a_row, a_rows, b, in, acc);
  }
};

// acc + x . row r over chunk c of w (vector path; raw = w.load(r, c), x the row's activations
// from element 0): the chunk's groups decoded and summed, each group's sum times its scale (with
// one group, the products go straight into acc: one running sum in index order). In units of
// 1 / kDecodedUnit, without the row scale.
template <class W>
SPK_DEVICE float chunk_dot(const W& w, const uint4& raw, int64_t r, int c, ActIn x, float acc) {
  constexpr int kSetsPerGroup = W::kChunk / W::kGroups / 8;
  float scale[W::kGroups];
  w.group_scales(r, c, scale);
#pragma unroll
  for (int grp = 0; grp < W::kGroups; ++grp) {
    float part = W::kGroups == 1 ? acc : 0.0f;
#pragma unroll
    for (int set = 0; set < kSetsPerGroup; ++set) {
      const int g = grp * kSetsPerGroup + set;
      float f[8];
      w.decode8(raw, g, f);
      part = dot_group(f, x, static_cast<int64_t>(c) * W::kChunk + g * 8, part);
    }
    acc = W::kGroups == 1 ? part : fmaf_(part, scale[grp], acc);
  }
  return acc;
}

// This lane's partial dot products of R rows of w (any rows: rows[q]) with one activation row x,
// over chunk c (vector path): each 8-element group of x is loaded once for all R rows (with a
// chunk of 32 elements, NVFP4, the activation loads rather than the weights would otherwise bound
// the GEMV). acc[q] accumulates in units of 1 / kDecodedUnit, group scales applied, row scales
// not.
template <int R, class W>
SPK_DEVICE void rows_chunk_dot(const W& w, const uint4 (&raw)[R], const int64_t (&rows)[R], int c,
                               ActIn x, float (&acc)[R]) {
  constexpr int kSetsPerGroup = W::kChunk / W::kGroups / 8;
  float scale[R][W::kGroups];
#pragma unroll
  for (int q = 0; q < R; ++q) w.group_scales(rows[q], c, scale[q]);
#pragma unroll
  for (int grp = 0; grp < W::kGroups; ++grp) {
    float part[R];
#pragma unroll
    for (int q = 0; q < R; ++q) part[q] = W::kGroups == 1 ? acc[q] : 0.0f;
#pragma unroll
    for (int set = 0; set < kSetsPerGroup; ++set) {
      const int g = grp * kSetsPerGroup + set;
      float4 a, b;
      x.ldg8(static_cast<int64_t>(c) * W::kChunk + g * 8, a, b);
#pragma unroll
      for (int q = 0; q < R; ++q) {
        float f[8];
        w.decode8(raw[q], g, f);
        part[q] = dot8_acc(f, a, b, part[q]);
      }
    }
#pragma unroll
    for (int q = 0; q < R; ++q)
      acc[q] = W::kGroups == 1 ? part[q] : fmaf_(part[q], scale[q][grp], acc[q]);
  }
}

}  // namespace weights
}  // namespace spk

#endif  // SPARK_KERNELS_WEIGHT_FORMATS_CUH_
