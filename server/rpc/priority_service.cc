#include "server/rpc/priority_service.h"

#include "server/rpc/status_mapping.h"

namespace gpupipe::rpc {
namespace {

constexpr char kListenerName[] = "the priority listener";

grpc::Status OnlySubmitSmall(grpc::ServerContext* context) {
  context->AddTrailingMetadata(kAcceptedMetadataKey, "0");
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      "the priority listener takes SubmitSmall only (a job whose result fits "
                      "one message): send Submit and Run to the daemon's main address");
}

}  // namespace

grpc::Status PriorityJobService::SubmitSmall(grpc::ServerContext* context,
                                             const v1::SubmitRequest* request,
                                             v1::CompleteJob* response) {
  return jobs_->SubmitSmallHere(context, request, response, lowest_, kListenerName);
}

grpc::Status PriorityJobService::Submit(grpc::ServerContext* context,
                                        const v1::SubmitRequest* /*request*/,
                                        grpc::ServerWriter<v1::JobEvent>* /*writer*/) {
  return OnlySubmitSmall(context);
}

grpc::Status PriorityJobService::Run(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::JobEvent, v1::RunRequest>* /*stream*/) {
  return OnlySubmitSmall(context);
}

}  // namespace gpupipe::rpc
