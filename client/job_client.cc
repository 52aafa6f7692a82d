#include "client/job_client.h"

#include <algorithm>
#include <optional>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/fd_passing.h"
#include "common/pem.h"
#include "client/striped_run.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace gpupipe {
namespace client {

namespace {

// Feeds every event of `stream` (a Submit reader) to `assembler`, then
// to `on_event`, and returns the error of the first event the assembler rejected (a protocol
// breach, a failed Done, or its sink's error; OK if none). Then it stops the job rather than
// wait for the rest of it (after a Done the server is finishing anyway), and drains the stream,
// as Finish requires.
template <typename Stream>
absl::Status ReadJobEvents(Stream& stream, grpc::ClientContext& context,
                           ResultAssembler& assembler, const EventCallback& on_event) {
  absl::Status stream_error;
  v1::JobEvent event;
  while (stream.Read(&event)) {
    // The parts of a CompleteJob one by one, each seen by `on_event` once the assembler took
    // it, as separate events would be (so a failed job's Accepted is still seen).
    absl::Status s = event.has_complete() && assembler.accepted()
                         ? absl::DataLossError("protocol error: CompleteJob after other events")
                         : ForEachEvent(event, [&](const v1::JobEvent& part) {
                             absl::Status added = assembler.Add(part);
                             if (added.ok() && on_event) on_event(part);
                             return added;
                           });
    if (!s.ok()) {
      stream_error = std::move(s);
      break;
    }
  }
  if (!stream_error.ok()) {
    if (!assembler.done()) context.TryCancel();
    while (stream.Read(&event)) {
    }
  }
  return stream_error;
}

// The arguments of every channel Create makes for `target` (ServiceConfigJson).
grpc::ChannelArguments ChannelArgs(const ChannelTarget& target) {
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(ServiceConfigJson(/*health_checks=*/target.balanced));
  // On by default in this gRPC, but the policy above and the transparent retry of calls that
  // never reached a daemon depend on it.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 1);
  return args;
}

}  // namespace

bool IsMetadataValue(std::string_view value) {
  return std::all_of(value.begin(), value.end(), [](char c) { return c >= ' ' && c <= '~'; });
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  const int code = static_cast<int>(status.error_code());
  return absl::Status(code > 0 && code <= 16 ? static_cast<absl::StatusCode>(code)
                                             : absl::StatusCode::kUnknown,
                      status.error_message());
}

absl::StatusOr<std::unique_ptr<JobClient>> JobClient::Create(const std::string& target,
                                                             ClientOptions options) {
  if (!(options.deadline_seconds > 0) || !std::isfinite(options.deadline_seconds)) {
    return absl::InvalidArgumentError(
        absl::StrCat("deadline must be a positive number of seconds, got ",
                     options.deadline_seconds));
  }
  if (options.tls_cert_pem.empty() != options.tls_key_pem.empty()) {
    return absl::InvalidArgumentError("a TLS client certificate and its key go together");
  }
  for (auto [name, pem, kind] :
       {std::tuple{"tls_ca_pem", &options.tls_ca_pem, PemKind::kCertificate},
        std::tuple{"tls_cert_pem", &options.tls_cert_pem, PemKind::kCertificate},
        std::tuple{"tls_key_pem", &options.tls_key_pem, PemKind::kPrivateKey}}) {
    if (pem->empty()) continue;
    if (absl::Status s = CheckPem(*pem, kind); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("ClientOptions::", name, ": ", s.message()));
    }
  }
  // Both travel as metadata, whose values gRPC takes as printable ASCII only (it aborts the
  // process on anything else).
  for (const auto& [name, value] : {std::pair<const char*, const std::string&>{
                                        "client id", options.client_id},
                                    {"token", options.token}}) {
    if (!IsMetadataValue(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ", name, " holds a byte gRPC metadata cannot carry (printable ASCII, ",
                       "space to '~', only)"));
    }
  }
  if (options.submit_attempts < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("submit_attempts must be 1 or more, got ", options.submit_attempts));
  }
  absl::StatusOr<ChannelTarget> resolved = ResolveTarget(target);
  if (!resolved.ok()) return resolved.status();
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options.tls_ca_pem.empty() || !options.tls_cert_pem.empty()) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = options.tls_ca_pem;
    tls.pem_cert_chain = options.tls_cert_pem;
    tls.pem_private_key = options.tls_key_pem;
    credentials = grpc::SslCredentials(tls);
  }
  const ChannelTarget channel_target = *std::move(resolved);
  grpc::ChannelArguments channel_args = ChannelArgs(channel_target);
  if (options.own_connection) channel_args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(channel_target.uri, credentials, channel_args);
  auto client = std::make_unique<JobClient>(std::move(channel), options);
  client->target_ = channel_target;
  if (!options.priority_target.empty()) {
    absl::StatusOr<ChannelTarget> priority = ResolveTarget(options.priority_target);
    if (!priority.ok()) {
      return absl::Status(priority.status().code(),
                          absl::StrCat("priority target: ", priority.status().message()));
    }
    // A connection of its own: the point is that its calls queue behind no others.
    grpc::ChannelArguments args = ChannelArgs(*priority);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    client->priority_stub_ =
        v1::JobService::NewStub(grpc::CreateCustomChannel(priority->uri, credentials, args));
  }
  if (client->priority_stub_ == nullptr) {
    // High-priority jobs get a connection of their own to the main target as well: gRPC
    // would otherwise queue their frames behind every other call of this process's channel.
    grpc::ChannelArguments args = ChannelArgs(channel_target);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("gpupipe.high_priority", 1);
    client->high_stub_ =
        v1::JobService::NewStub(grpc::CreateCustomChannel(channel_target.uri, credentials, args));
  }
  client->make_channel_ = [channel_target, credentials](int i) {
    // A subchannel pool of its own gives the channel a connection of its own: the calls of a
    // split Run then move over separate HTTP/2 connections.
    grpc::ChannelArguments args = ChannelArgs(channel_target);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("gpupipe.run_call", i);
    return std::static_pointer_cast<grpc::ChannelInterface>(
        grpc::CreateCustomChannel(channel_target.uri, credentials, args));
  };
  return client;
}

JobClient::JobClient(std::shared_ptr<grpc::ChannelInterface> channel, ClientOptions options)
    : options_(options), channel_(std::move(channel)), stub_(v1::JobService::NewStub(channel_)) {
  options_.submit_attempts = std::max(options_.submit_attempts, 1);
}

absl::Status JobClient::CheckOneDaemon() const {
  if (target_.addresses <= 1) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "regions belong to one daemon, and this client balances over several: use a target that "
      "names one");
}

absl::StatusOr<v1::StatsResponse> JobClient::GetStats(bool lane_activity) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::StatsResponse response;
  v1::StatsRequest request;
  request.set_lane_activity(lane_activity);
  const grpc::Status status = stub_->GetStats(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<std::string> JobClient::Health(const std::string& service) {
  grpc::ClientContext context;
  SetDeadline(&context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status =
      grpc::health::v1::Health::NewStub(channel_)->Check(&context, request, &response);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) return std::string("SERVICE_UNKNOWN");
  if (!status.ok()) return FromGrpcStatus(status);
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
}

void JobClient::SetDeadline(grpc::ClientContext* context) const {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::duration_cast<std::chrono::system_clock::duration>(
                            std::chrono::duration<double>(options_.deadline_seconds)));
  if (!options_.client_id.empty()) context->AddMetadata("client-id", options_.client_id);
  if (!options_.token.empty()) context->AddMetadata("authorization", "Bearer " + options_.token);
}

absl::StatusOr<v1::DescribeResponse> JobClient::Describe() {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::DescribeResponse response;
  grpc::Status status = stub_->Describe(&context, v1::DescribeRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::RegisterRegionResponse> JobClient::RegisterRegion(const std::string& shm_name,
                                                                     int64_t size,
                                                                     const std::string& lease_id) {
  if (absl::Status one = CheckOneDaemon(); !one.ok()) return one;
  v1::RegisterRegionRequest request;
  request.set_shm_name(shm_name);
  return Register(std::move(request), size, lease_id);
}

absl::StatusOr<v1::RegisterRegionResponse> JobClient::RegisterRegionFd(int fd, int64_t size,
                                                                       const std::string& lease_id,
                                                                       std::string socket_path) {
  if (absl::Status one = CheckOneDaemon(); !one.ok()) return one;
  if (socket_path.empty()) {
    absl::StatusOr<v1::DescribeResponse> description = Describe();
    if (!description.ok()) return description.status();
    socket_path = description->region_fd_socket();
    if (socket_path.empty()) {
      return absl::FailedPreconditionError(
          "the daemon has no region socket for descriptors (gpupiped --region-fd-socket PATH)");
    }
  }
  absl::StatusOr<std::string> ticket = PassDescriptor(socket_path, fd);
  if (!ticket.ok()) return ticket.status();
  v1::RegisterRegionRequest request;
  request.set_fd_ticket(*ticket);
  return Register(std::move(request), size, lease_id);
}

absl::StatusOr<v1::RegisterRegionResponse> JobClient::RegisterCudaRegion(
    const std::string& handle, int64_t size, const std::string& lease_id) {
  if (absl::Status one = CheckOneDaemon(); !one.ok()) return one;
  v1::RegisterRegionRequest request;
  request.set_cuda_ipc_handle(handle);
  return Register(std::move(request), size, lease_id);
}

absl::StatusOr<v1::RegisterRegionResponse> JobClient::Register(v1::RegisterRegionRequest request,
                                                               int64_t size,
                                                               const std::string& lease_id) {
  request.set_size(static_cast<uint64_t>(size));
  request.set_lease_id(lease_id);
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::RegisterRegionResponse response;
  grpc::Status status = stub_->RegisterRegion(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

RegionLease::~RegionLease() {
  context_->TryCancel();
  reader_->Finish().ok();  // CANCELLED, as asked
}

absl::StatusOr<std::unique_ptr<RegionLease>> JobClient::HoldRegions() {
  if (absl::Status one = CheckOneDaemon(); !one.ok()) return one;
  auto context = std::make_unique<grpc::ClientContext>();
  // No deadline: the call lasts as long as the lease. The client-id and token as every call's.
  SetDeadline(context.get());
  context->set_deadline(std::chrono::system_clock::time_point::max());
  std::unique_ptr<grpc::ClientReader<v1::RegionLease>> reader =
      stub_->HoldRegions(context.get(), v1::HoldRegionsRequest());
  v1::RegionLease lease;
  if (!reader->Read(&lease)) return FromGrpcStatus(reader->Finish());
  return std::make_unique<RegionLease>(std::move(context), std::move(reader), lease.lease_id());
}

absl::Status JobClient::UnregisterRegion(const std::string& region_id) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::UnregisterRegionRequest request;
  request.set_region_id(region_id);
  v1::UnregisterRegionResponse response;
  return FromGrpcStatus(stub_->UnregisterRegion(&context, request, &response));
}

absl::StatusOr<JobResult> JobClient::Submit(const v1::SubmitRequest& request,
                                            EventCallback on_event, ResultSink* sink) {
  // Compact events save both ends work on small jobs; a request that cannot be small is not
  // copied to ask for them.
  std::optional<v1::SubmitRequest> compact;
  if (!request.compact_events() &&
      static_cast<int64_t>(request.input().data().size()) <= kCompactRequestBytes) {
    compact = request;
    compact->set_compact_events(true);
  }
  std::chrono::system_clock::time_point deadline;  // the first call's, kept by every call
  for (int attempt = 1;; ++attempt) {
    grpc::ClientContext context;
    SetDeadline(&context);
    if (attempt == 1) {
      deadline = context.deadline();
    } else {
      context.set_deadline(deadline);
    }
    std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader =
        stub_->Submit(&context, compact ? *compact : request);
    ResultAssembler assembler(request.dry_run(), sink, request.has_output_region());
    const absl::Status stream_error = ReadJobEvents(*reader, context, assembler, on_event);
    const grpc::Status rpc_status = reader->Finish();
    if (stream_error.ok() && !assembler.accepted() && attempt < options_.submit_attempts &&
        RefusedBeforeAcceptance(rpc_status, context)) {
      const std::chrono::milliseconds delay = SubmitRetryDelay(attempt + 1);
      if (std::chrono::system_clock::now() + delay < deadline) {
        std::this_thread::sleep_for(delay);
        continue;
      }
    }
    // A failed Done is the job's own verdict and carries the server's message; report it even
    // though the RPC then fails with the same status.
    if (!stream_error.ok()) return stream_error;
    if (!rpc_status.ok()) return FromGrpcStatus(rpc_status);
    absl::StatusOr<JobResult> result = assembler.Finish();
    if (result.ok()) result->peer = context.peer();
    return result;
  }
}

void JobClient::SubmitAsync(const v1::SubmitRequest& request, SubmitDone done) {
  auto copy = std::make_shared<v1::SubmitRequest>(request);
  copy->set_compact_events(true);
  SubmitAsync(std::shared_ptr<const v1::SubmitRequest>(std::move(copy)), std::move(done));
}

void JobClient::SubmitAsync(std::shared_ptr<const v1::SubmitRequest> request, SubmitDone done) {
  const bool high = request->priority() == v1::PRIORITY_HIGH;
  v1::JobService::Stub* stub = high && high_stub_ != nullptr ? high_stub_.get() : stub_.get();
  v1::JobService::Stub* small_stub = high ? priority_stub_.get() : nullptr;
  StartSubmitCall(
      stub, [this](grpc::ClientContext* context) { SetDeadline(context); },
      std::move(request), std::move(done), options_.submit_attempts,
      options_.submit_small ? &submit_small_unsupported_ : nullptr, small_stub);
}

absl::StatusOr<JobResult> JobClient::Run(const v1::SubmitRequest& spec, int64_t input_bytes,
                                         const InputReader& read, EventCallback on_event,
                                         UploadProgress on_progress, ResultSink* sink,
                                         int streams) {
  if (streams < 0) return absl::InvalidArgumentError("Run: streams must be 0 (auto) or more");
  if (streams > 1 && target_.balanced) {
    return absl::FailedPreconditionError(
        "Run: the calls of a split run must reach one daemon, and this client balances over "
        "several: use one call, or a target that names one daemon");
  }
  // A balanced target's calls may reach different daemons; a dry run sends no input to split.
  if (target_.balanced || spec.dry_run()) streams = 1;
  if (streams == 0) {
    streams = make_channel_ ? CallsForUpload(input_bytes, ServerMaxRunStreams()) : 1;
    if (streams > 1) streams = std::min(streams, ServerMaxRunStreams());
  }
  return RunOverCalls(
      StubsForCalls(streams), [this](grpc::ClientContext* context) { SetDeadline(context); }, spec,
      input_bytes, read, on_event, on_progress, sink);
}

std::vector<v1::JobService::Stub*> JobClient::StubsForCalls(int n) {
  std::vector<v1::JobService::Stub*> stubs = {stub_.get()};
  std::lock_guard<std::mutex> lock(calls_mu_);
  while (static_cast<int>(call_stubs_.size()) < n - 1) {
    const int i = static_cast<int>(call_stubs_.size()) + 1;
    call_stubs_.push_back(v1::JobService::NewStub(make_channel_ ? make_channel_(i) : channel_));
  }
  for (int i = 0; i < n - 1; ++i) stubs.push_back(call_stubs_[static_cast<size_t>(i)].get());
  return stubs;
}

int JobClient::ServerMaxRunStreams() {
  {
    std::lock_guard<std::mutex> lock(calls_mu_);
    if (max_run_streams_ > 0) return max_run_streams_;
  }
  absl::StatusOr<v1::DescribeResponse> description = Describe();
  if (!description.ok()) return 1;  // asked again next time
  const int limit = std::max(description->limits().max_run_streams(), 1);
  std::lock_guard<std::mutex> lock(calls_mu_);
  max_run_streams_ = limit;
  return limit;
}

}  // namespace client
}  // namespace gpupipe
