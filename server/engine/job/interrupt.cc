#include "server/engine/job/interrupt.h"

namespace gpupipe::engine {

absl::Status JobInterrupt::Stopped() {
  return absl::UnavailableError(
      "the server is shutting down: the job was stopped at the end of the shutdown grace "
      "period (gpupiped --shutdown-grace-seconds)");
}

absl::Status JobInterrupt::Check() const {
  if (stopping_ != nullptr && stopping_->load(std::memory_order_relaxed)) return Stopped();
  // The deadline first: a client whose deadline passed is gone too, and why matters.
  if (deadline_ != Clock::time_point::max() && Clock::now() >= deadline_) {
    return absl::DeadlineExceededError("the job's deadline passed before it finished");
  }
  return sink_.ReaderStatus();
}

}  // namespace gpupipe::engine
