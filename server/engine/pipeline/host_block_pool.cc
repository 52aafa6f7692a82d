#include "server/engine/pipeline/host_block_pool.h"

#include <utility>

namespace gpupipe::engine {

HostBlockPool::HostBlockPool(char* base, int64_t capacity, bool pinned,
                             std::function<void(char*)> free_block)
    : base_(base), capacity_(capacity), pinned_(pinned), free_block_(std::move(free_block)) {}

HostBlockPool::~HostBlockPool() {
  if (free_block_ && base_ != nullptr) free_block_(base_);
}

char* HostBlockPool::Allocate(int64_t bytes) {
  if (bytes <= 0 || base_ == nullptr) return nullptr;
  const int64_t length = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  std::lock_guard<std::mutex> lock(mu_);
  // First fit: the gap before each allocated range, then the one after the last.
  int64_t start = 0;
  for (const auto& [offset, len] : used_) {
    if (offset - start >= length) break;
    start = offset + len;
  }
  if (capacity_ - start < length) {
    // No gap before the last range was large enough, and the tail is too short either.
    return nullptr;
  }
  used_.emplace(start, length);
  used_bytes_ += length;
  return base_ + start;
}

void HostBlockPool::Free(char* p) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = used_.find(p - base_);
  if (it == used_.end()) return;
  used_bytes_ -= it->second;
  used_.erase(it);
}

int64_t HostBlockPool::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_bytes_;
}

}  // namespace gpupipe::engine
