#include "server/logger.h"

#include <ctime>
#include <mutex>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "server/log_text.h"

namespace gpupipe::daemon {
namespace {

// RFC 3339 in UTC with milliseconds: 2026-12-02T10:00:00.123Z.
std::string Timestamp(std::chrono::system_clock::time_point when) {
  const std::time_t t = std::chrono::system_clock::to_time_t(when);
  const int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(when.time_since_epoch()).count() %
      1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
  return absl::StrFormat("%s.%03dZ", stamp, ms);
}

}  // namespace

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "warning" || lower == "warn") return LogLevel::kWarning;
  if (lower == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(
      absl::StrCat("--log-level: expected info, warning or error, got '", name, "'"));
}

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("--log-format: expected text or json, got '", name, "'"));
}

Logger::Logger(LogFormat format, LogLevel min_level, std::FILE* out)
    : format_(format), min_level_(min_level), out_(out) {}

std::string Logger::Format(std::chrono::system_clock::time_point when, LogLevel level,
                           absl::string_view message, const std::vector<LogField>& fields) const {
  if (level < min_level_) return "";
  if (format_ == LogFormat::kJson) {
    nlohmann::ordered_json j = {
        {"time", Timestamp(when)}, {"level", LogLevelName(level)}, {"msg", std::string(message)}};
    for (const LogField& f : fields) {
      std::visit([&](const auto& v) { j[f.key] = v; }, f.value);
    }
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  std::string line = absl::StrCat(Timestamp(when), " gpupiped: ");
  if (level != LogLevel::kInfo) absl::StrAppend(&line, LogLevelName(level), ": ");
  // The message itself is the daemon's own text; a newline in it (quoted from elsewhere) must
  // still not start a new line.
  for (char c : message) line += c == '\n' ? ' ' : c;
  for (const LogField& f : fields) {
    if (!f.in_text) continue;
    absl::StrAppend(&line, " ", f.key, "=");
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            absl::StrAppend(&line, "\"", QuoteForLog(v), "\"");
          } else if constexpr (std::is_same_v<T, int64_t>) {
            absl::StrAppend(&line, v);
          } else if constexpr (std::is_same_v<T, double>) {
            absl::StrAppend(&line, absl::StrFormat("%.2f", v));
          } else {
            absl::StrAppend(&line, "[", absl::StrJoin(v, ","), "]");
          }
        },
        f.value);
  }
  return line;
}

void Logger::Log(LogLevel level, absl::string_view message,
                 const std::vector<LogField>& fields) const {
  const std::string line = Format(std::chrono::system_clock::now(), level, message, fields);
  if (line.empty()) return;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

}  // namespace gpupipe::daemon
