#include "server/metrics/prometheus_text.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpupipe::metrics {
namespace {

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  // The shortest text that reads back as the same double: exact, and bucket bounds print as
  // written (le="0.1", not le="0.10000000000000001"), so queries that name them match.
  // Plain decimals across the range figures take (le="0.0001", not le="1e-04").
  char buf[64];
  const double magnitude = std::fabs(v);
  const bool plain = magnitude == 0 || (magnitude >= 1e-6 && magnitude < 1e15);
  const std::to_chars_result r =
      plain ? std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed)
            : std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string PriorityLabel(v1::Priority p) {
  switch (p) {
    case v1::PRIORITY_LOW:
      return "low";
    case v1::PRIORITY_HIGH:
      return "high";
    default:
      return "normal";
  }
}

// A proto map's entries in key order: the same scrape text for the same figures.
std::map<std::string, int64_t> Sorted(const google::protobuf::Map<std::string, int64_t>& map) {
  return {map.begin(), map.end()};
}

class Writer {
 public:
  // Starts a metric family: its HELP and TYPE lines.
  void Family(const std::string& name, const char* type, const std::string& help) {
    absl::StrAppend(&text_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  void Sample(const std::string& name, const std::string& labels, double value) {
    absl::StrAppend(&text_, name, labels.empty() ? "" : "{" + labels + "}", " ", Number(value),
                    "\n");
  }
  void Histogram(const std::string& name, const std::string& labels,
                 const v1::LatencyHistogram& h) {
    const std::string sep = labels.empty() ? "" : ",";
    int64_t cumulative = 0;
    for (int i = 0; i < h.counts_size(); ++i) {
      cumulative += h.counts(i);
      const std::string le =
          i < h.bounds_seconds_size() ? Number(h.bounds_seconds(i)) : std::string("+Inf");
      Sample(name + "_bucket", absl::StrCat(labels, sep, "le=\"", le, "\""),
             static_cast<double>(cumulative));
    }
    Sample(name + "_sum", labels, h.sum_seconds());
    Sample(name + "_count", labels, static_cast<double>(h.count()));
  }
  std::string Take() { return std::move(text_); }

 private:
  std::string text_;
};

}  // namespace

std::string EscapeLabel(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string RenderPrometheus(const v1::StatsResponse& stats) {
  Writer w;
  w.Family("gpupipe_info", "gauge", "The daemon: its version and the backend that serves.");
  w.Sample("gpupipe_info",
           absl::StrCat("version=\"", EscapeLabel(stats.server_version()), "\",backend=\"",
                        EscapeLabel(stats.backend()), "\""),
           1);
  w.Family("gpupipe_uptime_seconds", "gauge", "Seconds since the daemon started.");
  w.Sample("gpupipe_uptime_seconds", "", stats.uptime_seconds());
  // The name Prometheus's client libraries give this figure, so that dashboards built for
  // them find it.
  w.Family("process_cpu_seconds_total", "counter",
           "User and system CPU time the daemon's process has used, in seconds.");
  w.Sample("process_cpu_seconds_total", "", stats.process_cpu_seconds());

  const auto level = [](const v1::PriorityStats& p) {
    return absl::StrCat("priority=\"", PriorityLabel(p.priority()), "\"");
  };
  w.Family("gpupipe_jobs_total", "counter", "Jobs that ended, by priority and final status.");
  for (const v1::PriorityStats& p : stats.priorities()) {
    for (const auto& [status, n] : Sorted(p.jobs().by_status())) {
      w.Sample("gpupipe_jobs_total",
               absl::StrCat(level(p), ",status=\"", EscapeLabel(status), "\""),
               static_cast<double>(n));
    }
  }
  const struct {
    const char* name;
    const char* help;
    double (*value)(const v1::PriorityStats&);
  } counters[] = {
      {"gpupipe_input_bytes_total", "Input bytes of the jobs that ended.",
       [](const v1::PriorityStats& p) { return static_cast<double>(p.jobs().bytes_in()); }},
      {"gpupipe_output_bytes_total", "Output bytes of the jobs that ended.",
       [](const v1::PriorityStats& p) { return static_cast<double>(p.jobs().bytes_out()); }},
      {"gpupipe_device_seconds_total",
       "Device time (copies in, kernels, copies out) of the jobs that ended.",
       [](const v1::PriorityStats& p) { return p.jobs().device_seconds(); }},
  };
  for (const auto& c : counters) {
    w.Family(c.name, "counter", c.help);
    for (const v1::PriorityStats& p : stats.priorities()) w.Sample(c.name, level(p), c.value(p));
  }
  const struct {
    const char* name;
    const char* help;
    const v1::LatencyHistogram& (*histogram)(const v1::PriorityStats&);
  } histograms[] = {
      {"gpupipe_queue_wait_seconds", "Time from a job's acceptance until a lane took it.",
       [](const v1::PriorityStats& p) -> const v1::LatencyHistogram& { return p.queue_wait(); }},
      {"gpupipe_device_time_seconds", "A job's device time: copies in, kernels, copies out.",
       [](const v1::PriorityStats& p) -> const v1::LatencyHistogram& { return p.device_time(); }},
      {"gpupipe_job_duration_seconds",
       "Time from a job's acceptance until its whole result was on the host.",
       [](const v1::PriorityStats& p) -> const v1::LatencyHistogram& { return p.total_time(); }},
  };
  for (const auto& h : histograms) {
    w.Family(h.name, "histogram", h.help);
    for (const v1::PriorityStats& p : stats.priorities())
      w.Histogram(h.name, level(p), h.histogram(p));
  }
  const struct {
    const char* name;
    const char* help;
    int32_t (v1::PriorityStats::*value)() const;
  } gauges[] = {
      {"gpupipe_queued_jobs", "Jobs accepted and waiting for a lane.", &v1::PriorityStats::queued},
      {"gpupipe_lanes", "Lanes (streams with their buffers).", &v1::PriorityStats::lanes},
      {"gpupipe_lanes_busy", "Lanes running a job.", &v1::PriorityStats::running},
  };
  for (const auto& g : gauges) {
    w.Family(g.name, "gauge", g.help);
    for (const v1::PriorityStats& p : stats.priorities()) {
      w.Sample(g.name, level(p), static_cast<double>((p.*g.value)()));
    }
  }
  w.Family("gpupipe_pool_used_bytes", "gauge", "Memory of a pool in use.");
  for (const v1::PoolStats& pool : stats.pools()) {
    w.Sample("gpupipe_pool_used_bytes", absl::StrCat("pool=\"", EscapeLabel(pool.name()), "\""),
             static_cast<double>(pool.used_bytes()));
  }
  w.Family("gpupipe_pool_capacity_bytes", "gauge", "Memory of a pool, in use or not.");
  for (const v1::PoolStats& pool : stats.pools()) {
    w.Sample("gpupipe_pool_capacity_bytes", absl::StrCat("pool=\"", EscapeLabel(pool.name()), "\""),
             static_cast<double>(pool.capacity_bytes()));
  }
  const v1::GraphCacheStats& g = stats.graph_cache();
  w.Family("gpupipe_graph_cache_lookups_total", "counter", "CUDA graph cache lookups, by outcome.");
  w.Sample("gpupipe_graph_cache_lookups_total", "outcome=\"hit\"", static_cast<double>(g.hits()));
  w.Sample("gpupipe_graph_cache_lookups_total", "outcome=\"update\"",
           static_cast<double>(g.updates()));
  w.Sample("gpupipe_graph_cache_lookups_total", "outcome=\"miss\"",
           static_cast<double>(g.misses()));
  w.Family("gpupipe_graph_cache_evictions_total", "counter", "CUDA graphs evicted.");
  w.Sample("gpupipe_graph_cache_evictions_total", "", static_cast<double>(g.evictions()));
  w.Family("gpupipe_graph_cache_entries", "gauge", "CUDA graphs cached.");
  w.Sample("gpupipe_graph_cache_entries", "", static_cast<double>(g.entries()));
  const v1::BatchStats& b = stats.batching();
  w.Family("gpupipe_batches_total", "counter",
           "Launches that served several jobs at once (dynamic batching).");
  w.Sample("gpupipe_batches_total", "", static_cast<double>(b.batches()));
  w.Family("gpupipe_batched_jobs_total", "counter", "Jobs that ran in such a batch.");
  w.Sample("gpupipe_batched_jobs_total", "", static_cast<double>(b.batched_jobs()));
  w.Family("gpupipe_direct_runs_total", "counter",
           "Small jobs that ran on the thread that received them, without a lane hand-off.");
  w.Sample("gpupipe_direct_runs_total", "", static_cast<double>(stats.direct_runs()));
  w.Family("gpupipe_uploads_in_progress", "gauge", "Run uploads whose job has not ended.");
  w.Sample("gpupipe_uploads_in_progress", "", static_cast<double>(stats.uploads_in_progress()));
  w.Family("gpupipe_rejected_total", "counter",
           "Calls refused before a job existed, by reason (a status or the limit's flag).");
  for (const auto& [reason, n] : Sorted(stats.rejected())) {
    w.Sample("gpupipe_rejected_total", absl::StrCat("reason=\"", EscapeLabel(reason), "\""),
             static_cast<double>(n));
  }
  return w.Take();
}

}  // namespace gpupipe::metrics
