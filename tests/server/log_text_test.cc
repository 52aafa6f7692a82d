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

}  // namespace
}  // namespace gpupipe::daemon
