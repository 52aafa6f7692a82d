// CPU time a request costs each end of a load: this process (the client side of `gpupipe
// bench`) and the server's process, read as the load's measured window begins and ends
// (LoadConfig::at_window_start and at_window_end) and divided by the requests the window
// completed. The server's figure comes from a function: the daemon's GetStats, or /proc for the
// echo floor's process.
//
// Thread-safety: Attach's hooks run on RunLoad's thread (the server's reading at the start on a
// thread of its own, joined at the end); read the figures after RunLoad returns.
#ifndef GPUPIPE_CLIENT_BENCH_CPU_METER_H_
#define GPUPIPE_CLIENT_BENCH_CPU_METER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <thread>

#include "client/bench/load_driver.h"

namespace gpupipe {
namespace bench {

class CpuMeter {
 public:
  // `server_cpu_seconds` returns the server process's CPU seconds so far, or nullopt where it
  // cannot tell; empty: the server's side is not measured.
  explicit CpuMeter(std::function<std::optional<double>()> server_cpu_seconds = {})
      : server_cpu_seconds_(std::move(server_cpu_seconds)) {}
  ~CpuMeter();
  CpuMeter(const CpuMeter&) = delete;
  CpuMeter& operator=(const CpuMeter&) = delete;

  // Sets `config`'s window hooks to read both ends. One load per Attach.
  void Attach(LoadConfig& config);

  // Microseconds of CPU per request, over `requests` completed in the window; nullopt where
  // a reading is missing or there were no requests.
  std::optional<double> client_us(int64_t requests) const;
  std::optional<double> server_us(int64_t requests) const;

 private:
  static std::optional<double> PerRequest(std::optional<double> start, std::optional<double> end,
                                          int64_t requests);

  std::function<std::optional<double>()> server_cpu_seconds_;
  std::thread server_start_reader_;  // the server's reading at the window's start
  std::optional<double> client_start_, client_end_, server_start_, server_end_;
};

}  // namespace bench
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_BENCH_CPU_METER_H_
