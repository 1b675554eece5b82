// Gemma 4 RMSNorm over the last dim of x [num_tokens * groups, cols]:
//   y = x * (mean(x^2) + eps)^-0.5 [* w]     (w multiplies directly: not 1 + w)
// One block per row (grid-stride over rows); sum of squares in f32 with a block reduction; the
// row is read twice (the second read hits L1/L2). y may alias x.
#include "common.cuh"

SPK_EXPORT void spark_rms_norm(const float* x, const unsigned short* weight, float* y,
                               int num_tokens, int groups, int cols, float epsilon) {
  __shared__ float scratch[32];
  if (num_tokens <= 0 || groups <= 0 || cols <= 0) return;
  const int64_t rows = static_cast<int64_t>(num_tokens) * groups;
  const bool vec = (cols % 4) == 0 && spk::aligned16(x) && spk::aligned16(y);
  const bool wvec = vec && weight != nullptr && spk::aligned8(weight);
  const int tid = threadIdx.x, nt = blockDim.x;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    float ss = 0.0f;
    if (vec) {
      for (int c = tid; c < cols / 4; c += nt) {
        const float4 v = reinterpret_cast<const float4*>(xr)[c];
        ss = spk::fmaf_(v.x, v.x, ss);
        ss = spk::fmaf_(v.y, v.y, ss);
        ss = spk::fmaf_(v.z, v.z, ss);
        ss = spk::fmaf_(v.w, v.w, ss);
      }
    } else {
      for (int c = tid; c < cols; c += nt) ss = spk::fmaf_(xr[c], xr[c], ss);
    }
    ss = spk::block_sum(ss, scratch);
    const float inv = spk::spk_rsqrtf(ss / static_cast<float>(cols) + epsilon);
    if (vec) {
      for (int c = tid; c < cols / 4; c += nt) {
        float4 v = reinterpret_cast<const float4*>(xr)[c];
        v.x *= inv;
        v.y *= inv;
        v.z *= inv;
        v.w *= inv;
        if (wvec) {
          const uint2 w = __ldg(reinterpret_cast<const uint2*>(weight) + c);
          v.x *= spk::bf16lo_to_f32(w.x);
          v.y *= spk::bf16hi_to_f32(w.x);
          v.z *= spk::bf16lo_to_f32(w.y);
          v.w *= spk::bf16hi_to_f32(w.y);
        } else if (weight != nullptr) {
          v.x *= spk::ldg_bf16(weight + 4 * c);
          v.y *= spk::ldg_bf16(weight + 4 * c + 1);
          v.z *= spk::ldg_bf16(weight + 4 * c + 2);
          v.w *= spk::ldg_bf16(weight + 4 * c + 3);
        }
        reinterpret_cast<float4*>(yr)[c] = v;
      }
    } else {
      for (int c = tid; c < cols; c += nt) {
        float v = xr[c] * inv;
        if (weight != nullptr) v *= spk::ldg_bf16(weight + c);
        yr[c] = v;
      }
    }
    // block_sum ended with a barrier; the next row's reduction reuses `scratch` safely.
  }
}
