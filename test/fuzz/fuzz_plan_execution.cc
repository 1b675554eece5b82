// Runs plans that the reader accepts on the host reference executor: a plan from a stranger's
// cubin must not make the runtime read or write outside the arena, the KV caches or the weights
// (ValidatePlan's bounds rules, docs/plan-format.md "Bounds"). Sanitizers report any access
// outside them.
//
// Input: a plan buffer (plan.fbs; wrapped in a section with a correct header, as
// fuzz_plan_section's odd mode does). Accepted plans whose arena, KV caches (for max_length 8) and weights together
// are at most 64 MiB get zero weights and run one step of up to 2 tokens, then one decode step.
// Invariants: every step either runs or fails with a message; no sanitizer report.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fuzz_check.h"
#include "fuzz_plan_payload.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/host_executor.h"
#include "spark/runtime/plan.h"

namespace {

constexpr uint64_t kMemoryLimit = 64ull << 20;
constexpr int64_t kMaxLength = 8;

// Bytes the run would allocate or map, saturating.
uint64_t Footprint(const spark::rt::Plan& plan) {
  uint64_t bytes = plan.arena_bytes;
  for (const spark::rt::WeightInfo& weight : plan.weights) {
    bytes = std::min(kMemoryLimit + 1, bytes + weight.num_bytes());
  }
  for (const spark::rt::KvCacheInfo& cache : plan.kv_caches) {
    const uint64_t capacity = static_cast<uint64_t>(
        spark::rt::KvCapacity(cache, kMaxLength, plan.max_tokens));
    const uint64_t row = static_cast<uint64_t>(cache.kv_heads) * cache.head_dim;
    if (row > kMemoryLimit) return kMemoryLimit + 1;
    bytes = std::min(kMemoryLimit + 1, bytes + 8 * capacity * row);
  }
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string section =
      spark::fuzz::WrapPlanPayload(absl::string_view(reinterpret_cast<const char*>(data), size));
  absl::StatusOr<spark::rt::Plan> plan = spark::rt::ParsePlanSection(section, "fuzz.plan");
  if (!plan.ok() || plan->arena_bytes > kMemoryLimit || Footprint(*plan) > kMemoryLimit) {
    return 0;
  }
  // One zero-filled block holds every weight.
  uint64_t weight_bytes = 0;
  for (const spark::rt::WeightInfo& weight : plan->weights) weight_bytes += weight.num_bytes();
  std::vector<uint8_t> block(weight_bytes + 1, 0);
  std::vector<spark::rt::WeightData> weights;
  uint64_t offset = 0;
  for (const spark::rt::WeightInfo& weight : plan->weights) {
    weights.push_back({block.data() + offset, weight.num_bytes()});
    offset += weight.num_bytes();
  }
  absl::StatusOr<std::unique_ptr<spark::rt::Executor>> executor =
      spark::rt::CreateHostExecutor(*plan, std::move(weights));
  if (!executor.ok()) {
    SPARK_FUZZ_CHECK(!executor.status().message().empty());
    return 0;
  }
  const int64_t max_length =
      plan->model.max_position_embeddings > 0
          ? std::min<int64_t>(kMaxLength, plan->model.max_position_embeddings)
          : kMaxLength;
  absl::Status status = (*executor)->Prepare(max_length);
  SPARK_FUZZ_CHECK(status.ok() || !status.message().empty());
  if (!status.ok()) return 0;
  const int32_t last_id = static_cast<int32_t>(plan->model.vocab_size - 1);
  const int64_t prompt = std::min<int64_t>({2, plan->max_tokens, max_length - 1});
  std::vector<int32_t> ids, positions;
  for (int64_t t = 0; t < prompt; ++t) {
    ids.push_back(t == 0 ? 0 : last_id);
    positions.push_back(static_cast<int32_t>(t));
  }
  std::vector<float> logits;
  status = (*executor)->RunStep(ids, positions, nullptr, &logits);
  SPARK_FUZZ_CHECK(status.ok() || !status.message().empty());
  if (!status.ok() || prompt >= max_length) return 0;
  const int32_t next_position = static_cast<int32_t>(prompt);
  status = (*executor)->RunStep({last_id}, {next_position}, nullptr, &logits);
  SPARK_FUZZ_CHECK(status.ok() || !status.message().empty());
  return 0;
}
