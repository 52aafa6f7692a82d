#include "client/bench/cpu_meter.h"

#include "common/process_cpu.h"

namespace gpupipe {
namespace bench {

void CpuMeter::Attach(LoadConfig& config) {
  client_start_ = client_end_ = server_start_ = server_end_ = std::nullopt;
  // The server is asked before the client's reading at the start and after it at the end, so
  // the client's CPU for asking (a GetStats call) falls outside the client's window; the
  // server's for answering falls inside its own, one call among thousands.
  config.at_window_start = [this] {
    if (server_cpu_seconds_) server_start_ = server_cpu_seconds_();
    client_start_ = ProcessCpuSeconds();
  };
  config.at_window_end = [this] {
    client_end_ = ProcessCpuSeconds();
    if (server_cpu_seconds_) server_end_ = server_cpu_seconds_();
  };
}

std::optional<double> CpuMeter::PerRequest(std::optional<double> start, std::optional<double> end,
                                           int64_t requests) {
  if (!start || !end || requests <= 0 || *end < *start) return std::nullopt;
  return (*end - *start) * 1e6 / static_cast<double>(requests);
}

std::optional<double> CpuMeter::client_us(int64_t requests) const {
  return PerRequest(client_start_, client_end_, requests);
}

std::optional<double> CpuMeter::server_us(int64_t requests) const {
  return PerRequest(server_start_, server_end_, requests);
}

}  // namespace bench
}  // namespace gpupipe
