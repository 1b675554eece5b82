#include "spark/runtime/step_profile.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spark/runtime/kernel_abi.h"
#include "step_args.h"

namespace spark {
namespace rt {
namespace {

// Keys the tokens at first_position .. + num_tokens - 1 attend to, summed.
double KeysSeen(int64_t num_tokens, int64_t first_position, int64_t window) {
  double keys = 0;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t visible = first_position + t + 1;
    keys += static_cast<double>(window > 0 ? std::min(visible, window) : visible);
  }
  return keys;
}

}  // namespace

StepCost& StepCost::operator+=(const StepCost& other) {
  weight_bytes += other.weight_bytes;
  kv_bytes += other.kv_bytes;
  activation_bytes += other.activation_bytes;
  flops += other.flops;
  return *this;
}

StepCost EstimateStepCost(const Plan& plan, const Step& step, int64_t num_tokens,
                          int64_t first_position) {
  StepCost cost;
  const abi::KernelSpec* spec = abi::FindKernel(step.op.c_str());
  if (spec == nullptr) return cost;
  const auto size = [&](const char* name) {
    return static_cast<double>(StepSizeArg(step, name, num_tokens));
  };
  const double tokens = static_cast<double>(num_tokens);
  if (StepDoesNothing(step, num_tokens)) return cost;
  for (const StepArg& arg : step.args) {
    if (arg.kind == ArgRefKind::kBuffer) {
      cost.activation_bytes += tokens * plan.buffers[arg.index].row_bytes();
    }
  }
  const std::string& op = step.op;
  if (op == "embedding") {
    cost.weight_bytes = tokens * size("dim") * 2;  // the rows gathered
  } else if (op == "moe_gate_up" || op == "moe_down") {
    const double experts = size("num_experts"), top_k = size("top_k");
    const double touched = std::min(experts, tokens * top_k);
    const double per_expert = (op == "moe_gate_up" ? 2 : 1) * size("intermediate") * size("hidden");
    cost.weight_bytes = touched * per_expert * 2;
    cost.flops = 2 * tokens * top_k * per_expert;
  } else {
    for (const StepArg& arg : step.args) {
      if (arg.kind == ArgRefKind::kWeight) {
        cost.weight_bytes += static_cast<double>(plan.weights[arg.index].num_bytes());
      }
    }
  }
  if (op == "linear") {
    cost.flops = 2 * tokens * size("out_features") * size("in_features");
  } else if (op == "kv_write") {
    cost.kv_bytes = 2 * tokens * size("kv_heads") * size("head_dim") *
                    abi::KvCacheElementBytes(static_cast<int>(size("cache_dtype")));
  } else if (op == "attention") {
    const double keys = KeysSeen(num_tokens, first_position,
                                 StepSizeArg(step, "window", num_tokens));
    cost.kv_bytes = 2 * keys * size("kv_heads") * size("head_dim") *
                    abi::KvCacheElementBytes(static_cast<int>(size("cache_dtype")));
    cost.flops = 4 * keys * size("q_heads") * size("head_dim");
  }
  if (op == "moe_down") {
    // Grouped, the weighted slot rows go to the workspace and y is not written; otherwise the
    // reverse (the generic count above included both).
    const int partials = abi::FindArg(*spec, "partials"), y = abi::FindArg(*spec, "y");
    const bool has_partials = step.args[partials].kind == ArgRefKind::kBuffer;
    const int unused = abi::MoeDownGrouped(static_cast<int>(num_tokens), has_partials) ? y
                       : has_partials                                                  ? partials
                                                                                       : -1;
    if (unused >= 0) cost.activation_bytes -= tokens * plan.buffers[step.args[unused].index].row_bytes();
  }
  if (op == "attention" || op == "attention_merge") {
    // The partial records of a split step (kernel_abi.h), written by attention and read by the
    // merge, instead of the buffers' per-token rows counted above.
    const int splits = abi::AttentionSplits(static_cast<int>(num_tokens),
                                            static_cast<int>(size("max_splits")),
                                            static_cast<int>(size("split_rows")));
    const double row = size("q_heads") * size("head_dim") * 4;
    const double records = splits > 1 ? tokens * size("q_heads") * splits *
                                             (size("head_dim") + abi::AttentionRecordFloats(0)) * 4
                                       : 0;
    if (op == "attention") {
      cost.activation_bytes = tokens * row * (splits > 1 ? 1 : 2) + records + tokens * 4;
    } else {
      cost.activation_bytes = splits > 1 ? records + tokens * row : 0;
    }
  }
  return cost;
}

RunProfile::RunProfile(const Plan& plan)
    : plan_(plan), decode_(plan.steps.size()), prefill_(plan.steps.size()) {}

void RunProfile::Record(size_t step_index, int64_t num_tokens, int64_t first_position,
                        double seconds) {
  const bool decode = num_tokens == 1;
  if (step_index == 0) {
    (decode ? decode_calls_ : prefill_calls_) += 1;
    if (!decode) prefill_tokens_ += num_tokens;
  }
  StepTiming& timing = (decode ? decode_ : prefill_)[step_index];
  timing.launches += 1;
  timing.seconds += seconds;
  timing.cost += EstimateStepCost(plan_, plan_.steps[step_index], num_tokens, first_position);
}

std::vector<OpTiming> SumByOp(const Plan& plan, const std::vector<StepTiming>& steps) {
  std::map<std::string, StepTiming> by_op;
  for (size_t i = 0; i < steps.size() && i < plan.steps.size(); ++i) {
    if (steps[i].launches == 0) continue;
    StepTiming& sum = by_op[plan.steps[i].op];
    sum.launches += steps[i].launches;
    sum.seconds += steps[i].seconds;
    sum.cost += steps[i].cost;
  }
  std::vector<OpTiming> ops;
  for (auto& entry : by_op) ops.push_back({entry.first, entry.second});
  std::stable_sort(ops.begin(), ops.end(), [](const OpTiming& a, const OpTiming& b) {
    return a.timing.seconds > b.timing.seconds;
  });
  return ops;
}

namespace {

void AppendTable(const Plan& plan, const std::vector<StepTiming>& steps, int64_t calls,
                 absl::string_view title, std::string* out) {
  if (calls == 0) return;
  const std::vector<OpTiming> ops = SumByOp(plan, steps);
  StepTiming total;
  for (const OpTiming& op : ops) {
    total.launches += op.timing.launches;
    total.seconds += op.timing.seconds;
    total.cost += op.timing.cost;
  }
  absl::StrAppend(out, title, "\n");
  absl::StrAppendFormat(out, "  %-13s %9s %11s %6s %10s %9s %9s\n", "op", "launches",
                        "ms per call", "share", "MB per call", "GB/s", "TFLOP/s");
  const auto row = [&](absl::string_view name, const StepTiming& t) {
    const double seconds = std::max(t.seconds, 1e-12);
    absl::StrAppendFormat(out, "  %-13s %9d %11.4f %5.1f%% %10.2f %9.1f %9.2f\n", name,
                          t.launches, 1e3 * t.seconds / calls,
                          100.0 * t.seconds / std::max(total.seconds, 1e-12),
                          t.cost.bytes() / calls / 1e6, t.cost.bytes() / seconds / 1e9,
                          t.cost.flops / seconds / 1e12);
  };
  for (const OpTiming& op : ops) row(op.op, op.timing);
  row("total", total);
}

}  // namespace

std::string FormatProfile(const RunProfile& profile, absl::string_view method) {
  const Plan& plan = profile.plan();
  std::string out;
  AppendTable(plan, profile.decode(), profile.decode_calls(),
              absl::StrCat("profile: decode, ", profile.decode_calls(),
                           " calls of 1 token (", method, ")"),
              &out);
  AppendTable(plan, profile.prefill(), profile.prefill_calls(),
              absl::StrCat("profile: prefill, ", profile.prefill_calls(), " calls, ",
                           profile.prefill_tokens(), " tokens (", method, ")"),
              &out);
  if (out.empty()) out = "profile: nothing ran\n";
  return out;
}

}  // namespace rt
}  // namespace spark
