// The shared-memory staging pool (issue 27): freed slots keep their pages for
// the next key, the warmer backs the reserve ahead of the slots and maps it
// into every process, and what the arena holds stays bounded by its peak of
// slots plus the reserve. Correctness only: no timing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "local/shared_memory.h"
#include "local/staging_warmer.h"

namespace bps {
namespace {

constexpr uint64_t kMiB = 1 << 20;

std::unique_ptr<LocalSharedMemory> MakeArena(const std::string& tag, int local_size, uint64_t arena_bytes,
                                             uint32_t key_table_size) {
  std::unique_ptr<LocalSharedMemory> shm;
  Status st = LocalSharedMemory::Create("pool" + tag + std::to_string(getpid()), 0, local_size, arena_bytes,
                                        key_table_size, &shm);
  EXPECT_TRUE(st.ok()) << st.message();
  return shm;
}

// Waits (up to a generous deadline, for a loaded machine) until `done`.
bool Eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

TEST(StagingPool, ReclaimedKeysGiveTheirWarmSlotsToNewKeysAndTheArenaStopsGrowing) {
  // 16 entries of 1 MiB slots, 200 keys: the table reclaims idle entries, and
  // every later key's slot is carved from ranges earlier keys freed.
  auto shm = MakeArena("a", 1, 256 * kMiB, 16);
  ASSERT_TRUE(shm);
  for (uint64_t key = 1; key <= 200; ++key) {
    ShmEntry* e = nullptr;
    ASSERT_TRUE(shm->Hold(key, 0, &e).ok());
    ASSERT_NE(e, nullptr) << "key " << key;
    ASSERT_TRUE(shm->EnsureSlot(e, 0, kMiB).ok());
    EXPECT_LT(e->slot_offset[0] + e->slot_bytes[0], 16 * kMiB + 1) << "key " << key << " did not reuse a freed slot";
    char* slot = shm->arena() + e->slot_offset[0];
    memset(slot, static_cast<int>(key & 0xff), kMiB);
    EXPECT_EQ(static_cast<unsigned char>(slot[kMiB - 1]), key & 0xff);
    shm->Release(e, 0);
  }
  EXPECT_GT(shm->control()->keys_reclaimed.load(), 0u);
  // Held: the peak of slots (16 entries x 1 MiB), nothing more (no reserve).
  EXPECT_EQ(shm->backed_bytes(), 16 * kMiB);
  EXPECT_LE(shm->control()->arena_in_use.load(), 16 * kMiB);
}

TEST(StagingPool, TheWarmerBacksTheReserveAheadOfTheSlotsAndMapsItInEveryProcess) {
  auto owner = MakeArena("b", 2, 256 * kMiB, 64);
  ASSERT_TRUE(owner);
  const uint64_t reserve = 24 * kMiB;
  owner->set_warm_reserve(reserve);
  std::unique_ptr<LocalSharedMemory> peer;  // local rank 1's own mapping
  ASSERT_TRUE(LocalSharedMemory::Open(owner->base_name(), 2, &peer).ok());
  StagingWarmer grower(owner.get(), /*grows=*/true);
  StagingWarmer mapper(peer.get(), /*grows=*/false);
  ASSERT_TRUE(Eventually([&] { return owner->backed_bytes() >= reserve; }));
  ASSERT_TRUE(Eventually([&] { return peer->mapped_end() >= reserve && owner->mapped_end() >= reserve; }));

  // Slots of two ranks inside the warm front: what one mapping writes the
  // other reads, exactly.
  ShmEntry* e = nullptr;
  ASSERT_TRUE(owner->Hold(7, 0, &e).ok());
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(owner->EnsureSlot(e, 0, 8 * kMiB).ok());
  ASSERT_TRUE(owner->EnsureSlot(e, 1, 8 * kMiB).ok());
  EXPECT_LE(e->slot_offset[1] + e->slot_bytes[1], reserve) << "slots came from the warm front";
  float* mine = reinterpret_cast<float*>(owner->arena() + e->slot_offset[0]);
  const float* seen = reinterpret_cast<const float*>(peer->arena() + e->slot_offset[0]);
  for (size_t i = 0; i < 8 * kMiB / sizeof(float); ++i) mine[i] = static_cast<float>(i % 1000) * 0.5f;
  for (size_t i = 0; i < 8 * kMiB / sizeof(float); i += 4099) ASSERT_EQ(seen[i], static_cast<float>(i % 1000) * 0.5f);

  // The warmer keeps the reserve ahead of the bump pointer, and no more than
  // a step past it: held = slots + reserve.
  const uint64_t used = owner->control()->arena_used.load();
  ASSERT_TRUE(Eventually([&] { return owner->backed_bytes() >= used + reserve; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let it (not) overshoot
  EXPECT_LE(owner->backed_bytes(), used + reserve + StagingWarmer::kStepBytes);
  ASSERT_TRUE(Eventually([&] { return peer->mapped_end() + 4096 > owner->backed_bytes(); }));
  owner->Release(e, 0);
}

TEST(StagingPool, TheReserveNeverExceedsTheArenaAndSlotsPastItAreStillBacked) {
  // A reserve larger than the arena (a small /dev/shm): backed up to the
  // arena's capacity, and a slot past the warm front is backed on the spot.
  auto shm = MakeArena("c", 1, 8 * kMiB, 16);
  ASSERT_TRUE(shm);
  shm->set_warm_reserve(1024 * kMiB);
  {
    StagingWarmer warmer(shm.get(), /*grows=*/true);
    ASSERT_TRUE(Eventually([&] { return shm->backed_bytes() == 8 * kMiB; }));
  }
  EXPECT_EQ(shm->backed_bytes(), 8 * kMiB);

  auto cold = MakeArena("d", 1, 64 * kMiB, 16);  // no reserve: every slot backed when made
  ShmEntry* grown = nullptr;
  ShmEntry* small = nullptr;
  ASSERT_TRUE(cold->Hold(3, 0, &grown).ok());
  ASSERT_TRUE(cold->Hold(4, 0, &small).ok());
  ASSERT_TRUE(cold->EnsureSlot(grown, 0, 3 * kMiB).ok());
  ASSERT_TRUE(cold->EnsureSlot(small, 0, kMiB).ok());
  EXPECT_EQ(cold->backed_bytes(), 4 * kMiB);
  // Grown in place of a smaller one: the old range goes to the pool, warm.
  ASSERT_TRUE(cold->EnsureSlot(grown, 0, 5 * kMiB).ok());
  EXPECT_EQ(grown->slot_offset[0], 4 * kMiB);
  EXPECT_EQ(cold->backed_bytes(), 9 * kMiB);
  memset(cold->arena() + grown->slot_offset[0], 1, 5 * kMiB);
  ShmEntry* next = nullptr;
  ASSERT_TRUE(cold->Hold(5, 0, &next).ok());
  ASSERT_TRUE(cold->EnsureSlot(next, 0, 2 * kMiB).ok());
  EXPECT_EQ(next->slot_offset[0], 0u) << "the freed 3 MiB range is reused first";
  EXPECT_EQ(cold->backed_bytes(), 9 * kMiB) << "a reused range needs no new pages";
  memset(cold->arena() + next->slot_offset[0], 2, 2 * kMiB);
  EXPECT_EQ(cold->arena()[grown->slot_offset[0]], 1);
  for (ShmEntry* e : {grown, small, next}) cold->Release(e, 0);
}

}  // namespace
}  // namespace bps
