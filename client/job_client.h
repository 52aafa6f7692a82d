// A blocking client for gpupiped's JobService.
//
// Thread-safety: a JobClient may be used from several threads at once; each call runs its own
// RPC on the shared channel. The EventCallback and the ResultSink run on the calling thread.
#ifndef GPUPIPE_CLIENT_JOB_CLIENT_H_
#define GPUPIPE_CLIENT_JOB_CLIENT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/result_assembler.h"
#include "client/submit_call.h"
#include "client/targets.h"
#include "gpupipe/v1/gpupipe.grpc.pb.h"
#include "gpupipe/v1/gpupipe.pb.h"

namespace gpupipe {
namespace client {

// Whether `value` can be sent as a gRPC metadata value: printable ASCII (space to '~').
bool IsMetadataValue(std::string_view value);

struct ClientOptions {
  // Deadline of each RPC, from its start. Must be positive.
  double deadline_seconds = 300;
  // Sent as the `client-id` metadata of every call: the daemon counts clients by their address
  // (or TLS identity), and this tells apart clients that share one. Empty: not sent.
  // Printable ASCII (IsMetadataValue), as is the token: Create refuses other bytes.
  std::string client_id;
  // TLS, when any of these is set (PEM contents): the CA that signed the server's certificate
  // (empty: the system's roots), and a client certificate and key for mutual TLS.
  std::string tls_ca_pem;
  std::string tls_cert_pem;
  std::string tls_key_pem;
  // Sent as `authorization: Bearer <token>` on every call. Empty: not sent.
  std::string token;
  // Gives the client's channel a connection of its own. By default gRPC shares one connection
  // among the channels of a process that go to the same target with the same settings; a load
  // generator wants one per client, as separate processes would have.
  bool own_connection = false;
  // The calls Submit and SubmitAsync make for one job at most (1: no second call). A job is
  // sent again only when the daemon refused it before accepting it (RefusedBeforeAcceptance:
  // it is draining or shutting down), after SubmitRetryDelay, within the first call's deadline.
  int submit_attempts = 3;
  // SubmitAsync sends a job whose inline input is at most kSubmitSmallInputBytes, and that
  // asks for neither a plan nor a dry run, as one unary SubmitSmall call, which costs both ends
  // less than Submit's stream; a job the daemon finds too large for it (or a daemon without
  // SubmitSmall) is sent again with Submit. False: always Submit.
  bool submit_small = true;
  // The daemon's priority listener (gpupiped --priority-listen), a target as for Create: a
  // high-priority job that SubmitAsync sends as SubmitSmall goes there, on a channel of its
  // own, so that its call does not wait behind this daemon's other traffic; every other call
  // goes to the main target, and so does a job the listener refused before accepting it
  // (full, or not for its priority). Empty: none; SubmitAsync's high-priority jobs then go to
  // the main target on a connection of their own (opened by the first of them), so that they
  // do not queue behind this client's other calls there. Used by Create only.
  std::string priority_target;
};

// Called with every event of a Submit stream, in order, after the event was checked.
using EventCallback = std::function<void(const v1::JobEvent&)>;

// Fills `buffer` with the next `n` bytes of a streamed input (Run), in order; an error stops the
// upload and becomes the call's result. Called from the client's upload thread.
using InputReader = std::function<absl::Status(char* buffer, int64_t n)>;

// Called from the upload thread after each input chunk was handed to gRPC.
using UploadProgress = std::function<void(int64_t bytes_sent, int64_t bytes_total)>;

// Submit asks for compact events (SubmitRequest.compact_events) on requests whose input is at
// most this large; larger ones are sent as they are rather than copied to set the flag.
inline constexpr int64_t kCompactRequestBytes = int64_t{1} << 20;

// Input bytes per Run data message: under 1 MiB with room for the message's framing, so no
// gRPC message limit needs raising.
inline constexpr int64_t kUploadChunkBytes = (int64_t{1} << 20) - 4096;

// grpc::Status -> absl::Status with the same code (both number google.rpc.Code) and message.
absl::Status FromGrpcStatus(const grpc::Status& status);

// An open HoldRegions call: regions registered with its id() are unregistered by the daemon
// when it is destroyed (the call is cancelled) or this process dies. Not thread-safe to destroy
// while another thread registers under it.
class RegionLease {
 public:
  RegionLease(std::unique_ptr<grpc::ClientContext> context,
              std::unique_ptr<grpc::ClientReader<v1::RegionLease>> reader, std::string id)
      : context_(std::move(context)), reader_(std::move(reader)), id_(std::move(id)) {}
  ~RegionLease();
  const std::string& id() const { return id_; }

 private:
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReader<v1::RegionLease>> reader_;
  std::string id_;
};

class JobClient {
 public:
  // Connects lazily to `target` (see targets.h: "host:port", a host alone for port 50051, any
  // gRPC target URI, or several daemons: "host:port,host:port" or "dns:///name:port"), over
  // TLS where `options` has TLS settings, else plaintext. Fails on invalid arguments and on a
  // name in a list that does not resolve (UNAVAILABLE), never because a server is down: that
  // shows on the first call as UNAVAILABLE.
  //
  // Every channel it makes balances calls over the target's addresses (round_robin), retries
  // the calls that change nothing (Describe, GetStats) on UNAVAILABLE up to 5 attempts with
  // backoff (gRPC's retry policy, ServiceConfigJson), and lets gRPC retry transparently a call
  // that never reached a server. A balanced target (ChannelTarget::balanced) also has each
  // daemon's health watched (gpupipe.v1.JobService), so a daemon that drains (SIGTERM) gets no
  // new calls; a single daemon is not watched, so that it still answers for itself while it
  // drains (stats, health, "the server is shutting down").
  static absl::StatusOr<std::unique_ptr<JobClient>> Create(const std::string& target,
                                                           ClientOptions options = {});

  // Uses an existing channel (tests, custom credentials). `channel` must not be null.
  JobClient(std::shared_ptr<grpc::ChannelInterface> channel, ClientOptions options);

  JobClient(const JobClient&) = delete;
  JobClient& operator=(const JobClient&) = delete;

  absl::StatusOr<v1::DescribeResponse> Describe();
  // With `lane_activity`, the lanes' latest runs too (StatsResponse.lane_activity).
  absl::StatusOr<v1::StatsResponse> GetStats(bool lane_activity = false);

  // The daemon's health for `service` ("" for the whole server, or "gpupipe.v1.JobService"),
  // from the standard health service, which needs no token: "SERVING", "NOT_SERVING",
  // "SERVICE_UNKNOWN" or "UNKNOWN"; an error when it cannot be asked.
  absl::StatusOr<std::string> Health(const std::string& service = "");

  // Runs one job and waits for its result. Errors carry the RPC's status, or the code and
  // message of the job's Done event, unchanged; a broken event stream (see ResultAssembler)
  // yields DATA_LOSS. On an error the RPC is cancelled. With request.dry_run the result holds
  // the plan and no output data. With a `sink`, the output bytes go to it as they arrive (see
  // ResultSink; a sink's error cancels the job and is returned) and the result holds none.
  // `on_event` sees each event after the sink took its bytes. With request.output_region set,
  // the bytes are in the region once this returns OK, and the result holds none.
  // JobResult::peer names the daemon that ran the job.
  //
  // At most once: a job is sent again (up to ClientOptions::submit_attempts calls, each a new
  // call that a balanced channel gives to the next daemon) only when its call failed
  // UNAVAILABLE before any event, with the daemon's mark that it accepted no job
  // (RefusedBeforeAcceptance), or never reached a daemon (gRPC retries those itself). A job
  // whose daemon dies or stops it after accepting it fails with that daemon's UNAVAILABLE and
  // is not sent again: it may have run.
  absl::StatusOr<JobResult> Submit(const v1::SubmitRequest& request, EventCallback on_event = {},
                                   ResultSink* sink = nullptr);

  // Runs one job as Submit does (without `on_event` and `sink`), holding no thread while it
  // runs: `done` is called exactly once, on a gRPC thread, with what Submit would return. The
  // request is copied; the client must outlive the call.
  void SubmitAsync(const v1::SubmitRequest& request, SubmitDone done);
  // The same without the copy, for a caller that sends one request many times (a load
  // generator): the job holds `request` until `done` returned. A request that does not ask for
  // compact events (SubmitRequest.compact_events) is still copied, to ask for them.
  void SubmitAsync(std::shared_ptr<const v1::SubmitRequest> request, SubmitDone done);

  // Runs one job through the streaming upload RPC (Run), never sent twice: `spec` is the job
  // with an input that
  // has shape and dtype but no data; `read` supplies the input's `input_bytes` bytes in order,
  // in kUploadChunkBytes pieces, on upload threads, while this thread reads the job's events,
  // so results that come back during the upload are consumed. Results, errors and `sink` as
  // for Submit; a failing `read` cancels the RPC and its error is returned.
  // `streams`: the calls to split the job over (RunRequest.stripes), each on a connection of
  // its own where this client made its channel (Create); 0 chooses from the input's size and
  // the server's Limits.max_run_streams (CallsForUpload). Every call of a split run must reach
  // the same daemon: a balanced client makes one call (0), and refuses more with
  // FAILED_PRECONDITION. A dry run (spec.dry_run) reads no input: one call carries the spec
  // alone and `read` is not called.
  absl::StatusOr<JobResult> Run(const v1::SubmitRequest& spec, int64_t input_bytes,
                                const InputReader& read, EventCallback on_event = {},
                                UploadProgress on_progress = {}, ResultSink* sink = nullptr,
                                int streams = 0);

  // Registers the shared-memory object `shm_name` (its first `size` bytes; 0: all of it) as a
  // region this client's jobs may name in SubmitRequest.input_region and output_region, and
  // unregisters it. The daemon must run on this host and see the object (same IPC namespace).
  // With a `lease_id` (HoldRegions), the region goes when the lease does. A region belongs to
  // one daemon, so a client of a list of several (ChannelTarget::addresses > 1) refuses every
  // region call with FAILED_PRECONDITION (a dns: name used with regions must name one daemon).
  absl::StatusOr<v1::RegisterRegionResponse> RegisterRegion(const std::string& shm_name,
                                                            int64_t size = 0,
                                                            const std::string& lease_id = "");
  // Registers a shared-memory object without a name (a memfd: `fd`, its first `size` bytes;
  // 0: all of it), passing its descriptor over the daemon's region socket
  // (DescribeResponse.region_fd_socket, or `socket_path` where the daemon's path is not this
  // process's, as across containers). FAILED_PRECONDITION where the daemon has no region
  // socket. `fd` stays this process's to close.
  absl::StatusOr<v1::RegisterRegionResponse> RegisterRegionFd(int fd, int64_t size = 0,
                                                              const std::string& lease_id = "",
                                                              std::string socket_path = "");
  // Registers device memory this process exported with cudaIpcGetMemHandle (`handle`: the
  // handle's 64 bytes) as a device region: `size` bytes from the allocation's base (0: all).
  absl::StatusOr<v1::RegisterRegionResponse> RegisterCudaRegion(const std::string& handle,
                                                                int64_t size = 0,
                                                                const std::string& lease_id = "");
  // Opens a lease (HoldRegions); the call has no deadline and lasts as long as the lease.
  absl::StatusOr<std::unique_ptr<RegionLease>> HoldRegions();
  absl::Status UnregisterRegion(const std::string& region_id);

  const ClientOptions& options() const { return options_; }
  // Whether calls may reach several daemons (Create's ChannelTarget::balanced).
  bool balanced() const { return target_.balanced; }

 private:
  // The deadline, the client-id and the token of a call.
  void SetDeadline(grpc::ClientContext* context) const;
  // Stubs for `n` calls: this client's own first, then ones on channels of their own (where
  // Create made the channel; else all on the one channel).
  std::vector<v1::JobService::Stub*> StubsForCalls(int n);
  // The server's Limits.max_run_streams, asked once (1 where it cannot be asked).
  int ServerMaxRunStreams();
  // RegisterRegion and RegisterCudaRegion: `request` names the memory; size and lease added.
  absl::StatusOr<v1::RegisterRegionResponse> Register(v1::RegisterRegionRequest request,
                                                      int64_t size, const std::string& lease_id);

  // FAILED_PRECONDITION for a client of several listed daemons (regions need one).
  absl::Status CheckOneDaemon() const;

  ClientOptions options_;
  ChannelTarget target_;  // where Create made the channel; a single target otherwise
  std::shared_ptr<grpc::ChannelInterface> channel_;
  std::unique_ptr<v1::JobService::Stub> stub_;
  // On the priority listener's channel (ClientOptions::priority_target); null: none.
  std::unique_ptr<v1::JobService::Stub> priority_stub_;
  // On a channel of its own to the main target, for SubmitAsync's high-priority jobs where
  // there is no listener; null where the client was given its channel.
  std::unique_ptr<v1::JobService::Stub> high_stub_;
  // Makes the channel of call i > 0 of a split Run, a connection of its own; null where the
  // client was given its channel.
  std::function<std::shared_ptr<grpc::ChannelInterface>(int i)> make_channel_;
  std::mutex calls_mu_;
  std::vector<std::unique_ptr<v1::JobService::Stub>> call_stubs_;  // of calls 1, 2, ...
  int max_run_streams_ = 0;                                        // 0: not asked yet
  // Set once the daemon answered SubmitSmall with UNIMPLEMENTED and then decoded the same
  // request as a Submit (an older daemon; see StartSubmitCall).
  std::atomic<bool> submit_small_unsupported_{false};
};

}  // namespace client
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_JOB_CLIENT_H_
