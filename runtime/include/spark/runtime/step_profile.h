// Per-step timing of a run (spark-run --profile) and the cost model that turns it into achieved
// bandwidth and throughput: the bytes each launch moves and the FLOPs it does, computed from the
// plan step's arguments (an ideal count: what the op must touch at least, not what a kernel
// happens to re-read).
#ifndef SPARK_RUNTIME_STEP_PROFILE_H_
#define SPARK_RUNTIME_STEP_PROFILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "spark/runtime/plan.h"

namespace spark {
namespace rt {

struct StepCost {
  double weight_bytes = 0;      // weights read (MoE experts: those the tokens' top-k can touch)
  double kv_bytes = 0;          // KV-cache rows written (kv_write) or read (attention)
  double activation_bytes = 0;  // activation rows read and written
  double flops = 0;             // 2 x multiply-adds of the matrix work (linear, MoE, attention)
  double bytes() const { return weight_bytes + kv_bytes + activation_bytes; }
  StepCost& operator+=(const StepCost& other);
};

// The cost of one launch of `step` for `num_tokens` tokens at positions first_position,
// first_position + 1, ... (attention reads the keys each position sees: all earlier ones, or
// the last `window` for a sliding layer). `step` must have passed ValidatePlan.
StepCost EstimateStepCost(const Plan& plan, const Step& step, int64_t num_tokens,
                          int64_t first_position);

struct StepTiming {
  int64_t launches = 0;
  double seconds = 0;
  StepCost cost;  // summed over the launches
};

// What a profiled executor measured, per plan step, separately for decode calls (one token) and
// prefill calls (more than one).
class RunProfile {
 public:
  explicit RunProfile(const Plan& plan);
  // One launch of step `step_index` in a call of `num_tokens` tokens (decode when 1), made for
  // `launch_tokens` of them (fewer for a logits-tail step run on the last row only; -1: all).
  void Record(size_t step_index, int64_t num_tokens, int64_t first_position, double seconds,
              int64_t launch_tokens = -1);
  const Plan& plan() const { return plan_; }
  const std::vector<StepTiming>& decode() const { return decode_; }
  const std::vector<StepTiming>& prefill() const { return prefill_; }
  int64_t decode_calls() const { return decode_calls_; }
  int64_t prefill_calls() const { return prefill_calls_; }
  int64_t prefill_tokens() const { return prefill_tokens_; }

 private:
  const Plan& plan_;
  std::vector<StepTiming> decode_, prefill_;
  int64_t decode_calls_ = 0, prefill_calls_ = 0, prefill_tokens_ = 0;
};

// Step timings summed by op, largest time first.
struct OpTiming {
  std::string op;
  StepTiming timing;
};
std::vector<OpTiming> SumByOp(const Plan& plan, const std::vector<StepTiming>& steps);

// The tables spark-run --profile prints: per op, launches, time per call, share, GB and GB/s,
// TFLOP/s; decode and prefill separately.
std::string FormatProfile(const RunProfile& profile, absl::string_view method);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_STEP_PROFILE_H_
