#include "client/bench/job_issuer.h"

#include <mutex>
#include <optional>
#include <string>

namespace gpupipe {
namespace bench {

struct JobIssuer::State {
  std::vector<client::JobClient*> clients;
  // Shared with the jobs in flight, so that sending one copies nothing; each asks for compact
  // events, as the client library would make it.
  std::vector<std::vector<std::shared_ptr<const v1::SubmitRequest>>> requests;
  std::mutex mu;
  // The first result of each input: references[e][v].
  std::vector<std::vector<std::optional<std::string>>> references;
};

JobIssuer::JobIssuer(std::vector<client::JobClient*> clients,
                     std::vector<std::vector<v1::SubmitRequest>> requests)
    : state_(std::make_shared<State>()) {
  state_->clients = std::move(clients);
  for (std::vector<v1::SubmitRequest>& variants : requests) {
    auto& shared = state_->requests.emplace_back();
    for (v1::SubmitRequest& request : variants) {
      request.set_compact_events(true);
      shared.push_back(std::make_shared<const v1::SubmitRequest>(std::move(request)));
    }
    state_->references.emplace_back(variants.size());
  }
}

JobIssuer::~JobIssuer() = default;

Outcome OutcomeOf(const absl::StatusOr<client::JobResult>& result) {
  Outcome outcome;
  if (!result.ok()) {
    outcome.error = std::string(result.status().message());
    return outcome;
  }
  outcome.ok = true;
  const v1::Timing& t = result->timing;
  outcome.accept_us = t.accept_us();
  outcome.queue_us = t.queue_us();
  outcome.device_us = t.h2d_us() + t.compute_us() + t.d2h_us();
  outcome.server_us = t.total_us() + t.result_stream_us();
  outcome.kernels = t.kernels();
  outcome.batch_jobs = t.batch_jobs() > 0 ? t.batch_jobs() : 1;
  outcome.stream = t.stream();
  outcome.daemon = result->peer;
  return outcome;
}

Issuer JobIssuer::issuer() {
  std::shared_ptr<State> state = state_;
  return [state](int64_t n, int entry, std::function<void(Outcome)> done) {
    const auto& variants = state->requests[static_cast<size_t>(entry)];
    const size_t variant = static_cast<size_t>(n) % variants.size();
    client::JobClient* client = state->clients[static_cast<size_t>(n) % state->clients.size()];
    client->SubmitAsync(variants[variant], [state, entry, variant, done = std::move(done)](
                                               absl::StatusOr<client::JobResult> result) {
      Outcome outcome = OutcomeOf(result);
      if (outcome.ok) {
        const std::string& bytes = result->output.data();
        std::lock_guard<std::mutex> lock(state->mu);
        std::optional<std::string>& reference =
            state->references[static_cast<size_t>(entry)][variant];
        if (!reference.has_value()) {
          reference = bytes;
        } else if (*reference != bytes) {
          outcome.mismatch = true;
        }
      }
      done(std::move(outcome));
    });
  };
}

}  // namespace bench
}  // namespace gpupipe
