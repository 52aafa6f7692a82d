// Strict priority between lanes at chunk boundaries. Stream priorities only order the
// dispatch of new thread blocks, and copy engines ignore them, so a lower-priority job that
// keeps enqueueing chunks delays a higher-priority job behind its copies and resident blocks.
// Every job announces itself for as long as it runs (Enter); before enqueueing a chunk, a job
// asks whether any job of a higher priority is running (HigherRunning) and, if so, holds its
// next chunk back (what it has in flight still runs and is handed over). The backend bounds
// how long one chunk is held, so a stream of higher-priority work slows lower-priority jobs
// without starving them.
//
// Thread-safe: lane workers of every level call it concurrently; counters are atomics.
#pragma once

#include <atomic>
#include <memory>

namespace gpupipe::engine {

class PriorityGate {
 public:
  // Levels 0 (lowest) .. levels - 1 (highest).
  explicit PriorityGate(int levels);

  // Counts a running job of `level` until destroyed.
  class Running {
   public:
    Running(Running&& other) noexcept;
    Running(const Running&) = delete;
    Running& operator=(const Running&) = delete;
    Running& operator=(Running&&) = delete;
    ~Running();

   private:
    friend class PriorityGate;
    explicit Running(std::atomic<int>* counter);
    std::atomic<int>* counter_;
  };

  // `level` must lie in [0, levels).
  Running Enter(int level);

  // Whether any job of a level above `level` is running.
  bool HigherRunning(int level) const;

  int levels() const { return levels_; }

 private:
  int levels_;
  std::unique_ptr<std::atomic<int>[]> running_;
};

}  // namespace gpupipe::engine
