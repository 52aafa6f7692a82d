// Watches the calls of the job service for clients that stopped reading: every quarter of the
// shorter timeout (at most once a second) it asks each live EventStream whether its write in
// flight has waited longer than the timeout (EventStream::CheckStalled), which cancels that
// call and ends its job with DEADLINE_EXCEEDED, so a client that stops reading cannot hold a
// lane or its events' memory for ever. The busy timeout, where shorter, applies instead to a
// call whose job holds its lane waiting for the reader while jobs of its priority wait for a
// lane (`busy_levels` says which priorities): that lane is one they could run on. Streams are
// held weakly and forgotten once their call is over.
//
// Thread safety: Watch may be called from any thread. One thread of its own, joined by the
// destructor.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "server/rpc/event_stream.h"

namespace gpupipe::rpc {

class StallWatch {
 public:
  // `timeout`: the reader idle timeout, zero for none (then there is no watching: Watch does
  // nothing). `busy_timeout`: the busy one, where shorter (zero: none); `busy_levels` is asked
  // for the priorities whose jobs wait for lanes once a round, from the watch's thread.
  StallWatch(std::chrono::milliseconds timeout, std::chrono::milliseconds busy_timeout = {},
             std::function<uint32_t()> busy_levels = nullptr);
  ~StallWatch();
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  void Watch(std::weak_ptr<EventStream> stream);

 private:
  void Loop();

  const std::chrono::milliseconds timeout_;
  // Zero where it does not apply: no busy timeout, one no shorter than timeout_, or no
  // busy_levels to ask.
  const std::chrono::milliseconds busy_timeout_;
  const std::function<uint32_t()> busy_levels_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::vector<std::weak_ptr<EventStream>> streams_;
  std::thread thread_;
};

}  // namespace gpupipe::rpc
