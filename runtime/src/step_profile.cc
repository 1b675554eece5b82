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

// Keys the tokens at `positions` attend to, summed.
double KeysSeen(absl::Span<const int32_t> positions, int64_t window) {
  double keys = 0;
  for (const int32_t position : positions) {
    const int64_t visible = static_cast<int64_t>(position) + 1;
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

StepCost EstimateStepCost(const Plan& plan, const Step& step,
                          absl::Span<const int32_t> positions) {
  const int64_t num_tokens = static_cast<int64_t>(positions.size());
  StepCost cost;
  const abi::OpSpec& spec = SpecOf(step);
  const auto size = [&](int arg) { return static_cast<double>(StepSizeArg(step, arg, num_tokens)); };
  const auto product = [&](const int* factors, int n) {
    double p = 1;
    for (int f = 0; f < n; ++f) p *= size(factors[f]);
    return p;
  };
  const double tokens = static_cast<double>(num_tokens);
  const int window = abi::FindRole(spec, abi::Role::kWindow);
  const double keys = KeysSeen(positions, window >= 0 ? size(window) : 0);
  const int cache_dtype = abi::FindRole(spec, abi::Role::kCacheDType);
  for (int i = 0; i < spec.num_args && i < static_cast<int>(step.args.size()); ++i) {
    const abi::ArgSpec& slot = spec.args[i];
    const StepArg& arg = step.args[i];
    if (arg.kind == ArgRefKind::kBuffer) {
      cost.activation_bytes += tokens * plan.buffers[arg.index].row_bytes();
    } else if (arg.kind == ArgRefKind::kWeight) {
      cost.weight_bytes += static_cast<double>(plan.weights[arg.index].num_bytes());
    } else if (slot.extent.kind == abi::Extent::kCacheRows && cache_dtype >= 0) {
      // A cache part: the rows of this step's tokens written, or the keys attended read.
      const bool written = slot.role == abi::Role::kKCacheWrite || slot.role == abi::Role::kVCacheWrite;
      cost.kv_bytes += (written ? tokens : keys) *
                       product(slot.extent.factors, slot.extent.num_factors) *
                       abi::KvCacheElementBytes(static_cast<int>(size(cache_dtype)));
    }
  }
  const abi::OpFlops& flops = spec.flops;
  if (flops.kind != abi::kNone) {
    cost.flops = static_cast<double>(flops.multiplier) * product(flops.factors, flops.num_factors) *
                 (flops.kind == abi::kPerKey ? keys : tokens);
  }
  // What the generic count above cannot know.
  switch (step.op) {
    case abi::OpId::kEmbedding:  // the rows gathered, not the whole table
      cost.weight_bytes = tokens * size(abi::ops::embedding::dim) * 2;
      break;
    case abi::OpId::kMoeGateUp:
    case abi::OpId::kMoeGateUpNvfp4:
    case abi::OpId::kMoeGateUpFp8:
    case abi::OpId::kMoeDown:
    case abi::OpId::kMoeDownNvfp4:
    case abi::OpId::kMoeDownFp8: {  // the experts the step's tokens select, at most all of them
      // (Every expert op has these size arguments; the down ops also y and partials.)
      const int experts = abi::FindArg(spec, "num_experts"), top_k = abi::FindArg(spec, "top_k");
      const double touched = std::min(size(experts), tokens * size(top_k));
      cost.weight_bytes *= touched / std::max(size(experts), 1.0);
      const int partials = abi::FindArg(spec, "partials");
      if (partials >= 0) {
        // Grouped, the weighted slot rows go to the workspace and y is not written; otherwise
        // the reverse (the generic count above included both).
        const bool has_partials = step.args[partials].kind == ArgRefKind::kBuffer;
        const int path = static_cast<int>(size(abi::FindRole(spec, abi::Role::kMoePath)));
        const int unused = abi::MoeDownGrouped(path, has_partials)
                               ? abi::FindArg(spec, "y")
                           : has_partials ? partials
                                          : -1;
        if (unused >= 0) {
          cost.activation_bytes -= tokens * plan.buffers[step.args[unused].index].row_bytes();
        }
      }
      break;
    }
    case abi::OpId::kAttention:
    case abi::OpId::kAttentionMerge: {
      // The partial records of a split step (kernel_abi.h), written by attention and read by
      // the merge, instead of the buffers' per-token rows counted above.
      const int q_heads = abi::FindArg(spec, "q_heads"), head_dim = abi::FindArg(spec, "head_dim");
      const int splits = abi::AttentionSplits(
          static_cast<int>(num_tokens), static_cast<int>(size(abi::FindArg(spec, "max_splits"))),
          static_cast<int>(size(abi::FindArg(spec, "split_rows"))));
      const double row = size(q_heads) * size(head_dim) * 4;
      const double records =
          splits > 1 ? tokens * size(q_heads) * splits *
                           (size(head_dim) + abi::AttentionRecordFloats(0)) * 4
                     : 0;
      if (step.op == abi::OpId::kAttention) {
        cost.activation_bytes = tokens * row * (splits > 1 ? 1 : 2) + records + tokens * 4;
      } else {
        cost.activation_bytes = splits > 1 ? records + tokens * row : 0;
      }
      break;
    }
    default:
      break;
  }
  return cost;
}

RunProfile::RunProfile(const Plan& plan) : plan_(plan) {
  prefill_.steps.resize(plan.steps.size());
  none_.steps.resize(plan.steps.size());
}

const CallTimings& RunProfile::Decode(int64_t sequences) const {
  const auto found = decode_.find(sequences);
  return found == decode_.end() ? none_ : found->second;
}

void RunProfile::Record(size_t step_index, absl::Span<const int32_t> positions, bool decode_step,
                        double seconds, int64_t launch_tokens) {
  const int64_t num_tokens = static_cast<int64_t>(positions.size());
  CallTimings* call = &prefill_;
  if (decode_step) {
    call = &decode_[num_tokens];
    if (call->steps.empty()) call->steps.resize(plan_.steps.size());
  }
  if (step_index == 0) {
    call->calls += 1;
    call->tokens += num_tokens;
  }
  StepTiming& timing = call->steps[step_index];
  timing.launches += 1;
  timing.seconds += seconds;
  // A logits-tail launch: its rows are the call's last ones.
  const int64_t tokens = launch_tokens < 0 ? num_tokens : std::min(launch_tokens, num_tokens);
  timing.cost += EstimateStepCost(plan_, plan_.steps[step_index],
                                  positions.subspan(static_cast<size_t>(num_tokens - tokens)));
}

std::vector<OpTiming> SumByOp(const Plan& plan, const std::vector<StepTiming>& steps) {
  std::map<std::string, StepTiming> by_op;
  for (size_t i = 0; i < steps.size() && i < plan.steps.size(); ++i) {
    if (steps[i].launches == 0) continue;
    StepTiming& sum = by_op[OpName(plan.steps[i])];
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
  // The op column as wide as the longest op name (patch_position_embedding: 24).
  absl::StrAppendFormat(out, "  %-24s %9s %11s %6s %10s %9s %9s\n", "op", "launches",
                        "ms per call", "share", "MB per call", "GB/s", "TFLOP/s");
  const auto row = [&](absl::string_view name, const StepTiming& t) {
    const double seconds = std::max(t.seconds, 1e-12);
    absl::StrAppendFormat(out, "  %-24s %9d %11.4f %5.1f%% %10.2f %9.1f %9.2f\n", name,
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
  for (const auto& [sequences, decode] : profile.decode_by_sequences()) {
    const std::string what =
        sequences == 1 ? std::string("1 token")
                       : absl::StrCat(sequences, " sequences (a token each)");
    AppendTable(plan, decode.steps, decode.calls,
                absl::StrCat("profile: decode, ", decode.calls, " calls of ", what, " (", method,
                             ")"),
                &out);
  }
  AppendTable(plan, profile.prefill(), profile.prefill_calls(),
              absl::StrCat("profile: prefill, ", profile.prefill_calls(), " calls, ",
                           profile.prefill_tokens(), " tokens (", method, ")"),
              &out);
  if (out.empty()) out = "profile: nothing ran\n";
  return out;
}

}  // namespace rt
}  // namespace spark
