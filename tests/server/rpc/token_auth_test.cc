// The token table: what a token file may hold, and lookups that find only whole tokens.
#include "server/rpc/token_auth.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpupipe::rpc {
namespace {

TEST(TokenTable, ParsesNamedTokensSkippingCommentsAndBlankLines) {
  absl::StatusOr<std::shared_ptr<const TokenTable>> t = TokenTable::Parse(
      "# operators\n\nalice:0123456789abcdef0123\n  bob.ci:zyxwvutsrqponmlkjihg  \n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->size(), 2u);
  EXPECT_EQ((*t)->Find("0123456789abcdef0123"), "alice");
  EXPECT_EQ((*t)->Find("zyxwvutsrqponmlkjihg"), "bob.ci");
}

TEST(TokenTable, FindsOnlyWholeTokens) {
  auto t = TokenTable::Parse("ci:0123456789abcdef0123\n");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->Find("0123456789abcdef012"), std::nullopt);
  EXPECT_EQ((*t)->Find("0123456789abcdef01234"), std::nullopt);
  EXPECT_EQ((*t)->Find(""), std::nullopt);
  EXPECT_EQ((*t)->Find("1123456789abcdef0123"), std::nullopt);
  EXPECT_EQ((*t)->Find("0123456789abcdef0123"), "ci");
}

TEST(TokenTable, RefusesBadLinesNamingTheLineButNeverTheToken) {
  const std::string secret = "s3cr3t-s3cr3t-s3cr3t";
  for (const std::string& text :
       std::vector<std::string>{"no-colon-here\n", "bad name:" + secret + "\n", "short:abc\n",
        "a:" + secret + "\na:" + secret + "x\n", "a:" + secret + "\nb:" + secret + "\n",
        "sp:" + secret + " tail\n"}) {
    absl::StatusOr<std::shared_ptr<const TokenTable>> t = TokenTable::Parse(text);
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find("line "), std::string::npos) << t.status();
    EXPECT_EQ(t.status().message().find(secret), std::string::npos) << t.status();
  }
}

}  // namespace
}  // namespace gpupipe::rpc
