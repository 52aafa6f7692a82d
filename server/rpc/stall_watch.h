// Watches the calls of the job service for clients that stopped reading: every quarter of the
// timeout (at most once a second) it asks each live EventStream whether its write in flight has
// waited longer than the timeout (EventStream::CheckStalled), which cancels that call and ends
// its job with DEADLINE_EXCEEDED, so a client that stops reading cannot hold a lane or its
// events' memory for ever. Streams are held weakly and forgotten once their call is over.
//
// Thread safety: Watch may be called from any thread. One thread of its own, joined by the
// destructor.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "server/rpc/event_stream.h"

namespace gpupipe::rpc {

class StallWatch {
 public:
  // `timeout` of zero: no watching (Watch does nothing).
  explicit StallWatch(std::chrono::milliseconds timeout);
  ~StallWatch();
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  void Watch(std::weak_ptr<EventStream> stream);

 private:
  void Loop();

  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::vector<std::weak_ptr<EventStream>> streams_;
  std::thread thread_;
};

}  // namespace gpupipe::rpc
