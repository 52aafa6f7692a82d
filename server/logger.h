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
// Writing: Log writes its line at once. Gather is for lines that come by the thousand (the
// daemon's line a job): with a gather delay, its info lines wait to be written together, about
// that long after the first of them, so that a busy daemon makes one write for many jobs' lines
// rather than one each. Any other line (Log's, or a warning or error from Gather) is written at
// once, after the lines gathered before it. Flush writes what waits, and so does the
// destructor; lines gathered when the process dies without either are lost. Writes are cut at
// line ends into pieces of at most PIPE_BUF bytes where lines allow, which a pipe keeps whole,
// so that others writing to the same pipe (gRPC's own messages on stderr) never split a line.
//
// Thread safety: Log, Gather and Flush may be called from any thread; lines never mix, and
// reach the output in the order they were logged. The thread that writes gathered lines blocks
// every signal, so that a process-directed signal never lands on it.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
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
                  std::FILE* out = stderr,
                  std::chrono::milliseconds gather_delay = std::chrono::milliseconds(0));
  ~Logger();
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  // Writes the gathered lines now (before the process ends without destructors, say).
  void Flush() const;

  void Log(LogLevel level, absl::string_view message,
           const std::vector<LogField>& fields = {}) const;
  // As Log, but an info line may wait to be written with others (see the header comment).
  void Gather(LogLevel level, absl::string_view message,
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

  // The line Log writes (without its newline), or "" for a level below the minimum. In JSON,
  // the fields follow time, level and msg in their order; their keys are the caller's to keep
  // apart from each other and from those three.
  std::string Format(std::chrono::system_clock::time_point when, LogLevel level,
                     absl::string_view message, const std::vector<LogField>& fields) const;

 private:
  class Writer;

  // Formats the line and hands it to the writer: at once, or to be gathered.
  void Write(LogLevel level, absl::string_view message, const std::vector<LogField>& fields,
             bool at_once) const;
  std::string FormatJson(std::chrono::system_clock::time_point when, LogLevel level,
                         absl::string_view message, const std::vector<LogField>& fields) const;

  const LogFormat format_;
  const LogLevel min_level_;
  const std::unique_ptr<Writer> writer_;
};

}  // namespace gpupipe::daemon
