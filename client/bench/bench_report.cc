#include "client/bench/bench_report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace gpupipe {
namespace bench {
namespace {

double Median(std::vector<double> values) { return PercentilesOf(std::move(values)).p50; }

nlohmann::json PercentilesJson(const Percentiles& p) {
  return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"max", p.max}, {"mean", p.mean}};
}

nlohmann::json SummaryJson(const ServiceSummary& s) {
  nlohmann::json j = {{"requests", s.requests},
                      {"errors", s.errors},
                      {"mismatches", s.mismatches},
                      {"missed", s.missed},
                      {"sent", s.sent},
                      {"seconds", s.seconds},
                      {"throughput", s.throughput},
                      {"latency_us", PercentilesJson(s.latency_us)}};
  const auto optional = [](const std::optional<double>& v) -> nlohmann::json {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  j["cpu_us_per_request"] = {{"client", optional(s.client_cpu_us)},
                             {"server", optional(s.server_cpu_us)}};
  if (s.service == "gpupipe") {
    j["breakdown_us"] = {{"accept", s.accept_us},
                         {"queue", s.queue_us},
                         {"device", s.device_us},
                         {"server", s.server_us},
                         {"transport", s.transport_us}};
    j["kernels_per_job"] = s.kernels_per_job;
    j["batched_fraction"] = s.batched_fraction;
    j["mean_batch_jobs"] = s.mean_batch_jobs;
    j["lanes"] = s.lanes;
    j["daemons"] = s.daemons;
  }
  nlohmann::json entries = nlohmann::json::array();
  for (const EntrySummary& e : s.entries) {
    nlohmann::json entry = {{"entry", e.label},
                             {"requests", e.requests},
                             {"latency_us", PercentilesJson(e.latency_us)}};
    if (s.service == "gpupipe") {
      entry["queue_us"] = e.queue_us;
      entry["server_us"] = e.server_us;
    }
    entries.push_back(std::move(entry));
  }
  j["entries"] = entries;
  j["error_messages"] = s.error_messages;
  return j;
}

// "ipv4:10.0.0.7:50051<is>102<sep>ipv4:10.0.0.8:50051<is>99".
std::string DaemonCounts(const ServiceSummary& s, const char* is, const char* sep) {
  return absl::StrJoin(s.daemons, sep, [is](std::string* out, const auto& daemon) {
    absl::StrAppend(out, daemon.first, is, daemon.second);
  });
}

// A CPU figure in whole microseconds, or `missing`.
std::string CpuText(const std::optional<double>& us, const char* missing = "") {
  return us ? absl::StrFormat("%.0f", *us) : std::string(missing);
}

std::string LoadName(const BenchPoint& p) {
  return p.rate > 0 ? absl::StrFormat("rate %g/s", p.rate)
                    : absl::StrCat("concurrency ", p.concurrency);
}

}  // namespace

Percentiles PercentilesOf(std::vector<double> values) {
  Percentiles p;
  if (values.empty()) return p;
  std::sort(values.begin(), values.end());
  const auto rank = [&](double q) {
    const size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
    return values[std::min(values.size() - 1, i == 0 ? 0 : i - 1)];
  };
  p.p50 = rank(0.50);
  p.p90 = rank(0.90);
  p.p99 = rank(0.99);
  p.max = values.back();
  double sum = 0;
  for (double v : values) sum += v;
  p.mean = sum / static_cast<double>(values.size());
  return p;
}

ServiceSummary Summarize(const std::string& service, const LoadResult& result,
                         const std::vector<std::string>& labels) {
  ServiceSummary s;
  s.service = service;
  s.requests = static_cast<int64_t>(result.samples.size());
  s.missed = result.missed;
  s.sent = result.sent;
  s.seconds = result.seconds;
  std::vector<double> latency, accept, queue, device, server, transport;
  std::vector<std::vector<double>> by_entry(labels.size());
  std::vector<std::vector<double>> entry_queue(labels.size()), entry_server(labels.size());
  double kernels = 0, batch_jobs = 0;
  int64_t batched = 0;
  for (const Sample& sample : result.samples) {
    const Outcome& o = sample.outcome;
    if (o.mismatch) ++s.mismatches;
    if (!o.ok) {
      ++s.errors;
      ++s.error_messages[o.error.substr(0, 160)];
      continue;
    }
    latency.push_back(sample.latency_us);
    if (!o.daemon.empty()) ++s.daemons[o.daemon];
    if (sample.entry >= 0 && static_cast<size_t>(sample.entry) < by_entry.size()) {
      by_entry[static_cast<size_t>(sample.entry)].push_back(sample.latency_us);
    }
    if (service != "gpupipe") continue;
    if (sample.entry >= 0 && static_cast<size_t>(sample.entry) < by_entry.size()) {
      entry_queue[static_cast<size_t>(sample.entry)].push_back(o.queue_us);
      entry_server[static_cast<size_t>(sample.entry)].push_back(o.server_us);
    }
    accept.push_back(o.accept_us);
    queue.push_back(o.queue_us);
    device.push_back(o.device_us);
    server.push_back(o.server_us);
    transport.push_back(std::max(0.0, sample.latency_us - o.server_us - o.accept_us));
    const int jobs = std::max(o.batch_jobs, 1);
    kernels += static_cast<double>(o.kernels) / jobs;
    batch_jobs += jobs;
    if (jobs > 1) ++batched;
    if (!o.stream.empty()) ++s.lanes[o.stream];
  }
  // Only the most common error messages: a failing run should not print thousands.
  while (s.error_messages.size() > 5) {
    auto least = std::min_element(s.error_messages.begin(), s.error_messages.end(),
                                  [](const auto& a, const auto& b) { return a.second < b.second; });
    s.error_messages.erase(least);
  }
  const double ok = static_cast<double>(latency.size());
  s.throughput = s.seconds > 0 ? ok / s.seconds : 0;
  s.latency_us = PercentilesOf(latency);
  if (service == "gpupipe" && ok > 0) {
    s.accept_us = Median(accept);
    s.queue_us = Median(queue);
    s.device_us = Median(device);
    s.server_us = Median(server);
    s.transport_us = Median(transport);
    s.kernels_per_job = kernels / ok;
    s.batched_fraction = static_cast<double>(batched) / ok;
    s.mean_batch_jobs = batch_jobs / ok;
  }
  for (size_t e = 0; e < labels.size(); ++e) {
    EntrySummary entry;
    entry.label = labels[e];
    entry.requests = static_cast<int64_t>(by_entry[e].size());
    entry.latency_us = PercentilesOf(by_entry[e]);
    entry.queue_us = Median(entry_queue[e]);
    entry.server_us = Median(entry_server[e]);
    s.entries.push_back(std::move(entry));
  }
  return s;
}

nlohmann::json ReportJson(const BenchReport& report) {
  nlohmann::json points = nlohmann::json::array();
  for (const BenchPoint& p : report.points) {
    nlohmann::json point;
    if (p.rate > 0) {
      point["rate"] = p.rate;
    } else {
      point["concurrency"] = p.concurrency;
    }
    point["gpupipe"] = SummaryJson(p.gpupipe);
    if (p.echo) {
      point["echo"] = SummaryJson(*p.echo);
      const ServiceSummary& e = *p.echo;
      if (p.echo_stream) point["echo_stream"] = SummaryJson(*p.echo_stream);
      point["vs_echo"] = {
          {"throughput", e.throughput > 0 ? p.gpupipe.throughput / e.throughput : 0},
          {"p50", e.latency_us.p50 > 0 ? p.gpupipe.latency_us.p50 / e.latency_us.p50 : 0},
          {"p99", e.latency_us.p99 > 0 ? p.gpupipe.latency_us.p99 / e.latency_us.p99 : 0}};
    }
    points.push_back(std::move(point));
  }
  return {{"target", report.target},
          {"backend", report.backend},
          {"server_version", report.server_version},
          {"channels", report.channels},
          {"balanced", report.balanced},
          {"warmup_seconds", report.warmup_seconds},
          {"duration_seconds", report.duration_seconds},
          {"mix", report.mix},
          {"points", points}};
}

std::string ReportCsv(const BenchReport& report) {
  std::string out =
      "load,value,service,requests,errors,mismatches,missed,seconds,throughput,p50_us,p90_us,"
      "p99_us,max_us,queue_us,device_us,server_us,transport_us,kernels_per_job,"
      "mean_batch_jobs,daemons,client_cpu_us,server_cpu_us\n";
  for (const BenchPoint& p : report.points) {
    std::vector<const ServiceSummary*> services = {&p.gpupipe};
    if (p.echo) services.push_back(&*p.echo);
    if (p.echo_stream) services.push_back(&*p.echo_stream);
    for (const ServiceSummary* s : services) {
      absl::StrAppendFormat(&out,
                            "%s,%g,%s,%d,%d,%d,%d,%.3f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,"
                            "%.1f,%.1f,%.3f,%.2f,%s,%s,%s\n",
                            p.rate > 0 ? "rate" : "concurrency",
                            p.rate > 0 ? p.rate : static_cast<double>(p.concurrency), s->service,
                            s->requests, s->errors, s->mismatches, s->missed, s->seconds,
                            s->throughput, s->latency_us.p50, s->latency_us.p90, s->latency_us.p99,
                            s->latency_us.max, s->queue_us, s->device_us, s->server_us,
                            s->transport_us, s->kernels_per_job, s->mean_batch_jobs,
                            DaemonCounts(*s, "=", ";"), CpuText(s->client_cpu_us),
                            CpuText(s->server_cpu_us));
    }
  }
  return out;
}

std::string ReportText(const BenchReport& report) {
  std::string out = absl::StrCat(report.target, " (", report.backend, ", ", report.server_version,
                                 "), ", report.channels, " channel",
                                 report.channels == 1 ? "" : "s", ", ", report.duration_seconds,
                                 " s measured after ", report.warmup_seconds, " s warm-up\n");
  for (const std::string& m : report.mix) absl::StrAppend(&out, "  mix: ", m, "\n");
  absl::StrAppendFormat(&out, "\n%-17s %-11s %10s %9s %9s %9s %9s %7s %9s %9s %9s %8s %7s\n",
                        "load", "service", "req/s", "p50 us", "p90 us", "p99 us", "max us",
                        "errors", "queue us", "device us", "transp us", "krn/job", "batch");
  for (const BenchPoint& p : report.points) {
    std::vector<const ServiceSummary*> services = {&p.gpupipe};
    if (p.echo) services.push_back(&*p.echo);
    if (p.echo_stream) services.push_back(&*p.echo_stream);
    for (const ServiceSummary* s : services) {
      const bool job = s->service == "gpupipe";
      absl::StrAppendFormat(
          &out, "%-17s %-11s %10.0f %9.0f %9.0f %9.0f %9.0f %7d %9s %9s %9s %8s %7s\n", LoadName(p),
          s->service, s->throughput, s->latency_us.p50, s->latency_us.p90, s->latency_us.p99,
          s->latency_us.max, s->errors + s->mismatches,
          job ? absl::StrFormat("%.0f", s->queue_us) : "-",
          job ? absl::StrFormat("%.0f", s->device_us) : "-",
          job ? absl::StrFormat("%.0f", s->transport_us) : "-",
          job ? absl::StrFormat("%.3f", s->kernels_per_job) : "-",
          job ? absl::StrFormat("%.1f", s->mean_batch_jobs) : "-");
    }
    if (p.echo && p.echo->throughput > 0 && p.echo->latency_us.p50 > 0) {
      absl::StrAppendFormat(
          &out, "%-17s vs echo: %.2fx throughput, %.2fx p50, %.2fx p99\n", "",
          p.gpupipe.throughput / p.echo->throughput,
          p.gpupipe.latency_us.p50 / p.echo->latency_us.p50,
          p.echo->latency_us.p99 > 0 ? p.gpupipe.latency_us.p99 / p.echo->latency_us.p99 : 0.0);
    }
    if (p.gpupipe.client_cpu_us || p.gpupipe.server_cpu_us) {
      std::string line = absl::StrCat("CPU a request: gpupipe client ",
                                      CpuText(p.gpupipe.client_cpu_us, "?"), " us, daemon ",
                                      CpuText(p.gpupipe.server_cpu_us, "?"), " us");
      if (p.echo) {
        absl::StrAppend(&line, "; echo client ", CpuText(p.echo->client_cpu_us, "?"),
                        " us, server ", CpuText(p.echo->server_cpu_us, "?"), " us");
      }
      absl::StrAppendFormat(&out, "%-17s   %s\n", "", line);
    }
    if (p.gpupipe.entries.size() > 1) {
      for (const EntrySummary& e : p.gpupipe.entries) {
        absl::StrAppendFormat(&out,
                              "%-17s   %s: %d jobs, p50 %.0f us, p99 %.0f us (queue %.0f us, "
                              "server %.0f us)\n",
                              "", e.label, e.requests, e.latency_us.p50, e.latency_us.p99,
                              e.queue_us, e.server_us);
      }
    }
    if (report.balanced || p.gpupipe.daemons.size() > 1) {
      absl::StrAppendFormat(&out, "%-17s   per daemon: %s\n", "",
                            DaemonCounts(p.gpupipe, " ", ", "));
    }
    for (const auto& [message, count] : p.gpupipe.error_messages) {
      absl::StrAppendFormat(&out, "%-17s   error x%d: %s\n", "", count, message);
    }
    if (p.gpupipe.mismatches > 0) {
      absl::StrAppendFormat(&out,
                            "%-17s   %d results differed from the first result of the "
                            "same input\n",
                            "", p.gpupipe.mismatches);
    }
  }
  return out;
}

}  // namespace bench
}  // namespace gpupipe
