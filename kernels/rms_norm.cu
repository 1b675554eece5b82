// Gemma 4 RMSNorm over the last dim of x [num_tokens * groups, cols]:
//   y = x * (mean(x^2) + eps)^-0.5 [* w]     (w multiplies directly: not 1 + w)
// One block per row (grid-stride over rows); sum of squares in f32 with a block reduction; the
// row is read twice (the second read hits L1/L2). y may alias x.
// spark_residual_rms_norm (below) is the same with the residual add fused into the output pass.
#include "common.cuh"

namespace spk {
namespace {

// (mean(row^2) + epsilon)^-0.5 of one row, the whole block reducing. Ends with a barrier: every
// thread has finished reading the row for the sum, and `scratch` may be reused.
SPK_DEVICE float row_inverse_rms(ActIn row, int cols, bool vec, float epsilon,
                                 float* scratch) {
  const float ss = block_sum(sum_squares(row, cols, vec, threadIdx.x, blockDim.x), scratch);
  return spk_rsqrtf(ss / static_cast<float>(cols) + epsilon);
}

// row[4c .. 4c + 3] * inv [* w[4c .. 4c + 3]] (the vector output path; wvec: w 8-byte aligned).
SPK_DEVICE float4 normalized4(ActIn row, int c, float inv, const unsigned short* weight,
                              bool wvec) {
  float4 v = row.ld4(4 * c);
  v.x *= inv;
  v.y *= inv;
  v.z *= inv;
  v.w *= inv;
  if (wvec) {
    const uint2 w = __ldg(reinterpret_cast<const uint2*>(weight) + c);
    v.x *= bf16lo_to_f32(w.x);
    v.y *= bf16hi_to_f32(w.x);
    v.z *= bf16lo_to_f32(w.y);
    v.w *= bf16hi_to_f32(w.y);
  } else if (weight != nullptr) {
    v.x *= ldg_bf16(weight + 4 * c);
    v.y *= ldg_bf16(weight + 4 * c + 1);
    v.z *= ldg_bf16(weight + 4 * c + 2);
    v.w *= ldg_bf16(weight + 4 * c + 3);
  }
  return v;
}

// row[c] * inv [* w[c]] (the scalar output path).
SPK_DEVICE float normalized1(ActIn row, int c, float inv, const unsigned short* weight) {
  float v = row[c] * inv;
  if (weight != nullptr) v *= ldg_bf16(weight + c);
  return v;
}

}  // namespace
}  // namespace spk

SPK_EXPORT void spark_rms_norm(const void* x_in, const unsigned short* weight, void* y_out,
                               int num_tokens, int groups, int cols, float epsilon) {
  __shared__ float scratch[32];
  if (num_tokens <= 0 || groups <= 0 || cols <= 0) return;
  const spk::ActIn x{x_in};
  const spk::ActOut y{y_out};
  const int64_t rows = static_cast<int64_t>(num_tokens) * groups;
  const bool vec = (cols % 4) == 0 && x.aligned4() && y.aligned4();
  const bool wvec = vec && weight != nullptr && spk::aligned8(weight);
  const int tid = threadIdx.x, nt = blockDim.x;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const spk::ActIn xr = x + row * cols;
    const spk::ActOut yr = y + row * cols;
    const float inv = spk::row_inverse_rms(xr, cols, vec, epsilon, scratch);
    if (vec) {
      for (int c = tid; c < cols / 4; c += nt) {
        yr.st4(4 * c, spk::normalized4(xr, c, inv, weight, wvec));
      }
    } else {
      for (int c = tid; c < cols; c += nt) yr[c] = spk::normalized1(xr, c, inv, weight);
    }
    // The reduction ended with a barrier; the next row's reduction reuses `scratch` safely.
  }
}

namespace spk {
namespace {

// The rows of residual_rms_norm (scale null) and residual_rms_norm_scale:
//   y = (residual + x * (mean(x^2) + eps)^-0.5 [* w]) [* scale[0]]
// Same parallelisation and reduction as spark_rms_norm (one block per row, grid-stride over
// rows, 4-element accesses when x, residual, y are aligned for them and cols % 4 == 0). y may
// alias x or residual: the output pass reads x[c] and residual[c] in the thread that then writes
// y[c], and the reduction's barrier separates every other read of the row from the writes.
// Neither x nor residual goes through the non-coherent (__ldg) path, since y may overwrite them.
// round_sum: the sum is rounded to bf16 before the product (kernel_ops.def).
SPK_DEVICE void residual_rms_norm_rows(ActIn x, const unsigned short* weight, ActIn residual,
                                       const unsigned short* scale, ActOut y, int num_tokens,
                                       int cols, float epsilon, bool round_sum) {
  __shared__ float scratch[32];
  if (num_tokens <= 0 || cols <= 0) return;
  const bool vec = (cols % 4) == 0 && x.aligned4() && residual.aligned4() && y.aligned4();
  const bool wvec = vec && weight != nullptr && aligned8(weight);
  const float s = scale != nullptr ? ldg_bf16(scale) : 1.0f;
  const auto finish = [&](float sum) {
    if (scale == nullptr) return sum;
    if (round_sum) sum = bf16lo_to_f32(pack_bf16x2(sum, 0.0f));
    return sum * s;
  };
  const int tid = threadIdx.x, nt = blockDim.x;
  for (int64_t row = blockIdx.x; row < num_tokens; row += gridDim.x) {
    const ActIn xr = x + row * cols;
    const ActIn rr = residual + row * cols;
    const ActOut yr = y + row * cols;
    const float inv = row_inverse_rms(xr, cols, vec, epsilon, scratch);
    if (vec) {
      for (int c = tid; c < cols / 4; c += nt) {
        float4 v = normalized4(xr, c, inv, weight, wvec);
        const float4 r = rr.ld4(4 * c);
        v.x = finish(r.x + v.x);
        v.y = finish(r.y + v.y);
        v.z = finish(r.z + v.z);
        v.w = finish(r.w + v.w);
        yr.st4(4 * c, v);
      }
    } else {
      for (int c = tid; c < cols; c += nt) {
        yr[c] = finish(rr[c] + normalized1(xr, c, inv, weight));
      }
    }
    // The reduction ended with a barrier; the next row's reduction reuses `scratch` safely.
  }
}

}  // namespace
}  // namespace spk

// Residual add fused with the RMSNorm above, over rows of x [num_tokens, cols]:
//   y = residual + x * (mean(x^2) + eps)^-0.5 [* w]
SPK_EXPORT void spark_residual_rms_norm(const void* x, const unsigned short* weight,
                                        const void* residual, void* y, int num_tokens, int cols,
                                        float epsilon) {
  spk::residual_rms_norm_rows({x}, weight, {residual}, nullptr, {y}, num_tokens, cols, epsilon,
                              false);
}

// The same, times the layer scalar s[0]: y = (residual + rms_norm(x) [* w]) * s[0].
SPK_EXPORT void spark_residual_rms_norm_scale(const void* x, const unsigned short* weight,
                                              const void* residual, const unsigned short* s,
                                              void* y, int num_tokens, int cols, float epsilon,
                                              int round_sum) {
  spk::residual_rms_norm_rows({x}, weight, {residual}, s, {y}, num_tokens, cols, epsilon,
                              round_sum != 0);
}

SPARK_CHECK_KERNEL_SIGNATURES()
