#include "client/bench/load_driver.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>

namespace gpupipe {
namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

double MicrosBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// The state one RunLoad shares with the completions it is waiting for. Held by shared_ptr, so a
// completion that arrives late still finds it.
class LoadRun : public std::enable_shared_from_this<LoadRun> {
 public:
  LoadRun(const LoadConfig& config, Issuer issue)
      : config_(config),
        issue_(std::move(issue)),
        rng_(config.seed),
        pick_(config.weights.begin(), config.weights.end()) {}

  LoadResult Run(const std::function<void(const LoadProgress&)>& progress) {
    start_ = Clock::now();
    window_start_ = start_ + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(config_.warmup_seconds));
    window_end_ = window_start_ + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(config_.duration_seconds));
    if (config_.rate > 0) {
      Pace(progress);
    } else {
      std::unique_lock<std::mutex> lock(mu_);
      StartWindowIfDue(lock);
      for (int i = 0; i < config_.concurrency; ++i) SendLocked(lock);
      WaitForWindow(lock, progress, Clock::time_point::max());
    }
    {
      // A window too short to be waited for still begins before it ends.
      std::unique_lock<std::mutex> lock(mu_);
      if (!window_started_) StartWindow(lock);
    }
    if (config_.at_window_end) config_.at_window_end();
    std::unique_lock<std::mutex> lock(mu_);
    stopped_ = true;
    if (ended_at_ == Clock::time_point{}) ended_at_ = std::min(Clock::now(), window_end_);
    // Every request ends: the Issuer's calls have deadlines.
    idle_.wait(lock, [&] { return outstanding_ == 0; });
    LoadResult result;
    result.samples = std::move(samples_);
    result.seconds = std::max(0.0, MicrosBetween(window_start_, ended_at_) / 1e6);
    result.missed = missed_;
    result.sent = next_;
    return result;
  }

 private:
  // Open loop: request i is due at start + i / rate.
  void Pace(const std::function<void(const LoadProgress&)>& progress) {
    const auto period = std::chrono::duration<double>(1.0 / config_.rate);
    std::unique_lock<std::mutex> lock(mu_);
    for (int64_t i = 0;; ++i) {
      const Clock::time_point due =
          start_ + std::chrono::duration_cast<Clock::duration>(period * static_cast<double>(i));
      if (!WaitForWindow(lock, progress, due)) return;
      if (outstanding_ >= config_.max_outstanding) {
        if (due >= window_start_) ++missed_;
        continue;
      }
      SendLocked(lock);
    }
  }

  // Marks the window's start, calling LoadConfig::at_window_start without `lock`.
  void StartWindow(std::unique_lock<std::mutex>& lock) {
    window_started_ = true;
    if (!config_.at_window_start) return;
    lock.unlock();
    config_.at_window_start();
    lock.lock();
  }

  void StartWindowIfDue(std::unique_lock<std::mutex>& lock) {
    if (!window_started_ && Clock::now() >= window_start_) StartWindow(lock);
  }

  // Waits until `until`, reporting progress and starting the window when it is due; false once
  // the window is over.
  bool WaitForWindow(std::unique_lock<std::mutex>& lock,
                     const std::function<void(const LoadProgress&)>& progress,
                     Clock::time_point until) {
    for (;;) {
      StartWindowIfDue(lock);
      if (stopped_ || Clock::now() >= window_end_) return false;
      const Clock::time_point now = Clock::now();
      if (now >= until) return true;
      Clock::time_point wake = std::min(until, window_end_);
      if (!window_started_) wake = std::min(wake, window_start_);
      if (progress) wake = std::min(wake, last_progress_ + std::chrono::milliseconds(500));
      changed_.wait_until(lock, wake);
      if (progress && Clock::now() >= last_progress_ + std::chrono::milliseconds(500)) {
        last_progress_ = Clock::now();
        LoadProgress p;
        p.elapsed_seconds = MicrosBetween(start_, last_progress_) / 1e6;
        p.warming_up = last_progress_ < window_start_;
        p.completed = static_cast<int64_t>(samples_.size());
        p.failed = failed_;
        lock.unlock();
        progress(p);
        lock.lock();
      }
    }
  }

  // Sends one request, unless the window has all the requests it needs (LoadConfig::requests);
  // called with `lock` held, which it releases around the Issuer.
  void SendLocked(std::unique_lock<std::mutex>& lock) {
    if (config_.requests > 0 && Clock::now() >= window_start_ &&
        static_cast<int64_t>(samples_.size()) + outstanding_ >= config_.requests) {
      return;
    }
    const int64_t n = next_++;
    const int entry = static_cast<int>(pick_(rng_));
    ++outstanding_;
    lock.unlock();
    const Clock::time_point sent = Clock::now();
    std::shared_ptr<LoadRun> self = shared_from_this();
    issue_(n, entry, [self, entry, sent](Outcome outcome) {
      self->Completed(entry, sent, std::move(outcome));
    });
    lock.lock();
  }

  void Completed(int entry, Clock::time_point sent, Outcome outcome) {
    const Clock::time_point now = Clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    --outstanding_;
    bool reached_requests = false;
    if (!stopped_ && now >= window_start_ && now < window_end_) {
      Sample sample;
      sample.entry = entry;
      sample.start_us = MicrosBetween(window_start_, sent);
      sample.latency_us = MicrosBetween(sent, now);
      if (!outcome.ok) ++failed_;
      sample.outcome = std::move(outcome);
      samples_.push_back(std::move(sample));
      if (config_.requests > 0 && static_cast<int64_t>(samples_.size()) >= config_.requests) {
        stopped_ = true;
        ended_at_ = now;
        reached_requests = true;
      }
    }
    const bool closed_loop = config_.rate <= 0;
    if (closed_loop && !stopped_ && now < window_end_) SendLocked(lock);
    if (outstanding_ == 0) idle_.notify_all();
    // The sender's thread waits for a time (the window's end, a progress line, an open loop's
    // next request) or for the point's last request; waking it for every completion would add
    // a thread wake-up to every measured call, the echo floor's included.
    if (reached_requests) changed_.notify_all();
  }

  const LoadConfig config_;
  const Issuer issue_;

  std::mutex mu_;
  std::condition_variable changed_;
  std::condition_variable idle_;
  std::mt19937_64 rng_;
  std::discrete_distribution<int> pick_;
  Clock::time_point start_, window_start_, window_end_, ended_at_, last_progress_;
  int64_t next_ = 0;
  int outstanding_ = 0;
  bool stopped_ = false;
  bool window_started_ = false;  // at_window_start was called (or is being called)
  int64_t missed_ = 0;
  int64_t failed_ = 0;
  std::vector<Sample> samples_;
};

}  // namespace

LoadResult RunLoad(const LoadConfig& config, const Issuer& issue,
                   const std::function<void(const LoadProgress&)>& progress) {
  LoadConfig checked = config;
  if (checked.weights.empty()) checked.weights = {1};
  checked.concurrency = std::max(checked.concurrency, 1);
  auto run = std::make_shared<LoadRun>(checked, issue);
  return run->Run(progress);
}

}  // namespace bench
}  // namespace gpupipe
