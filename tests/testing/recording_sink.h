// A JobSink that records every event and checks the engine's ordering contract.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/engine/job/job_sink.h"

namespace gpupipe::testing {

class RecordingSink : public engine::JobSink {
 public:
  void OnAccepted(const engine::AcceptedInfo& info) override {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_FALSE(accepted_) << "second OnAccepted";
    accepted_ = true;
    info_ = info;
  }

  void OnPlan(const engine::PlanDescription& plan) override {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_TRUE(accepted_) << "plan before OnAccepted";
    EXPECT_EQ(chunks_, 0) << "plan after a chunk";
    plan_ = plan;
    ++plans_;
  }

  absl::Status OnChunk(int64_t offset, const char* data, int64_t size) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      EXPECT_TRUE(accepted_) << "chunk before OnAccepted";
      EXPECT_FALSE(done_) << "chunk after OnDone";
      EXPECT_EQ(offset, static_cast<int64_t>(output_.size())) << "chunks out of order";
      max_chunk_ = std::max(max_chunk_, size);
      output_.append(data, static_cast<size_t>(size));
      ++chunks_;
      output_cv_.notify_all();
      gate_.wait(lock, [&] { return open_ || cancelled_; });
    }
    return ReaderStatus();
  }

  void OnTiming(const engine::JobTiming& timing) override {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_FALSE(done_) << "timing after OnDone";
    timing_ = timing;
    has_timing_ = true;
  }

  void OnDone(const absl::Status& status) override {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_FALSE(done_) << "second OnDone";
    done_ = true;
    status_ = status;
    done_thread_ = std::this_thread::get_id();
    ++done_calls_;
    done_cv_.notify_all();
    output_cv_.notify_all();
  }

  absl::Status ReaderStatus() const override {
    return cancelled_ ? absl::CancelledError("the test's reader went away") : absl::OkStatus();
  }

  // Test controls.
  void Cancel() {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    gate_.notify_all();
  }
  // While closed, OnChunk blocks (a reader that does not read).
  void SetGateOpen(bool open) {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = open;
    gate_.notify_all();
  }

  bool WaitDone(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    std::unique_lock<std::mutex> lock(mu_);
    return done_cv_.wait_for(lock, timeout, [&] { return done_; });
  }

  // Waits until at least `bytes` of output have arrived (or the job is done, or the timeout
  // passes); returns the bytes received by then.
  size_t WaitForOutput(size_t bytes, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    std::unique_lock<std::mutex> lock(mu_);
    output_cv_.wait_for(lock, timeout, [&] { return output_.size() >= bytes || done_; });
    return output_.size();
  }

  absl::Status status() const { std::lock_guard<std::mutex> l(mu_); return status_; }
  std::string output() const { std::lock_guard<std::mutex> l(mu_); return output_; }
  engine::AcceptedInfo info() const { std::lock_guard<std::mutex> l(mu_); return info_; }
  engine::JobTiming timing() const { std::lock_guard<std::mutex> l(mu_); return timing_; }
  bool has_timing() const { std::lock_guard<std::mutex> l(mu_); return has_timing_; }
  bool accepted() const { std::lock_guard<std::mutex> l(mu_); return accepted_; }
  engine::PlanDescription plan() const { std::lock_guard<std::mutex> l(mu_); return plan_; }
  int plans() const { std::lock_guard<std::mutex> l(mu_); return plans_; }
  int done_calls() const { std::lock_guard<std::mutex> l(mu_); return done_calls_; }
  // The thread that called OnDone.
  std::thread::id done_thread() const { std::lock_guard<std::mutex> l(mu_); return done_thread_; }
  int chunks() const { std::lock_guard<std::mutex> l(mu_); return chunks_; }
  int64_t max_chunk() const { std::lock_guard<std::mutex> l(mu_); return max_chunk_; }

 private:
  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  std::condition_variable output_cv_;
  std::condition_variable gate_;
  bool open_ = true;
  std::atomic<bool> cancelled_{false};
  bool accepted_ = false;
  bool done_ = false;
  bool has_timing_ = false;
  int done_calls_ = 0;
  std::thread::id done_thread_;
  int plans_ = 0;
  engine::PlanDescription plan_;
  int chunks_ = 0;
  int64_t max_chunk_ = 0;
  engine::AcceptedInfo info_;
  engine::JobTiming timing_;
  std::string output_;
  absl::Status status_;
};

}  // namespace gpupipe::testing
