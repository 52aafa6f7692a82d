// The CLI grammar for cumsum, histogram, convolve and topk: repeated doubles as lists, enums by
// name, through protobuf reflection alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/ops_grammar.h"

namespace gpupipe::client {
namespace {

using ::testing::HasSubstr;

TEST(OpsGrammarRowResize, ParsesTheNewOps) {
  absl::StatusOr<std::vector<v1::Op>> ops =
      ParseOps("convolve(taps=[0.25,0.5,0.25],mode=same) | histogram(bins=256,lo=0,hi=1) | "
               "topk(k=16) | cumsum");
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_EQ(ops->size(), 4u);
  const v1::ConvolveOp& c = (*ops)[0].convolve();
  ASSERT_EQ(c.taps_size(), 3);
  EXPECT_EQ(c.taps(0), 0.25);
  EXPECT_EQ(c.taps(1), 0.5);
  EXPECT_EQ(c.taps(2), 0.25);
  EXPECT_EQ(c.mode(), v1::ConvolveOp::MODE_SAME);
  EXPECT_EQ((*ops)[1].histogram().bins(), 256);
  EXPECT_EQ((*ops)[1].histogram().lo(), 0);
  EXPECT_TRUE((*ops)[1].histogram().has_lo());
  EXPECT_EQ((*ops)[1].histogram().hi(), 1);
  EXPECT_EQ((*ops)[2].topk().k(), 16);
  EXPECT_TRUE((*ops)[3].has_cumsum());
}

TEST(OpsGrammarRowResize, FormatsAndRoundTrips) {
  absl::StatusOr<std::vector<v1::Op>> ops =
      ParseOps("convolve(taps=[1, -2.5], mode=valid) | topk(k=3)");
  ASSERT_TRUE(ops.ok()) << ops.status();
  const std::string text = FormatOps(*ops);
  EXPECT_EQ(text, "convolve(taps=[1, -2.5], mode=valid) | topk(k=3)");
  absl::StatusOr<std::vector<v1::Op>> again = ParseOps(text);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(FormatOps(*again), text);
}

TEST(OpsGrammarRowResize, ErrorsNameTheParam) {
  absl::StatusOr<std::vector<v1::Op>> ops = ParseOps("convolve(taps=[1], mode=circular)");
  ASSERT_FALSE(ops.ok());
  EXPECT_THAT(std::string(ops.status().message()), HasSubstr("full, same, valid"));
  ops = ParseOps("topk(k=1.5)");
  ASSERT_FALSE(ops.ok());
  ops = ParseOps("convolve(taps=0.5)");
  ASSERT_FALSE(ops.ok());
  EXPECT_THAT(std::string(ops.status().message()), HasSubstr("taps"));
}

TEST(OpsGrammarRowResize, KnownOpsListsThem) {
  const std::vector<std::string> known = KnownOps();
  for (const char* name : {"cumsum", "histogram", "convolve", "topk"}) {
    EXPECT_NE(std::find(known.begin(), known.end(), name), known.end()) << name;
  }
}

}  // namespace
}  // namespace gpupipe::client
