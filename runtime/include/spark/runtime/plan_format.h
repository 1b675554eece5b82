// The `.spark.plan` ELF section: the compiler-runtime contract (docs/plan-format.md).
//
// Layout of the section, little-endian:
//   offset 0   char[8]  magic       "SPKPLAN\0"
//   offset 8   uint32   version     kPlanVersion
//   offset 12  uint32   flags       0 (reserved; readers reject non-zero)
//   offset 16  uint64   payload_size  bytes of the plan buffer that follows
//   offset 24  uint64   checksum      FNV-1a 64 of the plan buffer
//   offset 32  uint8[payload_size]    the plan: a FlatBuffers buffer of runtime/schema/plan.fbs
//                                     (root table Plan, file identifier "SPKP")
// The section may carry trailing zero padding; nothing else.
//
// Plain C++17, no dependencies. The runtime owns this header; the compiler's plan writer includes
// it. Bump kPlanVersion on any change to the layout or the plan schema (runtime/schema/plan.fbs).
#ifndef SPARK_RUNTIME_PLAN_FORMAT_H_
#define SPARK_RUNTIME_PLAN_FORMAT_H_

#include <cstddef>
#include <cstdint>

namespace spark {
namespace plan_format {

inline constexpr char kSectionName[] = ".spark.plan";
inline constexpr char kMagic[8] = {'S', 'P', 'K', 'P', 'L', 'A', 'N', '\0'};
inline constexpr uint32_t kPlanVersion = 19;
inline constexpr size_t kHeaderSize = 32;
// Limits that bound what a hostile plan can make the reader allocate (docs/security.md). The
// largest real plan, Gemma 4 31B's, is a buffer of 583 KiB with 1,076 steps, 1,020 buffers, 832
// weights and 60 KV caches (spark-compile --target compute_90, 2026-12-02). A plan buffer larger
// than this (56x that) is rejected before it is read (reading copies it once and builds a Plan of
// a few bytes per byte of it).
inline constexpr uint64_t kMaxPayloadSize = 32ull << 20;
// The most entries each array of a plan may have (15 to 30 times the 31B plan's).
inline constexpr uint64_t kMaxSteps = 32768;
// The most programs a plan may hold (spark-compile writes a handful: plan.h BuildPrograms splits
// the call sizes only where the MoE path or an attention's splitting changes; tiny-moe has seven).
inline constexpr uint64_t kMaxPrograms = 64;
inline constexpr uint64_t kMaxBuffers = 32768;
inline constexpr uint64_t kMaxWeights = 16384;
inline constexpr uint64_t kMaxKvCaches = 1024;
// The most parts one weight may be assembled from (Gemma 4 26B-A4B's per-expert checkpoints:
// 256, gate and up of 128 experts).
inline constexpr uint64_t kMaxWeightParts = 65536;
// Ranks of a tensor-parallel plan (Plan::ranks).
inline constexpr int64_t kMaxRanks = 64;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t flags;
  uint64_t payload_size;
  uint64_t checksum;
};
static_assert(sizeof(Header) == kHeaderSize, "plan header must be 32 bytes");

inline uint64_t Fnv1a64(const void* data, size_t size) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace plan_format
}  // namespace spark

#endif  // SPARK_RUNTIME_PLAN_FORMAT_H_
