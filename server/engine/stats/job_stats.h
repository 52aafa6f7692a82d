// What the engine's jobs came to, for the daemon's metrics and its GetStats RPC: counts by
// final status, bytes and device time, and latency histograms, per priority level and per
// client, added to as each job ends; and refusals by reason. The most recently active
// kMaxClients clients are kept apart; the rest are summed under kOtherClients, so that clients
// that name themselves anew on every call cannot grow the table.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "server/engine/job/types.h"

namespace gpupipe::engine {

struct JobRecord;

// Seconds in buckets with fixed upper bounds (the last bucket holds the rest).
struct LatencyHistogram {
  static constexpr std::array<double, 14> kBounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30};
  std::array<int64_t, kBounds.size() + 1> counts{};
  double sum = 0;
  int64_t count = 0;
  void Add(double seconds);
};

struct JobCounts {
  std::map<std::string, int64_t> by_status;  // "OK", "CANCELLED", ...
  int64_t bytes_in = 0;
  int64_t bytes_out = 0;
  double device_seconds = 0;
  void Add(const JobCounts& other);
};

struct LevelJobStats {
  JobCounts jobs;
  LatencyHistogram queue_wait;
  LatencyHistogram device_time;
  LatencyHistogram total_time;
};

class JobStats {
 public:
  static constexpr size_t kMaxClients = 1024;
  static constexpr char kOtherClients[] = "(other)";

  // A job ended (`record.status` its final status). Only a job that `ran` (a lane took it)
  // adds to the latency histograms; one that ended in the queue (cancelled, past its deadline,
  // or dropped at shutdown) counts by status alone.
  void Ended(const JobRecord& record, bool ran = true);
  // A request was refused before a job existed; the reason is the status code's name, or the
  // flag of a limit (one of a fixed set) the message ends by naming ("max-client-jobs").
  void Refused(const absl::Status& status);

  std::array<LevelJobStats, kPriorityLevels> levels() const;
  std::map<std::string, JobCounts> clients() const;
  std::map<std::string, int64_t> refused() const;

 private:
  struct Client {
    JobCounts jobs;
    std::chrono::steady_clock::time_point last_active;
  };

  mutable std::mutex mu_;
  std::array<LevelJobStats, kPriorityLevels> levels_;
  std::unordered_map<std::string, Client> clients_;
  std::map<std::string, int64_t> refused_;
};

// The reason a refusal is counted under (JobStats::Refused).
std::string RefusalReason(const absl::Status& status);

}  // namespace gpupipe::engine
