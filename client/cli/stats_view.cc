#include "client/cli/stats_view.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/proto_json.h"
#include "client/cli/render.h"
#include "client/enum_names.h"

namespace gpupipe {
namespace cli {
namespace {

int64_t Ended(const v1::JobCounts& jobs) {
  int64_t n = 0;
  for (const auto& [status, count] : jobs.by_status()) n += count;
  return n;
}

int64_t Ok(const v1::JobCounts& jobs) {
  const auto it = jobs.by_status().find("OK");
  return it == jobs.by_status().end() ? 0 : it->second;
}

// "-" for an empty histogram, else the quantile as FormatMicros does ("> 30.0 s" beyond the
// last bound).
std::string Quantile(const v1::LatencyHistogram& h, double q) {
  const double s = HistogramQuantile(h, q);
  if (s < 0) return "-";
  const int bounds = h.bounds_seconds_size();
  if (bounds > 0 && s >= h.bounds_seconds(bounds - 1)) {
    // Whether the quantile lies past the last bound: the jobs up to it are fewer than q.
    int64_t below = 0;
    for (int i = 0; i < bounds && i < h.counts_size(); ++i) below += h.counts(i);
    if (below < q * h.count()) return "> " + FormatMicros(s * 1e6);
  }
  return FormatMicros(s * 1e6);
}

// The counts as ProtoJson writes them, after the jobs that ended in all.
nlohmann::ordered_json CountsJson(const v1::JobCounts& jobs) {
  nlohmann::ordered_json out = {{"ended", Ended(jobs)}};
  out.update(ProtoJson(jobs));
  return out;
}

nlohmann::ordered_json HistogramJson(const v1::LatencyHistogram& h) {
  const auto quantile = [&](double q) -> nlohmann::ordered_json {
    const double s = HistogramQuantile(h, q);
    return s < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s);
  };
  nlohmann::ordered_json buckets = nlohmann::ordered_json::array();
  for (int i = 0; i < h.counts_size(); ++i) {
    buckets.push_back(
        {{"le_seconds", i < h.bounds_seconds_size() ? nlohmann::ordered_json(h.bounds_seconds(i))
                                                    : nlohmann::ordered_json(nullptr)},
         {"count", h.counts(i)}});
  }
  return {{"count", h.count()},
          {"sum_seconds", h.sum_seconds()},
          {"p50_seconds", quantile(0.5)},
          {"p99_seconds", quantile(0.99)},
          {"buckets", buckets}};
}

// A table indented by the label column, with `label` written into the first line's indent.
std::string Labeled(const std::string& label, const std::string& table) {
  return label + table.substr(std::min(label.size(), table.size()));
}

std::string PriorityName(v1::Priority p) {
  return client::ShortEnumName(*v1::Priority_descriptor(), p);
}

}  // namespace

std::string FormatUptime(double seconds) {
  if (seconds < 60) return absl::StrFormat("%.1f s", seconds);
  const int64_t s = static_cast<int64_t>(seconds);
  if (s < 3600) return absl::StrFormat("%d min %d s", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%d h %d min", s / 3600, s % 3600 / 60);
  return absl::StrFormat("%d d %d h", s / 86400, s % 86400 / 3600);
}

double HistogramQuantile(const v1::LatencyHistogram& h, double q) {
  if (h.count() <= 0 || h.counts_size() == 0) return -1;
  const double rank = q * static_cast<double>(h.count());
  int64_t below = 0;
  for (int i = 0; i < h.counts_size(); ++i) {
    const int64_t in_bucket = h.counts(i);
    if (static_cast<double>(below + in_bucket) >= rank && in_bucket > 0) {
      if (i >= h.bounds_seconds_size()) {
        return h.bounds_seconds_size() > 0 ? h.bounds_seconds(h.bounds_seconds_size() - 1) : -1;
      }
      const double lower = i == 0 ? 0.0 : h.bounds_seconds(i - 1);
      const double upper = h.bounds_seconds(i);
      const double fraction = (rank - static_cast<double>(below)) / static_cast<double>(in_bucket);
      return lower + (upper - lower) * std::clamp(fraction, 0.0, 1.0);
    }
    below += in_bucket;
  }
  return h.bounds_seconds_size() > 0 ? h.bounds_seconds(h.bounds_seconds_size() - 1) : -1;
}

std::string RenderStatsText(const v1::StatsResponse& s) {
  std::string text;
  text += Line("server",
               absl::StrCat(s.server_version().empty() ? "gpupiped" : s.server_version(),
                            " (backend ", s.backend(), "), up ", FormatUptime(s.uptime_seconds()),
                            // A daemon older than the field reports none.
                            s.process_cpu_seconds() > 0
                                ? absl::StrFormat(", %.1f s of CPU", s.process_cpu_seconds())
                                : std::string(),
                            ", ", s.uploads_in_progress(),
                            s.uploads_in_progress() == 1 ? " upload" : " uploads", " in progress"));

  std::vector<std::vector<std::string>> rows = {
      {"priority", "lanes", "busy", "queued", "ended", "ok", "failed", "wait p50", "wait p99",
       "device p50", "total p50", "total p99", "in", "out"}};
  for (const v1::PriorityStats& p : s.priorities()) {
    const int64_t ended = Ended(p.jobs());
    const int64_t ok = Ok(p.jobs());
    rows.push_back({PriorityName(p.priority()), absl::StrCat(p.lanes()), absl::StrCat(p.running()),
                    absl::StrCat(p.queued()), absl::StrCat(ended), absl::StrCat(ok),
                    absl::StrCat(ended - ok), Quantile(p.queue_wait(), 0.5),
                    Quantile(p.queue_wait(), 0.99), Quantile(p.device_time(), 0.5),
                    Quantile(p.total_time(), 0.5), Quantile(p.total_time(), 0.99),
                    FormatBytes(p.jobs().bytes_in()), FormatBytes(p.jobs().bytes_out())});
  }
  text += Labeled("jobs", FormatTable(rows,
                                      {false, true, true, true, true, true, true, true, true, true,
                                       true, true, true, true},
                                      kLabelWidth));

  if (s.clients_size() == 0) {
    text += Line("clients", "none yet");
  } else {
    std::vector<std::vector<std::string>> clients = {
        {"client", "active", "uploads", "queued", "unread", "ended", "ok", "failed", "in", "out"}};
    for (const v1::ClientStats& c : s.clients()) {
      const int64_t ended = Ended(c.jobs());
      const int64_t ok = Ok(c.jobs());
      clients.push_back({c.client(), absl::StrCat(c.active_jobs()), absl::StrCat(c.uploads()),
                         FormatBytes(c.queued_bytes()), FormatBytes(c.unread_bytes()),
                         absl::StrCat(ended), absl::StrCat(ok),
                         absl::StrCat(ended - ok), FormatBytes(c.jobs().bytes_in()),
                         FormatBytes(c.jobs().bytes_out())});
    }
    text += Labeled(
        "clients",
        FormatTable(clients, {false, true, true, true, true, true, true, true, true, true},
                    kLabelWidth));
  }

  bool first = true;
  for (const v1::PoolStats& pool : s.pools()) {
    text += Line(first ? "pools" : "",
                 absl::StrCat(pool.name(), "  used ", FormatBytes(pool.used_bytes()), " of ",
                              FormatBytes(pool.capacity_bytes())));
    first = false;
  }
  const v1::GraphCacheStats& g = s.graph_cache();
  text += Line("graphs", absl::StrCat("hits ", g.hits(), ", updates ", g.updates(), ", misses ",
                                      g.misses(), ", evictions ", g.evictions(), ", entries ",
                                      g.entries(), " of ", g.capacity()));
  const v1::BatchStats& b = s.batching();
  text += Line("batches", b.batches() == 0
                              ? std::string("none")
                              : absl::StrFormat("%d, serving %d jobs (%.1f a batch, largest %d)",
                                                b.batches(), b.batched_jobs(),
                                                static_cast<double>(b.batched_jobs()) /
                                                    static_cast<double>(b.batches()),
                                                b.largest()));
  text += Line("direct runs", absl::StrCat(s.direct_runs()));
  std::vector<std::pair<std::string, int64_t>> rejected(s.rejected().begin(), s.rejected().end());
  std::sort(rejected.begin(), rejected.end());
  std::vector<std::string> parts;
  for (const auto& [reason, n] : rejected) parts.push_back(absl::StrCat(reason, " ", n));
  text += Line("rejected", parts.empty() ? "none" : absl::StrJoin(parts, ", "));
  return text;
}

nlohmann::ordered_json StatsJson(const v1::StatsResponse& s) {
  nlohmann::ordered_json out = {{"status", "ok"}};
  out.update(ProtoJson(s));
  // What the messages leave to the reader: the jobs that ended in all, and each histogram as
  // buckets with its quantiles rather than two parallel lists.
  for (int i = 0; i < s.priorities_size(); ++i) {
    const v1::PriorityStats& p = s.priorities(i);
    nlohmann::ordered_json& level = out["priorities"][static_cast<size_t>(i)];
    level["jobs"] = CountsJson(p.jobs());
    level["queue_wait"] = HistogramJson(p.queue_wait());
    level["device_time"] = HistogramJson(p.device_time());
    level["total_time"] = HistogramJson(p.total_time());
  }
  for (int i = 0; i < s.clients_size(); ++i) {
    out["clients"][static_cast<size_t>(i)]["jobs"] = CountsJson(s.clients(i).jobs());
  }
  return out;
}

}  // namespace cli
}  // namespace gpupipe
