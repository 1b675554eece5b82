#include "spark/runtime/memory_estimator.h"

#include <sys/resource.h>

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "loader_test_util.h"

namespace spark {
namespace rt {
namespace {

using test::StatusIs;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

// Full-size Gemma 4 text models (docs: gemma4-architecture.md): every 6th layer is full attention.
PlanSizes GemmaSizes(const std::string& model, uint64_t params, int layers, int sliding_kv_heads,
                     int full_kv_heads) {
  PlanSizes sizes;
  sizes.model = model;
  sizes.weight_bytes = params * 2;  // bf16
  sizes.num_weights = layers * 14;
  sizes.arena_bytes = 64 * kMiB;
  sizes.max_tokens = 64;
  sizes.vocab_size = 262144;
  sizes.max_position_embeddings = 262144;
  for (int i = 0; i < layers; ++i) {
    const bool full = i % 6 == 5;
    sizes.kv_caches.push_back({absl::StrCat("kv.layers.", i),
                               full ? KvKind::kFull : KvKind::kSliding, full ? 0 : 1024,
                               full ? full_kv_heads : sliding_kv_heads, full ? 512 : 256});
  }
  return sizes;
}
PlanSizes Gemma31B() { return GemmaSizes("gemma-4-31b", 30'700'000'000, 60, 16, 4); }
PlanSizes Gemma26B() { return GemmaSizes("gemma-4-26b-a4b", 25'230'000'000, 30, 8, 2); }

EstimateOptions Options(int64_t max_length) {
  EstimateOptions options;
  options.max_length = max_length;
  return options;
}

MemoryEstimate MustEstimate(const PlanSizes& sizes, const DeviceMemory& device,
                            const EstimateOptions& options) {
  absl::StatusOr<MemoryEstimate> estimate = Estimate(sizes, device, options);
  EXPECT_TRUE(estimate.ok()) << estimate.status();
  return estimate.ok() ? *std::move(estimate) : MemoryEstimate();
}

DeviceMemory Profile(absl::string_view name) {
  absl::StatusOr<DeviceMemory> device = DeviceProfile(name);
  EXPECT_TRUE(device.ok()) << device.status();
  return *std::move(device);
}

// An integrated GPU whose driver reports `driver_free` free, with the host's meminfo `text`.
DeviceMemory Integrated(absl::string_view meminfo, uint64_t driver_free = 2 * kGiB) {
  DeviceInfo info;
  info.name = "NVIDIA GB10";
  info.cc_major = 12;
  info.cc_minor = 1;
  info.integrated = true;
  info.total_bytes = 120 * kGiB;
  info.free_bytes = driver_free;
  absl::StatusOr<DeviceMemory> device = DeviceMemoryFromInfo(info, meminfo);
  EXPECT_TRUE(device.ok()) << device.status();
  return *std::move(device);
}

std::string Meminfo(uint64_t total_kb, uint64_t free_kb, uint64_t available_kb,
                    absl::string_view extra = "") {
  return absl::StrCat("MemTotal:       ", total_kb, " kB\nMemFree:        ", free_kb,
                      " kB\nMemAvailable:   ", available_kb,
                      " kB\nBuffers:          123456 kB\nCached:         99000000 kB\n", extra);
}

constexpr uint64_t kKiBPerGiB = 1024 * 1024;

TEST(MemoryEstimatorTest, Gemma31BAt1024FitsOnDgxSpark) {
  const MemoryEstimate estimate = MustEstimate(Gemma31B(), Profile("dgx-spark"), Options(1024));
  EXPECT_TRUE(estimate.fits) << FormatEstimateTable(estimate);
  EXPECT_TRUE(CheckFits(estimate).ok());
  EXPECT_TRUE(estimate.budget.integrated);
  // 110 GiB MemAvailable less max(4 GiB, 5% of 121.7 GiB).
  const uint64_t mem_total = static_cast<uint64_t>(121.7 * kGiB + 0.5);
  EXPECT_EQ(estimate.budget.bytes, 110 * kGiB - mem_total / 100 * 5);
  ASSERT_EQ(estimate.components.size(), 5u);
  EXPECT_EQ(estimate.components[0].name, "weights");
  EXPECT_EQ(estimate.components[0].bytes, 61'400'000'000u);
  EXPECT_EQ(estimate.components[1].name, "KV cache");
  // 50 sliding layers x 2 x 1024 x 16 x 256 x 4 + 10 full layers x 2 x 1024 x 4 x 512 x 4, and
  // the block table of their one capacity group (1024 slots: 64 blocks) for 64 tokens a step.
  EXPECT_EQ(estimate.components[1].bytes, 50 * 32 * kMiB + 10 * 16 * kMiB + 64 * 64 * 4);
  EXPECT_EQ(estimate.components[2].name, "activations");
  EXPECT_EQ(estimate.components[3].name, "workspace");
  EXPECT_EQ(estimate.components[3].bytes, 64u * 262144 * 4);
  EXPECT_EQ(estimate.components[4].name, "CUDA context and runtime");
  EXPECT_EQ(estimate.components[4].bytes, kContextOverheadBytes);
  EXPECT_EQ(estimate.max_fitting_length, 1024);
  EXPECT_TRUE(absl::StrContains(estimate.components[0].source, "used in place"));
  EXPECT_TRUE(absl::EndsWith(FormatEstimateLine(estimate), "; fits"));
}

TEST(MemoryEstimatorTest, Gemma26BFitsOnDgxSpark) {
  const MemoryEstimate estimate = MustEstimate(Gemma26B(), Profile("dgx-spark"), Options(32768));
  EXPECT_TRUE(estimate.fits) << FormatEstimateTable(estimate);
  EXPECT_TRUE(CheckFits(estimate).ok());
}

TEST(MemoryEstimatorTest, BothRefusedOn24GiBCardWithBreakdown) {
  for (const PlanSizes& sizes : {Gemma31B(), Gemma26B()}) {
    const MemoryEstimate estimate = MustEstimate(sizes, Profile("rtx-4090"), Options(1024));
    EXPECT_FALSE(estimate.fits);
    EXPECT_EQ(estimate.max_fitting_length, 0);
    const absl::Status status = CheckFits(estimate);
    EXPECT_TRUE(StatusIs(status, absl::StatusCode::kResourceExhausted,
                         absl::StrCat(sizes.model, " does not fit on NVIDIA GeForce RTX 4090 (24 "
                                                   "GB) with --max-length 1024: it needs ")));
    for (const char* expected :
         {"  weights ", "  KV cache ", "  activations ", "  workspace ",
          "  CUDA context and runtime ", "  total ", "  available ",
          "free device memory of NVIDIA GeForce RTX 4090 (24 GB) (device profile rtx-4090, typical",
          "largest component: weights (", "to make it fit:\n",
          "  - a shorter --max-length cannot make it fit: without the KV cache it still needs ",
          "  - use a quantized checkpoint: the bf16 weights take "}) {
      EXPECT_TRUE(absl::StrContains(status.message(), expected)) << expected << "\n" << status;
    }
  }
}

TEST(MemoryEstimatorTest, QuantizationAdviceSaysWhichWidthFits) {
  const absl::Status status =
      CheckFits(MustEstimate(Gemma31B(), Profile("rtx-4090"), Options(1024)));
  EXPECT_TRUE(StatusIs(status, absl::StatusCode::kResourceExhausted,
                       "use a quantized checkpoint: the bf16 weights take 57.18 GiB; with 4-bit "
                       "weights (about 14.30 GiB) the model would need "));
  const absl::Status hopeless =
      CheckFits(MustEstimate(Gemma31B(), Profile("rtx-4090"), Options(262144)));
  EXPECT_TRUE(StatusIs(hopeless, absl::StatusCode::kResourceExhausted,
                       "even 4-bit weights (about 14.30 GiB) would not fit: use a smaller model "
                       "or a device with more memory"));
}

TEST(MemoryEstimatorTest, RefusalComputesTheLongestLengthThatFits) {
  const MemoryEstimate estimate = MustEstimate(Gemma31B(), Profile("h100"), Options(262144));
  ASSERT_FALSE(estimate.fits);
  const int64_t length = estimate.max_fitting_length;
  ASSERT_GT(length, 1024);
  ASSERT_LT(length, 262144);
  EXPECT_TRUE(MustEstimate(Gemma31B(), Profile("h100"), Options(length)).fits);
  EXPECT_FALSE(MustEstimate(Gemma31B(), Profile("h100"), Options(length + 1)).fits);
  EXPECT_TRUE(StatusIs(CheckFits(estimate), absl::StatusCode::kResourceExhausted,
                       absl::StrCat("largest component: weights (57.18 GiB)\nto make it fit:\n  - "
                                    "use --max-length ", length, " or less (now 262144)")));
}

// 31B over its whole 262144-token context on a DGX Spark at spark-run's default
// --device-memory-utilization 0.9: the f32 KV cache (41.66 GiB) does not fit beside the weights;
// a bf16 one (half) does, and the refusal says so.
TEST(MemoryEstimatorTest, Bf16KvCacheHalvesTheCacheAndFits31BFullContextOnDgxSpark) {
  EstimateOptions options = Options(262144);
  options.utilization = 0.9;
  const MemoryEstimate f32 = MustEstimate(Gemma31B(), Profile("dgx-spark"), options);
  ASSERT_FALSE(f32.fits) << FormatEstimateTable(f32);
  PlanSizes bf16_sizes = Gemma31B();
  for (KvCacheInfo& cache : bf16_sizes.kv_caches) cache.dtype = DType::kBF16;
  const MemoryEstimate bf16 = MustEstimate(bf16_sizes, Profile("dgx-spark"), options);
  EXPECT_TRUE(bf16.fits) << FormatEstimateTable(bf16);
  // K and V halve; the block tables (i32 [64 tokens, 262144 / 16] of the full caches and
  // [64, 1088 / 16] of the sliding ones) do not.
  const uint64_t tables = 64 * (262144 / 16) * 4 + 64 * (1088 / 16) * 4;
  EXPECT_EQ((bf16.components[1].bytes - tables) * 2, f32.components[1].bytes - tables);
  EXPECT_EQ(f32.kv_bytes_as_bf16, bf16.components[1].bytes);
  EXPECT_EQ(bf16.kv_bytes_as_bf16, bf16.components[1].bytes);
  EXPECT_TRUE(absl::StrContains(bf16.components[1].source, "; K and V in bf16; "));
  EXPECT_TRUE(StatusIs(CheckFits(f32), absl::StatusCode::kResourceExhausted,
                       absl::StrCat("  - recompile with spark-compile --kv-cache-dtype bf16: the "
                                    "KV cache takes 41.66 GiB; in bf16 (about 20.83 GiB) the "
                                    "model would need ",
                                    FormatBytes(bf16.total), "\n")));
  // Already bf16, or bf16 too big to help: no such advice.
  const MemoryEstimate already = MustEstimate(bf16_sizes, Profile("rtx-4090"), Options(1024));
  ASSERT_FALSE(already.fits);
  EXPECT_FALSE(absl::StrContains(CheckFits(already).message(), "--kv-cache-dtype"));
  const MemoryEstimate small = MustEstimate(Gemma31B(), Profile("rtx-4090"), Options(1024));
  EXPECT_FALSE(absl::StrContains(CheckFits(small).message(), "--kv-cache-dtype"));
}

TEST(MemoryEstimatorTest, PageCacheHeavyHostUsesMemAvailable) {
  // 2 GiB free, 100 GiB available (the rest is reclaimable page cache); the driver says 2 GiB.
  const DeviceMemory device = Integrated(Meminfo(125 * kKiBPerGiB, 2 * kKiBPerGiB,
                                                 100 * kKiBPerGiB));
  const MemoryEstimate estimate = MustEstimate(Gemma31B(), device, Options(1024));
  EXPECT_EQ(estimate.budget.bytes, 100 * kGiB - 125 * kGiB / 100 * 5);  // reserve 6.25 GiB
  EXPECT_TRUE(estimate.fits);
  EXPECT_EQ(estimate.budget.source,
            "host memory shared with the integrated GPU NVIDIA GB10 (/proc/meminfo): "
            "MemAvailable 100.00 GiB less a reserve of 6.25 GiB (max(4 GiB, 5% of MemTotal "
            "125.00 GiB))");
}

// A limit of this process below the host's pool (ulimit -v, a cgroup's memory.max) is the budget,
// and the estimate says which limit applied.
TEST(MemoryEstimatorTest, ProcessLimitBelowTheHostPoolIsTheBudget) {
  DeviceMemory device = Integrated(Meminfo(125 * kKiBPerGiB, 2 * kKiBPerGiB, 100 * kKiBPerGiB));
  device.host_limits = {{"cgroup /sys/fs/cgroup/job memory.max 500.00 GiB less 1.00 GiB in use "
                         "(memory.current)",
                         499 * kGiB},  // above the pool: no effect
                        *AddressSpaceLimit(9 * kGiB, kGiB)};
  const MemoryEstimate estimate = MustEstimate(Gemma26B(), device, Options(1024));
  EXPECT_EQ(estimate.budget.bytes, 8 * kGiB);
  EXPECT_EQ(estimate.budget.host_limit,
            "RLIMIT_AS (ulimit -v) 9.00 GiB less 1.00 GiB of address space in use");
  EXPECT_TRUE(absl::EndsWith(estimate.budget.source,
                             "(max(4 GiB, 5% of MemTotal 125.00 GiB)), capped by this process's "
                             "limit: RLIMIT_AS (ulimit -v) 9.00 GiB less 1.00 GiB of address space "
                             "in use"))
      << estimate.budget.source;
  EXPECT_FALSE(estimate.fits);
  EXPECT_TRUE(StatusIs(CheckFits(estimate), absl::StatusCode::kResourceExhausted,
                       "  - raise this process's memory limit (ulimit -v, or the container's or "
                       "cgroup's memory limit): RLIMIT_AS (ulimit -v) 9.00 GiB less 1.00 GiB of "
                       "address space in use"));
  device.host_limits = {*CgroupLimit("/sys/fs/cgroup/job", "4294967296\n", "1073741824\n")};
  const MemoryEstimate cgroup = MustEstimate(Gemma26B(), device, Options(1024));
  EXPECT_EQ(cgroup.budget.bytes, 3 * kGiB);
  EXPECT_EQ(cgroup.budget.host_limit,
            "cgroup /sys/fs/cgroup/job memory.max 4.00 GiB less 1.00 GiB in use (memory.current)");
}

TEST(MemoryEstimatorTest, ReadsProcessLimits) {
  EXPECT_FALSE(AddressSpaceLimit(RLIM_INFINITY, kGiB).has_value());
  EXPECT_EQ(AddressSpaceLimit(kGiB, 2 * kGiB)->bytes_left, 0u);  // already beyond it
  EXPECT_FALSE(CgroupLimit("/sys/fs/cgroup/a", "max\n", "123\n").has_value());
  EXPECT_FALSE(CgroupLimit("/sys/fs/cgroup/a", "12x\n", "123\n").has_value());
  // This process under a soft RLIMIT_AS of 64 GiB (restored after).
  struct rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_AS, &saved), 0);
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < 64 * kGiB) GTEST_SKIP();
  struct rlimit lowered = saved;
  lowered.rlim_cur = 64 * kGiB;
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &lowered), 0);
  const std::vector<HostLimit> limits = MeasureHostLimits();
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &saved), 0);
  ASSERT_FALSE(limits.empty());
  EXPECT_TRUE(absl::StartsWith(limits[0].what, "RLIMIT_AS (ulimit -v) 64.00 GiB less "))
      << limits[0].what;
  EXPECT_LT(limits[0].bytes_left, 64 * kGiB);
}

TEST(MemoryEstimatorTest, DiscreteBudgetIsDriverFreeMemory) {
  DeviceInfo info;
  info.name = "NVIDIA H200";
  info.cc_major = 9;
  info.total_bytes = 140 * kGiB;
  info.free_bytes = 100 * kGiB;
  const absl::StatusOr<DeviceMemory> device = DeviceMemoryFromInfo(info, "");
  ASSERT_TRUE(device.ok()) << device.status();
  const MemoryEstimate estimate = MustEstimate(Gemma31B(), *device, Options(1024));
  EXPECT_EQ(estimate.budget.bytes, 100 * kGiB);
  EXPECT_FALSE(estimate.budget.integrated);
  EXPECT_EQ(estimate.budget.source,
            "free device memory of NVIDIA H200 (driver, cuMemGetInfo)");
  EXPECT_TRUE(absl::StrContains(estimate.components[0].source, "copied to device memory"));
}

TEST(MemoryEstimatorTest, SmallReserveIsFourGiB) {
  const DeviceMemory device = Integrated(Meminfo(32 * kKiBPerGiB, kKiBPerGiB, 20 * kKiBPerGiB));
  const MemoryEstimate estimate = MustEstimate(Gemma26B(), device, Options(1024));
  EXPECT_EQ(estimate.budget.bytes, 16 * kGiB);
}

TEST(MemoryEstimatorTest, HugePagesReplaceMemAvailable) {
  const DeviceMemory device = Integrated(Meminfo(
      125 * kKiBPerGiB, 2 * kKiBPerGiB, 20 * kKiBPerGiB,
      "HugePages_Total:   60000\nHugePages_Free:    50000\nHugepagesize:       2048 kB\n"));
  const MemoryEstimate estimate = MustEstimate(Gemma26B(), device, Options(1024));
  EXPECT_EQ(estimate.budget.bytes, 50000 * 2 * kMiB - 125 * kGiB / 100 * 5);
  EXPECT_TRUE(absl::StrContains(estimate.budget.source,
                                "free huge pages 97.66 GiB (HugePages_Free 50000 x Hugepagesize "
                                "2.0 MiB)"));
}

TEST(MemoryEstimatorTest, SwapOnlyWhenAskedAndCappedAtMemTotal) {
  const DeviceMemory device = Integrated(Meminfo(
      100 * kKiBPerGiB, kKiBPerGiB, 90 * kKiBPerGiB,
      "SwapTotal:      33554432 kB\nSwapFree:       33554432 kB\n"));
  EXPECT_EQ(MustEstimate(Gemma26B(), device, Options(1024)).budget.bytes, 85 * kGiB);
  EstimateOptions options = Options(1024);
  options.use_swap = true;
  const MemoryEstimate with_swap = MustEstimate(Gemma26B(), device, options);
  EXPECT_EQ(with_swap.budget.bytes, 95 * kGiB);  // 90 + 32 capped at 100, less 5
  EXPECT_TRUE(absl::StrContains(with_swap.budget.source,
                                "MemAvailable 90.00 GiB + SwapFree 32.00 GiB, capped at MemTotal "
                                "100.00 GiB"));
}

TEST(MemoryEstimatorTest, UtilizationIsAFractionOfThePool) {
  EstimateOptions options = Options(1024);
  options.utilization = 0.5;
  const MemoryEstimate estimate = MustEstimate(Gemma26B(), Profile("h200"), options);
  EXPECT_EQ(estimate.budget.bytes, static_cast<uint64_t>(std::llround(139.29 * kGiB)) / 2);
  EXPECT_TRUE(absl::EndsWith(estimate.budget.source, ", x --device-memory-utilization 0.5"));
  const DeviceMemory host = Integrated(Meminfo(125 * kKiBPerGiB, kKiBPerGiB, 100 * kKiBPerGiB));
  EXPECT_EQ(MustEstimate(Gemma26B(), host, options).budget.bytes,
            (100 * kGiB - 125 * kGiB / 100 * 5) / 2);
}

TEST(MemoryEstimatorTest, IntegratedRefusalSuggestsFreeingHostMemory) {
  const DeviceMemory device = Integrated(Meminfo(125 * kKiBPerGiB, kKiBPerGiB, 40 * kKiBPerGiB));
  EstimateOptions options = Options(1024);
  options.utilization = 0.9;
  options.batch = 2;
  const absl::Status status = CheckFits(MustEstimate(Gemma31B(), device, options));
  EXPECT_TRUE(StatusIs(status, absl::StatusCode::kResourceExhausted,
                       "gemma-4-31b does not fit on NVIDIA GB10 with --max-length 1024 and batch "
                       "2: it needs "));
  for (const char* expected :
       {"  - use a smaller batch (now 2): the KV cache grows with it",
        "  - raise --device-memory-utilization (now 0.9)",
        "  - free host memory: close other programs, or drop the page cache (sync; echo 3 | sudo "
        "tee /proc/sys/vm/drop_caches); MemAvailable is now 40.00 GiB"}) {
    EXPECT_TRUE(absl::StrContains(status.message(), expected)) << expected << "\n" << status;
  }
}

TEST(MemoryEstimatorTest, DiscreteRefusalMentionsMemoryHeldByOthers) {
  DeviceMemory device = Profile("h100");
  device.free_bytes = 30 * kGiB;
  const absl::Status status = CheckFits(MustEstimate(Gemma31B(), device, Options(1024)));
  EXPECT_TRUE(StatusIs(status, absl::StatusCode::kResourceExhausted,
                       "  - free device memory: 49.20 GiB of it is in use by other processes "
                       "(nvidia-smi lists them)"));
}

// The most sequences that fit: 31B at 4096 tokens on a DGX Spark; the next one does not.
TEST(MemoryEstimatorTest, MaxFittingBatchIsTheLargestThatFits) {
  const DeviceMemory spark = Profile("dgx-spark");
  EstimateOptions options = Options(4096);
  absl::StatusOr<int64_t> n = MaxFittingBatch(Gemma31B(), spark, options, 32);
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_GE(*n, 1);
  ASSERT_LT(*n, 32);
  options.batch = *n;
  EXPECT_TRUE(MustEstimate(Gemma31B(), spark, options).fits);
  options.batch = *n + 1;
  EXPECT_FALSE(MustEstimate(Gemma31B(), spark, options).fits);
  // Capped by the limit, and 0 when not even one sequence fits.
  EXPECT_EQ(*MaxFittingBatch(Gemma31B(), spark, Options(1024), 1), 1);
  EXPECT_EQ(*MaxFittingBatch(Gemma31B(), Profile("l4"), Options(1024), 32), 0);
}

TEST(MemoryEstimatorTest, KvCacheBytesFollowTheCapacityRule) {
  PlanSizes sizes;
  sizes.max_tokens = 8;
  sizes.vocab_size = 16;
  sizes.kv_caches = {{"full", KvKind::kFull, 0, 2, 4}, {"sliding", KvKind::kSliding, 16, 2, 4}};
  EstimateOptions options = Options(100);
  options.batch = 2;
  const MemoryEstimate estimate = MustEstimate(sizes, Profile("h200"), options);
  // K and V x slots x heads x dim x f32 x batch: 100 slots full, min(100, 15 + 8) sliding, each
  // rounded up to whole blocks of 16 (112 and 32); the block tables of the two capacity groups:
  // i32 [max_tokens 8, blocks 7 and 2].
  EXPECT_EQ(estimate.components[1].bytes,
            2u * 112 * 2 * 4 * 4 * 2 + 2u * 32 * 2 * 4 * 4 * 2 + 4u * 8 * (7 + 2));
  EXPECT_EQ(estimate.components[1].source,
            "1 full caches of --max-length 100 slots and 1 sliding caches of min(max_length, "
            "window - 1 + 8) slots, in blocks of 16 tokens; K and V in f32; 2 sequences; block "
            "tables");
}

TEST(MemoryEstimatorTest, SizesFromPlan) {
  const Plan plan = test::TestPlan();
  const PlanSizes sizes = SizesFromPlan(plan);
  EXPECT_EQ(sizes.model, "test-tiny");
  EXPECT_EQ(sizes.weight_bytes, 16u * 4 * 2 + 4 * 2);
  EXPECT_EQ(sizes.num_weights, 2);
  EXPECT_EQ(sizes.arena_bytes, plan.arena_bytes);
  EXPECT_EQ(sizes.max_tokens, 8);
  EXPECT_EQ(sizes.vocab_size, 16);
  EXPECT_EQ(sizes.max_position_embeddings, 128);
  EXPECT_EQ(sizes.kv_caches.size(), 2u);
}

TEST(MemoryEstimatorTest, RejectsBadOptions) {
  const PlanSizes sizes = Gemma26B();
  const DeviceMemory device = Profile("h200");
  EXPECT_TRUE(StatusIs(Estimate(sizes, device, Options(0)).status(), kInvalid,
                       "--max-length must be at least 1, found 0"));
  EXPECT_TRUE(StatusIs(Estimate(sizes, device, Options(300000)).status(), kInvalid,
                       "--max-length 300000 is above the model's max_position_embeddings "
                       "(262144); use 262144 or less"));
  EstimateOptions options = Options(1024);
  options.batch = 0;
  EXPECT_TRUE(StatusIs(Estimate(sizes, device, options).status(), kInvalid,
                       "the batch must be at least 1, found 0"));
  for (const double utilization : {0.0, 1.5, -1.0}) {
    options = Options(1024);
    options.utilization = utilization;
    EXPECT_TRUE(StatusIs(Estimate(sizes, device, options).status(), kInvalid,
                         "--device-memory-utilization must be in (0, 1], found "));
  }
}

TEST(MemoryEstimatorTest, RejectsBadSizes) {
  PlanSizes sizes = Gemma26B();
  sizes.max_tokens = 0;
  EXPECT_TRUE(StatusIs(Estimate(sizes, Profile("h200"), Options(8)).status(), kInvalid,
                       "plan sizes: max_tokens must be in [1, 2^31), found 0"));
  sizes = Gemma26B();
  sizes.kv_caches[0].window = 0;
  EXPECT_TRUE(StatusIs(Estimate(sizes, Profile("h200"), Options(8)).status(), kInvalid,
                       "plan sizes: KV cache kv.layers.0 needs window (sliding) in [1, 2^31)"));
  sizes = Gemma26B();
  sizes.kv_caches[5].kv_heads = int64_t{1} << 40;
  sizes.kv_caches[5].head_dim = int64_t{1} << 40;
  EXPECT_TRUE(StatusIs(Estimate(sizes, Profile("h200"), Options(8)).status(), kInvalid,
                       "the KV cache or workspace size overflows 64 bits"));
}

TEST(MeminfoTest, ParsesTheFieldsInBytes) {
  const absl::StatusOr<MemInfo> info = ParseMeminfo(
      "MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:   100 kB\n"
      "SwapTotal: 8 kB\nSwapFree: 4 kB\nHugePages_Total:      7\nHugePages_Free:       3\n"
      "Hugepagesize:    1048576 kB\nDirectMap1G:    1 kB\n");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->mem_total, uint64_t{131072000} * 1024);
  EXPECT_EQ(info->mem_free, 1000u * 1024);
  EXPECT_EQ(info->mem_available, 100u * 1024);
  EXPECT_EQ(info->swap_total, 8u * 1024);
  EXPECT_EQ(info->swap_free, 4u * 1024);
  EXPECT_EQ(info->hugepages_total, 7u);
  EXPECT_EQ(info->hugepages_free, 3u);
  EXPECT_EQ(info->hugepage_size, kGiB);
}

TEST(MeminfoTest, RejectsMissingFieldsAndMalformedLines) {
  EXPECT_TRUE(StatusIs(ParseMeminfo("MemTotal: 100 kB\n").status(), kInvalid,
                       "meminfo: no MemAvailable line (Linux 3.14 or later reports MemTotal and "
                       "MemAvailable in /proc/meminfo)"));
  EXPECT_TRUE(StatusIs(ParseMeminfo("MemAvailable: 100 kB\n").status(), kInvalid,
                       "meminfo: no MemTotal line"));
  EXPECT_TRUE(StatusIs(ParseMeminfo("MemTotal: lots kB\nMemAvailable: 1 kB\n").status(), kInvalid,
                       "meminfo: cannot read the line \"MemTotal: lots kB\": expected "
                       "\"MemTotal: <number> kB\""));
  EXPECT_TRUE(StatusIs(ParseMeminfo("MemTotal: 100 MB\nMemAvailable: 1 kB\n").status(), kInvalid,
                       "meminfo: cannot read the line \"MemTotal: 100 MB\""));
  EXPECT_TRUE(StatusIs(ParseMeminfo("MemTotal: 18446744073709551615 kB\nMemAvailable: 1 kB\n")
                           .status(),
                       kInvalid, "meminfo: cannot read the line"));
}

TEST(MeminfoTest, ReadsThisMachinesMeminfoForAnIntegratedDevice) {
  DeviceInfo info;
  info.name = "fake integrated";
  info.integrated = true;
  const absl::StatusOr<DeviceMemory> device = MeasureDeviceMemory(info);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_GT(device->host.mem_total, 0u);
  EXPECT_EQ(device->host_source, "/proc/meminfo");
}

TEST(DeviceProfileTest, KnownProfiles) {
  EXPECT_EQ(DeviceProfileNames(), std::vector<std::string>({"dgx-spark", "h200", "h100",
                                                            "a100-80gb", "rtx-5090", "rtx-4090",
                                                            "l4"}));
  for (const std::string& name : DeviceProfileNames()) {
    const DeviceMemory device = Profile(name);
    EXPECT_LE(device.free_bytes, device.total_bytes) << name;
    EXPECT_GE(device.cc_major, 8) << name;
    EXPECT_EQ(device.source, absl::StrCat("device profile ", name, ", typical figures"));
  }
  const DeviceMemory spark = Profile("dgx-spark");
  EXPECT_TRUE(spark.integrated);
  EXPECT_EQ(spark.cc_major, 12);
  EXPECT_EQ(spark.cc_minor, 1);
  EXPECT_FALSE(Profile("h200").integrated);
}

TEST(DeviceProfileTest, UnknownProfileListsTheKnownOnes) {
  EXPECT_TRUE(StatusIs(DeviceProfile("tpu-v5").status(), kInvalid,
                       "unknown device profile \"tpu-v5\" (known: dgx-spark, h200, h100, "
                       "a100-80gb, rtx-5090, rtx-4090, l4)"));
}

TEST(FormatTest, Bytes) {
  EXPECT_EQ(FormatBytes(12), "12 B");
  EXPECT_EQ(FormatBytes(64 * 1024), "64.0 KiB");
  EXPECT_EQ(FormatBytes(512 * kMiB), "512.0 MiB");
  EXPECT_EQ(FormatBytes(61'400'000'000), "57.18 GiB");
}

TEST(FormatTest, EstimateLineAndTable) {
  PlanSizes sizes;
  sizes.model = "tiny";
  sizes.weight_bytes = 2 * kGiB;
  sizes.num_weights = 3;
  sizes.arena_bytes = kMiB;
  sizes.max_tokens = 1;
  sizes.vocab_size = 128;
  const MemoryEstimate estimate = MustEstimate(sizes, Profile("h200"), Options(16));
  EXPECT_EQ(FormatEstimateLine(estimate),
            "memory: 2.44 GiB needed of 139.29 GiB available (weights 2.00 GiB, KV cache 0 B, "
            "activations 1.0 MiB, workspace 512 B, CUDA context and runtime 448.0 MiB); fits");
  EXPECT_EQ(FormatEstimateTable(estimate),
            "  weights                       2.00 GiB  3 plan weights in bf16, copied to device "
            "memory\n"
            "  KV cache                           0 B  0 full caches of --max-length 16 slots and "
            "0 sliding caches of min(max_length, window - 1 + 1) slots, in blocks of 16 "
            "tokens; K and V in f32; 1 sequence; block tables\n"
            "  activations                    1.0 MiB  the plan's activation arena (1 tokens per "
            "step)\n"
            "  workspace                        512 B  host copy of a step's logits (1 x 128 f32) "
            "for --logits-out; tokens are sampled on the device\n"
            "  CUDA context and runtime     448.0 MiB  documented constant: CUDA context, module, "
            "streams, runtime heap\n"
            "  total                         2.44 GiB\n"
            "  available                   139.29 GiB  free device memory of NVIDIA H200 (141 GB) "
            "(device profile h200, typical figures)\n"
            "  fits, 136.85 GiB to spare\n");
}

TEST(CompareWithUsageTest, AllocationsAgainstTheComponentsTheExecutorAllocates) {
  MemoryEstimate estimate;
  using Kind = MemoryComponentKind;
  estimate.components = {{Kind::kWeights, "weights", 1000, ""},
                         {Kind::kKvCache, "KV cache", 200, ""},
                         {Kind::kActivations, "activations", 30, ""},
                         {Kind::kWorkspace, "workspace", 4, ""},
                         {Kind::kContext, "CUDA context and runtime", 500, ""}};
  estimate.total = 1734;

  // Host: weights in place, no driver figure.
  MemoryUsage host;
  host.peak_allocated_bytes = 230;
  MemoryComparison compared = CompareWithUsage(estimate, host);
  EXPECT_EQ(compared.estimated_allocations, 230u);
  EXPECT_EQ(compared.measured_allocations, 230u);
  EXPECT_EQ(compared.estimated_driver, 0u);
  EXPECT_EQ(FormatMemoryComparison(compared),
            "measured: runtime allocations peak 230 B (estimated 230 B, +0.00%)");

  // Discrete GPU: weights copied; the driver figure is compared with the total less the context.
  MemoryUsage device;
  device.peak_allocated_bytes = 1250;
  device.weight_bytes = 1020;
  device.driver_used_bytes = 1300;
  compared = CompareWithUsage(estimate, device);
  EXPECT_EQ(compared.estimated_allocations, 1230u);
  EXPECT_EQ(compared.estimated_driver, 1234u);
  EXPECT_EQ(compared.measured_driver, 1300u);
  EXPECT_EQ(FormatMemoryComparison(compared),
            "measured: runtime allocations peak 1.2 KiB (estimated 1.2 KiB, +1.63%); driver used "
            "+1.3 KiB (estimated 1.2 KiB, +5.35%) since the context was created");

  // Components are found by kind: their display names do not matter.
  for (MemoryComponent& component : estimate.components) component.name += " (renamed)";
  compared = CompareWithUsage(estimate, device);
  EXPECT_EQ(compared.estimated_allocations, 1230u);
  EXPECT_EQ(compared.estimated_driver, 1234u);
}

}  // namespace
}  // namespace rt
}  // namespace spark
