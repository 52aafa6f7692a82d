// What `gpupipe bench` reports: per load point (a concurrency or a rate), a summary of the job
// service and of its echo floor measured in the same run, as a table, JSON or CSV.
//
// Pure: no I/O. Thread-safe.
#ifndef GPUPIPE_CLIENT_BENCH_BENCH_REPORT_H_
#define GPUPIPE_CLIENT_BENCH_BENCH_REPORT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "client/bench/load_driver.h"
#include "nlohmann/json.hpp"

namespace gpupipe {
namespace bench {

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
};
// Nearest-rank percentiles of `values` (all zero when empty).
Percentiles PercentilesOf(std::vector<double> values);

struct EntrySummary {
  std::string label;
  int64_t requests = 0;  // that succeeded
  Percentiles latency_us;
  double queue_us = 0, server_us = 0;  // medians, from the jobs' Timing (gpupipe only)
};

struct ServiceSummary {
  std::string service;   // "gpupipe" or "echo"
  int64_t requests = 0;  // completed in the window, failed ones included
  int64_t errors = 0;
  int64_t mismatches = 0;
  int64_t missed = 0;  // open loop: not sent
  int64_t sent = 0;    // requests sent, warm-up included (LoadResult::sent)
  double seconds = 0;
  double throughput = 0;   // successful requests per second
  Percentiles latency_us;  // of successful requests, at the client
  // Medians over successful jobs, from their Timing (gpupipe only): queue, device, the server's
  // whole time, and the rest of the client's latency (transport, both ends' RPC work).
  // Accept: the daemon's work on the request before the job was accepted.
  double accept_us = 0, queue_us = 0, device_us = 0, server_us = 0, transport_us = 0;
  // CPU per request completed in the window (CpuMeter): this process's, and the server's (the
  // daemon's, the echo floor's); nullopt where not measured.
  std::optional<double> client_cpu_us, server_cpu_us;
  double kernels_per_job = 0;         // kernels launched per job (a batch's shared among its jobs)
  double batched_fraction = 0;        // of jobs that shared a launch
  double mean_batch_jobs = 0;         // jobs per launch, over jobs
  std::vector<EntrySummary> entries;  // per mix entry
  std::map<std::string, int64_t> error_messages;  // the most common, counted
  std::map<std::string, int64_t> lanes;           // jobs per lane (Timing.stream)
  // Successful jobs per daemon (Outcome::daemon, its address as gRPC names the peer); they sum
  // to requests - errors (gpupipe only).
  std::map<std::string, int64_t> daemons;
};

// Summarizes one load of `service`; `labels[e]` names mix entry e.
ServiceSummary Summarize(const std::string& service, const LoadResult& result,
                         const std::vector<std::string>& labels);

struct BenchPoint {
  int concurrency = 0;  // closed loop
  double rate = 0;      // open loop (requests per second)
  ServiceSummary gpupipe;
  std::optional<ServiceSummary> echo;
  std::optional<ServiceSummary> echo_stream;  // the floor as a streaming call
};

struct BenchReport {
  std::string target;
  std::string backend;
  std::string server_version;
  int channels = 0;
  bool balanced = false;  // the target names several daemons: the table shows each one's jobs
  double warmup_seconds = 0;
  double duration_seconds = 0;
  std::vector<std::string> mix;  // entry labels, with weights
  std::vector<BenchPoint> points;
};

nlohmann::json ReportJson(const BenchReport& report);
// One header line, then one line per point and service.
std::string ReportCsv(const BenchReport& report);
// A table for a terminal.
std::string ReportText(const BenchReport& report);

}  // namespace bench
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_BENCH_BENCH_REPORT_H_
