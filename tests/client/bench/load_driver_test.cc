#include "client/bench/load_driver.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace gpupipe::bench {
namespace {

// Completes each request after `delay` on a thread of its own, counting what is in flight.
class FakeService {
 public:
  explicit FakeService(std::chrono::microseconds delay) : delay_(delay) {}
  ~FakeService() {
    for (std::thread& t : threads_) t.join();
  }
  Issuer issuer() {
    return [this](int64_t n, int entry, std::function<void(Outcome)> done) {
      const int now = ++in_flight_;
      int seen = max_in_flight_.load();
      while (now > seen && !max_in_flight_.compare_exchange_weak(seen, now)) {
      }
      ++by_entry_[static_cast<size_t>(entry)];
      std::lock_guard<std::mutex> lock(mu_);
      threads_.emplace_back([this, n, done = std::move(done)] {
        std::this_thread::sleep_for(delay_);
        --in_flight_;
        ++completed_;
        Outcome o;
        o.ok = n % 10 != 9;  // every tenth fails
        if (!o.ok) o.error = "fake failure";
        done(o);
      });
    };
  }
  int max_in_flight() const { return max_in_flight_; }
  int64_t completed() const { return completed_; }
  int64_t sent() const { return by_entry_[0] + by_entry_[1]; }
  std::atomic<int64_t> by_entry_[2] = {0, 0};

 private:
  std::chrono::microseconds delay_;
  std::atomic<int> in_flight_{0};
  std::atomic<int> max_in_flight_{0};
  std::atomic<int64_t> completed_{0};
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

TEST(LoadDriver, AClosedLoopKeepsItsConcurrencyAndMeasuresOnlyTheWindow) {
  FakeService service(std::chrono::microseconds(2000));
  LoadConfig config;
  config.concurrency = 4;
  config.warmup_seconds = 0.1;
  config.duration_seconds = 0.3;
  const LoadResult r = RunLoad(config, service.issuer());
  EXPECT_EQ(service.max_in_flight(), 4);
  EXPECT_NEAR(r.seconds, 0.3, 0.05);
  // About 4 / 2 ms = 2000/s over 0.3 s; sleeps only lengthen a request.
  EXPECT_GT(r.samples.size(), 100u);
  EXPECT_LT(r.samples.size(), 700u);
  int failed = 0;
  for (const Sample& s : r.samples) {
    EXPECT_GE(s.latency_us, 2000);
    failed += !s.outcome.ok;
  }
  EXPECT_GT(failed, 0);
}

TEST(LoadDriver, AnOpenLoopSendsAtItsRateWhateverIsInFlight) {
  FakeService service(std::chrono::microseconds(20000));
  LoadConfig config;
  config.rate = 500;
  config.warmup_seconds = 0;
  config.duration_seconds = 0.4;
  const LoadResult r = RunLoad(config, service.issuer());
  // 200 due in the window; each takes 20 ms, so about 10 are in flight at once.
  EXPECT_GT(service.max_in_flight(), 5);
  EXPECT_GT(r.samples.size(), 150u);
  EXPECT_LE(r.samples.size(), 201u);
}

TEST(LoadDriver, AnOpenLoopCountsRequestsItCouldNotSend) {
  FakeService service(std::chrono::microseconds(50000));
  LoadConfig config;
  config.rate = 1000;
  config.max_outstanding = 5;
  config.warmup_seconds = 0;
  config.duration_seconds = 0.2;
  const LoadResult r = RunLoad(config, service.issuer());
  EXPECT_LE(service.max_in_flight(), 5);
  EXPECT_GT(r.missed, 100);
}

TEST(LoadDriver, RequestsEndTheWindowEarlyAndWeightsPickEntries) {
  FakeService service(std::chrono::microseconds(100));
  LoadConfig config;
  config.concurrency = 2;
  config.warmup_seconds = 0;
  config.duration_seconds = 30;
  config.requests = 300;
  config.weights = {1, 3};
  const auto start = std::chrono::steady_clock::now();
  const LoadResult r = RunLoad(config, service.issuer());
  EXPECT_EQ(r.samples.size(), 300u);
  EXPECT_EQ(r.sent, 300);  // none beyond what the window needs, with no warm-up
  EXPECT_LT(r.seconds, 10);
  // The last request's completion wakes the sender, which does not sleep out the window.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  const double share = static_cast<double>(service.by_entry_[1]) /
                       static_cast<double>(service.by_entry_[0] + service.by_entry_[1]);
  EXPECT_NEAR(share, 0.75, 0.1);
}

TEST(LoadDriver, RequestsBelowTheConcurrencySendNoMore) {
  FakeService service(std::chrono::microseconds(100));
  LoadConfig config;
  config.concurrency = 8;
  config.warmup_seconds = 0;
  config.duration_seconds = 30;
  config.requests = 5;
  const LoadResult r = RunLoad(config, service.issuer());
  EXPECT_EQ(r.samples.size(), 5u);
  EXPECT_EQ(r.sent, 5);
}

// The window's hooks, each called once, around the completions the window counts: what
// completed between them is what the window measured, give or take the requests in flight.
TEST(LoadDriver, WindowHooksBracketTheMeasuredWindow) {
  FakeService service(std::chrono::microseconds(1000));
  LoadConfig config;
  config.concurrency = 2;
  config.warmup_seconds = 0.1;
  config.duration_seconds = 0.3;
  int starts = 0, ends = 0;
  int64_t completed_at_start = -1, completed_at_end = -1;
  std::chrono::steady_clock::time_point started, ended;
  config.at_window_start = [&] {
    ++starts;
    started = std::chrono::steady_clock::now();
    completed_at_start = service.completed();
  };
  config.at_window_end = [&] {
    ++ends;
    ended = std::chrono::steady_clock::now();
    completed_at_end = service.completed();
  };
  const auto begin = std::chrono::steady_clock::now();
  const LoadResult r = RunLoad(config, service.issuer());
  EXPECT_EQ(starts, 1);
  EXPECT_EQ(ends, 1);
  EXPECT_GT(completed_at_start, 0);  // the warm-up's completions came before
  const auto seconds = [](auto d) { return std::chrono::duration<double>(d).count(); };
  EXPECT_NEAR(seconds(started - begin), 0.1, 0.08);
  EXPECT_NEAR(seconds(ended - started), 0.3, 0.08);
  EXPECT_GT(r.samples.size(), 100u);
  // A hook's thread may wake a few milliseconds late, a handful of completions at this rate;
  // hooks a window apart would miss by hundreds.
  EXPECT_NEAR(static_cast<double>(completed_at_end - completed_at_start),
              static_cast<double>(r.samples.size()), 0.1 * static_cast<double>(r.samples.size()));
}

TEST(LoadDriver, WithoutAWarmUpTheWindowStartsBeforeTheFirstRequest) {
  for (const double rate : {0.0, 1000.0}) {
    FakeService service(std::chrono::microseconds(100));
    LoadConfig config;
    config.concurrency = 2;
    config.rate = rate;
    config.warmup_seconds = 0;
    config.duration_seconds = 30;
    config.requests = 50;
    int64_t sent_at_start = -1, completed_at_end = -1;
    config.at_window_start = [&] { sent_at_start = service.sent(); };
    config.at_window_end = [&] { completed_at_end = service.completed(); };
    const LoadResult r = RunLoad(config, service.issuer());
    EXPECT_EQ(sent_at_start, 0) << "rate " << rate;
    EXPECT_EQ(r.samples.size(), 50u) << "rate " << rate;
    // A window ended by its requests ends at the last one.
    EXPECT_EQ(completed_at_end, 50) << "rate " << rate;
  }
}

}  // namespace
}  // namespace gpupipe::bench
