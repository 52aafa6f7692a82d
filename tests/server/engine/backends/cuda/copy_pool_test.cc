#include "server/engine/backends/cuda/copy_pool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace gpupipe::engine {
namespace {

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// Every alignment of source and destination, sizes around the 16- and 64-byte steps.
TEST(StreamingCopy, CopiesEveryByteAtAnyAlignmentAndSize) {
  const std::string src = RandomBytes(4096 + 64, 1);
  for (size_t src_off : {0, 1, 7, 16, 33}) {
    for (size_t dst_off : {0, 1, 8, 15, 48}) {
      for (size_t n : {0, 1, 15, 16, 17, 63, 64, 65, 127, 1000, 4096}) {
        std::vector<char> dst(n + 128, 'x');
        StreamingCopy(dst.data() + dst_off, src.data() + src_off, n);
        ASSERT_EQ(std::memcmp(dst.data() + dst_off, src.data() + src_off, n), 0)
            << src_off << " " << dst_off << " " << n;
        for (size_t i = 0; i < dst_off; ++i) ASSERT_EQ(dst[i], 'x');
        for (size_t i = dst_off + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 'x');
      }
    }
  }
}

TEST(CopyPool, SplitCopiesMatchMemcpyWithAndWithoutStreamingStores) {
  const std::string src = RandomBytes((size_t{9} << 20) + 12345, 2);
  for (bool streaming : {true, false}) {
    CopyPool pool(3, streaming);
    std::vector<char> dst(src.size() + 3, 'x');
    pool.Copy(dst.data() + 3, src.data(), src.size());
    EXPECT_EQ(std::memcmp(dst.data() + 3, src.data(), src.size()), 0) << streaming;
    EXPECT_EQ(std::string(dst.data(), 3), "xxx");
  }
}

TEST(CopyPool, AsyncCopiesAreWholeOnceWaitedForAndOverlapEachOther) {
  const std::string a = RandomBytes((size_t{6} << 20) + 777, 3);
  const std::string b = RandomBytes((size_t{3} << 20) + 5, 4);
  for (int threads : {0, 1, 4}) {
    CopyPool pool(threads);
    std::vector<char> da(a.size()), db(b.size());
    CopyPool::Pending pa, pb;
    const auto start = std::chrono::steady_clock::now();
    pool.CopyAsync(da.data(), a.data(), a.size(), &pa);
    pool.CopyAsync(db.data(), b.data(), b.size(), &pb);  // two in flight at once
    pb.Wait();
    pa.Wait();
    EXPECT_EQ(std::memcmp(da.data(), a.data(), a.size()), 0) << threads;
    EXPECT_EQ(std::memcmp(db.data(), b.data(), b.size()), 0) << threads;
    EXPECT_GE(pa.finished(), start);
    EXPECT_LE(pa.finished(), std::chrono::steady_clock::now());
    // A Pending is reused for the next copy.
    std::vector<char> again(b.size());
    pool.CopyAsync(again.data(), b.data(), b.size(), &pb);
    pb.Wait();
    EXPECT_EQ(std::memcmp(again.data(), b.data(), b.size()), 0) << threads;
  }
}

TEST(CopyPool, WaitingForACopyNeverStartedReturnsAtOnce) {
  CopyPool::Pending never;
  never.Wait();
}

}  // namespace
}  // namespace gpupipe::engine
