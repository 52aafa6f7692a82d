#include "server/rpc/job_service.h"

#include <limits>
#include <new>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "common/process_cpu.h"
#include "server/rpc/call_context.h"
#include "server/rpc/convert.h"
#include "server/rpc/status_mapping.h"
#include "server/rpc/submit_job.h"
#include "server/rpc/run_reactor.h"
#include "server/rpc/submit_reactor.h"
#include "server/rpc/submit_small_reactor.h"

namespace gpupipe::rpc {

JobServiceImpl::JobServiceImpl(engine::Engine* engine, JobServiceOptions options)
    : engine_(engine),
      options_(std::move(options)),
      stall_watch_(options_.reader_idle_timeout, options_.reader_idle_busy_timeout,
                   [engine] { return engine->levels_waiting_for_lanes(); }),
      unread_(options_.unread),
      runs_(engine, options_.upload_idle_timeout, options_.waiting_runs) {}

absl::StatusOr<std::string> JobServiceImpl::Authenticate(
    const grpc::ServerContextBase& context) const {
  if (options_.authenticator == nullptr) return std::string();
  absl::StatusOr<std::string> caller = options_.authenticator->Authenticate(context);
  if (!caller.ok()) ++unauthenticated_;
  return caller;
}

v1::StatsResponse JobServiceImpl::Stats(bool with_clients, bool lane_activity) const {
  v1::StatsResponse stats = EncodeStats(
      engine_->Stats(with_clients, lane_activity), options_.server_version,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  stats.set_process_cpu_seconds(ProcessCpuSeconds());
  if (const int64_t n = unauthenticated_.load(); n > 0) {
    (*stats.mutable_rejected())["unauthenticated"] = n;
  }
  v1::PoolStats* pool = stats.add_pools();
  pool->set_name("unread_results");
  pool->set_used_bytes(unread_.total_bytes());
  pool->set_capacity_bytes(options_.unread.max_bytes);
  if (with_clients) {
    // A client may hold unread results with no job left, so it may need an entry of its own.
    std::unordered_map<std::string, int64_t> unread;
    for (auto& [client, bytes] : unread_.clients()) unread.emplace(std::move(client), bytes);
    for (v1::ClientStats& c : *stats.mutable_clients()) {
      if (auto it = unread.find(c.client()); it != unread.end()) {
        c.set_unread_bytes(it->second);
        unread.erase(it);
      }
    }
    for (const auto& [client, bytes] : unread) {
      v1::ClientStats* entry = stats.add_clients();
      entry->set_client(client);
      entry->set_unread_bytes(bytes);
    }
  }
  return stats;
}

grpc::ServerUnaryReactor* JobServiceImpl::Answer(
    grpc::CallbackServerContext* context,
    const std::function<absl::Status(const std::string& caller)>& fill_response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<std::string> caller = Authenticate(*context);
  if (!caller.ok()) {
    reactor->Finish(ToGrpcStatus(caller.status()));
    return reactor;
  }
  try {
    reactor->Finish(ToGrpcStatus(fill_response(*caller)));
  } catch (const std::bad_alloc&) {
    reactor->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 "the server ran out of memory for this request"));
  }
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::GetStats(grpc::CallbackServerContext* context,
                                                   const v1::StatsRequest* request,
                                                   v1::StatsResponse* response) {
  return Answer(context, [&](const std::string&) {
    *response = Stats(/*with_clients=*/true, request->lane_activity());
    return absl::OkStatus();
  });
}

grpc::ServerWriteReactor<v1::JobEvent>* JobServiceImpl::Submit(grpc::CallbackServerContext* context,
                                                               const v1::SubmitRequest* request) {
  return new SubmitReactor(engine_, context, request, Authenticate(*context),
                           options_.max_queued_events, &stall_watch_, &unread_,
                           &active_calls_);
}

grpc::ServerUnaryReactor* JobServiceImpl::SubmitSmall(grpc::CallbackServerContext* context,
                                                       const v1::SubmitRequest* request,
                                                       v1::CompleteJob* response) {
  return new SubmitSmallReactor(engine_, context, request, response, Authenticate(*context),
                                options_.max_queued_events, &stall_watch_, &unread_,
                                &active_calls_);
}

void JobServiceImpl::StartListenerCall(grpc::ServerContext* context,
                                       const v1::SubmitRequest* request,
                                       const absl::StatusOr<std::string>& authenticated,
                                       engine::Priority lowest, absl::string_view listener,
                                       std::chrono::steady_clock::time_point received,
                                       const std::shared_ptr<EventStream>& stream) {
  stall_watch_.Watch(stream);
  absl::StatusOr<std::string> caller = authenticated;
  // An unknown value passes here and is refused as INVALID_ARGUMENT with the request's other
  // faults.
  const absl::StatusOr<engine::Priority> priority = DecodePriority(request->priority());
  if (caller.ok() && priority.ok() && *priority < lowest) {
    caller = absl::PermissionDeniedError(absl::StrCat(
        listener, " takes jobs of priority ", engine::PriorityName(lowest),
        " and above; this one is ", engine::PriorityName(*priority),
        ": send it to the daemon's main address (gpupiped --priority-min)"));
    engine_->CountRefusal(caller.status());
  }
  StartJobCall(engine_, context, request, caller, received, options_.max_queued_events,
               /*one_message=*/true, &unread_, stream);
}

void JobServiceImpl::RefuseListenerCall(grpc::ServerContext* context,
                                        const absl::Status& refusal,
                                        const std::shared_ptr<EventStream>& stream) {
  engine_->CountRefusal(refusal);
  context->AddTrailingMetadata(kAcceptedMetadataKey, "0");
  stream->FinishNow(ToGrpcStatus(refusal));
}

grpc::ServerBidiReactor<v1::RunRequest, v1::JobEvent>* JobServiceImpl::Run(
    grpc::CallbackServerContext* context) {
  return new RunReactor(engine_, context, Authenticate(*context), options_.max_queued_events,
                        &stall_watch_, options_.upload_idle_timeout, &runs_,
                        options_.max_run_streams, &unread_, &active_calls_);
}

grpc::ServerUnaryReactor* JobServiceImpl::Describe(grpc::CallbackServerContext* context,
                                                   const v1::DescribeRequest* /*request*/,
                                                   v1::DescribeResponse* response) {
  return Answer(context, [&](const std::string&) {
    *response = EncodeDescription(engine_->Describe(), options_.server_version);
    response->mutable_limits()->set_reader_idle_timeout_ms(options_.reader_idle_timeout.count());
    response->mutable_limits()->set_reader_idle_busy_timeout_ms(
        options_.reader_idle_timeout.count() > 0 ? options_.reader_idle_busy_timeout.count() : 0);
    response->mutable_limits()->set_max_run_streams(options_.max_run_streams);
    response->mutable_limits()->set_max_unread_bytes(options_.unread.max_bytes);
    response->mutable_limits()->set_max_client_unread_bytes(options_.unread.max_client_bytes);
    response->set_region_fd_socket(options_.region_fd_socket);
    if (!options_.priority_address.empty()) {
      v1::PriorityListener* listener = response->mutable_priority_listener();
      listener->set_address(options_.priority_address);
      listener->set_lowest(EncodePriority(options_.priority_lowest));
      listener->set_max_calls(options_.priority_max_calls);
      listener->set_threads(options_.priority_threads);
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobServiceImpl::RegisterRegion(grpc::CallbackServerContext* context,
                                                         const v1::RegisterRegionRequest* request,
                                                         v1::RegisterRegionResponse* response) {
  return Answer(context, [&](const std::string& caller) {
    if (request->size() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError("size: out of range");
    }
    if (!request->shm_name().empty() + !request->cuda_ipc_handle().empty() +
            !request->fd_ticket().empty() !=
        1) {
      return absl::InvalidArgumentError(
          "shm_name, cuda_ipc_handle, fd_ticket: give exactly one (a shared-memory object's "
          "name, a CUDA IPC handle, or the ticket of a descriptor passed over the region socket)");
    }
    if (!IsLocalPeer(context->peer())) {
      return absl::PermissionDeniedError(
          absl::StrCat("regions are for clients on the daemon's host (a Unix socket or a loopback "
                       "address); this call comes from ",
                       context->peer()));
    }
    const std::string client = ClientIdentity(*context, caller);
    const int64_t size = static_cast<int64_t>(request->size());
    absl::StatusOr<engine::RegionInfo> region;
    if (!request->fd_ticket().empty()) {
      if (options_.fd_tickets == nullptr) {
        return absl::FailedPreconditionError(
            "fd_ticket: this daemon has no region socket (gpupiped --region-fd-socket PATH)");
      }
      absl::StatusOr<int> fd = options_.fd_tickets->Take(request->fd_ticket());
      if (!fd.ok()) return fd.status();
      region = engine_->RegisterFdRegion(client, *fd, size, request->lease_id());
    } else if (!request->cuda_ipc_handle().empty()) {
      region = engine_->RegisterCudaIpcRegion(client, request->cuda_ipc_handle(), size,
                                              request->lease_id());
    } else {
      region = engine_->RegisterRegion(client, request->shm_name(), size, request->lease_id());
    }
    if (!region.ok()) return region.status();
    response->set_region_id(region->id);
    response->set_size(static_cast<uint64_t>(region->size));
    response->set_pinned(region->pinned);
    response->set_device(region->device);
    return absl::OkStatus();
  });
}

grpc::ServerWriteReactor<v1::RegionLease>* JobServiceImpl::HoldRegions(
    grpc::CallbackServerContext* context, const v1::HoldRegionsRequest* /*request*/) {
  return new LeaseReactor(engine_, context, Authenticate(*context), &leases_);
}

grpc::ServerUnaryReactor* JobServiceImpl::UnregisterRegion(
    grpc::CallbackServerContext* context, const v1::UnregisterRegionRequest* request,
    v1::UnregisterRegionResponse* /*response*/) {
  return Answer(context, [&](const std::string& caller) {
    return engine_->UnregisterRegion(ClientIdentity(*context, caller), request->region_id());
  });
}

}  // namespace gpupipe::rpc
