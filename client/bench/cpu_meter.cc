#include "client/bench/cpu_meter.h"

#include "common/process_cpu.h"

namespace gpupipe {
namespace bench {

CpuMeter::~CpuMeter() {
  if (server_start_reader_.joinable()) server_start_reader_.join();
}

void CpuMeter::Attach(LoadConfig& config) {
  if (server_start_reader_.joinable()) server_start_reader_.join();
  client_start_ = client_end_ = server_start_ = server_end_ = std::nullopt;
  // The server's reading at the start may be a call (GetStats) that takes a while: it runs on
  // a thread of its own, since an open loop sends its requests from the hook's thread. Its
  // cost on either side is one call among the window's thousands.
  config.at_window_start = [this] {
    if (server_cpu_seconds_) {
      server_start_reader_ = std::thread([this] { server_start_ = server_cpu_seconds_(); });
    }
    client_start_ = ProcessCpuSeconds();
  };
  config.at_window_end = [this] {
    client_end_ = ProcessCpuSeconds();
    if (server_start_reader_.joinable()) server_start_reader_.join();
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
