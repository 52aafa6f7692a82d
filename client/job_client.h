// A blocking client for gpupiped's JobService.
//
// Thread-safety: a JobClient may be used from several threads at once; each call runs its own
// RPC on the shared channel. The EventCallback runs on the calling thread.
#ifndef GPUPIPE_CLIENT_JOB_CLIENT_H_
#define GPUPIPE_CLIENT_JOB_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/result_assembler.h"
#include "gpupipe/v1/gpupipe.grpc.pb.h"
#include "gpupipe/v1/gpupipe.pb.h"

namespace gpupipe {
namespace client {

struct ClientOptions {
  // Deadline of each RPC, from its start. Must be positive.
  double deadline_seconds = 300;
};

// Called with every event of a Submit stream, in order, after the event was checked.
using EventCallback = std::function<void(const v1::JobEvent&)>;

// grpc::Status -> absl::Status with the same code (both number google.rpc.Code) and message.
absl::Status FromGrpcStatus(const grpc::Status& status);

class JobClient {
 public:
  // Connects lazily to `target` ("host:port", or any gRPC target URI) over an insecure channel;
  // fails only on invalid arguments, never because the server is down: that shows on the first
  // call as UNAVAILABLE.
  static absl::StatusOr<std::unique_ptr<JobClient>> Create(const std::string& target,
                                                           ClientOptions options = {});

  // Uses an existing channel (tests, custom credentials). `channel` must not be null.
  JobClient(std::shared_ptr<grpc::ChannelInterface> channel, ClientOptions options);

  JobClient(const JobClient&) = delete;
  JobClient& operator=(const JobClient&) = delete;

  absl::StatusOr<v1::DescribeResponse> Describe();

  // Runs one job and waits for its result. Errors carry the RPC's status, or the code and
  // message of the job's Done event, unchanged; a broken event stream (see ResultAssembler)
  // yields DATA_LOSS. On an error the RPC is cancelled. With request.dry_run the result holds
  // the plan and no output data.
  absl::StatusOr<JobResult> Submit(const v1::SubmitRequest& request, EventCallback on_event = {});

  const ClientOptions& options() const { return options_; }

 private:
  void SetDeadline(grpc::ClientContext* context) const;

  ClientOptions options_;
  std::unique_ptr<v1::JobService::Stub> stub_;
};

}  // namespace client
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_JOB_CLIENT_H_
