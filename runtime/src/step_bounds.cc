#include "step_bounds.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "checked_math.h"
#include "op_rules.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {
namespace {

using abi::Role;

// The checks below are generic: they read each argument's role, element type and extent from
// the op registry (kernel_ops.def) and know no op by name.
class StepChecker {
 public:
  StepChecker(const Plan& plan, const Step& step, const abi::OpSpec& spec,
              const std::string& path, absl::string_view origin)
      : plan_(plan), step_(step), spec_(spec), path_(path), origin_(origin),
        sizes_(spec.num_args, 0) {}

  // The i32 arguments: the runtime's values where the role names one, literals in range
  // elsewhere (sizes >= 0; token ids may be -1).
  absl::Status ReadSizes() {
    for (int i = 0; i < spec_.num_args; ++i) {
      const abi::ArgSpec& slot = spec_.args[i];
      if (slot.kind != abi::ArgKind::kI32) continue;
      const StepArg& arg = step_.args[i];
      const ArgRefKind runtime_kind = slot.role == Role::kNumTokens     ? ArgRefKind::kNumTokens
                                      : slot.role == Role::kNumSoftTokens ? ArgRefKind::kNumSoftTokens
                                      : slot.role == Role::kKvCapacity  ? ArgRefKind::kKvCapacity
                                                                        : ArgRefKind::kI32;
      if (arg.kind != runtime_kind) {
        return Error(i, absl::StrCat(slot.name, " must be ",
                                     runtime_kind == ArgRefKind::kI32
                                         ? "an i32 literal"
                                         : absl::StrCat("the runtime's ",
                                                        ArgRefKindName(runtime_kind)),
                                     ", found ", ArgRefKindName(arg.kind)));
      }
      if (runtime_kind != ArgRefKind::kI32) continue;
      if (slot.role != Role::kTokenId && arg.i32 < 0) {
        return Error(i, absl::StrCat(slot.name, " must be >= 0, found ", arg.i32));
      }
      sizes_[i] = arg.i32;
    }
    return absl::OkStatus();
  }

  // The registry's rules over the literal sizes and parameters (runtime values, which the plan
  // does not know, are checked by the executors).
  absl::Status CheckRules() {
    const std::string broken = BrokenRule(
        spec_,
        [&](int i) -> int64_t {
          // (A capacity is whole KV blocks, the executors' KvCapacity.)
          const abi::Role role = spec_.args[i].role;
          return role == Role::kKvCapacity ? abi::kKvBlockRows
                 : abi::IsRuntimeValue(role) ? 1
                                             : sizes_[i];
        },
        [&](int i) { return step_.args[i].f32; });
    if (broken.empty()) return absl::OkStatus();
    return StepError(absl::StrCat(spec_.op, ": ", broken));
  }

  absl::Status CheckPointer(int i) {
    const abi::ArgSpec& slot = spec_.args[i];
    const abi::Extent& extent = slot.extent;
    switch (slot.role) {
      case Role::kPositions:
        return RequirePlanInput(i, plan_.input_positions, "positions");
      case Role::kLastVisible:
        return RequirePlanInput(i, plan_.input_last_visible, "last_visible");
      case Role::kSampling:
        return RequirePlanInput(i, plan_.input_sampling, "sampling");
      case Role::kSequences:
        return RequirePlanInput(i, plan_.input_sequences, "sequences");
      case Role::kKvBlockTable:
        return absl::OkStatus();  // with the K part (RequireCache)
      case Role::kKCacheRead:
      case Role::kKCacheWrite:
        return RequireCache(i);
      case Role::kVCacheRead:
      case Role::kVCacheWrite:
        return absl::OkStatus();  // with its K part (RequireCache)
      default:
        break;
    }
    if (extent.kind == abi::Extent::kRecords) return RequireAttentionWorkspace(i);
    SPARK_ASSIGN_OR_RETURN(const int64_t need, Elements(extent));
    return abi::IsWeightRole(slot.role) ? RequireWeight(i, need) : RequireBuffer(i, need);
  }

  absl::Status Error(int arg, absl::string_view message) const {
    return absl::InvalidArgumentError(
        PrintableText(absl::StrCat(origin_, ": plan ", path_, ".args[", arg, "]: ", message)));
  }
  absl::Status StepError(absl::string_view message) const {
    return absl::InvalidArgumentError(
        PrintableText(absl::StrCat(origin_, ": plan ", path_, ": ", message)));
  }

 private:
  // multiplier x the extent's factors / divisor (rounded up), or an error when the product
  // leaves 64 bits.
  absl::StatusOr<int64_t> Elements(const abi::Extent& extent) const {
    uint64_t product = static_cast<uint64_t>(extent.multiplier);
    for (int f = 0; f < extent.num_factors; ++f) {
      const absl::optional<uint64_t> next =
          CheckedMul(product, static_cast<uint64_t>(sizes_[extent.factors[f]]));
      if (!next || *next > static_cast<uint64_t>(INT64_MAX)) {
        return StepError(absl::StrCat("the sizes of ", spec_.op, " overflow 64 bits"));
      }
      product = *next;
    }
    const uint64_t divisor = static_cast<uint64_t>(extent.divisor);
    return static_cast<int64_t>(divisor > 1 ? product / divisor + (product % divisor != 0) : product);
  }

  // Null where the registry allows it.
  bool AllowedNull(int i) const {
    return step_.args[i].kind == ArgRefKind::kNull && spec_.args[i].nullable;
  }

  // The dtype a buffer of the registry's element type has in this plan: kAct is the plan's
  // activation precision.
  DType BufferDType(abi::ElementType element) const {
    return element == abi::ElementType::kI32   ? DType::kI32
           : element == abi::ElementType::kAct ? plan_.activation_precision
                                               : DType::kF32;
  }

  // An activation buffer of at least `per_token` elements of the slot's type in each row.
  absl::Status RequireBuffer(int i, int64_t per_token) {
    const abi::ArgSpec& slot = spec_.args[i];
    const StepArg& arg = step_.args[i];
    if (AllowedNull(i)) return absl::OkStatus();
    if (arg.kind == ArgRefKind::kNull) {
      return Error(i, absl::StrCat(slot.name, " of ", spec_.op, " may not be null"));
    }
    if (arg.kind != ArgRefKind::kBuffer) {
      return Error(i, absl::StrCat(slot.name, " of ", spec_.op,
                                   " must be an activation buffer, found ",
                                   ArgRefKindName(arg.kind)));
    }
    const BufferInfo& buffer = plan_.buffers[arg.index];
    const DType dtype = BufferDType(slot.element);
    if (buffer.dtype != dtype) {
      return Error(i, absl::StrCat(slot.name, " of ", spec_.op, " is ", DTypeName(dtype),
                                   dtype == DType::kI32                      ? " (token ids or indices)"
                                   : slot.element == abi::ElementType::kAct ? " (activations)"
                                                                            : " (a workspace)",
                                   ", buffer ", arg.index, " (", buffer.name, ") is ",
                                   DTypeName(buffer.dtype)));
    }
    const uint64_t have = SaturatingShapeBytes(buffer.row_shape, 1);  // elements per row
    if (have < static_cast<uint64_t>(per_token)) {
      return Error(i, absl::StrCat(spec_.op, " uses ", per_token, " elements per token of ",
                                   slot.name, ", buffer ", arg.index, " (", buffer.name,
                                   ") has ", have));
    }
    return absl::OkStatus();
  }

  // The dtype a weight of the registry's element type has.
  static DType WeightDType(abi::ElementType element) {
    switch (element) {
      case abi::ElementType::kF32:
        return DType::kF32;
      case abi::ElementType::kF8E4M3:
        return DType::kF8E4M3FN;
      case abi::ElementType::kF4E2M1:
        return DType::kF4E2M1FN;
      default:
        return DType::kBF16;
    }
  }

  // A weight of the slot's element type and at least `total` elements.
  absl::Status RequireWeight(int i, int64_t total) {
    const abi::ArgSpec& slot = spec_.args[i];
    const StepArg& arg = step_.args[i];
    if (AllowedNull(i)) return absl::OkStatus();
    if (arg.kind == ArgRefKind::kNull) {
      return Error(i, absl::StrCat(slot.name, " of ", spec_.op, " may not be null"));
    }
    if (arg.kind != ArgRefKind::kWeight) {
      return Error(i, absl::StrCat(slot.name, " of ", spec_.op, " must be a weight, found ",
                                   ArgRefKindName(arg.kind)));
    }
    const WeightInfo& weight = plan_.weights[arg.index];
    const DType dtype = WeightDType(slot.element);
    if (weight.dtype != dtype) {
      return Error(i, absl::StrCat(slot.name, " of ", spec_.op, " is ", DTypeName(dtype),
                                   ", weight ", arg.index, " (", weight.name, ") is ",
                                   DTypeName(weight.dtype)));
    }
    const uint64_t have = SaturatingShapeBytes(weight.shape, 1);  // elements
    if (have < static_cast<uint64_t>(total)) {
      return Error(i, absl::StrCat(spec_.op, " reads ", total, " elements of ", slot.name,
                                   ", weight ", arg.index, " (", weight.name, ") has ", have));
    }
    return absl::OkStatus();
  }

  // The attention workspace (Extent kRecords: {split_rows, q_heads, head_dim, max_splits}): an
  // f32 buffer of at least split_rows x q_heads records (kernel_abi.h) over its max_tokens rows,
  // when the step may split (max_splits > 1); with max_splits <= 1 the kernels never touch it.
  absl::Status RequireAttentionWorkspace(int i) {
    const abi::ArgSpec& slot = spec_.args[i];
    const abi::Extent& extent = slot.extent;
    const StepArg& arg = step_.args[i];
    if (sizes_[extent.factors[3]] <= 1) return absl::OkStatus();
    if (AllowedNull(i)) return absl::OkStatus();
    if (arg.kind != ArgRefKind::kBuffer) {
      return Error(i, absl::StrCat(slot.name, " of ", spec_.op,
                                   " must be an activation buffer, found ",
                                   ArgRefKindName(arg.kind)));
    }
    const BufferInfo& buffer = plan_.buffers[arg.index];
    if (buffer.dtype != DType::kF32) {
      return Error(i, absl::StrCat(slot.name, " of ", spec_.op, " must be an f32 buffer"));
    }
    abi::Extent records(abi::Extent::kTotal, 1, {extent.factors[0], extent.factors[1]});
    SPARK_ASSIGN_OR_RETURN(const int64_t count, Elements(records));
    const absl::optional<uint64_t> need = CheckedMul(
        static_cast<uint64_t>(count),
        static_cast<uint64_t>(sizes_[extent.factors[2]] + abi::AttentionRecordFloats(0)));
    const absl::optional<uint64_t> have =
        CheckedMul(static_cast<uint64_t>(plan_.max_tokens), buffer.row_bytes() / 4);
    if (!need || *need > static_cast<uint64_t>(INT64_MAX)) {
      return StepError(absl::StrCat("the sizes of ", spec_.op, " overflow 64 bits"));
    }
    if (!have || *have < *need) {
      return Error(i, absl::StrCat(spec_.op, " may write ", *need, " floats of ", slot.name,
                                   ", buffer ", arg.index, " (", buffer.name, ") holds ",
                                   have ? *have : 0));
    }
    return absl::OkStatus();
  }

  // One of the plan's inputs (buffer `input`, -1 when the plan has none), or null where allowed.
  absl::Status RequirePlanInput(int i, int64_t input, const char* input_name) {
    const abi::ArgSpec& slot = spec_.args[i];
    const StepArg& arg = step_.args[i];
    if (AllowedNull(i)) return absl::OkStatus();
    if (arg.kind == ArgRefKind::kBuffer && input >= 0 && arg.index == input) {
      return absl::OkStatus();
    }
    return Error(i, absl::StrCat(slot.name, " of ", spec_.op, " must be ",
                                 slot.nullable ? "null or " : "", "the plan's ", input_name,
                                 " input",
                                 input >= 0 ? absl::StrCat(" (buffer ", input, ")")
                                            : std::string(" (the plan has none)")));
  }

  // The K part at `k` (Extent kCacheRows {kv_heads, head_dim}), the V part and the capacity name
  // the same cache, whose rows are kv_heads x head_dim, whose element type is the op's
  // cache_dtype, and whose window is the op's window literal when it has one (W for a sliding
  // cache of window W, 0 for a full one).
  absl::Status RequireCache(int k) {
    const int v = abi::FindRole(spec_, spec_.args[k].role == Role::kKCacheRead ? Role::kVCacheRead
                                                                               : Role::kVCacheWrite);
    const int c = abi::FindRole(spec_, Role::kKvCapacity);
    const int t = abi::FindRole(spec_, Role::kKvBlockTable);
    if (step_.args[k].kind != ArgRefKind::kKCache || v < 0 ||
        step_.args[v].kind != ArgRefKind::kVCache) {
      return Error(k, absl::StrCat(spec_.op, " takes a k_cache and a v_cache"));
    }
    if (t >= 0 && step_.args[t].kind != ArgRefKind::kKvBlockTable) {
      return Error(t, absl::StrCat(spec_.op, " takes the block table of its kv cache, found ",
                                   ArgRefKindName(step_.args[t].kind)));
    }
    const int64_t cache = step_.args[k].index;
    if (step_.args[v].index != cache || (c >= 0 && step_.args[c].index != cache) ||
        (t >= 0 && step_.args[t].index != cache)) {
      return Error(v, absl::StrCat("k_cache, v_cache, capacity and block_table of ", spec_.op,
                                   " must name the same kv cache"));
    }
    const KvCacheInfo& info = plan_.kv_caches[cache];
    const abi::Extent& rows = spec_.args[k].extent;
    const int64_t kv_heads = sizes_[rows.factors[0]], head_dim = sizes_[rows.factors[1]];
    if (info.kv_heads != kv_heads || info.head_dim != head_dim) {
      return Error(k, absl::StrCat(spec_.op, " uses kv rows of ", kv_heads, " x ", head_dim,
                                   ", kv cache ", cache, " (", info.name, ") has ", info.kv_heads,
                                   " x ", info.head_dim));
    }
    const int d = abi::FindRole(spec_, Role::kCacheDType);
    if (d >= 0 && sizes_[d] != info.abi_dtype()) {
      return Error(d, absl::StrCat("cache_dtype ", sizes_[d], " of ", spec_.op,
                                   " does not match kv cache ", cache, " (", info.name, "), ",
                                   DTypeName(info.dtype), " (cache_dtype ", info.abi_dtype(),
                                   ")"));
    }
    const int w = abi::FindRole(spec_, Role::kWindow);
    const int64_t expected = info.kind == KvKind::kSliding ? info.window : 0;
    if (w >= 0 && sizes_[w] != expected) {
      return Error(w, absl::StrCat("window ", sizes_[w], " of ", spec_.op,
                                   " does not match kv cache ", cache, " (", info.name, "), ",
                                   info.kind == KvKind::kSliding
                                       ? absl::StrCat("a sliding cache of window ", info.window)
                                       : std::string("a full cache (window 0)")));
    }
    return absl::OkStatus();
  }

  const Plan& plan_;
  const Step& step_;
  const abi::OpSpec& spec_;
  const std::string& path_;
  absl::string_view origin_;
  std::vector<int64_t> sizes_;  // the i32 literals by argument index (0 elsewhere)
};

}  // namespace

absl::Status CheckStepBounds(const Plan& plan, const Step& step, const abi::OpSpec& spec,
                             const std::string& path, absl::string_view origin) {
  StepChecker checker(plan, step, spec, path, origin);
  SPARK_RETURN_IF_ERROR(checker.ReadSizes());
  SPARK_RETURN_IF_ERROR(checker.CheckRules());
  for (int i = 0; i < spec.num_args; ++i) {
    if (spec.args[i].kind == abi::ArgKind::kPtr) SPARK_RETURN_IF_ERROR(checker.CheckPointer(i));
  }
  return absl::OkStatus();
}

}  // namespace rt
}  // namespace spark
