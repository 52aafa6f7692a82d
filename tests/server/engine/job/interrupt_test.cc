// Which reason stops a job first.
#include "server/engine/job/interrupt.h"

#include <gtest/gtest.h>

#include "tests/testing/recording_sink.h"

namespace gpupipe::engine {
namespace {

using Clock = std::chrono::steady_clock;
using gpupipe::testing::RecordingSink;

TEST(JobInterrupt, GoesOnWhileNothingHappened) {
  RecordingSink sink;
  std::atomic<bool> stopping{false};
  EXPECT_TRUE(JobInterrupt(sink, Clock::time_point::max(), &stopping).Check().ok());
  EXPECT_TRUE(JobInterrupt(sink, Clock::now() + std::chrono::hours(1)).Check().ok());
}

TEST(JobInterrupt, TheServerStoppingComesFirstThenTheDeadlineThenTheReader) {
  RecordingSink sink;
  sink.Cancel();
  std::atomic<bool> stopping{true};
  const auto past = Clock::now() - std::chrono::seconds(1);
  EXPECT_EQ(JobInterrupt(sink, past, &stopping).Check().code(), absl::StatusCode::kUnavailable);
  stopping = false;
  // A reader that left because its deadline passed: the deadline is the reason.
  EXPECT_EQ(JobInterrupt(sink, past, &stopping).Check().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(JobInterrupt(sink, Clock::time_point::max(), &stopping).Check().code(),
            absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace gpupipe::engine
