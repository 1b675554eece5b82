#include "spark/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

namespace spark {
namespace rt {
namespace {

// Token indices in sampling order: by logit, largest first, ties by lower index. Only the first
// `keep` are ordered (the rest are dropped); `keep` == size sorts everything.
std::vector<int32_t> RankedTokens(absl::Span<const float> logits, size_t keep) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + keep, order.end(),
                    [&logits](int32_t a, int32_t b) {
                      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
                    });
  order.resize(keep);
  return order;
}

// A uniform double in [0, 1) from 53 random bits (portable, unlike std::uniform_real_distribution).
double UniformUnit(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace

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

int32_t ArgMax(absl::Span<const float> logits) {
  if (logits.empty()) return -1;
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

Sampler::Sampler(const SamplerOptions& options) : options_(options), rng_(options.seed) {}

bool Sampler::greedy() const { return options_.temperature <= 0.0f || options_.top_k == 1; }

int32_t Sampler::Sample(absl::Span<const float> logits) {
  if (greedy() || logits.size() <= 1) return ArgMax(logits);
  const bool limit_k = options_.top_k > 0 && static_cast<size_t>(options_.top_k) < logits.size();
  const bool needs_order = limit_k || options_.top_p < 1.0f;
  std::vector<int32_t> tokens;
  if (needs_order) {
    tokens = RankedTokens(logits, limit_k ? options_.top_k : logits.size());
  } else {
    tokens.resize(logits.size());
    std::iota(tokens.begin(), tokens.end(), 0);
  }
  // Softmax of logits / temperature over the candidates, in double.
  float max_logit = logits[tokens[0]];
  for (int32_t t : tokens) max_logit = std::max(max_logit, logits[t]);
  std::vector<double> weights(tokens.size());
  double total = 0.0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    weights[i] =
        std::exp((static_cast<double>(logits[tokens[i]]) - max_logit) / options_.temperature);
    total += weights[i];
  }
  // Nucleus: the shortest prefix (in ranked order) holding top_p of the probability.
  size_t kept = tokens.size();
  if (options_.top_p < 1.0f) {
    double mass = 0.0;
    for (size_t i = 0; i < tokens.size(); ++i) {
      mass += weights[i];
      if (mass >= options_.top_p * total) {
        kept = i + 1;
        break;
      }
    }
    total = mass;
  }
  double target = UniformUnit(rng_) * total;
  for (size_t i = 0; i < kept; ++i) {
    target -= weights[i];
    if (target < 0.0) return tokens[i];
  }
  return tokens[kept - 1];
}

}  // namespace rt
}  // namespace spark
