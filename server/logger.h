// The daemon's log: one line per event on stderr, as text for people or as JSON for log
// collectors (--log-format), filtered by level (--log-level).
//
//   text: 2026-12-02T10:00:00.123Z gpupiped: warning: <message> key="text" key=12.50
//   json: {"time":"2026-12-02T10:00:00.123Z","level":"warning","msg":"<message>","key":...}
//
// In text, string values are always double-quoted and escaped (QuoteForLog), so that text from
// clients can neither end the line nor forge a field; numbers are bare. In JSON, strings that
// are not valid UTF-8 have the bad bytes replaced.
//
// Thread safety: Log may be called from any thread; lines never mix.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpupipe::daemon {

enum class LogLevel { kInfo, kWarning, kError };
enum class LogFormat { kText, kJson };

// "info", "warning" or "error" (ParseLogLevel also takes "warn").
const char* LogLevelName(LogLevel level);
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name);
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name);  // "text" or "json"

struct LogField {
  std::string key;
  std::variant<std::string, int64_t, double, std::vector<int64_t>> value;
  // False for a field the text message states already (a job's id): JSON only.
  bool in_text = true;
};

class Logger {
 public:
  explicit Logger(LogFormat format = LogFormat::kText, LogLevel min_level = LogLevel::kInfo,
                  std::FILE* out = stderr);

  void Log(LogLevel level, absl::string_view message,
           const std::vector<LogField>& fields = {}) const;
  void Info(absl::string_view message, const std::vector<LogField>& fields = {}) const {
    Log(LogLevel::kInfo, message, fields);
  }
  void Warning(absl::string_view message, const std::vector<LogField>& fields = {}) const {
    Log(LogLevel::kWarning, message, fields);
  }
  void Error(absl::string_view message, const std::vector<LogField>& fields = {}) const {
    Log(LogLevel::kError, message, fields);
  }

  // The line Log writes (without its newline), or "" for a level below the minimum.
  std::string Format(std::chrono::system_clock::time_point when, LogLevel level,
                     absl::string_view message, const std::vector<LogField>& fields) const;

 private:
  const LogFormat format_;
  const LogLevel min_level_;
  std::FILE* const out_;
};

}  // namespace gpupipe::daemon
