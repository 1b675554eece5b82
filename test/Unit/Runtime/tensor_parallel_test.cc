// Tensor parallelism's runtime parts (docs/multi-gpu.md): a rank's weight slices (BindWeights with
// WeightShard), the plan's ranks and shards through the plan format and its checks, and the
// in-process communicator the host executor's collectives use.
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "loader_test_util.h"
#include "spark/runtime/collectives.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/plan.h"
#include "spark/runtime/safetensors.h"
#include "cuda/nccl.h"

namespace spark {
namespace rt {
namespace {

using test::StatusIs;
using test::TempDir;
using test::TestPlan;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

// A tensor whose byte i is i (mod 256), so that a slice's bytes say where they came from.
OwnedTensor Counting(const std::string& name, const std::string& dtype, std::vector<int64_t> shape) {
  uint64_t elements = 1;
  for (const int64_t d : shape) elements *= d;
  std::string bytes(elements * SafetensorsDTypeSize(dtype), '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i);
  return {name, dtype, std::move(shape), bytes};
}

// The bytes rank `rank` binds for the plan's last weight.
std::string BoundBytes(const Plan& plan, const Checkpoint& checkpoint, int64_t rank,
                       bool* in_place = nullptr) {
  const absl::StatusOr<std::vector<WeightData>> bound = BindWeights(plan, checkpoint, rank);
  EXPECT_TRUE(bound.ok()) << bound.status();
  if (!bound.ok()) return "";
  const WeightData& w = bound->back();
  if (in_place != nullptr) *in_place = !w.assembled();
  std::string bytes(w.num_bytes, '\0');
  CopyWeightBytes(w, reinterpret_cast<uint8_t*>(&bytes[0]));
  return bytes;
}

std::string Bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

class ShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<OwnedTensor> tensors = {Counting("model.embed_tokens.weight", "BF16", {16, 4}),
                                        Counting("model.norm.weight", "BF16", {4}),
                                        // [2, 4, 2] bf16: 16 elements, 32 bytes
                                        Counting("w", "BF16", {2, 4, 2}),
                                        Counting("e.0", "BF16", {4, 2}),
                                        Counting("e.1", "BF16", {4, 2})};
    ASSERT_TRUE(WriteSafetensors(dir_.Path("model.safetensors"), tensors).ok());
    auto checkpoint = Checkpoint::Open(dir_.path());
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    checkpoint_ = std::move(*checkpoint);
    plan_ = TestPlan();
    plan_.ranks = 2;
  }
  Plan WithWeight(WeightInfo weight) {
    Plan plan = plan_;
    plan.weights.push_back(std::move(weight));
    return plan;
  }

  TempDir dir_;
  std::unique_ptr<Checkpoint> checkpoint_;
  Plan plan_;
};

// Axis 0 of the whole: each rank's rows, one run of the checkpoint's bytes (read in place).
TEST_F(ShardTest, LeadingAxisIsOneRunInPlace) {
  WeightInfo w{"w", DType::kBF16, {1, 4, 2}};
  w.shard = {0, 2, 1};
  const Plan plan = WithWeight(w);
  ASSERT_TRUE(ValidatePlan(plan, "m").ok()) << ValidatePlan(plan, "m");
  ASSERT_TRUE(CheckPlanWeights(plan, *checkpoint_).ok()) << CheckPlanWeights(plan, *checkpoint_);
  bool in_place = false;
  std::string rank1 = BoundBytes(plan, *checkpoint_, 1, &in_place);
  EXPECT_TRUE(in_place);
  ASSERT_EQ(rank1.size(), 16u);
  EXPECT_EQ(rank1[0], 16);
  EXPECT_EQ(rank1[15], 31);
  EXPECT_FALSE(w.CopiedAtLoad());
}

// A middle axis: for every index before it, the rank's slice; 2 chunks (gate rows, up rows)
// split each on its own.
TEST_F(ShardTest, MiddleAxisWithChunksTakesEachChunksSlice) {
  WeightInfo w{"w", DType::kBF16, {2, 2, 2}};
  w.shard = {1, 2, 2};  // dimension 4 = 2 chunks of 2 rows, each split in 2: 1 row per chunk
  const Plan plan = WithWeight(w);
  ASSERT_TRUE(ValidatePlan(plan, "m").ok()) << ValidatePlan(plan, "m");
  ASSERT_TRUE(CheckPlanWeights(plan, *checkpoint_).ok());
  bool in_place = true;
  // Row r of the whole is bytes [4 r, 4 r + 4) within its [4, 2] block (16 bytes per block).
  // Rank 0: rows 0 and 2 of each block; rank 1: rows 1 and 3.
  EXPECT_EQ(BoundBytes(plan, *checkpoint_, 0, &in_place),
            Bytes({0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27}));
  EXPECT_FALSE(in_place);
  EXPECT_EQ(BoundBytes(plan, *checkpoint_, 1),
            Bytes({4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31}));
  EXPECT_TRUE(w.CopiedAtLoad());
}

// The last axis of a weight assembled from parts: the slice crosses the parts.
TEST_F(ShardTest, SliceOfAWeightOfParts) {
  WeightInfo w{"e.{0..1}", DType::kBF16, {2, 4, 1}, {"e.0", "e.1"}, {4, 2}};
  w.shard = {2, 2, 1};
  const Plan plan = WithWeight(w);
  ASSERT_TRUE(ValidatePlan(plan, "m").ok()) << ValidatePlan(plan, "m");
  ASSERT_TRUE(CheckPlanWeights(plan, *checkpoint_).ok());
  // Each part holds bytes 0..15; rank 1 reads the second bf16 of each row of both.
  EXPECT_EQ(BoundBytes(plan, *checkpoint_, 1),
            Bytes({2, 3, 6, 7, 10, 11, 14, 15, 2, 3, 6, 7, 10, 11, 14, 15}));
}

// Fewer parts than ranks: a slice on ranks / parts consecutive ranks (rank r reads r * parts /
// ranks).
TEST_F(ShardTest, FewerPartsThanRanksReplicate) {
  Plan plan = WithWeight([] {
    WeightInfo w{"w", DType::kBF16, {1, 4, 2}};
    w.shard = {0, 2, 1};
    return w;
  }());
  plan.ranks = 4;
  ASSERT_TRUE(ValidatePlan(plan, "m").ok()) << ValidatePlan(plan, "m");
  EXPECT_EQ(BoundBytes(plan, *checkpoint_, 0), BoundBytes(plan, *checkpoint_, 1));
  EXPECT_EQ(BoundBytes(plan, *checkpoint_, 2), BoundBytes(plan, *checkpoint_, 3));
  EXPECT_NE(BoundBytes(plan, *checkpoint_, 1), BoundBytes(plan, *checkpoint_, 2));
  EXPECT_TRUE(StatusIs(BindWeights(plan, *checkpoint_, 4).status(), kInvalid,
                       "rank 4 of a plan of 4 ranks"));
}

// The checkpoint holds the whole tensor: a slice's shape is checked against it.
TEST_F(ShardTest, CheckpointShapeIsTheWholes) {
  WeightInfo w{"w", DType::kBF16, {2, 4, 1}};
  w.shard = {2, 2, 1};
  EXPECT_EQ(w.CheckpointShape(), (std::vector<int64_t>{2, 4, 2}));
  EXPECT_TRUE(CheckPlanWeights(WithWeight(w), *checkpoint_).ok());
  w.shard = {1, 2, 1};  // whole [2, 8, 1]: not the checkpoint's
  EXPECT_TRUE(StatusIs(CheckPlanWeights(WithWeight(w), *checkpoint_), kInvalid,
                       "weight w: expected shape [2, 8, 1]"));
}

// What the plan reader refuses of a shard.
TEST_F(ShardTest, PlanChecksShards) {
  const auto error = [&](WeightShard shard, int64_t ranks) {
    WeightInfo w{"w", DType::kBF16, {2, 4, 2}};
    w.shard = shard;
    Plan plan = WithWeight(w);
    plan.ranks = ranks;
    return ValidatePlan(plan, "m.cubin");
  };
  EXPECT_TRUE(StatusIs(error({0, 2, 1}, 1), kInvalid, "a plan of one rank has no sharded weights"));
  EXPECT_TRUE(StatusIs(error({0, 3, 1}, 2), kInvalid,
                       "expected 2 or more parts dividing the plan's 2 ranks, found 3"));
  EXPECT_TRUE(StatusIs(error({3, 2, 1}, 2), kInvalid, "axis 3 of a weight of shape [2, 4, 2]"));
  EXPECT_TRUE(StatusIs(error({1, 2, 3}, 2), kInvalid, "3 chunks do not divide dimension 1"));
  EXPECT_TRUE(StatusIs(error({-1, 2, 1}, 2), kInvalid,
                       "a weight that is not sharded has axis -1, 1 part and 1 chunk"));
  Plan many = plan_;
  many.ranks = 65;
  EXPECT_TRUE(StatusIs(ValidatePlan(many, "m.cubin"), kInvalid, "ranks"));
}

// Ranks and shards survive the plan format; two slices of one tensor may share its name.
TEST_F(ShardTest, RanksAndShardsRoundTrip) {
  WeightInfo columns{"model.embed_tokens.weight", DType::kBF16, {16, 2}};
  columns.shard = {1, 2, 1};
  WeightInfo rows{"model.embed_tokens.weight", DType::kBF16, {8, 4}};
  rows.shard = {0, 2, 1};
  Plan plan = WithWeight(columns);
  plan.weights.push_back(rows);
  ASSERT_TRUE(ValidatePlan(plan, "m").ok()) << ValidatePlan(plan, "m");
  const absl::StatusOr<Plan> read = ParsePlanSection(SerializePlanSection(plan), "m.cubin");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->ranks, 2);
  ASSERT_EQ(read->weights.size(), plan.weights.size());
  EXPECT_TRUE(read->weights[plan.weights.size() - 2].shard == columns.shard);
  EXPECT_TRUE(read->weights.back().shard == rows.shard);
  // The same slice twice is still a duplicate.
  plan.weights.push_back(rows);
  EXPECT_TRUE(StatusIs(ValidatePlan(plan, "m"), kInvalid,
                       "weight model.embed_tokens.weight is already weights["));
}

// The in-process group: sums in rank order, gathers in rank order, the same bits everywhere.
TEST(InProcessCommunicatorTest, AllReduceAndAllGatherAcrossThreads) {
  constexpr int kRanks = 3;
  auto group = MakeInProcessCommunicators(kRanks);
  std::vector<std::vector<float>> reduced(kRanks), gathered(kRanks);
  std::vector<absl::Status> status(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      EXPECT_EQ(group[r]->rank(), r);
      EXPECT_EQ(group[r]->ranks(), kRanks);
      for (int round = 0; round < 50 && status[r].ok(); ++round) {
        reduced[r] = {1.0f * (r + 1), 10.0f * (r + 1), static_cast<float>(round)};
        status[r] = group[r]->AllReduce(reduced[r].data(), 3);
        if (!status[r].ok()) break;
        const std::vector<float> mine = {static_cast<float>(r), static_cast<float>(-r)};
        gathered[r].assign(2 * kRanks, 0.0f);
        status[r] = group[r]->AllGather(mine.data(), gathered[r].data(), 2);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    EXPECT_EQ(reduced[r], (std::vector<float>{6.0f, 60.0f, 3 * 49.0f}));
    EXPECT_EQ(gathered[r], (std::vector<float>{0, 0, 1, -1, 2, -2}));
  }
}

// Ranks that disagree on the count fail (they ran different programs); an abort releases a rank
// waiting for one that will never come, and Reset makes the group usable again.
TEST(InProcessCommunicatorTest, MismatchAndAbort) {
  auto group = MakeInProcessCommunicators(2);
  std::vector<float> a(4, 1.0f), b(4, 2.0f);
  absl::Status s0, s1;
  std::thread t([&] { s1 = group[1]->AllReduce(b.data(), 3); });
  s0 = group[0]->AllReduce(a.data(), 4);
  t.join();
  EXPECT_TRUE(StatusIs(s0, absl::StatusCode::kInternal, "the ranks passed different element counts"));
  EXPECT_TRUE(StatusIs(s1, absl::StatusCode::kInternal, "the ranks ran different programs"));

  group[0]->Reset();
  std::thread waiting([&] { s1 = group[1]->AllReduce(b.data(), 4); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  group[0]->Abort();
  waiting.join();
  EXPECT_TRUE(StatusIs(s1, absl::StatusCode::kAborted, "another rank failed"));
  group[0]->Reset();
  std::thread again([&] { s1 = group[1]->AllReduce(b.data(), 4); });
  s0 = group[0]->AllReduce(a.data(), 4);
  again.join();
  EXPECT_TRUE(s0.ok()) << s0;
  EXPECT_TRUE(s1.ok()) << s1;
  EXPECT_EQ(a, std::vector<float>(4, 3.0f));
}

}  // namespace
}  // namespace rt
}  // namespace spark

namespace spark {
namespace rt {
namespace {

// NCCL is loaded only for plans with collectives; when it cannot be, the error says what to
// install (CI has no NCCL: the loading errors are what it can check).
TEST(NcclLoaderTest, MissingLibraryNamesWhatToInstall) {
  const absl::StatusOr<const NcclApi*> api = LoadNcclFrom("/nonexistent/libnccl.so.2");
  EXPECT_TRUE(test::StatusIs(api.status(), absl::StatusCode::kUnavailable,
                             "cannot load NCCL (/nonexistent/libnccl.so.2)"));
  EXPECT_TRUE(test::StatusIs(api.status(), absl::StatusCode::kUnavailable, "install NCCL 2"));
  EXPECT_TRUE(test::StatusIs(api.status(), absl::StatusCode::kUnavailable, "--device host"));
}

TEST(NcclLoaderTest, LibraryWithoutNcclIsRefused) {
  const absl::StatusOr<const NcclApi*> api = LoadNcclFrom("libc.so.6");
  EXPECT_TRUE(test::StatusIs(api.status(), absl::StatusCode::kUnavailable,
                             "NCCL (libc.so.6) lacks ncclGetVersion"));
}

}  // namespace
}  // namespace rt
}  // namespace spark
