// The profiler plugin's slot pools: what is in flight is never handed out again, and a long run
// of in-flight slots (one communicator's kernels lagging its launches) costs no collective.
#include "nccl/event_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

namespace commtap::nccl::profiler::event_pool {
namespace {

struct TestSlot {
  std::atomic<std::uint64_t> word{0};
  std::atomic<bool> finished{false};
};
constexpr std::uint32_t kSlots = 1024;
using TestPool = Pool<TestSlot, kSlots>;

bool finished(TestSlot& slot) {
  return slot.finished.load();
}

TEST(EventPool, ALongRunInFlightIsSkippedWithoutADrop) {
  auto pool = std::make_unique<TestPool>();
  // 200 taken in a row and left in flight: three times the old fixed search of 64 slots, under
  // a quarter of the pool.
  std::set<std::uint32_t> in_flight;
  for (int i = 0; i < 200; ++i) {
    std::uint32_t index = 0;
    std::uint64_t gen = 0;
    ASSERT_TRUE(pool->take(index, gen, finished));
    in_flight.insert(index);
  }
  ASSERT_EQ(in_flight.size(), 200u);
  // Then ten turns of the pool of work that finishes at once: every take succeeds and none
  // lands on a slot still in flight.
  for (std::uint32_t i = 0; i < 10 * kSlots; ++i) {
    std::uint32_t index = 0;
    std::uint64_t gen = 0;
    ASSERT_TRUE(pool->take(index, gen, finished)) << "take " << i;
    ASSERT_EQ(in_flight.count(index), 0u) << "slot " << index << " was still in flight";
    pool->slots[index].finished.store(true);
  }
  EXPECT_EQ(pool->dropped.load(), 0u);
}

TEST(EventPool, HandlesOfAReusedSlotNoLongerFindIt) {
  auto pool = std::make_unique<TestPool>();
  std::uint32_t index = 0;
  std::uint64_t gen = 0;
  ASSERT_TRUE(pool->take(index, gen, finished));
  void* old_handle = encode(Kind::coll, index, gen);
  ASSERT_EQ(pool->find(decode(old_handle)), &pool->slots[index]);
  pool->release(pool->slots[index]);
  EXPECT_EQ(pool->find(decode(old_handle)), nullptr) << "a released slot";
  // Take until the same slot comes round again: the old handle names an older generation.
  std::uint32_t again = kSlots;
  std::uint64_t new_gen = 0;
  for (std::uint32_t i = 0; i < kSlots && again != index; ++i) {
    ASSERT_TRUE(pool->take(again, new_gen, [](TestSlot&) { return true; }));
  }
  ASSERT_EQ(again, index);
  EXPECT_NE(new_gen, gen);
  EXPECT_EQ(pool->find(decode(old_handle)), nullptr) << "a reused slot";
  EXPECT_EQ(pool->find(decode(encode(Kind::coll, index, new_gen))), &pool->slots[index]);
}

TEST(EventPool, OnlyAPoolInFlightForAQuarterOfItsSlotsInARowDrops) {
  auto pool = std::make_unique<TestPool>();
  for (std::uint32_t i = 0; i < kSlots; ++i) {
    std::uint32_t index = 0;
    std::uint64_t gen = 0;
    ASSERT_TRUE(pool->take(index, gen, finished));
  }
  std::uint32_t index = 0;
  std::uint64_t gen = 0;
  EXPECT_FALSE(pool->take(index, gen, finished));
  EXPECT_EQ(pool->dropped.load(), 1u);
  // One finished slot anywhere within the search is found.
  pool->slots[(pool->cursor.load() + kSlots / 8) % kSlots].finished.store(true);
  EXPECT_TRUE(pool->take(index, gen, finished));
  EXPECT_EQ(pool->dropped.load(), 1u);
}

}  // namespace
}  // namespace commtap::nccl::profiler::event_pool
