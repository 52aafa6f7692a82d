#include "client/bench/cpu_meter.h"

#include <gtest/gtest.h>

#include <ctime>
#include <mutex>
#include <thread>
#include <vector>

namespace gpupipe::bench {
namespace {

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

// Completes each request on a thread of its own after that thread used `cpu_seconds` of CPU:
// a client whose every request costs a known amount of this process's CPU.
class SpinningService {
 public:
  explicit SpinningService(double cpu_seconds) : cpu_seconds_(cpu_seconds) {}
  ~SpinningService() {
    // Under the lock: a request's thread can finish (and the load end) before the issuer that
    // started it has put it in `threads_`, so the list is taken once that issuer is done.
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
  }
  Issuer issuer() {
    return [this](int64_t, int, std::function<void(Outcome)> done) {
      std::lock_guard<std::mutex> lock(mu_);
      threads_.emplace_back([this, done = std::move(done)] {
        const double start = ThreadCpuSeconds();
        volatile double sink = 0;
        while (ThreadCpuSeconds() - start < cpu_seconds_) sink = sink + 1;
        Outcome o;
        o.ok = true;
        done(o);
      });
    };
  }

 private:
  const double cpu_seconds_;
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

TEST(CpuMeter, EachEndsCpuOverTheWindowPerRequest) {
  // The server's reading grows by a quarter second between the window's two readings.
  double server = 5.0;
  int server_reads = 0;
  CpuMeter meter([&]() -> std::optional<double> {
    ++server_reads;
    server += 0.25;
    return server;
  });
  SpinningService service(500e-6);
  LoadConfig config;
  config.concurrency = 1;
  config.warmup_seconds = 0.05;
  config.duration_seconds = 0.3;
  meter.Attach(config);
  const LoadResult r = RunLoad(config, service.issuer());
  const int64_t n = static_cast<int64_t>(r.samples.size());
  ASSERT_GT(n, 20);
  EXPECT_EQ(server_reads, 2);
  ASSERT_TRUE(meter.server_us(n).has_value());
  EXPECT_DOUBLE_EQ(*meter.server_us(n), 0.25e6 / static_cast<double>(n));
  // Every request spun 500 us of this process's CPU; at most one of them straddles each edge
  // of the window, and each costs a thread's start besides.
  ASSERT_TRUE(meter.client_us(n).has_value());
  EXPECT_GE(*meter.client_us(n), 500.0 * static_cast<double>(n - 2) / static_cast<double>(n));
  EXPECT_LT(*meter.client_us(n), 5000.0);
}

TEST(CpuMeter, MissingReadingsAreNotFigures) {
  CpuMeter no_server;
  CpuMeter unreadable([]() -> std::optional<double> { return std::nullopt; });
  for (CpuMeter* meter : {&no_server, &unreadable}) {
    SpinningService service(10e-6);
    LoadConfig config;
    config.warmup_seconds = 0;
    config.duration_seconds = 5;
    config.requests = 10;
    meter->Attach(config);
    const LoadResult r = RunLoad(config, service.issuer());
    EXPECT_FALSE(meter->server_us(static_cast<int64_t>(r.samples.size())).has_value());
    EXPECT_TRUE(meter->client_us(static_cast<int64_t>(r.samples.size())).has_value());
    EXPECT_FALSE(meter->client_us(0).has_value());  // no requests, no figure per request
  }
}

}  // namespace
}  // namespace gpupipe::bench
