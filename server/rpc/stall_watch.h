// Watches the calls of the job service for clients that stopped reading: every quarter of the
// shorter timeout (at most once a second) it asks each live EventStream whether its write in
// flight has waited longer than the timeout (EventStream::CheckStalled), which cancels that
// call and ends its job with DEADLINE_EXCEEDED, so a client that stops reading cannot hold a
// lane or its events' memory for ever. While other jobs wait for lanes (`busy` says so) the
// busy timeout applies instead where it is shorter: a stalled reader's lane is one they could
// run on. Streams are held weakly and forgotten once their call is over.
//
// Thread safety: Watch may be called from any thread. One thread of its own, joined by the
// destructor.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "server/rpc/event_stream.h"

namespace gpupipe::rpc {

class StallWatch {
 public:
  // `timeout`: the reader idle timeout; `busy_timeout`: the one while `busy()` is true (it
  // is asked once a round, from the watch's thread). Zero: no such limit; both zero: no
  // watching (Watch does nothing).
  StallWatch(std::chrono::milliseconds timeout, std::chrono::milliseconds busy_timeout = {},
             std::function<bool()> busy = nullptr);
  ~StallWatch();
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  void Watch(std::weak_ptr<EventStream> stream);

 private:
  void Loop();

  bool watching() const { return timeout_.count() > 0 || busy_timeout_.count() > 0; }

  const std::chrono::milliseconds timeout_;
  const std::chrono::milliseconds busy_timeout_;
  const std::function<bool()> busy_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::vector<std::weak_ptr<EventStream>> streams_;
  std::thread thread_;
};

}  // namespace gpupipe::rpc
