// The rules of the op registry (kernel_ops.def RULE entries) evaluated over one call's size and
// parameter values. One evaluator for the plan reader (step_bounds.cc) and the host reference
// (host_kernels.cc). Internal to the runtime.
#ifndef SPARK_RUNTIME_SRC_OP_RULES_H_
#define SPARK_RUNTIME_SRC_OP_RULES_H_

#include <cstdint>
#include <functional>
#include <string>

#include "spark/runtime/kernel_abi.h"

namespace spark {
namespace rt {

// Empty when every rule of `spec` holds, else what the first broken one requires, e.g.
// "q_heads must be a multiple of kv_heads >= 1, found 3 and 2". `i32(i)` and `f32(i)` give the
// value of argument i (called only for indices the rules name).
std::string BrokenRule(const abi::OpSpec& spec, const std::function<int64_t(int)>& i32,
                       const std::function<float(int)>& f32);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_OP_RULES_H_
