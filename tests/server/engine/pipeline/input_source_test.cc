#include "server/engine/pipeline/input_source.h"

#include <gtest/gtest.h>

#include <string>

namespace gpupipe::engine {
namespace {

TEST(CompleteInput, ChunksAreRangesOfTheBytesAndAlwaysReady) {
  std::shared_ptr<InputSource> source = InputSource::Complete("abcdef");
  EXPECT_EQ(source->size(), 6);
  EXPECT_TRUE(source->Ready(0, {0, 6}));
  absl::StatusOr<InputChunk> whole = source->Acquire(0, {0, 6});
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(std::string(whole->data, 6), "abcdef");
  EXPECT_FALSE(whole->pinned);
  // Overlapping chunks (a convolve's halo) are ranges of the same bytes.
  absl::StatusOr<InputChunk> tail = source->Acquire(1, {4, 6});
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(std::string(tail->data, 2), "ef");
}

TEST(CompleteInput, ARangeOutsideTheBytesIsAnInternalError) {
  std::shared_ptr<InputSource> source = InputSource::Complete("abc");
  EXPECT_EQ(source->Acquire(0, {2, 4}).status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace gpupipe::engine
