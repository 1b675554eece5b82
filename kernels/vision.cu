// The vision tower's ops (Gemma 4's image encoder; kernel_ops.def, "The vision tower"):
// shift_scale, patch_position_embedding, clamp, rope_2d, bidirectional_attention,
// pool_by_position, standardize. `positions` is the encoder's patch_positions input, i32 [T, 2]
// (x, y per token).
//
// spark_shift_scale, spark_clamp, spark_standardize: grid-stride elementwise maps, with
// 4-element vector accesses when the pointers are aligned for them and cols % 4 == 0 (y may alias
// x: each element is read before it is written by the same thread).
//
// spark_patch_position_embedding: grid-stride over (token, 4-column group) when aligned (one
// 8-byte load of 4 bf16 from each table row), else over elements; y = x + (ex + ey) in f32 as the
// host reference adds it; an out-of-range coordinate adds 0 and its table row is not read.
//
// spark_rope_2d: one block per token (grid-stride over tokens), as spark_rope (rope.cu): cos/sin
// of up to 256 (half, pair) entries in shared memory, then every head rotated with them. Each half
// of size n = head_dim / 2 is rotate-half RoPE over n with its own coordinate:
// inv_freq[c] = 1 / float(theta^(float(2c) / float(n))) (f32, the host reference's and
// transformers' form; theta^e in double rounded once), angle = float(coordinate) * inv_freq[c]
// (f32 product), sin/cos by spk_sincos. y may alias x (each thread reads both elements of its
// pair before writing them). Channels in no pair (head_dim % 4 != 0, which the registry's rule
// excludes) pass through.
//
// spark_bidirectional_attention: every query over all T keys (no mask), GQA. Fast path
// (head_dim <= 128, blockDim.x == 128): a block per (query head, tile of 32 query tokens),
// h-major so that consecutive blocks share one kv head's K/V in L2. Lane l of each of the 4 warps
// works for query l of the tile; warp w holds channels [w * kS, (w + 1) * kS) (kS a multiple of 4,
// 4 * kS >= head_dim) of q and of the output accumulator in registers. K and V tiles of 32 keys
// (widened to f32, zero padded to 4 * kS channels) are in shared memory; all lanes of a warp read
// the same float4 at a time (broadcasts). Per step of 8 keys the warps' partial dot products meet
// in shared memory and are added in warp order (every warp gets the same f32 scores), and an
// online softmax (f32 running max and sum, math.cuh's accurate exp) rescales the accumulator once.
// y = o / l. H100, f32, 16 heads of 72: 3.4 ms at T = 2520, 55 ms at T = 10000. Fallback (any
// head_dim, or another block size): one warp per (token, head), lanes over the output channels 32
// at a time, each pass recomputing the scores (warp-reduced dot products) with its own online
// softmax.
//
// spark_pool_by_position: a block per (output row r, pass of blockDim.x * 4 columns),
// grid-stride. The block first finds W = max(0, max_t positions[t, 0] + 1) (a block reduction),
// then scans the tokens blockDim.x at a time: the tokens of row r in the chunk are listed in
// token order in shared memory (warp inclusive scans by shuffles), and each thread adds
// x[t, c] * (1 / k^2) (f32, unfused as the host reference) to its columns' accumulators in that
// order; y[r, c] = acc * scale, so rows without tokens are 0 * scale.
//
// Every loop is grid-stride (any gridDim.x >= 1); block sizes are the registry's (256, attention
// 128); nothing here calls libdevice.
#include "common.cuh"

namespace spk {
namespace vision {
namespace {

// a * b rounded to f32 on its own: never fused into an fma with a following add (mul.rn, which
// neither LLVM's NVPTX back end nor ptxas contracts), so that sums of products round as the host
// reference's unfused arithmetic.
SPK_DEVICE float mul_rn(float a, float b) {
#if SPK_CLANG_DEVICE
  return __nvvm_mul_rn_f(a, b);
#elif SPK_ON_DEVICE
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
// a * c - b * s and b * c + a * s, each product rounded (the host reference's rotation).
SPK_DEVICE void rotate(float a, float b, float c, float s, float* ra, float* rb) {
  *ra = mul_rn(a, c) - mul_rn(b, s);
  *rb = mul_rn(b, c) + mul_rn(a, s);
}

// y[i] = f(x[i], column of i) over num_tokens x cols elements. kColumn: whether f uses the
// column (computing it costs a 64-bit remainder per element or group).
template <bool kColumn, typename F>
SPK_DEVICE void map_rows(ActIn x, ActOut y, int num_tokens, int cols, F f) {
  if (num_tokens <= 0 || cols <= 0) return;
  const int64_t n = static_cast<int64_t>(num_tokens) * cols;
  const int64_t start = global_thread(), stride = grid_threads();
  if ((cols % 4) == 0 && x.aligned4() && y.aligned4()) {
    for (int64_t i = start; i < n / 4; i += stride) {
      const int c = kColumn ? static_cast<int>((4 * i) % cols) : 0;
      const float4 v = x.ld4(4 * i);
      y.st4(4 * i, make_float4(f(v.x, c), f(v.y, c + 1), f(v.z, c + 2), f(v.w, c + 3)));
    }
  } else {
    for (int64_t i = start; i < n; i += stride) {
      const int c = kColumn ? static_cast<int>(i % cols) : 0;
      y[i] = f(x[i], c);
    }
  }
}

struct ShiftScaleOp {
  float shift, scale;
  __device__ float operator()(float v, int) const { return (v - shift) * scale; }
};
struct ClampOp {
  float lo, hi;  // NaN fails both comparisons and stays NaN
  __device__ float operator()(float v, int) const { return v < lo ? lo : (v > hi ? hi : v); }
};
struct StandardizeOp {
  const unsigned short* bias;
  const unsigned short* scale;
  __device__ float operator()(float v, int c) const {
    return (v - ldg_bf16(bias + c)) * ldg_bf16(scale + c);
  }
};

// ---- rope_2d ----
constexpr int kRope2dChunk = 256;  // (half, pair) entries per shared-memory chunk

// ---- bidirectional_attention ----
constexpr int kAttnWarps = 4;         // ABI block size 128: one channel slice per warp
constexpr int kAttnTileKeys = 32;     // keys per shared-memory tile
constexpr int kAttnKeyStep = 8;       // keys per online-softmax step
constexpr int kAttnMaxStride = 128;   // fast path: head_dim <= 128
constexpr int kAttnLoads = 4;         // 4-channel groups of a tile each thread loads at once

// The fast path for head_dim <= 4 * kS, blockDim.x == 128. A unit is (query head h, 32 query
// tokens): lane l of every warp works for query token tile * 32 + l, and warp w holds channels
// w * kS .. w * kS + kS - 1 of its q and output accumulator (zeros past head_dim), so the 32 lanes
// of a warp read the same K/V element of the shared tiles at a time (broadcasts). The warps'
// partial dot products meet in shared memory (s_part, double-buffered by step) and are added in
// warp order, so every warp has the same f32 scores and runs the same online softmax.
template <int kS>
SPK_DEVICE void attend_tiled(ActIn q, ActIn k, ActIn v, ActOut y, int num_tokens, int q_heads,
                             int kv_heads, int head_dim, float scale, float* s_k, float* s_v,
                             float* s_part) {
  static_assert(kS % 4 == 0 && kAttnWarps * kS <= kAttnMaxStride, "attention slice");
  constexpr int kStride = kAttnWarps * kS;  // floats per key row of the shared tiles
  constexpr int kPartBuffer = kAttnWarps * kAttnKeyStep * 32;
  const int tid = threadIdx.x, nt = blockDim.x;
  const int lane = lane_id(), w = warp_id();
  const int group = q_heads / kv_heads > 0 ? q_heads / kv_heads : 1;
  const int64_t q_pitch = static_cast<int64_t>(q_heads) * head_dim;
  const int64_t kv_pitch = static_cast<int64_t>(kv_heads) * head_dim;
  const int64_t tiles = (static_cast<int64_t>(num_tokens) + 31) / 32;
  const int64_t units = tiles * q_heads;
  // 4-channel vector loads of K and V rows (every row starts at a multiple of 4 elements).
  const bool vec = (head_dim % 4) == 0 && k.aligned4() && v.aligned4();
  // h-major: consecutive blocks share one kv head's K and V (L2).
  for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
    const int h = static_cast<int>(u / tiles);
    const int64_t t = (u % tiles) * 32 + lane;
    const bool active = t < num_tokens;
    int kvh = h / group;
    if (kvh >= kv_heads) kvh = kv_heads - 1;
    const ActIn kh = k + static_cast<int64_t>(kvh) * head_dim;
    const ActIn vh = v + static_cast<int64_t>(kvh) * head_dim;
    const int64_t q_off = t * q_pitch + static_cast<int64_t>(h) * head_dim;

    float qv[kS], o[kS];
#pragma unroll
    for (int s = 0; s < kS; ++s) {
      const int d = w * kS + s;
      qv[s] = active && d < head_dim ? q.ldg(q_off + d) : 0.0f;
      o[s] = 0.0f;
    }
    float m = -inff_(), l = 0.0f;
    int buffer = 0;

    for (int key0 = 0; key0 < num_tokens; key0 += kAttnTileKeys) {
      const int nk = num_tokens - key0 < kAttnTileKeys ? num_tokens - key0 : kAttnTileKeys;
      __syncthreads();  // every thread is done with the previous tile
      // The tiles in groups of 4 channels (zeros past head_dim and past the last key),
      // kAttnLoads groups per thread loaded before any is stored.
      constexpr int kQuads = kAttnTileKeys * kStride / 4;
      for (int base = 0; base < kQuads; base += kAttnLoads * nt) {
        float4 kb[kAttnLoads], vb[kAttnLoads];
#pragma unroll
        for (int r = 0; r < kAttnLoads; ++r) {
          const int i = base + r * nt + tid;
          const int j = i / (kStride / 4), d = (i % (kStride / 4)) * 4;
          kb[r] = make_float4(0.f, 0.f, 0.f, 0.f);
          vb[r] = kb[r];
          if (i < kQuads && j < nk && d < head_dim) {
            const int64_t off = static_cast<int64_t>(key0 + j) * kv_pitch + d;
            if (vec) {  // d + 3 < head_dim
              kb[r] = kh.ldg4(off);
              vb[r] = vh.ldg4(off);
            } else {
              kb[r].x = kh.ldg(off);
              vb[r].x = vh.ldg(off);
              if (d + 1 < head_dim) {
                kb[r].y = kh.ldg(off + 1);
                vb[r].y = vh.ldg(off + 1);
              }
              if (d + 2 < head_dim) {
                kb[r].z = kh.ldg(off + 2);
                vb[r].z = vh.ldg(off + 2);
              }
              if (d + 3 < head_dim) {
                kb[r].w = kh.ldg(off + 3);
                vb[r].w = vh.ldg(off + 3);
              }
            }
          }
        }
#pragma unroll
        for (int r = 0; r < kAttnLoads; ++r) {
          const int i = base + r * nt + tid;
          if (i < kQuads) {
            *reinterpret_cast<float4*>(s_k + 4 * i) = kb[r];
            *reinterpret_cast<float4*>(s_v + 4 * i) = vb[r];
          }
        }
      }
      __syncthreads();
      // nk is the same for the whole block: every thread reaches every barrier.
      for (int j0 = 0; j0 < nk; j0 += kAttnKeyStep) {
        float* part = s_part + buffer * kPartBuffer;  // [warp][key][lane]
#pragma unroll
        for (int e = 0; e < kAttnKeyStep; ++e) {
          const float* kr = s_k + (j0 + e) * kStride + w * kS;  // rows past nk are zeros
          float dot = 0.0f;
#pragma unroll
          for (int s = 0; s < kS; s += 4) {
            const float4 kk = *reinterpret_cast<const float4*>(kr + s);
            dot = fmaf_(qv[s], kk.x, dot);
            dot = fmaf_(qv[s + 1], kk.y, dot);
            dot = fmaf_(qv[s + 2], kk.z, dot);
            dot = fmaf_(qv[s + 3], kk.w, dot);
          }
          part[(w * kAttnKeyStep + e) * 32 + lane] = dot;
        }
        __syncthreads();  // the partials of this step are complete (the other buffer is free)
        float sc[kAttnKeyStep];
        float step_max = -inff_();
#pragma unroll
        for (int e = 0; e < kAttnKeyStep; ++e) {
          float dot = part[e * 32 + lane];
#pragma unroll
          for (int x = 1; x < kAttnWarps; ++x) dot += part[(x * kAttnKeyStep + e) * 32 + lane];
          sc[e] = j0 + e < nk ? dot * scale : -inff_();
          step_max = fmaxf_(step_max, sc[e]);
        }
        buffer ^= 1;
        const float m_new = fmaxf_(m, step_max);
        const float corr = m == -inff_() ? 0.0f : spk_expf(m - m_new);
        l *= corr;
#pragma unroll
        for (int s = 0; s < kS; ++s) o[s] *= corr;
#pragma unroll
        for (int e = 0; e < kAttnKeyStep; ++e) {
          const float p = j0 + e < nk ? spk_expf(sc[e] - m_new) : 0.0f;
          l += p;
          const float* vr = s_v + (j0 + e) * kStride + w * kS;
#pragma unroll
          for (int s = 0; s < kS; s += 4) {
            const float4 vv = *reinterpret_cast<const float4*>(vr + s);
            o[s] = fmaf_(p, vv.x, o[s]);
            o[s + 1] = fmaf_(p, vv.y, o[s + 1]);
            o[s + 2] = fmaf_(p, vv.z, o[s + 2]);
            o[s + 3] = fmaf_(p, vv.w, o[s + 3]);
          }
        }
        m = m_new;
      }
    }
    if (active) {
#pragma unroll
      for (int s = 0; s < kS; ++s) {
        const int d = w * kS + s;
        if (d < head_dim) y[q_off + d] = o[s] / l;
      }
    }
  }
}

// Any head_dim: one warp per (token, head); lane e owns output channel d0 + e of each pass of 32
// channels, and every pass recomputes the scores.
SPK_DEVICE void attend_warp(ActIn q, ActIn k, ActIn v, ActOut y, int num_tokens, int q_heads,
                            int kv_heads, int head_dim, float scale) {
  const int lane = lane_id();
  const int group = q_heads / kv_heads > 0 ? q_heads / kv_heads : 1;
  const int64_t q_pitch = static_cast<int64_t>(q_heads) * head_dim;
  const int64_t kv_pitch = static_cast<int64_t>(kv_heads) * head_dim;
  const int64_t units = static_cast<int64_t>(num_tokens) * q_heads;
  for (int64_t u = global_warp(); u < units; u += grid_warps()) {
    const int64_t t = u / q_heads;
    const int h = static_cast<int>(u % q_heads);
    int kvh = h / group;
    if (kvh >= kv_heads) kvh = kv_heads - 1;
    const ActIn qr = q + t * q_pitch + static_cast<int64_t>(h) * head_dim;
    const ActIn kh = k + static_cast<int64_t>(kvh) * head_dim;
    const ActIn vh = v + static_cast<int64_t>(kvh) * head_dim;
    const ActOut yr = y + t * q_pitch + static_cast<int64_t>(h) * head_dim;
    for (int d0 = 0; d0 < head_dim; d0 += 32) {
      const int d = d0 + lane;
      float m = -inff_(), l = 0.0f, o = 0.0f;
      for (int j = 0; j < num_tokens; ++j) {
        const int64_t row = static_cast<int64_t>(j) * kv_pitch;
        float part = 0.0f;
        for (int e = lane; e < head_dim; e += 32) part = fmaf_(qr.ldg(e), kh.ldg(row + e), part);
        const float sc = warp_sum(part) * scale;
        const float m_new = fmaxf_(m, sc);
        const float corr = m == -inff_() ? 0.0f : spk_expf(m - m_new);
        const float p = spk_expf(sc - m_new);
        l = fmaf_(l, corr, p);
        o = fmaf_(o, corr, d < head_dim ? p * vh.ldg(row + d) : 0.0f);
        m = m_new;
      }
      if (d < head_dim) yr[d] = o / l;
    }
  }
}

// ---- pool_by_position ----
constexpr int kPoolColumns = 4;    // columns per thread per pass
constexpr int kPoolMaxBlock = 1024;

SPK_DEVICE int warp_max_i(int v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const int w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  return v;
}

}  // namespace
}  // namespace vision
}  // namespace spk

SPK_EXPORT void spark_shift_scale(const void* x, void* y, int num_tokens, int cols, float shift,
                                  float scale) {
  spk::vision::map_rows<false>({x}, {y}, num_tokens, cols, spk::vision::ShiftScaleOp{shift, scale});
}

SPK_EXPORT void spark_clamp(const void* x, const unsigned short* lo, const unsigned short* hi,
                            void* y, int num_tokens, int cols) {
  if (num_tokens <= 0 || cols <= 0) return;
  spk::vision::map_rows<false>({x}, {y}, num_tokens, cols,
                               spk::vision::ClampOp{spk::ldg_bf16(lo), spk::ldg_bf16(hi)});
}

SPK_EXPORT void spark_standardize(const void* x, const unsigned short* bias,
                                  const unsigned short* scale, void* y, int num_tokens, int cols) {
  spk::vision::map_rows<true>({x}, {y}, num_tokens, cols, spk::vision::StandardizeOp{bias, scale});
}

SPK_EXPORT void spark_patch_position_embedding(const void* x_in, const int* positions,
                                               const unsigned short* table, void* y_out,
                                               int num_tokens, int dim, int table_size) {
  if (num_tokens <= 0 || dim <= 0) return;
  const spk::ActIn x{x_in};
  const spk::ActOut y{y_out};
  const int64_t plane = static_cast<int64_t>(table_size) * dim;  // table[1] starts here
  const int64_t start = spk::global_thread(), stride = spk::grid_threads();
  if ((dim % 4) == 0 && x.aligned4() && y.aligned4() && spk::aligned8(table)) {
    const int c4 = dim / 4;
    const int64_t n = static_cast<int64_t>(num_tokens) * c4;
    for (int64_t i = start; i < n; i += stride) {
      const int64_t t = i / c4;
      const int c = static_cast<int>(i % c4) * 4;
      const int px = spk::ldg_i(positions + 2 * t), py = spk::ldg_i(positions + 2 * t + 1);
      float4 ex = make_float4(0.f, 0.f, 0.f, 0.f), ey = ex;
      if (px >= 0 && px < table_size) {
        ex = spk::unpack_bf16x4(
            __ldg(reinterpret_cast<const uint2*>(table + static_cast<int64_t>(px) * dim + c)));
      }
      if (py >= 0 && py < table_size) {
        ey = spk::unpack_bf16x4(__ldg(
            reinterpret_cast<const uint2*>(table + plane + static_cast<int64_t>(py) * dim + c)));
      }
      const float4 v = x.ld4(4 * i);
      y.st4(4 * i, make_float4(v.x + (ex.x + ey.x), v.y + (ex.y + ey.y), v.z + (ex.z + ey.z),
                               v.w + (ex.w + ey.w)));
    }
  } else {
    const int64_t n = static_cast<int64_t>(num_tokens) * dim;
    for (int64_t i = start; i < n; i += stride) {
      const int64_t t = i / dim;
      const int c = static_cast<int>(i % dim);
      const int px = spk::ldg_i(positions + 2 * t), py = spk::ldg_i(positions + 2 * t + 1);
      const float ex =
          px >= 0 && px < table_size ? spk::ldg_bf16(table + static_cast<int64_t>(px) * dim + c)
                                     : 0.0f;
      const float ey = py >= 0 && py < table_size
                           ? spk::ldg_bf16(table + plane + static_cast<int64_t>(py) * dim + c)
                           : 0.0f;
      y[i] = x[i] + (ex + ey);
    }
  }
}

SPK_EXPORT void spark_rope_2d(const void* x, const int* positions, void* y, int num_tokens,
                              int heads, int head_dim, float theta) {
  __shared__ float s_cos[spk::vision::kRope2dChunk];
  __shared__ float s_sin[spk::vision::kRope2dChunk];
  if (num_tokens <= 0 || heads <= 0 || head_dim <= 0) return;
  constexpr int kChunk = spk::vision::kRope2dChunk;
  const int n = head_dim / 2, quarter = head_dim / 4;
  const int entries = 2 * quarter;  // (half, pair) entries: entry e = half * quarter + pair
  const int tid = threadIdx.x, nt = blockDim.x;
  const int64_t row_pitch = static_cast<int64_t>(heads) * head_dim;
  for (int64_t t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    const spk::ActIn xt = spk::ActIn{x} + t * row_pitch;
    const spk::ActOut yt = spk::ActOut{y} + t * row_pitch;
    const float cx = static_cast<float>(spk::ldg_i(positions + 2 * t));
    const float cy = static_cast<float>(spk::ldg_i(positions + 2 * t + 1));
    for (int e0 = 0; e0 < entries; e0 += kChunk) {
      const int ne = entries - e0 < kChunk ? entries - e0 : kChunk;
      __syncthreads();  // the previous chunk/token finished reading s_cos/s_sin
      for (int i = tid; i < ne; i += nt) {
        const int half = (e0 + i) / quarter, pair = (e0 + i) % quarter;
        // As the host reference (and transformers) build it: 1 / theta^(float(2c) / float(n)).
        const float ex = static_cast<float>(2 * pair) / static_cast<float>(n);
        const float inv_freq = 1.0f / spk::spk_pow_rope(theta, ex);
        float s, c;
        spk::spk_sincos((half == 0 ? cx : cy) * inv_freq, &s, &c);
        s_cos[i] = c;
        s_sin[i] = s;
      }
      __syncthreads();
      const int64_t work = static_cast<int64_t>(heads) * ne;
      for (int64_t w = tid; w < work; w += nt) {
        const int h = static_cast<int>(w / ne), i = static_cast<int>(w % ne);
        const int half = (e0 + i) / quarter, pair = (e0 + i) % quarter;
        const int64_t off = static_cast<int64_t>(h) * head_dim + half * n + pair;
        const float a = xt[off], b = xt[off + quarter];
        float ra, rb;
        spk::vision::rotate(a, b, s_cos[i], s_sin[i], &ra, &rb);
        yt[off] = ra;
        yt[off + quarter] = rb;
      }
    }
    if ((head_dim % 4) != 0) {
      // Channels in no pair (each half's last when n is odd, the last when head_dim is odd)
      // pass through.
      const int rest = n - 2 * quarter;  // 0 or 1 per half
      const int per_head = 2 * rest + (head_dim & 1);
      const int64_t work = static_cast<int64_t>(heads) * per_head;
      for (int64_t w = tid; w < work; w += nt) {
        const int h = static_cast<int>(w / per_head), r = static_cast<int>(w % per_head);
        const int ch = r < 2 * rest ? r * n + 2 * quarter : head_dim - 1;
        const int64_t off = static_cast<int64_t>(h) * head_dim + ch;
        yt[off] = xt[off];
      }
    }
  }
}

SPK_EXPORT void spark_bidirectional_attention(const void* q, const void* k, const void* v,
                                              void* y, int num_tokens, int q_heads, int kv_heads,
                                              int head_dim, float scale) {
  using namespace spk::vision;
  __shared__ __align__(16) float s_k[kAttnTileKeys * kAttnMaxStride];
  __shared__ __align__(16) float s_v[kAttnTileKeys * kAttnMaxStride];
  __shared__ float s_part[2 * kAttnWarps * kAttnKeyStep * 32];
  if (num_tokens <= 0 || q_heads <= 0 || kv_heads <= 0 || head_dim <= 0) return;
  const spk::ActIn qi{q}, ki{k}, vi{v};
  const spk::ActOut yo{y};
  const bool tiled = blockDim.x == kAttnWarps * 32;  // the ABI block size
#define SPK_ATTEND_TILED(kS) \
  attend_tiled<kS>(qi, ki, vi, yo, num_tokens, q_heads, kv_heads, head_dim, scale, s_k, s_v, s_part)
  if (tiled && head_dim <= 16) {
    SPK_ATTEND_TILED(4);
  } else if (tiled && head_dim <= 32) {
    SPK_ATTEND_TILED(8);
  } else if (tiled && head_dim <= 48) {
    SPK_ATTEND_TILED(12);
  } else if (tiled && head_dim <= 64) {
    SPK_ATTEND_TILED(16);
  } else if (tiled && head_dim <= 80) {
    SPK_ATTEND_TILED(20);
  } else if (tiled && head_dim <= 96) {
    SPK_ATTEND_TILED(24);
  } else if (tiled && head_dim <= kAttnMaxStride) {
    SPK_ATTEND_TILED(32);
  } else {
    attend_warp(qi, ki, vi, yo, num_tokens, q_heads, kv_heads, head_dim, scale);
  }
#undef SPK_ATTEND_TILED
}

SPK_EXPORT void spark_pool_by_position(const void* x_in, const int* positions, void* y_out,
                                       int num_tokens, int cols, int kernel_size, float scale) {
  using namespace spk::vision;
  __shared__ int s_list[kPoolMaxBlock];  // this chunk's tokens of the row, in token order
  __shared__ int s_warp[32];
  if (num_tokens <= 0 || cols <= 0 || kernel_size <= 0) return;
  const spk::ActIn x{x_in};
  const spk::ActOut y{y_out};
  const int tid = threadIdx.x;
  const int nt = blockDim.x < kPoolMaxBlock ? blockDim.x : kPoolMaxBlock;
  const int lane = spk::lane_id(), warp = spk::warp_id(), nw = nt / 32;
  const int pass_cols = nt * kPoolColumns;
  const int passes = (cols + pass_cols - 1) / pass_cols;
  const int64_t units = static_cast<int64_t>(num_tokens) * passes;
  if (static_cast<int64_t>(blockIdx.x) >= units) return;  // the whole block: no barriers follow
  if (tid >= nt) return;  // (only when blockDim.x > kPoolMaxBlock)

  // W = max(0, max_t positions[t, 0] + 1), as the host reference.
  int wmax = 0;
  for (int t = tid; t < num_tokens; t += nt) {
    const int px1 = spk::ldg_i(positions + 2 * static_cast<int64_t>(t)) + 1;
    wmax = px1 > wmax ? px1 : wmax;
  }
  wmax = warp_max_i(wmax);
  if (lane == 0) s_warp[warp] = wmax;
  __syncthreads();
  int width = 0;
  for (int w = 0; w < nw; ++w) width = s_warp[w] > width ? s_warp[w] : width;
  __syncthreads();  // s_warp is reused by the scans below
  const int64_t row_width = width / kernel_size;
  const float weight = 1.0f / static_cast<float>(kernel_size * kernel_size);

  for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
    const int64_t r = u / passes;
    const int c0 = static_cast<int>(u % passes) * pass_cols;
    float acc[kPoolColumns];
#pragma unroll
    for (int i = 0; i < kPoolColumns; ++i) acc[i] = 0.0f;
    for (int t0 = 0; t0 < num_tokens; t0 += nt) {
      const int t = t0 + tid;
      int hit = 0;
      if (t < num_tokens) {
        const int px = spk::ldg_i(positions + 2 * static_cast<int64_t>(t));
        const int py = spk::ldg_i(positions + 2 * static_cast<int64_t>(t) + 1);
        if (px >= 0 && py >= 0 &&
            px / kernel_size + row_width * (py / kernel_size) == r) {
          hit = 1;
        }
      }
      // Inclusive scan of the hits over the warp, then over the warps.
      int incl = hit;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int other = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += other;
      }
      if (lane == 31) s_warp[warp] = incl;
      __syncthreads();
      int before = 0, total = 0;
      for (int w = 0; w < nw; ++w) {
        const int count = s_warp[w];
        if (w < warp) before += count;
        total += count;
      }
      if (hit) s_list[before + incl - 1] = t;
      __syncthreads();  // s_list complete; s_warp read by all
      for (int e = 0; e < total; ++e) {
        const spk::ActIn xr = x + static_cast<int64_t>(s_list[e]) * cols;
#pragma unroll
        for (int i = 0; i < kPoolColumns; ++i) {
          const int c = c0 + i * nt + tid;
          if (c < cols) acc[i] += mul_rn(xr.ldg(c), weight);
        }
      }
      // The next chunk writes s_list only after its first barrier, which every thread reaches
      // after these reads.
    }
#pragma unroll
    for (int i = 0; i < kPoolColumns; ++i) {
      const int c = c0 + i * nt + tid;
      if (c < cols) y[r * cols + c] = acc[i] * scale;
    }
  }
}

SPARK_CHECK_KERNEL_SIGNATURES()
