#include "server/rpc/stall_watch.h"

#include <algorithm>
#include <utility>

#include "common/thread_name.h"

namespace gpupipe::rpc {

StallWatch::StallWatch(std::chrono::milliseconds timeout, std::chrono::milliseconds busy_timeout,
                       std::function<uint32_t()> busy_levels)
    : timeout_(timeout),
      busy_timeout_(timeout.count() > 0 && busy_timeout.count() > 0 && busy_timeout < timeout &&
                            busy_levels != nullptr
                        ? busy_timeout
                        : std::chrono::milliseconds(0)),
      busy_levels_(std::move(busy_levels)) {
  if (timeout_.count() > 0) thread_ = std::thread([this] { Loop(); });
}

StallWatch::~StallWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StallWatch::Watch(std::weak_ptr<EventStream> stream) {
  if (timeout_.count() <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  streams_.push_back(std::move(stream));
}

void StallWatch::Loop() {
  NameThisThread("gp-stall-watch");
  const std::chrono::milliseconds shortest =
      busy_timeout_.count() > 0 ? busy_timeout_ : timeout_;
  const auto period = std::min<std::chrono::milliseconds>(
      shortest / 4 + std::chrono::milliseconds(1), std::chrono::seconds(1));
  // A round takes every stream registered since the last one out of the lock and sorts the
  // live from the ended outside it: under load that is every call of the last second, and
  // each call's Watch would otherwise wait for the whole pass. Under the lock a round only
  // swaps the list and puts the live streams back. Checking a stream may cancel its call, and
  // releasing the last reference to one may end it: both happen outside the lock too.
  std::vector<std::weak_ptr<EventStream>> sweeping;  // holds the emptied list between rounds
  std::vector<std::shared_ptr<EventStream>> live;
  std::unique_lock<std::mutex> lock(mu_);
  while (!wake_.wait_for(lock, period, [&] { return stop_; })) {
    sweeping.swap(streams_);
    lock.unlock();
    live.clear();
    for (const std::weak_ptr<EventStream>& weak : sweeping) {
      std::shared_ptr<EventStream> stream = weak.lock();
      if (stream && !stream->detached()) live.push_back(std::move(stream));
    }
    sweeping.clear();
    EventStream::StallCheck check;
    check.now = std::chrono::steady_clock::now();
    check.timeout = timeout_;
    if (!live.empty() && busy_timeout_.count() > 0) {
      check.busy_levels = busy_levels_();
      if (check.busy_levels != 0) check.busy_timeout = busy_timeout_;
    }
    for (const std::shared_ptr<EventStream>& stream : live) stream->CheckStalled(check);
    lock.lock();
    streams_.insert(streams_.end(), live.begin(), live.end());
    lock.unlock();
    live.clear();  // the last reference to a stream may go here, outside the lock
    lock.lock();
  }
}

}  // namespace gpupipe::rpc
