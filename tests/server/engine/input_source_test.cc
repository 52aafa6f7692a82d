#include "server/engine/input_source.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace gpupipe::engine {
namespace {

TEST(InputSourceTest, CompleteSourceHasEveryByte) {
  auto source = InputSource::Complete("abcdef");
  EXPECT_EQ(source->size(), 6);
  EXPECT_TRUE(source->complete());
  absl::StatusOr<const char*> data = source->WaitForBytes(6);
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(std::string(*data, 6), "abcdef");
}

TEST(InputSourceTest, WaiterWakesWhenTheBytesArrive) {
  auto source = InputSource::Streaming(8);
  EXPECT_FALSE(source->complete());
  std::string seen;
  std::thread reader([&] {
    absl::StatusOr<const char*> data = source->WaitForBytes(8);
    ASSERT_TRUE(data.ok());
    seen.assign(*data, 8);
  });
  ASSERT_TRUE(source->Append("0123", 4).ok());
  EXPECT_EQ(source->available(), 4);
  ASSERT_TRUE(source->Append("4567", 4).ok());
  reader.join();
  EXPECT_EQ(seen, "01234567");
  EXPECT_TRUE(source->complete());
}

TEST(InputSourceTest, AppendPastTheSizeIsRejected) {
  auto source = InputSource::Streaming(4);
  ASSERT_TRUE(source->Append("012", 3).ok());
  absl::Status s = source->Append("34", 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(source->available(), 3);
}

TEST(InputSourceTest, FailureWakesWaitersAndSticks) {
  auto source = InputSource::Streaming(4);
  std::thread reader([&] {
    absl::StatusOr<const char*> data = source->WaitForBytes(4);
    EXPECT_EQ(data.status().code(), absl::StatusCode::kCancelled);
  });
  source->Fail(absl::CancelledError("client went away"));
  reader.join();
  EXPECT_EQ(source->Append("x", 1).code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(source->WaitForBytes(0).status().ok(), true);
  EXPECT_EQ(source->WaitForBytes(5).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpupipe::engine
