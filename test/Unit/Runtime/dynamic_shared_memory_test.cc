#include "cuda/dynamic_shared_memory.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loader_test_util.h"
#include "spark/runtime/kernel_abi.h"

namespace spark {
namespace rt {
namespace {

using test::StatusIs;

Step KernelStep(abi::OpId op, const std::string& kernel, int shared_bytes = 0) {
  Step step;
  step.op = op;
  step.kernel = kernel;
  step.source = "layers.0." + kernel;
  step.shared_bytes = shared_bytes;
  return step;
}

// Two linear kernels (one in two steps, the second with plan memory of its own), a norm that
// gets none: each linear kernel once, at its largest call.
Plan LinearPlan() {
  Plan plan;
  plan.max_tokens = 64;
  plan.steps = {KernelStep(abi::OpId::kLinear, "spark_linear__a"),
                KernelStep(abi::OpId::kRmsNorm, "spark_rms_norm__b"),
                KernelStep(abi::OpId::kLinear, "spark_linear__a", 1024),
                KernelStep(abi::OpId::kLinearNvfp4, "spark_linear_nvfp4__c")};
  return plan;
}

TEST(DynamicSharedMemoryTest, EachKernelOnceAtItsLargestCall) {
  Plan plan = LinearPlan();
  std::vector<DynamicSharedNeed> needs = DynamicSharedNeeds(plan);
  ASSERT_EQ(needs.size(), 2u);
  EXPECT_EQ(needs[0].kernel, "spark_linear__a");
  EXPECT_EQ(needs[0].step, 2);
  EXPECT_EQ(needs[0].bytes, 1024 + abi::kLinearSplitTileSharedBytes);
  EXPECT_EQ(needs[1].kernel, "spark_linear_nvfp4__c");
  EXPECT_EQ(needs[1].step, 3);
  EXPECT_EQ(needs[1].bytes, abi::kLinearSplitTileSharedBytes);
  // bf16 activations: the 128-row tiles' memory.
  plan.activation_precision = DType::kBF16;
  needs = DynamicSharedNeeds(plan);
  ASSERT_EQ(needs.size(), 2u);
  EXPECT_EQ(needs[1].bytes, abi::kLinearTileSharedBytes);
  // A plan whose calls never reach the tiles' sizes needs none.
  plan.max_tokens = abi::kLinearSmallBatchMaxTokens;
  needs = DynamicSharedNeeds(plan);
  ASSERT_EQ(needs.size(), 1u);
  EXPECT_EQ(needs[0].bytes, 1024);
}

// A fake cuFuncSetAttribute that records its calls and refuses more than 100 KiB.
struct SetAttributeCall {
  CUfunction function;
  CUfunction_attribute attribute;
  int value;
};
std::vector<SetAttributeCall>* g_calls = nullptr;
CUresult FakeSetAttribute(CUfunction function, CUfunction_attribute attribute, int value) {
  g_calls->push_back({function, attribute, value});
  return value > 100 * 1024 ? 1 : cu::kSuccess;  // 1: CUDA_ERROR_INVALID_VALUE
}
CUresult FakeErrorName(CUresult, const char** name) {
  *name = "CUDA_ERROR_INVALID_VALUE";
  return cu::kSuccess;
}
CUresult FakeErrorString(CUresult, const char** text) {
  *text = "invalid argument";
  return cu::kSuccess;
}

TEST(DynamicSharedMemoryTest, OptInAndADeviceThatCannotGiveIt) {
  std::vector<SetAttributeCall> calls;
  g_calls = &calls;
  DriverApi api;
  api.cuFuncSetAttribute = FakeSetAttribute;
  api.cuGetErrorName = FakeErrorName;
  api.cuGetErrorString = FakeErrorString;
  Plan plan = LinearPlan();
  CUfunction function = reinterpret_cast<CUfunction>(0x1234);
  DynamicSharedNeed need = DynamicSharedNeeds(plan)[0];
  EXPECT_TRUE(OptInDynamicShared(api, function, plan, need, "the test GPU").ok());
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].function, function);
  EXPECT_EQ(calls[0].attribute, cu::kFuncAttrMaxDynamicSharedSizeBytes);
  EXPECT_EQ(calls[0].value, need.bytes);
  // More than the device gives one block: the error names the kernel, its step and op, the
  // size, the token count and the device, then the driver's error.
  plan.steps[2].shared_bytes = 200 * 1024;
  need = DynamicSharedNeeds(plan)[0];
  const absl::Status refused = OptInDynamicShared(api, function, plan, need, "the test GPU");
  EXPECT_TRUE(StatusIs(
      refused, absl::StatusCode::kInternal,
      absl::StrCat("kernel spark_linear__a of step 2 (layers.0.spark_linear__a, op linear) needs ",
                   200 * 1024 + abi::kLinearSplitTileSharedBytes,
                   " bytes of dynamic shared memory for calls of 64 tokens, which the test GPU "
                   "does not give one block: cuFuncSetAttribute(max dynamic shared memory) "
                   "failed: CUDA_ERROR_INVALID_VALUE (invalid argument)")))
      << refused;
  g_calls = nullptr;
}

}  // namespace
}  // namespace rt
}  // namespace spark
