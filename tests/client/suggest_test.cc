#include "client/suggest.h"

#include "gtest/gtest.h"

namespace gpupipe {
namespace client {
namespace {

TEST(SuggestTest, EditDistanceCountsSwapsAsOneEdit) {
  EXPECT_EQ(EditDistance("softmax", "softmax"), 0);
  EXPECT_EQ(EditDistance("sofmax", "softmax"), 1);  // a deletion
  EXPECT_EQ(EditDistance("sumbit", "submit"), 1);   // a swap of neighbours
  EXPECT_EQ(EditDistance("RELU", "relu"), 0);       // case is ignored
  EXPECT_EQ(EditDistance("", "abc"), 3);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
}

TEST(SuggestTest, SuggestsOnlyLikelyTypos) {
  const std::vector<std::string> ops = {"relu", "softmax", "sum", "scale", "sqrt"};
  EXPECT_EQ(ClosestMatch("sofmax", ops), "softmax");
  EXPECT_EQ(ClosestMatch("rleu", ops), "relu");
  EXPECT_EQ(ClosestMatch("xyz", ops), "");  // three edits from anything
  EXPECT_EQ(ClosestMatch("qqqqqqqq", ops), "");
  EXPECT_EQ(ClosestMatch("a", {"b"}), "");     // a one-letter word is no typo of another
  EXPECT_EQ(ClosestMatch("sun", ops), "sum");  // ties go to the earlier candidate
  EXPECT_EQ(DidYouMean("sofmax", ops), ": did you mean 'softmax'?");
  EXPECT_EQ(DidYouMean("zzz", ops), "");
  EXPECT_EQ(ClosestMatch("x", {}), "");
}

}  // namespace
}  // namespace client
}  // namespace gpupipe
