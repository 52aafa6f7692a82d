// HostBlockPool: first-fit ranges of one block, fallback when full, and sources that return
// their range when destroyed (also after the pool's owner let go of it).
#include "server/engine/pipeline/host_block_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace gpupipe::engine {
namespace {

constexpr int64_t kPage = HostBlockPool::kAlignment;

TEST(HostBlockPool, AllocatesAlignedRangesFirstFitAndReusesFreedOnes) {
  std::vector<char> block(8 * kPage);
  HostBlockPool pool(block.data(), 8 * kPage, /*pinned=*/false, nullptr);
  char* a = pool.Allocate(1);
  char* b = pool.Allocate(2 * kPage);
  char* c = pool.Allocate(kPage + 1);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(a, block.data());
  EXPECT_EQ(b, block.data() + kPage);
  EXPECT_EQ(c, block.data() + 3 * kPage);
  EXPECT_EQ(pool.used(), 5 * kPage);
  EXPECT_EQ(pool.Allocate(4 * kPage), nullptr);  // 3 pages left
  pool.Free(b);
  EXPECT_EQ(pool.Allocate(2 * kPage), block.data() + kPage);  // the gap b left
  EXPECT_EQ(pool.Allocate(3 * kPage), block.data() + 5 * kPage);
  EXPECT_EQ(pool.Allocate(1), nullptr);
  EXPECT_EQ(pool.Allocate(0), nullptr);
  EXPECT_EQ(pool.used(), 8 * kPage);
}

TEST(HostBlockPool, FreesItsBlockWhenDestroyedAndSaysWhetherItIsPinned) {
  auto* block = new char[4 * kPage];
  bool freed = false;
  {
    HostBlockPool pool(block, 4 * kPage, /*pinned=*/true, [&freed](char* p) {
      delete[] p;
      freed = true;
    });
    EXPECT_TRUE(pool.pinned());
    EXPECT_EQ(pool.Allocate(3 * kPage), block);
    EXPECT_EQ(pool.Allocate(2 * kPage), nullptr);  // no room: the caller says so
    EXPECT_EQ(pool.used(), 3 * kPage);
  }
  EXPECT_TRUE(freed);
}

}  // namespace
}  // namespace gpupipe::engine
