#include "spark/runtime/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "spark/runtime/kernel_abi.h"
#include "spark/runtime/status_macros.h"
#include "step_args.h"

namespace spark {
namespace rt {
namespace {

bool IsLinear(abi::OpId op) {
  return op == abi::OpId::kLinear || op == abi::OpId::kLinearNvfp4 ||
         op == abi::OpId::kLinearFp8;
}
bool IsMoeGateUp(abi::OpId op) {
  return op == abi::OpId::kMoeGateUp || op == abi::OpId::kMoeGateUpNvfp4 ||
         op == abi::OpId::kMoeGateUpFp8;
}
bool IsMoeDown(abi::OpId op) {
  return op == abi::OpId::kMoeDown || op == abi::OpId::kMoeDownNvfp4 ||
         op == abi::OpId::kMoeDownFp8;
}

// The argument holding the activations a linear or MoE expert step reads; null for other ops.
const char* InputArgName(abi::OpId op) {
  if (IsLinear(op) || IsMoeGateUp(op)) return "x";
  return IsMoeDown(op) ? "act" : nullptr;
}

// The module a weight belongs to: its name without ".weight".
std::string ModuleOf(const std::string& weight) {
  return absl::EndsWith(weight, ".weight") ? weight.substr(0, weight.size() - 7) : weight;
}

// Argument `name` of a step of op `op` (the registry's index).
const StepArg& ArgOf(const Step& step, const char* name) {
  return step.args[abi::FindArg(abi::kOps[static_cast<int>(step.op)], name)];
}

}  // namespace

LinearInputRanges::LinearInputRanges(const Plan& plan)
    : plan_(plan), watched_(plan.buffers.size(), false) {
  const auto watch = [&](const StepArg& arg) {
    if (arg.kind == ArgRefKind::kBuffer) watched_[arg.index] = true;
  };
  for (const Step& step : plan.steps) {
    const char* input = InputArgName(step.op);
    if (input == nullptr) continue;
    watch(ArgOf(step, input));
    if (!IsLinear(step.op)) watch(ArgOf(step, "indices"));  // the experts of each row
  }
}

void LinearInputRanges::Record(const std::string& module, float value) {
  float& amax = amax_.try_emplace(module, 0.0f).first->second;
  amax = std::max(amax, value);
}

absl::Status LinearInputRanges::Observe(const StepOutput& output) {
  if (output.step_index != last_step_) {
    // The first output of a step that just ran: what it read is what the earlier steps left.
    SPARK_RETURN_IF_ERROR(MeasureInput(output.step_index));
    last_step_ = output.step_index;
  }
  if (output.buffer >= 0 && output.buffer < static_cast<int64_t>(watched_.size()) &&
      watched_[output.buffer]) {
    Latest& latest = latest_[output.buffer];
    latest.dtype = output.dtype;
    latest.shape = output.shape;
    const auto* data = static_cast<const uint8_t*>(output.data);
    latest.bytes.assign(data, data + output.num_bytes);
  }
  return absl::OkStatus();
}

absl::Status LinearInputRanges::MeasureInput(int step_index) {
  const Step& step = plan_.steps[step_index];
  const char* input_name = InputArgName(step.op);
  if (input_name == nullptr) return absl::OkStatus();
  const bool gate_up = IsMoeGateUp(step.op), down = IsMoeDown(step.op);
  const StepArg& input = ArgOf(step, input_name);
  const StepArg& weight = ArgOf(step, IsLinear(step.op) ? "w" : gate_up ? "gate_up" : "down");
  const auto found = latest_.find(input.index);
  if (input.kind != ArgRefKind::kBuffer || weight.kind != ArgRefKind::kWeight ||
      found == latest_.end()) {
    return absl::OkStatus();  // an input no step wrote (none in a model's plan)
  }
  const Latest& in = found->second;
  std::vector<float> values(in.bytes.size() / static_cast<size_t>(DTypeSize(in.dtype)));
  ActivationsToF32(in.bytes.data(), in.dtype, absl::MakeSpan(values));
  const std::string module = ModuleOf(plan_.weights[weight.index].name);
  if (IsLinear(step.op)) {
    float amax = 0.0f;
    for (float v : values) amax = std::max(amax, std::fabs(v));  // NaN never wins
    Record(module, amax);
    return absl::OkStatus();
  }
  // MoE: per expert, over the token rows (gate_up) or slots (down) routed to it.
  const auto indices = latest_.find(ArgOf(step, "indices").index);
  if (indices == latest_.end() || indices->second.dtype != DType::kI32) {
    return absl::InternalError(absl::StrCat("calibration: the expert indices of step ", step_index,
                                            " (", step.source, ") were not observed"));
  }
  const int64_t top_k = ArgOf(step, "top_k").i32;
  const int64_t tokens = indices->second.shape.empty() ? 0 : indices->second.shape[0];
  const int64_t num_experts = ArgOf(step, "num_experts").i32;
  const int64_t row = static_cast<int64_t>(values.size()) / std::max<int64_t>(1, tokens);
  const int64_t slot = down ? row / std::max<int64_t>(1, top_k) : row;
  // "<layer>.experts.gate_up_proj" / ".down_proj" -> "<layer>.experts"
  const std::string experts = module.substr(0, module.rfind('.'));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t k = 0; k < top_k; ++k) {
      int32_t e;
      std::memcpy(&e, indices->second.bytes.data() + 4 * (t * top_k + k), sizeof(e));
      if (e < 0 || e >= num_experts) continue;
      const float* begin = values.data() + (down ? t * row + k * slot : t * row);
      float amax = 0.0f;
      for (int64_t i = 0; i < slot; ++i) amax = std::max(amax, std::fabs(begin[i]));
      if (down) {
        Record(absl::StrCat(experts, ".", e, ".down_proj"), amax);
      } else {
        Record(absl::StrCat(experts, ".", e, ".gate_proj"), amax);
        Record(absl::StrCat(experts, ".", e, ".up_proj"), amax);
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, float>> MeasureLinearInputRanges(
    const Plan& plan, Executor& executor, const std::vector<std::vector<int32_t>>& prompts) {
  LinearInputRanges ranges(plan);
  executor.set_step_observer([&](const StepOutput& output) { return ranges.Observe(output); });
  absl::Status status;
  for (size_t p = 0; p < prompts.size() && status.ok(); ++p) {
    const std::vector<int32_t>& ids = prompts[p];
    absl::StatusOr<std::unique_ptr<SequenceState>> sequence =
        executor.NewSequence(static_cast<int64_t>(ids.size()));
    if (!sequence.ok()) {
      status = sequence.status();
      break;
    }
    std::vector<int32_t> positions(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) positions[i] = static_cast<int32_t>(i);
    for (size_t begin = 0; begin < ids.size() && status.ok();
         begin += static_cast<size_t>(plan.max_tokens)) {
      const size_t n = std::min(ids.size() - begin, static_cast<size_t>(plan.max_tokens));
      StepCall call;
      call.ids = absl::MakeConstSpan(ids).subspan(begin, n);
      call.positions = absl::MakeConstSpan(positions).subspan(begin, n);
      call.rows = LogitRows::kNone;
      StepResult result;
      ranges.NewCall();
      status = executor.Run(**sequence, call, &result);
    }
  }
  executor.set_step_observer(nullptr);
  SPARK_RETURN_IF_ERROR(status);
  return ranges.amax();
}

}  // namespace rt
}  // namespace spark
