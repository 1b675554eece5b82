#include "spark/runtime/plan.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "spark/runtime/executor.h"
#include "little_endian.h"
#include "loader_test_util.h"
#include "plan_generated.h"
#include "spark/runtime/plan_format.h"

namespace spark {
namespace rt {
namespace {

using test::StatusIs;
using test::BufferArg;
using test::F32Arg;
using test::I32Arg;
using test::KindArg;
using test::MakeStep;
using test::TestPlan;
using test::WeightArg;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
namespace fb = ::spark::rt::fb;

// A section around `payload` with a correct header and checksum.
std::string SectionFromPayload(absl::string_view payload) {
  std::string section(plan_format::kMagic, 8);
  AppendLittleEndian<uint32_t>(plan_format::kPlanVersion, &section);
  AppendLittleEndian<uint32_t>(0, &section);
  AppendLittleEndian<uint64_t>(payload.size(), &section);
  AppendLittleEndian<uint64_t>(plan_format::Fnv1a64(payload.data(), payload.size()), &section);
  return absl::StrCat(section, payload);
}

std::string Payload(const flatbuffers::FlatBufferBuilder& builder) {
  return std::string(reinterpret_cast<const char*>(builder.GetBufferPointer()),
                     builder.GetSize());
}

// The compact JSON dump of `plan` (what --dump-plan prints, unindented).
std::string DumpJson(const Plan& plan) { return PlanJsonText(plan, -1); }

// The test plan's buffer unpacked with the FlatBuffers object API, changed by `edit` in ways
// rt::Plan cannot hold (enum codes out of range, other step kinds), packed and parsed.
absl::Status ParseEditedBuffer(const std::function<void(fb::PlanT&)>& edit) {
  const std::string section = SerializePlanSection(TestPlan());
  std::unique_ptr<fb::PlanT> plan = fb::UnPackPlan(section.data() + plan_format::kHeaderSize);
  edit(*plan);
  flatbuffers::FlatBufferBuilder builder;
  fb::FinishPlanBuffer(builder, fb::Plan::Pack(builder, plan.get()));
  return ParsePlanSection(SectionFromPayload(Payload(builder)), "m.cubin").status();
}

// `plan` with its programs rebuilt as spark-compile builds them (BuildPrograms: the tests below
// add and change steps), written and read back.
absl::Status ParsePlan(Plan plan) {
  BuildPrograms(&plan);
  return ParsePlanSection(SerializePlanSection(plan), "m.cubin").status();
}

// `plan` written and read back as it is, programs included.
absl::Status ParsePlanAsIs(const Plan& plan) {
  return ParsePlanSection(SerializePlanSection(plan), "m.cubin").status();
}

TEST(DTypeTest, SizesNamesAndParsing) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2);
  EXPECT_EQ(DTypeSize(DType::kI32), 4);
  EXPECT_EQ(DTypeSize(DType::kF8E4M3FN), 1);
  EXPECT_EQ(DTypeSize(DType::kF4E2M1FN), 0);  // packed: sizes through DTypeBytes
  EXPECT_EQ(DTypeBits(DType::kF4E2M1FN), 4);
  EXPECT_EQ(*DTypeBytes(DType::kF4E2M1FN, 32), 16u);
  EXPECT_EQ(*DTypeBytes(DType::kF4E2M1FN, 33), 17u);  // rounded up to a whole byte
  EXPECT_EQ(*DTypeBytes(DType::kBF16, 3), 6u);
  EXPECT_FALSE(DTypeBytes(DType::kF32, uint64_t{1} << 62).has_value());
  for (DType dtype : kAllDTypes) {
    EXPECT_EQ(*ParseDType(DTypeName(dtype)), dtype) << DTypeName(dtype);
    const absl::string_view safetensors = SafetensorsDTypeName(dtype);
    if (!safetensors.empty()) EXPECT_EQ(*DTypeFromSafetensors(safetensors), dtype);
  }
  EXPECT_EQ(DTypeName(DType::kF8E4M3FN), "f8E4M3FN");  // MLIR's names
  EXPECT_EQ(SafetensorsDTypeName(DType::kF8E4M3FN), "F8_E4M3");
  EXPECT_EQ(SafetensorsDTypeName(DType::kF4E2M1FN), "");  // stored as U8 pairs
  EXPECT_FALSE(DTypeFromSafetensors("I64").has_value());
  EXPECT_FALSE(DTypeFromSafetensors("").has_value());
  EXPECT_TRUE(StatusIs(ParseDType("f64").status(), kInvalid,
                       "unknown dtype \"f64\" (expected f32, bf16, i32, f16, ui8, f8E4M3FN, "
                       "f4E2M1FN)"));
}

// The logits tail: a suffix of row-local steps that writes the logits, round-tripped as
// "logits_tail": true; anything else is refused.
TEST(PlanTest, TheLogitsTailIsASuffixOfRowLocalStepsWritingTheLogits) {
  Plan plan = TestPlan();
  // TestPlan: embedding, scatter_rows, rms_norm, kv_write, linear (logits), attention, sample.
  EXPECT_TRUE(abi::RowLocal(abi::Spec(abi::OpId::kLinear)));
  EXPECT_TRUE(abi::RowLocal(abi::Spec(abi::OpId::kMoeDown)));
  EXPECT_FALSE(abi::RowLocal(abi::Spec(abi::OpId::kAttention)));
  EXPECT_FALSE(abi::RowLocal(abi::Spec(abi::OpId::kKvWrite)));
  EXPECT_FALSE(abi::RowLocal(abi::Spec(abi::OpId::kScatterRows)));
  EXPECT_FALSE(abi::RowLocal(abi::Spec(abi::OpId::kAttentionMerge)));
  std::swap(plan.steps[4], plan.steps[5]);  // the logits linear last but for the sample step
  ASSERT_TRUE(ValidatePlan(plan, "m.cubin").ok()) << ValidatePlan(plan, "m.cubin");
  plan.steps[5].logits_tail = true;
  plan.steps[6].logits_tail = true;  // sample
  const std::string section = SerializePlanSection(plan);
  EXPECT_NE(DumpJson(plan).find(R"("logits_tail":true)"), std::string::npos);
  const absl::StatusOr<Plan> parsed = ParsePlanSection(section, "m.cubin");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->steps[5].logits_tail);
  EXPECT_TRUE(parsed->steps[6].logits_tail);
  EXPECT_FALSE(parsed->steps[4].logits_tail);
  EXPECT_EQ(SerializePlanSection(*parsed), section);
  Plan bad = plan;
  bad.steps[3].logits_tail = true;  // not a suffix
  EXPECT_TRUE(StatusIs(ValidatePlan(bad, "m.cubin"), kInvalid,
                       "m.cubin: plan steps[3]: logits_tail on a step that is followed by step 4, "
                       "which is not in the tail"));
  bad = plan;
  bad.steps[4].logits_tail = true;  // attention
  EXPECT_TRUE(StatusIs(ValidatePlan(bad, "m.cubin"), kInvalid,
                       "m.cubin: plan steps[4]: logits_tail on attention, which is not row-local"));
  bad = plan;
  bad.steps[6].logits_tail = false;  // the sample step outside the tail
  bad.steps.push_back(bad.steps[2]);  // an rms_norm after it, in the tail with the logits
  bad.steps.back().logits_tail = true;
  bad.steps[6] = bad.steps[5];
  bad.steps[6].logits_tail = true;
  EXPECT_FALSE(ValidatePlan(bad, "m.cubin").ok());
  bad = plan;
  std::swap(bad.steps[4], bad.steps[5]);
  bad.steps[5].logits_tail = false;
  bad.steps[4].logits_tail = false;
  bad.steps[6].logits_tail = false;
  bad.steps.push_back(bad.steps[2]);  // an rms_norm after the logits, alone in the tail
  bad.steps.back().logits_tail = true;
  EXPECT_TRUE(StatusIs(ValidatePlan(bad, "m.cubin"), kInvalid,
                       "the logits tail does not write outputs.logits"));
}

TEST(PlanTest, BuffersAreF32Bf16OrI32) {
  Plan plan = TestPlan();
  plan.buffers[2].dtype = DType::kF8E4M3FN;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "plan buffers[2].dtype: buffers are f32, bf16 or i32, found f8E4M3FN"));
}

TEST(PlanInfoTest, RowAndWeightBytes) {
  BufferInfo buffer{"%x", DType::kF32, {3, 5}, 0};
  EXPECT_EQ(buffer.row_bytes(), 60u);
  buffer.row_shape = {};
  EXPECT_EQ(buffer.row_bytes(), 4u);
  buffer.row_shape = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_EQ(buffer.row_bytes(), std::numeric_limits<uint64_t>::max());  // saturates
  const WeightInfo weight{"w", DType::kBF16, {4096, 1536}};
  EXPECT_EQ(weight.num_bytes(), 4096u * 1536u * 2u);
}

// A transfer step (an op the runtime carries out without a kernel: a copy) round-trips as a
// Transfer with no kernel, grid or block; a step of the wrong kind for its op is refused.
TEST(PlanTest, TransferStepsRoundTripAndAreCheckedLikeLaunches) {
  Plan plan = TestPlan();
  // rms_norm wrote %k (buffer 4); copy it to %v (buffer 5) before attention reads %k.
  test::AddStep(&plan, TransferStep(abi::OpId::kCopy, "test.copy",
                                    {test::BufferArg(4), test::BufferArg(5),
                                     test::KindArg(ArgRefKind::kNumTokens), test::I32Arg(4)}));
  BuildPrograms(&plan);
  ASSERT_TRUE(ValidatePlan(plan, "m.cubin").ok()) << ValidatePlan(plan, "m.cubin");
  const Step& copy = test::LastAdded(plan);
  EXPECT_FALSE(IsLaunch(copy));
  EXPECT_EQ(EntryPointOf(copy), "");
  const std::string section = SerializePlanSection(plan);
  const absl::StatusOr<Plan> parsed = ParsePlanSection(section, "m.cubin");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(SerializePlanSection(*parsed), section);
  const Step& read = parsed->steps[parsed->steps.size() - 2];
  EXPECT_EQ(read.op, abi::OpId::kCopy);
  EXPECT_FALSE(IsLaunch(read));
  EXPECT_TRUE(read.kernel.empty());
  EXPECT_TRUE(absl::StrContains(
      DumpJson(plan),
      R"({"op":"copy","transfer":true,"source":"test.copy","args":[{"buffer":4},{"buffer":5},)"));
  // Its arguments are checked by the registry like a launch's.
  Plan bad = plan;
  test::LastAdded(bad).args[1] = test::BufferArg(3);  // %logits: 16 wide, the copy writes 4: fine
  EXPECT_TRUE(ParsePlan(bad).ok());
  test::LastAdded(bad).args[3] = test::I32Arg(32);  // 32 columns: more than %k holds
  EXPECT_TRUE(StatusIs(ParsePlan(bad), kInvalid, "copy uses 32 elements per token of x"));
  // Nothing of a launch on a transfer (in memory: the writer has nowhere to put it).
  bad = plan;
  test::LastAdded(bad).kernel = "spark_copy__i4";
  EXPECT_TRUE(StatusIs(ValidatePlan(bad, "m.cubin"), kInvalid,
                       "copy is a transfer: it takes no kernel, grid, block or shared memory"));
  // A transfer op written as a launch, and a kernel op written as a transfer.
  EXPECT_TRUE(StatusIs(ParseEditedBuffer([](fb::PlanT& p) {
                         auto launch = std::make_unique<fb::LaunchT>();
                         launch->op = "copy";
                         launch->kernel = "spark_copy__i4";
                         launch->grid = std::make_unique<fb::GridRule>(1, 0, 1);
                         launch->block = std::make_unique<fb::Dim3>(256, 1, 1);
                         launch->args = p.steps[2]->kind.AsLaunch()->args;
                         p.steps[2]->kind.Set(std::move(*launch));
                       }),
                       kInvalid,
                       "plan steps[2]: op \"copy\" is a transfer op, but the step is a launch"));
  EXPECT_TRUE(StatusIs(ParseEditedBuffer([](fb::PlanT& p) {
                         fb::TransferT transfer;
                         transfer.op = "rms_norm";
                         transfer.args = p.steps[2]->kind.AsLaunch()->args;
                         p.steps[2]->kind.Set(std::move(transfer));
                       }),
                       kInvalid,
                       "plan steps[2]: op \"rms_norm\" is a kernel op, but the step is a "
                       "transfer"));
}

TEST(PlanTest, RoundTripIsExact) {
  const Plan plan = TestPlan();
  const std::string section = SerializePlanSection(plan);
  const absl::StatusOr<Plan> parsed = ParsePlanSection(section, "m.cubin");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(SerializePlanSection(*parsed), section);
  EXPECT_EQ(parsed->version, plan_format::kPlanVersion);
  EXPECT_EQ(parsed->target, "sm_90a");
  EXPECT_EQ(parsed->max_tokens, 8);
  EXPECT_EQ(parsed->arena_bytes, plan.arena_bytes);
  EXPECT_EQ(parsed->model.eos_token_ids, plan.model.eos_token_ids);
  EXPECT_EQ(parsed->model.weight_prefix, "model.");
  EXPECT_EQ(parsed->model.architecture, "Gemma4ForCausalLM");
  EXPECT_EQ(parsed->soft_indices, plan.soft_indices);
  ASSERT_EQ(parsed->buffers.size(), plan.buffers.size());
  EXPECT_EQ(parsed->buffers[2].row_shape, plan.buffers[2].row_shape);
  EXPECT_EQ(parsed->buffers[3].offset, plan.buffers[3].offset);
  EXPECT_EQ(parsed->weights[0].shape, plan.weights[0].shape);
  EXPECT_EQ(parsed->kv_caches[0].kind, KvKind::kSliding);
  EXPECT_EQ(parsed->kv_caches[0].window, 512);
  EXPECT_EQ(parsed->kv_caches[1].kind, KvKind::kFull);
  EXPECT_EQ(parsed->kv_caches[1].dtype, DType::kF32);
  ASSERT_EQ(parsed->steps.size(), plan.steps.size());
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& a = plan.steps[i];
    const Step& b = parsed->steps[i];
    EXPECT_EQ(a.op, b.op);
    EXPECT_EQ(a.kernel, b.kernel);
    EXPECT_EQ(a.source, b.source);
    EXPECT_EQ(a.grid.per_token, b.grid.per_token);
    EXPECT_EQ(a.grid.fixed, b.grid.fixed);
    EXPECT_EQ(a.grid.divisor, b.grid.divisor);
    EXPECT_EQ(std::memcmp(a.block, b.block, sizeof(a.block)), 0);
    EXPECT_EQ(a.shared_bytes, b.shared_bytes);
    ASSERT_EQ(a.args.size(), b.args.size());
    for (size_t j = 0; j < a.args.size(); ++j) {
      EXPECT_EQ(a.args[j].kind, b.args[j].kind);
      EXPECT_EQ(a.args[j].index, b.args[j].index);
      EXPECT_EQ(a.args[j].i32, b.args[j].i32);
      EXPECT_EQ(a.args[j].f32, b.args[j].f32);  // bit-exact floats
    }
  }
}

// TestPlan's programs (BuildPrograms): decode (one token: every step but scatter_rows), calls of
// 2..8 tokens (the same steps), and calls of 1..8 tokens with soft rows (every step).
TEST(PlanTest, ProgramsCoverEveryCallSizeAndRoundTrip) {
  const Plan plan = TestPlan();
  ASSERT_EQ(plan.programs.size(), 3u);
  EXPECT_EQ(plan.programs[0].name, "decode");
  EXPECT_EQ(plan.programs[0].steps, (std::vector<int64_t>{0, 2, 3, 4, 5, 6}));
  EXPECT_EQ(plan.programs[1].name, "prefill_2_8");
  EXPECT_EQ(plan.programs[1].steps, plan.programs[0].steps);
  EXPECT_EQ(plan.programs[2].name, "prefill_soft_1_8");
  EXPECT_TRUE(plan.programs[2].soft_tokens);
  EXPECT_EQ(plan.programs[2].steps, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  const std::string section = SerializePlanSection(plan);
  EXPECT_TRUE(absl::StrContains(
      DumpJson(plan),
      R"("programs":[{"name":"decode","min_tokens":1,"max_tokens":1,"steps":[0,2,3,4,5,6]})"));
  EXPECT_TRUE(absl::StrContains(DumpJson(plan), R"("soft_tokens":true)"));
  const absl::StatusOr<Plan> parsed = ParsePlanSection(section, "m.cubin");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(SerializePlanSection(*parsed), section);
  EXPECT_EQ(ProgramOf(*parsed, 1, false)->name, "decode");
  EXPECT_EQ(ProgramOf(*parsed, 8, false)->name, "prefill_2_8");
  EXPECT_EQ(ProgramOf(*parsed, 1, true)->name, "prefill_soft_1_8");
  EXPECT_EQ(ProgramOf(*parsed, 9, false), nullptr);
  // Without soft-token inputs there are no soft programs.
  Plan no_soft = plan;
  no_soft.soft_embeddings = no_soft.soft_indices = -1;
  no_soft.steps.erase(no_soft.steps.begin() + 1);  // scatter_rows
  BuildPrograms(&no_soft);
  ASSERT_EQ(no_soft.programs.size(), 2u);
  EXPECT_TRUE(ParsePlanAsIs(no_soft).ok()) << ParsePlanAsIs(no_soft);
}

// A MoE model's programs split where the path changes (kMoeGroupMinTokens) and where attention
// stops splitting (AttentionSplits): each program runs exactly the steps of its sizes.
TEST(PlanTest, ProgramsFollowTheMoePathsAndAttentionSplits) {
  Plan plan = TestPlan();
  plan.max_tokens = 64;
  for (BufferInfo& buffer : plan.buffers) buffer.offset *= 8;  // rows for 64 tokens
  plan.arena_bytes *= 8;
  const int64_t partials = static_cast<int64_t>(plan.buffers.size());
  plan.buffers.push_back({"%partials", DType::kF32, {4, 4}, plan.arena_bytes});
  plan.arena_bytes += 64 * 4 * 4 * 4;
  const int64_t indices = static_cast<int64_t>(plan.buffers.size());
  plan.buffers.push_back({"%indices", DType::kI32, {2}, plan.arena_bytes});
  plan.arena_bytes += 64 * 2 * 4;
  const StepArg tokens = test::KindArg(ArgRefKind::kNumTokens);
  const auto down = [&](StepArg workspace, int path) {
    return test::MakeStep("moe_down", 256,
                          {test::BufferArg(2), test::WeightArg(0), test::BufferArg(2),
                           test::BufferArg(indices), test::BufferArg(2), workspace,
                           tokens, test::I32Arg(4), test::I32Arg(2), test::I32Arg(2),
                           test::I32Arg(2), test::I32Arg(path)});
  };
  test::AddStep(&plan, down(test::KindArg(ArgRefKind::kNull), abi::kMoeGemv));     // 6
  test::AddStep(&plan, down(test::BufferArg(partials), abi::kMoeGrouped));         // 7
  test::AddStep(&plan, test::MakeStep("moe_combine", 256,
                                      {test::BufferArg(partials), test::BufferArg(2), tokens,
                                       test::I32Arg(4), test::I32Arg(2)}));         // 8
  // A split attention (max_splits 4, split_rows 128): split for calls of at most 32 tokens.
  plan.steps[5].args[abi::ops::attention::max_splits] = test::I32Arg(4);
  plan.steps[5].args[abi::ops::attention::split_rows] = test::I32Arg(128);
  plan.steps[5].args[abi::ops::attention::partials] = test::BufferArg(partials);
  plan.steps[5].kernel = EntryPointOf(plan.steps[5]);
  plan.steps.insert(plan.steps.begin() + 6,
                    test::MakeStep("attention_merge", 128,
                                   {test::BufferArg(partials), test::BufferArg(5), tokens,
                                    test::I32Arg(1), test::I32Arg(4), test::I32Arg(4),
                                    test::I32Arg(128)}));  // 6; the MoE steps are 7, 8, 9;
                                                          // sample is 10
  BuildPrograms(&plan);
  std::vector<std::string> names;
  for (const Program& program : plan.programs) names.push_back(program.name);
  EXPECT_EQ(names, (std::vector<std::string>{"decode", "prefill_2_15", "prefill_16_32",
                                             "prefill_33_64", "prefill_soft_1_15",
                                             "prefill_soft_16_32", "prefill_soft_33_64"}));
  EXPECT_EQ(plan.programs[0].steps, (std::vector<int64_t>{0, 2, 3, 4, 5, 6, 7, 10}));
  EXPECT_EQ(plan.programs[2].steps, (std::vector<int64_t>{0, 2, 3, 4, 5, 6, 8, 9, 10}));
  EXPECT_EQ(plan.programs[3].steps, (std::vector<int64_t>{0, 2, 3, 4, 5, 8, 9, 10}));
  for (int64_t t = 1; t <= plan.max_tokens; ++t) {
    for (const bool soft : {false, true}) {
      const Program* program = ProgramOf(plan, t, soft);
      ASSERT_NE(program, nullptr) << t;
      for (size_t s = 0; s < plan.steps.size(); ++s) {
        EXPECT_EQ(StepRuns(plan.steps[s], t, soft),
                  std::find(program->steps.begin(), program->steps.end(), s) !=
                      program->steps.end())
            << "step " << s << ", " << t << " tokens";
      }
    }
  }
  // Moving the GEMV path to the grouped side leaves the grouped calls two moe_down steps.
  Plan wrong = plan;
  wrong.programs[2].steps.insert(wrong.programs[2].steps.begin() + 6, 7);
  EXPECT_TRUE(StatusIs(ParsePlanAsIs(wrong), kInvalid,
                       "m.cubin: plan programs[2]: step 7 (test.moe_down, op moe_down) does "
                       "nothing in a call of 16 tokens, but the program runs it"));
  EXPECT_TRUE(ParsePlanAsIs(plan).ok()) << ParsePlanAsIs(plan);
}

TEST(PlanTest, RejectsProgramsThatDoNotFitThePlan) {
  const Plan plan = TestPlan();
  ASSERT_TRUE(ParsePlanAsIs(plan).ok()) << ParsePlanAsIs(plan);
  // TestPlan's programs: decode [0, 2, 3, 4, 5, 6] (1 token), 2..8 tokens, 1..8 with soft rows.
  const struct {
    void (*edit)(Plan&);
    const char* message;
  } cases[] = {
      {[](Plan& p) { p.programs[0].steps.erase(p.programs[0].steps.begin() + 1); },
       "m.cubin: plan programs[0]: step 2 (test.rms_norm, op rms_norm) is needed in a call of 1 "
       "token, but the program does not run it"},
      {[](Plan& p) { p.programs[0].steps.insert(p.programs[0].steps.begin() + 1, 1); },
       "programs[0]: step 1 (test.scatter_rows, op scatter_rows) does nothing in a call of 1 "
       "token, but the program runs it"},
      {[](Plan& p) { std::swap(p.programs[0].steps[0], p.programs[0].steps[1]); },
       "programs[0].steps[1]: expected a step id greater than the one before it"},
      {[](Plan& p) { p.programs[0].steps.push_back(100000); },
       "programs[0].steps[6]: expected a step id greater than the one before it and less than 7, "
       "found 100000"},
      {[](Plan& p) { p.programs[1].min_tokens = 3; },
       "programs[1]: leaves a gap: a call of 2 tokens has none"},
      {[](Plan& p) { p.programs[1].min_tokens = 1; },
       "programs[1]: overlaps another program: a call of 1 token has two programs"},
      {[](Plan& p) { p.programs[1].max_tokens = 7; },
       "m.cubin: plan programs: no program for calls of 8 to 8 tokens"},
      {[](Plan& p) { p.programs[1].max_tokens = 9; },
       "programs[1].max_tokens: expected an integer in [2, 8], found 9"},
      {[](Plan& p) { p.programs.pop_back(); },
       "no program for calls of 1 to 8 tokens with soft-token rows"},
  };
  for (const auto& c : cases) {
    Plan bad = plan;
    c.edit(bad);
    EXPECT_TRUE(StatusIs(ParsePlanAsIs(bad), kInvalid, c.message)) << c.message;
  }
  Plan bad = plan;
  bad.programs[1].name = "decode";
  EXPECT_TRUE(StatusIs(ParsePlanAsIs(bad), kInvalid,
                       "programs[1].name: \"decode\" is also the name of programs[0]"));
  bad.programs[1].name = "pre fill";
  EXPECT_TRUE(StatusIs(ParsePlanAsIs(bad), kInvalid,
                       "programs[1].name: expected 1 to 64 letters, digits or '_'"));
  bad = plan;
  bad.programs.clear();
  EXPECT_TRUE(StatusIs(ParsePlanAsIs(bad), kInvalid,
                       "m.cubin: plan programs: expected at least one program, found none"));
  bad = plan;
  for (Program& program : bad.programs) {
    program.steps.erase(std::remove(program.steps.begin(), program.steps.end(), 5),
                        program.steps.end());
  }
  EXPECT_TRUE(StatusIs(ParsePlanAsIs(bad), kInvalid, "is needed in a call of 1 token"));
  // A soft program in a plan without soft inputs.
  bad = plan;
  bad.soft_embeddings = bad.soft_indices = -1;
  bad.steps.erase(bad.steps.begin() + 1);
  BuildPrograms(&bad);
  bad.programs.push_back(bad.programs[1]);
  bad.programs.back().name = "soft";
  bad.programs.back().soft_tokens = true;
  EXPECT_TRUE(StatusIs(ParsePlanAsIs(bad), kInvalid,
                       "programs[2].soft_tokens: a program for calls with soft-token rows, but the "
                       "plan has no soft-token inputs"));
}

TEST(PlanTest, FloatsRoundTripBitExactInShortestForm) {
  Plan plan = TestPlan();
  const float values[] = {1e-6f, 0.1f, 1.0f / 3.0f, std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(), -0.0f, 30.0f};
  for (const float value : values) {
    plan.steps[0].args[6].f32 = value;
    plan.steps[0].kernel = EntryPointOf(plan.steps[0]);
    const absl::StatusOr<Plan> parsed = ParsePlanSection(SerializePlanSection(plan), "m.cubin");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    const float back = parsed->steps[0].args[6].f32;
    EXPECT_EQ(std::memcmp(&back, &value, sizeof(float)), 0) << value;
  }
  plan.steps[0].args[6].f32 = 1e-6f;
  EXPECT_TRUE(absl::StrContains(DumpJson(plan), R"({"f32":1e-06})"));
}

TEST(PlanTest, SectionHeaderLayout) {
  const std::string section = SerializePlanSection(TestPlan());
  ASSERT_GT(section.size(), plan_format::kHeaderSize);
  EXPECT_EQ(std::memcmp(section.data(), "SPKPLAN\0", 8), 0);
  EXPECT_EQ(LoadLittleEndian<uint32_t>(section.data() + 8), plan_format::kPlanVersion);
  EXPECT_EQ(LoadLittleEndian<uint32_t>(section.data() + 12), 0u);
  EXPECT_EQ(LoadLittleEndian<uint64_t>(section.data() + 16), section.size() - 32);
  EXPECT_EQ(LoadLittleEndian<uint64_t>(section.data() + 24),
            plan_format::Fnv1a64(section.data() + 32, section.size() - 32));
  EXPECT_EQ(section.substr(36, 4), "SPKP");  // the FlatBuffers file identifier
}

TEST(PlanTest, AcceptsZeroPadding) {
  const std::string section = SerializePlanSection(TestPlan()) + std::string(13, '\0');
  EXPECT_TRUE(ParsePlanSection(section, "m.cubin").ok());
}

TEST(PlanTest, RejectsSectionShorterThanHeader) {
  EXPECT_TRUE(StatusIs(ParsePlanSection("SPKPLAN", "m.cubin").status(), kInvalid,
                       "m.cubin: the .spark.plan section is truncated: it has 7 bytes, the plan "
                       "header alone needs 32; the file is damaged, recompile it with "
                       "spark-compile"));
}

TEST(PlanTest, RejectsTruncatedPayload) {
  const std::string section = SerializePlanSection(TestPlan());
  const std::string truncated = section.substr(0, section.size() - 10);
  EXPECT_TRUE(StatusIs(ParsePlanSection(truncated, "m.cubin").status(), kInvalid,
                       absl::StrCat("m.cubin: the .spark.plan section is truncated: its header "
                                    "announces a plan of ", section.size() - 32,
                                    " bytes but only ", section.size() - 42, " follow")));
}

TEST(PlanTest, RejectsBadMagic) {
  std::string section = SerializePlanSection(TestPlan());
  section[0] = 'X';
  EXPECT_TRUE(StatusIs(ParsePlanSection(section, "m.cubin").status(), kInvalid,
                       "m.cubin: the .spark.plan section does not start with the plan magic "
                       "\"SPKPLAN\" (found bytes 58504b504c414e00); it was not written by "
                       "spark-compile or is damaged"));
}

TEST(PlanTest, RejectsNewerVersion) {
  std::string section = SerializePlanSection(TestPlan());
  const uint32_t version = plan_format::kPlanVersion;
  section[8] = static_cast<char>(version + 1);
  EXPECT_TRUE(StatusIs(ParsePlanSection(section, "model.cubin").status(), kInvalid,
                       absl::StrCat("model.cubin: plan version ", version + 1,
                                    " is not supported (this runtime reads version ", version,
                                    "); recompile the model with this release's spark-compile")));
  section[8] = 12;  // version 12: the plan as JSON
  EXPECT_TRUE(StatusIs(ParsePlanSection(section, "model.cubin").status(), kInvalid,
                       absl::StrCat("model.cubin: plan version 12 is not supported (this runtime "
                                    "reads version ",
                                    version, ")")));
}

TEST(PlanTest, RejectsNonZeroFlags) {
  std::string section = SerializePlanSection(TestPlan());
  section[12] = 4;
  EXPECT_TRUE(StatusIs(ParsePlanSection(section, "m.cubin").status(), kInvalid,
                       "m.cubin: plan flags 0x4 are not supported (this runtime expects 0)"));
}

TEST(PlanTest, RejectsPayloadSizeAboveLimit) {
  std::string section = SerializePlanSection(TestPlan());
  std::string size;
  AppendLittleEndian<uint64_t>(plan_format::kMaxPayloadSize + 1, &size);
  section.replace(16, 8, size);
  EXPECT_TRUE(StatusIs(ParsePlanSection(section, "m.cubin").status(), kInvalid,
                       "m.cubin: the plan header announces a plan of 33554433 bytes, above the "
                       "limit of 33554432"));
}

// Each array is capped (plan_format.h), so that a plan of a million steps within the size limit
// is refused before its steps are read into memory.
TEST(PlanTest, RejectsMoreEntriesThanTheLimits) {
  Plan plan = TestPlan();
  plan.steps.resize(plan_format::kMaxSteps + 1, plan.steps[2]);
  EXPECT_TRUE(StatusIs(ParsePlanAsIs(plan), kInvalid,
                       "m.cubin: plan steps: expected at most 32768 entries (this runtime's limit, "
                       "over 15 times what the largest Gemma 4 plan has), found 32769; the file "
                       "is damaged or was not written by spark-compile"));
  plan = TestPlan();
  plan.weights.resize(plan_format::kMaxWeights + 1, plan.weights[1]);
  EXPECT_TRUE(
      StatusIs(ParsePlan(plan), kInvalid, "m.cubin: plan weights: expected at most 16384 entries"));
  EXPECT_TRUE(StatusIs(ValidatePlan(plan, "m.cubin"), kInvalid,
                       "m.cubin: plan weights: expected at most 16384 entries"));
  plan = TestPlan();
  plan.buffers.resize(plan_format::kMaxBuffers + 1, plan.buffers[0]);
  EXPECT_TRUE(
      StatusIs(ParsePlan(plan), kInvalid, "m.cubin: plan buffers: expected at most 32768 entries"));
  plan = TestPlan();
  plan.kv_caches.resize(plan_format::kMaxKvCaches + 1, plan.kv_caches[1]);
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan kv_caches: expected at most 1024 entries"));
}

TEST(PlanTest, RejectsAPlanWithoutSteps) {
  Plan plan = TestPlan();
  plan.steps.clear();
  plan.kv_caches.clear();
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan steps: expected at least one step, found none (a plan "
                       "computes the logits in its steps); the file is damaged or was not written "
                       "by spark-compile"));
}

// A KV cache no step reads or writes would still be allocated for --max-length tokens.
TEST(PlanTest, RejectsAKvCacheNoStepUses) {
  Plan plan = TestPlan();
  plan.kv_caches.push_back({"kv.unused", KvKind::kFull, 0, 8, 256});
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan kv_caches[2]: kv cache kv.unused is used by no step, but "
                       "would still be allocated for every token of --max-length; the file is "
                       "damaged or was not written by spark-compile"));
  plan = TestPlan();
  plan.steps.erase(plan.steps.end() - 2);  // attention, the only step over the sliding cache 0
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "plan kv_caches[0]: kv cache kv.layers.0 is used by no step"));
}

TEST(PlanTest, RejectsBadChecksum) {
  std::string section = SerializePlanSection(TestPlan());
  section[40] ^= 1;  // a byte of the plan buffer
  EXPECT_TRUE(StatusIs(ParsePlanSection(section, "m.cubin").status(), kInvalid,
                       "m.cubin: plan checksum mismatch (header 0x"));
  EXPECT_TRUE(StatusIs(ParsePlanSection(section, "m.cubin").status(), kInvalid,
                       "the file is damaged, copy it again or recompile it with spark-compile"));
}

TEST(PlanTest, RejectsNonZeroBytesAfterThePlan) {
  const std::string plain = SerializePlanSection(TestPlan());
  const std::string section = plain + std::string(3, '\0') + "x";
  EXPECT_TRUE(StatusIs(ParsePlanSection(section, "m.cubin").status(), kInvalid,
                       absl::StrCat("m.cubin: the .spark.plan section has non-zero bytes after "
                                    "the plan (at section offset ", plain.size() + 3,
                                    "); the file is damaged")));
}

// A payload that is no plan buffer (the JSON of plan version 12, a few bytes) is refused by its
// identifier; one whose offsets point outside it, or that lacks a required field, by the
// FlatBuffers verifier.
TEST(PlanTest, RejectsPayloadsThatAreNoPlanBuffer) {
  for (const absl::string_view payload : {absl::string_view("{\"target\": \"sm_90a\"}"),
                                          absl::string_view("SPKP")}) {
    EXPECT_TRUE(StatusIs(ParsePlanSection(SectionFromPayload(payload), "m.cubin").status(),
                         kInvalid,
                         "m.cubin: the plan does not carry the plan buffer identifier \"SPKP\"; "
                         "the file is damaged or was not written by spark-compile"))
        << payload;
  }
  constexpr absl::string_view kMalformed =
      "m.cubin: the plan buffer is malformed (FlatBuffers verification failed: an offset or size "
      "points outside it, or a required field is missing); the file is damaged, recompile it "
      "with spark-compile";
  std::string payload = SerializePlanSection(TestPlan()).substr(plan_format::kHeaderSize);
  std::string root;
  AppendLittleEndian<uint32_t>(static_cast<uint32_t>(payload.size()) + 64, &root);
  payload.replace(0, 4, root);  // the root table past the end
  EXPECT_TRUE(StatusIs(ParsePlanSection(SectionFromPayload(payload), "m.cubin").status(),
                       kInvalid, kMalformed));
  // A Plan table with a target and nothing else (model, inputs, steps, ... are required).
  flatbuffers::FlatBufferBuilder builder;
  const auto target = builder.CreateString("sm_90a");
  const flatbuffers::uoffset_t start = builder.StartTable();
  builder.AddOffset(fb::Plan::VT_TARGET, target);
  builder.Finish(flatbuffers::Offset<fb::Plan>(builder.EndTable(start)), fb::PlanIdentifier());
  EXPECT_TRUE(StatusIs(ParsePlanSection(SectionFromPayload(Payload(builder)), "m.cubin").status(),
                       kInvalid, kMalformed));
}

// A step's kernel is the entry compiled for its op and literals (entry_point.h): pointing a step
// at another entry (one compiled for other sizes) is refused, with or without also editing the
// literals.
TEST(PlanTest, StepKernelMustBeTheEntryOfItsOpAndLiterals) {
  Plan plan = TestPlan();
  EXPECT_EQ(plan.steps[4].kernel, "spark_linear__i16_i4");
  EXPECT_EQ(plan.steps[0].kernel, "spark_embedding__i16_i4_f40000000");  // 2.0f
  plan.steps[4].kernel = "spark_linear__i512_i4";
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan steps[4].kernel: the step names kernel "
                       "\"spark_linear__i512_i4\", but its op and literal arguments are those of "
                       "\"spark_linear__i16_i4\""));
  plan.steps[4].kernel = "spark_rms_norm__i1_i4_f358637bd";  // another op's entry
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "plan steps[4].kernel"));
  plan = TestPlan();
  plan.steps[1].args[5] = test::I32Arg(3);  // scatter_rows cols 4 -> 3, kernel unchanged
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "\"spark_scatter_rows__i4\", but its op and literal arguments are those "
                       "of \"spark_scatter_rows__i3\""));
  Step negative = test::MakeStep("mask_tokens", 256, {test::I32Arg(7), test::I32Arg(-1)});
  EXPECT_EQ(negative.kernel, "spark_mask_tokens__i7_m1");
}


// The verifier takes any byte for an enum: the reader checks each code.
TEST(PlanTest, RejectsUnknownEnumCodes) {
  EXPECT_TRUE(StatusIs(ParseEditedBuffer([](fb::PlanT& plan) {
                         plan.buffers[0]->dtype = static_cast<fb::DType>(99);
                       }),
                       kInvalid,
                       absl::StrCat("m.cubin: plan buffers[0].dtype: unknown element type code "
                                    "99 (this runtime reads plan version ",
                                    plan_format::kPlanVersion,
                                    ", which knows 0 to 6); recompile the model with this "
                                    "release's spark-compile")));
  EXPECT_TRUE(StatusIs(ParseEditedBuffer([](fb::PlanT& plan) {
                         plan.kv_caches[1]->kind = static_cast<fb::KvKind>(2);
                       }),
                       kInvalid, "m.cubin: plan kv_caches[1].kind: unknown KV cache kind code 2"));
  EXPECT_TRUE(StatusIs(ParseEditedBuffer([](fb::PlanT& plan) {
                         plan.weights[1]->transform = static_cast<fb::WeightTransform>(7);
                       }),
                       kInvalid, "m.cubin: plan weights[1].transform: unknown weight transform code 7"));
  EXPECT_TRUE(StatusIs(ParseEditedBuffer([](fb::PlanT& plan) {
                         plan.activation_precision = static_cast<fb::DType>(200);
                       }),
                       kInvalid, "m.cubin: plan activation_precision: unknown element type code 200"));
  EXPECT_TRUE(StatusIs(ParseEditedBuffer([](fb::PlanT& plan) {
                         fb::Arg& arg = plan.steps[0]->kind.AsLaunch()->args[4];
                         arg = fb::Arg(static_cast<fb::ArgKind>(42), arg.i32(), arg.index(),
                                       arg.f32());
                       }),
                       kInvalid, "m.cubin: plan steps[0].args[4].kind: unknown argument kind code 42"));
}

TEST(PlanTest, ActivationPrecisionRoundTripsAndIsF32OrBf16) {
  Plan plan = test::WithBf16Activations(TestPlan());
  const std::string section = SerializePlanSection(plan);
  EXPECT_NE(DumpJson(plan).find(R"("activation_precision":"bf16")"), std::string::npos);
  const absl::StatusOr<Plan> parsed = ParsePlanSection(section, "m.cubin");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->activation_precision, DType::kBF16);
  EXPECT_EQ(parsed->buffers[parsed->output_logits].dtype, DType::kBF16);
  // Under bf16 activations every activation argument is a bf16 buffer: an f32 one is refused at
  // the step that takes it; the logits must be bf16 too.
  Plan mixed = plan;
  mixed.buffers[mixed.steps[1].args[0].index].dtype = DType::kF32;
  EXPECT_TRUE(StatusIs(ValidatePlan(mixed, "m.cubin"), kInvalid, "is bf16 (activations)"));
  mixed = plan;
  mixed.buffers[mixed.output_logits].dtype = DType::kF32;
  EXPECT_TRUE(StatusIs(ValidatePlan(mixed, "m.cubin"), kInvalid, "outputs.logits"));
  EXPECT_TRUE(StatusIs(ParseEditedBuffer([](fb::PlanT& plan) {
                         plan.activation_precision = fb::DType::f16;
                       }),
                       kInvalid,
                       "m.cubin: plan activation_precision: expected \"f32\" or \"bf16\", found "
                       "\"f16\""));
  plan.activation_precision = DType::kI32;
  EXPECT_TRUE(StatusIs(ValidatePlan(plan, "m.cubin"), kInvalid,
                       "m.cubin: plan activation_precision: expected \"f32\" or \"bf16\", found "
                       "\"i32\""));
}

// A literal f32 is finite (the entry point's name and the kernels take it as a number).
// A damaged buffer may place a vector of 8-byte structs (the steps' Args) or of int64 at an
// address only 4-byte aligned: the verifier checks the alignment of a vector's length, not of its
// elements. The reader copies such elements out instead of binding references to them (found
// by fuzz_plan_execution; under UBSan, the sanitizer stage, a misaligned read fails this test).
TEST(PlanTest, ReadsVectorElementsAtAnyAlignment) {
  std::ifstream file(std::string(SPARK_TEST_SOURCE_DIR) +
                         "/fuzz/regressions/fuzz_plan_execution/misaligned-arg-vector",
                     std::ios::binary);
  ASSERT_TRUE(file.good());
  const std::string payload((std::istreambuf_iterator<char>(file)),
                            std::istreambuf_iterator<char>());
  const absl::StatusOr<Plan> plan = ParsePlanSection(SectionFromPayload(payload), "m.cubin");
  // Accepted or refused with a message; which one depends on the damage, not on alignment.
  if (!plan.ok()) {
    EXPECT_EQ(plan.status().code(), kInvalid);
    EXPECT_FALSE(plan.status().message().empty());
  }
  // The same bytes one byte further into memory (the reader copies the buffer to aligned memory
  // first): the same answer.
  const std::string shifted = " " + SectionFromPayload(payload);
  const absl::StatusOr<Plan> again =
      ParsePlanSection(absl::string_view(shifted).substr(1), "m.cubin");
  EXPECT_EQ(again.ok(), plan.ok());
  if (!again.ok()) EXPECT_EQ(again.status().message(), plan.status().message());
}

TEST(PlanTest, RejectsNonFiniteLiterals) {
  for (const float value : {std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()}) {
    Plan plan = TestPlan();
    plan.steps[0].args[6].f32 = value;  // the embedding's scale
    EXPECT_TRUE(StatusIs(ParsePlanAsIs(plan), kInvalid,
                         "m.cubin: plan steps[0].args[6].f32: expected a finite f32 literal"))
        << value;
  }
}

TEST(PlanTest, RejectsOutOfRangeOffset) {
  Plan plan = TestPlan();
  plan.buffers[3].offset = plan.arena_bytes - 64;  // logits: 8 rows of 64 bytes
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       absl::StrCat("m.cubin: plan buffers[3]: buffer %logits (f32 [16] x 8 rows "
                                    "at offset ", plan.arena_bytes - 64, ") ends at byte ",
                                    plan.arena_bytes + 448, ", beyond the arena of ",
                                    plan.arena_bytes, " bytes")));
}

TEST(PlanTest, RejectsBufferSizeOverflow) {
  Plan plan = TestPlan();
  plan.buffers[2].row_shape = {int64_t{1} << 62, 4};
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "ends past 2^64, beyond the arena"));
  plan = TestPlan();
  plan.buffers[2].offset = std::numeric_limits<int64_t>::max() - 3;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "m.cubin: plan buffers[2]: buffer %hidden"));
}

TEST(PlanTest, RejectsMisalignedOrBf16Buffer) {
  Plan plan = TestPlan();
  plan.buffers[2].offset += 2;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "plan buffers[2].offset: offset 66 is not a multiple of 4 (the size of "
                       "f32)"));
  plan = TestPlan();
  plan.buffers[2].dtype = DType::kBF16;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "plan buffers[2].dtype: a bf16 buffer in a plan whose activation_precision "
                       "is f32 (buffers are f32 or i32 then)"));
  plan = TestPlan();
  plan.buffers[2].row_shape = {0};
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "plan buffers[2].row_shape[0]: expected an integer >= 1, found 0"));
}

TEST(PlanTest, RejectsWrongArgumentKind) {
  Plan plan = TestPlan();
  plan.steps[4].args[1] = test::I32Arg(3);  // linear's w is a pointer
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan steps[4].args[1]: argument w of linear is a pointer "
                       "(buffer, weight, k_cache, v_cache or null), found i32"));
  plan = TestPlan();
  plan.steps[0].args[6] = test::BufferArg(0);  // embedding's scale is an f32
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "argument scale of embedding is an f32 (f32), found buffer"));
  plan = TestPlan();
  plan.steps[0].args[3] = test::F32Arg(1.0f);  // num_tokens is an i32
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "argument num_tokens of embedding is an i32 (i32, num_tokens, "
                       "num_soft_tokens or kv_capacity), found f32"));
}

// A plan that passes every other check but would make a kernel read or write past a buffer,
// weight or cache is rejected before anything runs (docs/plan-format.md "Bounds").
TEST(PlanTest, RejectsStepsThatOverrunWhatTheyAreGiven) {
  Plan plan = TestPlan();
  plan.steps[4].args[4] = test::I32Arg(17);  // linear out_features 17 > logits row 16
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan steps[4].args[1]: linear reads 68 elements of w, weight 0 "
                       "(model.embed_tokens.weight) has 64"));
  plan = TestPlan();
  plan.steps[4].args[5] = test::I32Arg(5);  // in_features 5 > hidden row 4
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan steps[4].args[0]: linear uses 5 elements per token of x, "
                       "buffer 2 (%hidden) has 4"));
  plan = TestPlan();
  plan.steps[0].args[4] = test::I32Arg(17);  // embedding vocab 17 > table rows 16
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "embedding reads 68 elements of table"));
  plan = TestPlan();
  plan.steps[0].args[2] = test::BufferArg(plan.input_ids);  // f32 rows into an i32 buffer
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "y of embedding is f32 (activations), buffer 0 (%ids) is i32"));
  plan = TestPlan();
  plan.steps[2].args[4] = test::I32Arg(2);  // rms_norm groups 2: 8 elements per row
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "rms_norm uses 8 elements per token of x"));
  plan = TestPlan();
  plan.steps[2].args[1] = test::BufferArg(2);  // a norm weight must be a weight
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "weight of rms_norm must be a weight"));
  plan = TestPlan();
  plan.steps[3].args[2] = test::BufferArg(plan.input_ids);  // positions from the ids
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "steps[3].args[2]: positions of kv_write must be the plan's positions "
                       "input (buffer 1)"));
  plan = TestPlan();
  plan.steps[3].args[6] = test::KindArg(ArgRefKind::kVCache, 0);  // K of cache 1, V of cache 0
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "k_cache, v_cache, capacity and block_table of kv_write must name the same kv cache"));
  plan = TestPlan();
  plan.kv_caches[1].head_dim = 8;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "kv_write uses kv rows of 1 x 4, kv cache 1 (kv.layers.1) has 1 x 8"));
  plan = TestPlan();
  plan.steps[3].args[10] = test::I32Arg(4096);  // a literal capacity instead of the runtime's
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "steps[3].args[10]: capacity must be the runtime's kv_capacity, found i32"));
  plan = TestPlan();
  plan.steps[4].args[3] = test::I32Arg(8);  // a literal token count
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "steps[4].args[3]: num_tokens must be the runtime's num_tokens, found i32"));
  plan = TestPlan();
  plan.steps[1].args[5] = test::I32Arg(-4);  // negative cols
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "steps[1].args[5]: cols must be >= 0, found -4"));
  plan = TestPlan();
  plan.steps[4].args[4] = test::I32Arg(1 << 30);  // out x in overflows nothing but is too big
  plan.steps[4].args[5] = test::I32Arg(1 << 30);
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "linear uses 1073741824 elements per token"));
}

// The workspace of attention split over the KV length (flash-decoding) and of its merge must
// last_visible of attention (vision-bidirectional models) is null or the plan's last_visible
// input, an i32 entry buffer; the input round-trips.
TEST(PlanTest, AttentionLastVisibleIsThePlansInput) {
  const auto attention = [](StepArg last_visible) {
    return test::MakeStep(
        "attention", 128,
        {test::BufferArg(4), test::BufferArg(TestPlan().input_positions),
         test::BufferArg(TestPlan().input_sequences),
         test::KindArg(ArgRefKind::kKvBlockTable, 1), test::KindArg(ArgRefKind::kKCache, 1),
       test::KindArg(ArgRefKind::kVCache, 1),
         test::BufferArg(5), test::KindArg(ArgRefKind::kNull),
         test::KindArg(ArgRefKind::kNumTokens), test::I32Arg(1), test::I32Arg(1),
         test::I32Arg(4), test::KindArg(ArgRefKind::kKvCapacity, 1), test::I32Arg(0),
         test::F32Arg(1.0f), test::I32Arg(1), test::I32Arg(0), test::I32Arg(abi::kCacheF32),
         last_visible});
  };
  Plan plan = TestPlan();
  test::AddStep(&plan, attention(test::BufferArg(plan.input_positions)));
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "last_visible of attention must be null or the plan's last_visible input "
                       "(the plan has none)"));
  // An i32 input buffer appended to the arena.
  plan.buffers.push_back({"%last_visible", DType::kI32, {}, plan.arena_bytes});
  plan.arena_bytes += 4 * plan.max_tokens;
  plan.input_last_visible = static_cast<int64_t>(plan.buffers.size()) - 1;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       absl::StrCat("(buffer ", plan.input_last_visible, ")")));
  test::LastAdded(plan) = attention(test::BufferArg(plan.input_last_visible));
  BuildPrograms(&plan);
  const absl::StatusOr<Plan> parsed = ParsePlanSection(SerializePlanSection(plan), "m.cubin");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->input_last_visible, plan.input_last_visible);
  plan.buffers.back().dtype = DType::kF32;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "inputs.last_visible"));
}

// hold split_rows x q_heads records when the step may split (max_splits > 1).
TEST(PlanTest, ChecksTheAttentionWorkspace) {
  const StepArg num_tokens = test::KindArg(ArgRefKind::kNumTokens);
  const auto attention = [&](StepArg partials, int32_t max_splits, int32_t split_rows) {
    return test::MakeStep(
        "attention", 128,
        {test::BufferArg(4), test::BufferArg(TestPlan().input_positions),
         test::BufferArg(TestPlan().input_sequences),
         test::KindArg(ArgRefKind::kKvBlockTable, 1), test::KindArg(ArgRefKind::kKCache, 1),
       test::KindArg(ArgRefKind::kVCache, 1),
         test::BufferArg(5), partials, num_tokens, test::I32Arg(1), test::I32Arg(1),
         test::I32Arg(4), test::KindArg(ArgRefKind::kKvCapacity, 1), test::I32Arg(0),
         test::F32Arg(1.0f), test::I32Arg(max_splits), test::I32Arg(split_rows),
         test::I32Arg(abi::kCacheF32), test::KindArg(ArgRefKind::kNull)});
  };
  const auto merge = [&](StepArg partials, int32_t max_splits, int32_t split_rows) {
    return test::MakeStep("attention_merge", 128,
                          {partials, test::BufferArg(5), num_tokens, test::I32Arg(1),
                           test::I32Arg(4), test::I32Arg(max_splits), test::I32Arg(split_rows)});
  };
  // Buffer 3 (%logits) holds 8 rows x 16 floats = 128 = 16 records of 4 + 4 floats.
  Plan plan = TestPlan();
  test::AddStep(&plan, attention(test::BufferArg(3), 4, 16));
  test::AddStep(&plan, merge(test::BufferArg(3), 4, 16));
  EXPECT_TRUE(ParsePlan(plan).ok());
  plan = TestPlan();
  test::AddStep(&plan, attention(test::KindArg(ArgRefKind::kNull), 4, 16));  // never split
  EXPECT_TRUE(ParsePlan(plan).ok());
  plan = TestPlan();
  test::AddStep(&plan, attention(test::BufferArg(3), 4, 17));
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "steps[6].args[7]: attention may write 136 floats of partials, buffer 3 "
                       "(%logits) holds 128"));
  plan = TestPlan();
  test::AddStep(&plan, merge(test::BufferArg(3), 4, 17));
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "attention_merge may write 136 floats of partials"));
  plan = TestPlan();
  test::AddStep(&plan, merge(test::KindArg(ArgRefKind::kNull), 4, 16));
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "partials of attention_merge must be an activation buffer, found null"));
  plan = TestPlan();
  test::AddStep(&plan, attention(test::BufferArg(TestPlan().input_ids), 2, 1));
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "partials of attention must be an f32 buffer"));
  plan = TestPlan();
  test::AddStep(&plan, attention(test::BufferArg(3), 4, 1 << 30));  // records overflow nothing
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "attention may write 8589934592 floats"));
}

// TestPlan with room for 16 tokens per step, so that calls take the grouped MoE path too
// (kMoeGroupMinTokens) and moe_combine is in a program.
Plan TestPlanOf16Tokens() {
  Plan plan = TestPlan();
  plan.max_tokens = 16;
  for (BufferInfo& buffer : plan.buffers) buffer.offset *= 2;
  plan.arena_bytes *= 2;
  BuildPrograms(&plan);
  return plan;
}

// The workspace of moe_down grouped by expert and of moe_combine: top_k x hidden floats per token.
TEST(PlanTest, ChecksTheMoeWorkspace) {
  const StepArg num_tokens = test::KindArg(ArgRefKind::kNumTokens);
  // hidden 2, top_k 2: 4 floats per token; buffer 4 (%k) has 4 per token, buffer 2 (%hidden) 4,
  // buffer 3 (%logits) 16; the weights: 0 is [16, 4] (64 elements), read as 2 experts x 2 x 16.
  const auto combine = [&](StepArg partials) {
    return test::MakeStep("moe_combine", 256,
                          {partials, test::BufferArg(2), num_tokens, test::I32Arg(2),
                           test::I32Arg(2)});
  };
  Plan plan = TestPlanOf16Tokens();
  test::AddStep(&plan, combine(test::BufferArg(3)));
  EXPECT_TRUE(ParsePlan(plan).ok());
  // An f32 buffer of 1 element per token, at the end of the arena.
  const auto with_small_buffer = [](Plan plan) {
    plan.buffers.push_back({"%small", DType::kF32, {1}, plan.arena_bytes});
    plan.arena_bytes += 4 * plan.max_tokens;
    return plan;
  };
  const int64_t small = static_cast<int64_t>(TestPlanOf16Tokens().buffers.size());
  plan = with_small_buffer(TestPlanOf16Tokens());
  test::AddStep(&plan, combine(test::BufferArg(small)));
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "moe_combine uses 4 elements per token of partials, buffer 11 (%small) has "
                       "1"));
  plan = TestPlanOf16Tokens();
  test::AddStep(&plan, combine(test::KindArg(ArgRefKind::kNull)));
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "partials of moe_combine may not be null"));
  const auto down = [&](StepArg partials, int path) {
    return test::MakeStep(
        "moe_down", 256,
        {test::BufferArg(3), test::WeightArg(0), test::BufferArg(3), test::BufferArg(plan.input_ids),
         test::BufferArg(2), partials, num_tokens, test::I32Arg(2), test::I32Arg(16),
         test::I32Arg(2), test::I32Arg(1), test::I32Arg(path)});
  };
  plan = TestPlanOf16Tokens();
  test::AddStep(&plan, down(test::KindArg(ArgRefKind::kNull), abi::kMoeGemv));  // never grouped
  EXPECT_TRUE(ParsePlan(plan).ok());
  plan = with_small_buffer(TestPlanOf16Tokens());
  test::AddStep(&plan, down(test::BufferArg(small), abi::kMoeGrouped));
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "moe_down uses 2 elements per token of partials, buffer 11 (%small) has 1"));
}

// The other bounds rules, one rejection each: the argument's kind, and the ops' own limits.
TEST(PlanTest, RejectsStepsThatBreakTheirOpsRules) {
  Plan plan = TestPlan();
  plan.steps[4].args[1] = test::KindArg(ArgRefKind::kNull);  // only norm weights may be null
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "steps[4].args[1]: w of linear may not be null"));
  plan = TestPlan();
  plan.steps[4].args[0] = test::WeightArg(1);  // activations come from buffers
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "steps[4].args[0]: x of linear must be an activation buffer"));
  plan = TestPlan();
  plan.steps[4].args[0] = test::KindArg(ArgRefKind::kKCache, 0);
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "x of linear must be an activation buffer, found k_cache"));
  plan = TestPlan();
  plan.steps[3].args[5] = test::BufferArg(2);  // a buffer where the K cache goes
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "kv_write takes a k_cache and a v_cache"));

  const StepArg num_tokens = test::KindArg(ArgRefKind::kNumTokens);
  const StepArg positions = test::BufferArg(TestPlan().input_positions);
  plan = TestPlan();
  test::AddStep(&plan, test::MakeStep(
      "rope", 256,
      {test::BufferArg(4), positions, test::BufferArg(5), num_tokens, test::I32Arg(1),
       test::I32Arg(4), test::I32Arg(3), test::F32Arg(1e4f), test::F32Arg(1.0f)}));
  EXPECT_TRUE(
      StatusIs(ParsePlan(plan), kInvalid, "steps[6]: rope: rotated_pairs must be at most head_dim / 2, found 3 and 4"));
  plan = TestPlan();
  test::AddStep(&plan, test::MakeStep(
      "attention", 128,
      {test::BufferArg(4), positions, test::BufferArg(TestPlan().input_sequences),
       test::KindArg(ArgRefKind::kKvBlockTable, 1), test::KindArg(ArgRefKind::kKCache, 1),
       test::KindArg(ArgRefKind::kVCache, 1), test::BufferArg(5), test::KindArg(ArgRefKind::kNull),
       num_tokens, test::I32Arg(3), test::I32Arg(2), test::I32Arg(4),
       test::KindArg(ArgRefKind::kKvCapacity, 1), test::I32Arg(0), test::F32Arg(1.0f),
       test::I32Arg(1), test::I32Arg(0), test::I32Arg(abi::kCacheF32),
       test::KindArg(ArgRefKind::kNull)}));
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "steps[6]: attention: q_heads must be a multiple of kv_heads >= 1, found 3 and 2"));
  plan = TestPlan();
  test::AddStep(&plan, test::MakeStep(
      "select_group", 256,
      {test::BufferArg(4), test::BufferArg(5), num_tokens, test::I32Arg(1), test::I32Arg(4),
       test::I32Arg(1)}));
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "steps[6]: select_group: index must be less than groups, found 1 >= 1"));
  plan = TestPlan();
  test::AddStep(&plan, test::MakeStep(
      "moe_topk", 128,
      {test::BufferArg(2), test::WeightArg(1), test::BufferArg(4), test::BufferArg(plan.input_ids),
       num_tokens, test::I32Arg(2), test::I32Arg(3), test::F32Arg(0.5f)}));
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "steps[6]: moe_topk: top_k must be in [1, num_experts = 2], found 3"));
}

// A name from the plan reaches the message whole and printable: a NUL does not cut it, an escape
// sequence does not reach the terminal (PrintableText).
TEST(PlanTest, EscapesNamesInMessages) {
  Plan plan = TestPlan();
  constexpr char kName[] = "%ids\0\x1b]0;title\x07";
  plan.buffers[plan.input_ids].name = std::string(kName, sizeof(kName) - 1);
  plan.buffers[plan.input_ids].dtype = DType::kF32;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan inputs.ids: buffer 0 (%ids\\x00\\x1b]0;title\\x07) is f32 [] "
                       "per row; the runtime uses it as i32 []"));
  plan = TestPlan();
  plan.kv_caches.push_back({"\x1b[2J", KvKind::kFull, 0, 8, 256});
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "kv cache \\x1b[2J is used by no step"));
}

// An attention step's window is its cache's: the sliding cache 0 has window 512, the full cache 1
// none. (A disagreeing window reads keys the cache no longer holds, or masks ones it should see.)
TEST(PlanTest, AttentionWindowMatchesItsCache) {
  Plan plan = TestPlan();
  Step& attention = plan.steps[5];  // over the sliding cache 0
  attention.args[13] = test::I32Arg(256);
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan steps[5].args[13]: window 256 of attention does not match kv "
                       "cache 0 (kv.layers.0), a sliding cache of window 512"));
  attention.args[13] = test::I32Arg(0);
  EXPECT_TRUE(
      StatusIs(ParsePlan(plan), kInvalid, "window 0 of attention does not match kv cache 0"));
  plan = TestPlan();
  for (const int index : {3, 4, 5, 12}) plan.steps[5].args[index].index = 1;  // the full cache
  plan.steps[5].args[13] = test::I32Arg(512);
  plan.kv_caches[0].kind = KvKind::kFull;  // cache 0 stays used: it is not the question here
  plan.kv_caches[0].window = 0;
  for (const int index : {4, 5, 6, 10}) plan.steps[3].args[index].index = 0;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "steps[5].args[13]: window 512 of attention does not match kv cache 1 "
                       "(kv.layers.1), a full cache (window 0)"));
  plan.steps[5].args[13] = test::I32Arg(0);
  plan.steps[5].kernel = EntryPointOf(plan.steps[5]);
  EXPECT_TRUE(ParsePlan(plan).ok()) << ParsePlan(plan);
}

// Token ids and indices are i32, everything else f32: a step may not write one into the other.
TEST(PlanTest, BufferDTypesMatchWhatTheOpUses) {
  Plan plan = TestPlan();
  plan.steps[0].args[0] = test::BufferArg(2);  // embedding ids from the f32 %hidden
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan steps[0].args[0]: ids of embedding is i32 (token ids or "
                       "indices), buffer 2 (%hidden) is f32"));
  plan = TestPlan();
  plan.steps[2].args[2] = test::BufferArg(plan.soft_indices);  // rms_norm output into i32
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "steps[2].args[2]: y of rms_norm is f32 (activations), buffer 7 "
                       "(%soft_indices) is i32"));
  plan = TestPlan();
  plan.steps[1].args[1] = test::BufferArg(plan.soft_embeddings);  // scatter indices from f32
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "steps[1].args[1]: indices of scatter_rows is i32 (token ids or indices), "
                       "buffer 6 (%soft) is f32"));
  // moe_topk writes expert indices: i32, never into an f32 buffer (buffer 4, %k, has 4 per row).
  const auto topk = [](StepArg indices) {
    return test::MakeStep("moe_topk", 128,
                          {test::BufferArg(2), test::WeightArg(1), test::BufferArg(4), indices,
                           test::KindArg(ArgRefKind::kNumTokens), test::I32Arg(4), test::I32Arg(1),
                           test::F32Arg(0.5f)});
  };
  plan = TestPlan();
  test::AddStep(&plan, topk(test::BufferArg(5)));
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "steps[6].args[3]: indices of moe_topk is i32 (token ids or indices), "
                       "buffer 5 (%v) is f32"));
  plan = TestPlan();
  test::AddStep(&plan, topk(test::BufferArg(plan.soft_indices)));
  EXPECT_TRUE(ParsePlan(plan).ok()) << ParsePlan(plan);
  // mask_tokens maps token ids to token ids: both i32.
  plan = TestPlan();
  test::AddStep(&plan, test::MakeStep(
      "mask_tokens", 256,
      {test::BufferArg(plan.input_ids), test::BufferArg(2), test::KindArg(ArgRefKind::kNumTokens),
       test::I32Arg(12), test::I32Arg(13), test::I32Arg(-1), test::I32Arg(0)}));
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "steps[6].args[1]: y of mask_tokens is i32 (token ids or indices), buffer 2 "
                       "(%hidden) is f32"));
  test::LastAdded(plan).args[1] = test::BufferArg(plan.soft_indices);
  EXPECT_TRUE(ParsePlan(plan).ok()) << ParsePlan(plan);
}

// A MoE expert step's path is kMoeGemv (0) or kMoeGrouped (1).
TEST(PlanTest, RejectsAnUnknownMoePath) {
  Plan plan = TestPlan();
  test::AddStep(&plan, test::MakeStep(
      "moe_gate_up", 256,
      {test::BufferArg(2), test::WeightArg(0), test::BufferArg(plan.soft_indices),
       test::BufferArg(4), test::KindArg(ArgRefKind::kNumTokens), test::I32Arg(2), test::I32Arg(2),
       test::I32Arg(2), test::I32Arg(1), test::I32Arg(2)}));
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan steps[6]: moe_gate_up: path must be 0 or 1, found 2"));
  test::LastAdded(plan).args[9] = test::I32Arg(abi::kMoeGemv);
  test::LastAdded(plan).kernel = EntryPointOf(test::LastAdded(plan));
  EXPECT_TRUE(ParsePlan(plan).ok()) << ParsePlan(plan);
}

TEST(PlanTest, RejectsUnknownOpAndStepKind) {
  // Step 2 is the plan's first rms_norm.
  EXPECT_TRUE(StatusIs(ParseEditedBuffer([](fb::PlanT& plan) {
                         plan.steps[2]->kind.AsLaunch()->op = "flash_attention";
                       }),
                       kInvalid,
                       "m.cubin: plan steps[2]: unknown op \"flash_attention\" (not in this "
                       "runtime's op registry); recompile the model with this release's "
                       "spark-compile"));
  // A step of a kind this runtime does not know (the verifier accepts unknown union types).
  std::string payload = SerializePlanSection(TestPlan()).substr(plan_format::kHeaderSize);
  fb::Step* step = fb::GetMutablePlan(payload.data())->mutable_steps()->GetMutableObject(2);
  // (No generated mutator for a union's type field: set it through the table.)
  ASSERT_TRUE(reinterpret_cast<flatbuffers::Table*>(step)->SetField<uint8_t>(
      fb::Step::VT_KIND_TYPE, 9, 0));
  EXPECT_TRUE(StatusIs(ParsePlanSection(SectionFromPayload(payload), "m.cubin").status(),
                       kInvalid,
                       absl::StrCat("m.cubin: plan steps[2].kind: unknown step kind 9 (this "
                                    "runtime reads plan version ",
                                    plan_format::kPlanVersion,
                                    ", whose steps are kernel launches and transfers); recompile "
                                    "the model")));
  // A step without one: refused by the verifier (the kind is required).
  EXPECT_TRUE(StatusIs(ParseEditedBuffer([](fb::PlanT& plan) { plan.steps[2]->kind.Reset(); }),
                       kInvalid, "the plan buffer is malformed"));
}

TEST(PlanTest, RejectsWrongArgumentCount) {
  Plan plan = TestPlan();
  plan.steps[4].args.pop_back();
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan steps[4].args: linear takes 6 arguments (x, w, y, "
                       "num_tokens, out_features, in_features), found 5"));
}

TEST(PlanTest, RejectsBadLaunchConfiguration) {
  Plan plan = TestPlan();
  plan.steps[0].block[0] = 128;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan steps[0].block[0]: the kernel ABI of embedding requires "
                       "blockDim.x == 256, found 128"));
  // Grid rules: per_token and fixed in [0, 2^31], divisor in [1, 2^31]; the blocks are clamped
  // to [1, kMaxLaunchBlocks] (kernel_abi.h LaunchBlocks).
  plan = TestPlan();
  plan.steps[0].grid = {abi::kMaxGridRuleTerm, abi::kMaxGridRuleTerm, 1};
  EXPECT_TRUE(ParsePlan(plan).ok());
  EXPECT_EQ(abi::LaunchBlocks(plan.steps[0].grid, 1), abi::kMaxLaunchBlocks);
  plan.steps[0].grid.divisor = 0;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan steps[0].grid.divisor: expected an integer in [1, "
                       "2147483648], found 0"));
  plan = TestPlan();
  plan.steps[0].grid.per_token = -1;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "steps[0].grid.per_token: expected an integer"));
  plan = TestPlan();
  plan.steps[0].grid.fixed = abi::kMaxGridRuleTerm + 1;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "steps[0].grid.fixed: expected an integer"));
  EXPECT_EQ(abi::LaunchBlocks({0, 0, 1}, 5), 1);
  EXPECT_EQ(abi::LaunchBlocks({3, 10, 4}, 1), 3);   // ceil(max(3, 10) / 4)
  EXPECT_EQ(abi::LaunchBlocks({3, 10, 4}, 8), 6);   // ceil(24 / 4)
  plan = TestPlan();
  plan.steps[0].block[1] = 2;
  EXPECT_TRUE(StatusIs(
      ParsePlan(plan), kInvalid,
      "steps[0].block[1]: expected 1 (kernels are launched in 1-D grids of 1-D blocks), found 2"));
  plan = TestPlan();
  plan.steps[0].shared_bytes = -1;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "plan steps[0].shared_bytes: expected an "
                                                  "integer in [0, 232448], found -1"));
  plan = TestPlan();
  plan.steps[0].shared_bytes = kMaxStepSharedBytes + 1;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "plan steps[0].shared_bytes: expected an "
                                                  "integer in [0, 232448], found 232449"));
  plan = TestPlan();
  plan.steps[0].kernel.clear();
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "plan steps[0].kernel: empty kernel symbol"));
}

// A launch's dynamic shared memory: the step's own plus the registry's for the call's size and
// the plan's activation precision (the dense linears' tiles past the small-batch sizes; nothing
// for decode calls).
TEST(PlanTest, LaunchSharedBytesAddsTheRegistrysPerCallSize) {
  Plan plan;
  Step step;
  step.op = abi::OpId::kLinear;
  EXPECT_EQ(LaunchSharedBytes(plan, step, 1), 0);
  EXPECT_EQ(LaunchSharedBytes(plan, step, abi::kLinearSmallBatchMaxTokens), 0);
  EXPECT_EQ(LaunchSharedBytes(plan, step, abi::kLinearSmallBatchMaxTokens + 1),
            abi::kLinearSplitTileSharedBytes);
  plan.activation_precision = DType::kBF16;
  EXPECT_EQ(LaunchSharedBytes(plan, step, abi::kLinearSmallBatchMaxTokens + 1),
            abi::kLinearTileSharedBytes);
  EXPECT_EQ(LaunchSharedBytes(plan, step, 1), 0);
  for (abi::OpId op : {abi::OpId::kLinearNvfp4, abi::OpId::kLinearFp8}) {
    step.op = op;
    EXPECT_EQ(LaunchSharedBytes(plan, step, 1024), abi::kLinearTileSharedBytes)
        << abi::Spec(op).op;
  }
  step.op = abi::OpId::kRmsNorm;
  step.shared_bytes = 1024;
  EXPECT_EQ(LaunchSharedBytes(plan, step, 1024), 1024);
  step.op = abi::OpId::kLinear;
  EXPECT_EQ(LaunchSharedBytes(plan, step, 1024), 1024 + abi::kLinearTileSharedBytes);
}

TEST(PlanTest, RejectsOutOfRangeIds) {
  Plan plan = TestPlan();
  plan.steps[4].args[2] = test::BufferArg(11);
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan steps[4].args[2]: buffer id 11 is out of range (the plan "
                       "has 11 buffers)"));
  plan = TestPlan();
  plan.steps[4].args[1] = test::WeightArg(-1);
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "steps[4].args[1]: weight id -1 is out of range (the plan has 2 weights)"));
  plan = TestPlan();
  plan.steps[3].args[10] = test::KindArg(ArgRefKind::kKvCapacity, 2);
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "steps[3].args[10]: kv cache id 2 is out of range (the plan has 2 kv "
                       "caches)"));
  plan = TestPlan();
  plan.output_logits = 99;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan outputs.logits: buffer id 99 is out of range"));
  plan = TestPlan();
  plan.input_ids = -1;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "plan inputs.ids: buffer id -1 is out of range"));
}

TEST(PlanTest, ValidateRejectsArenaBeyondJsonRange) {
  Plan plan = TestPlan();
  plan.arena_bytes = uint64_t{1} << 63;
  EXPECT_TRUE(StatusIs(ValidatePlan(plan, "m.cubin"), kInvalid,
                       "m.cubin: plan arena_bytes: expected at most 9223372036854775807, found "
                       "9223372036854775808"));
  EXPECT_TRUE(ValidatePlan(TestPlan(), "m.cubin").ok());
}

TEST(PlanTest, RejectsNonFiniteF32) {
  Plan plan = TestPlan();
  plan.steps[0].args[6].f32 = std::nanf("");
  EXPECT_TRUE(StatusIs(ValidatePlan(plan, "m.cubin"), kInvalid,
                       "m.cubin: plan steps[0].args[6]: f32 literal is not finite"));
}

TEST(PlanTest, RejectsEntryBuffersOfTheWrongType) {
  Plan plan = TestPlan();
  plan.input_ids = 2;  // %hidden, f32 [4]
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan inputs.ids: buffer 2 (%hidden) is f32 [4] per row; the "
                       "runtime uses it as i32 []"));
  plan = TestPlan();
  plan.model.vocab_size = 32;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "plan outputs.logits: buffer 3 (%logits) is f32 [16] per row; the runtime "
                       "uses it as f32 [32]"));
  plan = TestPlan();
  plan.soft_indices = -1;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan inputs: soft_embeddings and soft_indices must both be "
                       "present or both absent"));
}

TEST(PlanTest, PlanWithoutSoftInputsRoundTrips) {
  Plan plan = TestPlan();
  plan.soft_embeddings = -1;
  plan.soft_indices = -1;
  plan.steps.erase(plan.steps.begin() + 1);  // scatter_rows
  BuildPrograms(&plan);
  const absl::StatusOr<Plan> parsed = ParsePlanSection(SerializePlanSection(plan), "m.cubin");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->soft_embeddings, -1);
  EXPECT_EQ(parsed->soft_indices, -1);
  EXPECT_FALSE(absl::StrContains(DumpJson(plan), "soft_embeddings"));
}

TEST(PlanTest, RejectsBadModelFacts) {
  Plan plan = TestPlan();
  plan.model.eos_token_ids = {16};
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan model.eos_token_ids[0]: expected an integer in [0, 15], "
                       "found 16"));
  plan = TestPlan();
  plan.model.eos_token_ids.clear();
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "plan model.eos_token_ids: expected at least one id, found none"));
  plan = TestPlan();
  plan.model.vocab_size = 0;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "plan model.vocab_size: expected an integer in [1, 2147483647], found 0"));
  plan = TestPlan();
  plan.max_tokens = 0;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan max_tokens: expected an integer in [1, 2147483647], "
                       "found 0"));
  plan = TestPlan();
  plan.target = "sm90";
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan target: invalid target \"sm90\": expected "
                       "sm_<major><minor>[a|f]"));
}

// A weight assembled from checkpoint tensors (MoE experts stored one matrix per expert): its
// parts and their shape round-trip, and parts that cannot make the weight are refused.
TEST(PlanTest, WeightsAssembledFromPartsRoundTripAndAreChecked) {
  Plan plan = TestPlan();
  plan.weights[0].parts = {"e.0.weight", "e.1.weight", "e.2.weight", "e.3.weight"};
  plan.weights[0].part_shape = {4, 4};
  absl::StatusOr<Plan> parsed = ParsePlanSection(SerializePlanSection(plan), "m.cubin");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->weights[0].parts, plan.weights[0].parts);
  EXPECT_EQ(parsed->weights[0].part_shape, plan.weights[0].part_shape);
  EXPECT_TRUE(parsed->weights[1].parts.empty());

  Plan bad = plan;
  bad.weights[0].part_shape = {4, 3};
  EXPECT_TRUE(StatusIs(ParsePlan(bad), kInvalid,
                       "m.cubin: plan weights[0].part_shape: 4 parts of [4, 3] do not make bf16 "
                       "[16, 4]"));
  bad = plan;
  bad.weights[0].parts[2] = bad.weights[0].parts[1];
  EXPECT_TRUE(StatusIs(ParsePlan(bad), kInvalid,
                       "m.cubin: plan weights[0].parts[2]: part e.1.weight is given twice"));
  bad = plan;
  bad.weights[0].parts[3].clear();
  EXPECT_TRUE(StatusIs(ParsePlan(bad), kInvalid,
                       "m.cubin: plan weights[0].parts[3]: empty part name"));
  bad = plan;
  bad.weights[0].dtype = DType::kF4E2M1FN;
  bad.weights[0].shape = {2, 4, 8};
  bad.weights[0].part_shape = {2, 3};
  EXPECT_TRUE(StatusIs(ParsePlan(bad), kInvalid,
                       "m.cubin: plan weights[0].part_shape: f4E2M1FN parts have an even last "
                       "dimension (two codes per byte), found [2, 3]"));
}

// A weight the runtime inverts (compressed-tensors' NVFP4 global scales): the transform
// round-trips; on a weight other than f32, or spelt otherwise, it is refused.
TEST(PlanTest, WeightTransformsRoundTripAndAreChecked) {
  Plan plan = TestPlan();
  plan.weights[1].dtype = DType::kF32;
  plan.weights[1].transform = WeightTransform::kReciprocal;
  absl::StatusOr<Plan> parsed = ParsePlanSection(SerializePlanSection(plan), "m.cubin");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->weights[1].transform, WeightTransform::kReciprocal);
  EXPECT_EQ(parsed->weights[0].transform, WeightTransform::kNone);
  EXPECT_NE(DumpJson(plan).find("\"transform\":\"reciprocal\""), std::string::npos);
  EXPECT_EQ(DumpJson(TestPlan()).find("transform"), std::string::npos);

  Plan bad = plan;
  bad.weights[1].dtype = DType::kBF16;
  EXPECT_TRUE(StatusIs(ParsePlan(bad), kInvalid,
                       "m.cubin: plan weights[1].transform: the reciprocal of a bf16 weight: only "
                       "f32 weights (scales) are inverted"));
}

TEST(PlanTest, RejectsBadWeights) {
  Plan plan = TestPlan();
  plan.weights[1].dtype = DType::kI32;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       absl::StrCat("m.cubin: plan weights[1].dtype: plan version ",
                                    plan_format::kPlanVersion,
                                    " weights are bf16, f32, f8E4M3FN or f4E2M1FN, found i32")));
  plan = TestPlan();
  plan.weights[1].dtype = DType::kF4E2M1FN;
  plan.weights[1].shape = {3};
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan weights[1].shape: an f4E2M1FN weight has an even last "
                       "dimension (two codes per byte), found [3]"));
  // A weight of another element type than the step's argument takes (the embedding table is
  // bf16 in the registry).
  plan = TestPlan();
  plan.weights[0].dtype = DType::kF8E4M3FN;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan steps[0].args[1]: table of embedding is bf16, weight 0 "
                       "(model.embed_tokens.weight) is f8E4M3FN"));
  plan = TestPlan();
  plan.weights[1].name = plan.weights[0].name;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan weights[1]: weight model.embed_tokens.weight is already "
                       "weights[0]"));
  plan = TestPlan();
  plan.weights[1].shape = {-4};
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "plan weights[1].shape[0]: expected an integer >= 1, found -4"));
  plan = TestPlan();
  plan.weights[1].shape = {int64_t{1} << 62, 8};
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "plan weights[1].shape: [4611686018427387904, 8] is too large"));
  plan = TestPlan();
  plan.weights[1].name.clear();
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "plan weights[1].name: empty name"));
}

// A bf16 cache round-trips, its steps must say cache_dtype 1, and nothing else is a cache dtype.
TEST(PlanTest, KvCacheDTypeMatchesItsSteps) {
  Plan plan = TestPlan();
  plan.kv_caches[1].dtype = DType::kBF16;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "steps[3].args[11]: cache_dtype 0 of kv_write does not match kv cache 1 "
                       "(kv.layers.1), bf16 (cache_dtype 1)"));
  plan.steps[3].args[11] = test::I32Arg(abi::kCacheBF16);
  plan.steps[3].kernel = EntryPointOf(plan.steps[3]);
  absl::StatusOr<Plan> parsed = ParsePlanSection(SerializePlanSection(plan), "m.cubin");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->kv_caches[1].dtype, DType::kBF16);
  EXPECT_EQ(parsed->kv_caches[1].part_bytes(10), 10u * 1 * 4 * 2);
  EXPECT_EQ(parsed->kv_caches[0].part_bytes(10), 10u * 1 * 4 * 4);
  plan.steps[3].args[11] = test::I32Arg(2);
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "cache_dtype 2 of kv_write does not match"));
  plan.steps[3].args[11] = test::I32Arg(abi::kCacheBF16);
  test::AddStep(&plan, test::MakeStep(
      "attention", 128,
      {test::BufferArg(4), test::BufferArg(plan.input_positions),
       test::BufferArg(plan.input_sequences),
       test::KindArg(ArgRefKind::kKvBlockTable, 1), test::KindArg(ArgRefKind::kKCache, 1),
       test::KindArg(ArgRefKind::kVCache, 1),
       test::BufferArg(5), test::KindArg(ArgRefKind::kNull),
       test::KindArg(ArgRefKind::kNumTokens), test::I32Arg(1), test::I32Arg(1), test::I32Arg(4),
       test::KindArg(ArgRefKind::kKvCapacity, 1), test::I32Arg(0), test::F32Arg(1.0f),
       test::I32Arg(1), test::I32Arg(0), test::I32Arg(abi::kCacheF32),
       test::KindArg(ArgRefKind::kNull)}));
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "args[17]: cache_dtype 0 of attention does not match kv cache 1 "
                       "(kv.layers.1), bf16 (cache_dtype 1)"));
  test::LastAdded(plan).args[17] = test::I32Arg(abi::kCacheBF16);
  test::LastAdded(plan).kernel = EntryPointOf(test::LastAdded(plan));
  EXPECT_TRUE(ParsePlan(plan).ok()) << ParsePlan(plan);
  plan = TestPlan();
  plan.kv_caches[0].dtype = DType::kI32;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan kv_caches[0].dtype: a KV cache holds f32 or bf16, found i32"));
}

TEST(PlanTest, RejectsBadKvCaches) {
  Plan plan = TestPlan();
  plan.kv_caches[0].window = 0;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan kv_caches[0].window: expected an integer in "
                       "[1, 2147483647], found 0"));
  plan = TestPlan();
  plan.kv_caches[1].window = 64;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid,
                       "m.cubin: plan kv_caches[1].window: a full cache has no window, found 64"));
  plan = TestPlan();
  plan.kv_caches[1].head_dim = 0;
  EXPECT_TRUE(StatusIs(ParsePlan(plan), kInvalid, "plan kv_caches[1].head_dim: expected an "
                                                  "integer in [1, 2147483647], found 0"));
}

// A small image encoder plan for TestPlan (hidden 4): the pixel patches through shift_scale and
// a linear to the hidden size, then pooled by position into the embeddings.
Plan TestImageEncoder(const Plan& text) {
  Plan plan;
  plan.version = plan_format::kPlanVersion;
  plan.target = text.target;
  plan.max_tokens = 18;
  plan.model = text.model;
  uint64_t offset = 0;
  const auto add_buffer = [&](const std::string& name, DType dtype, std::vector<int64_t> row) {
    BufferInfo buffer{name, dtype, std::move(row), offset};
    offset += buffer.row_bytes() * plan.max_tokens;
    plan.buffers.push_back(buffer);
    return static_cast<int64_t>(plan.buffers.size() - 1);
  };
  plan.input_pixel_patches = add_buffer("%pixel_patches", DType::kF32, {kPixelPatchValues});
  plan.input_patch_positions = add_buffer("%patch_positions", DType::kI32, {2});
  const int64_t hidden = add_buffer("hidden", DType::kF32, {4});
  plan.output_embeddings = add_buffer("embeddings", DType::kF32, {4});
  plan.arena_bytes = offset;
  plan.weights.push_back({"model.embed_vision.weight", DType::kBF16, {4, kPixelPatchValues}});
  const StepArg num_tokens = KindArg(ArgRefKind::kNumTokens);
  plan.steps.push_back(MakeStep("shift_scale", 256,
                                {BufferArg(plan.input_pixel_patches),
                                 BufferArg(plan.input_pixel_patches), num_tokens,
                                 I32Arg(kPixelPatchValues), F32Arg(0.5f), F32Arg(2.0f)}));
  plan.steps.push_back(MakeStep("linear", 256,
                                {BufferArg(plan.input_pixel_patches), WeightArg(0),
                                 BufferArg(hidden), num_tokens, I32Arg(4),
                                 I32Arg(kPixelPatchValues)}));
  plan.weights.push_back({"model.position_table", DType::kBF16, {2, 16, 4}});
  plan.steps.push_back(MakeStep("patch_position_embedding", 256,
                                {BufferArg(hidden), BufferArg(plan.input_patch_positions),
                                 WeightArg(1), BufferArg(hidden), num_tokens, I32Arg(4),
                                 I32Arg(16)}));
  plan.steps.push_back(MakeStep("pool_by_position", 256,
                                {BufferArg(hidden), BufferArg(plan.input_patch_positions),
                                 BufferArg(plan.output_embeddings), num_tokens, I32Arg(4),
                                 I32Arg(3), F32Arg(2.0f)}));
  BuildPrograms(&plan);
  return plan;
}

// TestPlan with an image encoder and the image ids it needs.
Plan TestPlanWithImageEncoder() {
  Plan plan = TestPlan();
  plan.model.image_token_id = 12;
  plan.model.boi_token_id = 10;
  plan.model.eoi_token_id = 11;
  plan.image_encoder = std::make_shared<const Plan>(TestImageEncoder(plan));
  return plan;
}

TEST(PlanTest, AnImageEncoderRoundTripsNestedInTheTextPlan) {
  const Plan plan = TestPlanWithImageEncoder();
  ASSERT_TRUE(ValidatePlan(plan, "m.cubin").ok()) << ValidatePlan(plan, "m.cubin");
  absl::StatusOr<Plan> read = ParsePlanSection(SerializePlanSection(plan), "m.cubin");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->model.image_token_id, 12);
  EXPECT_EQ(read->model.boi_token_id, 10);
  EXPECT_EQ(read->model.eoi_token_id, 11);
  ASSERT_NE(read->image_encoder, nullptr);
  const Plan& encoder = *read->image_encoder;
  EXPECT_TRUE(encoder.is_image_encoder());
  EXPECT_FALSE(read->is_image_encoder());
  EXPECT_EQ(encoder.max_tokens, 18);
  EXPECT_EQ(encoder.input_pixel_patches, 0);
  EXPECT_EQ(encoder.input_patch_positions, 1);
  EXPECT_EQ(encoder.output_embeddings, 3);
  EXPECT_EQ(encoder.input_ids, -1);
  EXPECT_EQ(encoder.steps.size(), 4u);
  EXPECT_EQ(encoder.weights[0].name, "model.embed_vision.weight");
  EXPECT_EQ(SerializePlanSection(*read), SerializePlanSection(plan));
  const std::string json = DumpJson(plan);
  EXPECT_TRUE(absl::StrContains(json, R"("image_encoder":{)")) << json;
  EXPECT_TRUE(absl::StrContains(json, R"("inputs":{"pixel_patches":0,"patch_positions":1})"))
      << json;
  EXPECT_TRUE(absl::StrContains(json, R"("outputs":{"embeddings":3})")) << json;
  // A text plan without one dumps no image ids.
  EXPECT_FALSE(absl::StrContains(DumpJson(TestPlan()), "image_token_id"));
}

TEST(PlanTest, AnImageEncoderIsCheckedAsOne) {
  const auto with_encoder = [](const std::function<void(Plan&)>& edit_encoder,
                               const std::function<void(Plan&)>& edit_text = nullptr) {
    Plan plan = TestPlanWithImageEncoder();
    Plan encoder = *plan.image_encoder;
    edit_encoder(encoder);
    if (edit_text) edit_text(plan);
    plan.image_encoder = std::make_shared<const Plan>(std::move(encoder));
    return ParsePlanAsIs(plan);
  };
  EXPECT_TRUE(StatusIs(with_encoder([](Plan& e) { e.input_ids = 0; }), kInvalid,
                       "m.cubin (image encoder): plan inputs.ids: expected -1 in an image encoder "
                       "plan, found 0"));
  EXPECT_TRUE(StatusIs(with_encoder([](Plan& e) {
                         e.kv_caches.push_back({"kv.layers.0", KvKind::kFull, 0, 1, 4});
                       }),
                       kInvalid, "an image encoder plan has no KV caches"));
  EXPECT_TRUE(StatusIs(with_encoder([](Plan& e) { e.output_embeddings = -1; }), kInvalid,
                       "outputs.embeddings"));
  EXPECT_TRUE(StatusIs(with_encoder([](Plan& e) { e.target = "sm_121a"; }), kInvalid,
                       "expected the target and activation precision of the text plan"));
  EXPECT_TRUE(StatusIs(with_encoder([](Plan&) {}, [](Plan& t) { t.model.boi_token_id = -1; }),
                       kInvalid, "needs model.image_token_id, boi_token_id, eoi_token_id"));
  EXPECT_TRUE(StatusIs(with_encoder([](Plan&) {}, [](Plan& t) { t.model.eoi_token_id = 16; }),
                       kInvalid, "model.eoi_token_id"));
  // A text plan where the encoder goes, and an encoder's input in a text plan.
  Plan plan = TestPlanWithImageEncoder();
  plan.image_encoder = std::make_shared<const Plan>(TestPlan());
  EXPECT_TRUE(StatusIs(ParsePlanAsIs(plan), kInvalid,
                       "expected an image encoder plan (inputs.pixel_patches), found a text plan"));
  plan = TestPlan();
  plan.input_patch_positions = 0;
  EXPECT_TRUE(StatusIs(ParsePlanAsIs(plan), kInvalid,
                       "plan inputs.patch_positions: expected -1 in a text plan, found 0"));
}

TEST(PlanTest, ImageEncoderCallsAreChecked) {
  const Plan encoder = TestImageEncoder(TestPlan());
  const auto check = [&](int64_t patches, int32_t coordinate = 0) {
    std::vector<float> pixels(static_cast<size_t>(patches * kPixelPatchValues), 0.5f);
    std::vector<int32_t> positions(static_cast<size_t>(2 * patches), 0);
    if (patches > 0) positions.back() = coordinate;
    return CheckImageEncoderCall(encoder, pixels, positions);
  };
  EXPECT_TRUE(check(9).ok());
  EXPECT_TRUE(check(18, 15).ok());
  EXPECT_TRUE(StatusIs(check(0), kInvalid, "the image encoder takes a multiple of 9 from 9 to 18"));
  EXPECT_TRUE(StatusIs(check(10), kInvalid, "an image of 10 patches"));
  EXPECT_TRUE(StatusIs(check(27), kInvalid, "(2 soft tokens, spark-compile --max-image-tokens)"));
  EXPECT_TRUE(StatusIs(check(9, 16), kInvalid,
                       "patch 8 has y = 16, outside the vision tower's position table [0, 16)"));
  EXPECT_TRUE(StatusIs(check(9, -1), kInvalid, "patch 8 has y = -1"));
  std::vector<float> pixels(9 * kPixelPatchValues - 1);
  std::vector<int32_t> positions(18);
  EXPECT_TRUE(StatusIs(CheckImageEncoderCall(encoder, pixels, positions), kInvalid,
                       "do not describe the same patches"));
  // A text plan has no image encoder to run.
  EXPECT_FALSE(CheckImageEncoderCall(TestPlan(), {}, {}).ok());
}

TEST(PlanTest, ArgRefKindNamesMatchTheJson) {
  EXPECT_EQ(ArgRefKindName(ArgRefKind::kKCache), "k_cache");
  EXPECT_EQ(ArgRefKindName(ArgRefKind::kNumSoftTokens), "num_soft_tokens");
  EXPECT_TRUE(absl::StrContains(DumpJson(TestPlan()), R"({"kv_capacity":1})"));
}

TEST(PlanTest, KvCapacityFollowsThePlanFormatRule) {
  const KvCacheInfo full{"full", KvKind::kFull, 0, 1, 4};
  const KvCacheInfo sliding{"sliding", KvKind::kSliding, 512, 1, 4};
  EXPECT_EQ(KvCapacity(full, 4096, 64), 4096);
  EXPECT_EQ(KvCapacity(sliding, 4096, 64), 576);  // 575 slots, whole blocks
  EXPECT_EQ(KvCapacity(sliding, 300, 64), 304);
}

}  // namespace
}  // namespace rt
}  // namespace spark
