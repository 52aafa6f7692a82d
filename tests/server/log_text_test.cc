#include "server/log_text.h"

#include <gtest/gtest.h>

#include <string>

namespace gpupipe::daemon {
namespace {

TEST(QuoteForLog, AForgedLineStaysInsideItsField) {
  const std::string tag = "x\"\n2026-12-02T00:00:00.000Z gpupiped: job 1 OK tag=\"y";
  const std::string quoted = QuoteForLog(tag);
  EXPECT_EQ(quoted.find('\n'), std::string::npos);
  EXPECT_EQ(quoted, "x\\\"\\n2026-12-02T00:00:00.000Z gpupiped: job 1 OK tag=\\\"y");
}

TEST(QuoteForLog, ControlBytesAreEscapedAndUtf8PassesUnchanged) {
  EXPECT_EQ(QuoteForLog(std::string("a\tb\rc\\d\x01\x7f\0", 10)),
            "a\\tb\\rc\\\\d\\x01\\x7f\\x00");
  EXPECT_EQ(QuoteForLog("gr\xc3\xbc\xc3\x9f"), "gr\xc3\xbc\xc3\x9f");
  EXPECT_EQ(QuoteForLog(""), "");
}

std::string Json(absl::string_view text) {
  std::string out;
  AppendJsonString(text, &out);
  return out;
}

TEST(AppendJsonString, QuotesBackslashesAndControlsAreEscaped) {
  EXPECT_EQ(Json(std::string("a\"b\\c\n\t\b\f\r\x01\x1f\x7f\0", 14)),
            "\"a\\\"b\\\\c\\n\\t\\b\\f\\r\\u0001\\u001f\x7f\\u0000\"");
  EXPECT_EQ(Json(""), "\"\"");
}

TEST(AppendJsonString, WellFormedUtf8PassesAndEachIllFormedPartIsOneReplacement) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(Json("gr\xc3\xbc\xe2\x82\xac\xf0\x9f\x98\x80"),
            "\"gr\xc3\xbc\xe2\x82\xac\xf0\x9f\x98\x80\"");
  EXPECT_EQ(Json("\xff\xfe"), "\"" + fffd + fffd + "\"");           // never leads
  EXPECT_EQ(Json("\xc0\xaf"), "\"" + fffd + fffd + "\"");           // overlong lead, lone tail
  EXPECT_EQ(Json("\xe0\x80"), "\"" + fffd + fffd + "\"");           // E0 needs A0-BF next
  EXPECT_EQ(Json("\xed\xa0\x80"), "\"" + fffd + fffd + fffd + "\"");  // a surrogate
  EXPECT_EQ(Json("\xe1\x80" "A"), "\"" + fffd + "A\"");            // cut short by 'A'
  EXPECT_EQ(Json("x\xf0\x90\x80"), "\"x" + fffd + "\"");           // cut short by the end
  EXPECT_EQ(Json("\xf4\x90\x80\x80"), "\"" + fffd + fffd + fffd + fffd + "\"");  // past U+10FFFF
}

}  // namespace
}  // namespace gpupipe::daemon
