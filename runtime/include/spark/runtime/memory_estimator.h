// The memory estimate (design.md "Memory estimation"; docs/memory.md): what a compiled model needs
// on a device (weights, KV cache, activations, workspace, CUDA context and runtime) and what the
// device can give this process, each with where the number comes from.
//
// Available memory: on a discrete GPU, the driver's free memory. On an integrated GPU (the driver
// reports CU_DEVICE_ATTRIBUTE_INTEGRATED, as the GB10 of a DGX Spark does) GPU and CPU share the
// host's memory, so the pool is the host's: MemAvailable from /proc/meminfo (the free huge pages
// instead when huge pages are configured, HugePages_Total > 0), plus free swap only when asked,
// capped at MemTotal, less a reserve for the OS and this process of max(4 GiB, 5% of MemTotal).
// --device-memory-utilization is the fraction of that pool the model may use. Weights are counted
// once: on an integrated GPU the runtime uses the checkpoint's pages in place.
#ifndef SPARK_RUNTIME_MEMORY_ESTIMATOR_H_
#define SPARK_RUNTIME_MEMORY_ESTIMATOR_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "spark/runtime/device.h"
#include "spark/runtime/memory_usage.h"
#include "spark/runtime/plan.h"

namespace spark {
namespace rt {

inline constexpr uint64_t kGiB = uint64_t{1} << 30;
inline constexpr uint64_t kMiB = uint64_t{1} << 20;
// The CUDA context, the loaded module, streams, events and the runtime's own heap: a documented
// constant (docs/memory.md), the same on discrete and integrated GPUs. Measured on the H200
// (2026-11-30, bench/results/): 430-436 MiB of driver-used memory for spark-run with a tiny
// model loaded; rounded up.
inline constexpr uint64_t kContextOverheadBytes = 448 * kMiB;
// Kept back from the host pool of an integrated GPU: max(4 GiB, 5% of MemTotal).
inline constexpr uint64_t kMinHostReserveBytes = 4 * kGiB;
inline constexpr int kHostReservePercent = 5;

// The fields of /proc/meminfo the estimate uses, in bytes (huge pages: counts and page size).
struct MemInfo {
  uint64_t mem_total = 0;
  uint64_t mem_free = 0;
  uint64_t mem_available = 0;
  uint64_t swap_total = 0;
  uint64_t swap_free = 0;
  uint64_t hugepages_total = 0;  // pages
  uint64_t hugepages_free = 0;   // pages
  uint64_t hugepage_size = 0;    // bytes
};

// Parses /proc/meminfo text. MemTotal and MemAvailable are required; the others default to 0.
absl::StatusOr<MemInfo> ParseMeminfo(absl::string_view text);

// A limit on this process's memory below what the machine has: RLIMIT_AS (ulimit -v) less the
// address space already in use, or a cgroup v2 memory.max less its memory.current.
struct HostLimit {
  std::string what;  // "RLIMIT_AS 8.00 GiB less 1.20 GiB of address space in use"
  uint64_t bytes_left = 0;
};

// RLIMIT_AS `limit` (RLIM_INFINITY: none) for a process using `in_use` bytes of address space.
absl::optional<HostLimit> AddressSpaceLimit(uint64_t limit, uint64_t in_use);
// The cgroup v2 `dir`'s limit from the contents of its memory.max ("max": none) and
// memory.current; nullopt when there is no limit or the text is not a number.
absl::optional<HostLimit> CgroupLimit(absl::string_view dir, absl::string_view memory_max,
                                      absl::string_view memory_current);
// This process's limits: RLIMIT_AS (with VmSize from /proc/self/statm) and the memory.max of its
// cgroup v2 and every ancestor (/proc/self/cgroup, /sys/fs/cgroup). Files it cannot read count as
// no limit.
std::vector<HostLimit> MeasureHostLimits();

// What the estimator needs to know about a device.
struct DeviceMemory {
  std::string name;    // "NVIDIA H200", or the profile's name
  std::string source;  // where the numbers come from: "driver" or "device profile h200 (...)"
  int cc_major = 0;
  int cc_minor = 0;
  bool integrated = false;
  uint64_t total_bytes = 0;  // the driver's total device memory
  uint64_t free_bytes = 0;   // the driver's free device memory (the pool of a discrete GPU)
  MemInfo host;              // the host's memory (the pool of an integrated GPU)
  std::string host_source;   // "/proc/meminfo" or the profile
  // Integrated (and the host): this process's limits (MeasureHostLimits); the budget is the
  // smallest of the pool and these. Empty for a device profile: it describes another machine.
  std::vector<HostLimit> host_limits;
};

// A device as the driver reports it; `meminfo_text` (the contents of /proc/meminfo) is parsed
// when the device is integrated and ignored otherwise.
absl::StatusOr<DeviceMemory> DeviceMemoryFromInfo(const DeviceInfo& info,
                                                  absl::string_view meminfo_text);
// The same, reading /proc/meminfo and this process's limits (MeasureHostLimits) for an
// integrated device.
absl::StatusOr<DeviceMemory> MeasureDeviceMemory(const DeviceInfo& info);

// Named profiles, so that the estimator answers "does it fit on that machine" without a GPU:
// dgx-spark, h200, h100, a100-80gb, rtx-5090, rtx-4090, l4 (numbers in docs/memory.md).
// kInvalidArgument listing the known names for any other name.
absl::StatusOr<DeviceMemory> DeviceProfile(absl::string_view name);
std::vector<std::string> DeviceProfileNames();

// The sizes the estimate is computed from: from a plan, or given directly (e.g. full-size models
// in tests).
struct PlanSizes {
  std::string model;  // for messages, e.g. the plan's variant
  uint64_t weight_bytes = 0;
  int64_t num_weights = 0;
  // The weight bytes by element type, in DType order, types with none left out: bf16 only for a
  // bf16 checkpoint; f4E2M1FN / f8E4M3FN codes and their f8E4M3FN / f32 scales for a quantized
  // one.
  std::vector<std::pair<DType, uint64_t>> weight_bytes_by_dtype;
  // Of weight_bytes, the weights the runtime assembles from checkpoint parts (WeightInfo::parts:
  // MoE experts stored one matrix per expert) or computes (WeightInfo::transform: inverted
  // scales): copied once at load on every device, so on an
  // integrated GPU they are counted once as a copy (the file pages they were read from are
  // clean page cache the kernel may reclaim), not as part of the mapping.
  uint64_t assembled_weight_bytes = 0;
  uint64_t arena_bytes = 0;
  int64_t max_tokens = 0;
  // A multimodal model's image encoder (Plan::image_encoder): its weights are counted in the
  // weights above (weight_bytes, num_weights, by dtype), of which these are its; its activation
  // arena (one image of up to image_max_patches patches) is held beside the text plan's.
  uint64_t image_encoder_weight_bytes = 0;
  uint64_t image_encoder_arena_bytes = 0;
  int64_t image_max_patches = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;  // 0: no limit
  std::vector<KvCacheInfo> kv_caches;
  // A tensor-parallel plan's ranks (Plan::ranks): the sizes above are one rank's (its weight
  // slices, its KV heads), and so is the estimate.
  int64_t ranks = 1;
};
PlanSizes SizesFromPlan(const Plan& plan);

struct EstimateOptions {
  int64_t max_length = 0;    // --max-length: tokens per sequence, prompt and output
  int64_t batch = 1;         // sequences held at once at full length (the full caches' blocks)
  // Live sequences (sessions; 0: batch): the sliding caches' rings are held for each of them, the
  // full caches' blocks for `batch` full-length sequences (an overcommitted pool when more:
  // Executor::ReserveSequences).
  int64_t sessions = 0;
  double utilization = 1.0;  // --device-memory-utilization, in (0, 1]
  bool use_swap = false;     // integrated GPUs: count free swap in the pool
  // Ranks of a tensor-parallel plan that draw on this one pool (the host simulation runs every
  // rank in one process: all of them); each rank's budget is the pool / this. 1: a device per
  // rank.
  int64_t ranks_sharing_pool = 1;
};

// What a component of the estimate counts; code looks components up by kind, the name is for
// people (and the JSON report).
enum class MemoryComponentKind { kWeights, kKvCache, kActivations, kWorkspace, kContext };

struct MemoryComponent {
  MemoryComponentKind kind = MemoryComponentKind::kWeights;
  std::string name;
  uint64_t bytes = 0;
  std::string source;
};

struct MemoryBudget {
  uint64_t bytes = 0;
  std::string source;
  bool integrated = false;
  std::string host_limit;  // the HostLimit::what that set the budget, empty when none did
};

struct MemoryEstimate {
  std::vector<MemoryComponent> components;  // weights, KV cache, activations, workspace, context
  uint64_t total = 0;
  MemoryBudget budget;
  bool fits = false;
  // For the refusal: what was asked and what would fit.
  std::string model;
  std::string device;
  int64_t ranks = 1;  // a tensor-parallel plan's: the estimate is one rank's
  EstimateOptions options;
  int64_t max_fitting_length = 0;  // the largest --max-length that fits, 0 when none does
  // The KV cache's bytes were every cache bf16 (spark-compile --kv-cache-dtype bf16); equal to
  // the KV cache component when it already is.
  uint64_t kv_bytes_as_bf16 = 0;
  // Some weights are quantized (NVFP4 or FP8): the advice does not suggest quantizing them.
  bool quantized_weights = false;
  uint64_t host_available = 0;     // integrated: MemAvailable (for the advice)
  uint64_t device_in_use = 0;      // discrete: total - free (memory other processes hold)
};

// Computes every component and the budget. kInvalidArgument for bad options (max_length < 1 or
// above the model's max_position_embeddings, batch < 1, utilization outside (0, 1]) or sizes that
// overflow.
absl::StatusOr<MemoryEstimate> Estimate(const PlanSizes& sizes, const DeviceMemory& device,
                                        const EstimateOptions& options);

// The most sequences (options.batch), from 1 to `limit`, whose estimate fits; 0 when not even one
// does. Errors as Estimate's.
absl::StatusOr<int64_t> MaxFittingBatch(const PlanSizes& sizes, const DeviceMemory& device,
                                        EstimateOptions options, int64_t limit);

// The estimate next to a measurement: the executor's own allocations against the components it
// allocates (activations, KV cache, and the weights when it copies them to the device), and the
// driver's growth since the context was created against the whole estimate less the context
// constant. Errors are (measured - estimated) / estimated.
struct MemoryComparison {
  uint64_t estimated_allocations = 0;
  uint64_t measured_allocations = 0;
  uint64_t estimated_driver = 0;  // 0 when usage.driver_used_bytes is 0 (host)
  uint64_t measured_driver = 0;
};
MemoryComparison CompareWithUsage(const MemoryEstimate& estimate, const MemoryUsage& usage);
// "measured: runtime allocations 1.20 GiB (estimated 1.19 GiB, +0.8%); driver +1.31 GiB since
// the context (estimated 1.25 GiB, +4.8%)"
std::string FormatMemoryComparison(const MemoryComparison& comparison);

// "memory: 59.50 GiB needed of 103.93 GiB available (weights ..., ...); fits"
std::string FormatEstimateLine(const MemoryEstimate& estimate);
// A table: each component with its bytes and source, the total, the budget and the verdict.
std::string FormatEstimateTable(const MemoryEstimate& estimate);
// OK when the estimate fits; otherwise kResourceExhausted naming the largest component, the
// breakdown, and what would make it fit.
absl::Status CheckFits(const MemoryEstimate& estimate);

// "57.18 GiB", "512.0 MiB", "64.0 KiB", "12 B".
std::string FormatBytes(uint64_t bytes);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_MEMORY_ESTIMATOR_H_
