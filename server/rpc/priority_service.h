// The priority listener's service (gpupiped --priority-listen): SubmitSmall on a sync-API
// server of its own, for high-priority small jobs that must not wait behind other traffic.
//
// Why a second server: gRPC's callback API runs every callback server and channel of a process
// on one pool of threads, so a flood of calls on the main address queues a high-priority call's
// request and reply behind its own, whatever the engine's priorities; a sync-API server serves
// its calls on threads of its own. The engine, its lanes, limits and stats are shared: this is
// another way in, not another daemon.
//
// It serves SubmitSmall only, for jobs of the listener's lowest priority and above (others are
// refused with PERMISSION_DENIED, marked as not accepted); Submit and Run answer
// FAILED_PRECONDITION and the other methods UNIMPLEMENTED: those belong on the main address.
// Each call holds one of the server's threads until its job is done; the server's thread limit
// (PriorityListenerThreads) bounds them, and a call beyond it is refused by gRPC with
// RESOURCE_EXHAUSTED.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

#include "gpupipe/v1/gpupipe.grpc.pb.h"
#include "server/engine/job/types.h"
#include "server/rpc/job_service.h"

namespace gpupipe::rpc {

// The threads the listener's server may have (its ResourceQuota's SetMaxThreads) to serve
// `max_calls` calls at once: one for each, and one more that takes the next call, which gRPC
// refuses with RESOURCE_EXHAUSTED when no other thread is left to wait for calls.
inline int PriorityListenerThreads(int max_calls) { return max_calls + 1; }

class PriorityJobService final : public v1::JobService::Service {
 public:
  // `jobs` must outlive the service and every call it serves.
  PriorityJobService(JobServiceImpl* jobs, engine::Priority lowest)
      : jobs_(jobs), lowest_(lowest) {}

  grpc::Status SubmitSmall(grpc::ServerContext* context, const v1::SubmitRequest* request,
                           v1::CompleteJob* response) override;
  grpc::Status Submit(grpc::ServerContext* context, const v1::SubmitRequest* request,
                      grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status Run(grpc::ServerContext* context,
                   grpc::ServerReaderWriter<v1::JobEvent, v1::RunRequest>* stream) override;

 private:
  JobServiceImpl* const jobs_;
  const engine::Priority lowest_;
};

}  // namespace gpupipe::rpc
