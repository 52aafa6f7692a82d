#include "server/engine/stats/job_stats.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/ascii.h"
#include "server/engine/engine.h"

namespace gpupipe::engine {

void LatencyHistogram::Add(double seconds) {
  const auto it = std::lower_bound(kBounds.begin(), kBounds.end(), seconds);
  ++counts[static_cast<size_t>(it - kBounds.begin())];
  sum += seconds;
  ++count;
}

void JobCounts::Add(const JobCounts& other) {
  for (const auto& [status, n] : other.by_status) by_status[status] += n;
  bytes_in += other.bytes_in;
  bytes_out += other.bytes_out;
  device_seconds += other.device_seconds;
}

std::string RefusalReason(const absl::Status& status) {
  // Admission and work limits name their flag: "(gpupiped --max-client-jobs)". A message may
  // quote the client's own name before it, so only the last mention counts, and only a flag of
  // this fixed set: a client must not be able to mint reasons (each one is a metrics series).
  static constexpr absl::string_view kLimitFlags[] = {"chunk-mib",
                                                      "input-ring-mib",
                                                      "input-ring-total-mib",
                                                      "max-client-jobs",
                                                      "max-client-queued-mib",
                                                      "max-client-unread-mib",
                                                      "max-client-uploads",
                                                      "max-input-mib",
                                                      "max-queued-jobs",
                                                      "max-queued-mib",
                                                      "max-stream-input-gib",
                                                      "max-unread-mib",
                                                      "max-work-per-byte",
                                                      "priority-max-calls",
                                                      "priority-min"};
  const absl::string_view message = status.message();
  constexpr absl::string_view kPrefix = "gpupiped --";
  const size_t at = message.rfind(kPrefix);
  if (at != absl::string_view::npos) {
    const size_t from = at + kPrefix.size();
    size_t end = from;
    while (end < message.size() &&
           (std::isalnum(static_cast<unsigned char>(message[end])) || message[end] == '-')) {
      ++end;
    }
    const absl::string_view flag = message.substr(from, end - from);
    for (absl::string_view known : kLimitFlags) {
      if (flag == known) return std::string(flag);
    }
  }
  return absl::AsciiStrToLower(absl::StatusCodeToString(status.code()));
}

void JobStats::Ended(const JobRecord& record, bool ran) {
  JobCounts counts;
  counts.by_status[absl::StatusCodeToString(record.status.code())] = 1;
  counts.bytes_in = record.timing.bytes_in;
  counts.bytes_out = record.timing.bytes_out;
  const double device_seconds =
      (record.timing.h2d_us + record.timing.compute_us + record.timing.d2h_us) / 1e6;
  counts.device_seconds = device_seconds;
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  LevelJobStats& level = levels_[static_cast<size_t>(record.spec.priority)];
  level.jobs.Add(counts);
  if (ran) {  // a job that never left the queue has no times to tell
    level.queue_wait.Add(record.timing.queue_us / 1e6);
    level.device_time.Add(device_seconds);
    level.total_time.Add(record.timing.total_us / 1e6);
  }
  auto it = clients_.find(record.spec.client);
  if (it == clients_.end() && clients_.size() >= kMaxClients) {
    // Fold the least recently active client into the others.
    auto oldest = clients_.end();
    for (auto c = clients_.begin(); c != clients_.end(); ++c) {
      if (c->first == kOtherClients) continue;
      if (oldest == clients_.end() || c->second.last_active < oldest->second.last_active) {
        oldest = c;
      }
    }
    if (oldest != clients_.end()) {
      clients_[kOtherClients].jobs.Add(oldest->second.jobs);
      clients_.erase(oldest);
    }
  }
  Client& client = clients_[record.spec.client];
  client.jobs.Add(counts);
  client.last_active = now;
}

void JobStats::Refused(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++refused_[RefusalReason(status)];
}

std::array<LevelJobStats, kPriorityLevels> JobStats::levels() const {
  std::lock_guard<std::mutex> lock(mu_);
  return levels_;
}

std::map<std::string, JobCounts> JobStats::clients() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, JobCounts> out;
  for (const auto& [name, client] : clients_) out[name] = client.jobs;
  return out;
}

std::map<std::string, int64_t> JobStats::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

}  // namespace gpupipe::engine
