// The gpupipe.v1.JobService implementation: a thin callback-API layer that decodes requests,
// hands them to the engine and writes the engine's events back. No reaction ever blocks: the
// engine's threads produce events, and at most `max_queued_events` of them wait per call, so a
// slow reader holds a bounded amount of server memory and its job waits instead, for at most
// the reader idle timeout. No exception crosses a reaction: a failed allocation answers
// RESOURCE_EXHAUSTED and the call finishes. Where tokens are required, a call without a valid
// one gets UNAUTHENTICATED before anything else happens.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "gpupipe/v1/gpupipe.grpc.pb.h"
#include "server/engine/engine.h"
#include "server/rpc/active_calls.h"
#include "server/rpc/event_stream.h"
#include "server/rpc/fd_tickets.h"
#include "server/rpc/lease_reactor.h"
#include "server/rpc/run_groups.h"
#include "server/rpc/stall_watch.h"
#include "server/rpc/token_auth.h"
#include "server/rpc/unread_results.h"

namespace gpupipe::rpc {

struct JobServiceOptions {
  int max_queued_events = 4;
  std::string server_version;
  // A call whose event write waits this long (its client reads nothing) is cancelled and its
  // job ends with DEADLINE_EXCEEDED (stall_watch.h); a Run client that has not half-closed this
  // long after its whole input and successful job gets its Done. 0: no limit.
  std::chrono::milliseconds reader_idle_timeout{30000};
  // The same, where shorter, for a call whose job holds its lane waiting for its reader while
  // jobs of its priority wait for a lane (stall_watch.h). 0: only reader_idle_timeout applies,
  // and a reader_idle_timeout of 0 turns both off.
  std::chrono::milliseconds reader_idle_busy_timeout{10000};
  // A Run call whose first message (the spec) has not come this long after the call began ends
  // with DEADLINE_EXCEEDED (the engine's upload idle timeout covers the data after it). 0: no
  // limit.
  std::chrono::milliseconds upload_idle_timeout{30000};
  // The most calls one Run may be split over (RunRequest.stripes); each may park one data
  // message (under 1 MiB) while it waits for its turn.
  int max_run_streams = 16;
  // Runs split over calls that may wait for their calls at once (RunGroupLimits).
  RunGroupLimits waiting_runs;
  // Results held for clients that have not read them (unread_results.h).
  UnreadLimits unread;
  // Checks every call's token (token_auth.h); null: calls need none. Must outlive the service.
  const Authenticator* authenticator = nullptr;
  // The descriptors passed over the region socket (fd_socket.h), which RegisterRegion's
  // fd_ticket names, and that socket's path for Describe; null and empty: none. Must outlive
  // the service.
  FdTickets* fd_tickets = nullptr;
  std::string region_fd_socket;
  // The priority listener, for Describe (priority_listener.h); no address: none.
  std::string priority_address;
  engine::Priority priority_lowest = engine::Priority::kHigh;
  int priority_max_calls = 0;
  int priority_threads = 0;
};

class JobServiceImpl final : public v1::JobService::CallbackService {
 public:
  // `engine` must outlive the service and every call it serves.
  JobServiceImpl(engine::Engine* engine, JobServiceOptions options);

  grpc::ServerWriteReactor<v1::JobEvent>* Submit(grpc::CallbackServerContext* context,
                                                 const v1::SubmitRequest* request) override;
  grpc::ServerUnaryReactor* SubmitSmall(grpc::CallbackServerContext* context,
                                        const v1::SubmitRequest* request,
                                        v1::CompleteJob* response) override;
  grpc::ServerBidiReactor<v1::RunRequest, v1::JobEvent>* Run(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Describe(grpc::CallbackServerContext* context,
                                     const v1::DescribeRequest* request,
                                     v1::DescribeResponse* response) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context,
                                     const v1::StatsRequest* request,
                                     v1::StatsResponse* response) override;
  grpc::ServerUnaryReactor* RegisterRegion(grpc::CallbackServerContext* context,
                                           const v1::RegisterRegionRequest* request,
                                           v1::RegisterRegionResponse* response) override;
  grpc::ServerUnaryReactor* UnregisterRegion(grpc::CallbackServerContext* context,
                                             const v1::UnregisterRegionRequest* request,
                                             v1::UnregisterRegionResponse* response) override;
  grpc::ServerWriteReactor<v1::RegionLease>* HoldRegions(
      grpc::CallbackServerContext* context, const v1::HoldRegionsRequest* request) override;

  // SubmitSmall calls served by another server over this service's engine (the priority
  // listener, priority_listener.h), with the same authentication, limits, stall watch and
  // accounting as this service's own. A call begins (it then counts among the calls a
  // shutdown waits for), is started or refused, and ends, once its result was sent.
  void BeginListenerCall() { active_calls_.Begin(); }
  void EndListenerCall() { active_calls_.End(); }
  // The caller's token name (empty where none is required), or UNAUTHENTICATED (counted
  // among the calls refused for it).
  absl::StatusOr<std::string> Authenticate(const grpc::ServerContextBase& context) const;
  // Starts the call's job on `stream` (a HoldWholeJob stream whose writer is the call) as
  // SubmitSmallReactor does, for `caller` (Authenticate's answer), except that a job below
  // `lowest` of a caller with a valid token is refused with PERMISSION_DENIED naming
  // `listener`, marked as not accepted. `request` and `context` must live until the call ends.
  void StartListenerCall(grpc::ServerContext* context, const v1::SubmitRequest* request,
                         const absl::StatusOr<std::string>& caller, engine::Priority lowest,
                         absl::string_view listener,
                         std::chrono::steady_clock::time_point received,
                         const std::shared_ptr<EventStream>& stream);
  // Ends the call at once with `refusal` (counted among the engine's refusals), marked as not
  // accepted.
  void RefuseListenerCall(grpc::ServerContext* context, const absl::Status& refusal,
                          const std::shared_ptr<EventStream>& stream);
  int max_queued_events() const { return options_.max_queued_events; }
  // Names the priority listener in Describe; before the service takes calls.
  void SetPriorityListener(std::string address, engine::Priority lowest, int max_calls,
                           int threads) {
    options_.priority_address = std::move(address);
    options_.priority_lowest = lowest;
    options_.priority_max_calls = max_calls;
    options_.priority_threads = threads;
  }

  // Ends every HoldRegions call (UNAVAILABLE) and every later one at once: for a shutdown,
  // before the server waits for its calls.
  void CloseLeases() {
    leases_.CloseAll(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
  }

  // The figures GetStats answers with (also the daemon's Prometheus metrics): the engine's,
  // with the calls this layer refused (no valid token) among the refusals and the results held
  // unread (a pool, and per client).
  v1::StatsResponse Stats(bool with_clients = true, bool lane_activity = false) const;

  // After the last Submit or Run call began, how long WaitForCalls waits for another.
  static constexpr std::chrono::milliseconds kQuietBeforeStop{200};

  // Waits until every Submit and Run call has finished (its last event and status sent) and
  // none began for kQuietBeforeStop, or `deadline` passes; true when none is left. For a
  // shutdown, once the engine has drained. The quiet time is for clients that balance over
  // several daemons: they stop sending here once they see this daemon NOT_SERVING, and until
  // then the engine refuses their jobs marked as not accepted, which they send elsewhere. A
  // call that reached a server already shut down would be cancelled instead, unmarked (gRPC
  // does not run it, but the client cannot know).
  bool WaitForCalls(std::chrono::steady_clock::time_point deadline) {
    return active_calls_.WaitIdle(deadline, kQuietBeforeStop);
  }

 private:
  // A unary call: authenticated, then answered with what `fill_response` wrote and the status
  // it returned (or RESOURCE_EXHAUSTED when memory runs out meanwhile). It is given the
  // caller's token name.
  grpc::ServerUnaryReactor* Answer(
      grpc::CallbackServerContext* context,
      const std::function<absl::Status(const std::string& caller)>& fill_response);

  engine::Engine* engine_;
  JobServiceOptions options_;
  StallWatch stall_watch_;
  UnreadResults unread_;
  ActiveCalls active_calls_;
  OpenLeases leases_;
  RunGroups runs_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  mutable std::atomic<int64_t> unauthenticated_{0};
};

}  // namespace gpupipe::rpc
