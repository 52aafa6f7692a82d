// Sub-allocation of one host block that was allocated once at start (the engine's input ring
// pool, page-locked on the CUDA backend): first fit over aligned ranges, so a job's input ring
// can be page-locked without a cudaHostAlloc per job (which costs milliseconds and
// synchronizes the device).
//
// Thread safety: Allocate and Free may be called from any thread. The pool frees the block
// (through `free_block`) when it is destroyed; rings that use its ranges hold it through a
// shared_ptr, so it outlives them even when the engine goes first.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>


namespace gpupipe::engine {

class HostBlockPool {
 public:
  // Ranges start at multiples of kAlignment from `base`.
  static constexpr int64_t kAlignment = 4096;

  HostBlockPool(char* base, int64_t capacity, bool pinned,
                std::function<void(char*)> free_block);
  ~HostBlockPool();
  HostBlockPool(const HostBlockPool&) = delete;
  HostBlockPool& operator=(const HostBlockPool&) = delete;

  // The start of a free range of `bytes` (> 0), or nullptr when none is large enough.
  char* Allocate(int64_t bytes);
  // Returns a range from Allocate.
  void Free(char* p);

  int64_t capacity() const { return capacity_; }
  bool pinned() const { return pinned_; }
  int64_t used() const;

 private:
  char* const base_;
  const int64_t capacity_;
  const bool pinned_;
  std::function<void(char*)> free_block_;
  mutable std::mutex mu_;
  std::map<int64_t, int64_t> used_;  // offset -> length of each allocated range
  int64_t used_bytes_ = 0;
};

}  // namespace gpupipe::engine
