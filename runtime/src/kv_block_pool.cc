#include "kv_block_pool.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/kernel_abi.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {
namespace {

absl::Status CheckMaxLength(int64_t max_length) {
  if (max_length >= 1 && max_length <= std::numeric_limits<int32_t>::max()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("max_length must be in [1, 2^31), got ", max_length));
}

}  // namespace

int64_t SequenceBlocks::num_blocks() const {
  int64_t n = 0;
  for (const std::vector<int32_t>& table : tables) {
    n += std::count_if(table.begin(), table.end(), [](int32_t b) { return b >= 0; });
  }
  return n;
}

absl::StatusOr<KvBlockPool> KvBlockPool::Make(const Plan& plan, int64_t max_length,
                                              int64_t sequences, int64_t full_length_sequences) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  SPARK_RETURN_IF_ERROR(CheckMaxLength(max_length));
  if (sequences < 1 || sequences > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("the number of sequences must be in [1, 2^31), got ", sequences));
  }
  if (full_length_sequences < 1 || full_length_sequences > sequences) {
    return absl::InvalidArgumentError(
        absl::StrCat("the KV cache pool must hold from 1 to ", sequences,
                     " full-length sequences, got ", full_length_sequences));
  }
  KvBlockPool pool;
  pool.max_length_ = max_length;
  pool.sequences_ = sequences;
  pool.full_length_sequences_ = full_length_sequences;
  const std::vector<int64_t> held = KvSequencesHeld(plan.kv_caches, max_length, plan.max_tokens,
                                                    sequences, full_length_sequences);
  std::vector<int64_t> group_holders;
  for (size_t c = 0; c < plan.kv_caches.size(); ++c) {
    const int64_t capacity = KvCapacity(plan.kv_caches[c], max_length, plan.max_tokens);
    auto found = std::find(pool.capacities_.begin(), pool.capacities_.end(), capacity);
    if (found == pool.capacities_.end()) {
      pool.capacities_.push_back(capacity);
      group_holders.push_back(held[c]);
      found = pool.capacities_.end() - 1;
    }
    pool.group_of_.push_back(static_cast<int>(found - pool.capacities_.begin()));
  }
  for (int g = 0; g < pool.num_groups(); ++g) {
    const int64_t holders = group_holders[g];
    const int64_t blocks = pool.Columns(g) * holders;
    pool.num_blocks_.push_back(blocks);
    if (blocks / holders != pool.Columns(g) || blocks > kMax) {
      return absl::InvalidArgumentError(absl::StrCat(
          sequences, " sequences of ", max_length, " tokens need more than 2^31 KV blocks"));
    }
    std::vector<int32_t>& free = pool.free_.emplace_back();
    free.reserve(static_cast<size_t>(blocks));
    for (int64_t b = blocks - 1; b >= 0; --b) free.push_back(static_cast<int32_t>(b));
    pool.refs_.emplace_back(static_cast<size_t>(blocks), 0);
  }
  return pool;
}

std::vector<int64_t> KvBlockPool::CacheCapacities() const {
  std::vector<int64_t> out;
  for (int group : group_of_) out.push_back(Capacity(group));
  return out;
}

absl::StatusOr<bool> KvBlockPool::NeedsReserve(int64_t max_length) const {
  SPARK_RETURN_IF_ERROR(CheckMaxLength(max_length));
  return !Reserved() || max_length > max_length_;
}

std::vector<int32_t> KvBlockPool::EveryBlockPosition() const {
  std::vector<int32_t> positions;
  for (int64_t p = 0; p < max_length_; p += abi::kKvBlockRows) {
    positions.push_back(static_cast<int32_t>(p));
  }
  return positions;
}

absl::Status KvBlockPool::CheckNoLiveSequences() const {
  if (live_ == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the KV cache pool cannot be reserved again while ", live_, " sequence(s) of it are alive"));
}

SequenceBlocks KvBlockPool::NewSequence() {
  ++live_;
  SequenceBlocks blocks;
  for (int g = 0; g < num_groups(); ++g) blocks.tables.emplace_back(Columns(g), -1);
  return blocks;
}

int32_t KvBlockPool::Take(int group) {
  std::vector<int32_t>& free = free_[static_cast<size_t>(group)];
  const int32_t block = free.back();
  free.pop_back();
  refs_[static_cast<size_t>(group)][static_cast<size_t>(block)] = 1;
  return block;
}

bool KvBlockPool::Unref(int group, int32_t block) {
  int32_t& refs = refs_[static_cast<size_t>(group)][static_cast<size_t>(block)];
  if (--refs > 0) return false;
  free_[static_cast<size_t>(group)].push_back(block);
  return true;
}

void KvBlockPool::Own(int group, std::vector<int32_t>& table, int64_t column,
                      std::vector<BlockCopy>* copies) {
  int32_t& entry = table[static_cast<size_t>(column)];
  if (entry < 0) {
    entry = Take(group);
  } else if (References(group, entry) > 1) {
    const int32_t shared = entry;
    entry = Take(group);
    Unref(group, shared);
    copies->push_back({group, shared, entry});
  }
}

absl::Status KvBlockPool::Grow(SequenceBlocks& blocks, absl::Span<const int32_t> positions,
                               std::vector<BlockCopy>* copies) {
  // The table entries the positions write that are not the sequence's own yet (none, or shared),
  // per group, each once.
  std::vector<std::vector<int64_t>> missing(static_cast<size_t>(num_groups()));
  for (int g = 0; g < num_groups(); ++g) {
    const std::vector<int32_t>& table = blocks.tables[static_cast<size_t>(g)];
    std::vector<int64_t>& need = missing[static_cast<size_t>(g)];
    for (int32_t p : positions) {
      if (p < 0) continue;
      const int64_t column = (p / abi::kKvBlockRows) % Columns(g);
      if (NeedsOwn(g, table[static_cast<size_t>(column)], /*write=*/true) &&
          std::find(need.begin(), need.end(), column) == need.end()) {
        need.push_back(column);
      }
    }
    if (static_cast<int64_t>(need.size()) > FreeBlocks(g)) {
      return KvPoolExhausted(absl::StrCat(
          "the KV cache pool has ", FreeBlocks(g), " free blocks of ", abi::kKvBlockRows,
          " tokens for caches of ", Capacity(g), " slots; the step needs ", need.size()));
    }
  }
  for (int g = 0; g < num_groups(); ++g) {
    for (int64_t column : missing[static_cast<size_t>(g)]) {
      Own(g, blocks.tables[static_cast<size_t>(g)], column, copies);
    }
  }
  return absl::OkStatus();
}

void KvBlockPool::Release(SequenceBlocks& blocks) {
  if (live_ > 0) --live_;
  Drop(blocks);
}

int64_t KvBlockPool::Drop(SequenceBlocks& blocks, std::vector<FreedBlock>* freed) {
  int64_t count = 0;
  for (size_t g = 0; g < blocks.tables.size() && g < free_.size(); ++g) {
    for (int32_t& block : blocks.tables[g]) {
      if (block >= 0 && Unref(static_cast<int>(g), block)) {
        ++count;
        if (freed != nullptr) freed->push_back({static_cast<int>(g), block});
      }
      block = -1;
    }
  }
  return count;
}

absl::Status KvBlockPool::Share(const SequenceBlocks& from, SequenceBlocks& to, int64_t tokens,
                               std::vector<FreedBlock>* freed) {
  if (&from == &to) return absl::InvalidArgumentError("a sequence cannot share its own KV blocks");
  if (tokens < 0 || tokens > max_length_) {
    return absl::InvalidArgumentError(absl::StrCat("cannot share ", tokens,
                                                   " positions of sequences of ", max_length_));
  }
  // The columns of every group that positions max(0, tokens - capacity) .. tokens - 1 live in.
  std::vector<std::vector<int64_t>> columns(static_cast<size_t>(num_groups()));
  for (int g = 0; g < num_groups() && tokens > 0; ++g) {
    const int64_t first = std::max<int64_t>(0, tokens - Capacity(g)) / abi::kKvBlockRows;
    const int64_t last = (tokens - 1) / abi::kKvBlockRows;
    for (int64_t b = first; b <= last; ++b) {
      const int64_t column = b % Columns(g);
      if (from.tables[static_cast<size_t>(g)][static_cast<size_t>(column)] < 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the sequence to share from holds no KV block for positions ", b * abi::kKvBlockRows,
            "..", (b + 1) * abi::kKvBlockRows - 1));
      }
      columns[static_cast<size_t>(g)].push_back(column);
    }
  }
  // (A block `to` already shares with `from` keeps `from`'s reference: it is not freed.)
  Drop(to, freed);
  for (int g = 0; g < num_groups(); ++g) {
    for (int64_t column : columns[static_cast<size_t>(g)]) {
      const int32_t block = from.tables[static_cast<size_t>(g)][static_cast<size_t>(column)];
      int32_t& entry = to.tables[static_cast<size_t>(g)][static_cast<size_t>(column)];
      if (entry >= 0) continue;  // a ring's column met twice
      entry = block;
      ++refs_[static_cast<size_t>(g)][static_cast<size_t>(block)];
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PoolPiece>> KvBlockPool::MapRange(SequenceBlocks& blocks, int group,
                                                             uint64_t slot_bytes, uint64_t offset,
                                                             uint64_t size,
                                                             std::vector<BlockCopy>* copies) {
  std::vector<PoolPiece> pieces;
  if (size == 0 || slot_bytes == 0) return pieces;
  const uint64_t block_bytes = slot_bytes * abi::kKvBlockRows;
  // Allocate the blocks the range touches (in this group only), and for a write unshare them.
  std::vector<int32_t>& table = blocks.tables[static_cast<size_t>(group)];
  for (uint64_t column = offset / block_bytes; column * block_bytes < offset + size; ++column) {
    if (!NeedsOwn(group, table[column], /*write=*/copies != nullptr)) continue;
    if (FreeBlocks(group) == 0) {
      return KvPoolExhausted(absl::StrCat("the KV cache pool has no free block for caches of ",
                                          Capacity(group), " slots"));
    }
    Own(group, table, static_cast<int64_t>(column), copies);
  }
  for (uint64_t at = offset; at < offset + size;) {
    const uint64_t column = at / block_bytes, within = at % block_bytes;
    const uint64_t bytes = std::min(block_bytes - within, offset + size - at);
    pieces.push_back({static_cast<uint64_t>(table[column]) * block_bytes + within, at - offset,
                      bytes});
    at += bytes;
  }
  return pieces;
}

}  // namespace rt
}  // namespace spark
