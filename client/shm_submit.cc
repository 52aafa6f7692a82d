#include "client/shm_submit.h"

#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/dtype.h"
#include "client/shared_memory.h"

namespace gpupipe {
namespace client {
namespace {

// A registered region, unregistered when it goes out of scope.
class Registration {
 public:
  Registration(JobClient& client, std::string id) : client_(client), id_(std::move(id)) {}
  ~Registration() { client_.UnregisterRegion(id_).IgnoreError(); }
  const std::string& id() const { return id_; }

 private:
  JobClient& client_;
  std::string id_;
};

absl::StatusOr<std::unique_ptr<Registration>> Register(JobClient& client, const SharedMemory& shm,
                                                       const RegionLease& lease) {
  absl::StatusOr<v1::RegisterRegionResponse> r =
      client.RegisterRegion(shm.name(), shm.size(), lease.id());
  if (!r.ok()) return r.status();
  return std::make_unique<Registration>(client, r->region_id());
}

}  // namespace

absl::StatusOr<JobResult> SubmitThroughSharedMemory(JobClient& client, v1::SubmitRequest request,
                                                    int64_t input_bytes, const InputFill& fill,
                                                    EventCallback on_event, ResultSink* sink) {
  request.mutable_input()->clear_data();
  absl::StatusOr<std::unique_ptr<SharedMemory>> in =
      SharedMemory::Create(std::max<int64_t>(input_bytes, 1), "gpupipe-in");
  if (!in.ok()) return in.status();
  if (absl::Status s = fill((*in)->data(), input_bytes); !s.ok()) return s;
  // Should this process die mid-job, the lease's end unregisters both regions at once.
  absl::StatusOr<std::unique_ptr<RegionLease>> lease = client.HoldRegions();
  if (!lease.ok()) return lease.status();
  absl::StatusOr<std::unique_ptr<Registration>> in_region = Register(client, **in, **lease);
  if (!in_region.ok()) return in_region.status();
  request.mutable_input_region()->set_region_id((*in_region)->id());
  request.mutable_input_region()->set_length(static_cast<uint64_t>(input_bytes));

  // The result's size comes from the daemon's plan.
  v1::SubmitRequest plan_only = request;
  plan_only.set_dry_run(true);
  plan_only.set_explain(true);
  absl::StatusOr<JobResult> planned = client.Submit(plan_only);
  if (!planned.ok()) return planned.status();
  const v1::Accepted& accepted = planned->accepted;
  absl::StatusOr<int64_t> out_bytes = TensorBytes(
      accepted.output_dtype(),
      std::vector<int64_t>(accepted.output_shape().begin(), accepted.output_shape().end()));
  if (!out_bytes.ok()) return out_bytes.status();
  if (request.dry_run()) return planned;

  absl::StatusOr<std::unique_ptr<SharedMemory>> out =
      SharedMemory::Create(std::max<int64_t>(*out_bytes, 1), "gpupipe-out");
  if (!out.ok()) return out.status();
  absl::StatusOr<std::unique_ptr<Registration>> out_region = Register(client, **out, **lease);
  if (!out_region.ok()) return out_region.status();
  request.mutable_output_region()->set_region_id((*out_region)->id());
  request.mutable_output_region()->set_length(static_cast<uint64_t>(*out_bytes));

  absl::StatusOr<JobResult> result = client.Submit(request, std::move(on_event));
  if (!result.ok()) return result;
  const std::vector<int64_t> shape(result->output.shape().begin(), result->output.shape().end());
  if (sink != nullptr) {
    if (absl::Status s = sink->Begin(result->output.dtype(), shape); !s.ok()) return s;
    if (*out_bytes > 0) {
      if (absl::Status s =
              sink->Write(0, absl::string_view((*out)->data(), static_cast<size_t>(*out_bytes)));
          !s.ok()) {
        return s;
      }
    }
  } else {
    result->output.set_data((*out)->data(), static_cast<size_t>(*out_bytes));
  }
  return result;
}

bool RegionsUnavailable(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      return absl::StrContains(status.message(), "shm_name");
    case absl::StatusCode::kPermissionDenied:
      // The daemon cannot see or may not map it, or the call is not from this host.
      return absl::StrContains(status.message(), "shm_name") ||
             absl::StrContains(status.message(), "regions are for clients");
    case absl::StatusCode::kUnavailable:
      return absl::StrContains(status.message(), "regions are off") ||
             absl::StrContains(status.message(), "cannot create shared memory");
    case absl::StatusCode::kResourceExhausted:
      // No room here (/dev/shm) or at the daemon (its region limits, page-locking).
      return absl::StrContains(status.message(), "bytes of shared memory") ||
             absl::StrContains(status.message(), "--max-region") ||
             absl::StrContains(status.message(), "--max-client-region") ||
             absl::StrContains(status.message(), "--max-regions") ||
             absl::StrContains(status.message(), "page-lock");
    case absl::StatusCode::kUnimplemented:
      return true;
    default:
      return false;
  }
}

bool IsLocalTarget(const std::string& target) {
  std::string t = target;
  if (absl::StrContains(t, ',')) return false;
  if (absl::StartsWith(t, "unix:") || absl::StartsWith(t, "unix-abstract:")) return true;
  for (const char* scheme : {"dns:///", "dns:", "ipv4:", "ipv6:"}) {
    if (absl::StartsWith(t, scheme)) {
      t = t.substr(std::string(scheme).size());
      break;
    }
  }
  // Strip the port: "[::1]:50051", "127.0.0.1:50051", "localhost:50051".
  std::string host = t;
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    host = close == std::string::npos ? host : host.substr(1, close - 1);
  } else if (const size_t colon = host.rfind(':');
             colon != std::string::npos && host.find(':') == colon) {
    host = host.substr(0, colon);
  }
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

}  // namespace client
}  // namespace gpupipe
