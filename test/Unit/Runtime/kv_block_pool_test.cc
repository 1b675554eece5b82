#include "kv_block_pool.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "loader_test_util.h"
#include "spark/runtime/executor.h"
#include "spark/runtime/kernel_abi.h"
#include "spark/runtime/plan.h"

namespace spark {
namespace rt {
namespace {

using test::StatusIs;
constexpr int kBlock = abi::kKvBlockRows;

// Grow for sequences that share no block: it must ask for no copy.
absl::Status Grow(KvBlockPool& pool, SequenceBlocks& blocks, absl::Span<const int32_t> positions) {
  std::vector<BlockCopy> copies;
  absl::Status status = pool.Grow(blocks, positions, &copies);
  EXPECT_TRUE(copies.empty());
  return status;
}

// Two full caches and one sliding cache of window 20, 8 tokens per step.
Plan PoolPlan() {
  Plan plan;
  plan.max_tokens = 8;
  plan.kv_caches.push_back({"full.0", KvKind::kFull, 0, 1, 4});
  plan.kv_caches.push_back({"sliding", KvKind::kSliding, 20, 1, 4});
  plan.kv_caches.push_back({"full.1", KvKind::kFull, 0, 2, 8});
  return plan;
}

TEST(KvBlockPoolTest, GroupsCachesByCapacityInWholeBlocks) {
  absl::StatusOr<KvBlockPool> pool = KvBlockPool::Make(PoolPlan(), 100, 3, 3);
  ASSERT_TRUE(pool.ok()) << pool.status();
  ASSERT_EQ(pool->num_groups(), 2);
  EXPECT_EQ(pool->GroupOf(0), pool->GroupOf(2));
  EXPECT_NE(pool->GroupOf(0), pool->GroupOf(1));
  // Full: 100 slots -> 112 (7 blocks); sliding: min(100, 19 + 8) = 27 -> 32 (2 blocks).
  EXPECT_EQ(pool->Capacity(pool->GroupOf(0)), 112);
  EXPECT_EQ(pool->Capacity(pool->GroupOf(1)), 32);
  EXPECT_EQ(pool->NumBlocks(pool->GroupOf(0)), 3 * 7);
  EXPECT_EQ(pool->NumBlocks(pool->GroupOf(1)), 3 * 2);
  EXPECT_EQ(pool->CacheCapacities(), (std::vector<int64_t>{112, 32, 112}));
  EXPECT_EQ(pool->FreeBlocks(0) + pool->FreeBlocks(1), 3 * 7 + 3 * 2);
}

TEST(KvBlockPoolTest, FullCachesGrowBlockByBlockAndSlidingOnesReuseTheirRing) {
  KvBlockPool pool = *KvBlockPool::Make(PoolPlan(), 100, 2, 2);
  const int full = pool.GroupOf(0), sliding = pool.GroupOf(1);
  SequenceBlocks a = pool.NewSequence();
  EXPECT_EQ(a.num_blocks(), 0);
  std::vector<int32_t> prompt(20);
  for (int i = 0; i < 20; ++i) prompt[i] = i;
  ASSERT_TRUE(Grow(pool, a, prompt).ok());
  // Positions 0..19: blocks 0 and 1 of each group. A fresh pool hands out blocks 0, 1, ...
  EXPECT_EQ(a.tables[full], (std::vector<int32_t>{0, 1, -1, -1, -1, -1, -1}));
  EXPECT_EQ(a.tables[sliding], (std::vector<int32_t>{0, 1}));
  // Position 40 (block 2): a new block of the full group; the sliding ring (2 blocks) wraps to
  // its column 0, which it holds already.
  ASSERT_TRUE(Grow(pool, a, std::vector<int32_t>{40}).ok());
  EXPECT_EQ(a.tables[full][2], 2);
  EXPECT_EQ(a.num_blocks(), 3 + 2);
  EXPECT_EQ(pool.FreeBlocks(full), 2 * 7 - 3);
  EXPECT_EQ(pool.FreeBlocks(sliding), 2 * 2 - 2);
  // The slot of a position follows the table (kernel_abi.h KvSlot).
  EXPECT_EQ(abi::KvSlot(a.tables[full].data(), 112, 40), 2 * kBlock + 8);
  EXPECT_EQ(abi::KvSlot(a.tables[sliding].data(), 32, 40), 0 * kBlock + 8);
  EXPECT_EQ(abi::KvSlot(a.tables[full].data(), 112, 60), -1);  // block 3: not allocated
  pool.Release(a);
  EXPECT_EQ(a.num_blocks(), 0);
  EXPECT_EQ(pool.FreeBlocks(full), 2 * 7);
  EXPECT_EQ(pool.FreeBlocks(sliding), 2 * 2);
}

TEST(KvBlockPoolTest, AnExhaustedPoolRefusesAndAllocatesNothing) {
  KvBlockPool pool = *KvBlockPool::Make(PoolPlan(), 100, 1, 1);
  const int full = pool.GroupOf(0);
  SequenceBlocks a = pool.NewSequence(), b = pool.NewSequence();
  ASSERT_TRUE(Grow(pool, a, std::vector<int32_t>{0, 16, 32, 48, 64, 80}).ok());  // 6 of 7
  const absl::Status status = Grow(pool, b, std::vector<int32_t>{0, 16});
  EXPECT_TRUE(StatusIs(status, absl::StatusCode::kResourceExhausted,
                       "the KV cache pool has 1 free blocks of 16 tokens for caches of 112 "
                       "slots; the step needs 2"));
  EXPECT_TRUE(IsKvPoolExhausted(status));
  EXPECT_FALSE(IsKvPoolExhausted(absl::ResourceExhaustedError("out of memory")));
  EXPECT_EQ(b.num_blocks(), 0);  // not even the sliding group's blocks
  EXPECT_EQ(pool.FreeBlocks(full), 1);
  pool.Release(a);
  EXPECT_TRUE(Grow(pool, b, std::vector<int32_t>{0, 16}).ok());
}

TEST(KvBlockPoolTest, AnOvercommittedPoolHoldsFewerFullCachesThanSequences) {
  // 3 live sequences, the full caches' blocks for 1 of them; every sliding ring is there.
  KvBlockPool pool = *KvBlockPool::Make(PoolPlan(), 100, 3, 1);
  const int full = pool.GroupOf(0), sliding = pool.GroupOf(1);
  EXPECT_TRUE(pool.Overcommitted());
  EXPECT_EQ(pool.NumBlocks(full), 7);
  EXPECT_EQ(pool.NumBlocks(sliding), 3 * 2);
  SequenceBlocks a = pool.NewSequence(), b = pool.NewSequence(), c = pool.NewSequence();
  ASSERT_TRUE(Grow(pool, a, std::vector<int32_t>{0, 16, 32}).ok());
  ASSERT_TRUE(Grow(pool, b, std::vector<int32_t>{0, 16, 32, 48}).ok());
  const absl::Status status = Grow(pool, c, std::vector<int32_t>{0});
  EXPECT_TRUE(IsKvPoolExhausted(status)) << status;
  // Dropping b's blocks lets c grow; b stays live, holding nothing.
  EXPECT_EQ(pool.Drop(b), 4 + 2);
  EXPECT_EQ(b.num_blocks(), 0);
  EXPECT_EQ(pool.Drop(b), 0);
  EXPECT_EQ(pool.FreeBlocks(full), 4);
  EXPECT_EQ(pool.FreeBlocks(sliding), 3 * 2 - 2);
  EXPECT_TRUE(Grow(pool, c, std::vector<int32_t>{0, 16}).ok());
  EXPECT_FALSE(pool.CheckNoLiveSequences().ok());
  pool.Release(a);
  pool.Release(b);
  pool.Release(c);
  EXPECT_TRUE(pool.CheckNoLiveSequences().ok());
  EXPECT_EQ(pool.FreeBlocks(full), 7);
  EXPECT_FALSE(KvBlockPool::Make(PoolPlan(), 100, 3, 3)->Overcommitted());
  EXPECT_TRUE(StatusIs(KvBlockPool::Make(PoolPlan(), 100, 3, 0).status(),
                       absl::StatusCode::kInvalidArgument,
                       "the KV cache pool must hold from 1 to 3 full-length sequences, got 0"));
  EXPECT_TRUE(StatusIs(KvBlockPool::Make(PoolPlan(), 100, 3, 4).status(),
                       absl::StatusCode::kInvalidArgument, "got 4"));
}

TEST(KvBlockPoolTest, TheLargestCachesHoldTheFullLengthSequencesAndTheOthersEveryOne) {
  // The rule the pool and the memory estimator share: full caches (112 slots) for 1 sequence,
  // the sliding ring (32) for all 3; the pool is sized by it.
  EXPECT_EQ(KvSequencesHeld(PoolPlan().kv_caches, 100, 8, 3, 1),
            (std::vector<int64_t>{1, 3, 1}));
  // A run so short that the ring is as large as the full caches: every cache is largest.
  EXPECT_EQ(KvSequencesHeld(PoolPlan().kv_caches, 20, 8, 3, 1),
            (std::vector<int64_t>{1, 1, 1}));
  EXPECT_TRUE(KvSequencesHeld({}, 100, 8, 3, 1).empty());
  KvBlockPool pool = *KvBlockPool::Make(PoolPlan(), 20, 3, 1);
  EXPECT_EQ(pool.num_groups(), 1);
  EXPECT_EQ(pool.NumBlocks(0), 2);
}

TEST(KvBlockPoolTest, MapsASequencesByteRangeOntoItsBlocks) {
  KvBlockPool pool = *KvBlockPool::Make(PoolPlan(), 100, 2, 2);
  const int full = pool.GroupOf(0);
  SequenceBlocks a = pool.NewSequence(), b = pool.NewSequence();
  ASSERT_TRUE(Grow(pool, a, std::vector<int32_t>{0}).ok());  // a: block 0 of each group
  ASSERT_TRUE(Grow(pool, b, std::vector<int32_t>{0}).ok());  // b: block 1
  // 4-byte slots: b's bytes 60..71 are its slots 15 (block 1) and 16, 17 (its second block,
  // allocated now: block 2).
  absl::StatusOr<std::vector<PoolPiece>> pieces = pool.MapRange(b, full, 4, 60, 12, nullptr);
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  ASSERT_EQ(pieces->size(), 2u);
  EXPECT_EQ((*pieces)[0].pool_offset, 1u * kBlock * 4 + 60);
  EXPECT_EQ((*pieces)[0].offset, 0u);
  EXPECT_EQ((*pieces)[0].bytes, 4u);
  EXPECT_EQ((*pieces)[1].pool_offset, 2u * kBlock * 4);
  EXPECT_EQ((*pieces)[1].offset, 4u);
  EXPECT_EQ((*pieces)[1].bytes, 8u);
  EXPECT_EQ(b.tables[full][1], 2);
}

TEST(KvBlockPoolTest, SharedBlocksAreCountedOnceAndCopiedByTheirFirstWriter) {
  KvBlockPool pool = *KvBlockPool::Make(PoolPlan(), 100, 2, 2);
  const int full = pool.GroupOf(0), sliding = pool.GroupOf(1);
  SequenceBlocks a = pool.NewSequence(), b = pool.NewSequence();
  std::vector<int32_t> prompt(40);
  for (int i = 0; i < 40; ++i) prompt[i] = i;
  ASSERT_TRUE(Grow(pool, a, prompt).ok());
  const std::vector<int32_t> a_full = a.tables[full], a_ring = a.tables[sliding];
  EXPECT_EQ(a_full, (std::vector<int32_t>{0, 1, 2, -1, -1, -1, -1}));
  const int64_t free_full = pool.FreeBlocks(full), free_ring = pool.FreeBlocks(sliding);
  // b takes a's 40 positions: the full caches' blocks 0..2, and the ring's two (positions 8..39
  // of its 32 slots); no block is taken from the free lists.
  ASSERT_TRUE(pool.Share(a, b, 40).ok());
  EXPECT_EQ(b.tables[full], a_full);
  EXPECT_EQ(b.tables[sliding], a_ring);
  EXPECT_EQ(pool.References(full, 2), 2);
  EXPECT_EQ(pool.References(sliding, a_ring[1]), 2);
  EXPECT_EQ(pool.FreeBlocks(full), free_full);
  EXPECT_EQ(pool.FreeBlocks(sliding), free_ring);
  // b writes position 40: the full caches' block 2 and the ring's column 0 are shared, so b gets
  // copies of them; a keeps its blocks.
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(pool.Grow(b, std::vector<int32_t>{40}, &copies).ok());
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0], (BlockCopy{full, 2, b.tables[full][2]}));
  EXPECT_EQ(copies[1], (BlockCopy{sliding, a_ring[0], b.tables[sliding][0]}));
  EXPECT_NE(b.tables[full][2], 2);
  EXPECT_EQ(a.tables[full], a_full);
  EXPECT_EQ(a.tables[sliding], a_ring);
  EXPECT_EQ(pool.References(full, 2), 1);
  EXPECT_EQ(pool.FreeBlocks(full), free_full - 1);
  // a writes position 40 too: what it holds is its own again, no copy.
  copies.clear();
  ASSERT_TRUE(pool.Grow(a, std::vector<int32_t>{40}, &copies).ok());
  EXPECT_TRUE(copies.empty());
  // Dropping a frees only what b does not share: full block 2 and a's ring column 0.
  std::vector<FreedBlock> freed;
  EXPECT_EQ(pool.Drop(a, &freed), 2);
  ASSERT_EQ(freed.size(), 2u);
  EXPECT_EQ(freed[0].group, full);
  EXPECT_EQ(freed[0].block, 2);
  EXPECT_EQ(freed[1].group, sliding);
  EXPECT_EQ(freed[1].block, a_ring[0]);
  EXPECT_EQ(pool.References(full, 0), 1);  // b's now
  pool.Release(b);
  pool.Release(a);
  EXPECT_EQ(pool.FreeBlocks(full), pool.NumBlocks(full));
  EXPECT_EQ(pool.FreeBlocks(sliding), pool.NumBlocks(sliding));
  EXPECT_TRUE(pool.CheckNoLiveSequences().ok());
}

TEST(KvBlockPoolTest, SharingRefusesWhatItCannotDoAndChangesNothing) {
  KvBlockPool pool = *KvBlockPool::Make(PoolPlan(), 100, 2, 2);
  const int full = pool.GroupOf(0);
  SequenceBlocks a = pool.NewSequence(), b = pool.NewSequence();
  ASSERT_TRUE(Grow(pool, a, std::vector<int32_t>{0, 16}).ok());
  // a holds positions 0..31 only.
  EXPECT_TRUE(StatusIs(pool.Share(a, b, 40), absl::StatusCode::kFailedPrecondition,
                       "holds no KV block for positions 32..47"));
  EXPECT_EQ(b.num_blocks(), 0);
  EXPECT_EQ(pool.References(full, 0), 1);
  EXPECT_TRUE(StatusIs(pool.Share(a, b, 101), absl::StatusCode::kInvalidArgument,
                       "cannot share 101 positions of sequences of 100"));
  EXPECT_TRUE(StatusIs(pool.Share(a, a, 16), absl::StatusCode::kInvalidArgument,
                       "cannot share its own"));
  // A sequence that holds blocks keeps them when the share is refused, and gives them up for
  // the shared ones when it is not.
  ASSERT_TRUE(Grow(pool, b, std::vector<int32_t>{0, 16, 32}).ok());
  const int32_t own = b.tables[full][2];
  EXPECT_FALSE(pool.Share(a, b, 40).ok());
  EXPECT_EQ(b.tables[full][2], own);
  std::vector<FreedBlock> freed;
  ASSERT_TRUE(pool.Share(a, b, 32, &freed).ok());
  EXPECT_EQ(b.tables[full], a.tables[full]);
  EXPECT_EQ(freed.size(), 3u + 2u);  // its 3 full blocks and its 2 ring blocks
  EXPECT_EQ(pool.References(full, own), 0);
  ASSERT_TRUE(pool.Share(a, b, 0).ok());
  EXPECT_EQ(b.num_blocks(), 0);
}

TEST(KvBlockPoolTest, ACopyOnWriteNeedsAFreeBlockAndAnExhaustedPoolChangesNothing) {
  // One full-length sequence: 7 full blocks for two sequences.
  KvBlockPool pool = *KvBlockPool::Make(PoolPlan(), 100, 2, 1);
  const int full = pool.GroupOf(0);
  SequenceBlocks a = pool.NewSequence(), b = pool.NewSequence();
  ASSERT_TRUE(Grow(pool, a, std::vector<int32_t>{0, 16, 32, 48, 64, 80, 96}).ok());
  ASSERT_TRUE(pool.Share(a, b, 100).ok());
  EXPECT_EQ(pool.FreeBlocks(full), 0);
  std::vector<BlockCopy> copies;
  const absl::Status status = pool.Grow(b, std::vector<int32_t>{99}, &copies);
  EXPECT_TRUE(IsKvPoolExhausted(status)) << status;
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(b.tables[full], a.tables[full]);
  // a gives its blocks up: b holds them alone and writes them without a copy.
  EXPECT_EQ(pool.Drop(a), 0);
  ASSERT_TRUE(pool.Grow(b, std::vector<int32_t>{99}, &copies).ok());
  EXPECT_TRUE(copies.empty());
}

TEST(KvBlockPoolTest, AWriteThroughMapRangeCopiesASharedBlockAndAReadDoesNot) {
  KvBlockPool pool = *KvBlockPool::Make(PoolPlan(), 100, 2, 2);
  const int full = pool.GroupOf(0);
  SequenceBlocks a = pool.NewSequence(), b = pool.NewSequence();
  ASSERT_TRUE(Grow(pool, a, std::vector<int32_t>{0}).ok());
  ASSERT_TRUE(pool.Share(a, b, 16).ok());
  std::vector<BlockCopy> copies;
  absl::StatusOr<std::vector<PoolPiece>> read = pool.MapRange(b, full, 4, 0, 8, nullptr);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ((*read)[0].pool_offset, 0u);  // a's block 0, where it is
  absl::StatusOr<std::vector<PoolPiece>> write = pool.MapRange(b, full, 4, 0, 8, &copies);
  ASSERT_TRUE(write.ok()) << write.status();
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0], (BlockCopy{full, 0, b.tables[full][0]}));
  EXPECT_EQ((*write)[0].pool_offset, static_cast<uint64_t>(b.tables[full][0]) * kBlock * 4);
  EXPECT_EQ(a.tables[full][0], 0);
}

TEST(KvBlockPoolTest, SaysWhenASequenceNeedsThePoolReservedAgain) {
  KvBlockPool none;
  EXPECT_TRUE(*none.NeedsReserve(100));
  KvBlockPool pool = *KvBlockPool::Make(PoolPlan(), 100, 2, 2);
  EXPECT_FALSE(*pool.NeedsReserve(100));
  EXPECT_FALSE(*pool.NeedsReserve(1));
  EXPECT_TRUE(*pool.NeedsReserve(101));
  EXPECT_TRUE(StatusIs(pool.NeedsReserve(0).status(), absl::StatusCode::kInvalidArgument,
                       "max_length must be in [1, 2^31), got 0"));
  EXPECT_EQ(pool.EveryBlockPosition(), (std::vector<int32_t>{0, 16, 32, 48, 64, 80, 96}));
}

TEST(KvBlockPoolTest, APlanWithoutKvCachesHasNoGroups) {
  Plan plan;
  plan.max_tokens = 8;
  absl::StatusOr<KvBlockPool> pool = KvBlockPool::Make(plan, 100, 3, 1);
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ(pool->num_groups(), 0);
  SequenceBlocks a = pool->NewSequence();
  EXPECT_TRUE(Grow(*pool, a, std::vector<int32_t>{0, 50}).ok());
  EXPECT_EQ(pool->Drop(a), 0);
}

TEST(KvBlockPoolTest, RejectsSizesOutsideTheI32Range) {
  EXPECT_TRUE(StatusIs(KvBlockPool::Make(PoolPlan(), 0, 1, 1).status(),
                       absl::StatusCode::kInvalidArgument, "max_length must be in [1, 2^31)"));
  EXPECT_TRUE(StatusIs(KvBlockPool::Make(PoolPlan(), 100, 0, 1).status(),
                       absl::StatusCode::kInvalidArgument,
                       "the number of sequences must be in [1, 2^31)"));
  EXPECT_TRUE(StatusIs(KvBlockPool::Make(PoolPlan(), 1 << 30, 1 << 20, 1 << 20).status(),
                       absl::StatusCode::kInvalidArgument, "need more than 2^31 KV blocks"));
}

}  // namespace
}  // namespace rt
}  // namespace spark
