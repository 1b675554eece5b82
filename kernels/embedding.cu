// Token embedding: y[t, :] = f32(table[ids[t], :]) * scale; ids outside [0, vocab) give a zero row.
// Grid-stride over (token, 8-column chunk): one 16-byte load of 8 bf16, two 4-element stores.
#include "common.cuh"

SPK_EXPORT void spark_embedding(const int* ids, const unsigned short* table, void* y_out,
                                int num_tokens, int vocab, int dim, float scale) {
  if (num_tokens <= 0 || dim <= 0) return;
  const spk::ActOut y{y_out};
  const int64_t start = spk::global_thread(), stride = spk::grid_threads();
  if ((dim % 8) == 0 && spk::aligned16(table) && y.aligned4()) {
    const int c8 = dim / 8;
    const int64_t n = static_cast<int64_t>(num_tokens) * c8;
    for (int64_t i = start; i < n; i += stride) {
      const int64_t t = i / c8, c = i % c8;
      const int id = spk::ldg_i(ids + t);
      float f[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
      if (id >= 0 && id < vocab) {
        const uint4 w = spk::ldg_u4(table + static_cast<int64_t>(id) * dim + c * 8);
        spk::unpack_bf16x8(w, f);
#pragma unroll
        for (int j = 0; j < 8; ++j) f[j] *= scale;
      }
      y.st4(t * dim + c * 8, make_float4(f[0], f[1], f[2], f[3]));
      y.st4(t * dim + c * 8 + 4, make_float4(f[4], f[5], f[6], f[7]));
    }
  } else {
    const int64_t n = static_cast<int64_t>(num_tokens) * dim;
    for (int64_t i = start; i < n; i += stride) {
      const int64_t t = i / dim, c = i % dim;
      const int id = spk::ldg_i(ids + t);
      float v = 0.0f;
      if (id >= 0 && id < vocab) v = spk::ldg_bf16(table + static_cast<int64_t>(id) * dim + c) * scale;
      y[i] = v;
    }
  }
}

SPARK_CHECK_KERNEL_SIGNATURES()
