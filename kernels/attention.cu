// KV-cache write and grouped-query attention over the cache.
//
// Cache layout: K and V each a pool of blocks of kKvBlockRows slots of [kv_heads, head_dim] f32 or
// bf16 (`cache_dtype`, kernel_abi.h); token t's position p lives in slot KvSlot(row sequences[t]
// of the block table, capacity, p) (paged KV cache, kernel_abi.h). spark_kv_write skips tokens
// with a negative position or an unallocated block and rounds to bf16 (nearest even) for a bf16
// cache; attention widens cache elements to f32 as it loads them (16-byte f32 or 8-byte bf16
// loads per lane).
//
// spark_attention: one block (128 threads = 4 warps) per (token, query head, split), grid-stride
// over T * q_heads * s. The query at position p sees keys j in [lo, hi], lo = max(0, p - window + 1)
// when window > 0 (sliding: `window` keys including itself), else 0 (causal); hi = p, or
// max(p, last_visible[t]) when last_visible is given (the vision-bidirectional mask of Gemma 4
// 26B/31B: a soft token also sees the later tokens of its image block). Split over the KV
// length (flash-decoding, kernel_abi.h): with s = AttentionSplits(T, max_splits, split_rows) > 1
// (all of max_splits, or 1),
// each of the s key ranges of a (token, head) is one block that writes an unnormalised partial
// record (o, m, l) to `partials`, and spark_attention_merge combines the s records into y; a
// decode step (T = 1) thus runs q_heads * s blocks instead of q_heads. With s == 1 the block
// writes y directly. Within a block the keys are dealt to the 4 warps in groups of 1-4 (the K and
// V rows of a group are loaded together); each warp keeps a flash-style online softmax (running
// max, sum and output accumulator in registers; lanes split head_dim), and the warps' partial
// results are merged through shared memory at the end. Scores are q.k * scale in f32, softmax in
// f32 with an accurate exp (math.cuh). head_dim up to 512 (16-byte loads when
// head_dim % 128 == 0, else scalar loads); a larger head_dim writes NaN.
// Steps of at least kTileMinTokens tokens that do not split take the tensor-core tiles of
// attention_tile.cuh instead (16 tokens x one or two heads per unit, mma.sync), unit by unit: a
// tile whose tokens belong to several sequences (continuous batching) goes token by token as above.
#include "attention_tile.cuh"
#include "common.cuh"
#include "spark/runtime/kernel_abi.h"

namespace spk {
namespace attn {
namespace {

constexpr int kWarps = 4;       // ABI block size 128
constexpr int kMaxHeadDim = 512;  // Gemma 4: 256 (sliding) and 512 (full)

// Per-lane slice of a head_dim row. Vector layout (kVec): chunk c holds elements
// c*128 + lane*4 + {0..3}, c < NC. Scalar layout: element s*32 + lane, s < NS.
template <int NS, bool kVec>
struct Layout {
  static constexpr int kNC = NS / 4;
  // This lane's elements of a row of d elements, widened to f32: load4(e) gives elements
  // e .. e + 3 (vector layout), load1(e) element e (scalar layout); zeros past d.
  template <class Load4, class Load1>
  __device__ static void load_with(int d, float v[NS], const Load4& load4, const Load1& load1) {
    const int lane = lane_id();
    if (kVec) {
#pragma unroll
      for (int c = 0; c < kNC; ++c) {
        float4 f = make_float4(0.f, 0.f, 0.f, 0.f);
        if (c * 128 < d) f = load4(c * 128 + lane * 4);
        v[4 * c] = f.x;
        v[4 * c + 1] = f.y;
        v[4 * c + 2] = f.z;
        v[4 * c + 3] = f.w;
      }
    } else {
#pragma unroll
      for (int s = 0; s < NS; ++s) {
        const int e = s * 32 + lane;
        v[s] = e < d ? load1(e) : 0.0f;
      }
    }
  }
  // An f32 cache row (16-byte loads).
  __device__ static void load(const float* row, int d, float v[NS]) {
    load_with(d, v, [&](int e) { return ldg_f4(row + e); }, [&](int e) { return ldg_f(row + e); });
  }
  // A bf16 cache row (8-byte loads).
  __device__ static void load(const unsigned short* row, int d, float v[NS]) {
    load_with(
        d, v,
        [&](int e) { return unpack_bf16x4(__ldg(reinterpret_cast<const uint2*>(row + e))); },
        [&](int e) { return ldg_bf16(row + e); });
  }
  // An activation row (the query), of the module's activation type.
  __device__ static void load(ActIn row, int d, float v[NS]) {
    load_with(d, v, [&](int e) { return row.ldg4(e); }, [&](int e) { return row.ldg(e); });
  }
  __device__ static int index(int s) {
    return kVec ? (s / 4) * 128 + lane_id() * 4 + (s % 4) : s * 32 + lane_id();
  }
};

// Attention of one query over `n` keys starting at absolute key position `first` of the sequence
// whose block-table row is `table_row` (key first + i in slot KvSlot(table_row, capacity,
// first + i); an unallocated block, which a valid run never reads, as slot 0). Writes y (normalised) when `record` is null, else the partial record
// o[head_dim], m, l of kernel_abi.h (o = 0, m = 0, l = 0 when n == 0).
// C: the cache element (float, or unsigned short holding bf16 bits).
template <int NS, bool kVec, typename C>
SPK_DEVICE void attend_range(ActIn q, const int* table_row, const C* k_cache, const C* v_cache,
                             int first, int n, int head_dim, int kv_heads, int kvh, int capacity,
                             float scale, ActOut y, float* record, float* s_m, float* s_l,
                             float (*s_o)[kMaxHeadDim]) {
  using L = Layout<NS, kVec>;
  // Keys per warp step: K and V rows of all of them are loaded before any arithmetic, so that
  // 2 * kKeys * NS floats per lane (64) are in flight.
  constexpr int kKeys = NS <= 8 ? 4 : 2;
  const int lane = lane_id(), warp = warp_id();
  const int nw = num_warps() < kWarps ? num_warps() : kWarps;
  const int64_t slot_pitch = static_cast<int64_t>(kv_heads) * head_dim;
  const C* kh = k_cache + static_cast<int64_t>(kvh) * head_dim;
  const C* vh = v_cache + static_cast<int64_t>(kvh) * head_dim;

  if (warp < nw) {
    float qv[NS], o[NS];
    L::load(q, head_dim, qv);
#pragma unroll
    for (int s = 0; s < NS; ++s) o[s] = 0.0f;
    float m = -inff_(), l = 0.0f;
    for (int base = warp * kKeys; base < n; base += nw * kKeys) {
      float kv[kKeys][NS], vv[kKeys][NS];
#pragma unroll
      for (int u = 0; u < kKeys; ++u) {
        const int kk = base + u < n ? base + u : base;  // past the end: reload key `base`
        const long long slot = spark::abi::KvSlot(table_row, capacity, first + kk);
        const int64_t off = static_cast<int64_t>(slot < 0 ? 0 : slot) * slot_pitch;
        L::load(kh + off, head_dim, kv[u]);
        L::load(vh + off, head_dim, vv[u]);
      }
      float sc[kKeys];
#pragma unroll
      for (int u = 0; u < kKeys; ++u) {
        float part = 0.0f;
#pragma unroll
        for (int s = 0; s < NS; ++s) part = fmaf_(qv[s], kv[u][s], part);
        sc[u] = part;
      }
      float step_max = -inff_();
#pragma unroll
      for (int u = 0; u < kKeys; ++u) {
        sc[u] = base + u < n ? warp_sum(sc[u]) * scale : -inff_();
        step_max = fmaxf_(step_max, sc[u]);
      }
      const float m_new = fmaxf_(m, step_max);  // finite: key `base` is valid
      const float corr = m == -inff_() ? 0.0f : spk_expf(m - m_new);
      l *= corr;
#pragma unroll
      for (int s = 0; s < NS; ++s) o[s] *= corr;
#pragma unroll
      for (int u = 0; u < kKeys; ++u) {
        const float pu = base + u < n ? spk_expf(sc[u] - m_new) : 0.0f;
        l += pu;
#pragma unroll
        for (int s = 0; s < NS; ++s) o[s] = fmaf_(pu, vv[u][s], o[s]);
      }
      m = m_new;
    }
    if (lane == 0) {
      s_m[warp] = m;
      s_l[warp] = l;
    }
#pragma unroll
    for (int s = 0; s < NS; ++s) {
      const int e = L::index(s);
      if (e < head_dim) s_o[warp][e] = o[s];
    }
  }
  __syncthreads();
  float mx = -inff_();
  for (int w = 0; w < nw; ++w) mx = fmaxf_(mx, s_m[w]);
  float f[kWarps], den = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    f[w] = (w >= nw || s_m[w] == -inff_()) ? 0.0f : spk_expf(s_m[w] - mx);
    if (f[w] != 0.0f) den = fmaf_(s_l[w], f[w], den);
  }
  if (record == nullptr) {
    const float inv = den > 0.0f ? 1.0f / den : 0.0f;  // no keys (p < 0): zeros
    for (int e = threadIdx.x; e < head_dim; e += blockDim.x) {
      float num = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w)
        if (f[w] != 0.0f) num = fmaf_(s_o[w][e], f[w], num);
      y[e] = num * inv;
    }
  } else {
    for (int e = threadIdx.x; e < head_dim; e += blockDim.x) {
      float num = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w)
        if (f[w] != 0.0f) num = fmaf_(s_o[w][e], f[w], num);
      record[e] = num;
    }
    if (threadIdx.x == 0) {
      record[head_dim] = den > 0.0f ? mx : 0.0f;
      record[head_dim + 1] = den;
      record[head_dim + 2] = 0.0f;
      record[head_dim + 3] = 0.0f;
    }
  }
  __syncthreads();  // the shared partials are reused by the next unit
}

// Cache element stores: f32 as is, bf16 rounded to nearest even. put4 stores elements
// 4 * i4 .. 4 * i4 + 3 in one 16-byte (f32) or 8-byte (bf16) store.
SPK_DEVICE void put(float* cache, int64_t i, float x) { cache[i] = x; }
SPK_DEVICE void put(unsigned short* cache, int64_t i, float x) {
  cache[i] = static_cast<unsigned short>(pack_bf16x2(x, 0.0f) & 0xffffu);
}
SPK_DEVICE void put4(float* cache, int64_t i4, float4 f) {
  reinterpret_cast<float4*>(cache)[i4] = f;
}
SPK_DEVICE void put4(unsigned short* cache, int64_t i4, float4 f) {
  reinterpret_cast<uint2*>(cache)[i4] = make_uint2(pack_bf16x2(f.x, f.y), pack_bf16x2(f.z, f.w));
}
// Whether 4 consecutive cache elements starting at a multiple of 4 can be moved in one access.
SPK_DEVICE bool aligned_x4(const float* p) { return aligned16(p); }
SPK_DEVICE bool aligned_x4(const unsigned short* p) { return aligned8(p); }

// The kv head query head h reads (GQA: h / (q_heads / kv_heads), clamped to the last).
SPK_DEVICE int kv_head_of(int h, int q_heads, int kv_heads) {
  const int group = q_heads / kv_heads > 0 ? q_heads / kv_heads : 1;
  return h / group < kv_heads ? h / group : kv_heads - 1;
}
// The block-table row of the sequence whose row index is `sequence`.
SPK_DEVICE const int* table_row_of(const int* block_table, int sequence, int capacity) {
  return block_table + static_cast<int64_t>(sequence) * (capacity / spark::abi::kKvBlockRows);
}

template <typename C>
SPK_DEVICE void kv_write(ActIn k, ActIn v, const int* positions, const int* sequences,
                         const int* block_table, C* k_cache, C* v_cache, int num_tokens,
                         int kv_heads, int head_dim, int capacity) {
  const int64_t row = static_cast<int64_t>(kv_heads) * head_dim;
  // The slot of token t, -1 when it writes nothing (no position, or no block).
  const auto slot_of = [&](int64_t t) -> long long {
    const int pos = ldg_i(positions + t);
    if (pos < 0) return -1;
    return spark::abi::KvSlot(table_row_of(block_table, ldg_i(sequences + t), capacity), capacity,
                              pos);
  };
  const int64_t start = global_thread(), stride = grid_threads();
  const bool vec = (row % 4) == 0 && k.aligned4() && v.aligned4() && aligned_x4(k_cache) &&
                   aligned_x4(v_cache);
  if (vec) {
    const int64_t r4 = row / 4;
    const int64_t n = static_cast<int64_t>(num_tokens) * r4;
    for (int64_t i = start; i < n; i += stride) {
      const int64_t t = i / r4, c = i % r4;
      const long long slot = slot_of(t);
      if (slot < 0) continue;
      const int64_t dst = static_cast<int64_t>(slot) * r4 + c;
      put4(k_cache, dst, k.ld4(4 * i));
      put4(v_cache, dst, v.ld4(4 * i));
    }
  } else {
    const int64_t n = static_cast<int64_t>(num_tokens) * row;
    for (int64_t i = start; i < n; i += stride) {
      const int64_t t = i / row, c = i % row;
      const long long slot = slot_of(t);
      if (slot < 0) continue;
      const int64_t dst = static_cast<int64_t>(slot) * row + c;
      put(k_cache, dst, k[i]);
      put(v_cache, dst, v[i]);
    }
  }
}

// Attention of token t, query head h, split `split` of `splits` (kernel_abi.h) by one block.
template <typename C>
SPK_DEVICE void attend_token(ActIn q, const int* positions, const int* sequences,
                             const int* block_table, const C* k_cache, const C* v_cache, ActOut y,
                             float* partials, int64_t t, int h, int split, int splits, int q_heads,
                             int kv_heads, int head_dim, int capacity, int window, float scale,
                             const int* last_visible, bool vec, float* s_m, float* s_l,
                             float (*s_o)[kMaxHeadDim]) {
  const int kvh = kv_head_of(h, q_heads, kv_heads);
  const int p = ldg_i(positions + t);
  const int* table_row = table_row_of(block_table, ldg_i(sequences + t), capacity);
  const spark::abi::KeyRange keys = spark::abi::AttentionKeys(
      p, window, last_visible != nullptr ? ldg_i(last_visible + t) : p);
  const int lo = keys.begin;
  const spark::abi::KeyRange range = spark::abi::AttentionSplitRange(keys.count, splits, split);
  const int64_t th = t * q_heads + h;
  const int64_t off = th * head_dim;  // q and y: [T, q_heads, head_dim]
  float* record =
      splits > 1 ? partials + (th * splits + split) * spark::abi::AttentionRecordFloats(head_dim)
                 : nullptr;
  if (vec && head_dim <= 256) {
    attend_range<8, true>(q + off, table_row, k_cache, v_cache, lo + range.begin, range.count,
                          head_dim, kv_heads, kvh, capacity, scale, y + off, record, s_m, s_l, s_o);
  } else if (vec && head_dim <= 512) {
    attend_range<16, true>(q + off, table_row, k_cache, v_cache, lo + range.begin, range.count,
                           head_dim, kv_heads, kvh, capacity, scale, y + off, record, s_m, s_l,
                           s_o);
  } else if (head_dim <= kMaxHeadDim) {
    attend_range<16, false>(q + off, table_row, k_cache, v_cache, lo + range.begin, range.count,
                            head_dim, kv_heads, kvh, capacity, scale, y + off, record, s_m, s_l,
                            s_o);
  } else {
    // Unsupported head_dim (the compiler never emits it): a loud NaN result.
    for (int e = threadIdx.x; e < head_dim; e += blockDim.x) y[off + e] = nanf_();
  }
}

// Steps of at least kTileMinTokens tokens that do not split take the tensor-core tiles
// (attention_tile.cuh), 16 tokens x one, two or four heads of one kv head per unit.
constexpr int kTileMinTokens = 16;

// The tensor-core units of a cache type (bench/results/2026-12-07-h100-attention-staged.md).
// bf16 caches: the staged units (K and V tiles in shared memory by cp.async; 31B prefill of 4096
// tokens with bf16 caches and activations 2,153 against 1,707 tokens/s with the direct ones,
// H200). f32 caches: the direct units (fragments from global memory): staged f32 tiles are twice
// the bytes, so half the keys per tile (and head_dim 512's V not staged) within the static
// shared memory, and measured 4 % slower (1,296 against 1,356 tokens/s, H100).
SPK_DEVICE bool tile_applies(int head_dim, ActIn q, const float* k, const float* v) {
  return attn_tile::direct::applies(head_dim, q, k, v);
}
SPK_DEVICE bool tile_applies(int head_dim, ActIn q, const unsigned short* k,
                             const unsigned short* v) {
  return attn_tile::staged::applies(head_dim, q, k, v);
}
SPK_DEVICE int tile_heads(const float*, int q_heads, int kv_heads, int head_dim) {
  return attn_tile::direct::unit_heads(q_heads, kv_heads, head_dim);
}
SPK_DEVICE int tile_heads(const unsigned short*, int q_heads, int kv_heads, int head_dim) {
  return attn_tile::staged::unit_heads(q_heads, kv_heads, head_dim);
}
// The two kinds' shared memory: a launch uses one.
union TileShared {
  attn_tile::direct::Shared direct;
  attn_tile::staged::Shared staged;
};

// The K and V rows of kv head kvh of one sequence's cache (attention_tile.cuh's Keys).
template <typename C>
struct CacheKeys {
  using Element = C;
  const int* table_row;
  const C* k_head;  // the caches offset to the kv head
  const C* v_head;
  int capacity;
  int64_t slot_pitch;
  SPK_MEMBER const C* row(const C* base, int key) const {
    const long long slot = spark::abi::KvSlot(table_row, capacity, key);
    return slot < 0 ? nullptr : base + static_cast<int64_t>(slot) * slot_pitch;
  }
  SPK_MEMBER const C* k(int key) const { return row(k_head, key); }
  SPK_MEMBER const C* v(int key) const { return row(v_head, key); }
};

// The tile unit of tokens t0 .. t0 + 15 (those < num_tokens) and query heads h0 .. h0 + heads - 1
// (one kv head's) on tensor cores; returns false, having done nothing, when the tokens belong to
// more than one sequence.
template <typename C>
SPK_DEVICE bool attend_tile_unit(ActIn q, const int* positions, const int* sequences,
                                 const int* block_table, const C* k_cache, const C* v_cache,
                                 ActOut y, int num_tokens, int t0, int h0, int heads, int q_heads,
                                 int kv_heads, int head_dim, int capacity, int window, float scale,
                                 const int* last_visible, TileShared& sh) {
  const int rows = num_tokens - t0 < attn_tile::kRows ? num_tokens - t0 : attn_tile::kRows;
  const int seq = ldg_i(sequences + t0);
  const int g = lane_id() >> 2;
  int lo[2] = {0, 0}, hi[2] = {-1, -1};
  int kmin = 0x7fffffff, kmax = -1;
  for (int r = 0; r < rows; ++r) {
    if (ldg_i(sequences + t0 + r) != seq) return false;
    const int p = ldg_i(positions + t0 + r);
    const spark::abi::KeyRange keys = spark::abi::AttentionKeys(
        p, window, last_visible != nullptr ? ldg_i(last_visible + t0 + r) : p);
    if (keys.count <= 0) continue;
    const int last = keys.begin + keys.count - 1;
    kmin = keys.begin < kmin ? keys.begin : kmin;
    kmax = last > kmax ? last : kmax;
    if (r == g || r == g + 8) {
      lo[r >= 8] = keys.begin;
      hi[r >= 8] = last;
    }
  }
  const int kvh = kv_head_of(h0, q_heads, kv_heads);
  const CacheKeys<C> keys{
      table_row_of(block_table, seq, capacity), k_cache + static_cast<int64_t>(kvh) * head_dim,
      v_cache + static_cast<int64_t>(kvh) * head_dim,
      capacity, static_cast<int64_t>(kv_heads) * head_dim};
  if constexpr (sizeof(C) == 4) {
    attn_tile::direct::attend_any(q, y, t0, rows, h0, heads, q_heads, head_dim, keys, scale, lo,
                                  hi, kmin, kmax, sh.direct);
  } else {
    attn_tile::staged::attend_any(q, y, t0, rows, h0, heads, q_heads, head_dim, keys, scale, lo,
                                  hi, kmin, kmax, sh.staged);
  }
  return true;
}

template <typename C>
SPK_DEVICE void attention(ActIn q, const int* positions, const int* sequences,
                          const int* block_table, const C* k_cache, const C* v_cache, ActOut y,
                          float* partials, int num_tokens, int q_heads, int kv_heads, int head_dim,
                          int capacity, int window, float scale, int max_splits, int split_rows,
                          const int* last_visible, float* s_m, float* s_l,
                          float (*s_o)[kMaxHeadDim], TileShared& tile_shared) {
  const int splits =
      partials == nullptr ? 1 : spark::abi::AttentionSplits(num_tokens, max_splits, split_rows);
  const bool vec = (head_dim % 128) == 0 && q.aligned4() && aligned_x4(k_cache) &&
                   aligned_x4(v_cache);
  if (num_tokens >= kTileMinTokens && splits == 1 &&
      tile_applies(head_dim, q, k_cache, v_cache)) {
    const int heads = tile_heads(k_cache, q_heads, kv_heads, head_dim);
    const int head_units = q_heads / heads;
    const int64_t units =
        static_cast<int64_t>((num_tokens + attn_tile::kRows - 1) / attn_tile::kRows) * head_units;
    for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
      const int t0 = static_cast<int>(u / head_units) * attn_tile::kRows;
      const int h0 = static_cast<int>(u % head_units) * heads;
      if (attend_tile_unit(q, positions, sequences, block_table, k_cache, v_cache, y, num_tokens,
                           t0, h0, heads, q_heads, kv_heads, head_dim, capacity, window, scale,
                           last_visible, tile_shared)) {
        continue;
      }
      // Tokens of several sequences (continuous batching): one token and head at a time.
      for (int h = h0; h < h0 + heads; ++h) {
        for (int t = t0; t < num_tokens && t < t0 + attn_tile::kRows; ++t) {
          attend_token(q, positions, sequences, block_table, k_cache, v_cache, y, partials, t, h,
                       0, 1, q_heads, kv_heads, head_dim, capacity, window, scale, last_visible,
                       vec, s_m, s_l, s_o);
        }
      }
    }
    return;
  }
  const int64_t units = static_cast<int64_t>(num_tokens) * q_heads * splits;
  for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
    const int64_t th = u / splits;  // token * q_heads + head
    attend_token(q, positions, sequences, block_table, k_cache, v_cache, y, partials,
                 th / q_heads, static_cast<int>(th % q_heads), static_cast<int>(u % splits),
                 splits, q_heads, kv_heads, head_dim, capacity, window, scale, last_visible, vec,
                 s_m, s_l, s_o);
  }
}

}  // namespace
}  // namespace attn
}  // namespace spk

// The cache is reinterpreted by cache_dtype (kernel_abi.h); any other value writes nothing.
SPK_EXPORT void spark_kv_write(const void* k, const void* v, const int* positions,
                               const int* sequences, const int* block_table, void* k_cache,
                               void* v_cache, int num_tokens, int kv_heads, int head_dim,
                               int capacity, int cache_dtype) {
  using namespace spk::attn;
  if (num_tokens <= 0 || kv_heads <= 0 || head_dim <= 0 || capacity <= 0) return;
  if (cache_dtype == spark::abi::kCacheF32) {
    kv_write({k}, {v}, positions, sequences, block_table, static_cast<float*>(k_cache), static_cast<float*>(v_cache),
             num_tokens, kv_heads, head_dim, capacity);
  } else if (cache_dtype == spark::abi::kCacheBF16) {
    kv_write({k}, {v}, positions, sequences, block_table, static_cast<unsigned short*>(k_cache),
             static_cast<unsigned short*>(v_cache), num_tokens, kv_heads, head_dim, capacity);
  }
}

// An unknown cache_dtype writes NaN to y, and to the partial records when the step splits (so
// that the merge also yields NaN); the runtime rejects such a plan before launching.
SPK_EXPORT_INLINE void spark_attention(const void* q, const int* positions, const int* sequences,
                                const int* block_table, const void* k_cache, const void* v_cache, void* y_out, float* partials, int num_tokens,
                                int q_heads, int kv_heads, int head_dim, int capacity, int window,
                                float scale, int max_splits, int split_rows, int cache_dtype,
                                const int* last_visible) {
  using namespace spk::attn;
  // The per-token path's partials and the tensor-core units' tiles: one or the other is in use
  // at any time (each unit and each token ends with a barrier), and together they would not fit
  // the 48 KB a block may declare statically.
  __shared__ union {
    struct {
      float m[kWarps];
      float l[kWarps];
      __align__(16) float o[kWarps][kMaxHeadDim];
    } token;
    spk::attn::TileShared tile;
  } shared;
  float* const s_m = shared.token.m;
  float* const s_l = shared.token.l;
  float(*const s_o)[kMaxHeadDim] = shared.token.o;
  spk::attn::TileShared& tile_shared = shared.tile;
  if (num_tokens <= 0 || q_heads <= 0 || kv_heads <= 0 || head_dim <= 0 || capacity <= 0) return;
  const spk::ActOut y{y_out};
  if (cache_dtype == spark::abi::kCacheF32) {
    attention({q}, positions, sequences, block_table, static_cast<const float*>(k_cache),
              static_cast<const float*>(v_cache), y, partials, num_tokens, q_heads, kv_heads,
              head_dim, capacity, window, scale, max_splits, split_rows, last_visible, s_m, s_l,
              s_o, tile_shared);
  } else if (cache_dtype == spark::abi::kCacheBF16) {
    attention({q}, positions, sequences, block_table, static_cast<const unsigned short*>(k_cache),
              static_cast<const unsigned short*>(v_cache), y, partials, num_tokens, q_heads,
              kv_heads, head_dim, capacity, window, scale, max_splits, split_rows, last_visible,
              s_m, s_l, s_o, tile_shared);
  } else {
    const int64_t n = static_cast<int64_t>(num_tokens) * q_heads * head_dim;
    for (int64_t i = spk::global_thread(); i < n; i += spk::grid_threads()) y[i] = spk::nanf_();
    const int splits =
        partials == nullptr ? 1 : spark::abi::AttentionSplits(num_tokens, max_splits, split_rows);
    const int64_t records = splits > 1 ? static_cast<int64_t>(num_tokens) * q_heads * splits *
                                             spark::abi::AttentionRecordFloats(head_dim)
                                       : 0;
    for (int64_t i = spk::global_thread(); i < records; i += spk::grid_threads()) {
      partials[i] = spk::nanf_();
    }
  }
}

// One block per (token, query head), grid-stride: y = sum_j exp(m_j - M) o_j / sum_j exp(m_j - M) l_j
// over the splits j with l_j > 0, M their largest m_j (zeros when no split has keys).
SPK_EXPORT void spark_attention_merge(const float* partials, void* y_out, int num_tokens,
                                      int q_heads, int head_dim, int max_splits, int split_rows) {
  using namespace spk;
  const ActOut y{y_out};
  __shared__ float s_w[spark::abi::kMaxAttentionSplits];
  if (num_tokens <= 0 || q_heads <= 0 || head_dim <= 0) return;
  const int splits = spark::abi::AttentionSplits(num_tokens, max_splits, split_rows);
  if (splits == 1) return;
  const int64_t record_floats = spark::abi::AttentionRecordFloats(head_dim);
  const int64_t units = static_cast<int64_t>(num_tokens) * q_heads;
  for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
    const float* recs = partials + u * splits * record_floats;
    float mx = -inff_();
    for (int j = 0; j < splits; ++j) {
      const float* rec = recs + j * record_floats;
      if (ldg_f(rec + head_dim + 1) > 0.0f) mx = fmaxf_(mx, ldg_f(rec + head_dim));
    }
    for (int j = threadIdx.x; j < splits; j += blockDim.x) {
      const float* rec = recs + j * record_floats;
      s_w[j] = ldg_f(rec + head_dim + 1) > 0.0f ? spk_expf(ldg_f(rec + head_dim) - mx) : 0.0f;
    }
    __syncthreads();
    float den = 0.0f;
    for (int j = 0; j < splits; ++j) {
      if (s_w[j] != 0.0f) den = fmaf_(ldg_f(recs + j * record_floats + head_dim + 1), s_w[j], den);
    }
    const float inv = den > 0.0f ? 1.0f / den : 0.0f;
    for (int e = threadIdx.x; e < head_dim; e += blockDim.x) {
      float num = 0.0f;
      for (int j = 0; j < splits; ++j)
        if (s_w[j] != 0.0f) num = fmaf_(ldg_f(recs + j * record_floats + e), s_w[j], num);
      y[u * head_dim + e] = num * inv;
    }
    __syncthreads();  // s_w is reused by the next unit
  }
}

SPARK_CHECK_KERNEL_SIGNATURES()
