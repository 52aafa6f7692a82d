// The gpupipe.v1.JobService implementation: a thin callback-API layer that decodes requests,
// hands them to the engine and writes the engine's events back. No reaction ever blocks: the
// engine's threads produce events, and at most `max_queued_events` of them wait per call, so a
// slow reader holds a bounded amount of server memory and its job waits instead.
#pragma once

#include <string>

#include "gpupipe/v1/gpupipe.grpc.pb.h"
#include "server/engine/engine.h"

namespace gpupipe::rpc {

struct JobServiceOptions {
  int max_queued_events = 4;
  std::string server_version;
};

class JobServiceImpl final : public v1::JobService::CallbackService {
 public:
  // `engine` must outlive the service and every call it serves.
  JobServiceImpl(engine::Engine* engine, JobServiceOptions options);

  grpc::ServerWriteReactor<v1::JobEvent>* Submit(grpc::CallbackServerContext* context,
                                                 const v1::SubmitRequest* request) override;
  grpc::ServerBidiReactor<v1::RunRequest, v1::JobEvent>* Run(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Describe(grpc::CallbackServerContext* context,
                                     const v1::DescribeRequest* request,
                                     v1::DescribeResponse* response) override;

 private:
  engine::Engine* engine_;
  JobServiceOptions options_;
};

}  // namespace gpupipe::rpc
