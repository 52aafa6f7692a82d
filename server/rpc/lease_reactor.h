// The HoldRegions call: sends the lease's id, then stays open until the client cancels it or
// goes away, or the service closes it at shutdown; the lease, and every region registered
// under it, ends with the call.
#pragma once

#include <grpcpp/grpcpp.h>

#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "gpupipe/v1/gpupipe.grpc.pb.h"
#include "server/engine/engine.h"

namespace gpupipe::rpc {

class LeaseReactor;

// The open lease calls, so that a shutdown can end them all (the server waits for open calls
// otherwise). Thread-safe. Recursive: a call that gRPC completes inline while CloseAll ends it
// removes itself on the same thread.
class OpenLeases {
 public:
  // False once CloseAll ran: the call must end at once.
  bool Add(LeaseReactor* call);
  void Remove(LeaseReactor* call);
  // Ends every open lease call with `status`; later calls end at once.
  void CloseAll(const grpc::Status& status);

 private:
  std::recursive_mutex mu_;
  bool closed_ = false;
  std::vector<LeaseReactor*> calls_;
};

class LeaseReactor final : public grpc::ServerWriteReactor<v1::RegionLease> {
 public:
  // `caller`: the token name, or why the call is refused. `engine` and `open` outlive the call.
  LeaseReactor(engine::Engine* engine, grpc::CallbackServerContext* context,
               const absl::StatusOr<std::string>& caller, OpenLeases* open);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  // Finishes the call with `status` (once; later calls do nothing).
  void End(const grpc::Status& status);

 private:
  engine::Engine* const engine_;
  OpenLeases* const open_;
  std::mutex mu_;
  std::string lease_;
  v1::RegionLease message_;
  bool writing_ = false;
  bool finished_ = false;
  grpc::Status pending_;  // the status to finish with once the write completes
  bool finish_after_write_ = false;
};

}  // namespace gpupipe::rpc
