#include "client/bench/echo_floor.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "echo_floor.grpc.pb.h"

namespace gpupipe {
namespace bench {
namespace {

class EchoFloorService final : public floor::EchoFloor::CallbackService {
  grpc::ServerWriteReactor<floor::EchoReply>* Stream(grpc::CallbackServerContext* context,
                                                     const floor::EchoRequest* request) override;

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

// One reply, written and finished in one operation, as the daemon finishes a small job.
class StreamReply final : public grpc::ServerWriteReactor<floor::EchoReply> {
 public:
  explicit StreamReply(const floor::EchoRequest* request) {
    const int64_t n = request->reply_bytes();
    if (n < 0 || n > (int64_t{64} << 20)) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "reply_bytes"));
      return;
    }
    std::string* out = reply_.mutable_payload();
    out->resize(static_cast<size_t>(n));
    const size_t from_request = std::min(request->payload().size(), out->size());
    std::copy(request->payload().begin(), request->payload().begin() + from_request, out->begin());
    StartWriteAndFinish(&reply_, grpc::WriteOptions(), grpc::Status::OK);
  }
  void OnDone() override { delete this; }

 private:
  floor::EchoReply reply_;
};

grpc::ServerWriteReactor<floor::EchoReply>* EchoFloorService::Stream(
    grpc::CallbackServerContext* /*context*/, const floor::EchoRequest* request) {
  return new StreamReply(request);
}

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

absl::StatusOr<std::unique_ptr<EchoFloorProcess>> EchoFloorProcess::Start(
    const std::string& binary, const std::string& argument) {
  int to_child[2], from_child[2];
  if (pipe2(to_child, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  if (pipe2(from_child, O_CLOEXEC) != 0) {
    close(to_child[0]);
    close(to_child[1]);
    return absl::InternalError("pipe2 failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, from_child[1], STDOUT_FILENO);
  std::vector<char*> argv = {const_cast<char*>(binary.c_str()), const_cast<char*>(argument.c_str()),
                             nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(to_child[0]);
  close(from_child[1]);
  if (spawned != 0) {
    close(to_child[1]);
    close(from_child[0]);
    return absl::InternalError(absl::StrCat("could not start the echo floor (", binary, ")"));
  }
  std::string line;
  char c;
  while (line.size() < 16 && read(from_child[0], &c, 1) == 1 && c != '\n') line.push_back(c);
  close(from_child[0]);
  int port = 0;
  if (!absl::SimpleAtoi(line, &port) || port <= 0) {
    close(to_child[1]);
    waitpid(pid, nullptr, 0);
    return absl::UnavailableError("the echo floor process did not report its port");
  }
  return std::unique_ptr<EchoFloorProcess>(
      new EchoFloorProcess(pid, to_child[1], absl::StrCat("127.0.0.1:", port)));
}

EchoFloorProcess::~EchoFloorProcess() {
  close(stdin_fd_);
  waitpid(pid_, nullptr, 0);
}

int ServeEchoFloorProcess() {
  absl::StatusOr<std::unique_ptr<EchoFloor>> floor = EchoFloor::Start();
  if (!floor.ok()) return 1;
  const std::string target = (*floor)->target();
  const std::string port = target.substr(target.rfind(':') + 1) + "\n";
  if (write(STDOUT_FILENO, port.data(), port.size()) != static_cast<ssize_t>(port.size())) {
    return 1;
  }
  char buffer[64];
  while (read(STDIN_FILENO, buffer, sizeof buffer) > 0) {
  }
  return 0;
}

EchoFloor::~EchoFloor() {
  server_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server_->server->Wait();
}

struct EchoIssuer::State {
  std::vector<std::unique_ptr<floor::EchoFloor::Stub>> stubs;
  std::vector<floor::EchoRequest> requests;  // one per entry
  std::vector<int64_t> reply_bytes;
  double deadline_seconds = 60;
  bool streaming = false;
};

namespace {

// Reads the one reply of a Stream call, then reports like the unary call.
class StreamRead final : public grpc::ClientReadReactor<floor::EchoReply> {
 public:
  StreamRead(int64_t expected, std::function<void(Outcome)> done)
      : expected_(expected), done_(std::move(done)) {}
  void Start(floor::EchoFloor::Stub* stub, const floor::EchoRequest* request,
             double deadline_seconds) {
    context_.set_deadline(std::chrono::system_clock::now() +
                          std::chrono::duration_cast<std::chrono::system_clock::duration>(
                              std::chrono::duration<double>(deadline_seconds)));
    stub->async()->Stream(&context_, request, this);
    StartRead(&reply_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    bytes_ += static_cast<int64_t>(reply_.payload().size());
    StartRead(&reply_);
  }
  void OnDone(const grpc::Status& status) override {
    Outcome outcome;
    outcome.ok = status.ok() && bytes_ == expected_;
    if (!status.ok()) {
      outcome.error = status.error_message();
    } else if (!outcome.ok) {
      outcome.error = "the echo's reply had the wrong size";
    }
    std::function<void(Outcome)> done = std::move(done_);
    delete this;
    done(std::move(outcome));
  }

 private:
  grpc::ClientContext context_;
  floor::EchoReply reply_;
  int64_t expected_;
  int64_t bytes_ = 0;
  std::function<void(Outcome)> done_;
};

}  // namespace

EchoIssuer::EchoIssuer(const std::string& target, int channels, const std::vector<EchoSizes>& sizes,
                       double deadline_seconds, bool streaming)
    : state_(std::make_shared<State>()) {
  state_->deadline_seconds = deadline_seconds;
  state_->streaming = streaming;
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
    floor::EchoFloor::Stub* stub = state->stubs[static_cast<size_t>(n) % state->stubs.size()].get();
    const int64_t expected = state->reply_bytes[static_cast<size_t>(entry)];
    if (state->streaming) {
      (new StreamRead(expected, std::move(done)))
          ->Start(stub, &state->requests[static_cast<size_t>(entry)], state->deadline_seconds);
      return;
    }
    struct Call {
      grpc::ClientContext context;
      floor::EchoReply reply;
    };
    auto call = std::make_shared<Call>();
    call->context.set_deadline(std::chrono::system_clock::now() +
                               std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                   std::chrono::duration<double>(state->deadline_seconds)));
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
