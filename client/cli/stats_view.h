// Text and JSON renderings of a daemon's StatsResponse (`gpupipe stats`). Pure: no I/O.
// Thread-safe.
#ifndef GPUPIPE_CLIENT_CLI_STATS_VIEW_H_
#define GPUPIPE_CLIENT_CLI_STATS_VIEW_H_

#include <string>

#include "gpupipe/v1/gpupipe.pb.h"
#include "nlohmann/json.hpp"

namespace gpupipe {
namespace cli {

// The q-quantile (0 < q < 1) of a latency histogram in seconds, interpolated linearly inside
// its bucket as Prometheus' histogram_quantile does; a quantile that falls in the last,
// unbounded bucket is reported as the last bound. -1 when the histogram is empty.
double HistogramQuantile(const v1::LatencyHistogram& histogram, double q);

// "12.5 s", "3 min 20 s", "2 h 5 min", "3 d 4 h".
std::string FormatUptime(double seconds);

// The human view, several lines each ending in '\n':
//   server    gpupiped 0.9.0 (backend cuda), up 2 min 0 s, 1 upload in progress
//   priority  priority  lanes  busy  queued  ended  ok  failed  wait p50  wait p99 ...
//   clients   client  active  uploads  queued  ended  ok  failed  in  out
//   pools     input_rings  used 12.0 MiB of 64.0 MiB
//   graphs    hits 3, updates 1, misses 2, evictions 0, entries 2 of 64
//   rejected  max-client-jobs 3, unauthenticated 1
std::string RenderStatsText(const v1::StatsResponse& stats);

// {"status":"ok","backend","server_version","uptime_seconds","uploads_in_progress",
//  "priorities":[{"priority":"normal","lanes","running","queued","jobs":{...},
//                 "queue_wait":{"count","sum_seconds","p50_seconds","p99_seconds",
//                               "buckets":[{"le_seconds","count"}]}, "device_time", "total_time"}],
//  "clients":[{"client","active_jobs","uploads","queued_bytes","jobs":{...}}],
//  "pools":[{"name","used_bytes","capacity_bytes"}], "graph_cache":{...}, "rejected":{...}}
// where "jobs" is {"ended","by_status":{"OK":n,...},"bytes_in","bytes_out","device_seconds"}.
// Numbers are JSON numbers; a bucket's "le_seconds" is null for the last, unbounded one.
nlohmann::ordered_json StatsJson(const v1::StatsResponse& stats);

}  // namespace cli
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_CLI_STATS_VIEW_H_
