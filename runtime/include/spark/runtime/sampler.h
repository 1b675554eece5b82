// Token sampling options: greedy by default, or temperature / top-k / top-p with an explicit seed
// (the same seed and logits always give the same tokens). The draw itself runs where the logits
// are, as the plan's last step (kernel_ops.def sample; the host reference is host::Sample):
// SamplingParamsFor turns the options into that step's parameters.
#ifndef SPARK_RUNTIME_SAMPLER_H_
#define SPARK_RUNTIME_SAMPLER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "spark/runtime/kernel_abi.h"

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

// The sample step's parameters for drawing the token at sequence position `position` (the draw's
// counter: a seed's stream is indexed by position, so a generation that resumes from cached keys
// draws what a fresh one would).
abi::SamplingParams SamplingParamsFor(const SamplerOptions& options, int64_t position);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SAMPLER_H_
