// The memory a plan step's kernel touches, checked against what the plan gives it (part of
// ValidatePlan; internal to the runtime). docs/plan-format.md "Bounds" states the rules.
#ifndef SPARK_RUNTIME_SRC_STEP_BOUNDS_H_
#define SPARK_RUNTIME_SRC_STEP_BOUNDS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "spark/runtime/kernel_abi.h"
#include "spark/runtime/plan.h"

namespace spark {
namespace rt {

// For a step whose arguments already match its kernel ABI slots (kinds and ids): every pointer
// argument is large enough for the rows, weights or cache rows the kernel reads or writes given
// its size arguments; size arguments are literals except num_tokens / num_updates / capacity,
// which must be the runtime's values; positions are the plan's positions input. kInvalidArgument
// "<origin>: plan steps[i].args[j]: ..." otherwise.
absl::Status CheckStepBounds(const Plan& plan, const Step& step, const abi::OpSpec& spec,
                             const std::string& path, absl::string_view origin);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_STEP_BOUNDS_H_
