// Gemma 4 RMSNorm over the last dim of x [num_tokens * groups, cols]:
//   y = x * (mean(x^2) + eps)^-0.5 [* w]     (w multiplies directly: not 1 + w)
// One block per row (grid-stride over rows); sum of squares in f32 with a block reduction; the
// row is read twice (the second read hits L1/L2). y may alias x.
// spark_residual_rms_norm (below) is the same with the residual add fused into the output pass.
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

// Residual add fused with the RMSNorm above, over rows of x [num_tokens, cols]:
//   y = residual + x * (mean(x^2) + eps)^-0.5 [* w]
// Same parallelisation and reduction as spark_rms_norm (one block per row, grid-stride over
// rows, float4 rows when x, residual, y are 16-byte aligned and cols % 4 == 0). y may alias x or
// residual: the output pass reads x[c] and residual[c] in the thread that then writes y[c], and
// the reduction's barrier separates every other read of the row from the writes. Neither x nor
// residual goes through the non-coherent (__ldg) path, since y may overwrite them.
SPK_EXPORT void spark_residual_rms_norm(const float* x, const unsigned short* weight,
                                        const float* residual, float* y, int num_tokens, int cols,
                                        float epsilon) {
  __shared__ float scratch[32];
  if (num_tokens <= 0 || cols <= 0) return;
  const bool vec = (cols % 4) == 0 && spk::aligned16(x) && spk::aligned16(residual) &&
                   spk::aligned16(y);
  const bool wvec = vec && weight != nullptr && spk::aligned8(weight);
  const int tid = threadIdx.x, nt = blockDim.x;
  for (int64_t row = blockIdx.x; row < num_tokens; row += gridDim.x) {
    const float* xr = x + row * cols;
    const float* rr = residual + row * cols;
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
    ss = spk::block_sum(ss, scratch);  // also: every thread finished reading the row for ss
    const float inv = spk::spk_rsqrtf(ss / static_cast<float>(cols) + epsilon);
    if (vec) {
      for (int c = tid; c < cols / 4; c += nt) {
        float4 v = reinterpret_cast<const float4*>(xr)[c];
        const float4 r = reinterpret_cast<const float4*>(rr)[c];
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
        v.x = r.x + v.x;
        v.y = r.y + v.y;
        v.z = r.z + v.z;
        v.w = r.w + v.w;
        reinterpret_cast<float4*>(yr)[c] = v;
      }
    } else {
      for (int c = tid; c < cols; c += nt) {
        float v = xr[c] * inv;
        const float r = rr[c];
        if (weight != nullptr) v *= spk::ldg_bf16(weight + c);
        yr[c] = r + v;
      }
    }
    // block_sum ended with a barrier; the next row's reduction reuses `scratch` safely.
  }
}
