#include "server/rpc/unread_results.h"

#include "absl/strings/str_format.h"
#include "server/engine/scheduling/admission.h"

namespace gpupipe::rpc {
namespace {

using engine::ClientName;

double Mib(int64_t bytes) { return static_cast<double>(bytes) / double(1 << 20); }

}  // namespace

absl::Status UnreadResults::Check(const std::string& client) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (total_ == 0) return absl::OkStatus();
  const auto it = clients_.find(client);
  const int64_t own = it == clients_.end() ? 0 : it->second;
  if (own >= limits_.max_client_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s has %.1f MiB of results its calls have not read, at or over the %.1f MiB one client "
        "may leave unread (gpupiped --max-client-unread-mib); read them before sending more jobs",
        ClientName(client), Mib(own), Mib(limits_.max_client_bytes)));
  }
  if (own > 0 && total_ >= limits_.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s has %.1f MiB of results its calls have not read, and all clients together %.1f "
        "MiB, at or over the %.1f MiB the server holds (gpupiped --max-unread-mib); read them "
        "before sending more jobs",
        ClientName(client), Mib(own), Mib(total_), Mib(limits_.max_bytes)));
  }
  return absl::OkStatus();
}

void UnreadResults::Hold(const std::string& client, int64_t bytes) {
  if (bytes <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  clients_[client] += bytes;
  total_ += bytes;
}

void UnreadResults::Release(const std::string& client, int64_t bytes) {
  if (bytes <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = clients_.find(client);
  if (it == clients_.end()) return;
  it->second -= bytes;
  total_ -= bytes;
  if (it->second <= 0) clients_.erase(it);
}

int64_t UnreadResults::total_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

std::vector<std::pair<std::string, int64_t>> UnreadResults::clients() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {clients_.begin(), clients_.end()};
}

}  // namespace gpupipe::rpc
