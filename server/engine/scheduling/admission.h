// Admission: how many jobs the engine lets wait and run at once, in total, per priority level
// and per client, so that no client (careless or hostile) can fill the queue for the others or
// pin the daemon's memory. A client is whatever JobSpec::client names (the RPC layer sets its
// authenticated identity or peer address); each limit refused names itself and its flag.
//
// Thread safety: none; the engine holds its ledger lock (Engine::Impl::ledger_mu_) around every
// call.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "server/engine/job/types.h"

namespace gpupipe::engine {

struct AdmissionLimits {
  // Jobs queued (accepted, waiting for a lane) per priority level: a flood at one level never
  // refuses another level's jobs.
  int max_queued_jobs = 1024;
  // Memory the queued jobs of all levels hold: a Submit's input, an upload's input ring. A job
  // that finds the queue empty is admitted whatever its size (its input limit bounds it).
  int64_t max_queued_bytes = int64_t{2} << 30;
  // Per client, over all levels: jobs queued or running, ...
  int max_client_jobs = 256;
  // ... the memory its queued jobs hold (as above, a first job always fits), ...
  int64_t max_client_queued_bytes = int64_t{512} << 20;
  // ... and its Run uploads in progress (accepted and not yet ended).
  int max_client_uploads = 4;
};

// A client's name in a refusal's message: "client 'NAME'", or what an anonymous client is.
std::string ClientName(const std::string& client);

// One job as admission counts it.
struct AdmissionTicket {
  std::string client;
  Priority priority = Priority::kNormal;
  int64_t held_bytes = 0;  // what its input holds while it waits
  bool upload = false;
};

class Admission {
 public:
  explicit Admission(AdmissionLimits limits) : limits_(limits) {}

  const AdmissionLimits& limits() const { return limits_; }

  // OK when `job` may be queued now; RESOURCE_EXHAUSTED naming the limit otherwise.
  absl::Status Check(const AdmissionTicket& job) const;
  // The job was queued, left the queue for a lane, and ended (`started`: it had left the
  // queue; a job dropped from the queue at shutdown had not). Queued may fail to allocate, and
  // then throws having changed nothing; Ended(job, false) undoes it. The others allocate
  // nothing: the engine calls them where a failure would leave a job half-moved.
  void Queued(const AdmissionTicket& job);
  void Started(const AdmissionTicket& job) noexcept;
  void Ended(const AdmissionTicket& job, bool started) noexcept;

  int queued_jobs(Priority priority) const { return queued_jobs_[Level(priority)]; }
  int64_t queued_bytes() const { return queued_bytes_; }
  // Clients with jobs queued or running.
  size_t active_clients() const { return clients_.size(); }

  // One client with jobs queued or running, as admission counts it.
  struct ClientState {
    std::string client;
    int jobs = 0;  // queued or running
    int64_t queued_bytes = 0;
    int uploads = 0;
  };
  std::vector<ClientState> client_states() const;

 private:
  struct ClientCounts {
    int jobs = 0;
    int64_t queued_bytes = 0;
    int uploads = 0;
  };
  static size_t Level(Priority p) { return static_cast<size_t>(p); }

  AdmissionLimits limits_;
  std::unordered_map<std::string, ClientCounts> clients_;  // only clients with jobs
  std::array<int, kPriorityLevels> queued_jobs_{};
  int64_t queued_bytes_ = 0;
};

}  // namespace gpupipe::engine
