#include "spark/runtime/memory_estimator.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "checked_math.h"
#include "file_util.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {
namespace {

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr char kMeminfoPath[] = "/proc/meminfo";
constexpr char kCgroupRoot[] = "/sys/fs/cgroup";  // the cgroup v2 hierarchy

uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return CheckedAdd(a, b).value_or(kU64Max); }
uint64_t SaturatingMul(uint64_t a, uint64_t b) { return CheckedMul(a, b).value_or(kU64Max); }

// ---------------------------------------------------------------------------------------------
// /proc/meminfo

struct MeminfoField {
  const char* key;
  uint64_t MemInfo::*member;
  bool kilobytes;  // "<n> kB" (else a plain count)
};
constexpr MeminfoField kMeminfoFields[] = {
    {"MemTotal", &MemInfo::mem_total, true},
    {"MemFree", &MemInfo::mem_free, true},
    {"MemAvailable", &MemInfo::mem_available, true},
    {"SwapTotal", &MemInfo::swap_total, true},
    {"SwapFree", &MemInfo::swap_free, true},
    {"HugePages_Total", &MemInfo::hugepages_total, false},
    {"HugePages_Free", &MemInfo::hugepages_free, false},
    {"Hugepagesize", &MemInfo::hugepage_size, true},
};

// The value of one "Key:   123 kB" line in bytes (or the plain count), or nullopt.
absl::optional<uint64_t> MeminfoValue(absl::string_view value, bool kilobytes) {
  value = absl::StripAsciiWhitespace(value);
  if (kilobytes && !absl::ConsumeSuffix(&value, "kB")) return absl::nullopt;
  uint64_t number = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(value), &number)) return absl::nullopt;
  return kilobytes ? CheckedMul(number, 1024) : absl::optional<uint64_t>(number);
}

// ---------------------------------------------------------------------------------------------
// Device profiles (docs/memory.md has the same table and where each number comes from)

struct Profile {
  const char* name;
  const char* gpu;
  int cc_major, cc_minor;
  bool integrated;
  double total_gib, free_gib;                          // the driver's figures
  double mem_total_gib, mem_available_gib, mem_free_gib;  // the host's (integrated only)
};
constexpr Profile kProfiles[] = {
    // 128 GB LPDDR5x shared by CPU and GPU; MemTotal 121.7 GiB, typically 110 GiB available.
    {"dgx-spark", "NVIDIA GB10 (DGX Spark)", 12, 1, true, 121.7, 95.0, 121.7, 110.0, 95.0},
    // Measured: driver 580.159, cuMemGetInfo in a fresh primary context (150109880320 total,
    // 149557477376 free).
    {"h200", "NVIDIA H200 (141 GB)", 9, 0, false, 139.80, 139.29, 0, 0, 0},
    {"h100", "NVIDIA H100 (80 GB)", 9, 0, false, 79.2, 78.7, 0, 0, 0},
    {"a100-80gb", "NVIDIA A100 (80 GB)", 8, 0, false, 79.2, 78.7, 0, 0, 0},
    {"rtx-5090", "NVIDIA GeForce RTX 5090 (32 GB)", 12, 0, false, 31.4, 30.8, 0, 0, 0},
    {"rtx-4090", "NVIDIA GeForce RTX 4090 (24 GB)", 8, 9, false, 23.6, 23.1, 0, 0, 0},
    {"l4", "NVIDIA L4 (24 GB)", 8, 9, false, 22.0, 21.6, 0, 0, 0},
};

uint64_t GibToBytes(double gib) { return static_cast<uint64_t>(std::llround(gib * kGiB)); }

DeviceMemory FromProfile(const Profile& profile) {
  DeviceMemory device;
  device.name = profile.gpu;
  device.source = absl::StrCat("device profile ", profile.name, ", typical figures");
  device.cc_major = profile.cc_major;
  device.cc_minor = profile.cc_minor;
  device.integrated = profile.integrated;
  device.total_bytes = GibToBytes(profile.total_gib);
  device.free_bytes = GibToBytes(profile.free_gib);
  if (profile.integrated) {
    device.host.mem_total = GibToBytes(profile.mem_total_gib);
    device.host.mem_available = GibToBytes(profile.mem_available_gib);
    device.host.mem_free = GibToBytes(profile.mem_free_gib);
    device.host_source = device.source;
  }
  return device;
}

// ---------------------------------------------------------------------------------------------
// The budget

// The host pool of an integrated GPU before the utilization fraction.
MemoryBudget HostBudget(const DeviceMemory& device, bool use_swap) {
  const MemInfo& host = device.host;
  uint64_t pool = 0;
  std::string what;
  if (host.hugepages_total > 0) {
    pool = SaturatingMul(host.hugepages_free, host.hugepage_size);
    what = absl::StrCat("free huge pages ", FormatBytes(pool), " (HugePages_Free ",
                        host.hugepages_free, " x Hugepagesize ", FormatBytes(host.hugepage_size),
                        ")");
  } else {
    pool = host.mem_available;
    what = absl::StrCat("MemAvailable ", FormatBytes(pool));
    if (use_swap) {
      pool = SaturatingAdd(pool, host.swap_free);
      absl::StrAppend(&what, " + SwapFree ", FormatBytes(host.swap_free));
    }
  }
  if (pool > host.mem_total) {
    pool = host.mem_total;
    absl::StrAppend(&what, ", capped at MemTotal ", FormatBytes(host.mem_total));
  }
  const uint64_t reserve =
      std::max(kMinHostReserveBytes, host.mem_total / 100 * kHostReservePercent);
  MemoryBudget budget;
  budget.integrated = true;
  budget.bytes = pool > reserve ? pool - reserve : 0;
  budget.source = absl::StrCat(
      "host memory shared with the integrated GPU ", device.name, " (", device.host_source,
      "): ", what, " less a reserve of ", FormatBytes(reserve), " (max(4 GiB, 5% of MemTotal ",
      FormatBytes(host.mem_total), "))");
  // A limit of this process (ulimit -v, a container's cgroup) below the machine's pool.
  for (const HostLimit& limit : device.host_limits) {
    if (limit.bytes_left >= budget.bytes) continue;
    budget.bytes = limit.bytes_left;
    budget.host_limit = limit.what;
  }
  if (!budget.host_limit.empty()) {
    absl::StrAppend(&budget.source, ", capped by this process's limit: ", budget.host_limit);
  }
  return budget;
}

MemoryBudget DeviceBudget(const DeviceMemory& device) {
  MemoryBudget budget;
  budget.bytes = device.free_bytes;
  budget.source = absl::StrCat("free device memory of ", device.name, " (", device.source, ")");
  return budget;
}

MemoryBudget Budget(const DeviceMemory& device, const EstimateOptions& options) {
  MemoryBudget budget =
      device.integrated ? HostBudget(device, options.use_swap) : DeviceBudget(device);
  if (options.utilization < 1.0) {
    budget.bytes = static_cast<uint64_t>(static_cast<long double>(budget.bytes) *
                                         options.utilization);
    absl::StrAppend(&budget.source, ", x --device-memory-utilization ", options.utilization);
  }
  if (options.ranks_sharing_pool > 1) {
    budget.bytes /= static_cast<uint64_t>(options.ranks_sharing_pool);
    absl::StrAppend(&budget.source, ", / ", options.ranks_sharing_pool,
                    " ranks sharing it");
  }
  return budget;
}

// ---------------------------------------------------------------------------------------------
// The components

absl::Status CheckInputs(const PlanSizes& sizes, const EstimateOptions& options) {
  if (options.max_length < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-length must be at least 1, found ", options.max_length));
  }
  if (sizes.max_position_embeddings > 0 && options.max_length > sizes.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-length ", options.max_length, " is above the model's max_position_embeddings (",
        sizes.max_position_embeddings, "); use ", sizes.max_position_embeddings, " or less"));
  }
  if (options.batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the batch must be at least 1, found ", options.batch));
  }
  if (options.sessions < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the number of sessions must be at least 0, found ", options.sessions));
  }
  if (!(options.utilization > 0.0 && options.utilization <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--device-memory-utilization must be in (0, 1], found ", options.utilization));
  }
  if (sizes.max_tokens < 1 || sizes.max_tokens > kInt32Max || sizes.vocab_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan sizes: max_tokens must be in [1, 2^31), found ", sizes.max_tokens,
        "; vocab_size must be >= 0, found ", sizes.vocab_size));
  }
  for (const KvCacheInfo& cache : sizes.kv_caches) {
    const bool bad_window =
        cache.kind == KvKind::kSliding && (cache.window < 1 || cache.window > kInt32Max);
    if (bad_window || cache.kv_heads < 1 || cache.head_dim < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan sizes: KV cache ", cache.name, " needs window (sliding) in [1, 2^31), kv_heads "
          ">= 1 and head_dim >= 1"));
    }
  }
  return absl::OkStatus();
}

// K and V of every cache for `max_length` tokens (the executors' pool of KV blocks, as
// KvBlockPool::Make sizes it: the caches of the largest capacity for `batch` sequences, the others
// for max(batch, sessions)), and the block tables of the capacity groups (i32 [max_tokens,
// capacity / block] each), or nullopt on overflow.
absl::optional<uint64_t> KvBytes(const PlanSizes& sizes, int64_t max_length, int64_t batch,
                                 int64_t sessions) {
  uint64_t total = 0;
  std::vector<int64_t> groups;
  const std::vector<int64_t> held = KvSequencesHeld(sizes.kv_caches, max_length, sizes.max_tokens,
                                                    std::max(batch, sessions), batch);
  for (size_t c = 0; c < sizes.kv_caches.size(); ++c) {
    const KvCacheInfo& cache = sizes.kv_caches[c];
    const int64_t capacity = KvCapacity(cache, max_length, sizes.max_tokens);
    const int64_t holders = held[c];
    if (std::find(groups.begin(), groups.end(), capacity) == groups.end()) {
      groups.push_back(capacity);
      const absl::optional<uint64_t> table = CheckedShapeBytes(
          {sizes.max_tokens, capacity / abi::kKvBlockRows}, sizeof(int32_t));
      const absl::optional<uint64_t> sum = table ? CheckedAdd(total, *table) : absl::nullopt;
      if (!sum) return absl::nullopt;
      total = *sum;
    }
    const absl::optional<uint64_t> bytes =
        CheckedShapeBytes({2, capacity, cache.kv_heads, cache.head_dim, holders},
                          static_cast<uint64_t>(DTypeSize(cache.dtype)));
    const absl::optional<uint64_t> sum = bytes ? CheckedAdd(total, *bytes) : absl::nullopt;
    if (!sum) return absl::nullopt;
    total = *sum;
  }
  return total;
}

std::string KvSource(const PlanSizes& sizes, const EstimateOptions& options) {
  int full = 0, sliding = 0, bf16 = 0;
  for (const KvCacheInfo& cache : sizes.kv_caches) {
    (cache.kind == KvKind::kFull ? full : sliding) += 1;
    if (cache.dtype == DType::kBF16) ++bf16;
  }
  const char* dtype = bf16 == 0 ? "f32" : bf16 == full + sliding ? "bf16" : "f32 or bf16";
  return absl::StrCat(full, " full caches of --max-length ", options.max_length, " slots and ",
                      sliding, " sliding caches of min(max_length, window - 1 + ",
                      sizes.max_tokens, ") slots, in blocks of ", abi::kKvBlockRows,
                      " tokens; K and V in ", dtype, "; ", options.batch,
                      options.batch == 1 ? " sequence" : " sequences",
                      options.sessions > options.batch
                          ? absl::StrCat(" (sliding caches: ", options.sessions, ")")
                          : "",
                      "; block tables");
}

// The host copy of a step's logits (max_tokens x vocab f32) when every row is asked for
// (--logits-out); sampling itself runs on the device (the plan's sample step), and a normal
// step copies one token id.
absl::optional<uint64_t> WorkspaceBytes(const PlanSizes& sizes) {
  return CheckedShapeBytes({sizes.max_tokens, sizes.vocab_size}, sizeof(float));
}

// True when some weight is of a quantized element type (NVFP4 codes or FP8 elements).
bool HasQuantizedWeights(const PlanSizes& sizes) {
  for (const auto& [dtype, bytes] : sizes.weight_bytes_by_dtype) {
    if (dtype == DType::kF4E2M1FN || dtype == DType::kF8E4M3FN) return true;
  }
  return false;
}

// "in bf16", or for a quantized checkpoint the bytes of each element type.
std::string WeightTypes(const PlanSizes& sizes) {
  if (!HasQuantizedWeights(sizes)) return "in bf16";
  std::vector<std::string> parts;
  for (const auto& [dtype, bytes] : sizes.weight_bytes_by_dtype) {
    parts.push_back(absl::StrCat(DTypeName(dtype), " ", FormatBytes(bytes)));
  }
  return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
}

std::vector<MemoryComponent> FixedComponents(const PlanSizes& sizes, const DeviceMemory& device,
                                             const EstimateOptions& options, uint64_t workspace) {
  const std::string except =
      sizes.assembled_weight_bytes == 0
          ? std::string()
          : absl::StrCat(" except ", FormatBytes(sizes.assembled_weight_bytes),
                         sizes.ranks > 1
                             ? " assembled at load (column slices of this rank, per-expert "
                               "tensors, computed scales: a copy)"
                             : " assembled from per-expert tensors or computed at load (a copy)");
  const std::string weights_source =
      device.integrated
          ? absl::StrCat(sizes.num_weights, " plan weights ", WeightTypes(sizes),
                         ", used in place from the checkpoint's memory mapping", except,
                         " (counted once)")
          : absl::StrCat(sizes.num_weights, " plan weights ", WeightTypes(sizes),
                         ", copied to device memory");
  const std::string vision_weights =
      sizes.image_encoder_weight_bytes == 0
          ? std::string()
          : absl::StrCat("; ", FormatBytes(sizes.image_encoder_weight_bytes),
                         " of them the vision tower's");
  const std::string vision_arena =
      sizes.image_max_patches == 0
          ? std::string()
          : absl::StrCat(", and the image encoder's (", FormatBytes(sizes.image_encoder_arena_bytes),
                         ", one image of up to ", sizes.image_max_patches, " patches)");
  return {
      {MemoryComponentKind::kWeights, "weights", sizes.weight_bytes,
       weights_source + vision_weights},
      {MemoryComponentKind::kActivations, "activations",
       SaturatingAdd(sizes.arena_bytes, sizes.image_encoder_arena_bytes),
       absl::StrCat("the plan's activation arena (", sizes.max_tokens, " tokens per step)",
                    vision_arena)},
      {MemoryComponentKind::kWorkspace, "workspace", workspace,
       absl::StrCat("host copy of a step's logits (", sizes.max_tokens, " x ", sizes.vocab_size,
                    " f32) for --logits-out; tokens are sampled on the device")},
      {MemoryComponentKind::kContext, "CUDA context and runtime", kContextOverheadBytes,
       "documented constant: CUDA context, module, streams, runtime heap"},
  };
}

uint64_t Sum(const std::vector<MemoryComponent>& components) {
  uint64_t total = 0;
  for (const MemoryComponent& component : components) {
    total = SaturatingAdd(total, component.bytes);
  }
  return total;
}

// The largest --max-length in [1, options.max_length] whose total fits `budget`, 0 if none.
int64_t MaxFittingLength(const PlanSizes& sizes, const EstimateOptions& options, uint64_t fixed,
                         uint64_t budget) {
  const auto fits = [&](int64_t length) {
    const absl::optional<uint64_t> kv = KvBytes(sizes, length, options.batch, options.sessions);
    return kv && SaturatingAdd(fixed, *kv) <= budget;
  };
  if (!fits(1)) return 0;
  int64_t low = 1, high = options.max_length;  // fits(low); the answer is in [low, high]
  while (low < high) {
    const int64_t middle = low + (high - low + 1) / 2;
    if (fits(middle)) {
      low = middle;
    } else {
      high = middle - 1;
    }
  }
  return low;
}

// ---------------------------------------------------------------------------------------------
// Refusal advice

const MemoryComponent& Largest(const MemoryEstimate& estimate) {
  return *std::max_element(
      estimate.components.begin(), estimate.components.end(),
      [](const MemoryComponent& a, const MemoryComponent& b) { return a.bytes < b.bytes; });
}

uint64_t ComponentBytes(const MemoryEstimate& estimate, MemoryComponentKind kind) {
  for (const MemoryComponent& component : estimate.components) {
    if (component.kind == kind) return component.bytes;
  }
  return 0;
}

std::string LengthAdvice(const MemoryEstimate& estimate) {
  if (estimate.max_fitting_length > 0) {
    return absl::StrCat("use --max-length ", estimate.max_fitting_length,
                        " or less (now ", estimate.options.max_length, ")");
  }
  const uint64_t kv = ComponentBytes(estimate, MemoryComponentKind::kKvCache);
  return absl::StrCat("a shorter --max-length cannot make it fit: without the KV cache it still "
                      "needs ",
                      FormatBytes(estimate.total - kv));
}

std::string QuantizationAdvice(const MemoryEstimate& estimate) {
  const uint64_t weights = ComponentBytes(estimate, MemoryComponentKind::kWeights);
  if (estimate.quantized_weights) {
    return absl::StrCat("the weights are quantized already (", FormatBytes(weights),
                        "): use a smaller model or a device with more memory");
  }
  const uint64_t others = estimate.total - weights;
  for (const auto& [bits, divisor] : {std::pair<int, uint64_t>{8, 2}, {4, 4}}) {
    const uint64_t needed = others + weights / divisor;
    if (needed <= estimate.budget.bytes) {
      return absl::StrCat("use a quantized checkpoint: the bf16 weights take ",
                          FormatBytes(weights), "; with ", bits, "-bit weights (about ",
                          FormatBytes(weights / divisor), ") the model would need ",
                          FormatBytes(needed));
    }
  }
  return absl::StrCat("even 4-bit weights (about ", FormatBytes(weights / 4),
                      ") would not fit: use a smaller model or a device with more memory");
}

// Only when some cache is f32 and bf16 caches would make it fit.
absl::optional<std::string> KvDTypeAdvice(const MemoryEstimate& estimate) {
  const uint64_t kv = ComponentBytes(estimate, MemoryComponentKind::kKvCache);
  if (estimate.kv_bytes_as_bf16 >= kv) return absl::nullopt;
  const uint64_t needed = estimate.total - kv + estimate.kv_bytes_as_bf16;
  if (needed > estimate.budget.bytes) return absl::nullopt;
  return absl::StrCat("recompile with spark-compile --kv-cache-dtype bf16: the KV cache takes ",
                      FormatBytes(kv), "; in bf16 (about ", FormatBytes(estimate.kv_bytes_as_bf16),
                      ") the model would need ", FormatBytes(needed));
}

std::vector<std::string> Advice(const MemoryEstimate& estimate) {
  std::vector<std::string> advice = {LengthAdvice(estimate)};
  if (absl::optional<std::string> kv = KvDTypeAdvice(estimate)) advice.push_back(*kv);
  advice.push_back(QuantizationAdvice(estimate));
  if (estimate.options.batch > 1) {
    advice.push_back(absl::StrCat("use a smaller batch (now ", estimate.options.batch,
                                  "): the KV cache grows with it"));
  }
  if (estimate.options.utilization < 1.0) {
    advice.push_back(absl::StrCat("raise --device-memory-utilization (now ",
                                  estimate.options.utilization, ")"));
  }
  if (!estimate.budget.host_limit.empty()) {
    advice.push_back(absl::StrCat(
        "raise this process's memory limit (ulimit -v, or the container's or cgroup's memory "
        "limit): ",
        estimate.budget.host_limit));
  } else if (estimate.budget.integrated) {
    advice.push_back(absl::StrCat(
        "free host memory: close other programs, or drop the page cache (sync; echo 3 | sudo "
        "tee /proc/sys/vm/drop_caches); MemAvailable is now ",
        FormatBytes(estimate.host_available)));
  } else if (estimate.device_in_use > kGiB) {
    advice.push_back(absl::StrCat("free device memory: ", FormatBytes(estimate.device_in_use),
                                  " of it is in use by other processes (nvidia-smi lists them)"));
  }
  return advice;
}

}  // namespace

std::string FormatBytes(uint64_t bytes) {
  if (bytes >= kGiB) return absl::StrFormat("%.2f GiB", static_cast<double>(bytes) / kGiB);
  if (bytes >= kMiB) return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / kMiB);
  if (bytes >= 1024) return absl::StrFormat("%.1f KiB", static_cast<double>(bytes) / 1024);
  return absl::StrCat(bytes, " B");
}

absl::StatusOr<MemInfo> ParseMeminfo(absl::string_view text) {
  MemInfo info;
  bool has_total = false, has_available = false;
  for (const absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    const std::pair<absl::string_view, absl::string_view> key_value =
        absl::StrSplit(line, absl::MaxSplits(':', 1));
    for (const MeminfoField& field : kMeminfoFields) {
      if (key_value.first != field.key) continue;
      const absl::optional<uint64_t> value = MeminfoValue(key_value.second, field.kilobytes);
      if (!value) {
        return absl::InvalidArgumentError(absl::StrCat(
            "meminfo: cannot read the line \"", line, "\": expected \"", field.key, ": <number>",
            field.kilobytes ? " kB" : "", "\""));
      }
      info.*field.member = *value;
      has_total |= key_value.first == "MemTotal";
      has_available |= key_value.first == "MemAvailable";
    }
  }
  if (!has_total || !has_available) {
    return absl::InvalidArgumentError(absl::StrCat(
        "meminfo: no ", has_total ? "MemAvailable" : "MemTotal",
        " line (Linux 3.14 or later reports MemTotal and MemAvailable in /proc/meminfo)"));
  }
  return info;
}

absl::StatusOr<DeviceMemory> DeviceMemoryFromInfo(const DeviceInfo& info,
                                                  absl::string_view meminfo_text) {
  DeviceMemory device;
  device.name = info.name;
  device.source = "driver, cuMemGetInfo";
  device.cc_major = info.cc_major;
  device.cc_minor = info.cc_minor;
  device.integrated = info.integrated;
  device.total_bytes = info.total_bytes;
  device.free_bytes = info.free_bytes;
  if (info.integrated) {
    SPARK_ASSIGN_OR_RETURN(device.host, ParseMeminfo(meminfo_text));
    device.host_source = kMeminfoPath;
  }
  return device;
}

absl::StatusOr<DeviceMemory> MeasureDeviceMemory(const DeviceInfo& info) {
  std::string meminfo;
  if (info.integrated) {
    SPARK_ASSIGN_OR_RETURN(meminfo, ReadFileToString(kMeminfoPath));
  }
  SPARK_ASSIGN_OR_RETURN(DeviceMemory device, DeviceMemoryFromInfo(info, meminfo));
  if (info.integrated) device.host_limits = MeasureHostLimits();
  return device;
}

absl::optional<HostLimit> AddressSpaceLimit(uint64_t limit, uint64_t in_use) {
  if (limit == static_cast<uint64_t>(RLIM_INFINITY)) return absl::nullopt;
  return HostLimit{absl::StrCat("RLIMIT_AS (ulimit -v) ", FormatBytes(limit), " less ",
                                FormatBytes(in_use), " of address space in use"),
                   limit > in_use ? limit - in_use : 0};
}

absl::optional<HostLimit> CgroupLimit(absl::string_view dir, absl::string_view memory_max,
                                      absl::string_view memory_current) {
  uint64_t max = 0, current = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(memory_max), &max) ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(memory_current), &current)) {
    return absl::nullopt;  // "max": no limit
  }
  return HostLimit{absl::StrCat("cgroup ", dir, " memory.max ", FormatBytes(max), " less ",
                                FormatBytes(current), " in use (memory.current)"),
                   max > current ? max - current : 0};
}

std::vector<HostLimit> MeasureHostLimits() {
  std::vector<HostLimit> limits;
  struct rlimit address_space;
  if (::getrlimit(RLIMIT_AS, &address_space) == 0) {
    // /proc/self/statm: sizes in pages, the first the whole address space (VmSize).
    const absl::StatusOr<std::string> statm = ReadFileToString("/proc/self/statm");
    uint64_t pages = 0;
    if (statm.ok()) {
      const std::vector<absl::string_view> fields = absl::StrSplit(*statm, ' ');
      if (!absl::SimpleAtoi(fields[0], &pages)) pages = 0;
    }
    const uint64_t in_use = pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    if (absl::optional<HostLimit> limit = AddressSpaceLimit(address_space.rlim_cur, in_use)) {
      limits.push_back(*std::move(limit));
    }
  }
  // cgroup v2: the line "0::<path>"; the limits of the cgroup and of each ancestor apply.
  const absl::StatusOr<std::string> cgroup = ReadFileToString("/proc/self/cgroup");
  if (!cgroup.ok()) return limits;
  for (const absl::string_view line : absl::StrSplit(*cgroup, '\n', absl::SkipEmpty())) {
    absl::string_view path = line;
    if (!absl::ConsumePrefix(&path, "0::")) continue;
    std::string dir = absl::StrCat(kCgroupRoot, path == "/" ? "" : path);
    while (dir.size() > sizeof(kCgroupRoot) - 1) {
      const absl::StatusOr<std::string> max = ReadFileToString(JoinPath(dir, "memory.max"));
      const absl::StatusOr<std::string> current = ReadFileToString(JoinPath(dir, "memory.current"));
      if (max.ok() && current.ok()) {
        if (absl::optional<HostLimit> limit = CgroupLimit(dir, *max, *current)) {
          limits.push_back(*std::move(limit));
        }
      }
      dir = Dirname(dir);
    }
  }
  return limits;
}

absl::StatusOr<DeviceMemory> DeviceProfile(absl::string_view name) {
  for (const Profile& profile : kProfiles) {
    if (name == profile.name) return FromProfile(profile);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown device profile \"", name,
                                                 "\" (known: ",
                                                 absl::StrJoin(DeviceProfileNames(), ", "), ")"));
}

std::vector<std::string> DeviceProfileNames() {
  std::vector<std::string> names;
  for (const Profile& profile : kProfiles) names.push_back(profile.name);
  return names;
}

PlanSizes SizesFromPlan(const Plan& plan) {
  PlanSizes sizes;
  sizes.model = plan.model.variant;
  // The text plan's weights and, for a multimodal model, its image encoder's.
  std::vector<const WeightInfo*> weights;
  for (const WeightInfo& weight : plan.weights) weights.push_back(&weight);
  if (plan.image_encoder) {
    for (const WeightInfo& weight : plan.image_encoder->weights) {
      weights.push_back(&weight);
      sizes.image_encoder_weight_bytes =
          SaturatingAdd(sizes.image_encoder_weight_bytes, weight.num_bytes());
    }
    sizes.image_encoder_arena_bytes = plan.image_encoder->arena_bytes;
    sizes.image_max_patches = plan.image_encoder->max_tokens;
  }
  for (const WeightInfo* weight : weights) {
    sizes.weight_bytes = SaturatingAdd(sizes.weight_bytes, weight->num_bytes());
    if (weight->CopiedAtLoad()) {
      sizes.assembled_weight_bytes =
          SaturatingAdd(sizes.assembled_weight_bytes, weight->num_bytes());
    }
  }
  sizes.num_weights = static_cast<int64_t>(weights.size());
  for (const DType dtype : kAllDTypes) {
    uint64_t bytes = 0;
    for (const WeightInfo* weight : weights) {
      if (weight->dtype == dtype) bytes = SaturatingAdd(bytes, weight->num_bytes());
    }
    if (bytes > 0) sizes.weight_bytes_by_dtype.emplace_back(dtype, bytes);
  }
  sizes.arena_bytes = plan.arena_bytes;
  sizes.max_tokens = plan.max_tokens;
  sizes.vocab_size = plan.model.vocab_size;
  sizes.max_position_embeddings = plan.model.max_position_embeddings;
  sizes.kv_caches = plan.kv_caches;
  sizes.ranks = plan.ranks;
  return sizes;
}

absl::StatusOr<MemoryEstimate> Estimate(const PlanSizes& sizes, const DeviceMemory& device,
                                        const EstimateOptions& options) {
  SPARK_RETURN_IF_ERROR(CheckInputs(sizes, options));
  const absl::optional<uint64_t> kv =
      KvBytes(sizes, options.max_length, options.batch, options.sessions);
  const absl::optional<uint64_t> workspace = WorkspaceBytes(sizes);
  if (!kv || !workspace) {
    return absl::InvalidArgumentError(
        "the KV cache or workspace size overflows 64 bits: check --max-length and the batch");
  }
  MemoryEstimate estimate;
  estimate.model = sizes.model;
  estimate.device = device.name;
  estimate.ranks = sizes.ranks;
  estimate.options = options;
  estimate.components = FixedComponents(sizes, device, options, *workspace);
  const uint64_t fixed = Sum(estimate.components);
  estimate.components.insert(estimate.components.begin() + 1,
                             {MemoryComponentKind::kKvCache, "KV cache", *kv,
                              KvSource(sizes, options)});
  estimate.total = SaturatingAdd(fixed, *kv);
  estimate.budget = Budget(device, options);
  estimate.fits = estimate.total <= estimate.budget.bytes;
  estimate.max_fitting_length = MaxFittingLength(sizes, options, fixed, estimate.budget.bytes);
  PlanSizes as_bf16 = sizes;
  for (KvCacheInfo& cache : as_bf16.kv_caches) cache.dtype = DType::kBF16;
  estimate.kv_bytes_as_bf16 =
      KvBytes(as_bf16, options.max_length, options.batch, options.sessions).value_or(*kv);
  estimate.quantized_weights = HasQuantizedWeights(sizes);
  estimate.host_available = device.integrated ? device.host.mem_available : 0;
  estimate.device_in_use =
      device.total_bytes > device.free_bytes ? device.total_bytes - device.free_bytes : 0;
  return estimate;
}

namespace {

// " per rank (2 ranks)" for a tensor-parallel plan's estimate, else nothing.
std::string RanksNote(const MemoryEstimate& estimate) {
  return estimate.ranks > 1 ? absl::StrCat(" per rank (", estimate.ranks, " ranks)") : "";
}

}  // namespace

std::string FormatEstimateLine(const MemoryEstimate& estimate) {
  std::vector<std::string> parts;
  for (const MemoryComponent& component : estimate.components) {
    parts.push_back(absl::StrCat(component.name, " ", FormatBytes(component.bytes)));
  }
  return absl::StrCat("memory", RanksNote(estimate), ": ", FormatBytes(estimate.total),
                      " needed of ",
                      FormatBytes(estimate.budget.bytes), " available (",
                      absl::StrJoin(parts, ", "), "); ",
                      estimate.fits ? "fits" : "does not fit");
}

std::string FormatEstimateTable(const MemoryEstimate& estimate) {
  std::string out;
  if (estimate.ranks > 1) {
    absl::StrAppend(&out, "  one rank of ", estimate.ranks,
                    " (tensor parallel: its weight slices and KV heads; every rank needs as "
                    "much)\n");
  }
  const auto row = [&out](absl::string_view name, uint64_t bytes, absl::string_view source) {
    absl::StrAppendFormat(&out, "  %-26s %11s%s%s\n", name, FormatBytes(bytes),
                          source.empty() ? "" : "  ", source);
  };
  for (const MemoryComponent& component : estimate.components) {
    row(component.name, component.bytes, component.source);
  }
  row("total", estimate.total, "");
  row("available", estimate.budget.bytes, estimate.budget.source);
  if (estimate.fits) {
    absl::StrAppend(&out, "  fits, ", FormatBytes(estimate.budget.bytes - estimate.total),
                    " to spare\n");
  } else {
    absl::StrAppend(&out, "  does not fit: ", FormatBytes(estimate.total - estimate.budget.bytes),
                    " short\n");
  }
  return out;
}

absl::Status CheckFits(const MemoryEstimate& estimate) {
  if (estimate.fits) return absl::OkStatus();
  const MemoryComponent& largest = Largest(estimate);
  std::string message = absl::StrCat(
      estimate.model.empty() ? "the model" : estimate.model, " does not fit on ", estimate.device,
      " with --max-length ", estimate.options.max_length,
      estimate.options.batch > 1 ? absl::StrCat(" and batch ", estimate.options.batch) : "",
      ": it needs ", FormatBytes(estimate.total), ", ", FormatBytes(estimate.budget.bytes),
      " is available\n", FormatEstimateTable(estimate), "largest component: ", largest.name, " (",
      FormatBytes(largest.bytes), ")\nto make it fit:");
  for (const std::string& advice : Advice(estimate)) absl::StrAppend(&message, "\n  - ", advice);
  return absl::ResourceExhaustedError(message);
}

namespace {

std::string Versus(uint64_t measured, uint64_t estimated) {
  const double error = estimated == 0 ? 0.0
                                      : (static_cast<double>(measured) - estimated) / estimated;
  return absl::StrFormat("%s (estimated %s, %+.2f%%)", FormatBytes(measured),
                         FormatBytes(estimated), 100.0 * error);
}

}  // namespace

MemoryComparison CompareWithUsage(const MemoryEstimate& estimate, const MemoryUsage& usage) {
  MemoryComparison comparison;
  const auto bytes = [&estimate](MemoryComponentKind kind) {
    return ComponentBytes(estimate, kind);
  };
  comparison.estimated_allocations =
      bytes(MemoryComponentKind::kKvCache) + bytes(MemoryComponentKind::kActivations) +
      (usage.weight_bytes > 0 ? bytes(MemoryComponentKind::kWeights) : 0);
  comparison.measured_allocations = usage.peak_allocated_bytes;
  if (usage.driver_used_bytes > 0) {
    comparison.estimated_driver =
        estimate.total - std::min(estimate.total, bytes(MemoryComponentKind::kContext));
    comparison.measured_driver = usage.driver_used_bytes;
  }
  return comparison;
}

std::string FormatMemoryComparison(const MemoryComparison& comparison) {
  std::string out = absl::StrCat(
      "measured: runtime allocations peak ",
      Versus(comparison.measured_allocations, comparison.estimated_allocations));
  if (comparison.measured_driver > 0) {
    absl::StrAppend(&out, "; driver used +",
                    Versus(comparison.measured_driver, comparison.estimated_driver),
                    " since the context was created");
  }
  return out;
}

absl::StatusOr<int64_t> MaxFittingBatch(const PlanSizes& sizes, const DeviceMemory& device,
                                        EstimateOptions options, int64_t limit) {
  // Memory grows with the batch: the largest fitting one by bisection over [0, limit].
  int64_t lo = 0, hi = std::max<int64_t>(limit, 0);
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    options.batch = mid;
    SPARK_ASSIGN_OR_RETURN(const MemoryEstimate estimate, Estimate(sizes, device, options));
    if (estimate.fits) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace rt
}  // namespace spark
