#include "server/engine/pipeline/striped_input.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/random_tensor.h"

namespace gpupipe::engine {
namespace {

// A ring of `chunks` chunks of `chunk_bytes` over its own memory, and a striped input over it.
struct TestUpload {
  TestUpload(int stripes, int64_t chunks, int64_t chunk_bytes, int64_t buffers)
      : memory(static_cast<size_t>(buffers * chunk_bytes)),
        ring(std::make_shared<InputRing>(
            chunks * chunk_bytes, chunks,
            [chunk_bytes](int64_t k) {
              return ByteRange{k * chunk_bytes, (k + 1) * chunk_bytes};
            },
            memory.data(), buffers, chunk_bytes, /*pinned=*/false, [] {})),
        input(StripedInput::Create(ring, stripes)),
        events(static_cast<size_t>(stripes)) {
    for (int p = 0; p < stripes; ++p) {
      StripedInput::Producer producer;
      Events& e = events[static_cast<size_t>(p)];
      producer.resume = [&e] { ++e.resumed; };
      producer.overrun = [&e](const absl::Status& s) {
        std::lock_guard<std::mutex> lock(e.mu);
        e.overrun = s;
      };
      producer.ended_early = [&e] { ++e.ended_early; };
      producer.complete = [&e] { ++e.completed; };
      input->Attach(p, std::move(producer));
    }
  }

  // Consumes chunk k (waits for it) and releases it.
  std::string Take(int64_t k, int64_t chunk_bytes) {
    absl::StatusOr<InputChunk> c = ring->Acquire(k, {k * chunk_bytes, (k + 1) * chunk_bytes});
    EXPECT_TRUE(c.ok()) << c.status();
    std::string bytes = c.ok() ? std::string(c->data, static_cast<size_t>(chunk_bytes)) : "";
    ring->Release(k);
    return bytes;
  }

  struct Events {
    std::atomic<int> resumed{0};
    std::atomic<int> ended_early{0};
    std::atomic<int> completed{0};
    std::mutex mu;
    absl::Status overrun;
  };

  std::vector<char> memory;
  std::shared_ptr<InputRing> ring;
  std::shared_ptr<StripedInput> input;
  std::vector<Events> events;
};

TEST(StripedInput, MessagesOfManyProducersLandInSequenceOrder) {
  const uint64_t seed = gpupipe::testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  constexpr int kStripes = 3;
  constexpr int64_t kChunk = 1000, kChunks = 40;
  // A ring much smaller than the input: producers wait on it and on each other.
  TestUpload t(kStripes, kChunks, kChunk, /*buffers=*/3);
  std::string input(static_cast<size_t>(kChunk * kChunks), '\0');
  for (char& c : input) c = static_cast<char>(rng());
  // Messages of random sizes, dealt round-robin.
  std::vector<std::vector<std::string>> dealt(kStripes);
  for (size_t at = 0, m = 0; at < input.size(); ++m) {
    const size_t n = std::min<size_t>(1 + rng() % 700, input.size() - at);
    dealt[m % kStripes].push_back(input.substr(at, n));
    at += n;
  }
  // Each producer offers its messages from a thread of its own, reading on only when the last
  // one was taken (Offer's answer or its resume), as a Run call does.
  std::vector<std::thread> producers;
  for (int p = 0; p < kStripes; ++p) {
    producers.emplace_back([&, p] {
      std::mt19937_64 pace(seed + static_cast<uint64_t>(p) + 1);
      auto& e = t.events[static_cast<size_t>(p)];
      for (const std::string& message : dealt[static_cast<size_t>(p)]) {
        const int resumed = e.resumed.load();
        if (!t.input->Offer(p, message)) {
          while (e.resumed.load() == resumed) std::this_thread::yield();
        }
        if (pace() % 4 == 0) std::this_thread::yield();
      }
      t.input->End(p);
    });
  }
  std::string got;
  for (int64_t k = 0; k < kChunks; ++k) got += t.Take(k, kChunk);
  for (std::thread& thread : producers) thread.join();
  EXPECT_EQ(got, input);
  for (const auto& e : t.events) {
    EXPECT_EQ(e.completed.load(), 1);
    EXPECT_EQ(e.ended_early.load(), 0);
    EXPECT_TRUE(e.overrun.ok());
  }
}

TEST(StripedInput, AMessageAheadOfItsTurnIsParkedAndResumedOnceTaken) {
  TestUpload t(2, /*chunks=*/1, /*chunk_bytes=*/8, /*buffers=*/1);
  EXPECT_FALSE(t.input->Offer(1, "efgh"));  // message 1 before message 0
  EXPECT_EQ(t.ring->received(), 0);
  EXPECT_EQ(t.events[1].resumed.load(), 0);
  EXPECT_TRUE(t.input->Offer(0, "abcd"));  // taken, and message 1 after it
  EXPECT_EQ(t.events[1].resumed.load(), 1);
  EXPECT_EQ(t.events[0].resumed.load(), 0);  // Offer's own answer said so
  EXPECT_TRUE(t.ring->complete());
  EXPECT_EQ(t.Take(0, 8), "abcdefgh");
}

TEST(StripedInput, AFullRingResumesTheProducerOnceABufferIsFree) {
  TestUpload t(1, /*chunks=*/2, /*chunk_bytes=*/4, /*buffers=*/1);
  EXPECT_FALSE(t.input->Offer(0, "abcdef"));  // the second chunk's buffer is busy
  EXPECT_EQ(t.ring->received(), 4);
  EXPECT_EQ(t.Take(0, 4), "abcd");  // releasing it writes the rest
  EXPECT_EQ(t.events[0].resumed.load(), 1);
  EXPECT_TRUE(t.input->Offer(0, "gh"));
  t.input->End(0);
  EXPECT_EQ(t.events[0].completed.load(), 1);
  EXPECT_EQ(t.Take(1, 4), "efgh");
}

TEST(StripedInput, BytesBeyondTheInputOverrunTheirProducer) {
  TestUpload t(2, /*chunks=*/1, /*chunk_bytes=*/4, /*buffers=*/1);
  EXPECT_FALSE(t.input->Offer(1, "cdXX"));  // parked, but two bytes too many
  EXPECT_TRUE(t.input->Offer(0, "ab"));
  EXPECT_EQ(t.events[1].resumed.load(), 0);
  std::lock_guard<std::mutex> lock(t.events[1].mu);
  EXPECT_EQ(t.events[1].overrun.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(t.events[0].overrun.ok());
}

TEST(StripedInput, AMessageAfterTheLastByteOverrunsItsProducer) {
  TestUpload t(2, /*chunks=*/1, /*chunk_bytes=*/4, /*buffers=*/1);
  EXPECT_TRUE(t.input->Offer(0, "ab"));
  EXPECT_TRUE(t.input->Offer(1, "cd"));  // its turn: taken, and the input is whole
  EXPECT_TRUE(t.ring->complete());
  EXPECT_FALSE(t.input->Offer(0, "e"));  // its turn, but nothing is left to fill
  std::lock_guard<std::mutex> lock(t.events[0].mu);
  EXPECT_EQ(t.events[0].overrun.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.events[0].overrun.message().find("5 bytes sent"), std::string::npos)
      << t.events[0].overrun;
}

TEST(StripedInput, AProducerThatEndsBeforeItsTurnEndedEarlyWhenTheTurnComes) {
  TestUpload t(3, /*chunks=*/1, /*chunk_bytes=*/6, /*buffers=*/1);
  t.input->End(2);  // message 2 will be due, but is not yet
  EXPECT_EQ(t.events[2].ended_early.load(), 0);
  EXPECT_TRUE(t.input->Offer(0, "ab"));
  EXPECT_EQ(t.events[2].ended_early.load(), 0);
  EXPECT_TRUE(t.input->Offer(1, "cd"));
  EXPECT_EQ(t.events[2].ended_early.load(), 1);
  EXPECT_EQ(t.input->EarlyEndError().message(), "input ended after 4 of 6 bytes");
  t.input->End(1);  // not its turn, and the input is not whole: nothing yet
  EXPECT_EQ(t.events[1].completed.load(), 0);
  EXPECT_EQ(t.events[1].ended_early.load(), 0);
}

TEST(StripedInput, ProducersCompleteOnceTheInputIsWholeAndAllHaveEnded) {
  TestUpload t(3, /*chunks=*/1, /*chunk_bytes=*/3, /*buffers=*/1);
  EXPECT_TRUE(t.input->Offer(0, "a"));
  t.input->End(0);  // its share is in; the input is not yet whole
  EXPECT_EQ(t.events[0].completed.load(), 0);
  EXPECT_EQ(t.events[0].ended_early.load(), 0);
  EXPECT_TRUE(t.input->Offer(1, "b"));
  EXPECT_TRUE(t.input->Offer(2, "c"));
  t.input->End(1);
  // Whole, but producer 2 may still send too much: nobody completes yet.
  for (const auto& e : t.events) EXPECT_EQ(e.completed.load(), 0);
  t.input->End(2);
  t.input->End(2);  // told once
  for (const auto& e : t.events) EXPECT_EQ(e.completed.load(), 1);
}

TEST(StripedInput, AFailingProducerFailsTheRingAndTellsTheOthersOnce) {
  TestUpload t(3, /*chunks=*/1, /*chunk_bytes=*/3, /*buffers=*/1);
  std::vector<std::string> told(3);
  for (int p = 0; p < 3; ++p) {
    StripedInput::Producer producer;
    producer.failed = [&told, p](const absl::Status& s) { told[p] += std::string(s.message()); };
    t.input->Attach(p, std::move(producer));
  }
  EXPECT_TRUE(t.input->Offer(0, "a"));
  t.input->Fail(1, absl::InvalidArgumentError("too much"));
  t.input->Fail(2, absl::CancelledError("gone"));  // the first failure is the run's
  EXPECT_EQ(t.ring->failure().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(told[0], "too much");
  EXPECT_EQ(told[1], "");  // it knows
  EXPECT_EQ(told[2], "too much");
}

TEST(StripedInput, AFailedRingTakesNothingAndResumesNoOne) {
  TestUpload t(2, /*chunks=*/1, /*chunk_bytes=*/4, /*buffers=*/1);
  EXPECT_FALSE(t.input->Offer(1, "cd"));
  t.ring->Fail(absl::CancelledError("the job ended"));
  EXPECT_FALSE(t.input->Offer(0, "ab"));
  t.input->End(0);
  t.input->End(1);
  for (const auto& e : t.events) {
    EXPECT_EQ(e.resumed.load(), 0);
    EXPECT_EQ(e.completed.load(), 0);
    EXPECT_EQ(e.ended_early.load(), 0);
  }
}

TEST(StripedInput, ADetachedProducerIsNotCalledBack) {
  TestUpload t(2, /*chunks=*/1, /*chunk_bytes=*/4, /*buffers=*/1);
  EXPECT_FALSE(t.input->Offer(1, "cd"));
  t.input->Detach(1);
  EXPECT_TRUE(t.input->Offer(0, "ab"));  // takes message 1 too, silently
  EXPECT_TRUE(t.ring->complete());
  EXPECT_EQ(t.events[1].resumed.load(), 0);
}

}  // namespace
}  // namespace gpupipe::engine
