#include "server/rpc/job_service.h"

#include "server/rpc/convert.h"
#include "server/rpc/run_reactor.h"
#include "server/rpc/submit_reactor.h"

namespace gpupipe::rpc {

JobServiceImpl::JobServiceImpl(engine::Engine* engine, JobServiceOptions options)
    : engine_(engine), options_(std::move(options)) {}

grpc::ServerWriteReactor<v1::JobEvent>* JobServiceImpl::Submit(
    grpc::CallbackServerContext* /*context*/, const v1::SubmitRequest* request) {
  return new SubmitReactor(engine_, request, options_.max_queued_events);
}

grpc::ServerBidiReactor<v1::RunRequest, v1::JobEvent>* JobServiceImpl::Run(
    grpc::CallbackServerContext* context) {
  return new RunReactor(engine_, context, options_.max_queued_events);
}

grpc::ServerUnaryReactor* JobServiceImpl::Describe(grpc::CallbackServerContext* context,
                                                   const v1::DescribeRequest* /*request*/,
                                                   v1::DescribeResponse* response) {
  *response = EncodeDescription(engine_->Describe(), options_.server_version);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace gpupipe::rpc
