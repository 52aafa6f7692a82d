#include "client/cli/progress.h"

#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpupipe {
namespace cli {
namespace {

using ::testing::HasSubstr;

std::string Contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buffer[256];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) s.append(buffer, n);
  return s;
}

TEST(ProgressTest, LineShowsPercentBytesAndRate) {
  const std::string line = RenderProgressLine("upload", 50'000'000, 100'000'000, 0.5);
  EXPECT_THAT(line, HasSubstr("upload  50% [##########          ]"));
  EXPECT_THAT(line, HasSubstr("50.0/100.0 MB"));
  EXPECT_THAT(line, HasSubstr("100.0 MB/s"));
  EXPECT_THAT(RenderProgressLine("result", 7, 0, 0), HasSubstr("100%"));
  EXPECT_THAT(RenderProgressLine("result", 0, 10, 0), HasSubstr("  0% [ "));
}

TEST(ProgressTest, DisabledBarWritesNothing) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar(false, f);
    bar.Upload(1, 2);
    bar.Result(2, 2);
  }
  EXPECT_EQ(Contents(f), "");
  std::fclose(f);
}

TEST(ProgressTest, EnabledBarDrawsPhasesAndErasesItsLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar(true, f);
    bar.Upload(1, 4);
    bar.Upload(4, 4);  // the last step always draws
    bar.Result(4, 4);
  }
  const std::string out = Contents(f);
  EXPECT_THAT(out, HasSubstr("upload  25%"));
  EXPECT_THAT(out, HasSubstr("upload 100%"));
  EXPECT_THAT(out, HasSubstr("result 100%"));
  EXPECT_EQ(out.substr(out.size() - 4), "\r\033[K");
  std::fclose(f);
}

}  // namespace
}  // namespace cli
}  // namespace gpupipe
