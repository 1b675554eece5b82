// Rotate-half RoPE on x [T, heads, head_dim] at positions[T] (architecture spec section 7):
//   m = head_dim / 2; for i < rotated_pairs:
//     inv_freq[i] = (1 / float(theta^(2i/head_dim))) / factor     (f32, as transformers builds
//                   it: the exponent float(2i)/float(head_dim), two f32 divisions)
//     angle       = float(positions[t]) * inv_freq[i]              (f32 product)
//     y[i]   = x[i] cos - x[i+m] sin,   y[i+m] = x[i+m] cos + x[i] sin
//   pairs i >= rotated_pairs pass through unchanged.
// theta^e is computed in double and rounded once (what a correctly rounded powf gives), sin/cos
// of the f32 angle with a double Cody-Waite reduction (math.cuh). inv_freq must match the
// reference bit for bit: at position p, one ulp of inv_freq moves the angle by p * 2^-24.
//
// spark_rope: one block per token (grid-stride over tokens): the block computes cos/sin of up to
// 256 pairs into shared memory, then rotates those pairs for every head. y may alias x (each
// thread reads both elements of its pair before writing them).
//
// spark_rms_norm_rope: the per-head RMSNorm of spark_rms_norm (groups = heads, cols = head_dim,
// weight may be null) followed by the rotation above, in one pass (Gemma 4's q/k norm + RoPE):
//   x'[h, :] = x[h, :] * (mean(x[h, :]^2) + eps)^-0.5 [* w],   y = rope(x')
// One block per token (grid-stride over tokens). Per chunk of up to 64 heads: one warp per head
// row sums the squares (f32, warp reduction) into a shared inverse RMS; then, per chunk of up to
// 256 pairs (cos/sin in shared memory as in spark_rope, computed once per token when head_dim
// <= 512), each thread reads both elements of a (head, pair), normalises, weights, rotates and
// writes them. An odd head_dim's last element is normalised and passes through. y may alias x:
// every read of a head row for its sum is separated from the writes by a barrier, and the
// elements a thread writes are the ones it has just read.
#include "common.cuh"

namespace spk {
namespace {
constexpr int kRopeChunk = 256;      // pairs per shared-memory chunk (head_dim 512 is one chunk)
constexpr int kNormRopeHeads = 64;   // heads per shared-memory chunk of inverse RMS values

// cos/sin of pairs p0 .. p0 + np - 1 at position `pos` into s_cos/s_sin[0, np), pairs >= rot
// get (1, 0). Shared by the threads of the block; the caller places the barriers around it.
SPK_DEVICE void rope_sincos_chunk(float pos, int p0, int np, int rot, int head_dim, float theta,
                                  float factor, float* s_cos, float* s_sin) {
  for (int i = threadIdx.x; i < np; i += blockDim.x) {
    const int pair = p0 + i;
    float c = 1.0f, s = 0.0f;
    if (pair < rot) {
      // As transformers builds it: 1 / theta^(float(2i) / float(head_dim)) in f32.
      const float e = static_cast<float>(2 * pair) / static_cast<float>(head_dim);
      const float inv_freq = (1.0f / spk_pow_rope(theta, e)) / factor;
      spk_sincos(pos * inv_freq, &s, &c);
    }
    s_cos[i] = c;
    s_sin[i] = s;
  }
}

SPK_DEVICE int rope_rotated_pairs(int rotated_pairs, int half) {
  return rotated_pairs < 0 ? 0 : (rotated_pairs > half ? half : rotated_pairs);
}
}  // namespace
}  // namespace spk

SPK_EXPORT void spark_rope(const void* x, const int* positions, void* y, int num_tokens,
                           int heads, int head_dim, int rotated_pairs, float theta, float factor) {
  __shared__ float s_cos[spk::kRopeChunk];
  __shared__ float s_sin[spk::kRopeChunk];
  if (num_tokens <= 0 || heads <= 0 || head_dim <= 0) return;
  const int half = head_dim / 2;
  const int rot = spk::rope_rotated_pairs(rotated_pairs, half);
  const int tid = threadIdx.x, nt = blockDim.x;
  const int64_t row_pitch = static_cast<int64_t>(heads) * head_dim;
  for (int64_t t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    const spk::ActIn xt = spk::ActIn{x} + t * row_pitch;
    const spk::ActOut yt = spk::ActOut{y} + t * row_pitch;
    const float pos = static_cast<float>(spk::ldg_i(positions + t));
    for (int p0 = 0; p0 < half; p0 += spk::kRopeChunk) {
      const int np = half - p0 < spk::kRopeChunk ? half - p0 : spk::kRopeChunk;
      __syncthreads();  // previous chunk/token finished reading s_cos/s_sin
      spk::rope_sincos_chunk(pos, p0, np, rot, head_dim, theta, factor, s_cos, s_sin);
      __syncthreads();
      const int64_t work = static_cast<int64_t>(heads) * np;
      for (int64_t w = tid; w < work; w += nt) {
        const int h = static_cast<int>(w / np), i = static_cast<int>(w % np);
        const int pair = p0 + i;
        const int64_t off = static_cast<int64_t>(h) * head_dim + pair;
        const float x0 = xt[off], x1 = xt[off + half];
        if (pair < rot) {
          const float c = s_cos[i], s = s_sin[i];
          yt[off] = x0 * c - x1 * s;
          yt[off + half] = x1 * c + x0 * s;
        } else {
          yt[off] = x0;
          yt[off + half] = x1;
        }
      }
    }
    if (head_dim & 1) {  // odd head_dim: the last element has no partner and passes through
      for (int h = tid; h < heads; h += nt) {
        const int64_t off = static_cast<int64_t>(h) * head_dim + head_dim - 1;
        yt[off] = xt[off];
      }
    }
  }
}

SPK_EXPORT void spark_rms_norm_rope(const void* x, const unsigned short* weight,
                                    const int* positions, void* y, int num_tokens, int heads,
                                    int head_dim, int rotated_pairs, float theta, float factor,
                                    float epsilon) {
  __shared__ float s_cos[spk::kRopeChunk];
  __shared__ float s_sin[spk::kRopeChunk];
  __shared__ float s_inv[spk::kNormRopeHeads];
  if (num_tokens <= 0 || heads <= 0 || head_dim <= 0) return;
  const int half = head_dim / 2;
  const int rot = spk::rope_rotated_pairs(rotated_pairs, half);
  const int tid = threadIdx.x, nt = blockDim.x;
  const int lane = spk::lane_id(), warp = spk::warp_id(), nw = spk::num_warps();
  // Head rows start at multiples of head_dim: aligned for 4-element loads when x is and
  // head_dim % 4 == 0.
  const bool vec = (head_dim % 4) == 0 && spk::ActIn{x}.aligned4();
  // With a single pair chunk, cos/sin stay valid across the head chunks of a token.
  const bool one_pair_chunk = half <= spk::kRopeChunk;
  const int64_t row_pitch = static_cast<int64_t>(heads) * head_dim;
  for (int64_t t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    const spk::ActIn xt = spk::ActIn{x} + t * row_pitch;
    const spk::ActOut yt = spk::ActOut{y} + t * row_pitch;
    const float pos = static_cast<float>(spk::ldg_i(positions + t));
    for (int h0 = 0; h0 < heads; h0 += spk::kNormRopeHeads) {
      const int nh = heads - h0 < spk::kNormRopeHeads ? heads - h0 : spk::kNormRopeHeads;
      __syncthreads();  // previous head chunk/token finished with s_inv, s_cos, s_sin
      // Inverse RMS of the chunk's head rows, one warp per row (lane-strided f32 sums).
      for (int j = warp; j < nh; j += nw) {
        const spk::ActIn xh = xt + static_cast<int64_t>(h0 + j) * head_dim;
        const float ss = spk::warp_sum(spk::sum_squares(xh, head_dim, vec, lane, 32));
        if (lane == 0) s_inv[j] = spk::spk_rsqrtf(ss / static_cast<float>(head_dim) + epsilon);
      }
      for (int p0 = 0; p0 < half; p0 += spk::kRopeChunk) {
        const int np = half - p0 < spk::kRopeChunk ? half - p0 : spk::kRopeChunk;
        if (p0 > 0) __syncthreads();  // previous pair chunk finished reading s_cos/s_sin
        if (h0 == 0 || !one_pair_chunk) {
          spk::rope_sincos_chunk(pos, p0, np, rot, head_dim, theta, factor, s_cos, s_sin);
        }
        __syncthreads();  // s_inv, s_cos, s_sin complete; all sums have read their rows
        const int work = nh * np;  // <= 64 * 256
        for (int w = tid; w < work; w += nt) {
          const int j = w / np, i = w % np;
          const int pair = p0 + i;
          const int64_t off = static_cast<int64_t>(h0 + j) * head_dim + pair;
          const float inv = s_inv[j];
          float x0 = xt[off] * inv, x1 = xt[off + half] * inv;
          if (weight != nullptr) {
            x0 *= spk::ldg_bf16(weight + pair);
            x1 *= spk::ldg_bf16(weight + pair + half);
          }
          if (pair < rot) {
            const float c = s_cos[i], s = s_sin[i];
            yt[off] = x0 * c - x1 * s;
            yt[off + half] = x1 * c + x0 * s;
          } else {
            yt[off] = x0;
            yt[off + half] = x1;
          }
        }
      }
      if (head_dim & 1) {  // odd head_dim: the last element is normalised and passes through
        if (half == 0) __syncthreads();  // no pair chunk ran: s_inv is not yet published
        for (int j = tid; j < nh; j += nt) {
          const int64_t off = static_cast<int64_t>(h0 + j) * head_dim + head_dim - 1;
          float v = xt[off] * s_inv[j];
          if (weight != nullptr) v *= spk::ldg_bf16(weight + head_dim - 1);
          yt[off] = v;
        }
      }
    }
  }
}

SPARK_CHECK_KERNEL_SIGNATURES()
