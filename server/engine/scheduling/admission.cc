#include "server/engine/scheduling/admission.h"

#include "absl/strings/str_format.h"

namespace gpupipe::engine {
namespace {

double Mib(int64_t bytes) { return static_cast<double>(bytes) / double(1 << 20); }

}  // namespace

std::string ClientName(const std::string& client) {
  return client.empty() ? std::string("an anonymous client") : "client '" + client + "'";
}

absl::Status Admission::Check(const AdmissionTicket& job) const {
  const int level_queued = queued_jobs_[Level(job.priority)];
  if (level_queued >= limits_.max_queued_jobs) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the server is busy: %d %s-priority jobs are queued, the most it queues per priority "
        "(gpupiped --max-queued-jobs); retry later",
        level_queued, PriorityName(job.priority)));
  }
  if (queued_bytes_ > 0 && queued_bytes_ + job.held_bytes > limits_.max_queued_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the server is busy: queued jobs hold %.1f MiB and this one would take them over "
        "%.1f MiB (gpupiped --max-queued-mib); retry later",
        Mib(queued_bytes_), Mib(limits_.max_queued_bytes)));
  }
  const auto it = clients_.find(job.client);
  if (it == clients_.end()) return absl::OkStatus();
  const ClientCounts& own = it->second;
  if (own.jobs >= limits_.max_client_jobs) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("%s has %d jobs queued or running, the most one client may have (gpupiped "
                        "--max-client-jobs); wait for some to finish",
                        ClientName(job.client), own.jobs));
  }
  if (own.queued_bytes > 0 && own.queued_bytes + job.held_bytes > limits_.max_client_queued_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s has queued jobs holding %.1f MiB and this one would take them over %.1f MiB, the "
        "most one client's queued jobs may hold (gpupiped --max-client-queued-mib); wait for "
        "some to start",
        ClientName(job.client), Mib(own.queued_bytes), Mib(limits_.max_client_queued_bytes)));
  }
  if (job.upload && own.uploads >= limits_.max_client_uploads) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("%s has %d uploads in progress, the most one client may have (gpupiped "
                        "--max-client-uploads); wait for one to end",
                        ClientName(job.client), own.uploads));
  }
  return absl::OkStatus();
}

std::vector<Admission::ClientState> Admission::client_states() const {
  std::vector<ClientState> out;
  out.reserve(clients_.size());
  for (const auto& [name, counts] : clients_) {
    out.push_back({name, counts.jobs, counts.queued_bytes, counts.uploads});
  }
  return out;
}

void Admission::Queued(const AdmissionTicket& job) {
  ClientCounts& own = clients_[job.client];  // the one allocation, before anything changes
  ++queued_jobs_[Level(job.priority)];
  queued_bytes_ += job.held_bytes;
  ++own.jobs;
  own.queued_bytes += job.held_bytes;
  if (job.upload) ++own.uploads;
}

void Admission::Started(const AdmissionTicket& job) noexcept {
  --queued_jobs_[Level(job.priority)];
  queued_bytes_ -= job.held_bytes;
  // Queued made the client's entry, and it stays until the job has ended.
  if (const auto it = clients_.find(job.client); it != clients_.end()) {
    it->second.queued_bytes -= job.held_bytes;
  }
}

void Admission::Ended(const AdmissionTicket& job, bool started) noexcept {
  if (!started) Started(job);
  const auto it = clients_.find(job.client);
  if (it == clients_.end()) return;
  ClientCounts& own = it->second;
  --own.jobs;
  if (job.upload) --own.uploads;
  if (own.jobs == 0) clients_.erase(it);
}

}  // namespace gpupipe::engine
