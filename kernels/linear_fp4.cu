// W4A4 (spark-compile --fp4-activations): NVFP4 activations times NVFP4 weights.
//
// quantize_nvfp4_rows: a block per token row (grid-stride): the row's amax (block_max) gives its
// global scale g = amax / (6 * 448); then each thread quantizes 16-element blocks by quantize.h's
// rules (the host reference's arithmetic, operation for operation: f32 division and
// multiplication rounded to nearest, e4m3 rounded to nearest even, the E2M1 code by ModelOpt's
// bounds), into kernel_abi.h's packed row layout.
//
// linear_nvfp4_a4, two paths:
//   1. sm_120a / sm_121a (SPK_HAS_FP4_MMA), more than kRowsPathMaxTokens tokens: tiles of 64
//      tokens x 128 outputs, 8 warps (2 x 4, 32 x 32 each), K in steps of 64 through three
//      shared-memory stages filled by cp.async straight from the packed rows and the weights
//      (codes 16 bytes at a time, a row's 4 block scales of a step in one 4-byte copy), two
//      steps ahead; each warp step is 8 `mma.sync.m16n8k64.kind::mxf4nvf4.block_scale` (common.cuh
//      mma_nvfp4_m16n8k64), fragments read as 32-bit words (code rows padded to 48 bytes: the 8
//      rows x 4 words of a fragment fall in 32 distinct banks). The epilogue multiplies by the
//      token's g and the weight's tensor scale.
//   2. otherwise (decode on every target; every call on targets without the FP4 MMA, e.g. the
//      H200's sm_90a, where W4A4 is a check of the numerics rather than a speed-up): a warp per
//      output row (grid-stride), lanes over 16-element blocks; a block's 16 weight codes are
//      decoded once for up to kRowsPathTokens tokens; block sums E2M1 x E2M1 and the two scales
//      are exact in f32; the blocks add in f32 per lane, then across the warp.
// The op's contract (kernel_ops.def): in_features % 64 == 0, rows of row_words words.
#include "common.cuh"

namespace spk {
namespace fp4 {
namespace {

constexpr float kE2m1Max = 6.0f;
constexpr float kE4m3Max = 448.0f;
constexpr float kMinBlockScale = 0.001953125f;  // 2^-9, the smallest e4m3 subnormal

// The e4m3fn byte nearest to v (finite, >= 2^-9 here: a block scale), ties to even, saturating
// at 448 (quantize.h E4M3FromFloat). Integer arithmetic on the f32 bits, so that every target
// (sm_80 has no e4m3 cvt) and the host give the same byte.
SPK_DEVICE uint32_t e4m3_from_positive(float v) {
  const uint32_t bits = f32_as_u32(v);
  if (v < 0.015625f) {  // below 2^-6: subnormal steps of 2^-9; adding 2^23 rounds to even
    return static_cast<uint32_t>(f32_as_u32(v * 512.0f + 8388608.0f) - f32_as_u32(8388608.0f));
  }
  // Round the 23-bit mantissa to 3 bits, to even; a carry moves into the exponent.
  const uint32_t rounded = (bits + 0x7ffffu + ((bits >> 20) & 1u)) >> 20;
  const uint32_t code = rounded - (120u << 3);  // f32 exponent bias 127 -> e4m3's 7
  return code > 0x7eu ? 0x7eu : code;
}

// The E2M1 magnitude code (0..7) of m >= 0 (quantize.h E2M1MagnitudeCode: ModelOpt's bounds,
// ties to the even code; NaN gives 0).
SPK_DEVICE uint32_t e2m1_magnitude_code(float m) {
  uint32_t code = (m > 0.25f ? 1u : 0u) + (m > 0.75f ? 1u : 0u) + (m > 1.25f ? 1u : 0u) +
                  (m > 1.75f ? 1u : 0u) + (m > 2.5f ? 1u : 0u) + (m > 3.5f ? 1u : 0u) +
                  (m > 5.0f ? 1u : 0u);
  if (m == 0.75f || m == 1.75f || m == 3.5f) ++code;
  return code;
}

// The packed row of token t.
SPK_DEVICE const unsigned char* packed_row(const float* xq, int64_t t, int row_words) {
  return reinterpret_cast<const unsigned char*>(xq + t * row_words);
}

// ---- path 2: a warp per output row ----

constexpr int kRowsPathTokens = 8;  // tokens per pass over a weight row

// The 8 code bytes of a block (two words; byte loads where p is not 8-byte aligned).
SPK_DEVICE uint2 load_block_codes(const unsigned char* p, bool aligned) {
  if (aligned) return *reinterpret_cast<const uint2*>(p);
  uint32_t word[2] = {0u, 0u};
#pragma unroll
  for (int i = 0; i < 8; ++i) word[i >> 2] |= static_cast<uint32_t>(p[i]) << (8 * (i & 3));
  return make_uint2(word[0], word[1]);
}

// sum over the 16 elements of one block of e2m1(a) * w[i] (w: the weight block decoded), exact.
SPK_DEVICE float block_dot(uint2 a_codes, const float w[16]) {
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const uint32_t word = i < 8 ? a_codes.x : a_codes.y;
    sum = fmaf_(e2m1_to_f32((word >> (4 * (i & 7))) & 15u), w[i], sum);
  }
  return sum;
}

SPK_DEVICE void rows_path(const float* xq, const unsigned char* w, const unsigned char* block_scale,
                          float tensor_scale, ActOut y, int T, int out, int in, int row_words) {
  const int blocks = in / 16;
  const int64_t scales_offset = spark::abi::Nvfp4RowScalesOffset(in);
  const int lane = lane_id();
  // 8-byte code loads where the pointers allow (the compiler aligns every buffer to 256 bytes and
  // a packed row is a multiple of 16 bytes; a plan may place a workspace at any 4-byte offset).
  const bool w_aligned = aligned8(w), xq_aligned = aligned8(xq);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * num_warps();
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * num_warps() + warp_id(); o < out;
       o += warps) {
    const unsigned char* w_codes = w + o * (in / 2);
    const unsigned char* w_scales = block_scale + o * blocks;
    for (int t0 = 0; t0 < T; t0 += kRowsPathTokens) {
      const int nt = T - t0 < kRowsPathTokens ? T - t0 : kRowsPathTokens;
      float acc[kRowsPathTokens];
#pragma unroll
      for (int j = 0; j < kRowsPathTokens; ++j) acc[j] = 0.0f;
      for (int b = lane; b < blocks; b += 32) {
        const uint2 wc = load_block_codes(w_codes + 8 * b, w_aligned);
        float wv[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          wv[i] = e2m1_to_f32(((i < 8 ? wc.x : wc.y) >> (4 * (i & 7))) & 15u);
        }
        const float ws = e4m3_to_f32(w_scales[b]);
#pragma unroll
        for (int j = 0; j < kRowsPathTokens; ++j) {
          if (j < nt) {
            const unsigned char* row = packed_row(xq, t0 + j, row_words);
            const uint2 ac =
                load_block_codes(row + spark::abi::kNvfp4RowCodesOffset + 8 * b, xq_aligned);
            // Exact: |sum| <= 16 x 36 and the scales' product has at most 8 significant bits.
            acc[j] += block_dot(ac, wv) * (e4m3_to_f32(row[scales_offset + b]) * ws);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < kRowsPathTokens; ++j) {
        const float sum = warp_sum(acc[j]);
        if (lane == 0 && j < nt) {
          const float global = *reinterpret_cast<const float*>(packed_row(xq, t0 + j, row_words));
          y[static_cast<int64_t>(t0 + j) * out + o] = sum * global * tensor_scale;
        }
      }
    }
  }
}

// ---- path 1: block-scaled FP4 tiles (sm_120a / sm_121a) ----
#if SPK_HAS_FP4_MMA

constexpr int kRowsPathMaxTokens = 8;  // decode and short calls take path 2 there too
constexpr int kBM = 64;           // tokens per tile
constexpr int kBN = 128;          // outputs per tile
constexpr int kBK = 64;           // k per step: one m16n8k64
constexpr int kCodeStride = 48;   // bytes per shared code row: 32 used, 16 of padding
constexpr int kStages = 3;

struct Stage {
  unsigned char a[kBM][kCodeStride];
  unsigned char b[kBN][kCodeStride];
  uint32_t a_scales[kBM];  // a row's 4 block scales of the step
  uint32_t b_scales[kBN];
};
struct TileShared {
  Stage stage[kStages];
};

// Starts the copies of k-step k0 into `s`: A code rows (two 16-byte chunks each) from the packed
// rows, B code rows from the weight, each row's 4 scales in one 4-byte copy; rows past the real
// ones are zero-filled by plain stores. The caller commits the group.
SPK_DEVICE void load_step(Stage& s, const float* xq, int row_words, int64_t scales_offset,
                          const unsigned char* w, const unsigned char* block_scale, int m0,
                          int a_rows, int n0, int b_rows, int in, int k0) {
  const int tid = static_cast<int>(threadIdx.x);
  const int blocks = in / 16;
  {  // B codes: 128 rows x 2 chunks, one per thread
    const int r = tid >> 1, c = tid & 1;
    if (r < b_rows) {
      cp_async16(&s.b[r][16 * c], w + static_cast<int64_t>(n0 + r) * (in / 2) + k0 / 2 + 16 * c);
    } else {
      *reinterpret_cast<uint4*>(&s.b[r][16 * c]) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
  if (tid < 2 * kBM) {  // A codes: 64 rows x 2 chunks
    const int r = tid >> 1, c = tid & 1;
    if (r < a_rows) {
      cp_async16(&s.a[r][16 * c],
                 packed_row(xq, m0 + r, row_words) + spark::abi::kNvfp4RowCodesOffset + k0 / 2 +
                     16 * c);
    } else {
      *reinterpret_cast<uint4*>(&s.a[r][16 * c]) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
  if (tid < kBN) {  // B scales
    if (tid < b_rows) {
      cp_async4(&s.b_scales[tid], block_scale + static_cast<int64_t>(n0 + tid) * blocks + k0 / 16);
    } else {
      s.b_scales[tid] = 0u;
    }
  } else if (tid < kBN + kBM) {  // A scales
    const int r = tid - kBN;
    if (r < a_rows) {
      cp_async4(&s.a_scales[r], packed_row(xq, m0 + r, row_words) + scales_offset + k0 / 16);
    } else {
      s.a_scales[r] = 0u;
    }
  }
}

SPK_DEVICE uint32_t word_at(const unsigned char* p) { return *reinterpret_cast<const uint32_t*>(p); }

// acc += this warp's 32 x 32 of the step in `s` (wm, wn: the warp's first row and column).
SPK_DEVICE void multiply_step(const Stage& s, int wm, int wn, float acc[2][4][4]) {
  const int lane = lane_id(), g = lane >> 2, q = lane & 3;
  uint32_t a[2][4], sa[2];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
    const int r = wm + 16 * mi + g;
#pragma unroll
    for (int i = 0; i < 4; ++i) a[mi][i] = word_at(&s.a[r + 8 * (i & 1)][4 * q + 16 * (i >> 1)]);
    sa[mi] = s.a_scales[r + 8 * (lane & 1)];  // lanes 4g, 4g + 1: rows g, g + 8
  }
#pragma unroll
  for (int ni = 0; ni < 4; ++ni) {
    const int n = wn + 8 * ni + g;
    const uint32_t b0 = word_at(&s.b[n][4 * q]), b1 = word_at(&s.b[n][4 * q + 16]);
    const uint32_t sb = s.b_scales[n];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) mma_nvfp4_m16n8k64(acc[mi][ni], a[mi], b0, b1, sa[mi], sb);
  }
}

SPK_DEVICE void tiles_path(const float* xq, const unsigned char* w,
                           const unsigned char* block_scale, float tensor_scale, ActOut y, int T,
                           int out, int in, int row_words, TileShared& sh) {
  const int64_t scales_offset = spark::abi::Nvfp4RowScalesOffset(in);
  const int mt = (T + kBM - 1) / kBM, nt = (out + kBN - 1) / kBN;
  const int warp = warp_id(), wm = (warp >> 2) * 32, wn = (warp & 3) * 32;
  const int steps = in / kBK;
  for (int64_t tile = blockIdx.x; tile < static_cast<int64_t>(mt) * nt; tile += gridDim.x) {
    // Consecutive blocks take consecutive token tiles of the same weight tile (L2 reuse).
    const int m0 = static_cast<int>(tile % mt) * kBM, n0 = static_cast<int>(tile / mt) * kBN;
    const int a_rows = T - m0 < kBM ? T - m0 : kBM, b_rows = out - n0 < kBN ? out - n0 : kBN;
    float acc[2][4][4];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;
    __syncthreads();  // the previous tile's warps are done with every stage
    // Copies run kStages - 1 steps ahead, one commit group per step (empty past the end), so
    // that "all but the newest kStages - 2 groups landed" always means "this step's".
#pragma unroll
    for (int p = 0; p < kStages - 1; ++p) {
      if (p < steps) {
        load_step(sh.stage[p], xq, row_words, scales_offset, w, block_scale, m0, a_rows, n0,
                  b_rows, in, p * kBK);
      }
      cp_async_commit();
    }
    for (int ks = 0; ks < steps; ++ks) {
      cp_async_wait_pending<kStages - 2>();
      // Step ks is in its stage for every thread; every warp is done with step ks - 1, whose
      // stage takes step ks + kStages - 1.
      __syncthreads();
      const int next = ks + kStages - 1;
      if (next < steps) {
        load_step(sh.stage[next % kStages], xq, row_words, scales_offset, w, block_scale, m0,
                  a_rows, n0, b_rows, in, next * kBK);
      }
      cp_async_commit();
      multiply_step(sh.stage[ks % kStages], wm, wn, acc);
    }
    cp_async_wait_all();
    const int lane = lane_id(), g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int t = m0 + wm + 16 * mi + g + 8 * half;
        if (t >= T) continue;
        const float global = *reinterpret_cast<const float*>(packed_row(xq, t, row_words));
        const ActOut yr = y + static_cast<int64_t>(t) * out;
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          const int col = n0 + wn + 8 * ni + 2 * q;
          if (col < out) yr[col] = acc[mi][ni][2 * half] * global * tensor_scale;
          if (col + 1 < out) yr[col + 1] = acc[mi][ni][2 * half + 1] * global * tensor_scale;
        }
      }
    }
  }
}

#endif  // SPK_HAS_FP4_MMA

}  // namespace
}  // namespace fp4
}  // namespace spk

SPK_EXPORT void spark_quantize_nvfp4_rows(const void* x_in, float* q, int num_tokens, int cols,
                                          int row_words) {
  using namespace spk;
  using namespace spk::fp4;
  const ActIn x{x_in};
  __shared__ float scratch[32];
  const int blocks = cols / 16;
  const int64_t scales_offset = spark::abi::Nvfp4RowScalesOffset(cols);
  const int64_t row_bytes = spark::abi::Nvfp4RowBytes(cols);
  for (int64_t t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    const ActIn row = x + t * cols;
    float amax = 0.0f;
    for (int i = static_cast<int>(threadIdx.x); i < cols; i += blockDim.x) {
      amax = fmaxf_(amax, fabsf_(row[i]));
    }
    amax = block_max(amax, scratch);
    const float global = amax == 0.0f ? 1.0f : amax / (kE2m1Max * kE4m3Max);
    const float divisor = kE2m1Max * global;
    unsigned char* packed = reinterpret_cast<unsigned char*>(q + t * row_words);
    if (threadIdx.x < 4) {  // the header: g, then zeros
      reinterpret_cast<float*>(packed)[threadIdx.x] = threadIdx.x == 0 ? global : 0.0f;
    }
    for (int b = static_cast<int>(threadIdx.x); b < blocks; b += blockDim.x) {
      float v[16];
      float block_amax = 0.0f;
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        v[i] = row[16 * b + i];
        block_amax = fmaxf_(block_amax, fabsf_(v[i]));
      }
      float block_scale = block_amax / divisor;
      if (block_scale == 0.0f) block_scale = 1.0f;
      block_scale = fmaxf_(block_scale, kMinBlockScale);
      const uint32_t scale = e4m3_from_positive(block_scale);
      const float den = e4m3_to_f32(scale) * global;
      uint32_t words[2] = {0u, 0u};
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const uint32_t code =
            e2m1_magnitude_code(fabsf_(v[i] / den)) | (v[i] < 0.0f ? 8u : 0u);
        words[i >> 3] |= code << (4 * (i & 7));
      }
      *reinterpret_cast<uint2*>(packed + spark::abi::kNvfp4RowCodesOffset + 8 * b) =
          make_uint2(words[0], words[1]);
      packed[scales_offset + b] = static_cast<unsigned char>(scale);
    }
    // The scales' padding up to the row's end.
    for (int64_t i = scales_offset + blocks + threadIdx.x; i < row_bytes; i += blockDim.x) {
      packed[i] = 0;
    }
  }
}

SPK_EXPORT void spark_linear_nvfp4_a4(const float* xq, const unsigned char* w,
                                      const unsigned char* block_scale,
                                      const float* tensor_scale, void* y_out, int num_tokens,
                                      int out_features, int in_features, int row_words) {
  using namespace spk;
  using namespace spk::fp4;
  const ActOut y{y_out};
  if (num_tokens <= 0 || out_features <= 0) return;
#if SPK_HAS_FP4_MMA
  // cp.async needs 16-byte aligned rows of codes (w's rows are in / 2 bytes, a multiple of 32)
  // and 4-byte aligned scales.
  if (num_tokens > kRowsPathMaxTokens && blockDim.x == 256 && aligned16(xq) && aligned16(w) &&
      (reinterpret_cast<uintptr_t>(block_scale) & 3u) == 0) {
    __shared__ __align__(16) TileShared sh;
    tiles_path(xq, w, block_scale, tensor_scale[0], y, num_tokens, out_features, in_features,
               row_words, sh);
    return;
  }
#endif
  rows_path(xq, w, block_scale, tensor_scale[0], y, num_tokens, out_features, in_features,
            row_words);
}

SPARK_CHECK_KERNEL_SIGNATURES()
