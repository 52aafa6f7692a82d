// The daemon's log lines: text that a client's strings cannot break or forge, JSON that every
// collector parses, and the level filter.
#include "server/logger.h"

#include <gtest/gtest.h>

#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

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

TEST(Logger, EachLineHasItsOwnSecondAndMillisecondsAndTwoDecimals) {
  const Logger log(LogFormat::kText);
  // The same second twice, then the next, then back: each stamp is its own time's.
  EXPECT_EQ(log.Format(When(), LogLevel::kInfo, "a", {}),
            "2026-12-02T10:00:00.123Z gpupiped: a");
  EXPECT_EQ(log.Format(When() + std::chrono::milliseconds(800), LogLevel::kInfo, "b", {}),
            "2026-12-02T10:00:00.923Z gpupiped: b");
  EXPECT_EQ(log.Format(When() + std::chrono::milliseconds(884), LogLevel::kInfo, "c", {}),
            "2026-12-02T10:00:01.007Z gpupiped: c");
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(log.Format(When() - std::chrono::milliseconds(123), LogLevel::kInfo, "d",
                       {{"x", 0.005}, {"y", -2.0}, {"z", 1e20}, {"w", inf}}),
            "2026-12-02T10:00:00.000Z gpupiped: d x=0.01 y=-2.00 z=100000000000000000000.00 "
            "w=inf");
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

// The JSON line against nlohmann::json's own dump of the same values (its `replace` handler
// for bytes that are not UTF-8), both read back: on random bytes, control characters and
// broken sequences among them, and on random doubles, which must read back exactly and as
// floating-point numbers.
TEST(Logger, JsonReadsBackAsNlohmannsOwnDumpOfTheSameValues) {
  const Logger log(LogFormat::kJson);
  std::mt19937_64 rng(11);
  const auto random_text = [&] {
    // Mostly bytes that make or break UTF-8 sequences, quotes, backslashes and controls.
    static const unsigned char kBytes[] = {'a', '"', '\\', '\n', 0x01, 0x1f, 0x7f, 0x80, 0xbf,
                                           0xc2, 0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff,
                                           0xa0, 0x9f, 0x8f, 0x90, 'z', ' '};
    std::string t(rng() % 24, '\0');
    for (char& c : t) c = static_cast<char>(kBytes[rng() % sizeof(kBytes)]);
    return t;
  };
  for (int i = 0; i < 5000; ++i) {
    const std::string message = random_text();
    const std::string value = random_text();
    double number;
    const uint64_t bits = rng();
    std::memcpy(&number, &bits, sizeof(number));
    if (i % 3 == 0) number = static_cast<double>(static_cast<int64_t>(rng() % 100000));
    const std::string line = log.Format(When(), LogLevel::kInfo, message,
                                        {{"tag", value}, {"n", number}, {"k", int64_t{-7}}});
    ASSERT_EQ(line.find('\n'), std::string::npos);
    nlohmann::ordered_json expected = {{"msg", message}, {"tag", value}};
    const nlohmann::json theirs = nlohmann::json::parse(
        expected.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    nlohmann::json ours;
    ASSERT_NO_THROW(ours = nlohmann::json::parse(line)) << line;
    EXPECT_EQ(ours["msg"], theirs["msg"]) << line;
    EXPECT_EQ(ours["tag"], theirs["tag"]) << line;
    EXPECT_EQ(ours["k"], -7);
    if (std::isfinite(number)) {
      ASSERT_TRUE(ours["n"].is_number_float()) << line;
      EXPECT_EQ(ours["n"].get<double>(), number) << line;
    } else {
      EXPECT_TRUE(ours["n"].is_null()) << line;
    }
  }
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

// What the file at `path` holds so far.
std::string WrittenTo(const std::string& path) {
  std::FILE* in = std::fopen(path.c_str(), "r");
  if (in == nullptr) return "";
  std::string text;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), in)) > 0) text.append(buffer, n);
  std::fclose(in);
  return text;
}

class GatheringLogger : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "gpupipe-logger-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    out_ = std::fopen(path_.c_str(), "w");
    ASSERT_NE(out_, nullptr);
  }
  void TearDown() override {
    if (out_ != nullptr) std::fclose(out_);
    std::remove(path_.c_str());
  }
  std::string path_;
  std::FILE* out_ = nullptr;
};

TEST_F(GatheringLogger, InfoLinesWaitOutTheDelayAndLeaveTogetherInOrder) {
  const auto delay = std::chrono::seconds(1);
  const Logger log(LogFormat::kText, LogLevel::kInfo, out_, delay);
  const auto first = std::chrono::steady_clock::now();
  log.Gather(LogLevel::kInfo, "line 1");
  log.Gather(LogLevel::kInfo, "line 2");
  log.Gather(LogLevel::kInfo, "line 3");
  // Still gathered, well within the delay.
  EXPECT_EQ(WrittenTo(path_), "");
  // Then written, within the delay and a generous margin for a loaded machine.
  std::string written;
  while (std::chrono::steady_clock::now() < first + std::chrono::seconds(10)) {
    written = WrittenTo(path_);
    if (!written.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE(std::chrono::steady_clock::now() - first, delay);
  const size_t l1 = written.find("line 1\n");
  const size_t l2 = written.find("line 2\n");
  const size_t l3 = written.find("line 3\n");
  ASSERT_NE(l3, std::string::npos) << written;  // all three in the one write
  EXPECT_LT(l1, l2);
  EXPECT_LT(l2, l3);
}

TEST_F(GatheringLogger, AWarningIsWrittenAtOnceAfterTheLinesGatheredBeforeIt) {
  const Logger log(LogFormat::kText, LogLevel::kInfo, out_, std::chrono::seconds(60));
  log.Gather(LogLevel::kInfo, "gathered first");
  log.Gather(LogLevel::kWarning, "look here");
  const std::string written = WrittenTo(path_);
  const size_t info = written.find("gathered first\n");
  const size_t warning = written.find("warning: look here\n");
  ASSERT_NE(info, std::string::npos) << written;
  ASSERT_NE(warning, std::string::npos) << written;
  EXPECT_LT(info, warning);
  log.Gather(LogLevel::kInfo, "gathered again");
  EXPECT_EQ(WrittenTo(path_).find("gathered again"), std::string::npos);
}

TEST_F(GatheringLogger, FlushAndTheDestructorWriteWhatWaits) {
  {
    const Logger log(LogFormat::kText, LogLevel::kInfo, out_, std::chrono::seconds(60));
    log.Gather(LogLevel::kInfo, "flushed");
    log.Flush();
    EXPECT_NE(WrittenTo(path_).find("flushed\n"), std::string::npos);
    log.Gather(LogLevel::kInfo, "at the end");
    EXPECT_EQ(WrittenTo(path_).find("at the end"), std::string::npos);
  }
  EXPECT_NE(WrittenTo(path_).find("at the end\n"), std::string::npos);
}

TEST_F(GatheringLogger, ManyLinesFromManyThreadsAreWrittenWholeAndBounded) {
  constexpr int kThreads = 8;
  constexpr int kLines = 2000;  // 16,000 lines of about 55 bytes: past the gathering bound
  {
    const Logger log(LogFormat::kText, LogLevel::kInfo, out_, std::chrono::seconds(60));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&log, t] {
        for (int i = 0; i < kLines; ++i) {
          log.Gather(LogLevel::kInfo, "thread " + std::to_string(t) + " line " + std::to_string(i));
        }
      });
    }
    for (std::thread& t : threads) t.join();
    // More than the bound was logged within the (long) delay: some were written already.
    EXPECT_FALSE(WrittenTo(path_).empty());
  }
  const std::string written = WrittenTo(path_);
  std::vector<int> next(kThreads, 0);
  size_t lines = 0;
  for (size_t at = 0; at < written.size();) {
    const size_t end = written.find('\n', at);
    ASSERT_NE(end, std::string::npos);
    const std::string line = written.substr(at, end - at);
    at = end + 1;
    int t = -1;
    int i = -1;
    ASSERT_EQ(std::sscanf(line.c_str() + line.find("thread "), "thread %d line %d", &t, &i), 2)
        << line;
    ASSERT_TRUE(t >= 0 && t < kThreads) << line;
    EXPECT_EQ(i, next[static_cast<size_t>(t)]) << line;  // each thread's lines in order
    next[static_cast<size_t>(t)] = i + 1;
    ++lines;
  }
  EXPECT_EQ(lines, static_cast<size_t>(kThreads * kLines));
}

TEST_F(GatheringLogger, LogWritesAtOnceAfterTheLinesGatheredBeforeIt) {
  const Logger log(LogFormat::kText, LogLevel::kInfo, out_, std::chrono::seconds(60));
  log.Gather(LogLevel::kInfo, "a job line");
  log.Info("listening");
  const std::string written = WrittenTo(path_);
  const size_t job = written.find("a job line\n");
  const size_t listening = written.find("listening\n");
  ASSERT_NE(job, std::string::npos) << written;
  ASSERT_NE(listening, std::string::npos) << written;
  EXPECT_LT(job, listening);
}

// Each write the logger makes, as the stream's cookie sees it.
ssize_t RecordWrite(void* cookie, const char* data, size_t size) {
  static_cast<std::vector<std::string>*>(cookie)->emplace_back(data, size);
  return static_cast<ssize_t>(size);
}

TEST(Logger, WritesAreWholeLinesOfAtMostPipeBufWhereLinesAllow) {
  std::vector<std::string> writes;
  cookie_io_functions_t io{};
  io.write = RecordWrite;
  std::FILE* out = fopencookie(&writes, "w", io);
  ASSERT_NE(out, nullptr);
  std::setvbuf(out, nullptr, _IONBF, 0);
  std::string lines;
  {
    const Logger log(LogFormat::kText, LogLevel::kInfo, out, std::chrono::seconds(60));
    for (int i = 0; i < 300; ++i) {
      // Mostly short lines, and two longer than PIPE_BUF.
      const size_t n =
          i == 100 || i == 200 ? PIPE_BUF + 100 : 20 + static_cast<size_t>(i % 7) * 30;
      log.Gather(LogLevel::kInfo, std::string(n, static_cast<char>('a' + i % 26)));
    }
    log.Flush();
  }
  std::fclose(out);
  ASSERT_GT(writes.size(), 2u);
  size_t lines_seen = 0;
  for (const std::string& w : writes) {
    ASSERT_FALSE(w.empty());
    EXPECT_EQ(w.back(), '\n');
    const size_t lines_in = static_cast<size_t>(std::count(w.begin(), w.end(), '\n'));
    lines_seen += lines_in;
    if (w.size() > PIPE_BUF) EXPECT_EQ(lines_in, 1u) << "a write past PIPE_BUF is one long line";
  }
  EXPECT_EQ(lines_seen, 300u);
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
