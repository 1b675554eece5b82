// Activation ranges for quantization calibration (spark-quantize --calibration-prompt-ids): the
// largest |x| that reaches the input of each linear module while prompts run through a bf16
// model's plan, from which spark-quantize writes ModelOpt's per-module `input_scale` (the static
// activation scale W4A4 / W8A8 engines read). Module names are the checkpoint's (a weight's name
// without ".weight"); MoE experts are named per expert and projection, as ModelOpt stores them:
// `<layer>.experts.<e>.gate_proj` / `.up_proj` (the input of the tokens routed to expert e) and
// `.down_proj` (expert e's intermediate activations).
#ifndef SPARK_RUNTIME_CALIBRATION_H_
#define SPARK_RUNTIME_CALIBRATION_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/plan.h"

namespace spark {
namespace rt {

// Observes an executor's steps (Executor::set_step_observer) and keeps, for every linear (and
// MoE expert projection) step, the amax of the input it read: the rows its input buffer held
// when the step ran (the output of the last step that wrote it).
class LinearInputRanges {
 public:
  explicit LinearInputRanges(const Plan& plan);

  // For Executor::set_step_observer.
  absl::Status Observe(const StepOutput& output);
  // Before each executor call (its step indices start again).
  void NewCall() { last_step_ = -1; }

  // Module name -> the largest |x| seen at its input (NaN ignored). Experts never routed to are
  // absent.
  const std::map<std::string, float>& amax() const { return amax_; }

 private:
  struct Latest {  // a watched buffer's rows as its last writer left them
    DType dtype = DType::kF32;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  void Record(const std::string& module, float value);
  // The amax of what step `step_index` read, when it is a linear or an MoE expert step.
  absl::Status MeasureInput(int step_index);

  const Plan& plan_;
  std::vector<bool> watched_;         // by buffer id: read by a linear or an MoE expert step
  std::map<int64_t, Latest> latest_;  // by buffer id
  std::map<std::string, float> amax_;
  int last_step_ = -1;  // the step whose outputs are being observed
};

// Runs each prompt (token ids) through `executor`, a fresh sequence of the prompt's length per
// prompt, in chunks of the plan's max_tokens (no logits), with a LinearInputRanges observing;
// returns its amax(). Replaces the executor's step observer while it runs (none after).
absl::StatusOr<std::map<std::string, float>> MeasureLinearInputRanges(
    const Plan& plan, Executor& executor, const std::vector<std::vector<int32_t>>& prompts);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_CALIBRATION_H_
