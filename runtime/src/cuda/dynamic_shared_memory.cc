#include "cuda/dynamic_shared_memory.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "spark/runtime/printable_text.h"

namespace spark {
namespace rt {

std::vector<DynamicSharedNeed> DynamicSharedNeeds(const Plan& plan) {
  std::vector<DynamicSharedNeed> needs;
  std::map<std::string, size_t> index;  // kernel -> its entry
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& step = plan.steps[i];
    if (!IsLaunch(step)) continue;
    // The sizes grow with the token count: a call of max_tokens is the largest.
    const int bytes = LaunchSharedBytes(plan, step, plan.max_tokens);
    if (bytes <= 0) continue;
    const auto [found, added] = index.emplace(step.kernel, needs.size());
    if (added) {
      needs.push_back({step.kernel, static_cast<int>(i), bytes});
    } else if (bytes > needs[found->second].bytes) {
      needs[found->second].step = static_cast<int>(i);
      needs[found->second].bytes = bytes;
    }
  }
  return needs;
}

absl::Status OptInDynamicShared(const DriverApi& api, CUfunction function, const Plan& plan,
                                const DynamicSharedNeed& need, absl::string_view device_name) {
  const CUresult result =
      api.cuFuncSetAttribute(function, cu::kFuncAttrMaxDynamicSharedSizeBytes, need.bytes);
  if (result == cu::kSuccess) return absl::OkStatus();
  const absl::Status status = CuResultToStatus(
      api, result, "cuFuncSetAttribute(max dynamic shared memory)", __FILE__, __LINE__);
  const Step& step = plan.steps[static_cast<size_t>(need.step)];
  return absl::Status(
      status.code(),
      PrintableText(absl::StrCat(
          "kernel ", need.kernel, " of step ", need.step, " (", step.source, ", op ",
          OpName(step), ") needs ", need.bytes, " bytes of dynamic shared memory for calls of ",
          plan.max_tokens, " tokens, which ", device_name, " does not give one block: ",
          status.message())));
}

}  // namespace rt
}  // namespace spark
