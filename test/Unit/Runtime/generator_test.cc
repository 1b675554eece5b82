#include "spark/runtime/generator.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "runtime_test_util.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/host_kernels.h"
#include "spark/runtime/plan.h"
#include "spark/runtime/safetensors.h"

namespace spark {
namespace rt {
namespace {

using testing_util::ErrorContains;

constexpr int kVocab = 10;
constexpr int kHidden = 2;
constexpr int32_t kEos = 9;

// Logits that make `id` followed greedily by (id + 1) % kVocab; the position is encoded in the
// last column so that rows are distinguishable (it never wins the argmax).
std::vector<float> FakeRow(int32_t id, int32_t position) {
  std::vector<float> row(kVocab, 0.0f);
  row[(id + 1) % kVocab] = 100.0f;
  row[kVocab - 1] += position * 0.01f;
  return row;
}

// Records every RunStep call and returns FakeRow logits.
class FakeExecutor : public Executor {
 public:
  struct Call {
    std::vector<int32_t> ids;
    std::vector<int32_t> positions;
    std::vector<int32_t> soft_indices;
    std::vector<float> soft_embeddings;
    std::vector<int32_t> last_visible;
  };

  absl::StatusOr<std::unique_ptr<SequenceState>> NewSequence(int64_t max_length) override {
    return std::make_unique<SequenceState>(this, max_length);
  }
  MemoryUsage memory_usage() const override { return MemoryUsage(); }
  absl::Status RunBatch(absl::Span<const SequenceStep> parts,
                        std::vector<StepResult>* results) override {
    EXPECT_EQ(parts.size(), 1u);  // the generator runs one sequence
    results->assign(1, StepResult());
    return RunOne(*parts[0].sequence, parts[0].call, &(*results)[0]);
  }
  absl::Status RunOne(SequenceState& sequence, const StepCall& step, StepResult* result) {
    EXPECT_EQ(sequence.owner(), this);
    row_requests.push_back(step.rows);
    samplings.push_back(step.sampling);
    const absl::Span<const int32_t> ids = step.ids, positions = step.positions;
    Call call{{ids.begin(), ids.end()}, {positions.begin(), positions.end()}, {}, {}, {}};
    if (step.soft != nullptr) {
      call.soft_indices.assign(step.soft->indices.begin(), step.soft->indices.end());
      call.soft_embeddings.assign(step.soft->embeddings.begin(), step.soft->embeddings.end());
      call.last_visible.assign(step.soft->last_visible.begin(), step.soft->last_visible.end());
    }
    calls.push_back(call);
    const auto row = [&](size_t t) {
      return flat ? std::vector<float>(kVocab, 0.0f) : FakeRow(ids[t], positions[t]);
    };
    result->token = -1;
    result->logits.clear();
    if (step.rows != LogitRows::kNone) {
      // The last row's token, drawn as the plan's sample step draws it (its host reference).
      const std::vector<float> last = row(ids.size() - 1);
      int32_t words[abi::kSamplingParamWords];
      std::memcpy(words, &step.sampling, sizeof(words));
      host::Sample(last.data(), words, &result->token, 1, kVocab);
    }
    if (step.rows == LogitRows::kAll) {
      for (size_t t = 0; t < ids.size(); ++t) {
        const std::vector<float> r = row(t);
        result->logits.insert(result->logits.end(), r.begin(), r.end());
      }
    }
    return fail_with;
  }
  std::string name() const override { return "fake"; }

  std::vector<Call> calls;
  std::vector<LogitRows> row_requests;  // per call
  std::vector<abi::SamplingParams> samplings;  // per call
  absl::Status fail_with;
  bool flat = false;  // uniform logits instead of FakeRow
};

Plan FakePlan() {
  Plan plan;
  plan.max_tokens = 4;
  plan.model.vocab_size = kVocab;
  plan.model.hidden_size = kHidden;
  plan.model.max_position_embeddings = 128;
  plan.model.eos_token_ids = {kEos};
  plan.soft_embeddings = 5;
  plan.soft_indices = 6;
  return plan;
}

// GenerateOptions and the length of the sequence to generate on.
struct Opts : GenerateOptions {
  int64_t max_length = 64;
};

Opts Options(int64_t max_new_tokens, int64_t max_length = 64) {
  Opts options;
  options.max_new_tokens = max_new_tokens;
  options.max_length = max_length;
  return options;
}

class GeneratorTest : public ::testing::Test {
 protected:
  absl::StatusOr<GenerateResult> Run(const std::vector<int32_t>& prompt,
                                     const Opts& options,
                                     const SoftTokens* soft = nullptr) {
    absl::StatusOr<std::unique_ptr<SequenceState>> sequence =
        executor_.NewSequence(options.max_length);
    if (!sequence.ok()) return sequence.status();
    return Generate(executor_, **sequence, plan_, prompt, soft, options);
  }

  FakeExecutor executor_;
  Plan plan_ = FakePlan();
};

TEST_F(GeneratorTest, PrefillRunsInChunksOfMaxTokensThenDecodesOneAtATime) {
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 0, 1};
  absl::StatusOr<GenerateResult> result = Run(prompt, Options(3));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->tokens, (std::vector<int32_t>{2, 3, 4}));
  ASSERT_EQ(executor_.calls.size(), 5u);
  EXPECT_EQ(executor_.calls[0].positions, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(executor_.calls[1].positions, (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(executor_.calls[2].ids, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(executor_.calls[2].positions, (std::vector<int32_t>{8, 9}));
  EXPECT_EQ(executor_.calls[3].ids, (std::vector<int32_t>{2}));
  EXPECT_EQ(executor_.calls[3].positions, (std::vector<int32_t>{10}));
  EXPECT_EQ(executor_.calls[4].ids, (std::vector<int32_t>{3}));
  EXPECT_EQ(executor_.calls[4].positions, (std::vector<int32_t>{11}));
  EXPECT_EQ(result->prefill_tokens, 10);
  EXPECT_EQ(result->decode_tokens, 2);
  EXPECT_GE(result->prefill_seconds, 0.0);
  EXPECT_GE(result->decode_tokens_per_second(), 0.0);
  EXPECT_FALSE(result->stopped_at_eos);
  EXPECT_TRUE(result->notices.empty());
}

TEST_F(GeneratorTest, StopsAtEos) {
  absl::StatusOr<GenerateResult> result = Run({5}, Options(32));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->tokens, (std::vector<int32_t>{6, 7, 8, kEos}));
  EXPECT_TRUE(result->stopped_at_eos);
  EXPECT_EQ(executor_.calls.size(), 4u);  // prefill + 3 decode steps; none after the EOS
}

TEST_F(GeneratorTest, StopsAtMaxNewTokens) {
  absl::StatusOr<GenerateResult> result = Run({5}, Options(2));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->tokens, (std::vector<int32_t>{6, 7}));
  EXPECT_EQ(executor_.calls.size(), 2u);
}

TEST_F(GeneratorTest, CapsNewTokensAtMaxLengthWithANotice) {
  absl::StatusOr<GenerateResult> result = Run({0, 1, 2}, Options(10, /*max_length=*/5));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->tokens, (std::vector<int32_t>{3, 4}));
  ASSERT_EQ(result->notices.size(), 1u);
  EXPECT_EQ(result->notices[0],
            "the prompt (3 tokens) + 10 new tokens exceed the max length 5; generating at most 2");
  EXPECT_EQ(executor_.calls.back().positions, (std::vector<int32_t>{3}));
}

TEST_F(GeneratorTest, PromptFillingMaxLengthGeneratesNothing) {
  absl::StatusOr<GenerateResult> result = Run({0, 1, 2}, Options(4, /*max_length=*/3));
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->tokens.empty());
  EXPECT_EQ(result->notices.size(), 1u);
  EXPECT_TRUE(executor_.calls.empty());
}

TEST_F(GeneratorTest, CollectsOneLogitsRowPerProcessedPosition) {
  Opts options = Options(4);
  options.collect_logits = true;
  const std::vector<int32_t> prompt = {0, 1, 2, 3, 4, 0};
  absl::StatusOr<GenerateResult> result = Run(prompt, options);
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(result->tokens, (std::vector<int32_t>{1, 2, 3, 4}));
  // 6 prompt positions + the inputs of 3 decode steps = P + N - 1.
  ASSERT_EQ(result->logits_rows, 9);
  ASSERT_EQ(result->logits.size(), 9u * kVocab);
  const std::vector<int32_t> inputs = {0, 1, 2, 3, 4, 0, 1, 2, 3};
  for (int r = 0; r < 9; ++r) {
    const std::vector<float> row(result->logits.begin() + r * kVocab,
                                 result->logits.begin() + (r + 1) * kVocab);
    EXPECT_EQ(row, FakeRow(inputs[r], r)) << "row " << r;
  }
}

TEST_F(GeneratorTest, LogitsRowsStopWithEos) {
  Opts options = Options(32);
  options.collect_logits = true;
  absl::StatusOr<GenerateResult> result = Run({6, 6}, options);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->tokens, (std::vector<int32_t>{7, 8, kEos}));
  EXPECT_EQ(result->logits_rows, 2 + 3 - 1);
}

TEST_F(GeneratorTest, NoLogitsUnlessAsked) {
  absl::StatusOr<GenerateResult> result = Run({1}, Options(3));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->logits_rows, 0);
  EXPECT_TRUE(result->logits.empty());
}

TEST_F(GeneratorTest, SoftTokensAreRebasedPerChunkAndOutOfRangeRowsSkipped) {
  SoftTokens soft;
  soft.hidden = kHidden;
  soft.positions = {1, 5, -2, 100, 9, 4};
  soft.embeddings = {10, 11, 50, 51, -20, -21, 1000, 1001, 90, 91, 40, 41};
  absl::StatusOr<GenerateResult> result = Run({0, 1, 2, 3, 4, 5, 6, 7, 8, 0}, Options(2), &soft);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(executor_.calls.size(), 4u);
  EXPECT_EQ(executor_.calls[0].soft_indices, (std::vector<int32_t>{1}));
  EXPECT_EQ(executor_.calls[0].soft_embeddings, (std::vector<float>{10, 11}));
  EXPECT_EQ(executor_.calls[1].soft_indices, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(executor_.calls[1].soft_embeddings, (std::vector<float>{50, 51, 40, 41}));
  EXPECT_EQ(executor_.calls[2].soft_indices, (std::vector<int32_t>{1}));
  EXPECT_EQ(executor_.calls[2].soft_embeddings, (std::vector<float>{90, 91}));
  EXPECT_TRUE(executor_.calls[3].soft_indices.empty());  // decode never merges
}

SoftTokens SoftAt(std::vector<int64_t> positions) {
  SoftTokens soft;
  soft.hidden = kHidden;
  soft.positions = std::move(positions);
  soft.embeddings.assign(soft.positions.size() * kHidden, 0.5f);
  return soft;
}

TEST(LastVisiblePositionsTest, EachRunOfSoftPositionsIsOneBlock) {
  // Two images (2..4 and 6..7), a lone soft token at 9, rows outside the prompt ignored.
  const SoftTokens soft = SoftAt({3, 2, 4, 6, 7, 9, -1, 12});
  EXPECT_EQ(LastVisiblePositions(11, soft),
            (std::vector<int32_t>{0, 1, 4, 4, 4, 5, 7, 7, 8, 9, 10}));
  // A block cut by the end of the prompt ends there.
  EXPECT_EQ(LastVisiblePositions(4, SoftAt({2, 3, 4, 5})), (std::vector<int32_t>{0, 1, 3, 3}));
  EXPECT_EQ(LastVisiblePositions(3, SoftAt({})), (std::vector<int32_t>{0, 1, 2}));
}

std::vector<std::pair<int64_t, int64_t>> Chunks(int64_t length, int64_t max_tokens,
                                                const std::vector<int32_t>& last) {
  absl::StatusOr<std::vector<PrefillChunk>> chunks = PlanPrefillChunks(length, max_tokens, last);
  EXPECT_TRUE(chunks.ok()) << chunks.status();
  std::vector<std::pair<int64_t, int64_t>> out;
  if (chunks.ok()) {
    for (const PrefillChunk& c : *chunks) out.push_back({c.begin, c.end});
  }
  return out;
}

TEST(PlanPrefillChunksTest, ChunksNeverSplitAnImageBlock) {
  using V = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(Chunks(10, 4, {}), (V{{0, 4}, {4, 8}, {8, 10}}));  // causal: plain chunks
  // Block 2..4 would be cut at 4: the first chunk ends before it.
  const std::vector<int32_t> last = LastVisiblePositions(10, SoftAt({2, 3, 4}));
  EXPECT_EQ(Chunks(10, 4, last), (V{{0, 2}, {2, 6}, {6, 10}}));
  // A block that ends exactly at a chunk boundary, and one that fills a whole chunk.
  EXPECT_EQ(Chunks(10, 4, LastVisiblePositions(10, SoftAt({1, 2, 3}))), (V{{0, 4}, {4, 8}, {8, 10}}));
  EXPECT_EQ(Chunks(9, 4, LastVisiblePositions(9, SoftAt({3, 4, 5, 6}))),
            (V{{0, 3}, {3, 7}, {7, 9}}));
}

TEST(PlanPrefillChunksTest, ABlockLongerThanAStepIsAnErrorWithTheFix) {
  const std::vector<int32_t> last = LastVisiblePositions(10, SoftAt({1, 2, 3, 4, 5}));
  EXPECT_TRUE(ErrorContains(PlanPrefillChunks(10, 4, last).status(),
                            "the image block at prompt positions 1..5 has 5 soft tokens, more "
                            "than the 4 tokens one step of this plan processes"));
  EXPECT_TRUE(ErrorContains(PlanPrefillChunks(10, 4, last).status(),
                            "recompile with spark-compile --max-tokens 5"));
}

TEST_F(GeneratorTest, VisionBlocksReachTheExecutorWithTheirChunk) {
  plan_.input_last_visible = 7;
  const SoftTokens soft = SoftAt({2, 3, 4});
  absl::StatusOr<GenerateResult> result = Run({0, 1, 2, 3, 4, 5, 6, 7}, Options(2), &soft);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(executor_.calls.size(), 4u);
  EXPECT_EQ(executor_.calls[0].positions, (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(executor_.calls[0].last_visible.empty());  // no soft rows: causal
  EXPECT_EQ(executor_.calls[1].positions, (std::vector<int32_t>{2, 3, 4, 5}));
  EXPECT_EQ(executor_.calls[1].soft_indices, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(executor_.calls[1].last_visible, (std::vector<int32_t>{4, 4, 4, 5}));
  EXPECT_EQ(executor_.calls[2].positions, (std::vector<int32_t>{6, 7}));
  EXPECT_TRUE(executor_.calls[3].last_visible.empty());  // decode is causal
}

TEST_F(GeneratorTest, CausalModelsChunkAcrossSoftRuns) {
  // Without a last_visible input the blocks do not matter: plain chunks, no last_visible.
  const SoftTokens soft = SoftAt({2, 3, 4});
  absl::StatusOr<GenerateResult> result = Run({0, 1, 2, 3, 4, 5, 6, 7}, Options(1), &soft);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(executor_.calls.size(), 2u);
  EXPECT_EQ(executor_.calls[0].positions, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_TRUE(executor_.calls[0].last_visible.empty());
}

TEST_F(GeneratorTest, RejectsSoftTokensOfTheWrongWidth) {
  SoftTokens soft;
  soft.hidden = 3;
  soft.positions = {0};
  soft.embeddings = {1, 2, 3};
  EXPECT_TRUE(ErrorContains(Run({0}, Options(1), &soft).status(),
                            "soft-token embeddings are 3 wide; the model's hidden size is 2"));
}

TEST_F(GeneratorTest, RejectsSoftTokensWithoutAMerge) {
  plan_.soft_embeddings = -1;
  plan_.soft_indices = -1;
  SoftTokens soft;
  soft.hidden = kHidden;
  EXPECT_TRUE(
      ErrorContains(Run({0}, Options(1), &soft).status(), "compiled without a soft-token merge"));
}

TEST_F(GeneratorTest, RejectsTokenIdsOutsideTheVocabulary) {
  EXPECT_TRUE(ErrorContains(Run({1, 2, 10}, Options(1)).status(),
                            "prompt token 2 is 10, outside the vocabulary [0, 10)"));
  EXPECT_TRUE(ErrorContains(Run({-1}, Options(1)).status(), "prompt token 0 is -1"));
  EXPECT_TRUE(executor_.calls.empty());
}

TEST_F(GeneratorTest, RejectsPromptLongerThanMaxLength) {
  EXPECT_TRUE(ErrorContains(Run({1, 2, 3}, Options(1, /*max_length=*/2)).status(),
                            "the prompt has 3 tokens, more than the max length 2"));
}

TEST_F(GeneratorTest, RejectsEmptyPromptAndBadOptions) {
  EXPECT_TRUE(ErrorContains(Run({}, Options(1)).status(), "the prompt is empty"));
  EXPECT_TRUE(ErrorContains(Run({1}, Options(0)).status(), "max new tokens must be at least 1"));
  Opts options = Options(1);
  options.sampler.top_p = 2.0f;
  EXPECT_TRUE(ErrorContains(Run({1}, options).status(), "top-p must be in (0, 1]"));
}

TEST_F(GeneratorTest, SamplingDoesNotDependOnPrefillChunking) {
  Opts options = Options(12);
  options.sampler.temperature = 1.0f;
  options.sampler.seed = 77;
  executor_.flat = true;
  const std::vector<int32_t> prompt = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  absl::StatusOr<GenerateResult> chunked = Run(prompt, options);
  plan_.max_tokens = 16;
  absl::StatusOr<GenerateResult> whole = Run(prompt, options);
  ASSERT_TRUE(chunked.ok() && whole.ok());
  EXPECT_EQ(chunked->tokens, whole->tokens);
}

TEST_F(GeneratorTest, ExecutorErrorsPropagate) {
  executor_.fail_with = absl::InternalError("launch failed");
  EXPECT_TRUE(ErrorContains(Run({1}, Options(3)).status(), "launch failed"));
}

TEST(ParseTokenIdsTest, ParsesCommaSeparatedIds) {
  absl::StatusOr<std::vector<int32_t>> ids = ParseTokenIds("2,818,5192");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{2, 818, 5192}));
  ids = ParseTokenIds(" 7 , 8 ");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{7, 8}));
}

TEST(ParseTokenIdsTest, RejectsBadSyntax) {
  EXPECT_TRUE(ErrorContains(ParseTokenIds("2,,3").status(), "bad token id '' at index 1"));
  EXPECT_TRUE(ErrorContains(ParseTokenIds("2;3").status(), "bad token id '2;3' at index 0"));
  EXPECT_TRUE(ErrorContains(ParseTokenIds("99999999999").status(), "bad token id"));
  EXPECT_TRUE(ErrorContains(ParseTokenIds("  ").status(), "the prompt is empty"));
}

TEST(ResolveMaxLengthTest, DefaultsToTheSmallerOf4096AndTheModelLimit) {
  ModelInfo model;
  model.max_position_embeddings = 131072;
  EXPECT_EQ(*ResolveMaxLength(model, 0), 4096);
  EXPECT_EQ(*ResolveMaxLength(model, 100), 100);
  model.max_position_embeddings = 1024;
  EXPECT_EQ(*ResolveMaxLength(model, 0), 1024);
  EXPECT_TRUE(ErrorContains(ResolveMaxLength(model, 2048).status(),
                            "max length 2048 exceeds the model's max_position_embeddings 1024"));
  EXPECT_TRUE(ErrorContains(ResolveMaxLength(model, -1).status(), "must be positive"));
}

std::string Bytes(const void* data, size_t size) {
  return std::string(static_cast<const char*>(data), size);
}

OwnedTensor F32Tensor(const std::string& name, std::vector<int64_t> shape,
                      const std::vector<float>& values) {
  return {name, "F32", std::move(shape), Bytes(values.data(), values.size() * sizeof(float))};
}

OwnedTensor I64Tensor(const std::string& name, const std::vector<int64_t>& values) {
  return {name,
          "I64",
          {static_cast<int64_t>(values.size())},
          Bytes(values.data(), values.size() * sizeof(int64_t))};
}

class SoftTokenFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::vector<OwnedTensor>& tensors) {
    const std::string path = ::testing::TempDir() + "/soft_tokens_test.safetensors";
    EXPECT_TRUE(WriteSafetensors(path, tensors).ok());
    return path;
  }
};

TEST_F(SoftTokenFileTest, LoadsEmbeddingsAndPositions) {
  const std::string path =
      Write({F32Tensor("embeddings", {2, 2}, {1, 2, 3, 4}), I64Tensor("positions", {7, -1})});
  absl::StatusOr<SoftTokens> soft = LoadSoftTokens(path, 2);
  ASSERT_TRUE(soft.ok()) << soft.status();
  EXPECT_EQ(soft->hidden, 2);
  EXPECT_EQ(soft->embeddings, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(soft->positions, (std::vector<int64_t>{7, -1}));
}

TEST_F(SoftTokenFileTest, AcceptsI32Positions) {
  const std::vector<int32_t> positions = {3};
  const std::string path =
      Write({F32Tensor("embeddings", {1, 2}, {1, 2}),
             {"positions", "I32", {1}, Bytes(positions.data(), sizeof(int32_t))}});
  absl::StatusOr<SoftTokens> soft = LoadSoftTokens(path, 2);
  ASSERT_TRUE(soft.ok()) << soft.status();
  EXPECT_EQ(soft->positions, (std::vector<int64_t>{3}));
}

TEST_F(SoftTokenFileTest, RejectsTheWrongWidth) {
  const std::string path =
      Write({F32Tensor("embeddings", {1, 3}, {1, 2, 3}), I64Tensor("positions", {0})});
  EXPECT_TRUE(ErrorContains(LoadSoftTokens(path, 2).status(),
                            "'embeddings' are 3 wide; the model's hidden size is 2"));
}

TEST_F(SoftTokenFileTest, RejectsMissingTensors) {
  const std::string path = Write({F32Tensor("embeddings", {1, 2}, {1, 2})});
  EXPECT_TRUE(ErrorContains(LoadSoftTokens(path, 2).status(),
                            "has no tensor 'positions' (it needs 'embeddings' F32 [n, hidden] "
                            "and 'positions' I64 [n]; found: embeddings)"));
}

TEST_F(SoftTokenFileTest, RejectsMismatchedRowCountsAndDtypes) {
  std::string path =
      Write({F32Tensor("embeddings", {2, 2}, {1, 2, 3, 4}), I64Tensor("positions", {0})});
  EXPECT_TRUE(ErrorContains(LoadSoftTokens(path, 2).status(), "2 embedding rows but 1 positions"));
  path = Write({{"embeddings", "I32", {1, 2}, std::string(8, '\0')}, I64Tensor("positions", {0})});
  EXPECT_TRUE(ErrorContains(LoadSoftTokens(path, 2).status(),
                            "'embeddings' must be F32 [n, hidden], got I32"));
}

TEST_F(SoftTokenFileTest, MissingFileIsAnError) {
  EXPECT_FALSE(LoadSoftTokens(::testing::TempDir() + "/no_such_file.safetensors", 2).ok());
}

TEST(WriteLogitsTest, WritesOneF32TensorOfRowsByVocab) {
  GenerateResult result;
  result.logits = {1, 2, 3, 4, 5, 6};
  result.logits_rows = 2;
  const std::string path = ::testing::TempDir() + "/logits_test.safetensors";
  ASSERT_TRUE(WriteLogits(path, result, 3).ok());
  absl::StatusOr<std::vector<OwnedTensor>> tensors = ReadSafetensorsFile(path);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_EQ(tensors->size(), 1u);
  EXPECT_EQ((*tensors)[0].name, "logits");
  EXPECT_EQ((*tensors)[0].dtype, "F32");
  EXPECT_EQ((*tensors)[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ((*tensors)[0].bytes, Bytes(result.logits.data(), 6 * sizeof(float)));
}

}  // namespace
}  // namespace rt
}  // namespace spark
