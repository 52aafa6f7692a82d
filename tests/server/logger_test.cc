// The daemon's log lines: text that a client's strings cannot break or forge, JSON that every
// collector parses, and the level filter.
#include "server/logger.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "nlohmann/json.hpp"

namespace gpupipe::daemon {
namespace {

// 2026-12-02T10:00:00.123Z
std::chrono::system_clock::time_point When() {
  return std::chrono::system_clock::from_time_t(1796205600) + std::chrono::milliseconds(123);
}

std::vector<LogField> Fields() {
  return {{"client", std::string("worker-1")},
          {"id", std::string("7f-3"), /*in_text=*/false},
          {"bytes", int64_t{4096}},
          {"gbps", 12.345},
          {"shape", std::vector<int64_t>{2, 3}}};
}

TEST(Logger, TextStartsWithTheTimeAndQuotesStringsButNotNumbers) {
  const Logger log(LogFormat::kText);
  EXPECT_EQ(log.Format(When(), LogLevel::kInfo, "job 7f-3 OK", Fields()),
            "2026-12-02T10:00:00.123Z gpupiped: job 7f-3 OK client=\"worker-1\" bytes=4096 "
            "gbps=12.35 shape=[2,3]");
}

TEST(Logger, TextNamesLevelsAboveInfo) {
  const Logger log(LogFormat::kText);
  EXPECT_EQ(log.Format(When(), LogLevel::kWarning, "careful", {}),
            "2026-12-02T10:00:00.123Z gpupiped: warning: careful");
  EXPECT_EQ(log.Format(When(), LogLevel::kError, "broken", {}),
            "2026-12-02T10:00:00.123Z gpupiped: error: broken");
}

TEST(Logger, AClientsStringCannotEndTheLineOrForgeAField) {
  const Logger log(LogFormat::kText);
  const std::string forged = "2026-12-02T10:00:00.000Z gpupiped: job 1-1 OK";
  const std::string line = log.Format(When(), LogLevel::kInfo, "job 7f-3 OK\n" + forged,
                                      {{"tag", std::string("x\" client=\"root\n" + forged)}});
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_NE(line.find("tag=\"x\\\" client=\\\"root\\n"), std::string::npos) << line;
  EXPECT_EQ(line.find(" client=\"root\""), std::string::npos) << line;
}

TEST(Logger, JsonHasTimeLevelMessageAndTypedFieldsInOrder) {
  const Logger log(LogFormat::kJson);
  const std::string line = log.Format(When(), LogLevel::kWarning, "job 7f-3 OK", Fields());
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(line);
  std::vector<std::string> keys;
  for (const auto& item : j.items()) keys.push_back(item.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"time", "level", "msg", "client", "id", "bytes", "gbps",
                                            "shape"}));
  EXPECT_EQ(j["time"], "2026-12-02T10:00:00.123Z");
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["msg"], "job 7f-3 OK");
  EXPECT_EQ(j["client"], "worker-1");
  EXPECT_EQ(j["id"], "7f-3");  // JSON-only fields are in JSON
  EXPECT_TRUE(j["bytes"].is_number_integer());
  EXPECT_EQ(j["bytes"], 4096);
  EXPECT_DOUBLE_EQ(j["gbps"].get<double>(), 12.345);
  EXPECT_EQ(j["shape"], (std::vector<int64_t>{2, 3}));
}

TEST(Logger, JsonReplacesBytesThatAreNotUtf8InsteadOfFailing) {
  const Logger log(LogFormat::kJson);
  const std::string line =
      log.Format(When(), LogLevel::kInfo, "m", {{"tag", std::string("ok\xff\xfe\"end\n")}});
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["tag"], "ok\xEF\xBF\xBD\xEF\xBF\xBD\"end\n");
}

TEST(Logger, LinesBelowTheLevelAreNotWritten) {
  char* buffer = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&buffer, &size);
  ASSERT_NE(out, nullptr);
  {
    const Logger log(LogFormat::kText, LogLevel::kWarning, out);
    EXPECT_EQ(log.Format(When(), LogLevel::kInfo, "quiet", {}), "");
    log.Info("an info line");
    log.Warning("a warning line");
    log.Error("an error line");
  }
  std::fclose(out);
  const std::string written(buffer, size);
  std::free(buffer);
  EXPECT_EQ(written.find("an info line"), std::string::npos) << written;
  EXPECT_NE(written.find("gpupiped: warning: a warning line\n"), std::string::npos) << written;
  EXPECT_NE(written.find("gpupiped: error: an error line\n"), std::string::npos) << written;
}

TEST(Logger, LevelAndFormatNamesParseAndBadOnesNameTheFlag) {
  EXPECT_EQ(*ParseLogLevel("info"), LogLevel::kInfo);
  EXPECT_EQ(*ParseLogLevel("WARN"), LogLevel::kWarning);
  EXPECT_EQ(*ParseLogLevel("warning"), LogLevel::kWarning);
  EXPECT_EQ(*ParseLogLevel("error"), LogLevel::kError);
  EXPECT_EQ(*ParseLogFormat("text"), LogFormat::kText);
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  absl::StatusOr<LogLevel> level = ParseLogLevel("debug");
  ASSERT_FALSE(level.ok());
  EXPECT_NE(level.status().message().find("--log-level"), std::string::npos);
  absl::StatusOr<LogFormat> format = ParseLogFormat("xml");
  ASSERT_FALSE(format.ok());
  EXPECT_NE(format.status().message().find("--log-format"), std::string::npos);
}

}  // namespace
}  // namespace gpupipe::daemon
