#include "step_bounds.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "checked_math.h"
#include "spark/runtime/printable_text.h"
#include "status_macros.h"

namespace spark {
namespace rt {
namespace {

constexpr int64_t kI32Max = INT32_MAX;

// What a pointer argument must hold: `per_token` elements in each of its rows (an activation
// buffer: f32 or i32, both 4 bytes, ValidateBuffer allows nothing else), or `total` bf16
// elements (a weight).
struct Need {
  const char* slot;
  int64_t per_token = 0;  // buffers
  int64_t total = 0;      // weights
};

class StepChecker {
 public:
  StepChecker(const Plan& plan, const Step& step, const abi::KernelSpec& spec,
              const std::string& path, absl::string_view origin)
      : plan_(plan), step_(step), spec_(spec), path_(path), origin_(origin) {}

  // The i32 arguments: runtime values where the ABI names one, literals in range elsewhere.
  absl::Status ReadSizes() {
    for (int i = 0; i < spec_.num_args; ++i) {
      if (spec_.args[i].kind != abi::ArgKind::kI32) continue;
      const absl::string_view name = spec_.args[i].name;
      const StepArg& arg = step_.args[i];
      const ArgRefKind runtime_kind = name == "num_tokens"    ? ArgRefKind::kNumTokens
                                      : name == "num_updates" ? ArgRefKind::kNumSoftTokens
                                      : name == "capacity"    ? ArgRefKind::kKvCapacity
                                                              : ArgRefKind::kI32;
      if (arg.kind != runtime_kind) {
        return Error(i, absl::StrCat(name, " must be ",
                                     runtime_kind == ArgRefKind::kI32
                                         ? "an i32 literal"
                                         : absl::StrCat("the runtime's ",
                                                        ArgRefKindName(runtime_kind)),
                                     ", found ", ArgRefKindName(arg.kind)));
      }
      if (runtime_kind != ArgRefKind::kI32) continue;
      const bool is_token_id = name == "token_a" || name == "token_b" || name == "token_c" ||
                               name == "replacement";
      if (!is_token_id && arg.i32 < 0) {
        return Error(i, absl::StrCat(name, " must be >= 0, found ", arg.i32));
      }
      sizes_[std::string(name)] = arg.i32;
    }
    return absl::OkStatus();
  }

  int64_t Size(const char* name) const {
    const auto it = sizes_.find(name);
    return it == sizes_.end() ? 0 : it->second;
  }

  // a * b * ..., or an error when the product leaves int32 range (kernels index in int64, but
  // every extent the ABI passes is an int32).
  absl::StatusOr<int64_t> Product(std::initializer_list<int64_t> factors) const {
    uint64_t product = 1;
    for (int64_t f : factors) {
      const absl::optional<uint64_t> next = CheckedMul(product, static_cast<uint64_t>(f));
      if (!next || *next > static_cast<uint64_t>(INT64_MAX)) {
        return absl::InvalidArgumentError(absl::StrCat(
            origin_, ": plan ", path_, ": the sizes of ", step_.op, " overflow 64 bits"));
      }
      product = *next;
    }
    return static_cast<int64_t>(product);
  }

  absl::Status Require(const Need& need) {
    const int i = SlotIndex(need.slot);
    const StepArg& arg = step_.args[i];
    switch (arg.kind) {
      case ArgRefKind::kNull:
        if (spec_.args[i].nullable) return absl::OkStatus();
        return Error(i, absl::StrCat(need.slot, " of ", step_.op, " may not be null"));
      case ArgRefKind::kBuffer: {
        if (need.per_token == 0 && need.total > 0) {
          return Error(i, absl::StrCat(need.slot, " of ", step_.op, " must be a weight"));
        }
        const BufferInfo& buffer = plan_.buffers[arg.index];
        const DType dtype = BufferDType(need.slot);
        if (buffer.dtype != dtype) {
          return Error(
              i, absl::StrCat(need.slot, " of ", step_.op, " is ", DTypeName(dtype),
                              dtype == DType::kI32 ? " (token ids or indices)" : " (activations)",
                              ", buffer ", arg.index, " (", buffer.name, ") is ",
                              DTypeName(buffer.dtype)));
        }
        const uint64_t have = buffer.row_bytes() / DTypeSize(buffer.dtype);
        if (have < static_cast<uint64_t>(need.per_token)) {
          return Error(i, absl::StrCat(step_.op, " uses ", need.per_token, " elements per token of ",
                                       need.slot, ", buffer ", arg.index, " (", buffer.name,
                                       ") has ", have));
        }
        return absl::OkStatus();
      }
      case ArgRefKind::kWeight: {
        if (need.total == 0 && need.per_token > 0) {
          return Error(i, absl::StrCat(need.slot, " of ", step_.op,
                                       " must be an activation buffer"));
        }
        const WeightInfo& weight = plan_.weights[arg.index];  // bf16 (ValidateWeight)
        const uint64_t have = weight.num_bytes() / 2;
        if (have < static_cast<uint64_t>(need.total)) {
          return Error(i, absl::StrCat(step_.op, " reads ", need.total, " elements of ",
                                       need.slot, ", weight ", arg.index, " (", weight.name,
                                       ") has ", have));
        }
        return absl::OkStatus();
      }
      default:
        return Error(i, absl::StrCat(need.slot, " of ", step_.op, " must be ",
                                     need.total > 0 ? "a weight" : "an activation buffer",
                                     ", found ", ArgRefKindName(arg.kind)));
    }
  }

  // The attention workspace `slot` (nullable when `optional`): an f32 buffer of at least
  // split_rows x q_heads records (kernel_abi.h) over its max_tokens rows, when the step may split
  // (max_splits > 1); with max_splits <= 1 the kernels never touch it.
  absl::Status RequireAttentionWorkspace(const char* slot, bool optional) {
    const int i = SlotIndex(slot);
    const StepArg& arg = step_.args[i];
    if (Size("max_splits") <= 1) return absl::OkStatus();
    if (arg.kind == ArgRefKind::kNull && optional) return absl::OkStatus();
    if (arg.kind != ArgRefKind::kBuffer) {
      return Error(i, absl::StrCat(slot, " of ", step_.op, " must be an activation buffer, found ",
                                   ArgRefKindName(arg.kind)));
    }
    const BufferInfo& buffer = plan_.buffers[arg.index];
    if (buffer.dtype != DType::kF32) {
      return Error(i, absl::StrCat(slot, " of ", step_.op, " must be an f32 buffer"));
    }
    SPARK_ASSIGN_OR_RETURN(
        const int64_t need,
        Product({Size("split_rows"), Size("q_heads"),
                 Size("head_dim") + abi::AttentionRecordFloats(0)}));
    const absl::optional<uint64_t> have =
        CheckedMul(static_cast<uint64_t>(plan_.max_tokens), buffer.row_bytes() / 4);
    if (!have || *have < static_cast<uint64_t>(need)) {
      return Error(i, absl::StrCat(step_.op, " may write ", need, " floats of ", slot, ", buffer ",
                                   arg.index, " (", buffer.name, ") holds ",
                                   have ? *have : 0));
    }
    return absl::OkStatus();
  }

  // The positions argument is the plan's positions input (the runtime range-checks its values).
  absl::Status RequirePositions() {
    const int i = SlotIndex("positions");
    const StepArg& arg = step_.args[i];
    if (arg.kind == ArgRefKind::kBuffer && arg.index == plan_.input_positions) {
      return absl::OkStatus();
    }
    return Error(i, absl::StrCat("positions of ", step_.op,
                                 " must be the plan's positions input (buffer ",
                                 plan_.input_positions, ")"));
  }

  // last_visible is null or the plan's last_visible input (the runtime checks its values: each
  // in [position, last position of the step], CheckStepInputs).
  absl::Status RequireLastVisible() {
    const int i = SlotIndex("last_visible");
    const StepArg& arg = step_.args[i];
    if (arg.kind == ArgRefKind::kNull) return absl::OkStatus();
    if (arg.kind == ArgRefKind::kBuffer && plan_.input_last_visible >= 0 &&
        arg.index == plan_.input_last_visible) {
      return absl::OkStatus();
    }
    return Error(i, absl::StrCat("last_visible of ", step_.op,
                                 " must be null or the plan's last_visible input",
                                 plan_.input_last_visible >= 0
                                     ? absl::StrCat(" (buffer ", plan_.input_last_visible, ")")
                                     : std::string(" (the plan has none)")));
  }

  // k_cache, v_cache and capacity name the same cache, whose rows are kv_heads x head_dim and
  // whose element type is cache_dtype.
  absl::Status RequireCache(int64_t kv_heads, int64_t head_dim) {
    const int k = SlotIndex("k_cache"), v = SlotIndex("v_cache"), c = SlotIndex("capacity");
    if (step_.args[k].kind != ArgRefKind::kKCache || step_.args[v].kind != ArgRefKind::kVCache) {
      return Error(k, absl::StrCat(step_.op, " takes a k_cache and a v_cache"));
    }
    const int64_t cache = step_.args[k].index;
    if (step_.args[v].index != cache || step_.args[c].index != cache) {
      return Error(v, absl::StrCat("k_cache, v_cache and capacity of ", step_.op,
                                   " must name the same kv cache"));
    }
    const KvCacheInfo& info = plan_.kv_caches[cache];
    if (info.kv_heads != kv_heads || info.head_dim != head_dim) {
      return Error(k, absl::StrCat(step_.op, " uses kv rows of ", kv_heads, " x ", head_dim,
                                   ", kv cache ", cache, " (", info.name, ") has ", info.kv_heads,
                                   " x ", info.head_dim));
    }
    const int d = SlotIndex("cache_dtype");
    if (Size("cache_dtype") != info.abi_dtype()) {
      return Error(d, absl::StrCat("cache_dtype ", Size("cache_dtype"), " of ", step_.op,
                                   " does not match kv cache ", cache, " (", info.name, "), ",
                                   DTypeName(info.dtype), " (cache_dtype ", info.abi_dtype(),
                                   ")"));
    }
    return absl::OkStatus();
  }

  // The attention window literal is its cache's: W for a sliding cache of window W (the cache
  // holds only the last window - 1 + max_tokens positions), 0 (causal) for a full one.
  absl::Status RequireCacheWindow() {
    const KvCacheInfo& info = plan_.kv_caches[step_.args[SlotIndex("k_cache")].index];
    const int64_t expected = info.kind == KvKind::kSliding ? info.window : 0;
    if (Size("window") == expected) return absl::OkStatus();
    return Error(
        SlotIndex("window"),
        absl::StrCat("window ", Size("window"), " of ", step_.op, " does not match kv cache ",
                     step_.args[SlotIndex("k_cache")].index, " (", info.name, "), ",
                     info.kind == KvKind::kSliding
                         ? absl::StrCat("a sliding cache of window ", info.window)
                         : std::string("a full cache (window 0)")));
  }

  // The messages name buffers, weights and caches from the plan: made printable (PrintableText).
  absl::Status Error(int arg, absl::string_view message) const {
    return absl::InvalidArgumentError(
        PrintableText(absl::StrCat(origin_, ": plan ", path_, ".args[", arg, "]: ", message)));
  }
  absl::Status StepError(absl::string_view message) const {
    return absl::InvalidArgumentError(
        PrintableText(absl::StrCat(origin_, ": plan ", path_, ": ", message)));
  }

 private:
  // Every name the rules below use is in the op's ABI (kernel_abi.h).
  int SlotIndex(const char* name) const { return abi::FindArg(spec_, name); }

  // What the buffer of pointer argument `slot` holds: i32 for token ids (ids, the output of
  // mask_tokens) and indices (expert indices of the MoE ops, soft-token rows of scatter_rows;
  // positions and last_visible are the plan's i32 inputs: RequirePositions, RequireLastVisible),
  // f32 for everything else.
  DType BufferDType(absl::string_view slot) const {
    const bool i32 =
        slot == "ids" || slot == "indices" || (step_.op == "mask_tokens" && slot == "y");
    return i32 ? DType::kI32 : DType::kF32;
  }

  const Plan& plan_;
  const Step& step_;
  const abi::KernelSpec& spec_;
  const std::string& path_;
  absl::string_view origin_;
  std::map<std::string, int64_t> sizes_;
};

absl::Status CheckOp(StepChecker& c, absl::string_view op) {
  const int64_t cols = c.Size("cols");
  if (op == "add" || op == "mul" || op == "gelu_mul") {
    SPARK_RETURN_IF_ERROR(c.Require({"a", cols}));
    SPARK_RETURN_IF_ERROR(c.Require({"b", cols}));
    return c.Require({"y", cols});
  }
  if (op == "scale" || op == "gelu" || op == "softcap" || op == "copy") {
    SPARK_RETURN_IF_ERROR(c.Require({"x", cols}));
    return c.Require({"y", cols});
  }
  if (op == "scalar_mul") {
    SPARK_RETURN_IF_ERROR(c.Require({"x", cols}));
    SPARK_RETURN_IF_ERROR(c.Require({"s", 0, 1}));
    return c.Require({"y", cols});
  }
  if (op == "embedding") {
    SPARK_ASSIGN_OR_RETURN(const int64_t table, c.Product({c.Size("vocab"), c.Size("dim")}));
    SPARK_RETURN_IF_ERROR(c.Require({"ids", 1}));
    SPARK_RETURN_IF_ERROR(c.Require({"table", 0, table}));
    return c.Require({"y", c.Size("dim")});
  }
  if (op == "rms_norm") {
    SPARK_ASSIGN_OR_RETURN(const int64_t row, c.Product({c.Size("groups"), cols}));
    SPARK_RETURN_IF_ERROR(c.Require({"x", row}));
    SPARK_RETURN_IF_ERROR(c.Require({"weight", 0, cols}));
    return c.Require({"y", row});
  }
  if (op == "residual_rms_norm") {
    SPARK_RETURN_IF_ERROR(c.Require({"x", cols}));
    SPARK_RETURN_IF_ERROR(c.Require({"weight", 0, cols}));
    SPARK_RETURN_IF_ERROR(c.Require({"residual", cols}));
    return c.Require({"y", cols});
  }
  if (op == "rms_norm_rope") {
    const int64_t head_dim = c.Size("head_dim");
    SPARK_ASSIGN_OR_RETURN(const int64_t row, c.Product({c.Size("heads"), head_dim}));
    if (2 * c.Size("rotated_pairs") > head_dim) {
      return c.StepError("rms_norm_rope rotates more pairs than head_dim / 2");
    }
    SPARK_RETURN_IF_ERROR(c.Require({"x", row}));
    SPARK_RETURN_IF_ERROR(c.Require({"weight", 0, head_dim}));
    SPARK_RETURN_IF_ERROR(c.RequirePositions());
    return c.Require({"y", row});
  }
  if (op == "linear") {
    const int64_t in = c.Size("in_features"), out = c.Size("out_features");
    SPARK_ASSIGN_OR_RETURN(const int64_t w, c.Product({out, in}));
    SPARK_RETURN_IF_ERROR(c.Require({"x", in}));
    SPARK_RETURN_IF_ERROR(c.Require({"w", 0, w}));
    return c.Require({"y", out});
  }
  if (op == "rope") {
    SPARK_ASSIGN_OR_RETURN(const int64_t row, c.Product({c.Size("heads"), c.Size("head_dim")}));
    if (2 * c.Size("rotated_pairs") > c.Size("head_dim")) {
      return c.StepError("rope rotates more pairs than head_dim / 2");
    }
    SPARK_RETURN_IF_ERROR(c.Require({"x", row}));
    SPARK_RETURN_IF_ERROR(c.RequirePositions());
    return c.Require({"y", row});
  }
  if (op == "kv_write") {
    const int64_t kv_heads = c.Size("kv_heads"), head_dim = c.Size("head_dim");
    SPARK_ASSIGN_OR_RETURN(const int64_t row, c.Product({kv_heads, head_dim}));
    SPARK_RETURN_IF_ERROR(c.Require({"k", row}));
    SPARK_RETURN_IF_ERROR(c.Require({"v", row}));
    SPARK_RETURN_IF_ERROR(c.RequirePositions());
    return c.RequireCache(kv_heads, head_dim);
  }
  if (op == "attention") {
    const int64_t q_heads = c.Size("q_heads"), kv_heads = c.Size("kv_heads");
    const int64_t head_dim = c.Size("head_dim");
    if (kv_heads == 0 || q_heads % kv_heads != 0) {
      return c.StepError("attention needs q_heads to be a multiple of kv_heads >= 1");
    }
    SPARK_ASSIGN_OR_RETURN(const int64_t row, c.Product({q_heads, head_dim}));
    SPARK_RETURN_IF_ERROR(c.Require({"q", row}));
    SPARK_RETURN_IF_ERROR(c.RequirePositions());
    SPARK_RETURN_IF_ERROR(c.Require({"y", row}));
    SPARK_RETURN_IF_ERROR(c.RequireAttentionWorkspace("partials", /*optional=*/true));
    SPARK_RETURN_IF_ERROR(c.RequireLastVisible());
    SPARK_RETURN_IF_ERROR(c.RequireCache(kv_heads, head_dim));
    return c.RequireCacheWindow();
  }
  if (op == "attention_merge") {
    SPARK_ASSIGN_OR_RETURN(const int64_t row, c.Product({c.Size("q_heads"), c.Size("head_dim")}));
    SPARK_RETURN_IF_ERROR(c.Require({"y", row}));
    return c.RequireAttentionWorkspace("partials", /*optional=*/false);
  }
  if (op == "moe_topk") {
    const int64_t experts = c.Size("num_experts"), top_k = c.Size("top_k");
    if (top_k < 1 || top_k > experts) return c.StepError("moe_topk needs 1 <= top_k <= num_experts");
    SPARK_RETURN_IF_ERROR(c.Require({"logits", experts}));
    SPARK_RETURN_IF_ERROR(c.Require({"per_expert_scale", 0, experts}));
    SPARK_RETURN_IF_ERROR(c.Require({"weights", top_k}));
    return c.Require({"indices", top_k});
  }
  if (op == "moe_gate_up" || op == "moe_down") {
    const int64_t hidden = c.Size("hidden"), inter = c.Size("intermediate");
    const int64_t experts = c.Size("num_experts"), top_k = c.Size("top_k");
    if (c.Size("tokens_from") > c.Size("tokens_to")) {
      return c.StepError(absl::StrCat(op, " needs tokens_from <= tokens_to, found ",
                                      c.Size("tokens_from"), " > ", c.Size("tokens_to"),
                                      " (the step would never run)"));
    }
    SPARK_ASSIGN_OR_RETURN(const int64_t act, c.Product({top_k, inter}));
    SPARK_ASSIGN_OR_RETURN(const int64_t expert_weights,
                           c.Product({experts, op == "moe_gate_up" ? 2 : 1, inter, hidden}));
    SPARK_RETURN_IF_ERROR(c.Require({"act", act}));
    SPARK_RETURN_IF_ERROR(c.Require({"indices", top_k}));
    if (op == "moe_gate_up") {
      SPARK_RETURN_IF_ERROR(c.Require({"x", hidden}));
      return c.Require({"gate_up", 0, expert_weights});
    }
    SPARK_RETURN_IF_ERROR(c.Require({"down", 0, expert_weights}));
    SPARK_RETURN_IF_ERROR(c.Require({"weights", top_k}));
    SPARK_ASSIGN_OR_RETURN(const int64_t slot_rows, c.Product({top_k, hidden}));
    SPARK_RETURN_IF_ERROR(c.Require({"partials", slot_rows}));  // may be null: never grouped
    return c.Require({"y", hidden});
  }
  if (op == "moe_combine") {
    const int64_t hidden = c.Size("hidden");
    SPARK_ASSIGN_OR_RETURN(const int64_t slot_rows, c.Product({c.Size("top_k"), hidden}));
    SPARK_RETURN_IF_ERROR(c.Require({"partials", slot_rows}));
    return c.Require({"y", hidden});
  }
  if (op == "scatter_rows") {
    SPARK_RETURN_IF_ERROR(c.Require({"dest", cols}));
    SPARK_RETURN_IF_ERROR(c.Require({"indices", 1}));
    return c.Require({"updates", cols});
  }
  if (op == "mask_tokens") {
    SPARK_RETURN_IF_ERROR(c.Require({"ids", 1}));
    return c.Require({"y", 1});
  }
  if (op == "select_group") {
    if (c.Size("index") >= c.Size("groups")) return c.StepError("select_group index >= groups");
    SPARK_ASSIGN_OR_RETURN(const int64_t row, c.Product({c.Size("groups"), cols}));
    SPARK_RETURN_IF_ERROR(c.Require({"x", row}));
    return c.Require({"y", cols});
  }
  return c.StepError(absl::StrCat("no bounds rule for op ", op, " (runtime bug)"));
}

}  // namespace

absl::Status CheckStepBounds(const Plan& plan, const Step& step, const abi::KernelSpec& spec,
                             const std::string& path, absl::string_view origin) {
  StepChecker checker(plan, step, spec, path, origin);
  SPARK_RETURN_IF_ERROR(checker.ReadSizes());
  return CheckOp(checker, step.op);
}

}  // namespace rt
}  // namespace spark
