// CPU time a process has used since it started: its threads' user and system time together.
// This process's (getrusage) for the daemon's stats and the bench's client side; another
// process's (Linux /proc) for the bench's echo floor, a child of the bench.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <sstream>
#include <string>

namespace gpupipe {

inline double ProcessCpuSeconds() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Process `pid`'s CPU seconds, counted by /proc in clock ticks (sysconf(_SC_CLK_TCK), so a
// reading may be up to a tick short), or nullopt when it cannot be read (no such process, no
// /proc).
inline std::optional<double> ProcessCpuSecondsOf(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  FILE* file = std::fopen(path.c_str(), "r");
  if (file == nullptr) return std::nullopt;
  char buffer[1024];
  const size_t n = std::fread(buffer, 1, sizeof(buffer) - 1, file);
  std::fclose(file);
  const std::string stat(buffer, n);
  // "pid (comm) state ...": comm may hold spaces and parentheses, so fields count from the
  // last ')'; utime and stime are fields 14 and 15, the 12th and 13th after it.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 0; i < 11; ++i) {
    if (!(fields >> field)) return std::nullopt;
  }
  unsigned long long utime = 0, stime = 0;
  if (!(fields >> utime >> stime)) return std::nullopt;
  const long ticks = sysconf(_SC_CLK_TCK);
  if (ticks <= 0) return std::nullopt;
  return static_cast<double>(utime + stime) / static_cast<double>(ticks);
}

}  // namespace gpupipe
