// The priority listener (gpupiped --priority-listen): SubmitSmall on a server of its own whose
// calls run on threads of its own, for high-priority small jobs that must not wait behind the
// rest of the daemon's traffic.
//
// Why a second server: gRPC's callback API runs every callback server and channel of a process
// on one pool of threads, so under a flood of calls on the main address a high-priority call's
// request and reply queue behind the flood's there, whatever the engine's priorities. This
// server serves SubmitSmall through the async API on a completion queue that only its own
// threads poll. The engine, its lanes, limits and stats are the main service's: this is
// another way in, not another daemon.
//
// A call goes as SubmitSmallReactor's does (the job service's StartListenerCall): the token,
// then the priority (jobs below `lowest` get PERMISSION_DENIED), then the job, its events held
// until its CompleteJob, a reader that stops reading cancelled by the stall watch, a client that
// goes away cancelling its job. At most `max_calls` calls of callers with a valid token are in
// progress at once; one more is refused with RESOURCE_EXHAUSTED. A call without a valid token
// is refused for that first and takes no place, so such calls cannot keep callers with tokens
// out. Refusals are marked as not accepted. Submit and Run answer
// FAILED_PRECONDITION, the other methods UNIMPLEMENTED: they belong on the main address. Those
// refusals run on the listener's threads too: it has no sync-API method, so no call waits for a
// thread of gRPC's, and a flood of them is refused as fast as they come.
//
// Thread safety: Start and Stop from one thread; the calls run on the listener's threads and
// the engine's.
#pragma once

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gpupipe/v1/gpupipe.grpc.pb.h"
#include "server/engine/job/types.h"
#include "server/rpc/job_service.h"

namespace gpupipe::rpc {

struct PriorityListenerOptions {
  engine::Priority lowest = engine::Priority::kHigh;
  int max_calls = 64;
  // Threads that poll the listener's completion queue: they read requests, run small jobs
  // directly (engine/scheduling/direct_run.h) and send replies.
  int threads = 2;
};

class PriorityListener {
 public:
  // Registers the listener's service and completion queue on `builder`, which must be built
  // (BuildAndStart) before Start. `jobs` must outlive the listener.
  PriorityListener(JobServiceImpl* jobs, PriorityListenerOptions options,
                   grpc::ServerBuilder* builder);
  ~PriorityListener();
  PriorityListener(const PriorityListener&) = delete;
  PriorityListener& operator=(const PriorityListener&) = delete;

  // Starts taking calls.
  void Start();
  // After the server's Shutdown (which ends every call, and which it needs): waits for every
  // call to be over, then stops the threads. Called by the destructor too.
  void Stop();

  // Calls of callers with a valid token in progress (for tests).
  int calls_in_progress() const { return in_progress_.load(); }

 private:
  class Service;
  class Handler;
  class Live;
  class Call;
  class Refusal;

  // Waits for the next SubmitSmall call, or the next call of any other method.
  void PostCall();
  void PostRefusal();
  void Poll();

  JobServiceImpl* const jobs_;
  const PriorityListenerOptions options_;
  std::unique_ptr<Service> service_;
  grpc::AsyncGenericService generic_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::vector<std::thread> threads_;
  std::atomic<int> in_progress_{0};
  // Post and Stop: no call is requested once the queue is shutting down.
  std::mutex post_mu_;
  bool stopping_ = false;
  bool started_ = false;
  // Calls alive (Call::Live).
  std::mutex live_mu_;
  std::condition_variable none_live_;
  int live_ = 0;
};

}  // namespace gpupipe::rpc
