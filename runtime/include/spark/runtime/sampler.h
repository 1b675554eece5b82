// Token sampling from one row of logits: greedy by default, or temperature / top-k / top-p with an
// explicit seed (the same seed and logits always give the same tokens).
#ifndef SPARK_RUNTIME_SAMPLER_H_
#define SPARK_RUNTIME_SAMPLER_H_

#include <cstdint>
#include <random>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace spark {
namespace rt {

struct SamplerOptions {
  float temperature = 0.0f;  // <= 0: greedy
  int32_t top_k = 0;         // 0: all tokens; 1: greedy
  float top_p = 1.0f;        // keep the smallest top set whose probability reaches top_p
  uint64_t seed = 0;
};

// INVALID_ARGUMENT for a negative or non-finite temperature, a negative top_k, or a top_p outside
// (0, 1].
absl::Status ValidateSamplerOptions(const SamplerOptions& options);

// The index of the largest logit; ties pick the lowest index. -1 for an empty row.
int32_t ArgMax(absl::Span<const float> logits);

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options);

  // True when Sample is ArgMax (temperature <= 0 or top_k == 1).
  bool greedy() const;

  // The next token for `logits` (one row, vocab wide).
  int32_t Sample(absl::Span<const float> logits);

 private:
  SamplerOptions options_;
  std::mt19937_64 rng_;
};

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SAMPLER_H_
