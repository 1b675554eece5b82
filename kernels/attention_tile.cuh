// Attention on tensor cores for 16 query rows of one or more heads of one kv head at a time: the
// attention over the paged KV cache takes it for steps of 16 tokens or more (attention.cu), the
// direct units for f32 caches and the staged ones for bf16 caches (measured: attention.cu,
// tile_applies). Where the keys come from is the caller's (a Keys type), so that other
// attentions can use the same units. The vision tower's bidirectional attention (vision.cu) does
// not: at 2394 patches x 16 heads of 72 its CUDA-core tile (32 queries per block, K/V tiles in
// shared memory) took 95 ms for the 31B tower on the H200 and the direct units 114 ms
// (2026-12-05, test/gpu/results/2026-12-05-h200-attention-tiles.txt).
//
// Both: a unit is up to kRows = 16 query rows (one m16 MMA tile) of G query heads that read one
// kv head; per step of keys, Q K^T on mma.m16n8k16 split over the block's 4 warps by columns of
// head_dim (16-column steps dealt round-robin), the partial score tiles summed through shared
// memory in warp order (so the warps of a head hold the same scores), the same online softmax of
// the 16 rows in each (f32, math.cuh's accurate exp), and P V into each warp's own output columns.
// The keys stepped over are [kmin, kmax], those any row of the unit sees; each score is masked by
// its own row's range. Precision: f32 operands (Q and P with f32 activations, K and V stored as
// f32) are split into hi + lo bf16 terms (split_bf16x2) and multiplied as lo*hi + hi*lo + hi*hi,
// ~2^-17 relative per product as the f32 GEMM; bf16 operands are MMA operands as they are, and
// with bf16 activations P is rounded to bf16 (as flash attention does).
//
// direct: G = 2 where the heads of a kv head pair up and head_dim <= 256, else 1; all 4 warps
// take every head of the unit (each K and V fragment a warp loads feeds the G heads' MMAs), and
// fetch their K and V fragments from global memory into registers, 32 keys per step.
//
// staged (bf16 caches): G = 4 where head_dim <= 128, 2 where <= 256, else 1, as the group allows;
// the 4 warps split as G heads x 4/G warps per head. The keys go through shared memory a tile of
// 32 keys (16 at head_dim 512) at a time by cp.async, the K tile of the next keys and the V tile
// of the current ones loading while the warps compute; K fragments by ldmatrix, V fragments by
// ldmatrix .trans; a K or V element staged once serves all G heads.
//
// Needs blockDim.x == 128 and head_dim <= 512; direct: head_dim % 8 == 0 and K / V rows whose
// pairs of elements are 8-byte (f32) or 4-byte (bf16) aligned; staged: head_dim % 16 == 0 and K /
// V rows 16-byte aligned (the tiles' cp.async); both: query rows whose pairs of elements are
// 4-byte aligned.
#ifndef SPARK_KERNELS_ATTENTION_TILE_CUH_
#define SPARK_KERNELS_ATTENTION_TILE_CUH_

#include "common.cuh"

namespace spk {
namespace attn_tile {

constexpr int kWarps = 4;
constexpr int kRows = 16;
constexpr int kMaxHeadDim = 512;

template <typename T, T V>
struct Const {  // a compile-time argument of a generic lambda
  static constexpr T value = V;
};

// Query elements d, d + 1 of an activation row as bf16x2 MMA terms.
SPK_DEVICE void query_pair(ActIn row, int d, uint32_t& hi, uint32_t& lo) {
  if (act_bf16()) {
    hi = __ldg(reinterpret_cast<const uint32_t*>(row.bf16() + d));
    lo = 0u;
  } else {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(row.f32() + d));
    split_bf16x2(u32_as_f32(v.x), u32_as_f32(v.y), hi, lo);
  }
}

// acc += a b over the terms: (lo, hi) when kSplitA, (hi, lo) when kSplitB, then (hi, hi).
template <bool kSplitA, bool kSplitB>
SPK_DEVICE void mma_terms(float acc[4], const uint32_t a_hi[4], const uint32_t a_lo[4],
                          uint32_t b0_hi, uint32_t b1_hi, uint32_t b0_lo, uint32_t b1_lo) {
  if (kSplitA) mma_bf16_16816(acc, a_lo, b0_hi, b1_hi);
  if (kSplitB) mma_bf16_16816(acc, a_hi, b0_lo, b1_lo);
  mma_bf16_16816(acc, a_hi, b0_hi, b1_hi);
}

// Calls run(Const<bool, kSplitAct>()) for the activation type: f32 activations are split into
// hi + lo bf16 terms, bf16 ones are MMA operands as they are.
template <typename F>
SPK_DEVICE void by_activation(const F& run) {
  if (act_bf16()) {
    run(Const<bool, false>());
  } else {
    run(Const<bool, true>());
  }
}

namespace direct {

constexpr int kKeys = 32;  // 4 n8 blocks of scores
constexpr int kMaxGroup = 2;  // query heads (of one kv head) per unit

struct Shared {
  // [step parity][warp][head of the unit][score fragment value][lane]
  float scores[2][kWarps][kMaxGroup][16][32];
};

// Whether head_dim and the rows' alignment suit the tiles (q the query activations, k and v the
// start of the key and value rows).
SPK_DEVICE bool applies(int head_dim, ActIn q, const void* k, const void* v) {
  return head_dim % 8 == 0 && head_dim <= kMaxHeadDim && q.aligned4() && aligned8(k) &&
         aligned8(v);
}

// Elements d, d + 1 of a key row as bf16x2 MMA terms (hi, lo): f32 split, bf16 as stored (lo 0).
SPK_DEVICE void row_pair(const float* row, int d, uint32_t& hi, uint32_t& lo) {
  const uint2 v = __ldg(reinterpret_cast<const uint2*>(row + d));
  split_bf16x2(u32_as_f32(v.x), u32_as_f32(v.y), hi, lo);
}
SPK_DEVICE void row_pair(const unsigned short* row, int d, uint32_t& hi, uint32_t& lo) {
  hi = __ldg(reinterpret_cast<const uint32_t*>(row + d));
  lo = 0u;
}
// Element d of value rows a and b (null: zero) as bf16x2 MMA terms, a's in the low halves.
SPK_DEVICE void column_pair(const float* a, const float* b, int d, uint32_t& hi, uint32_t& lo) {
  split_bf16x2(a != nullptr ? ldg_f(a + d) : 0.0f, b != nullptr ? ldg_f(b + d) : 0.0f, hi, lo);
}
SPK_DEVICE void column_pair(const unsigned short* a, const unsigned short* b, int d,
                            uint32_t& hi, uint32_t& lo) {
  const uint32_t x = a != nullptr ? __ldg(a + d) : 0u, z = b != nullptr ? __ldg(b + d) : 0u;
  hi = x | (z << 16);
  lo = 0u;
}

// One unit: query rows t0 .. t0 + rows - 1 (rows <= 16) of the G query heads h0 .. h0 + G - 1,
// which read the same kv head (GQA: each K and V fragment loaded serves G x 16 rows), over keys
// [kmin, kmax] (q and y [T, q_heads, head_dim]); this lane's rows g and g + 8 (g = lane / 4) see
// keys [lo[i], hi[i]] (empty when hi < lo). Keys gives the rows: Keys::Element (float or
// unsigned short holding bf16), keys.k(key) and keys.v(key) the key's K and V rows of the kv
// head, or null for a key without one (it scores -inf and adds nothing). NKS = ceil(head_dim /
// 64): the most column steps a warp takes (warp w's step ks is columns 16 (w + 4 ks) .. + 15).
// G x NKS <= 8 keeps the Q fragments and accumulators in registers. Ends with a barrier (the
// shared scores are reused by the next unit).
template <int NKS, int G, bool kSplitAct, typename Keys>
SPK_DEVICE void attend(ActIn q, ActOut y, int t0, int rows, int h0, int q_heads, int head_dim,
                       const Keys& keys, float scale, const int lo[2], const int hi[2], int kmin,
                       int kmax, Shared& sh) {
  static_assert(G >= 1 && G <= kMaxGroup && G * NKS <= 8, "registers");
  using C = typename Keys::Element;
  constexpr bool kSplitKv = sizeof(C) == 4;
  const int warp = warp_id(), lane = lane_id(), g = lane >> 2, c = 2 * (lane & 3);
  const int steps = (head_dim + 15) / 16;
  const auto has_step = [&](int ks) { return warp + 4 * ks < steps; };
  const auto column = [&](int ks) { return (warp + 4 * ks) * 16; };

  // Q fragments of this warp's columns, per head: a0 row g col c, a1 row g+8 col c, a2 row g col
  // c+8, a3 row g+8 col c+8 (zeros for rows past `rows` and columns past head_dim).
  uint32_t qh[G][NKS][4], ql[G][NKS][4];
#pragma unroll
  for (int j = 0; j < G; ++j) {
#pragma unroll
    for (int ks = 0; ks < NKS; ++ks) {
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        const int r = g + (f & 1) * 8, d = column(ks) + c + (f >> 1) * 8;
        qh[j][ks][f] = ql[j][ks][f] = 0u;
        if (r < rows && has_step(ks) && d < head_dim) {
          query_pair(q + (static_cast<int64_t>(t0 + r) * q_heads + h0 + j) * head_dim, d,
                     qh[j][ks][f], ql[j][ks][f]);
        }
      }
    }
  }
  float o[G][2 * NKS][4];
  float m[G][2], l[G][2];
#pragma unroll
  for (int j = 0; j < G; ++j) {
#pragma unroll
    for (int nb = 0; nb < 2 * NKS; ++nb) {
      o[j][nb][0] = o[j][nb][1] = o[j][nb][2] = o[j][nb][3] = 0.0f;
    }
    m[j][0] = m[j][1] = -inff_();
    l[j][0] = l[j][1] = 0.0f;
  }

  int parity = 0;
  for (int kb = kmin; kb <= kmax; kb += kKeys, parity ^= 1) {
    // This warp's part of each head's 16 x 32 scores; a K fragment serves every head.
    float s[G][4][4];
#pragma unroll
    for (int nb = 0; nb < 4; ++nb) {
#pragma unroll
      for (int j = 0; j < G; ++j) s[j][nb][0] = s[j][nb][1] = s[j][nb][2] = s[j][nb][3] = 0.0f;
      const int key = kb + nb * 8 + g;
      const C* krow = key <= kmax ? keys.k(key) : nullptr;
#pragma unroll
      for (int ks = 0; ks < NKS; ++ks) {
        if (!has_step(ks)) continue;
        uint32_t b0h = 0u, b0l = 0u, b1h = 0u, b1l = 0u;
        if (krow != nullptr) {
          if (column(ks) + c < head_dim) row_pair(krow, column(ks) + c, b0h, b0l);
          if (column(ks) + c + 8 < head_dim) row_pair(krow, column(ks) + c + 8, b1h, b1l);
        }
#pragma unroll
        for (int j = 0; j < G; ++j) {
          mma_terms<kSplitAct, kSplitKv>(s[j][nb], qh[j][ks], ql[j][ks], b0h, b1h, b0l, b1l);
        }
      }
    }
    // The four warps' parts summed in warp order: every warp gets the same scores.
#pragma unroll
    for (int j = 0; j < G; ++j) {
#pragma unroll
      for (int i = 0; i < 16; ++i) sh.scores[parity][warp][j][i][lane] = s[j][i >> 2][i & 3];
    }
    __syncthreads();
    uint32_t ph[G][2][4], pl[G][2][4];
#pragma unroll
    for (int j = 0; j < G; ++j) {
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        float v = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) v += sh.scores[parity][w][j][i][lane];
        s[j][i >> 2][i & 3] = v;
      }
      // Mask, scale, online softmax of rows g (values 0, 1) and g + 8 (values 2, 3).
      float step_max[2] = {-inff_(), -inff_()};
#pragma unroll
      for (int nb = 0; nb < 4; ++nb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1, key = kb + nb * 8 + c + (e & 1);
          s[j][nb][e] = key >= lo[r] && key <= hi[r] ? s[j][nb][e] * scale : -inff_();
          step_max[r] = fmaxf_(step_max[r], s[j][nb][e]);
        }
      }
      float corr[2], step_sum[2] = {0.0f, 0.0f};
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        step_max[r] = fmaxf_(step_max[r], __shfl_xor_sync(0xffffffffu, step_max[r], 1));
        step_max[r] = fmaxf_(step_max[r], __shfl_xor_sync(0xffffffffu, step_max[r], 2));
        const float m_new = fmaxf_(m[j][r], step_max[r]);
        corr[r] = m[j][r] == -inff_() ? 0.0f : spk_expf(m[j][r] - m_new);
        m[j][r] = m_new;
      }
#pragma unroll
      for (int nb = 0; nb < 4; ++nb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1;
          s[j][nb][e] = s[j][nb][e] == -inff_() ? 0.0f : spk_expf(s[j][nb][e] - m[j][r]);
          step_sum[r] += s[j][nb][e];
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        step_sum[r] += __shfl_xor_sync(0xffffffffu, step_sum[r], 1);
        step_sum[r] += __shfl_xor_sync(0xffffffffu, step_sum[r], 2);
        l[j][r] = l[j][r] * corr[r] + step_sum[r];
      }
#pragma unroll
      for (int nb = 0; nb < 2 * NKS; ++nb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) o[j][nb][e] *= corr[e >> 1];
      }
      // P as A fragments (the C fragments of n blocks 2 kk and 2 kk + 1 are the A fragment of
      // keys 16 kk .. 16 kk + 15).
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
#pragma unroll
        for (int f = 0; f < 4; ++f) {
          const float* src = s[j][2 * kk + (f >> 1)] + (f & 1) * 2;
          if (kSplitAct) {
            split_bf16x2(src[0], src[1], ph[j][kk][f], pl[j][kk][f]);
          } else {
            ph[j][kk][f] = pack_bf16x2(src[0], src[1]);
            pl[j][kk][f] = 0u;
          }
        }
      }
    }
    // V as B fragments, each serving every head, accumulated into this warp's output columns.
    const C* vrow[2][4];  // keys kb + 16 kk + c + {0, 1, 8, 9}
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int key = kb + kk * 16 + c + (i & 1) + (i >> 1) * 8;
        vrow[kk][i] = key <= kmax ? keys.v(key) : nullptr;
      }
    }
#pragma unroll
    for (int nb = 0; nb < 2 * NKS; ++nb) {
      const int d = column(nb >> 1) + (nb & 1) * 8 + g;
      if (!has_step(nb >> 1) || column(nb >> 1) + (nb & 1) * 8 >= head_dim) continue;
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        uint32_t b0h, b0l, b1h, b1l;
        column_pair(vrow[kk][0], vrow[kk][1], d, b0h, b0l);
        column_pair(vrow[kk][2], vrow[kk][3], d, b1h, b1l);
#pragma unroll
        for (int j = 0; j < G; ++j) {
          mma_terms<kSplitAct, kSplitKv>(o[j][nb], ph[j][kk], pl[j][kk], b0h, b1h, b0l, b1l);
        }
      }
    }
  }
  // y = o / l (zeros for a row without keys).
#pragma unroll
  for (int j = 0; j < G; ++j) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = g + r * 8;
      if (row >= rows) continue;
      const float inv = l[j][r] > 0.0f ? 1.0f / l[j][r] : 0.0f;
      const ActOut yr = y + (static_cast<int64_t>(t0 + row) * q_heads + h0 + j) * head_dim;
#pragma unroll
      for (int nb = 0; nb < 2 * NKS; ++nb) {
        const int d = column(nb >> 1) + (nb & 1) * 8 + c;
        if (!has_step(nb >> 1) || d >= head_dim) continue;
        yr[d] = o[j][nb][2 * r] * inv;
        yr[d + 1] = o[j][nb][2 * r + 1] * inv;
      }
    }
  }
  __syncthreads();  // the shared scores are reused by the next unit
}

// The query heads one unit takes for this shape: two heads of one kv head where the groups pair
// up and head_dim <= 256 (registers: group x NKS <= 8), else one.
SPK_DEVICE int unit_heads(int q_heads, int kv_heads, int head_dim) {
  return kv_heads > 0 && q_heads % (2 * kv_heads) == 0 && head_dim <= 256 ? 2 : 1;
}

// attend() with NKS, G and kSplitAct chosen for head_dim, `heads` (unit_heads()) and the
// activation type.
template <typename Keys>
SPK_DEVICE void attend_any(ActIn q, ActOut y, int t0, int rows, int h0, int heads, int q_heads,
                           int head_dim, const Keys& keys, float scale, const int lo[2],
                           const int hi[2], int kmin, int kmax, Shared& sh) {
  const auto by_act = [&](auto nks, auto group) {
    by_activation([&](auto split_act) {
      attend<decltype(nks)::value, decltype(group)::value, decltype(split_act)::value>(
          q, y, t0, rows, h0, q_heads, head_dim, keys, scale, lo, hi, kmin, kmax, sh);
    });
  };
  const auto by_heads = [&](auto nks) {
    if constexpr (decltype(nks)::value <= 4) {
      if (heads == 2) {
        by_act(nks, Const<int, 2>());
        return;
      }
    }
    by_act(nks, Const<int, 1>());
  };
  switch ((head_dim + 63) / 64) {
    case 1: by_heads(Const<int, 1>()); break;
    case 2: by_heads(Const<int, 2>()); break;
    case 3: by_heads(Const<int, 3>()); break;
    case 4: by_heads(Const<int, 4>()); break;
    case 5: by_heads(Const<int, 5>()); break;
    case 6: by_heads(Const<int, 6>()); break;
    case 7: by_heads(Const<int, 7>()); break;
    default: by_heads(Const<int, 8>()); break;
  }
}

}  // namespace direct

namespace staged {

constexpr int kMaxGroup = 4;  // query heads (of one kv head) per unit
// The unit's shared memory: static, so that the attention entry (which also holds the per-token
// path's partials, in a union with this) stays within the 48 KB a block may declare statically
// and the decode launches keep their occupancy; the largest layout below needs 41,984 bytes.
constexpr int kSharedBytes = 42 * 1024;

struct Shared {
  __align__(16) unsigned char bytes[kSharedBytes];
};

// The tiles of a unit whose head_dim is at most kHeadDim: a K and a V tile of kKeys keys (32,
// else 16 where 32 do not fit: head_dim 512), each staged row head_dim + 8 bf16 long (the padding
// puts ldmatrix's 8 rows of a matrix in distinct banks), then the score exchange, kWarps x 16 rows
// x kKeys floats.
template <int kHeadDim>
struct TileLayout {
  static constexpr int kRowBytes = (kHeadDim + 8) * 2;
  static constexpr int Bytes(int keys) { return 2 * keys * kRowBytes + kWarps * kRows * keys * 4; }
  static constexpr int kKeys = Bytes(32) <= kSharedBytes ? 32 : 16;
  static_assert(Bytes(kKeys) <= kSharedBytes, "the tiles do not fit");
};

// Whether head_dim and the rows' alignment suit the tiles (q the query activations, k and v the
// start of the key and value rows; the rows of one kv head are head_dim elements apart within a
// slot, so 16-byte-aligned bases and head_dim % 16 == 0 keep every staged row aligned).
SPK_DEVICE bool applies(int head_dim, ActIn q, const void* k, const void* v) {
  return head_dim % 16 == 0 && head_dim <= kMaxHeadDim && q.aligned4() && aligned16(k) &&
         aligned16(v);
}

// Stages rows kb .. kb + KT - 1 of K (kIsK) or V into `tile` (pitch elements apart) by cp.async,
// then commits the group; keys past kmax or without a row are zero rows (V rows of keys that
// score nothing must not be NaN: 0 x NaN would reach the output).
template <int KT, bool kIsK, typename Keys>
SPK_DEVICE void stage_tile(const Keys& keys, unsigned short* tile, int pitch, int kb, int kmax,
                           int head_dim) {
  using C = unsigned short;
  constexpr int kPerChunk = 8;
  const int chunks = head_dim / kPerChunk;
  int last_r = -1;
  const C* src = nullptr;
  for (int i = static_cast<int>(threadIdx.x); i < KT * chunks; i += kWarps * 32) {
    const int r = i / chunks, ch = i - r * chunks;
    if (r != last_r) {
      const int key = kb + r;
      src = key <= kmax ? (kIsK ? keys.k(key) : keys.v(key)) : nullptr;
      last_r = r;
    }
    C* dst = tile + r * pitch + ch * kPerChunk;
    if (src != nullptr) {
      cp_async16(dst, src + ch * kPerChunk);
    } else {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
  cp_async_commit();
}

// One unit: query rows t0 .. t0 + rows - 1 (rows <= 16) of the G query heads h0 .. h0 + G - 1,
// which read the same kv head, over keys [kmin, kmax] (q and y [T, q_heads, head_dim]); this
// lane's rows g and g + 8 (g = lane / 4) see keys [lo[i], hi[i]] (empty when hi < lo). Keys gives
// the rows: Keys::Element (unsigned short holding bf16), keys.k(key) and keys.v(key) the key's K
// and V rows of the kv head (16-byte aligned), or null for a key without one (it scores -inf and
// adds nothing). NKS: the most column steps a warp takes (ceil(head_dim / 16 / CW); <= 8
// keeps the Q fragments and accumulators in registers). Ends with a barrier (the shared tiles are
// reused by the next unit).
template <int NKS, int G, bool kSplitAct, typename Keys>
SPK_DEVICE void attend(ActIn q, ActOut y, int t0, int rows, int h0, int q_heads, int head_dim,
                       const Keys& keys, float scale, const int lo[2], const int hi[2], int kmin,
                       int kmax, Shared& sh) {
  static_assert(G >= 1 && G <= kMaxGroup && kWarps % G == 0 && NKS >= 1 && NKS <= 8, "shape");
  using C = typename Keys::Element;
  static_assert(sizeof(C) == 2, "bf16 caches (f32 ones take the direct units)");
  constexpr int CW = kWarps / G;  // warps per head
  constexpr int kHeadDimMax = NKS * 16 * CW < kMaxHeadDim ? NKS * 16 * CW : kMaxHeadDim;
  using L = TileLayout<kHeadDimMax>;
  constexpr int KT = L::kKeys, NB = KT / 8, KK = KT / 16;
  const int warp = warp_id(), lane = lane_id(), g = lane >> 2, c = 2 * (lane & 3);
  const int head = warp / CW, wi = warp % CW;
  const int steps = head_dim / 16;
  const auto has_step = [&](int ks) { return wi + CW * ks < steps; };
  const auto column = [&](int ks) { return (wi + CW * ks) * 16; };
  const int pitch = head_dim + 8;  // elements
  C* const k_tile = reinterpret_cast<C*>(sh.bytes);
  C* const v_tile = k_tile + KT * pitch;
  float* const exchange = reinterpret_cast<float*>(sh.bytes + 2 * KT * pitch * 2);
  // ldmatrix row addresses: lane l serves row l % 8 of matrix l / 8.
  const int lm = lane >> 3, lr = lane & 7;

  if (kmin <= kmax) stage_tile<KT, true>(keys, k_tile, pitch, kmin, kmax, head_dim);

  // Q fragments of this warp's columns: a0 row g col c, a1 row g+8 col c, a2 row g col c+8, a3
  // row g+8 col c+8 (zeros for rows past `rows`).
  uint32_t qh[NKS][4], ql[NKS][4];
#pragma unroll
  for (int ks = 0; ks < NKS; ++ks) {
#pragma unroll
    for (int f = 0; f < 4; ++f) {
      const int r = g + (f & 1) * 8, d = column(ks) + c + (f >> 1) * 8;
      qh[ks][f] = ql[ks][f] = 0u;
      if (r < rows && has_step(ks)) {
        query_pair(q + (static_cast<int64_t>(t0 + r) * q_heads + h0 + head) * head_dim, d,
                   qh[ks][f], ql[ks][f]);
      }
    }
  }
  float o[2 * NKS][4];
#pragma unroll
  for (int nb = 0; nb < 2 * NKS; ++nb) o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.0f;
  float m[2] = {-inff_(), -inff_()}, l[2] = {0.0f, 0.0f};

  for (int kb = kmin; kb <= kmax; kb += KT) {
    cp_async_wait_all();  // this tile's K (and the last tile's V) landed
    __syncthreads();      // ... for every thread; the V tile and the exchange are free again
    stage_tile<KT, false>(keys, v_tile, pitch, kb, kmax, head_dim);

    // This warp's part of its head's 16 x KT scores.
    float s[NB][4];
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < NKS; ++ks) {
      if (!has_step(ks)) continue;
      // Matrix m: keys (2 np + m / 2) * 8 + row, columns column(ks) + (m % 2) * 8.
#pragma unroll
      for (int np = 0; np < NB / 2; ++np) {
        uint32_t b[4];
        ldmatrix_x4(b, k_tile + ((2 * np + (lm >> 1)) * 8 + lr) * pitch + column(ks) +
                           (lm & 1) * 8);
        mma_terms<kSplitAct, false>(s[2 * np], qh[ks], ql[ks], b[0], b[1], 0u, 0u);
        mma_terms<kSplitAct, false>(s[2 * np + 1], qh[ks], ql[ks], b[2], b[3], 0u, 0u);
      }
    }
    // The head's CW parts summed in warp order: its warps get the same scores.
    if (CW > 1) {
#pragma unroll
      for (int i = 0; i < NB * 4; ++i) exchange[(warp * NB * 4 + i) * 32 + lane] = s[i >> 2][i & 3];
    }
    __syncthreads();  // the parts are visible; every warp is done with the K tile
    if (kb + KT <= kmax) stage_tile<KT, true>(keys, k_tile, pitch, kb + KT, kmax, head_dim);
    if (CW > 1) {
#pragma unroll
      for (int i = 0; i < NB * 4; ++i) {
        float v = 0.0f;
#pragma unroll
        for (int w = 0; w < CW; ++w) v += exchange[((head * CW + w) * NB * 4 + i) * 32 + lane];
        s[i >> 2][i & 3] = v;
      }
    }
    // Mask, scale, online softmax of rows g (values 0, 1) and g + 8 (values 2, 3).
    float step_max[2] = {-inff_(), -inff_()};
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1, key = kb + nb * 8 + c + (e & 1);
        s[nb][e] = key >= lo[r] && key <= hi[r] ? s[nb][e] * scale : -inff_();
        step_max[r] = fmaxf_(step_max[r], s[nb][e]);
      }
    }
    float corr[2], step_sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      step_max[r] = fmaxf_(step_max[r], __shfl_xor_sync(0xffffffffu, step_max[r], 1));
      step_max[r] = fmaxf_(step_max[r], __shfl_xor_sync(0xffffffffu, step_max[r], 2));
      const float m_new = fmaxf_(m[r], step_max[r]);
      corr[r] = m[r] == -inff_() ? 0.0f : spk_expf(m[r] - m_new);
      m[r] = m_new;
    }
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nb][e] = s[nb][e] == -inff_() ? 0.0f : spk_expf(s[nb][e] - m[e >> 1]);
        step_sum[e >> 1] += s[nb][e];
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      step_sum[r] += __shfl_xor_sync(0xffffffffu, step_sum[r], 1);
      step_sum[r] += __shfl_xor_sync(0xffffffffu, step_sum[r], 2);
      l[r] = l[r] * corr[r] + step_sum[r];
    }
#pragma unroll
    for (int nb = 0; nb < 2 * NKS; ++nb) {
#pragma unroll
      for (int e = 0; e < 4; ++e) o[nb][e] *= corr[e >> 1];
    }
    // P as A fragments (the C fragments of n blocks 2 kk and 2 kk + 1 are the A fragment of keys
    // 16 kk .. 16 kk + 15).
    uint32_t ph[KK][4], pl[KK][4];
#pragma unroll
    for (int kk = 0; kk < KK; ++kk) {
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        const float* src = s[2 * kk + (f >> 1)] + (f & 1) * 2;
        if (kSplitAct) {
          split_bf16x2(src[0], src[1], ph[kk][f], pl[kk][f]);
        } else {
          ph[kk][f] = pack_bf16x2(src[0], src[1]);
          pl[kk][f] = 0u;
        }
      }
    }
    // The V tile landed (the next K tile may still be in flight).
    if (kb + KT <= kmax) {
      cp_async_wait_pending<1>();
    } else {
      cp_async_wait_all();
    }
    __syncthreads();
    // V as B fragments into this warp's output columns (n blocks 2 ks and 2 ks + 1).
#pragma unroll
    for (int ks = 0; ks < NKS; ++ks) {
      if (!has_step(ks)) continue;
#pragma unroll
      for (int kk = 0; kk < KK; ++kk) {
        // b0, b1 of n block 2 ks, then of 2 ks + 1. Matrix m: keys 16 kk + (m % 2) * 8 + row,
        // columns column(ks) + (m / 2) * 8.
        uint32_t b[4];
        ldmatrix_x4_trans(b, v_tile + (kk * 16 + (lm & 1) * 8 + lr) * pitch + column(ks) +
                                 (lm >> 1) * 8);
        mma_terms<kSplitAct, false>(o[2 * ks], ph[kk], pl[kk], b[0], b[1], 0u, 0u);
        mma_terms<kSplitAct, false>(o[2 * ks + 1], ph[kk], pl[kk], b[2], b[3], 0u, 0u);
      }
    }
  }
  // y = o / l (zeros for a row without keys).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + r * 8;
    if (row >= rows) continue;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    const ActOut yr = y + (static_cast<int64_t>(t0 + row) * q_heads + h0 + head) * head_dim;
#pragma unroll
    for (int nb = 0; nb < 2 * NKS; ++nb) {
      const int d = column(nb >> 1) + (nb & 1) * 8 + c;
      if (!has_step(nb >> 1)) continue;
      yr[d] = o[nb][2 * r] * inv;
      yr[d + 1] = o[nb][2 * r + 1] * inv;
    }
  }
  __syncthreads();  // the shared tiles are reused by the next unit
}

// The query heads one unit takes for this shape: 4, 2 or 1 heads of one kv head, the most whose
// columns the block's warps can hold (head_dim x heads <= 512) where the group divides by them.
SPK_DEVICE int unit_heads(int q_heads, int kv_heads, int head_dim) {
  for (int heads = kMaxGroup; heads > 1; heads /= 2) {
    if (kv_heads > 0 && q_heads % (heads * kv_heads) == 0 && head_dim * heads <= kMaxHeadDim) {
      return heads;
    }
  }
  return 1;
}

// attend() with NKS, G and kSplitAct chosen for head_dim, `heads` (unit_heads()) and the
// activation type; NKS is rounded up to 2, 4 or 8 (fewer instances; the steps past head_dim are
// skipped).
template <typename Keys>
SPK_DEVICE void attend_any(ActIn q, ActOut y, int t0, int rows, int h0, int heads, int q_heads,
                           int head_dim, const Keys& keys, float scale, const int lo[2],
                           const int hi[2], int kmin, int kmax, Shared& sh) {
  const auto by_act = [&](auto nks, auto group) {
    by_activation([&](auto split_act) {
      attend<decltype(nks)::value, decltype(group)::value, decltype(split_act)::value>(
          q, y, t0, rows, h0, q_heads, head_dim, keys, scale, lo, hi, kmin, kmax, sh);
    });
  };
  const auto by_steps = [&](auto group) {
    constexpr int kCw = kWarps / decltype(group)::value;
    const int nks = (head_dim / 16 + kCw - 1) / kCw;
    if (nks <= 2) {
      by_act(Const<int, 2>(), group);
    } else if (nks <= 4) {
      by_act(Const<int, 4>(), group);
    } else {
      by_act(Const<int, 8>(), group);
    }
  };
  if (heads == 4) {
    by_steps(Const<int, 4>());
  } else if (heads == 2) {
    by_steps(Const<int, 2>());
  } else {
    by_steps(Const<int, 1>());
  }
}

}  // namespace staged

}  // namespace attn_tile
}  // namespace spk

#endif  // SPARK_KERNELS_ATTENTION_TILE_CUH_
