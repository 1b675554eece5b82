// A one-layer "model" for runtime tests: embed, merge soft tokens, write K = V = the embedding
// into the cache, attend with scale 0 (so the output is the mean of the visible embeddings),
// project with the tied embedding table; a 4-token vocabulary of 2-wide embeddings, exact in bf16.
#ifndef SPARK_TEST_UNIT_RUNTIME_TINY_PLAN_H_
#define SPARK_TEST_UNIT_RUNTIME_TINY_PLAN_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "spark/runtime/kernel_abi.h"
#include "spark/runtime/plan.h"
#include "spark/runtime/plan_format.h"

namespace spark {
namespace rt {
namespace tiny_plan {

constexpr int kVocab = 4;
constexpr int kHidden = 2;
constexpr int kMaxTokens = 4;

// Embedding rows (exact in bf16).
inline constexpr float kTable[kVocab][kHidden] = {{1, 0}, {0, 1}, {1, 1}, {-1, 2}};

inline StepArg Buffer(int64_t id) { return {ArgRefKind::kBuffer, id, 0, 0.0f}; }
inline StepArg Weight(int64_t id) { return {ArgRefKind::kWeight, id, 0, 0.0f}; }
inline StepArg Cache(ArgRefKind kind) { return {kind, 0, 0, 0.0f}; }
inline StepArg I32(int32_t v) { return {ArgRefKind::kI32, 0, v, 0.0f}; }
inline StepArg F32(float v) { return {ArgRefKind::kF32, 0, 0, v}; }
inline StepArg NumTokens() { return {ArgRefKind::kNumTokens, 0, 0, 0.0f}; }
inline StepArg Null() { return {ArgRefKind::kNull, 0, 0, 0.0f}; }

inline Step MakeStep(const std::string& op, const std::string& source, std::vector<StepArg> args) {
  Step step;
  step.op = abi::FindOp(op.c_str())->id;
  step.source = source;
  step.block[0] = abi::FindOp(op.c_str())->block_size;
  step.args = std::move(args);
  step.kernel = EntryPointOf(step);
  return step;
}

// A one-layer "model": embed, merge soft tokens, write K = V = the embedding into the cache,
// attend with scale 0 (so the output is the mean of the visible embeddings), project with the
// tied embedding table. ValidatePlan checks it by the plan reader's rules.
// vision_mask: the attention reads a last_visible input (use_bidirectional_attention "vision").
inline Plan TinyPlan(KvKind kind, int window, bool soft_merge = true, bool vision_mask = false) {
  Plan plan;
  plan.version = plan_format::kPlanVersion;
  plan.target = "sm_90a";
  plan.max_tokens = kMaxTokens;
  plan.model.variant = "tiny";
  plan.model.vocab_size = kVocab;
  plan.model.hidden_size = kHidden;
  plan.model.num_layers = 1;
  plan.model.max_position_embeddings = 64;
  plan.model.eos_token_ids = {3};
  plan.model.bos_token_id = 2;
  plan.model.weight_prefix = "model.";
  auto add_buffer = [&plan](const std::string& name, DType dtype, std::vector<int64_t> row) {
    BufferInfo buffer;
    buffer.name = name;
    buffer.dtype = dtype;
    buffer.row_shape = std::move(row);
    buffer.offset = plan.arena_bytes;
    plan.arena_bytes += buffer.row_bytes() * kMaxTokens;
    plan.buffers.push_back(buffer);
    return static_cast<int64_t>(plan.buffers.size() - 1);
  };
  plan.input_ids = add_buffer("%ids", DType::kI32, {});
  plan.input_positions = add_buffer("%positions", DType::kI32, {});
  plan.input_sequences = add_buffer("%sequences", DType::kI32, {});
  if (vision_mask) plan.input_last_visible = add_buffer("%last_visible", DType::kI32, {});
  const int64_t h = add_buffer("%h", DType::kF32, {kHidden});
  const int64_t attn = add_buffer("%attn", DType::kF32, {kHidden});
  plan.output_logits = add_buffer("%logits", DType::kF32, {kVocab});
  plan.input_sampling = add_buffer("%sampling", DType::kI32, {abi::kSamplingParamWords});
  plan.output_tokens = add_buffer("tokens", DType::kI32, {});
  plan.weights.push_back({"model.embed_tokens.weight", DType::kBF16, {kVocab, kHidden}});
  plan.kv_caches.push_back(
      {"kv.layers.0", kind, kind == KvKind::kSliding ? window : 0, 1, kHidden});
  plan.steps.push_back(MakeStep("embedding", "embed",
                                {Buffer(plan.input_ids), Weight(0), Buffer(h), NumTokens(),
                                 I32(kVocab), I32(kHidden), F32(1.0f)}));
  if (soft_merge) {
    plan.soft_embeddings = add_buffer("%soft", DType::kF32, {kHidden});
    plan.soft_indices = add_buffer("%soft_indices", DType::kI32, {});
    plan.steps.push_back(MakeStep("scatter_rows", "merge",
                                  {Buffer(h),
                                   Buffer(plan.soft_indices),
                                   Buffer(plan.soft_embeddings),
                                   NumTokens(),
                                   {ArgRefKind::kNumSoftTokens, 0, 0, 0.0f},
                                   I32(kHidden)}));
  }
  plan.steps.push_back(
      MakeStep("kv_write", "layers.0.kv",
               {Buffer(h), Buffer(h), Buffer(plan.input_positions), Buffer(plan.input_sequences),
                Cache(ArgRefKind::kKvBlockTable), Cache(ArgRefKind::kKCache),
                Cache(ArgRefKind::kVCache), NumTokens(), I32(1), I32(kHidden),
                Cache(ArgRefKind::kKvCapacity), I32(abi::kCacheF32)}));
  plan.steps.push_back(MakeStep(
      "attention", "layers.0.attention",
      {Buffer(h), Buffer(plan.input_positions), Buffer(plan.input_sequences),
       Cache(ArgRefKind::kKvBlockTable), Cache(ArgRefKind::kKCache),
       Cache(ArgRefKind::kVCache), Buffer(attn), Null(), NumTokens(), I32(1), I32(1),
       I32(kHidden), Cache(ArgRefKind::kKvCapacity), I32(kind == KvKind::kSliding ? window : 0),
       F32(0.0f), I32(1), I32(0), I32(abi::kCacheF32),
       vision_mask ? Buffer(plan.input_last_visible) : Null()}));
  plan.steps.push_back(MakeStep("linear", "lm_head",
                                {Buffer(attn), Weight(0), Buffer(plan.output_logits), NumTokens(),
                                 I32(kVocab), I32(kHidden)}));
  plan.steps.push_back(MakeStep("sample", "sample",
                                {Buffer(plan.output_logits), Buffer(plan.input_sampling),
                                 Buffer(plan.output_tokens), NumTokens(), I32(kVocab)}));
  BuildPrograms(&plan);
  const absl::Status valid = ValidatePlan(plan, "tiny plan");
  EXPECT_TRUE(valid.ok()) << valid;
  return plan;
}

}  // namespace tiny_plan
}  // namespace rt
}  // namespace spark

#endif  // SPARK_TEST_UNIT_RUNTIME_TINY_PLAN_H_
