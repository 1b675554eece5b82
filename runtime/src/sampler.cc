#include "spark/runtime/sampler.h"

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "spark/runtime/kernel_abi.h"

namespace spark {
namespace rt {

absl::Status ValidateSamplerOptions(const SamplerOptions& options) {
  if (!std::isfinite(options.temperature) || options.temperature < 0.0f) {
    return absl::InvalidArgumentError(absl::StrCat(
        "temperature must be a finite number >= 0 (0 = greedy), got ", options.temperature));
  }
  if (options.top_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("top-k must be >= 0 (0 = no limit), got ", options.top_k));
  }
  if (!(options.top_p > 0.0f && options.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("top-p must be in (0, 1] (1 = no limit), got ", options.top_p));
  }
  return absl::OkStatus();
}

abi::SamplingParams SamplingParamsFor(const SamplerOptions& options, int64_t position) {
  abi::SamplingParams params;
  params.temperature = options.temperature;
  params.top_k = options.top_k;
  params.top_p = options.top_p;
  params.seed = options.seed;
  params.counter = static_cast<uint64_t>(position);
  return params;
}

}  // namespace rt
}  // namespace spark
