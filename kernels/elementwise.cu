// Elementwise and data-movement ops: add, mul, scale, scalar_mul, gelu, gelu_mul, softcap,
// mask_tokens, select_group, scatter_rows. All are grid-stride loops; the activation ops use
// 4-element vector accesses (16 bytes of f32, 8 of bf16) when every pointer is aligned for them
// and the element count is a multiple of 4 (outputs may alias inputs: every element is read
// before it is written by the same thread).
#include "common.cuh"

namespace spk {
namespace {

// Applies f to n elements: y[i] = f(a[i], b[i]) (b may be null for unary ops).
template <typename F>
SPK_DEVICE void map2(ActIn a, ActIn b, ActOut y, int64_t n, F f) {
  const int64_t start = global_thread(), stride = grid_threads();
  const bool vec = (n % 4) == 0 && a.aligned4() && y.aligned4() && (b.null() || b.aligned4());
  if (vec) {
    const int64_t n4 = n / 4;
    for (int64_t i = start; i < n4; i += stride) {
      const float4 va = a.ld4(4 * i);
      float4 vb = make_float4(0.f, 0.f, 0.f, 0.f);
      if (!b.null()) vb = b.ld4(4 * i);
      float4 r;
      r.x = f(va.x, vb.x);
      r.y = f(va.y, vb.y);
      r.z = f(va.z, vb.z);
      r.w = f(va.w, vb.w);
      y.st4(4 * i, r);
    }
  } else {
    for (int64_t i = start; i < n; i += stride) y[i] = f(a[i], !b.null() ? b[i] : 0.0f);
  }
}

SPK_DEVICE int64_t count(int num_tokens, int cols) {
  if (num_tokens <= 0 || cols <= 0) return 0;
  return static_cast<int64_t>(num_tokens) * cols;
}

struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MulOp {
  __device__ float operator()(float a, float b) const { return a * b; }
};
struct ScaleOp {
  float s;
  __device__ float operator()(float a, float) const { return a * s; }
};
struct GeluOp {
  __device__ float operator()(float a, float) const { return spk_gelu(a); }
};
struct GeluMulOp {
  __device__ float operator()(float a, float b) const { return spk_gelu(a) * b; }
};
struct SoftcapOp {
  float cap;
  __device__ float operator()(float a, float) const { return cap * spk_tanhf(a / cap); }
};

}  // namespace
}  // namespace spk

SPK_EXPORT void spark_add(const void* a, const void* b, void* y, int num_tokens, int cols) {
  spk::map2({a}, {b}, {y}, spk::count(num_tokens, cols), spk::AddOp{});
}

SPK_EXPORT void spark_mul(const void* a, const void* b, void* y, int num_tokens, int cols) {
  spk::map2({a}, {b}, {y}, spk::count(num_tokens, cols), spk::MulOp{});
}

SPK_EXPORT void spark_scale(const void* x, void* y, int num_tokens, int cols, float factor) {
  spk::map2({x}, {nullptr}, {y}, spk::count(num_tokens, cols), spk::ScaleOp{factor});
}

// s: bf16 [1] (layer_scalar).
SPK_EXPORT void spark_scalar_mul(const void* x, const unsigned short* s, void* y, int num_tokens,
                                 int cols) {
  const float factor = spk::ldg_bf16(s);
  spk::map2({x}, {nullptr}, {y}, spk::count(num_tokens, cols), spk::ScaleOp{factor});
}

SPK_EXPORT void spark_gelu(const void* x, void* y, int num_tokens, int cols) {
  spk::map2({x}, {nullptr}, {y}, spk::count(num_tokens, cols), spk::GeluOp{});
}

SPK_EXPORT void spark_gelu_mul(const void* a, const void* b, void* y, int num_tokens,
                               int cols) {
  spk::map2({a}, {b}, {y}, spk::count(num_tokens, cols), spk::GeluMulOp{});
}

SPK_EXPORT void spark_softcap(const void* x, void* y, int num_tokens, int cols, float cap) {
  spk::map2({x}, {nullptr}, {y}, spk::count(num_tokens, cols), spk::SoftcapOp{cap});
}

// y[t] = ids[t] unless it equals one of token_a/b/c (a value of -1 is an unused slot).
SPK_EXPORT void spark_mask_tokens(const int* ids, int* y, int num_tokens, int token_a, int token_b,
                                  int token_c, int replacement) {
  for (int64_t t = spk::global_thread(); t < num_tokens; t += spk::grid_threads()) {
    const int id = ids[t];
    const bool hit = (token_a != -1 && id == token_a) || (token_b != -1 && id == token_b) ||
                     (token_c != -1 && id == token_c);
    y[t] = hit ? replacement : id;
  }
}

// y[t, :] = x[t, index, :] for x [T, groups, cols].
SPK_EXPORT void spark_select_group(const void* x, void* y_out, int num_tokens, int groups,
                                   int cols, int index) {
  if (num_tokens <= 0 || cols <= 0 || groups <= 0) return;
  const int64_t start = spk::global_thread(), stride = spk::grid_threads();
  const int64_t x_pitch = static_cast<int64_t>(groups) * cols;
  const spk::ActIn src = spk::ActIn{x} + static_cast<int64_t>(index) * cols;
  const spk::ActOut y{y_out};
  if ((cols % 4) == 0 && spk::ActIn{x}.aligned4() && y.aligned4()) {
    const int c4 = cols / 4;
    const int64_t n = static_cast<int64_t>(num_tokens) * c4;
    for (int64_t i = start; i < n; i += stride) {
      const int64_t t = i / c4, c = i % c4;
      y.st4(4 * i, src.ld4(t * x_pitch + 4 * c));
    }
  } else {
    const int64_t n = static_cast<int64_t>(num_tokens) * cols;
    for (int64_t i = start; i < n; i += stride) {
      const int64_t t = i / cols, c = i % cols;
      y[i] = src[t * x_pitch + c];
    }
  }
}

// In place: dest[indices[n], :] = updates[n, :] for n < num_updates, skipping indices outside
// [0, num_tokens).
SPK_EXPORT void spark_scatter_rows(void* dest_out, const int* indices, const void* updates_in,
                                   int num_tokens, int num_updates, int cols) {
  if (num_updates <= 0 || cols <= 0) return;
  const int64_t start = spk::global_thread(), stride = spk::grid_threads();
  const spk::ActOut dest{dest_out};
  const spk::ActIn updates{updates_in};
  if ((cols % 4) == 0 && dest.aligned4() && updates.aligned4()) {
    const int c4 = cols / 4;
    const int64_t n = static_cast<int64_t>(num_updates) * c4;
    for (int64_t i = start; i < n; i += stride) {
      const int64_t u = i / c4, c = i % c4;
      const int row = indices[u];
      if (row < 0 || row >= num_tokens) continue;
      dest.st4(static_cast<int64_t>(row) * cols + 4 * c, updates.ld4(4 * i));
    }
  } else {
    const int64_t n = static_cast<int64_t>(num_updates) * cols;
    for (int64_t i = start; i < n; i += stride) {
      const int64_t u = i / cols, c = i % cols;
      const int row = indices[u];
      if (row < 0 || row >= num_tokens) continue;
      dest[static_cast<int64_t>(row) * cols + c] = updates[i];
    }
  }
}

SPARK_CHECK_KERNEL_SIGNATURES()
