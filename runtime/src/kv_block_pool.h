// The bookkeeping of the paged KV cache (kernel_abi.h "Paged KV cache"), shared by the host and
// CUDA executors, which own the memory: which capacity group each of a plan's KV caches belongs
// to, how many blocks each group's pool has, which are free, each sequence's block tables, and
// how many tables name each block: sequences share the blocks of a common prompt prefix (Share),
// and a write to a shared block first copies it (copy-on-write: BlockCopy). Internal to the
// runtime.
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

// A copy a write needs first (copy-on-write): the writing sequence's table names `to`, a block
// just taken from the free list, whose bytes the executor must fill with those of `from` (in
// every KV cache of `group`, K and V parts) before the step that writes it runs; `from` stays
// the other sequences'.
struct BlockCopy {
  int group = 0;
  int32_t from = -1;
  int32_t to = -1;
  bool operator==(const BlockCopy& other) const {
    return group == other.group && from == other.from && to == other.to;
  }
};

// A block given back to the free list (no table names it any more).
struct FreedBlock {
  int group = 0;
  int32_t block = -1;
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
  // Makes the blocks that positions (those >= 0) of `blocks`' sequence live in, in every group,
  // the sequence's own to write: allocates those it holds none for, and gives it a copy of
  // those it shares with another sequence (appended to `copies`, which the executor makes
  // before the step). KvPoolExhausted (RESOURCE_EXHAUSTED), changing nothing, when a group has
  // too few free blocks.
  absl::Status Grow(SequenceBlocks& blocks, absl::Span<const int32_t> positions,
                    std::vector<BlockCopy>* copies);
  // Returns every block of `blocks` to the pool (the tables become all -1); the sequence is no
  // longer live.
  void Release(SequenceBlocks& blocks);
  // Gives up every block of `blocks` (the tables become all -1): the sequence stays live (what
  // its caches held is gone: it grows again from nothing). Returns how many blocks went back to
  // the free list (a block another sequence still shares does not), each appended to `freed`
  // when it is not null.
  int64_t Drop(SequenceBlocks& blocks, std::vector<FreedBlock>* freed = nullptr);
  // Makes `to` give up what it holds (as Drop, the blocks freed appended to `freed` when it is
  // not null) and share `from`'s blocks of positions 0 .. tokens - 1 instead: in every group the
  // blocks those positions live in (a ring: the last Capacity(group) of them), counted once more
  // each; no bytes move. Both sequences then read them, and the first to write one gets its own
  // copy (Grow, MapRange). What `from`'s caches hold at those positions is the caller's to know
  // (Session: the same prompt prefix, and a ring not yet overwritten past what the next position
  // needs). INVALID_ARGUMENT for tokens outside [0, max_length()] or `to` the same as `from`;
  // FAILED_PRECONDITION when `from` holds no block for one of those positions: both change
  // nothing.
  absl::Status Share(const SequenceBlocks& from, SequenceBlocks& to, int64_t tokens,
                     std::vector<FreedBlock>* freed = nullptr);
  // How many sequences' tables name `block` of `group` (0: free).
  int32_t References(int group, int32_t block) const {
    return refs_[static_cast<size_t>(group)][static_cast<size_t>(block)];
  }

  // Where `size` bytes from byte `offset` of the sequence's view of a cache part (its
  // Capacity(group) slots of `slot_bytes` each, in position order modulo the capacity) lie in
  // the pool part, allocating the blocks they touch. For a write (`copies` not null) the blocks
  // touched that other sequences share are replaced by copies, as Grow does. RESOURCE_EXHAUSTED
  // as Grow; the range must lie within Capacity(group) * slot_bytes (CheckMemoryRegion).
  absl::StatusOr<std::vector<PoolPiece>> MapRange(SequenceBlocks& blocks, int group,
                                                  uint64_t slot_bytes, uint64_t offset,
                                                  uint64_t size, std::vector<BlockCopy>* copies);

 private:
  int64_t max_length_ = 0;
  int64_t sequences_ = 0;
  int64_t full_length_sequences_ = 0;
  std::vector<int64_t> num_blocks_;  // by group
  int64_t live_ = 0;  // sequences made by NewSequence and not released
  std::vector<int> group_of_;        // by kv cache id
  std::vector<int64_t> capacities_;  // by group
  std::vector<std::vector<int32_t>> free_;  // by group: free block ids (allocated from the back)
  std::vector<std::vector<int32_t>> refs_;  // by group, by block: the tables naming it

  // Takes a free block of `group` (the caller checked there is one), named by one table.
  int32_t Take(int group);
  // Whether a table entry holding `block` of `group` (-1: none) needs Own before it is read
  // (no block) or, for a write, before it is written (a block other tables name too).
  bool NeedsOwn(int group, int32_t block, bool write) const {
    return block < 0 || (write && References(group, block) > 1);
  }
  // One table fewer names `block` of `group`; true when it went back to the free list.
  bool Unref(int group, int32_t block);
  // The table entry `column` of `group` made the sequence's own: a fresh block where it holds
  // none, a copy (appended to `copies`) where the block is shared.
  void Own(int group, std::vector<int32_t>& table, int64_t column, std::vector<BlockCopy>* copies);
};

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_KV_BLOCK_POOL_H_
