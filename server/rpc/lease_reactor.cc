#include "server/rpc/lease_reactor.h"

#include <algorithm>

#include "server/rpc/call_context.h"
#include "server/rpc/status_mapping.h"

namespace gpupipe::rpc {

bool OpenLeases::Add(LeaseReactor* call) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (closed_) return false;
  calls_.push_back(call);
  return true;
}

void OpenLeases::Remove(LeaseReactor* call) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  calls_.erase(std::remove(calls_.begin(), calls_.end(), call), calls_.end());
}

void OpenLeases::CloseAll(const grpc::Status& status) {
  // Under the lock: a call's OnDone removes it (and deletes it) only after taking the lock, so
  // every pointer held here is alive when End is called.
  std::lock_guard<std::recursive_mutex> lock(mu_);
  closed_ = true;
  const std::vector<LeaseReactor*> calls = calls_;
  for (LeaseReactor* call : calls) call->End(status);
}

LeaseReactor::LeaseReactor(engine::Engine* engine, grpc::CallbackServerContext* context,
                           const absl::StatusOr<std::string>& caller, OpenLeases* open)
    : engine_(engine), open_(open) {
  if (!caller.ok()) {
    End(ToGrpcStatus(caller.status()));
    return;
  }
  if (!open_->Add(this)) {
    End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
    return;
  }
  absl::StatusOr<std::string> lease = engine_->OpenRegionLease(ClientIdentity(*context, *caller));
  if (!lease.ok()) {
    End(ToGrpcStatus(lease.status()));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    lease_ = *lease;        // from here on OnDone ends it
    if (finished_) return;  // a shutdown ended the call meanwhile
    message_.set_lease_id(lease_);
    writing_ = true;
  }
  StartWrite(&message_);
}

void LeaseReactor::OnWriteDone(bool ok) {
  bool finish = false;
  grpc::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (finish_after_write_) {
      finish = true;
      status = pending_;
    } else if (!ok) {
      finished_ = true;
      finish = true;
      status = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    }
  }
  if (finish) Finish(status);
  // Otherwise the call stays open: the lease lasts until OnCancel or End.
}

void LeaseReactor::OnCancel() {
  End(grpc::Status(grpc::StatusCode::CANCELLED, "the lease was cancelled"));
}

void LeaseReactor::End(const grpc::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    finished_ = true;
    if (writing_) {
      // Finish must wait for the write in flight; OnWriteDone finishes.
      finish_after_write_ = true;
      pending_ = status;
      return;
    }
  }
  Finish(status);
}

void LeaseReactor::OnDone() {
  std::string lease;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lease = lease_;
  }
  open_->Remove(this);
  if (!lease.empty()) engine_->EndRegionLease(lease);
  delete this;
}

}  // namespace gpupipe::rpc
