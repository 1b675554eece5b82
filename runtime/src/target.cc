#include "spark/runtime/target.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace spark {
namespace rt {
namespace {

constexpr absl::string_view kTargetGrammar =
    "expected sm_<major><minor>[a|f] (e.g. sm_121a, sm_120f, sm_90) or compute_<major><minor> "
    "(e.g. compute_90)";

absl::Status BadTarget(absl::string_view name) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid target \"", name, "\": ", kTargetGrammar));
}

// "121" -> 12.1, "90" -> 9.0. False for anything but 2-3 digits without a leading zero.
bool ParseVersionDigits(absl::string_view digits, int* major, int* minor) {
  if (digits.size() < 2 || digits.size() > 3 || digits[0] == '0') return false;
  for (const char c : digits) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  *major = 0;
  for (const char c : digits.substr(0, digits.size() - 1)) *major = *major * 10 + (c - '0');
  *minor = digits.back() - '0';
  return true;
}

}  // namespace

std::string Target::ToString() const {
  switch (kind) {
    case TargetKind::kArch: return absl::StrCat("sm_", major, minor, "a");
    case TargetKind::kFamily: return absl::StrCat("sm_", major, minor, "f");
    case TargetKind::kGeneric: return absl::StrCat("sm_", major, minor);
    case TargetKind::kPtx: return absl::StrCat("compute_", major, minor);
  }
  return "";
}

absl::StatusOr<Target> ParseTarget(absl::string_view name) {
  Target target;
  absl::string_view digits = name;
  if (absl::ConsumePrefix(&digits, "compute_")) {
    target.kind = TargetKind::kPtx;
  } else if (absl::ConsumePrefix(&digits, "sm_")) {
    if (absl::ConsumeSuffix(&digits, "a")) {
      target.kind = TargetKind::kArch;
    } else if (absl::ConsumeSuffix(&digits, "f")) {
      target.kind = TargetKind::kFamily;
    } else {
      target.kind = TargetKind::kGeneric;
    }
  } else {
    return BadTarget(name);
  }
  if (!ParseVersionDigits(digits, &target.major, &target.minor)) return BadTarget(name);
  return target;
}

absl::StatusOr<std::pair<int, int>> ParseComputeCapability(absl::string_view text) {
  const size_t dot = text.find('.');
  int major = 0, minor = 0;
  if (dot == absl::string_view::npos || dot == 0 || dot > 2 || text.size() != dot + 2 ||
      text[0] == '0' ||
      !ParseVersionDigits(absl::StrCat(text.substr(0, dot), text.substr(dot + 1)), &major,
                          &minor)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid compute capability \"", text, "\": expected <major>.<minor>, e.g. 9.0 or 12.1"));
  }
  return std::make_pair(major, minor);
}

Target NativeTargetFor(int major, int minor) {
  Target target;
  target.kind = major >= 9 ? TargetKind::kArch : TargetKind::kGeneric;
  target.major = major;
  target.minor = minor;
  return target;
}

}  // namespace rt
}  // namespace spark
