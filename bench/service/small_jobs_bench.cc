// small_jobs_bench: small-job throughput of the daemon as a process, with its metrics endpoint
// and stats served and polled, against the same daemon with them off, in one run.
//
// Each repetition starts gpupiped twice, in alternating order:
//   off   --metrics-listen '' and nobody asks for stats
//   on    metrics on a loopback port; a poller GETs /metrics and calls GetStats every
//         --poll-ms (default 100 ms: far more often than any Prometheus scrape interval)
// and drives it with --threads client threads (each its own channel and client-id, one job in
// flight each) submitting `relu` on --elements float32 through Submit. Every result is checked
// against the CPU's relu of that thread's fresh random input. After --warmup-s, jobs finished
// in the next --seconds are counted. The engine's own counters (what stats and metrics read)
// are kept in both modes: they are not optional.
//
// Prints one JSON line per measurement and a summary line; report.py makes the Markdown.
//
// usage: small_jobs_bench --daemon PATH [--backend auto|cuda|cpu] [--threads N] [--elements N]
//                         [--seconds S] [--warmup-s S] [--reps R] [--poll-ms MS]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "client/job_client.h"
#include "nlohmann/json.hpp"
#include "tests/integration/http_get.h"
#include "tests/integration/process.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string daemon;
  std::string backend = "auto";
  int threads = 16;
  int64_t elements = 4096;
  double seconds = 5;
  double warmup_s = 1;
  int reps = 5;
  int poll_ms = 100;
};

bool ParseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (v == nullptr) return false;
    bool ok = true;
    if (a == "--daemon")
      o->daemon = v;
    else if (a == "--backend")
      o->backend = v;
    else if (a == "--threads")
      ok = absl::SimpleAtoi(v, &o->threads) && o->threads >= 1;
    else if (a == "--elements")
      ok = absl::SimpleAtoi(v, &o->elements) && o->elements >= 1;
    else if (a == "--seconds")
      ok = absl::SimpleAtod(v, &o->seconds) && o->seconds > 0;
    else if (a == "--warmup-s")
      ok = absl::SimpleAtod(v, &o->warmup_s) && o->warmup_s >= 0;
    else if (a == "--reps")
      ok = absl::SimpleAtoi(v, &o->reps) && o->reps >= 1;
    else if (a == "--poll-ms")
      ok = absl::SimpleAtoi(v, &o->poll_ms) && o->poll_ms >= 1;
    else
      return false;
    if (!ok) return false;
    ++i;
  }
  return !o->daemon.empty();
}

struct Measurement {
  int64_t jobs = 0;
  double seconds = 0;
  double p50_us = 0;
  double p99_us = 0;
  int64_t polls = 0;
  int64_t poll_failures = 0;
  int64_t mismatches = 0;
  std::map<std::string, int64_t> errors;  // status code name -> count, over the whole run
  std::string failure;                    // the daemon did not start, or similar
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

Measurement Measure(const Options& o, bool metrics_on) {
  Measurement m;
  std::vector<std::string> args = {"--backend", o.backend, "--quiet"};
  if (!metrics_on) args.insert(args.end(), {"--metrics-listen", ""});
  testing::DaemonProcess daemon(o.daemon, args);
  if (daemon.port() == 0) {
    m.failure = daemon.error();
    return m;
  }

  std::atomic<bool> stop{false};
  std::atomic<bool> counting{false};
  std::atomic<int64_t> finished{0};
  std::mutex mu;  // guards latencies, m.errors, m.mismatches
  std::vector<double> latencies;
  std::vector<std::thread> workers;
  for (int t = 0; t < o.threads; ++t) {
    workers.emplace_back([&, t] {
      client::ClientOptions copts;
      copts.deadline_seconds = 30;
      copts.client_id = "bench-" + std::to_string(t);
      auto client = client::JobClient::Create(daemon.target(), copts);
      if (!client.ok()) return;
      const std::vector<float> x = testing::RandomFloats(o.elements, testing::FreshSeed());
      std::vector<float> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) want[i] = x[i] > 0 ? x[i] : 0.0f;
      v1::SubmitRequest request;
      request.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
      request.mutable_input()->add_shape(o.elements);
      request.mutable_input()->set_data(testing::AsBytes(x));
      request.add_ops()->mutable_relu();
      std::vector<double> mine;
      while (!stop.load()) {
        const Clock::time_point start = Clock::now();
        absl::StatusOr<client::JobResult> r = (*client)->Submit(request);
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
        if (!r.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          ++m.errors[absl::StatusCodeToString(r.status().code())];
          continue;
        }
        if (testing::AsFloats(r->output.data()) != want) {
          std::lock_guard<std::mutex> lock(mu);
          ++m.mismatches;
        }
        if (counting.load()) {
          finished.fetch_add(1);
          mine.push_back(us);
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  std::thread poller;
  if (metrics_on) {
    poller = std::thread([&] {
      auto client = client::JobClient::Create(daemon.target());
      while (!stop.load()) {
        const testing::HttpResponse r = testing::HttpGet(daemon.metrics_port(), "/metrics");
        const bool stats_ok = client.ok() && (*client)->GetStats().ok();
        ++m.polls;
        if (r.status != 200 || !stats_ok) ++m.poll_failures;
        std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms));
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup_s));
  counting = true;
  const Clock::time_point t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  counting = false;
  const Clock::time_point t1 = Clock::now();
  stop = true;
  for (std::thread& w : workers) w.join();
  if (poller.joinable()) poller.join();
  m.jobs = finished.load();
  m.seconds = std::chrono::duration<double>(t1 - t0).count();
  m.p50_us = Percentile(latencies, 0.50);
  m.p99_us = Percentile(latencies, 0.99);
  if (daemon.Terminate() != 0) m.failure = "gpupiped did not stop cleanly:\n" + daemon.log();
  return m;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int Main(int argc, char** argv) {
  Options o;
  if (!ParseOptions(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: small_jobs_bench --daemon PATH [--backend auto|cuda|cpu] [--threads N] "
                 "[--elements N] [--seconds S] [--warmup-s S] [--reps R] [--poll-ms MS]\n");
    return 2;
  }
  std::map<std::string, std::vector<double>> rates;
  bool clean = true;
  for (int rep = 0; rep < o.reps; ++rep) {
    // Alternate which mode goes first, so that drift over the run favours neither.
    const bool on_first = rep % 2 == 1;
    for (bool metrics_on : {on_first, !on_first}) {
      const Measurement m = Measure(o, metrics_on);
      const std::string mode = metrics_on ? "on" : "off";
      const double rate = m.seconds > 0 ? static_cast<double>(m.jobs) / m.seconds : 0;
      nlohmann::json line = {{"rep", rep},
                             {"mode", mode},
                             {"jobs", m.jobs},
                             {"seconds", m.seconds},
                             {"jobs_per_s", rate},
                             {"p50_us", m.p50_us},
                             {"p99_us", m.p99_us},
                             {"polls", m.polls},
                             {"poll_failures", m.poll_failures},
                             {"mismatches", m.mismatches},
                             {"errors", m.errors}};
      if (!m.failure.empty()) line["failure"] = m.failure;
      std::printf("%s\n", line.dump().c_str());
      std::fflush(stdout);
      clean = clean && m.failure.empty() && m.mismatches == 0 && m.errors.empty() &&
              m.poll_failures == 0 && m.jobs > 0;
      rates[mode].push_back(rate);
    }
  }
  const double on = Median(rates["on"]), off = Median(rates["off"]);
  nlohmann::json summary = {{"summary", true},
                            {"backend", o.backend},
                            {"threads", o.threads},
                            {"elements", o.elements},
                            {"seconds", o.seconds},
                            {"warmup_s", o.warmup_s},
                            {"reps", o.reps},
                            {"poll_ms", o.poll_ms},
                            {"median_on", on},
                            {"median_off", off},
                            {"on_vs_off", off > 0 ? on / off : 0},
                            {"clean", clean}};
  std::printf("%s\n", summary.dump().c_str());
  return clean ? 0 : 1;
}

}  // namespace
}  // namespace gpupipe::bench

int main(int argc, char** argv) { return gpupipe::bench::Main(argc, argv); }
