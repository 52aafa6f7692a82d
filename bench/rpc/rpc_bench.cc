// rpc_bench: what the streaming upload RPC (Run) costs over the transport. In one process: the
// daemon's job service (CUDA backend where a GPU is usable, else CPU) and an echo service on one
// loopback port, one client channel. Each repetition sends --bytes of float32 through
//   run               Run with `relu`: upload, job, result back (JobClient::Run, as the CLI)
//   echo-sequential   the same messages echoed, all sent before any comes back (Run's shape
//                     today, while backends wait for the whole input)
//   echo-duplex       the same messages echoed as they arrive (the transport's ceiling, which a
//                     backend that computes during the upload could approach)
// and prints one JSON line per measurement and a summary line; report.py makes the Markdown.
//
// usage: rpc_bench [--bytes N] [--reps R] [--backend auto|cuda|cpu] [--stream-window-kib N]
// (--stream-window-kib: the server's flow-control window a stream, as gpupiped's
// --rpc-stream-window-kib and with its default; 0 for gRPC's automatic window)
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "client/job_client.h"
#include "echo.grpc.pb.h"
#include "echo_service.h"
#include "nlohmann/json.hpp"
#include "server/engine/backends/backend_factory.h"
#include "server/engine/engine.h"
#include "server/flags.h"
#include "server/rpc/job_service.h"
#include "server/transport.h"

namespace gpupipe::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int64_t bytes = int64_t{1} << 30;
  int reps = 3;
  engine::BackendChoice backend = engine::BackendChoice::kAuto;
  // The server's flow-control window a stream, as gpupiped's --rpc-stream-window-kib (0:
  // gRPC's automatic window).
  int64_t stream_window_kib = daemon::DaemonOptions{}.rpc_stream_window_bytes >> 10;
};

bool ParseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--bytes" && v && absl::SimpleAtoi(v, &o->bytes) && o->bytes >= 4) {
      o->bytes &= ~int64_t{3};
      ++i;
    } else if (a == "--reps" && v && absl::SimpleAtoi(v, &o->reps) && o->reps >= 1) {
      ++i;
    } else if (a == "--stream-window-kib" && v &&
               absl::SimpleAtoi(v, &o->stream_window_kib) && o->stream_window_kib >= 0) {
      ++i;
    } else if (a == "--backend" && v) {
      const std::string b = v;
      if (b == "auto") o->backend = engine::BackendChoice::kAuto;
      else if (b == "cuda") o->backend = engine::BackendChoice::kCuda;
      else if (b == "cpu") o->backend = engine::BackendChoice::kCpu;
      else return false;
      ++i;
    } else {
      return false;
    }
  }
  return true;
}

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

v1::SubmitRequest Spec(int64_t bytes, const std::string& tag) {
  v1::SubmitRequest spec;
  spec.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
  spec.mutable_input()->add_shape(bytes / 4);
  spec.add_ops()->mutable_relu();
  spec.set_client_tag(tag);
  return spec;
}

// One echo stream: writes `input` in upload-sized messages from a thread while this thread
// reads the echo into a buffer of the same size (as JobClient assembles a result). Returns the
// seconds taken, or -1 on a failure (reported on stderr).
double EchoOnce(Echo::Stub* stub, const std::string& input, const std::string& mode) {
  const auto start = Clock::now();
  grpc::ClientContext context;
  auto stream = stub->Stream(&context);
  std::thread writer([&] {
    v1::RunRequest m;
    *m.mutable_spec() = Spec(static_cast<int64_t>(input.size()), mode);
    if (!stream->Write(m)) return;
    for (size_t at = 0; at < input.size(); at += client::kUploadChunkBytes) {
      const size_t n = std::min<size_t>(client::kUploadChunkBytes, input.size() - at);
      m.mutable_data()->assign(input.data() + at, n);
      if (!stream->Write(m)) return;
    }
    stream->WritesDone();
  });
  std::string output;
  output.reserve(input.size());
  v1::JobEvent event;
  while (stream->Read(&event)) output.append(event.chunk().data());
  writer.join();
  const grpc::Status status = stream->Finish();
  const double seconds = Seconds(start);
  if (!status.ok() || output != input) {
    std::fprintf(stderr, "rpc_bench: echo-%s failed: %s (%zu of %zu bytes back%s)\n",
                 mode.c_str(), status.error_message().c_str(), output.size(), input.size(),
                 output.size() == input.size() ? ", different" : "");
    return -1;
  }
  return seconds;
}

double Run(client::JobClient* client, const std::string& input, bool check) {
  const auto start = Clock::now();
  size_t at = 0;
  absl::StatusOr<client::JobResult> result =
      client->Run(Spec(static_cast<int64_t>(input.size()), "rpc_bench"),
                  static_cast<int64_t>(input.size()), [&](char* buffer, int64_t n) {
                    std::memcpy(buffer, input.data() + at, static_cast<size_t>(n));
                    at += static_cast<size_t>(n);
                    return absl::OkStatus();
                  });
  const double seconds = Seconds(start);
  if (!result.ok()) {
    std::fprintf(stderr, "rpc_bench: run failed: %s\n", result.status().ToString().c_str());
    return -1;
  }
  if (check) {
    const std::string& out = result->output.data();
    const float* x = reinterpret_cast<const float*>(input.data());
    const float* y = reinterpret_cast<const float*>(out.data());
    const size_t n = input.size() / 4;
    for (size_t i = 0; out.size() == input.size() && i < n; ++i) {
      if (y[i] != std::max(x[i], 0.0f)) {
        std::fprintf(stderr, "rpc_bench: run: wrong result at element %zu\n", i);
        return -1;
      }
    }
  }
  return seconds;
}

double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;  // as Python's statistics.median
}

int Main(int argc, char** argv) {
  Options o;
  if (!ParseOptions(argc, argv, &o)) {
    std::fprintf(stderr, "usage: rpc_bench [--bytes N] [--reps R] [--backend auto|cuda|cpu] "
                 "[--stream-window-kib N]\n");
    return 2;
  }
  // One lane per level; the upload lands in the engine's default input ring.
  engine::CudaBackendOptions cuda;
  cuda.lanes_per_level = 1;
  engine::CpuBackendOptions cpu;
  cpu.lanes_per_level = 1;
  absl::StatusOr<engine::BackendSelection> selection = engine::CreateBackend(o.backend, cuda, cpu);
  if (!selection.ok()) {
    std::fprintf(stderr, "rpc_bench: no backend: %s\n", selection.status().ToString().c_str());
    return 1;
  }
  const std::string backend = selection->backend->name();
  engine::EngineOptions engine_options;
  engine_options.limits.max_stream_input_bytes = o.bytes;
  engine_options.admission.max_queued_bytes = 2 * o.bytes;
  auto engine = engine::Engine::Create(std::move(selection->backend), engine_options);

  rpc::JobServiceImpl jobs(engine.get(), rpc::JobServiceOptions{4, "rpc_bench"});
  EchoService echo;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&jobs);
  builder.RegisterService(&echo);
  daemon::SetStreamWindow(&builder, o.stream_window_kib << 10);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "rpc_bench: cannot listen on loopback\n");
    return 1;
  }
  // One channel, so both services see the same channel arguments and connection.
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                     grpc::InsecureChannelCredentials());
  client::JobClient client(channel, client::ClientOptions{});
  auto echo_stub = Echo::NewStub(channel);

  std::string input(static_cast<size_t>(o.bytes), '\0');
  float* x = reinterpret_cast<float*>(input.data());
  for (int64_t i = 0; i < o.bytes / 4; ++i) x[i] = static_cast<float>((i * 7919) % 2001 - 1000) / 8.0f;

  std::fprintf(stderr, "rpc_bench: %s backend, %.2f GiB, %d reps (+1 warm-up)\n",
               backend.c_str(), o.bytes / double(1 << 30), o.reps);
  std::vector<double> run, seq, duplex;
  bool failed = false;
  for (int rep = 0; rep <= o.reps; ++rep) {
    // Interleaved, so that drift on the host touches every kind alike.
    const double r = Run(&client, input, rep == 0);
    const double s = EchoOnce(echo_stub.get(), input, "sequential");
    const double d = EchoOnce(echo_stub.get(), input, "duplex");
    failed |= r < 0 || s < 0 || d < 0;
    if (failed) break;
    if (rep == 0) continue;  // warm-up: connection, allocations, first job on a lane
    run.push_back(r);
    seq.push_back(s);
    duplex.push_back(d);
    for (auto [kind, secs] : {std::pair<const char*, double>{"run", r}, {"echo-sequential", s},
                              {"echo-duplex", d}}) {
      std::printf("%s\n", nlohmann::json({{"kind", kind},
                                          {"rep", rep},
                                          {"seconds", secs},
                                          {"bytes", o.bytes},
                                          {"gbps", o.bytes / secs / 1e9}})
                              .dump()
                              .c_str());
    }
  }
  if (failed) return 1;
  const double mr = Median(run), ms = Median(seq), md = Median(duplex);
  std::printf("%s\n", nlohmann::json({{"summary", true},
                                      {"backend", backend},
                                      {"bytes", o.bytes},
                                      {"reps", o.reps},
                                      {"message_bytes", client::kUploadChunkBytes},
                                      {"stream_window_kib", o.stream_window_kib},
                                      {"run_s", mr},
                                      {"echo_sequential_s", ms},
                                      {"echo_duplex_s", md},
                                      {"run_vs_echo_sequential", ms / mr},
                                      {"run_vs_echo_duplex", md / mr}})
                          .dump()
                          .c_str());
  std::fprintf(stderr,
               "rpc_bench: median run %.3f s (%.2f GB/s each way), echo-sequential %.3f s, "
               "echo-duplex %.3f s; run reaches %.2fx of echo-sequential, %.2fx of echo-duplex\n",
               mr, o.bytes / mr / 1e9, ms, md, ms / mr, md / mr);
  server->Shutdown();
  engine->Shutdown();
  return 0;
}

}  // namespace
}  // namespace gpupipe::bench

int main(int argc, char** argv) { return gpupipe::bench::Main(argc, argv); }
