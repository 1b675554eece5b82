// Per-step timing of a run (spark-run --profile) and the cost model that turns it into achieved
// bandwidth and throughput: the bytes each launch moves and the FLOPs it does, computed from the
// plan step's arguments (an ideal count: what the op must touch at least, not what a kernel
// happens to re-read).
#ifndef SPARK_RUNTIME_STEP_PROFILE_H_
#define SPARK_RUNTIME_STEP_PROFILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/types/span.h"

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

// The cost of one launch of `step` for tokens at `positions`, one each (attention reads the keys
// each position sees: all earlier ones, or the last `window` for a sliding layer). `step` must
// have passed ValidatePlan.
StepCost EstimateStepCost(const Plan& plan, const Step& step, absl::Span<const int32_t> positions);

struct StepTiming {
  int64_t launches = 0;
  double seconds = 0;
  StepCost cost;  // summed over the launches
};

// The per-step timings of one kind of executor call.
struct CallTimings {
  std::vector<StepTiming> steps;  // by plan step
  int64_t calls = 0;
  int64_t tokens = 0;
};

// What a profiled executor measured, per plan step, separately for decode steps (each token its
// own sequence's next one, every row sampled), by how many sequences they carry, and for the
// other calls (prefill, and steps that mix prefill chunks with decode tokens).
class RunProfile {
 public:
  explicit RunProfile(const Plan& plan);
  // One launch of step `step_index` in a call of one token at each of `positions` (a decode step
  // of positions.size() sequences when `decode_step`), made for `launch_tokens` of them (the last
  // ones: a logits-tail step runs on the sampled rows only; -1: all).
  void Record(size_t step_index, absl::Span<const int32_t> positions, bool decode_step,
              double seconds, int64_t launch_tokens = -1);
  const Plan& plan() const { return plan_; }
  // Decode steps of one sequence, and of each larger number of sequences.
  const std::vector<StepTiming>& decode() const { return Decode(1).steps; }
  int64_t decode_calls() const { return Decode(1).calls; }
  const std::map<int64_t, CallTimings>& decode_by_sequences() const { return decode_; }
  const std::vector<StepTiming>& prefill() const { return prefill_.steps; }
  int64_t prefill_calls() const { return prefill_.calls; }
  int64_t prefill_tokens() const { return prefill_.tokens; }

 private:
  const CallTimings& Decode(int64_t sequences) const;
  const Plan& plan_;
  std::map<int64_t, CallTimings> decode_;  // by sequences per step
  CallTimings prefill_;
  CallTimings none_;  // what Decode(n) gives when no such step ran
};

// Step timings summed by op, largest time first.
struct OpTiming {
  std::string op;
  StepTiming timing;
};
std::vector<OpTiming> SumByOp(const Plan& plan, const std::vector<StepTiming>& steps);

// The tables spark-run --profile prints: per op, launches, time per call, share, GB and GB/s,
// TFLOP/s; decode steps (by sequences per step) and prefill separately.
std::string FormatProfile(const RunProfile& profile, absl::string_view method);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_STEP_PROFILE_H_
