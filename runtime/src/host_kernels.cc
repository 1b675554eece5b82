#include "spark/runtime/host_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "spark/runtime/kernel_abi.h"
#include "spark/runtime/quantize.h"
#include "spark/runtime/quantized_weights.h"

namespace spark {
namespace rt {

uint16_t F32ToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float GeluTanh(float x) {
  constexpr double kSqrt2OverPi = 0.7978845608028654;
  const double xd = x;
  return static_cast<float>(0.5 * xd *
                            (1.0 + std::tanh(kSqrt2OverPi * (xd + 0.044715 * xd * xd * xd))));
}

namespace host {
namespace {

// Element-wise y[i] = f(a[i], b[i]) over n elements; safe in place.
template <typename F>
void Binary(const float* a, const float* b, float* y, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], b[i]);
}

template <typename F>
void Unary(const float* x, float* y, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

// sum_i x[i] * bf16(w[i]), accumulated in double.
double DotBf16(const float* x, const uint16_t* w, int64_t n) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(x[i]) * Bf16ToF32(w[i]);
  return acc;
}

// (mean(x^2) + eps)^-0.5 over n elements.
float InverseRms(const float* x, int64_t n, float epsilon) {
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const double mean = sum_sq / static_cast<double>(n);
  return static_cast<float>(std::pow(mean + static_cast<double>(epsilon), -0.5));
}

// y [rows, out] = x [rows, in] @ w[out, in]^T.
void MatVecRows(const float* x, const uint16_t* w, float* y, int64_t rows, int64_t out,
                int64_t in) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      y[r * out + o] = static_cast<float>(DotBf16(x + r * in, w + o * in, in));
    }
  }
}

// Softmax of `v` in place, in double.
void SoftmaxInPlace(std::vector<double>& v) {
  if (v.empty()) return;
  const double max = *std::max_element(v.begin(), v.end());
  double sum = 0.0;
  for (double& e : v) {
    e = std::exp(e - max);
    sum += e;
  }
  for (double& e : v) e /= sum;
}

// The indices of the `k` largest values, largest first; ties pick the lower index first.
std::vector<int32_t> TopK(const std::vector<double>& v, int32_t k) {
  std::vector<int32_t> order(v.size());
  for (size_t i = 0; i < v.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&v](int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  order.resize(k);
  return order;
}

}  // namespace

void Embedding(const int32_t* ids, const uint16_t* table, float* y, int32_t num_tokens,
               int32_t vocab, int32_t dim, float scale) {
  for (int32_t t = 0; t < num_tokens; ++t) {
    float* row = y + static_cast<int64_t>(t) * dim;
    const int32_t id = ids[t];
    if (id < 0 || id >= vocab) {
      std::fill(row, row + dim, 0.0f);
      continue;
    }
    const uint16_t* src = table + static_cast<int64_t>(id) * dim;
    for (int32_t c = 0; c < dim; ++c) row[c] = Bf16ToF32(src[c]) * scale;
  }
}

void RmsNorm(const float* x, const uint16_t* weight, float* y, int32_t num_tokens, int32_t groups,
             int32_t cols, float epsilon) {
  const int64_t rows = static_cast<int64_t>(num_tokens) * groups;
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    const float inv = InverseRms(in, cols, epsilon);
    for (int32_t c = 0; c < cols; ++c) {
      const float normed = in[c] * inv;
      out[c] = weight == nullptr ? normed : normed * Bf16ToF32(weight[c]);
    }
  }
}

void ResidualRmsNorm(const float* x, const uint16_t* weight, const float* residual, float* y,
                     int32_t num_tokens, int32_t cols, float epsilon) {
  for (int32_t r = 0; r < num_tokens; ++r) {
    const int64_t base = static_cast<int64_t>(r) * cols;
    const float inv = InverseRms(x + base, cols, epsilon);
    for (int32_t c = 0; c < cols; ++c) {
      const float normed = x[base + c] * inv;
      y[base + c] = residual[base + c] + (weight == nullptr ? normed : normed * Bf16ToF32(weight[c]));
    }
  }
}

void ResidualRmsNormScale(const float* x, const uint16_t* weight, const float* residual,
                          const uint16_t* s, float* y, int32_t num_tokens, int32_t cols,
                          float epsilon, int32_t round_sum) {
  ResidualRmsNorm(x, weight, residual, y, num_tokens, cols, epsilon);
  const float scale = Bf16ToF32(s[0]);
  for (int64_t i = 0; i < static_cast<int64_t>(num_tokens) * cols; ++i) {
    const float sum = round_sum != 0 ? Bf16ToF32(F32ToBf16(y[i])) : y[i];
    y[i] = sum * scale;
  }
}

void RmsNormRope(const float* x, const uint16_t* weight, const int32_t* positions, float* y,
                 int32_t num_tokens, int32_t heads, int32_t head_dim, int32_t rotated_pairs,
                 float theta, float factor, float epsilon) {
  RmsNorm(x, weight, y, num_tokens, heads, head_dim, epsilon);
  Rope(y, positions, y, num_tokens, heads, head_dim, rotated_pairs, theta, factor);
}

void Linear(const float* x, const uint16_t* w, float* y, int32_t num_tokens, int32_t out_features,
            int32_t in_features) {
  MatVecRows(x, w, y, num_tokens, out_features, in_features);
}

// y[t, o] = x[t] . row (one dequantised weight row) for every token, accumulated in double.
static void DequantisedRowTimesTokens(const float* x, const float* row, float* y, int64_t num_tokens,
                                      int64_t out_features, int64_t in_features, int64_t o) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    double acc = 0.0;
    for (int64_t i = 0; i < in_features; ++i) {
      acc += static_cast<double>(x[t * in_features + i]) * row[i];
    }
    y[t * out_features + o] = static_cast<float>(acc);
  }
}

// The quantized linears dequantise each weight row exactly (quantized_weights.h, in f32) and
// then compute as Linear does.
void LinearNvfp4(const float* x, const unsigned char* w, const unsigned char* block_scale,
                 const float* tensor_scale, float* y, int32_t num_tokens, int32_t out_features,
                 int32_t in_features) {
  const int64_t blocks = in_features / quant::kNvfp4BlockSize;
  std::vector<float> row(static_cast<size_t>(in_features));
  for (int64_t o = 0; o < out_features; ++o) {
    const unsigned char* codes = w + o * (in_features / 2);
    for (int64_t b = 0; b < blocks; ++b) {
      const float scale = quant::E4M3Value(block_scale[o * blocks + b]) * tensor_scale[0];
      for (int64_t i = b * quant::kNvfp4BlockSize; i < (b + 1) * quant::kNvfp4BlockSize; ++i) {
        row[i] = quant::E2M1Value(quant::PackedE2M1Code(codes, i)) * scale;
      }
    }
    DequantisedRowTimesTokens(x, row.data(), y, num_tokens, out_features, in_features, o);
  }
}

void QuantizeNvfp4Rows(const float* x, float* q, int32_t num_tokens, int32_t cols,
                       int32_t row_words) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    quant::QuantizeNvfp4Row(x + t * cols, cols, reinterpret_cast<uint8_t*>(q + t * row_words));
  }
}

// W4A4: the block products are exact in f32 (E2M1 x E2M1 sums of 16 and two e4m3 scales); the
// host adds them in double, in index order.
void LinearNvfp4A4(const float* xq, const unsigned char* w, const unsigned char* block_scale,
                   const float* tensor_scale, float* y, int32_t num_tokens, int32_t out_features,
                   int32_t in_features, int32_t row_words) {
  const int64_t blocks = in_features / quant::kNvfp4BlockSize;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const unsigned char* row = reinterpret_cast<const unsigned char*>(xq + t * row_words);
    float global;
    std::memcpy(&global, row, sizeof(global));
    const unsigned char* a_codes = row + abi::kNvfp4RowCodesOffset;
    const unsigned char* a_scales = row + abi::Nvfp4RowScalesOffset(in_features);
    for (int64_t o = 0; o < out_features; ++o) {
      const unsigned char* w_codes = w + o * (in_features / 2);
      double acc = 0.0;
      for (int64_t b = 0; b < blocks; ++b) {
        float sum = 0.0f;
        for (int64_t i = b * quant::kNvfp4BlockSize; i < (b + 1) * quant::kNvfp4BlockSize; ++i) {
          sum += quant::E2M1Value(quant::PackedE2M1Code(a_codes, i)) *
                 quant::E2M1Value(quant::PackedE2M1Code(w_codes, i));
        }
        acc += sum * (quant::E4M3Value(a_scales[b]) *
                      quant::E4M3Value(block_scale[o * blocks + b]));
      }
      y[t * out_features + o] = static_cast<float>(acc * global * tensor_scale[0]);
    }
  }
}

void LinearFp8(const float* x, const unsigned char* w, const float* scale, float* y,
               int32_t num_tokens, int32_t out_features, int32_t in_features,
               int32_t scale_count) {
  std::vector<float> row(static_cast<size_t>(in_features));
  for (int64_t o = 0; o < out_features; ++o) {
    const float s = scale[scale_count == 1 ? 0 : o];
    for (int64_t i = 0; i < in_features; ++i) {
      row[i] = quant::E4M3Value(w[o * in_features + i]) * s;
    }
    DequantisedRowTimesTokens(x, row.data(), y, num_tokens, out_features, in_features, o);
  }
}

void Add(const float* a, const float* b, float* y, int32_t num_tokens, int32_t cols) {
  Binary(a, b, y, static_cast<int64_t>(num_tokens) * cols, [](float u, float v) { return u + v; });
}

void Mul(const float* a, const float* b, float* y, int32_t num_tokens, int32_t cols) {
  Binary(a, b, y, static_cast<int64_t>(num_tokens) * cols, [](float u, float v) { return u * v; });
}

void Scale(const float* x, float* y, int32_t num_tokens, int32_t cols, float factor) {
  Unary(x, y, static_cast<int64_t>(num_tokens) * cols, [factor](float u) { return u * factor; });
}

void ScalarMul(const float* x, const uint16_t* s, float* y, int32_t num_tokens, int32_t cols) {
  Scale(x, y, num_tokens, cols, Bf16ToF32(s[0]));
}

void Gelu(const float* x, float* y, int32_t num_tokens, int32_t cols) {
  Unary(x, y, static_cast<int64_t>(num_tokens) * cols, GeluTanh);
}

void GeluMul(const float* a, const float* b, float* y, int32_t num_tokens, int32_t cols) {
  Binary(a, b, y, static_cast<int64_t>(num_tokens) * cols,
         [](float u, float v) { return GeluTanh(u) * v; });
}

void Softcap(const float* x, float* y, int32_t num_tokens, int32_t cols, float cap) {
  Unary(x, y, static_cast<int64_t>(num_tokens) * cols, [cap](float u) {
    return static_cast<float>(cap * std::tanh(static_cast<double>(u) / cap));
  });
}

void Rope(const float* x, const int32_t* positions, float* y, int32_t num_tokens, int32_t heads,
          int32_t head_dim, int32_t rotated_pairs, float theta, float factor) {
  const int32_t half = head_dim / 2;
  // As transformers builds it: inv_freq = 1 / theta^(2i / head_dim) in f32, then / factor; the
  // angle is the f32 product position * inv_freq.
  std::vector<float> inv_freq(half, 0.0f);
  for (int32_t i = 0; i < rotated_pairs && i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv_freq[i] = (1.0f / std::pow(theta, exponent)) / factor;
  }
  for (int32_t t = 0; t < num_tokens; ++t) {
    const float position = static_cast<float>(positions[t]);
    for (int32_t h = 0; h < heads; ++h) {
      const int64_t base = (static_cast<int64_t>(t) * heads + h) * head_dim;
      for (int32_t i = 0; i < half; ++i) {
        const float angle = position * inv_freq[i];
        const float c = static_cast<float>(std::cos(static_cast<double>(angle)));
        const float s = static_cast<float>(std::sin(static_cast<double>(angle)));
        const float lo = x[base + i];
        const float hi = x[base + i + half];
        y[base + i] = lo * c - hi * s;
        y[base + i + half] = hi * c + lo * s;
      }
    }
  }
}

namespace {

// Cache elements: f32 as is, bf16 bits rounded to nearest even (as the GPU's cvt.rn).
float CacheValue(float x) { return x; }
float CacheValue(uint16_t bits) { return Bf16ToF32(bits); }
void StoreCache(float x, float* dst) { *dst = x; }
void StoreCache(float x, uint16_t* dst) { *dst = F32ToBf16(x); }

template <typename C>
void KvWriteAs(const float* k, const float* v, const int32_t* positions,
               const int32_t* sequences, const int32_t* block_table, C* k_cache, C* v_cache,
               int32_t num_tokens, int64_t row, int32_t capacity) {
  const int64_t table_row = capacity / abi::kKvBlockRows;
  for (int32_t t = 0; t < num_tokens; ++t) {
    if (positions[t] < 0) continue;
    const int64_t slot =
        abi::KvSlot(block_table + sequences[t] * table_row, capacity, positions[t]);
    if (slot < 0) continue;  // no block allocated: nothing is written
    for (int64_t i = 0; i < row; ++i) {
      StoreCache(k[t * row + i], k_cache + slot * row + i);
      StoreCache(v[t * row + i], v_cache + slot * row + i);
    }
  }
}

}  // namespace

void KvWrite(const float* k, const float* v, const int32_t* positions, const int32_t* sequences,
             const int32_t* block_table, void* k_cache, void* v_cache, int32_t num_tokens,
             int32_t kv_heads, int32_t head_dim, int32_t capacity, int32_t cache_dtype) {
  const int64_t row = static_cast<int64_t>(kv_heads) * head_dim;
  if (cache_dtype == abi::kCacheBF16) {
    KvWriteAs(k, v, positions, sequences, block_table, static_cast<uint16_t*>(k_cache),
              static_cast<uint16_t*>(v_cache), num_tokens, row, capacity);
  } else {
    KvWriteAs(k, v, positions, sequences, block_table, static_cast<float*>(k_cache),
              static_cast<float*>(v_cache), num_tokens, row, capacity);
  }
}

namespace {

// One key range's unnormalised attention result: m = largest score, l = sum of exp(score - m),
// o = sum of exp(score - m) * v (m = -inf, l = 0, o = 0 for an empty range).
struct PartialAttention {
  double m = -std::numeric_limits<double>::infinity();
  double l = 0.0;
  std::vector<double> o;
};

template <typename C>
void AttendRange(const float* qh, const int32_t* table_row, const C* k_cache, const C* v_cache,
                 int64_t kv_row, int64_t kv_offset, int32_t head_dim, int32_t capacity,
                 int64_t first, int64_t count, float scale, std::vector<double>& scores,
                 PartialAttention& out) {
  // The slot of key j (an unallocated block, which a valid run never reads: slot 0).
  const auto slot = [&](int64_t j) {
    return std::max<int64_t>(0, abi::KvSlot(table_row, capacity, static_cast<int>(j)));
  };
  out.m = -std::numeric_limits<double>::infinity();
  out.l = 0.0;
  out.o.assign(head_dim, 0.0);
  scores.clear();
  for (int64_t j = first; j < first + count; ++j) {
    const C* key = k_cache + slot(j) * kv_row + kv_offset;
    double dot = 0.0;
    for (int32_t d = 0; d < head_dim; ++d) dot += static_cast<double>(qh[d]) * CacheValue(key[d]);
    scores.push_back(dot * scale);
    out.m = std::max(out.m, scores.back());
  }
  for (int64_t j = first; j < first + count; ++j) {
    const C* value = v_cache + slot(j) * kv_row + kv_offset;
    const double w = std::exp(scores[j - first] - out.m);
    out.l += w;
    for (int32_t d = 0; d < head_dim; ++d) out.o[d] += w * CacheValue(value[d]);
  }
}

template <typename C>
void AttentionAs(const float* q, const int32_t* positions, const int32_t* sequences,
                 const int32_t* block_table, const C* k_cache, const C* v_cache, float* y, float* partials, int32_t num_tokens, int32_t q_heads, int32_t kv_heads,
                 int32_t head_dim, int32_t capacity, int32_t window, float scale,
                 int32_t max_splits, int32_t split_rows, const int32_t* last_visible) {
  const int32_t group = q_heads / kv_heads;
  const int64_t kv_row = static_cast<int64_t>(kv_heads) * head_dim;
  const int32_t splits =
      partials == nullptr ? 1 : abi::AttentionSplits(num_tokens, max_splits, split_rows);
  const int64_t record = abi::AttentionRecordFloats(head_dim);
  std::vector<double> scores;
  PartialAttention part;
  for (int32_t t = 0; t < num_tokens; ++t) {
    const int32_t p = positions[t];
    const int32_t* table_row =
        block_table + static_cast<int64_t>(sequences[t]) * (capacity / abi::kKvBlockRows);
    const abi::KeyRange keys =
        abi::AttentionKeys(p, window, last_visible != nullptr ? last_visible[t] : p);
    const int64_t first = keys.begin;
    const int64_t n = keys.count;
    for (int32_t h = 0; h < q_heads; ++h) {
      const int64_t unit = static_cast<int64_t>(t) * q_heads + h;
      const float* qh = q + unit * head_dim;
      const int64_t kv_offset = static_cast<int64_t>(h / group) * head_dim;
      if (splits == 1) {
        AttendRange(qh, table_row, k_cache, v_cache, kv_row, kv_offset, head_dim, capacity, first,
                    n, scale, scores, part);
        float* out = y + unit * head_dim;
        for (int32_t d = 0; d < head_dim; ++d) {
          out[d] = part.l > 0.0 ? static_cast<float>(part.o[d] / part.l) : 0.0f;
        }
        continue;
      }
      for (int32_t j = 0; j < splits; ++j) {
        const abi::KeyRange range = abi::AttentionSplitRange(static_cast<int>(n), splits, j);
        AttendRange(qh, table_row, k_cache, v_cache, kv_row, kv_offset, head_dim, capacity,
                    first + range.begin, range.count, scale, scores, part);
        float* rec = partials + (unit * splits + j) * record;
        for (int32_t d = 0; d < head_dim; ++d) rec[d] = static_cast<float>(part.o[d]);
        rec[head_dim] = part.l > 0.0 ? static_cast<float>(part.m) : 0.0f;
        rec[head_dim + 1] = static_cast<float>(part.l);
        rec[head_dim + 2] = rec[head_dim + 3] = 0.0f;
      }
    }
  }
}

}  // namespace

void Attention(const float* q, const int32_t* positions, const int32_t* sequences,
               const int32_t* block_table, const void* k_cache, const void* v_cache, float* y, float* partials, int32_t num_tokens, int32_t q_heads, int32_t kv_heads,
               int32_t head_dim, int32_t capacity, int32_t window, float scale,
               int32_t max_splits, int32_t split_rows, int32_t cache_dtype,
               const int32_t* last_visible) {
  if (cache_dtype == abi::kCacheBF16) {
    AttentionAs(q, positions, sequences, block_table, static_cast<const uint16_t*>(k_cache),
                static_cast<const uint16_t*>(v_cache), y, partials, num_tokens, q_heads, kv_heads,
                head_dim, capacity, window, scale, max_splits, split_rows, last_visible);
  } else {
    AttentionAs(q, positions, sequences, block_table, static_cast<const float*>(k_cache),
                static_cast<const float*>(v_cache), y, partials, num_tokens, q_heads, kv_heads,
                head_dim, capacity, window, scale, max_splits, split_rows, last_visible);
  }
}

void AttentionMerge(const float* partials, float* y, int32_t num_tokens, int32_t q_heads,
                    int32_t head_dim, int32_t max_splits, int32_t split_rows) {
  const int32_t splits = abi::AttentionSplits(num_tokens, max_splits, split_rows);
  if (splits == 1) return;
  const int64_t record = abi::AttentionRecordFloats(head_dim);
  std::vector<double> acc(head_dim);
  for (int64_t unit = 0; unit < static_cast<int64_t>(num_tokens) * q_heads; ++unit) {
    const float* recs = partials + unit * splits * record;
    double m = -std::numeric_limits<double>::infinity();
    for (int32_t j = 0; j < splits; ++j) {
      if (recs[j * record + head_dim + 1] > 0.0f) m = std::max<double>(m, recs[j * record + head_dim]);
    }
    double l = 0.0;
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int32_t j = 0; j < splits; ++j) {
      const float* rec = recs + j * record;
      if (rec[head_dim + 1] <= 0.0f) continue;  // an empty split
      const double w = std::exp(static_cast<double>(rec[head_dim]) - m);
      l += w * rec[head_dim + 1];
      for (int32_t d = 0; d < head_dim; ++d) acc[d] += w * rec[d];
    }
    float* out = y + unit * head_dim;
    for (int32_t d = 0; d < head_dim; ++d) out[d] = l > 0.0 ? static_cast<float>(acc[d] / l) : 0.0f;
  }
}

void MoeTopK(const float* logits, const uint16_t* per_expert_scale, float* weights,
             int32_t* indices, int32_t num_tokens, int32_t num_experts, int32_t top_k,
             float logit_scale) {
  std::vector<double> probs(num_experts);
  for (int32_t t = 0; t < num_tokens; ++t) {
    const float* row = logits + static_cast<int64_t>(t) * num_experts;
    for (int32_t e = 0; e < num_experts; ++e) probs[e] = row[e] * logit_scale;  // f32 product
    SoftmaxInPlace(probs);
    const std::vector<int32_t> top = TopK(probs, top_k);
    double total = 0.0;
    for (int32_t e : top) total += probs[e];
    for (int32_t k = 0; k < top_k; ++k) {
      const int64_t out = static_cast<int64_t>(t) * top_k + k;
      indices[out] = top[k];
      weights[out] =
          static_cast<float>(probs[top[k]] / total) * Bf16ToF32(per_expert_scale[top[k]]);
    }
  }
}

// The expert matrices of the MoE ops in each weight format: Dot(x, e, r) is x . row r of expert
// e's [rows, cols] matrix, dequantised exactly (in f32) as the quantized linears do, accumulated
// in double. A matrix's tensor (or per-row) scales: scale[(e * rows + r) / rows_per_scale].
namespace {

struct Bf16Experts {
  const uint16_t* w;
  int64_t rows, cols;
  double Dot(const float* x, int64_t e, int64_t r) const {
    return DotBf16(x, w + (e * rows + r) * cols, cols);
  }
};

struct Nvfp4Experts {
  const unsigned char* codes;
  const unsigned char* block_scale;
  const float* tensor_scale;
  int64_t rows, cols, rows_per_scale;
  double Dot(const float* x, int64_t e, int64_t r) const {
    const int64_t row = e * rows + r, blocks = cols / quant::kNvfp4BlockSize;
    const float global = tensor_scale[row / rows_per_scale];
    double acc = 0.0;
    for (int64_t b = 0; b < blocks; ++b) {
      const float scale = quant::E4M3Value(block_scale[row * blocks + b]) * global;
      for (int64_t i = b * quant::kNvfp4BlockSize; i < (b + 1) * quant::kNvfp4BlockSize; ++i) {
        const float value = quant::E2M1Value(quant::PackedE2M1Code(codes + row * (cols / 2), i));
        acc += static_cast<double>(x[i]) * (value * scale);
      }
    }
    return acc;
  }
};

struct Fp8Experts {
  const unsigned char* w;
  const float* scale;
  int64_t rows, cols, rows_per_scale;
  double Dot(const float* x, int64_t e, int64_t r) const {
    const int64_t row = e * rows + r;
    const float s = scale[row / rows_per_scale];
    double acc = 0.0;
    for (int64_t i = 0; i < cols; ++i) {
      acc += static_cast<double>(x[i]) * (quant::E4M3Value(w[row * cols + i]) * s);
    }
    return acc;
  }
};

// act[t, k, i] = gelu(gate) * up of expert indices[t, k] (rows i and intermediate + i of its
// gate_up matrix); zeros for an index outside [0, num_experts).
template <class Experts>
void MoeGateUpWith(const float* x, const Experts& gate_up, const int32_t* indices, float* act,
                   int32_t num_tokens, int32_t hidden, int32_t intermediate, int32_t num_experts,
                   int32_t top_k) {
  for (int32_t t = 0; t < num_tokens; ++t) {
    const float* row = x + static_cast<int64_t>(t) * hidden;
    for (int32_t k = 0; k < top_k; ++k) {
      const int64_t slot = static_cast<int64_t>(t) * top_k + k;
      float* out = act + slot * intermediate;
      const int32_t e = indices[slot];
      if (e < 0 || e >= num_experts) {
        std::fill(out, out + intermediate, 0.0f);
        continue;
      }
      for (int32_t i = 0; i < intermediate; ++i) {
        const float g = static_cast<float>(gate_up.Dot(row, e, i));
        const float u = static_cast<float>(gate_up.Dot(row, e, intermediate + i));
        out[i] = GeluTanh(g) * u;
      }
    }
  }
}

// y[t] = sum_k weights[t, k] * (act[t, k] @ down[e]^T), or each slot's term to partials when
// grouped (abi::MoeDownGrouped).
template <class Experts>
void MoeDownWith(const float* act, const Experts& down, const float* weights,
                 const int32_t* indices, float* y, float* partials, int32_t num_tokens,
                 int32_t hidden, int32_t intermediate, int32_t num_experts, int32_t top_k,
                 int32_t path) {
  const bool grouped = abi::MoeDownGrouped(path, partials != nullptr);
  std::vector<double> acc(hidden);
  for (int32_t t = 0; t < num_tokens; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int32_t k = 0; k < top_k; ++k) {
      const int64_t slot = static_cast<int64_t>(t) * top_k + k;
      const int32_t e = indices[slot];
      float* part = grouped ? partials + slot * hidden : nullptr;
      if (e < 0 || e >= num_experts) {
        if (part != nullptr) std::fill(part, part + hidden, 0.0f);
        continue;
      }
      const float* a = act + slot * intermediate;
      for (int32_t o = 0; o < hidden; ++o) {
        const float expert_out = static_cast<float>(down.Dot(a, e, o));
        if (part != nullptr) {
          part[o] = weights[slot] * expert_out;
        } else {
          acc[o] += static_cast<double>(weights[slot]) * expert_out;
        }
      }
    }
    if (grouped) continue;
    float* out = y + static_cast<int64_t>(t) * hidden;
    for (int32_t o = 0; o < hidden; ++o) out[o] = static_cast<float>(acc[o]);
  }
}

}  // namespace

void MoeGateUp(const float* x, const uint16_t* gate_up, const int32_t* indices, float* act,
               int32_t num_tokens, int32_t hidden, int32_t intermediate, int32_t num_experts,
               int32_t top_k, int32_t /*path: both compute the same*/) {
  MoeGateUpWith(x, Bf16Experts{gate_up, 2 * static_cast<int64_t>(intermediate), hidden}, indices,
                act, num_tokens, hidden, intermediate, num_experts, top_k);
}

void MoeDown(const float* act, const uint16_t* down, const float* weights, const int32_t* indices,
             float* y, float* partials, int32_t num_tokens, int32_t hidden, int32_t intermediate,
             int32_t num_experts, int32_t top_k, int32_t path) {
  MoeDownWith(act, Bf16Experts{down, hidden, intermediate}, weights, indices, y, partials,
              num_tokens, hidden, intermediate, num_experts, top_k, path);
}

void MoeGateUpNvfp4(const float* x, const unsigned char* gate_up,
                    const unsigned char* block_scale, const float* tensor_scale,
                    const int32_t* indices, float* act, int32_t num_tokens, int32_t hidden,
                    int32_t intermediate, int32_t num_experts, int32_t top_k,
                    int32_t /*path: both compute the same*/) {
  // One tensor scale per matrix: gate rows [0, intermediate), up rows [intermediate, 2 I).
  const Nvfp4Experts experts{gate_up, block_scale, tensor_scale, 2 * static_cast<int64_t>(intermediate),
                             hidden, std::max<int64_t>(intermediate, 1)};
  MoeGateUpWith(x, experts, indices, act, num_tokens, hidden, intermediate, num_experts, top_k);
}

void MoeDownNvfp4(const float* act, const unsigned char* down, const unsigned char* block_scale,
                  const float* tensor_scale, const float* weights, const int32_t* indices,
                  float* y, float* partials, int32_t num_tokens, int32_t hidden,
                  int32_t intermediate, int32_t num_experts, int32_t top_k, int32_t path) {
  const Nvfp4Experts experts{down, block_scale, tensor_scale, hidden, intermediate,
                             std::max<int64_t>(hidden, 1)};
  MoeDownWith(act, experts, weights, indices, y, partials, num_tokens, hidden, intermediate,
              num_experts, top_k, path);
}

void MoeGateUpFp8(const float* x, const unsigned char* gate_up, const float* scale,
                  const int32_t* indices, float* act, int32_t num_tokens, int32_t hidden,
                  int32_t intermediate, int32_t num_experts, int32_t top_k,
                  int32_t scales_per_matrix, int32_t /*path: both compute the same*/) {
  // scales_per_matrix 1: one scale per gate / up matrix; = intermediate: one per row.
  const Fp8Experts experts{gate_up, scale, 2 * static_cast<int64_t>(intermediate), hidden,
                           scales_per_matrix == 1 ? std::max<int64_t>(intermediate, 1) : 1};
  MoeGateUpWith(x, experts, indices, act, num_tokens, hidden, intermediate, num_experts, top_k);
}

void MoeDownFp8(const float* act, const unsigned char* down, const float* scale,
                const float* weights, const int32_t* indices, float* y, float* partials,
                int32_t num_tokens, int32_t hidden, int32_t intermediate, int32_t num_experts,
                int32_t top_k, int32_t scales_per_matrix, int32_t path) {
  const Fp8Experts experts{down, scale, hidden, intermediate,
                           scales_per_matrix == 1 ? std::max<int64_t>(hidden, 1) : 1};
  MoeDownWith(act, experts, weights, indices, y, partials, num_tokens, hidden, intermediate,
              num_experts, top_k, path);
}

void MoeCombine(const float* partials, float* y, int32_t num_tokens, int32_t hidden,
                int32_t top_k) {
  for (int32_t t = 0; t < num_tokens; ++t) {
    float* out = y + static_cast<int64_t>(t) * hidden;
    for (int32_t o = 0; o < hidden; ++o) {
      float sum = 0.0f;  // in k order, in f32: what the kernel does
      for (int32_t k = 0; k < top_k; ++k) {
        sum += partials[(static_cast<int64_t>(t) * top_k + k) * hidden + o];
      }
      out[o] = sum;
    }
  }
}

void ScatterRows(float* dest, const int32_t* indices, const float* updates, int32_t num_tokens,
                 int32_t num_updates, int32_t cols) {
  for (int32_t n = 0; n < num_updates; ++n) {
    const int32_t row = indices[n];
    if (row < 0 || row >= num_tokens) continue;
    std::memcpy(dest + static_cast<int64_t>(row) * cols, updates + static_cast<int64_t>(n) * cols,
                cols * sizeof(float));
  }
}

void MaskTokens(const int32_t* ids, int32_t* y, int32_t num_tokens, int32_t token_a,
                int32_t token_b, int32_t token_c, int32_t replacement) {
  for (int32_t t = 0; t < num_tokens; ++t) {
    const int32_t id = ids[t];
    const bool masked = id != -1 && (id == token_a || id == token_b || id == token_c);
    y[t] = masked ? replacement : id;
  }
}

void SelectGroup(const float* x, float* y, int32_t num_tokens, int32_t groups, int32_t cols,
                 int32_t index) {
  for (int32_t t = 0; t < num_tokens; ++t) {
    const float* src = x + (static_cast<int64_t>(t) * groups + index) * cols;
    std::memmove(y + static_cast<int64_t>(t) * cols, src, cols * sizeof(float));
  }
}

void Copy(const float* x, float* y, int32_t num_tokens, int32_t cols) {
  std::memmove(y, x, static_cast<int64_t>(num_tokens) * cols * sizeof(float));
}

// The collectives of one rank alone (ranks 1): what every rank's result is when it is the only
// one. The host executor runs the collectives of a plan of several ranks through its
// communicator (collectives.h) instead; these are its single-rank case.
void AllReduce(float* x, int32_t num_tokens, int32_t cols, int32_t ranks) {
  (void)x, (void)num_tokens, (void)cols, (void)ranks;  // the sum over one rank is x
}

void AllGather(const float* x, float* gathered, float* y, int32_t num_tokens, int32_t cols,
               int32_t ranks) {
  (void)ranks;
  const int64_t n = static_cast<int64_t>(num_tokens) * cols;
  std::memmove(gathered, x, n * sizeof(float));
  std::memmove(y, x, n * sizeof(float));
}

// ---- The vision tower ----

void ShiftScale(const float* x, float* y, int32_t num_tokens, int32_t cols, float shift,
                float scale) {
  Unary(x, y, static_cast<int64_t>(num_tokens) * cols,
        [shift, scale](float v) { return (v - shift) * scale; });
}

void PatchPositionEmbedding(const float* x, const int32_t* positions, const uint16_t* table,
                            float* y, int32_t num_tokens, int32_t dim, int32_t table_size) {
  const int64_t plane = static_cast<int64_t>(table_size) * dim;
  for (int32_t t = 0; t < num_tokens; ++t) {
    const int32_t px = positions[2 * static_cast<int64_t>(t)];
    const int32_t py = positions[2 * static_cast<int64_t>(t) + 1];
    const bool has_x = px >= 0 && px < table_size, has_y = py >= 0 && py < table_size;
    const uint16_t* row_x = table + static_cast<int64_t>(has_x ? px : 0) * dim;
    const uint16_t* row_y = table + plane + static_cast<int64_t>(has_y ? py : 0) * dim;
    const int64_t base = static_cast<int64_t>(t) * dim;
    for (int32_t c = 0; c < dim; ++c) {
      const float ex = has_x ? Bf16ToF32(row_x[c]) : 0.0f;
      const float ey = has_y ? Bf16ToF32(row_y[c]) : 0.0f;
      y[base + c] = x[base + c] + (ex + ey);
    }
  }
}

void Clamp(const float* x, const uint16_t* lo, const uint16_t* hi, float* y, int32_t num_tokens,
           int32_t cols) {
  const float low = Bf16ToF32(lo[0]), high = Bf16ToF32(hi[0]);
  Unary(x, y, static_cast<int64_t>(num_tokens) * cols,
        [low, high](float v) { return v < low ? low : (v > high ? high : v); });
}

void Rope2d(const float* x, const int32_t* positions, float* y, int32_t num_tokens, int32_t heads,
            int32_t head_dim, float theta) {
  // Each half of the head (n channels) is rotate-half RoPE over n with its own coordinate; as
  // transformers builds it, inv_freq = 1 / theta^(2c / n) in f32 and the angle the f32 product.
  const int32_t n = head_dim / 2, quarter = head_dim / 4;
  std::vector<float> inv_freq(quarter);
  for (int32_t c = 0; c < quarter; ++c) {
    inv_freq[c] = 1.0f / std::pow(theta, static_cast<float>(2 * c) / static_cast<float>(n));
  }
  for (int32_t t = 0; t < num_tokens; ++t) {
    for (int32_t half = 0; half < 2; ++half) {
      const float coordinate = static_cast<float>(positions[2 * static_cast<int64_t>(t) + half]);
      for (int32_t h = 0; h < heads; ++h) {
        const int64_t base = (static_cast<int64_t>(t) * heads + h) * head_dim + half * n;
        for (int32_t c = 0; c < quarter; ++c) {
          const float angle = coordinate * inv_freq[c];
          const float cs = static_cast<float>(std::cos(static_cast<double>(angle)));
          const float sn = static_cast<float>(std::sin(static_cast<double>(angle)));
          const float a = x[base + c], b = x[base + c + quarter];
          y[base + c] = a * cs - b * sn;
          y[base + c + quarter] = b * cs + a * sn;
        }
      }
    }
  }
}

void BidirectionalAttention(const float* q, const float* k, const float* v, float* y,
                            int32_t num_tokens, int32_t q_heads, int32_t kv_heads,
                            int32_t head_dim, float scale) {
  const int32_t group = q_heads / kv_heads;
  std::vector<double> scores(static_cast<size_t>(num_tokens));
  std::vector<double> out(static_cast<size_t>(head_dim));
  for (int32_t t = 0; t < num_tokens; ++t) {
    for (int32_t h = 0; h < q_heads; ++h) {
      const float* qrow = q + (static_cast<int64_t>(t) * q_heads + h) * head_dim;
      const int32_t kvh = h / group;
      for (int32_t j = 0; j < num_tokens; ++j) {
        const float* krow = k + (static_cast<int64_t>(j) * kv_heads + kvh) * head_dim;
        double dot = 0.0;
        for (int32_t d = 0; d < head_dim; ++d) dot += static_cast<double>(qrow[d]) * krow[d];
        scores[j] = static_cast<double>(static_cast<float>(dot) * scale);
      }
      SoftmaxInPlace(scores);
      std::fill(out.begin(), out.end(), 0.0);
      for (int32_t j = 0; j < num_tokens; ++j) {
        const float* vrow = v + (static_cast<int64_t>(j) * kv_heads + kvh) * head_dim;
        for (int32_t d = 0; d < head_dim; ++d) out[d] += scores[j] * vrow[d];
      }
      float* yrow = y + (static_cast<int64_t>(t) * q_heads + h) * head_dim;
      for (int32_t d = 0; d < head_dim; ++d) yrow[d] = static_cast<float>(out[d]);
    }
  }
}

void PoolByPosition(const float* x, const int32_t* positions, float* y, int32_t num_tokens,
                    int32_t cols, int32_t kernel_size, float scale) {
  int32_t width = 0;
  for (int32_t t = 0; t < num_tokens; ++t) {
    width = std::max(width, positions[2 * static_cast<int64_t>(t)] + 1);
  }
  const int32_t row_width = width / kernel_size;
  const float weight = 1.0f / static_cast<float>(kernel_size * kernel_size);
  std::vector<float> sum(static_cast<size_t>(num_tokens) * cols, 0.0f);
  for (int32_t t = 0; t < num_tokens; ++t) {
    const int32_t px = positions[2 * static_cast<int64_t>(t)];
    const int32_t py = positions[2 * static_cast<int64_t>(t) + 1];
    if (px < 0 || py < 0) continue;
    const int64_t row = px / kernel_size + static_cast<int64_t>(row_width) * (py / kernel_size);
    if (row >= num_tokens) continue;
    for (int32_t c = 0; c < cols; ++c) {
      sum[row * cols + c] += x[static_cast<int64_t>(t) * cols + c] * weight;
    }
  }
  for (size_t i = 0; i < sum.size(); ++i) y[i] = sum[i] * scale;
}

void Standardize(const float* x, const uint16_t* bias, const uint16_t* scale, float* y,
                 int32_t num_tokens, int32_t cols) {
  for (int32_t t = 0; t < num_tokens; ++t) {
    const int64_t base = static_cast<int64_t>(t) * cols;
    for (int32_t c = 0; c < cols; ++c) {
      y[base + c] = (x[base + c] - Bf16ToF32(bias[c])) * Bf16ToF32(scale[c]);
    }
  }
}

namespace {

// One row of sample (kernel_ops.def): the same selection as kernels/sample.cu, written
// sequentially. The kernel finds the cut-offs by radix selection over SamplingKey; here the
// candidates are sorted. Both give the same tokens for the same weights (integers).
int32_t SampleRow(const float* logits, const abi::SamplingParams& p, int32_t vocab) {
  std::vector<uint32_t> keys(vocab);
  int32_t best = 0;
  for (int32_t i = 0; i < vocab; ++i) {
    keys[i] = abi::SamplingKey(logits[i]);
    if (keys[i] > keys[best]) best = i;
  }
  const float max_logit = logits[best];
  if (abi::SamplingIsGreedy(p) || !std::isfinite(max_logit)) return best;
  // Ranked order: larger key first, ties by the lower index.
  const auto ranked_before = [&keys](int32_t a, int32_t b) {
    return keys[a] > keys[b] || (keys[a] == keys[b] && a < b);
  };
  std::vector<int32_t> candidates(vocab);
  for (int32_t i = 0; i < vocab; ++i) candidates[i] = i;
  const size_t count = p.top_k > 0 && p.top_k < vocab ? static_cast<size_t>(p.top_k) : candidates.size();
  std::partial_sort(candidates.begin(), candidates.begin() + count, candidates.end(),
                    ranked_before);
  candidates.resize(count);
  const int bits = abi::SamplingWeightBits(vocab);
  const auto weight = [&](int32_t i) -> uint64_t {
    if (keys[i] == 0) return 0;  // NaN
    const float w = std::exp((logits[i] - max_logit) / p.temperature);
    const uint64_t q = static_cast<uint64_t>(std::ldexp(w, bits));
    return std::min<uint64_t>(q, uint64_t{1} << bits);
  };
  uint64_t total = 0;
  for (int32_t i : candidates) total += weight(i);
  if (p.top_p < 1.0f) {
    // The shortest ranked prefix reaching the nucleus mass.
    const uint64_t need = abi::SamplingNucleusMass(p.top_p, total);
    uint64_t mass = 0;
    size_t kept = 0;
    while (kept < candidates.size() && mass < need) mass += weight(candidates[kept++]);
    candidates.resize(kept);
    total = mass;
  }
  std::sort(candidates.begin(), candidates.end());  // index order
  const uint64_t target = static_cast<uint64_t>(
      (static_cast<unsigned __int128>(total) * abi::SamplingDraw(p.seed, p.counter)) >> 64);
  uint64_t running = 0;
  for (int32_t i : candidates) {
    running += weight(i);
    if (running > target) return i;
  }
  return best;  // unreachable: target < total
}

}  // namespace

void Sample(const float* logits, const int32_t* params, int32_t* token, int32_t num_tokens,
            int32_t vocab) {
  for (int32_t t = 0; t < num_tokens; ++t) {
    abi::SamplingParams p;
    std::memcpy(&p, params + static_cast<int64_t>(t) * abi::kSamplingParamWords, sizeof(p));
    token[t] = SampleRow(logits + static_cast<int64_t>(t) * vocab, p, vocab);
  }
}

}  // namespace host

}  // namespace rt
}  // namespace spark
