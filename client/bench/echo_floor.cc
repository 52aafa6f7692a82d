#include "client/bench/echo_floor.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "echo_floor.grpc.pb.h"

namespace gpupipe {
namespace bench {
namespace {

class EchoFloorService final : public floor::EchoFloor::CallbackService {
  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* context,
                                 const floor::EchoRequest* request,
                                 floor::EchoReply* reply) override {
    const int64_t n = request->reply_bytes();
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (n < 0 || n > (int64_t{64} << 20)) {
      reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "reply_bytes"));
      return reactor;
    }
    // The reply's bytes are copied into it, as a job's result is into its message.
    const std::string& payload = request->payload();
    std::string* out = reply->mutable_payload();
    out->resize(static_cast<size_t>(n));
    const size_t from_request = std::min(payload.size(), out->size());
    std::copy(payload.begin(), payload.begin() + from_request, out->begin());
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

}  // namespace

struct EchoFloor::Server {
  EchoFloorService service;
  std::unique_ptr<grpc::Server> server;
};

absl::StatusOr<std::unique_ptr<EchoFloor>> EchoFloor::Start() {
  auto server = std::make_unique<Server>();
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(80 << 20);
  builder.SetMaxSendMessageSize(80 << 20);
  builder.RegisterService(&server->service);
  server->server = builder.BuildAndStart();
  if (server->server == nullptr || port == 0) {
    return absl::UnavailableError("the echo floor could not listen on a loopback port");
  }
  return std::unique_ptr<EchoFloor>(
      new EchoFloor(std::move(server), absl::StrCat("127.0.0.1:", port)));
}

EchoFloor::EchoFloor(std::unique_ptr<Server> server, std::string target)
    : server_(std::move(server)), target_(std::move(target)) {}

EchoFloor::~EchoFloor() {
  server_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server_->server->Wait();
}

struct EchoIssuer::State {
  std::vector<std::unique_ptr<floor::EchoFloor::Stub>> stubs;
  std::vector<floor::EchoRequest> requests;  // one per entry
  std::vector<int64_t> reply_bytes;
  double deadline_seconds = 60;
};

EchoIssuer::EchoIssuer(const std::string& target, int channels, const std::vector<EchoSizes>& sizes,
                       double deadline_seconds)
    : state_(std::make_shared<State>()) {
  state_->deadline_seconds = deadline_seconds;
  for (int i = 0; i < std::max(channels, 1); ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxReceiveMessageSize(80 << 20);
    state_->stubs.push_back(floor::EchoFloor::NewStub(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args)));
  }
  for (const EchoSizes& s : sizes) {
    floor::EchoRequest request;
    request.mutable_payload()->assign(static_cast<size_t>(s.request_bytes), '\x5a');
    request.set_reply_bytes(s.reply_bytes);
    state_->requests.push_back(std::move(request));
    state_->reply_bytes.push_back(s.reply_bytes);
  }
}

EchoIssuer::~EchoIssuer() = default;

Issuer EchoIssuer::issuer() {
  std::shared_ptr<State> state = state_;
  return [state](int64_t n, int entry, std::function<void(Outcome)> done) {
    struct Call {
      grpc::ClientContext context;
      floor::EchoReply reply;
    };
    auto call = std::make_shared<Call>();
    call->context.set_deadline(std::chrono::system_clock::now() +
                               std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                   std::chrono::duration<double>(state->deadline_seconds)));
    floor::EchoFloor::Stub* stub = state->stubs[static_cast<size_t>(n) % state->stubs.size()].get();
    const int64_t expected = state->reply_bytes[static_cast<size_t>(entry)];
    stub->async()->Call(&call->context, &state->requests[static_cast<size_t>(entry)], &call->reply,
                        [call, expected, done = std::move(done)](grpc::Status status) {
                          Outcome outcome;
                          outcome.ok = status.ok() && static_cast<int64_t>(
                                                          call->reply.payload().size()) == expected;
                          if (!status.ok()) {
                            outcome.error = status.error_message();
                          } else if (!outcome.ok) {
                            outcome.error = "the echo's reply had the wrong size";
                          }
                          done(std::move(outcome));
                        });
  };
}

}  // namespace bench
}  // namespace gpupipe
