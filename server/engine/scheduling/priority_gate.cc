#include "server/engine/scheduling/priority_gate.h"

namespace gpupipe::engine {

PriorityGate::PriorityGate(int levels)
    : levels_(levels), running_(std::make_unique<std::atomic<int>[]>(levels)) {
  for (int i = 0; i < levels; ++i) running_[i].store(0, std::memory_order_relaxed);
}

PriorityGate::Running::Running(std::atomic<int>* counter) : counter_(counter) {
  counter_->fetch_add(1, std::memory_order_acq_rel);
}

PriorityGate::Running::Running(Running&& other) noexcept : counter_(other.counter_) {
  other.counter_ = nullptr;
}

PriorityGate::Running::~Running() {
  if (counter_ != nullptr) counter_->fetch_sub(1, std::memory_order_acq_rel);
}

PriorityGate::Running PriorityGate::Enter(int level) { return Running(&running_[level]); }

bool PriorityGate::HigherRunning(int level) const {
  for (int l = level + 1; l < levels_; ++l) {
    if (running_[l].load(std::memory_order_acquire) > 0) return true;
  }
  return false;
}

}  // namespace gpupipe::engine
