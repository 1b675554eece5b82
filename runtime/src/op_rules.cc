#include "op_rules.h"

#include "absl/strings/str_cat.h"

namespace spark {
namespace rt {

std::string BrokenRule(const abi::OpSpec& spec, const std::function<int64_t(int)>& i32,
                       const std::function<float(int)>& f32) {
  for (const abi::Rule* rule = spec.rules; rule->kind != abi::RuleKind::kEnd; ++rule) {
    const char* a = spec.args[rule->a].name;
    const char* b = rule->b >= 0 ? spec.args[rule->b].name : "";
    switch (rule->kind) {
      case abi::RuleKind::kEnd:
        break;
      case abi::RuleKind::kPositive:
        if (i32(rule->a) <= 0) return absl::StrCat(a, " must be positive, found ", i32(rule->a));
        break;
      case abi::RuleKind::kEven:
        if (i32(rule->a) % 2 != 0) return absl::StrCat(a, " must be even, found ", i32(rule->a));
        break;
      case abi::RuleKind::kAtMostHalf:
        if (2 * i32(rule->a) > i32(rule->b)) {
          return absl::StrCat(a, " must be at most ", b, " / 2, found ", i32(rule->a), " and ",
                              i32(rule->b));
        }
        break;
      case abi::RuleKind::kPositiveParam:
        if (!(f32(rule->a) > 0.0f)) return absl::StrCat(a, " must be positive, found ", f32(rule->a));
        break;
      case abi::RuleKind::kNonZeroParam:
        if (f32(rule->a) == 0.0f) return absl::StrCat(a, " must be non-zero");
        break;
      case abi::RuleKind::kDivides:
        if (i32(rule->a) < 1 || i32(rule->b) % i32(rule->a) != 0) {
          return absl::StrCat(b, " must be a multiple of ", a, " >= 1, found ", i32(rule->b),
                              " and ", i32(rule->a));
        }
        break;
      case abi::RuleKind::kOneTo:
        if (i32(rule->a) < 1 || i32(rule->a) > i32(rule->b)) {
          return absl::StrCat(a, " must be in [1, ", b, " = ", i32(rule->b), "], found ",
                              i32(rule->a));
        }
        break;
      case abi::RuleKind::kMultipleOf16:
        if (i32(rule->a) % 16 != 0) {
          return absl::StrCat(a, " must be a multiple of 16, found ", i32(rule->a));
        }
        break;
      case abi::RuleKind::kMultipleOf4:
        if (i32(rule->a) % 4 != 0) {
          return absl::StrCat(a, " must be a multiple of 4, found ", i32(rule->a));
        }
        break;
      case abi::RuleKind::kOneOrEqual:
        if (i32(rule->a) != 1 && i32(rule->a) != i32(rule->b)) {
          return absl::StrCat(a, " must be 1 or ", b, " = ", i32(rule->b), ", found ",
                              i32(rule->a));
        }
        break;
      case abi::RuleKind::kZeroOrOne:
        if (i32(rule->a) != 0 && i32(rule->a) != 1) {
          return absl::StrCat(a, " must be 0 or 1, found ", i32(rule->a));
        }
        break;
      case abi::RuleKind::kWholeKvBlocks:
        if (i32(rule->a) <= 0 || i32(rule->a) % abi::kKvBlockRows != 0) {
          return absl::StrCat(a, " must be a positive multiple of ", abi::kKvBlockRows,
                              " (the KV block), found ", i32(rule->a));
        }
        break;
      case abi::RuleKind::kMultipleOf64:
        if (i32(rule->a) % 64 != 0) {
          return absl::StrCat(a, " must be a multiple of 64, found ", i32(rule->a));
        }
        break;
      case abi::RuleKind::kNvfp4RowWords:
        if (i32(rule->a) != abi::Nvfp4RowWords(i32(rule->b))) {
          return absl::StrCat(a, " must be ", abi::Nvfp4RowWords(i32(rule->b)),
                              " (the words of a packed NVFP4 row of ", b, " = ", i32(rule->b),
                              "), found ", i32(rule->a));
        }
        break;
      case abi::RuleKind::kLess:
        if (i32(rule->a) >= i32(rule->b)) {
          return absl::StrCat(a, " must be less than ", b, ", found ", i32(rule->a),
                              " >= ", i32(rule->b));
        }
        break;
    }
  }
  return std::string();
}

}  // namespace rt
}  // namespace spark
