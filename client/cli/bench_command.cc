#include "client/cli/bench_command.h"

#include <iostream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/bench/cpu_meter.h"
#include "client/bench/echo_floor.h"
#include "client/bench/job_issuer.h"
#include "client/cli/timeline_svg.h"
#include "client/dtype.h"
#include "common/process_cpu.h"

namespace gpupipe {
namespace cli {
namespace {

// The window of lane activity `--timeline` draws.
constexpr double kTimelineWindowUs = 1e6;

std::function<void(const bench::LoadProgress&)> ProgressLine(bool show, const std::string& what) {
  if (!show) return {};
  return [what](const bench::LoadProgress& p) {
    std::cerr << absl::StrFormat("\r\033[K%s: %.1f s%s, %d done, %d failed", what,
                                 p.elapsed_seconds, p.warming_up ? " (warming up)" : "",
                                 p.completed, p.failed)
              << std::flush;
  };
}

}  // namespace

absl::StatusOr<BenchOutput> RunBench(const BenchArgs& args, const std::string& target,
                                     double deadline_seconds, const ConnectChannel& connect,
                                     bool progress) {
  std::vector<std::unique_ptr<client::JobClient>> clients;
  for (int i = 0; i < args.channels; ++i) {
    absl::StatusOr<std::unique_ptr<client::JobClient>> c = connect(i);
    if (!c.ok()) return c.status();
    clients.push_back(*std::move(c));
  }
  absl::StatusOr<v1::DescribeResponse> description = clients[0]->Describe();
  if (!description.ok()) return description.status();

  std::random_device rd;
  std::vector<std::vector<v1::SubmitRequest>> requests;
  std::vector<std::string> labels;
  std::vector<int> weights;
  std::vector<bench::EchoSizes> sizes;
  BenchOutput out;
  for (const bench::MixEntry& entry : args.mix) {
    absl::StatusOr<std::vector<v1::SubmitRequest>> r =
        bench::EntryRequests(entry, (uint64_t{rd()} << 32) ^ rd());
    if (!r.ok()) return r.status();
    // The floor carries the same bytes each way: ask the daemon what the job returns.
    v1::SubmitRequest dry = r->front();
    dry.set_dry_run(true);
    absl::StatusOr<client::JobResult> planned = clients[0]->Submit(dry);
    if (!planned.ok()) {
      return absl::Status(planned.status().code(),
                          absl::StrCat(bench::EntryLabel(entry), ": ", planned.status().message()));
    }
    const std::vector<int64_t> out_shape(planned->accepted.output_shape().begin(),
                                         planned->accepted.output_shape().end());
    absl::StatusOr<int64_t> out_bytes =
        client::TensorBytes(planned->accepted.output_dtype(), out_shape);
    sizes.push_back(
        {static_cast<int64_t>(r->front().input().data().size()), out_bytes.ok() ? *out_bytes : 0});
    requests.push_back(*std::move(r));
    labels.push_back(bench::EntryLabel(entry));
    weights.push_back(entry.weight);
    out.report.mix.push_back(absl::StrCat(labels.back(), " (weight ", entry.weight, ", ",
                                          sizes.back().request_bytes, " bytes in, ",
                                          sizes.back().reply_bytes, " bytes out)"));
  }
  out.report.target = target;
  out.report.backend = description->backend();
  out.report.server_version = description->server_version();
  out.report.channels = args.channels;
  out.report.balanced = clients[0]->balanced();
  out.report.warmup_seconds = args.warmup_seconds;
  out.report.duration_seconds = args.duration_seconds;

  std::unique_ptr<bench::EchoFloorProcess> floor;
  std::unique_ptr<bench::EchoIssuer> echo;
  std::unique_ptr<bench::EchoIssuer> echo_stream;
  if (args.echo) {
    // The floor serves from a process of its own, as the daemon does, so that both pay the
    // same hops between processes.
    absl::StatusOr<std::unique_ptr<bench::EchoFloorProcess>> started =
        bench::EchoFloorProcess::Start("/proc/self/exe", kEchoFloorCommand);
    if (!started.ok()) return started.status();
    floor = *std::move(started);
    echo = std::make_unique<bench::EchoIssuer>(floor->target(), args.channels, sizes,
                                               deadline_seconds);
    if (args.echo_stream) {
      echo_stream = std::make_unique<bench::EchoIssuer>(floor->target(), args.channels, sizes,
                                                        deadline_seconds, /*streaming=*/true);
    }
  }
  std::vector<client::JobClient*> raw;
  for (const auto& c : clients) raw.push_back(c.get());
  bench::JobIssuer jobs(raw, std::move(requests));

  // Each end's CPU a request. The daemon's comes from its stats, so only where the target is
  // one daemon (a balanced target's GetStats reaches one of several); the floor's from /proc.
  std::function<std::optional<double>()> daemon_cpu;
  if (!out.report.balanced) {
    client::JobClient* stats_client = clients[0].get();
    daemon_cpu = [stats_client]() -> std::optional<double> {
      absl::StatusOr<v1::StatsResponse> stats = stats_client->GetStats();
      // A daemon that does not report it (older than the field) reads 0.
      if (!stats.ok() || stats->process_cpu_seconds() <= 0) return std::nullopt;
      return stats->process_cpu_seconds();
    };
  }
  std::function<std::optional<double>()> floor_cpu;
  if (floor) {
    const int floor_pid = floor->pid();
    floor_cpu = [floor_pid] { return ProcessCpuSecondsOf(floor_pid); };
  }
  // Runs one load of `service` at `config`, with its CPU meters.
  const auto measure = [&](const std::string& service, bench::LoadConfig config,
                           const bench::Issuer& issuer,
                           std::function<std::optional<double>()> server_cpu,
                           const std::string& progress_name) {
    bench::CpuMeter cpu(std::move(server_cpu));
    cpu.Attach(config);
    bench::ServiceSummary summary = bench::Summarize(
        service, bench::RunLoad(config, issuer, ProgressLine(progress, progress_name)), labels);
    summary.client_cpu_us = cpu.client_us(summary.requests);
    summary.server_cpu_us = cpu.server_us(summary.requests);
    return summary;
  };

  std::vector<bench::BenchPoint> points;
  if (args.rates.empty()) {
    for (int c : args.concurrency) points.push_back({c, 0, {}, {}});
  } else {
    for (double r : args.rates) points.push_back({0, r, {}, {}});
  }
  for (bench::BenchPoint& point : points) {
    bench::LoadConfig config;
    config.concurrency = std::max(point.concurrency, 1);
    config.rate = point.rate;
    config.warmup_seconds = args.warmup_seconds;
    config.duration_seconds = args.duration_seconds;
    config.requests = args.requests;
    config.weights = weights;
    config.seed = (uint64_t{rd()} << 32) ^ rd();
    const std::string name = point.rate > 0 ? absl::StrFormat("rate %g/s", point.rate)
                                            : absl::StrCat("concurrency ", point.concurrency);
    point.gpupipe = measure("gpupipe", config, jobs.issuer(), daemon_cpu, name + " gpupipe");
    if (!args.timeline_svg.empty() && &point == &points.back()) {
      absl::StatusOr<v1::StatsResponse> stats = clients[0]->GetStats(/*lane_activity=*/true);
      if (!stats.ok()) return stats.status();
      out.timeline_svg =
          DrawTimelineSvg(absl::StrCat("gpupiped lanes, ", name, ", last second (", target, ")"),
                          LaneActivityBars(*stats, kTimelineWindowUs));
    }
    if (echo) point.echo = measure("echo", config, echo->issuer(), floor_cpu, name + " echo");
    if (echo_stream) {
      point.echo_stream =
          measure("echo-stream", config, echo_stream->issuer(), floor_cpu, name + " echo-stream");
    }
    if (progress) std::cerr << "\r\033[K" << std::flush;
    out.failed |= point.gpupipe.errors > 0 || point.gpupipe.mismatches > 0;
  }
  out.report.points = std::move(points);
  return out;
}

}  // namespace cli
}  // namespace gpupipe
