#include "server/engine/pipeline/input_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace gpupipe::engine {
namespace {

// A ring over its own memory, with chunks of `ranges`.
struct TestRing {
  TestRing(std::vector<ByteRange> chunk_ranges, int64_t buffers, int64_t buffer_bytes,
           std::chrono::milliseconds idle_timeout = std::chrono::milliseconds(0))
      : ranges(std::move(chunk_ranges)),
        memory(static_cast<size_t>(buffers * buffer_bytes)),
        ring(std::make_shared<InputRing>(
            ranges.empty() ? 0 : ranges.back().end, static_cast<int64_t>(ranges.size()),
            [r = ranges](int64_t k) { return r[static_cast<size_t>(k)]; }, memory.data(),
            buffers, buffer_bytes, /*pinned=*/false, [this] { released = true; },
            idle_timeout)) {}

  std::string Chunk(int64_t k) {
    absl::StatusOr<InputChunk> c = ring->Acquire(k, ranges[static_cast<size_t>(k)]);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::string(c->data, static_cast<size_t>(c->range.size())) : "";
  }

  std::vector<ByteRange> ranges;
  std::vector<char> memory;
  bool released = false;
  std::shared_ptr<InputRing> ring;
};

std::vector<ByteRange> Consecutive(int64_t chunks, int64_t bytes) {
  std::vector<ByteRange> out;
  for (int64_t k = 0; k < chunks; ++k) out.push_back({k * bytes, (k + 1) * bytes});
  return out;
}

TEST(InputRing, ChunksArriveWholeAndInOrder) {
  TestRing t(Consecutive(3, 4), /*buffers=*/3, /*buffer_bytes=*/4);
  EXPECT_FALSE(t.ring->Ready(0, t.ranges[0]));
  ASSERT_EQ(*t.ring->Write("abcdef", 6, [] {}), 6);
  EXPECT_TRUE(t.ring->Ready(0, t.ranges[0]));
  EXPECT_FALSE(t.ring->Ready(1, t.ranges[1]));  // two of its four bytes
  ASSERT_EQ(*t.ring->Write("ghijkl", 6, [] {}), 6);
  EXPECT_TRUE(t.ring->complete());
  EXPECT_EQ(t.Chunk(0), "abcd");
  EXPECT_EQ(t.Chunk(1), "efgh");
  EXPECT_EQ(t.Chunk(2), "ijkl");
}

TEST(InputRing, AFullRingTakesWhatFitsAndCallsBackOnceABufferIsReleased) {
  TestRing t(Consecutive(4, 4), /*buffers=*/2, /*buffer_bytes=*/4);
  int called = 0;
  absl::StatusOr<int64_t> taken = t.ring->Write("abcdefghijkl", 12, [&] { ++called; });
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(*taken, 8);  // two buffers' worth
  EXPECT_EQ(called, 0);
  EXPECT_EQ(t.Chunk(0), "abcd");
  t.ring->Release(0);
  EXPECT_EQ(called, 1);
  ASSERT_EQ(*t.ring->Write("ijkl", 4, [] {}), 4);
  EXPECT_EQ(t.Chunk(1), "efgh");
  EXPECT_EQ(t.Chunk(2), "ijkl");
  t.ring->Release(1);
  t.ring->Release(1);  // releasing again is harmless
  EXPECT_EQ(called, 1);
}

TEST(InputRing, OverlappingChunksEachHoldTheirWholeRange) {
  // A split convolve: pieces share a halo of two bytes with the piece before them.
  TestRing t({{0, 4}, {2, 7}, {5, 9}}, /*buffers=*/2, /*buffer_bytes=*/5);
  int64_t taken = *t.ring->Write("0123456789", 9, [] {});
  EXPECT_EQ(taken, 7);  // piece 2 would need piece 0's buffer
  EXPECT_EQ(t.Chunk(0), "0123");
  EXPECT_EQ(t.Chunk(1), "23456");
  t.ring->Release(0);  // the halo of piece 2 moves into piece 0's buffer
  ASSERT_EQ(*t.ring->Write("78", 2, [] {}), 2);
  EXPECT_EQ(t.Chunk(2), "5678");
}

TEST(InputRing, BytesBeyondTheSizeAreRejectedAndNothingIsTaken) {
  TestRing t(Consecutive(1, 4), 1, 4);
  absl::StatusOr<int64_t> taken = t.ring->Write("abcde", 5, [] {});
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.ring->received(), 0);
}

TEST(InputRing, FailureWakesTheConsumerTheProducerAndSticks) {
  TestRing t(Consecutive(2, 4), 1, 4);
  std::atomic<bool> woke{false};
  ASSERT_EQ(*t.ring->Write("abcdefg", 7, [&] { woke = true; }), 4);
  std::thread consumer([&] {
    absl::StatusOr<InputChunk> c = t.ring->Acquire(0, t.ranges[0]);
    ASSERT_TRUE(c.ok());
    t.ring->Release(0);
    EXPECT_EQ(t.ring->Acquire(1, t.ranges[1]).status().code(), absl::StatusCode::kCancelled);
  });
  // The release above calls the producer back; the consumer then waits for chunk 1.
  while (!woke) std::this_thread::yield();
  t.ring->Fail(absl::CancelledError("gone"));
  consumer.join();
  EXPECT_EQ(t.ring->Write("h", 1, [] {}).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(t.ring->failure().code(), absl::StatusCode::kCancelled);
}

TEST(InputRing, AForgottenCallbackIsNeverCalled) {
  TestRing t(Consecutive(2, 4), 1, 4);
  bool called = false;
  ASSERT_EQ(*t.ring->Write("abcdefgh", 8, [&] { called = true; }), 4);
  t.ring->ForgetRoomCallback();
  t.ring->Release(0);
  EXPECT_FALSE(called);
}

TEST(InputRing, AWriteAfterTheProducerWentRegistersNoCallback) {
  // A room callback that was running when its producer went may write again; the ring must not
  // keep that write's callback, which would outlive the producer.
  TestRing t(Consecutive(2, 4), 1, 4);
  ASSERT_EQ(*t.ring->Write("abcd", 4, [] {}), 4);
  t.ring->ForgetRoomCallback();
  bool called = false;
  ASSERT_EQ(*t.ring->Write("efgh", 4, [&] { called = true; }), 0);  // full: would wait for room
  t.ring->Release(0);
  EXPECT_FALSE(called);
}

TEST(InputRing, ItsMemoryIsReturnedWhenTheRingGoes) {
  auto t = std::make_unique<TestRing>(Consecutive(1, 4), 1, 4);
  EXPECT_FALSE(t->released);
  bool* released = &t->released;
  t->ring.reset();
  EXPECT_TRUE(*released);
}

TEST(InputRing, AnUploadThatSendsNothingForTheIdleTimeoutFailsTheWaitingJob) {
  TestRing t(Consecutive(2, 4), 2, 4, std::chrono::milliseconds(100));
  ASSERT_EQ(*t.ring->Write("abcd", 4, [] {}), 4);
  EXPECT_EQ(t.Chunk(0), "abcd");
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<InputChunk> stalled = t.ring->Acquire(1, t.ranges[1]);
  EXPECT_EQ(stalled.status().code(), absl::StatusCode::kDeadlineExceeded) << stalled.status();
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
  EXPECT_EQ(t.ring->Write("e", 1, [] {}).status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(InputRing, TimeAProducerSpendsOnAFullRingIsNotIdleTime) {
  TestRing t(Consecutive(3, 4), 1, 4, std::chrono::milliseconds(100));
  std::atomic<bool> room{false};
  ASSERT_EQ(*t.ring->Write("abcdefgh", 8, [&] { room = true; }), 4);
  // The consumer comes late: the producer waited on the full ring all this time.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(t.Chunk(0), "abcd");
  t.ring->Release(0);
  ASSERT_TRUE(room);
  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(*t.ring->Write("efgh", 4, [] {}), 4);
  });
  EXPECT_EQ(t.Chunk(1), "efgh");  // not DEADLINE_EXCEEDED
  producer.join();
}

TEST(InputRing, AnEmptyInputHasNoChunksAndIsComplete) {
  TestRing t({}, 1, 0);
  EXPECT_TRUE(t.ring->complete());
  EXPECT_EQ(*t.ring->Write("", 0, [] {}), 0);
}

}  // namespace
}  // namespace gpupipe::engine
