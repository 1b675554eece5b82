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
// One block per token (grid-stride over tokens): the block computes cos/sin of up to 256 pairs
// into shared memory, then rotates those pairs for every head. y may alias x (each thread reads
// both elements of its pair before writing them).
#include "common.cuh"

namespace spk {
namespace {
constexpr int kRopeChunk = 256;  // pairs per shared-memory chunk (head_dim 512 is one chunk)
}  // namespace
}  // namespace spk

SPK_EXPORT void spark_rope(const float* x, const int* positions, float* y, int num_tokens,
                           int heads, int head_dim, int rotated_pairs, float theta, float factor) {
  __shared__ float s_cos[spk::kRopeChunk];
  __shared__ float s_sin[spk::kRopeChunk];
  if (num_tokens <= 0 || heads <= 0 || head_dim <= 0) return;
  const int half = head_dim / 2;
  const int rot = rotated_pairs < 0 ? 0 : (rotated_pairs > half ? half : rotated_pairs);
  const int tid = threadIdx.x, nt = blockDim.x;
  const int64_t row_pitch = static_cast<int64_t>(heads) * head_dim;
  for (int64_t t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    const float* xt = x + t * row_pitch;
    float* yt = y + t * row_pitch;
    const float pos = static_cast<float>(spk::ldg_i(positions + t));
    for (int p0 = 0; p0 < half; p0 += spk::kRopeChunk) {
      const int np = half - p0 < spk::kRopeChunk ? half - p0 : spk::kRopeChunk;
      __syncthreads();  // previous chunk/token finished reading s_cos/s_sin
      for (int i = tid; i < np; i += nt) {
        const int pair = p0 + i;
        float c = 1.0f, s = 0.0f;
        if (pair < rot) {
          // As transformers builds it: 1 / theta^(float(2i) / float(head_dim)) in f32.
          const float e = static_cast<float>(2 * pair) / static_cast<float>(head_dim);
          const float inv_freq = (1.0f / spk::spk_pow_rope(theta, e)) / factor;
          spk::spk_sincos(pos * inv_freq, &s, &c);
        }
        s_cos[i] = c;
        s_sin[i] = s;
      }
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
