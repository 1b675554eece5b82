// The bookkeeping of the paged KV cache (kernel_abi.h "Paged KV cache"), shared by the host and
// CUDA executors, which own the memory: which capacity group each of a plan's KV caches belongs
// to, how many blocks each group's pool has, which are free, and each sequence's block tables.
// Internal to the runtime.
#ifndef SPARK_RUNTIME_SRC_KV_BLOCK_POOL_H_
#define SPARK_RUNTIME_SRC_KV_BLOCK_POOL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "spark/runtime/plan.h"

namespace spark {
namespace rt {

// The blocks one sequence holds: per capacity group, its block-table row (Columns(group) block
// ids, -1 where none is allocated yet).
struct SequenceBlocks {
  std::vector<std::vector<int32_t>> tables;
  int64_t num_blocks() const;  // blocks held, over every group
};

// A byte range of one KV cache part in the pool: `bytes` at `pool_offset` hold the sequence's
// bytes from `offset` (relative to the range asked for).
struct PoolPiece {
  uint64_t pool_offset = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

class KvBlockPool {
 public:
  // No pool: Reserved() is false.
  KvBlockPool() = default;

  // A pool for `sequences` live sequences of up to `max_length` tokens of `plan`: the plan's
  // caches grouped by their capacity (KvCapacity: slots per sequence, whole blocks), all blocks
  // free. The groups of the largest capacity (the full caches: what grows with max_length) hold
  // `full_length_sequences` x Columns(group) blocks, the others (sliding-window rings) sequences x
  // Columns(group). With full_length_sequences < sequences the pool is overcommitted: Grow fails
  // (KvPoolExhausted) when the live sequences together need more blocks than it has, and callers
  // free blocks (Drop) and recompute (session.cc). INVALID_ARGUMENT for max_length or sequences
  // outside [1, 2^31), full_length_sequences outside [1, sequences], or block ids past i32.
  static absl::StatusOr<KvBlockPool> Make(const Plan& plan, int64_t max_length, int64_t sequences,
                                          int64_t full_length_sequences);

  bool Reserved() const { return sequences_ > 0; }
  int64_t max_length() const { return max_length_; }
  int64_t sequences() const { return sequences_; }
  int64_t full_length_sequences() const { return full_length_sequences_; }
  bool Overcommitted() const { return full_length_sequences_ < sequences_; }
  int num_groups() const { return static_cast<int>(capacities_.size()); }
  int GroupOf(int64_t cache) const { return group_of_[static_cast<size_t>(cache)]; }
  int64_t Capacity(int group) const { return capacities_[static_cast<size_t>(group)]; }
  int64_t Columns(int group) const { return Capacity(group) / abi::kKvBlockRows; }
  int64_t NumBlocks(int group) const { return num_blocks_[static_cast<size_t>(group)]; }
  int64_t FreeBlocks(int group) const {
    return static_cast<int64_t>(free_[static_cast<size_t>(group)].size());
  }
  // Capacity(GroupOf(cache)) for every cache of the plan, by cache id.
  std::vector<int64_t> CacheCapacities() const;

  // A sequence holding no blocks; the pool counts it live until Release.
  SequenceBlocks NewSequence();
  // FAILED_PRECONDITION while a sequence of this pool is live: a new pool (Make) would take the
  // memory its blocks are in.
  absl::Status CheckNoLiveSequences() const;
  // Whether an executor must (re)reserve the pool before a sequence of `max_length` tokens: none
  // is reserved, or for shorter sequences. INVALID_ARGUMENT outside [1, 2^31).
  absl::StatusOr<bool> NeedsReserve(int64_t max_length) const;
  // The first position of every block a sequence of max_length() tokens may hold (Grow with it
  // allocates them all: RunProgram runs on whatever the caches hold).
  std::vector<int32_t> EveryBlockPosition() const;
  // Allocates, in every group, the blocks that positions (those >= 0) of `blocks`' sequence
  // live in. KvPoolExhausted (RESOURCE_EXHAUSTED), allocating nothing, when a group has too few
  // free blocks.
  absl::Status Grow(SequenceBlocks& blocks, absl::Span<const int32_t> positions);
  // Returns every block of `blocks` to the pool (the tables become all -1); the sequence is no
  // longer live.
  void Release(SequenceBlocks& blocks);
  // Returns every block of `blocks` to the pool, how many; the sequence stays live (what its
  // caches held is gone: it grows again from nothing).
  int64_t Drop(SequenceBlocks& blocks);

  // Where `size` bytes from byte `offset` of the sequence's view of a cache part (its
  // Capacity(group) slots of `slot_bytes` each, in position order modulo the capacity) lie in
  // the pool part, allocating the blocks they touch. RESOURCE_EXHAUSTED as Grow; the range must
  // lie within Capacity(group) * slot_bytes (CheckMemoryRegion).
  absl::StatusOr<std::vector<PoolPiece>> MapRange(SequenceBlocks& blocks, int group,
                                                  uint64_t slot_bytes, uint64_t offset,
                                                  uint64_t size);

 private:
  int64_t max_length_ = 0;
  int64_t sequences_ = 0;
  int64_t full_length_sequences_ = 0;
  std::vector<int64_t> num_blocks_;  // by group
  int64_t live_ = 0;  // sequences made by NewSequence and not released
  std::vector<int> group_of_;        // by kv cache id
  std::vector<int64_t> capacities_;  // by group
  std::vector<std::vector<int32_t>> free_;  // by group: free block ids (allocated from the back)
};

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_KV_BLOCK_POOL_H_
