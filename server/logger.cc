#include "server/logger.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <system_error>
#include <thread>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/thread_name.h"
#include "server/log_text.h"

namespace gpupipe::daemon {
namespace {

// Appends `when` in RFC 3339, UTC, with milliseconds: 2026-12-02T10:00:00.123Z. Each thread
// keeps the text of the last second it formatted, since a busy daemon logs many lines a second.
void AppendTimestamp(std::chrono::system_clock::time_point when, std::string* out) {
  thread_local std::time_t cached_second = -1;
  thread_local char cached[32];
  const std::time_t t = std::chrono::system_clock::to_time_t(when);
  if (t != cached_second) {
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::strftime(cached, sizeof(cached), "%Y-%m-%dT%H:%M:%S", &tm);
    cached_second = t;
  }
  // to_time_t truncates toward zero; the milliseconds are those past that second.
  const int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      when - std::chrono::system_clock::from_time_t(t))
                                      .count());
  const char tail[6] = {'.', static_cast<char>('0' + ms / 100 % 10),
                        static_cast<char>('0' + ms / 10 % 10), static_cast<char>('0' + ms % 10),
                        'Z', '\0'};
  out->append(cached).append(tail);
}

// Appends `v` as printf's "%.2f" would.
void AppendFixed2(double v, std::string* out) {
  char digits[64];
  const std::to_chars_result r =
      std::to_chars(digits, digits + sizeof(digits), v, std::chars_format::fixed, 2);
  if (r.ec == std::errc()) {
    out->append(digits, r.ptr);
  } else {
    absl::StrAppend(out, absl::StrFormat("%.2f", v));  // longer than 64 characters
  }
}

// Appends `v` as a JSON number that reads back as the same double and as a floating-point
// number (100.0, not 100); JSON has no infinity or NaN, so those are null.
void AppendJsonDouble(double v, std::string* out) {
  if (!std::isfinite(v)) {
    out->append("null");
    return;
  }
  char digits[64];
  const std::to_chars_result r = std::to_chars(digits, digits + sizeof(digits), v);
  const absl::string_view text(digits, static_cast<size_t>(r.ptr - digits));
  out->append(text.data(), text.size());
  if (text.find_first_of(".e") == absl::string_view::npos) out->append(".0");
}

// Gathered lines past this many bytes are written by the thread that adds the last one, so the
// buffer stays bounded under any rate of lines.
constexpr size_t kMaxGatheredBytes = size_t{256} << 10;

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

// Writes the lines Log and Gather format to `out`, at once or gathered (see the header). Lines are
// appended to `gathered_` under `mu_`; whoever writes takes `write_mu_` first and then empties
// `gathered_` under `mu_`, so writes leave in the order the lines were gathered.
class Logger::Writer {
 public:
  Writer(std::FILE* out, std::chrono::milliseconds delay) : out_(out), delay_(delay) {}

  ~Writer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    Flush();
  }

  // `line` ends with its newline.
  void Add(const std::string& line, bool at_once) {
    if (delay_.count() <= 0 || at_once) {
      std::lock_guard<std::mutex> write_lock(write_mu_);
      {
        std::lock_guard<std::mutex> lock(mu_);
        gathered_ += line;
      }
      WriteGatheredLocked();
      return;
    }
    bool wake = false;
    bool full = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const bool first = gathered_.empty();
      gathered_ += line;
      full = gathered_.size() >= kMaxGatheredBytes;
      // The thread starts with the first gathered line, so that a Logger that only ever
      // writes at once (a test's, the daemon's before its flags are read) runs none.
      if (!thread_.joinable() && !no_thread_) {
        try {
          thread_ = std::thread([this] { GatherLoop(); });
        } catch (const std::system_error&) {
          no_thread_ = true;  // no thread to be had: every line is written at once
        }
      } else {
        wake = first && thread_idle_;
      }
      full |= no_thread_;
    }
    if (wake) cv_.notify_one();
    if (full) Flush();
  }

  void Flush() {
    std::lock_guard<std::mutex> write_lock(write_mu_);
    WriteGatheredLocked();
  }

 private:
  // With write_mu_ held. The two buffers trade places and keep their capacity, so gathering
  // allocates (and faults in) nothing once they have grown.
  void WriteGatheredLocked() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_.swap(gathered_);
    }
    // In pieces that end at a line's end and hold at most PIPE_BUF bytes where the lines
    // allow (a longer line goes alone), so that a pipe takes each whole.
    const absl::string_view all = writing_;
    for (size_t at = 0; at < all.size();) {
      size_t end = at + std::min<size_t>(PIPE_BUF, all.size() - at);
      if (end < all.size()) {
        const size_t last_line_end = all.rfind('\n', end - 1);
        end = last_line_end != absl::string_view::npos && last_line_end >= at
                  ? last_line_end + 1
                  : all.find('\n', end) + 1;  // one line longer than PIPE_BUF
        if (end == 0) end = all.size();     // (a last line without its newline)
      }
      std::fwrite(all.data() + at, 1, end - at, out_);
      std::fflush(out_);
      at = end;
    }
    writing_.clear();
  }

  // Waits for a first gathered line, gives the next ones `delay_` to join it, and writes them.
  void GatherLoop() {
    NameThisThread("gp-log");
    // The daemon blocks its shutdown signals in every thread so that one thread waits for them;
    // this thread may start after that, or in another program, so it blocks them itself.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      thread_idle_ = true;
      cv_.wait(lock, [&] { return stopping_ || !gathered_.empty(); });
      thread_idle_ = false;
      if (stopping_) return;  // the destructor writes what is left
      cv_.wait_for(lock, delay_, [&] { return stopping_; });
      lock.unlock();
      Flush();
      lock.lock();
    }
  }

  std::FILE* const out_;
  const std::chrono::milliseconds delay_;
  std::mutex write_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string gathered_;
  std::string writing_;  // under write_mu_: the lines being written
  bool thread_idle_ = false;  // the thread waits for a first line (only then is it woken)
  bool no_thread_ = false;    // starting the thread failed
  bool stopping_ = false;
  std::thread thread_;
};

Logger::Logger(LogFormat format, LogLevel min_level, std::FILE* out,
               std::chrono::milliseconds gather_delay)
    : format_(format),
      min_level_(min_level),
      writer_(std::make_unique<Writer>(out, gather_delay)) {}

Logger::~Logger() = default;

void Logger::Flush() const { writer_->Flush(); }

std::string Logger::Format(std::chrono::system_clock::time_point when, LogLevel level,
                           absl::string_view message, const std::vector<LogField>& fields) const {
  if (level < min_level_) return "";
  if (format_ == LogFormat::kJson) return FormatJson(when, level, message, fields);
  std::string line;
  line.reserve(512);
  AppendTimestamp(when, &line);
  line += " gpupiped: ";
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
            line += '"';
            AppendQuotedForLog(v, &line);
            line += '"';
          } else if constexpr (std::is_same_v<T, int64_t>) {
            absl::StrAppend(&line, v);
          } else if constexpr (std::is_same_v<T, double>) {
            AppendFixed2(v, &line);
          } else {
            absl::StrAppend(&line, "[", absl::StrJoin(v, ","), "]");
          }
        },
        f.value);
  }
  return line;
}

std::string Logger::FormatJson(std::chrono::system_clock::time_point when, LogLevel level,
                               absl::string_view message,
                               const std::vector<LogField>& fields) const {
  std::string line;
  line.reserve(640);
  line += "{\"time\":\"";
  AppendTimestamp(when, &line);
  line += "\",\"level\":\"";
  line += LogLevelName(level);
  line += "\",\"msg\":";
  AppendJsonString(message, &line);
  for (const LogField& f : fields) {
    line += ',';
    AppendJsonString(f.key, &line);
    line += ':';
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            AppendJsonString(v, &line);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            absl::StrAppend(&line, v);
          } else if constexpr (std::is_same_v<T, double>) {
            AppendJsonDouble(v, &line);
          } else {
            absl::StrAppend(&line, "[", absl::StrJoin(v, ","), "]");
          }
        },
        f.value);
  }
  line += '}';
  return line;
}

void Logger::Log(LogLevel level, absl::string_view message,
                 const std::vector<LogField>& fields) const {
  Write(level, message, fields, /*at_once=*/true);
}

void Logger::Gather(LogLevel level, absl::string_view message,
                    const std::vector<LogField>& fields) const {
  Write(level, message, fields, /*at_once=*/level != LogLevel::kInfo);
}

void Logger::Write(LogLevel level, absl::string_view message,
                   const std::vector<LogField>& fields, bool at_once) const {
  std::string line = Format(std::chrono::system_clock::now(), level, message, fields);
  if (line.empty()) return;
  line += '\n';
  writer_->Add(line, at_once);
}

}  // namespace gpupipe::daemon
