// gpupiped: the gpupipe job service. The only place that reads flags or the environment;
// everything below takes plain option structs.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPUPIPE_LEAK_CHECK 1
#endif
#elif defined(__SANITIZE_ADDRESS__)
#define GPUPIPE_LEAK_CHECK 1
#endif
#if GPUPIPE_LEAK_CHECK
#include <sanitizer/lsan_interface.h>
#endif

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/config_file.h"
#include "common/pem.h"
#include "server/engine/backends/backend_factory.h"
#include "server/engine/engine.h"
#include "server/engine/job/op_catalog.h"
#include "server/flags.h"
#include "server/job_log.h"
#include "server/logger.h"
#include "server/metrics/http_server.h"
#include "server/metrics/prometheus_text.h"
#include "server/rpc/fd_socket.h"
#include "server/rpc/job_service.h"
#include "server/rpc/priority_listener.h"
#include "server/rpc/token_auth.h"
#include "server/transport.h"

namespace gpupipe::daemon {
namespace {

constexpr char kVersion[] = "0.1.0";

// After the shutdown grace: how long stopped jobs get to end (host work stops within
// milliseconds, a GPU chunk in flight within its kernels), how long calls then get to deliver
// their jobs' last events, and how long clients get to read them before their connections
// close: together within the promised 2 s.
constexpr auto kStopBudget = std::chrono::milliseconds(500);
constexpr auto kDeliverBudget = std::chrono::milliseconds(1000);
constexpr auto kLinger = std::chrono::milliseconds(250);

// The exit code after a sticky device error: a supervisor should start a fresh daemon.
constexpr int kExitDeviceFailed = 3;

// Whether this host has an NVIDIA driver loaded (so that serving on the CPU is a surprise).
bool NvidiaDriverPresent() {
  return access("/proc/driver/nvidia/version", F_OK) == 0 || access("/dev/nvidiactl", F_OK) == 0;
}

// The daemon's log: Run sets it from the flags before its first line.
const Logger* g_log = nullptr;
const Logger& TheLog() {
  static const Logger fallback;
  return g_log != nullptr ? *g_log : fallback;
}
void Log(const std::string& line) { TheLog().Info(line); }
void Warn(const std::string& line) { TheLog().Warning(line); }
void Fail(const std::string& line) { TheLog().Error(line); }

absl::StatusOr<std::shared_ptr<const rpc::TokenTable>> LoadTokens(const std::string& path) {
  absl::StatusOr<std::string> text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::shared_ptr<const rpc::TokenTable>> tokens = rpc::TokenTable::Parse(*text);
  if (!tokens.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", tokens.status().message()));
  }
  // A table without a token would refuse every call: more likely a file emptied by mistake.
  if ((*tokens)->size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": holds no token (lines of name:token)"));
  }
  return tokens;
}

// Ends the process at once, skipping destructors, with `code`.
[[noreturn]] void ExitNow(int code) {
  // The gathered job lines first: a leak report ends the process on the spot.
  TheLog().Flush();
#if GPUPIPE_LEAK_CHECK
  __lsan_do_leak_check();
#endif
  std::fflush(stderr);
  std::fflush(stdout);
  std::_Exit(code);
}

// What both listeners share: no port shared with another daemon, gRPC's memory from `quota`,
// the largest request, and the connection limits below.
void ConfigureListener(const DaemonOptions& options, grpc::ResourceQuota* quota,
                       grpc::ServerBuilder* builder) {
  // A second daemon on a port in use fails to start rather than sharing it.
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Room for the largest input plus the rest of the request; larger requests are refused by
  // gRPC with RESOURCE_EXHAUSTED before they reach the service.
  builder->SetMaxReceiveMessageSize(static_cast<int>(options.max_input_bytes + (1 << 20)));
  // gRPC's own buffers (read buffers, flow-control windows of every stream) come from this
  // quota: under pressure gRPC shrinks the windows it offers, so many uploads at once cost
  // bounded memory rather than a window each.
  quota->Resize(static_cast<size_t>(options.rpc_memory_bytes));
  builder->SetResourceQuota(*quota);
  // A fixed flow-control window per stream (transport.h says why).
  SetStreamWindow(builder, options.rpc_stream_window_bytes);
  // Connections: dead peers of calls in progress are found by keepalive pings, idle
  // connections closed, and a connection that never completes its handshake dropped, so
  // clients that vanish or never speak do not pin the daemon's file descriptors or memory.
  const auto int_arg = [](int64_t ms) {
    return static_cast<int>(std::min<int64_t>(ms, std::numeric_limits<int>::max()));
  };
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, options.keepalive_ms > 0
                                                              ? int_arg(options.keepalive_ms)
                                                              : std::numeric_limits<int>::max());
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                              int_arg(options.keepalive_timeout_ms));
  if (options.max_connection_idle_ms > 0) {
    builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                                int_arg(options.max_connection_idle_ms));
  }
  builder->AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                              int_arg(options.handshake_timeout_ms));
}

// `listen` as it is served: a TCP address with the port it got (port 0 picks one); a Unix
// socket has no port.
std::string ServedAddress(const std::string& listen, int port) {
  if (absl::StartsWith(listen, "unix:") || absl::StartsWith(listen, "unix-abstract:")) {
    return listen;
  }
  return absl::StrFormat("%s:%d", listen.substr(0, listen.rfind(':')), port);
}

int Run(const DaemonOptions& options) {
  // Never destroyed, so that a thread that logs while the process exits finds it whole; every
  // way out of the daemon flushes it (ExitNow, main).
  static const Logger& log =
      *new Logger(options.log_format, options.log_level, stderr,
                  std::chrono::milliseconds(options.log_gather_ms));
  g_log = &log;
  // Load every kernel when the CUDA context is created rather than at its first launch, so no
  // job pays for module loading (the backend's warm-up covers the remaining first-use costs).
  // A value set by the operator wins.
  setenv("CUDA_MODULE_LOADING", "EAGER", /*overwrite=*/0);

  // Block the shutdown signals before any thread starts, so every thread inherits the mask and
  // the main thread alone receives them through sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  sigaddset(&signals, SIGUSR1);  // the engine's notice that the device failed for good
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // Transport security first: a daemon that would serve other hosts without it does not start.
  TransportSecurity security;
  security.insecure = options.insecure;
  security.tokens = !options.token_file.empty();
  // Every file is read before any is checked, so an unreadable one is named first.
  const std::array tls_files = {
      std::tuple{"--tls-cert", &options.tls_cert, &security.tls_cert_pem, PemKind::kCertificate},
      std::tuple{"--tls-key", &options.tls_key, &security.tls_key_pem, PemKind::kPrivateKey},
      std::tuple{"--tls-client-ca", &options.tls_client_ca, &security.tls_client_ca_pem,
                 PemKind::kCertificate}};
  for (auto [flag, path, pem, kind] : tls_files) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> contents = ReadConfigFile(*path);
    if (!contents.ok()) {
      Fail(absl::StrCat(flag, ": ", contents.status().message()));
      return 1;
    }
    *pem = *std::move(contents);
  }
  for (auto [flag, path, pem, kind] : tls_files) {
    if (path->empty()) continue;
    if (absl::Status s = CheckPem(*pem, kind); !s.ok()) {
      Fail(absl::StrCat(flag, ": ", *path, ": ", s.message()));
      return 1;
    }
  }
  for (const std::string* listen : {&options.listen, &options.priority_listen}) {
    if (listen->empty()) continue;
    if (absl::Status s = CheckListenSecurity(*listen, security); !s.ok()) {
      Fail(std::string(s.message()));
      return 1;
    }
    if (options.insecure && !IsLoopbackAddress(*listen) && security.tls_cert_pem.empty() &&
        !security.tokens) {
      Warn(absl::StrCat("--insecure: serving plaintext calls without tokens on ", *listen,
                        "; anyone who can reach it can run jobs"));
    }
  }
  rpc::Authenticator authenticator;
  if (security.tokens) {
    absl::StatusOr<std::shared_ptr<const rpc::TokenTable>> tokens = LoadTokens(options.token_file);
    if (!tokens.ok()) {
      Fail(std::string(tokens.status().message()));
      return 1;
    }
    Log(absl::StrFormat("tokens: %d from %s", (*tokens)->size(), options.token_file));
    authenticator.SetTokens(*std::move(tokens));
  }

  engine::CudaBackendOptions cuda_options;
  cuda_options.device = options.device;
  cuda_options.wait = options.cuda_wait;
  cuda_options.lanes_per_level = options.streams_per_priority;
  cuda_options.device_memory_fraction = options.device_memory_fraction;
  cuda_options.device_memory_bytes = options.device_memory_bytes;
  cuda_options.chunk_bytes = options.chunk_bytes;
  cuda_options.mapped_io_max_bytes = options.mapped_io_max_bytes;
  cuda_options.inject_fault = options.inject_fault;
  cuda_options.inject_fault_at_job = options.inject_fault_at_job;
  engine::CpuBackendOptions cpu_options;
  cpu_options.lanes_per_level = options.streams_per_priority;
  cpu_options.chunk_bytes = options.chunk_bytes;
  cpu_options.chunk_capacity_bytes =
      std::max(cpu_options.chunk_capacity_bytes, options.chunk_bytes);

  absl::StatusOr<engine::BackendSelection> selection =
      engine::CreateBackend(options.backend, cuda_options, cpu_options);
  if (!selection.ok()) {
    Fail(absl::StrFormat("cannot start the %s backend: %s",
                         options.backend == engine::BackendChoice::kCuda ? "cuda" : "requested",
                         selection.status().message()));
    return 1;
  }
  engine::Backend& backend = *selection->backend;
  std::string where = backend.name();
  if (auto device = backend.device()) {
    where = absl::StrFormat(
        "cuda device %d (%s, %d SMs, %.1f GiB, compute %s, stream priorities %d..%d; kernels: "
        "%s, %s)",
        device->ordinal, device->name, device->multiprocessors,
        device->memory_bytes / double(1 << 30), device->compute_capability,
        device->greatest_stream_priority, device->least_stream_priority, device->kernel_code,
        device->features.empty() ? "no sm_90 features (pdl and bulk modes run without them)"
                                 : absl::StrJoin(device->features, ", "));
  }
  Log(absl::StrFormat("backend %s: %s", where, selection->reason));
  if (options.backend == engine::BackendChoice::kAuto && backend.name() == "cpu" &&
      NvidiaDriverPresent()) {
    Warn(
        absl::StrCat("this host has an NVIDIA driver, but jobs run on the CPU: ", selection->reason,
                     " (a newer driver, or a build with code for this GPU's architecture, "
                     "serves it; --backend cuda refuses to start instead)"));
  }
  if (std::string memory = backend.MemorySummary(); !memory.empty()) Log(memory);
  Log(absl::StrFormat("input rings: a pool of %d MiB%s, at most %d MiB per upload",
                      options.input_ring_total_bytes >> 20,
                      backend.name() == "cuda" ? " (page-locked)" : "",
                      options.input_ring_bytes >> 20));

  engine::EngineOptions engine_options;
  engine_options.limits.max_input_bytes = options.max_input_bytes;
  engine_options.limits.max_stream_input_bytes = options.max_stream_input_bytes;
  engine_options.limits.input_ring_bytes = options.input_ring_bytes;
  engine_options.limits.input_ring_total_bytes = options.input_ring_total_bytes;
  engine_options.limits.upload_idle_timeout_ms = options.upload_idle_timeout_ms;
  engine_options.limits.max_work_per_byte = options.max_work_per_byte;
  engine_options.chunk_policy.priority_hold_us = options.priority_hold_us;
  engine_options.batching.window_us = options.batch_window_us;
  engine_options.batching.max_jobs = options.batch_max_jobs;
  engine_options.batching.max_bytes = options.batch_max_bytes;
  engine_options.direct_run.max_bytes = options.direct_run_max_bytes;
  engine_options.admission.max_queued_jobs = options.max_queued_jobs;
  engine_options.admission.max_queued_bytes = options.max_queued_bytes;
  engine_options.admission.max_client_jobs = options.max_client_jobs;
  engine_options.admission.max_client_queued_bytes = options.max_client_queued_bytes;
  engine_options.admission.max_client_uploads = options.max_client_uploads;
  engine_options.regions.max_bytes = options.max_region_bytes;
  engine_options.regions.max_client_bytes = options.max_client_region_bytes;
  engine_options.regions.max_client_regions = options.max_client_regions;
  engine_options.regions.max_regions = options.max_regions;
  engine_options.regions.any_owner = options.region_any_owner;
  engine_options.regions.idle_timeout = std::chrono::milliseconds(options.region_idle_timeout_ms);
  // One job's region input is bounded by what one client may map.
  engine_options.limits.max_region_input_bytes =
      std::min(options.max_region_bytes, options.max_client_region_bytes);
  if (options.log_jobs) {
    engine_options.on_job_done = [](const engine::JobRecord& r) {
      const JobLogLine line = JobLog(r);
      TheLog().Gather(line.level, line.message, line.fields);
    };
  }
  // A sticky device error: the main thread stops the daemon with a non-zero exit, so that a
  // supervisor starts a fresh one.
  std::mutex device_mu;
  absl::Status device_lost;
  engine_options.on_device_lost = [&](const absl::Status& status) {
    {
      std::lock_guard<std::mutex> lock(device_mu);
      device_lost = status;
    }
    kill(getpid(), SIGUSR1);
  };
  std::unique_ptr<engine::Engine> engine =
      engine::Engine::Create(std::move(selection->backend), engine_options);

  rpc::JobServiceOptions service_options;
  service_options.server_version = absl::StrCat("gpupiped ", kVersion);
  service_options.reader_idle_timeout = std::chrono::milliseconds(options.reader_idle_timeout_ms);
  service_options.reader_idle_busy_timeout =
      std::chrono::milliseconds(options.reader_idle_busy_timeout_ms);
  service_options.upload_idle_timeout = std::chrono::milliseconds(options.upload_idle_timeout_ms);
  service_options.max_run_streams = options.max_run_streams;
  service_options.unread.max_bytes = options.max_unread_bytes;
  service_options.unread.max_client_bytes = options.max_client_unread_bytes;
  // A run waiting for its calls is an upload about to start: the same per-client limit.
  service_options.waiting_runs.max_client_runs = options.max_client_uploads;
  service_options.authenticator = &authenticator;
  // Descriptors passed over the region socket wait a short while for their RegisterRegion;
  // only a few at once, so a client that never registers them holds few of the daemon's files.
  rpc::FdTickets fd_tickets(/*max_pending=*/64, std::chrono::seconds(30));
  std::unique_ptr<rpc::FdSocket> fd_socket;
  if (!options.region_fd_socket.empty()) {
    absl::StatusOr<std::unique_ptr<rpc::FdSocket>> listening =
        rpc::FdSocket::Listen(options.region_fd_socket, &fd_tickets, rpc::FdSocket::Options());
    if (!listening.ok()) {
      Fail(std::string(listening.status().message()));
      return 1;
    }
    fd_socket = *std::move(listening);
    service_options.fd_tickets = &fd_tickets;
    service_options.region_fd_socket = options.region_fd_socket;
  }
  rpc::JobServiceImpl service(engine.get(), service_options);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // The priority listener: a server whose calls run on threads of its own
  // (rpc/priority_listener.h), with a quota of its own for its memory. It starts first, so that
  // the main address's Describe names it from its first call.
  grpc::ResourceQuota priority_quota("gpupiped-priority");
  std::unique_ptr<rpc::PriorityListener> priority_listener;
  std::unique_ptr<grpc::Server> priority_server;
  int priority_port = 0;
  if (!options.priority_listen.empty()) {
    grpc::ServerBuilder priority_builder;
    priority_builder.AddListeningPort(options.priority_listen, MakeServerCredentials(security),
                                      &priority_port);
    rpc::PriorityListenerOptions listener_options;
    listener_options.lowest = options.priority_min;
    listener_options.max_calls = options.priority_max_calls;
    listener_options.threads = options.priority_threads;
    priority_listener =
        std::make_unique<rpc::PriorityListener>(&service, listener_options, &priority_builder);
    ConfigureListener(options, &priority_quota, &priority_builder);
    priority_server = priority_builder.BuildAndStart();
    if (!priority_server || priority_port == 0) {
      Fail(absl::StrCat("cannot listen on ", options.priority_listen,
                        " (--priority-listen): the address is in use or not this host's"));
      return 1;
    }
    priority_listener->Start();
    service.SetPriorityListener(ServedAddress(options.priority_listen, priority_port),
                                options.priority_min, options.priority_max_calls,
                                options.priority_threads);
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, MakeServerCredentials(security), &port);
  builder.RegisterService(&service);
  grpc::ResourceQuota quota("gpupiped");
  ConfigureListener(options, &quota, &builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    Fail(absl::StrCat("cannot listen on ", options.listen,
                      ": the address is in use (another gpupiped?) or not this host's"));
    return 1;
  }
  std::unique_ptr<metrics::HttpServer> metrics_server;
  if (!options.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<metrics::HttpServer>> started = metrics::HttpServer::Start(
        options.metrics_listen,
        [&service] { return metrics::RenderPrometheus(service.Stats(/*with_clients=*/false)); });
    if (!started.ok()) {
      Fail(absl::StrCat(started.status().message(),
                        " (--metrics-listen HOST:PORT elsewhere, or '' for no metrics)"));
      return 1;
    }
    metrics_server = *std::move(started);
    const std::string metrics_host =
        options.metrics_listen.substr(0, options.metrics_listen.rfind(':'));
    Log(absl::StrFormat("metrics on http://%s:%d/metrics", metrics_host, metrics_server->port()));
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus(v1::JobService::service_full_name(), true);
  grpc::HealthCheckServiceInterface* priority_health =
      priority_server ? priority_server->GetHealthCheckService() : nullptr;
  if (priority_health != nullptr) {
    priority_health->SetServingStatus(v1::JobService::service_full_name(), true);
  }
  Log(absl::StrFormat("listening on %s (version %s, %s%s)", ServedAddress(options.listen, port),
                      kVersion,
                      security.tls_cert_pem.empty()        ? "plaintext"
                      : security.tls_client_ca_pem.empty() ? "TLS"
                                                           : "mutual TLS",
                      security.tokens ? ", tokens" : ""));
  if (priority_server) {
    Log(absl::StrFormat("priority listener on %s (SubmitSmall, priority %s and above, at most %d "
                        "calls at once, %d threads)",
                        ServedAddress(options.priority_listen, priority_port),
                        engine::PriorityName(options.priority_min), options.priority_max_calls,
                        options.priority_threads));
  }

  int sig = 0;
  for (;;) {
    sigwait(&signals, &sig);
    if (sig == SIGUSR1) {
      std::lock_guard<std::mutex> lock(device_mu);
      if (device_lost.ok()) continue;  // not the engine's
      break;
    }
    if (sig != SIGHUP) break;
    if (!security.tokens) {
      Log("SIGHUP: no --token-file to re-read");
      continue;
    }
    // The new table or none: a broken file keeps the tokens in force.
    absl::StatusOr<std::shared_ptr<const rpc::TokenTable>> tokens = LoadTokens(options.token_file);
    if (tokens.ok()) {
      Log(absl::StrFormat("SIGHUP: tokens: %d from %s", (*tokens)->size(), options.token_file));
      authenticator.SetTokens(*std::move(tokens));
    } else {
      Warn(absl::StrCat("SIGHUP: kept the tokens in force: ", tokens.status().message()));
    }
  }
  const bool device_failed = sig == SIGUSR1;
  int grace_seconds = options.shutdown_grace_seconds;
  if (device_failed) {
    std::lock_guard<std::mutex> lock(device_mu);
    Fail(absl::StrCat(device_lost.message(), ": stopping with exit code ", kExitDeviceFailed,
                      ", so that a supervisor starts a fresh daemon"));
    grace_seconds = 0;  // nothing can run on this device any more
  } else {
    Log(absl::StrFormat("%s: shutting down (grace %ds, %d jobs in flight)",
                        sig == SIGINT ? "SIGINT" : "SIGTERM", grace_seconds,
                        static_cast<int>(engine->jobs_in_flight())));
  }
  // Probes see NOT_SERVING at once; new jobs are refused with UNAVAILABLE (the engine stops
  // accepting) while the accepted ones run out their grace.
  health->Shutdown();
  if (priority_health != nullptr) priority_health->Shutdown();
  bool drained = engine->Drain(std::chrono::seconds(grace_seconds));
  if (!drained) {
    // The grace is over: every running job stops at its next check, and its final events
    // still reach its client below.
    engine->StopRunningJobs();
    drained = engine->Drain(kStopBudget);
  }
  // Every call finishes delivering its job's last events (a client that does not read them
  // is cancelled at the deadline). Then the server stops: it tells clients to go away, gives
  // them a moment to read what was sent (a connection closed under unread bytes is reset, and
  // the client may lose them), and closes the connections that remain.
  service.WaitForCalls(std::chrono::steady_clock::now() + kDeliverBudget);
  // Region leases stay open until ended: end them, or the server would wait for them.
  service.CloseLeases();
  // Both servers at once: each gives its clients the same moment.
  const auto linger_end = std::chrono::system_clock::now() + kLinger;
  std::thread priority_stop;
  if (priority_server) {
    priority_stop = std::thread([&] {
      priority_server->Shutdown(linger_end);
      priority_listener->Stop();
    });
  }
  server->Shutdown(linger_end);
  if (priority_stop.joinable()) priority_stop.join();
  engine->Shutdown();
  if (drained) {
    Log("stopped");
  } else {
    Warn(
        "stopped (jobs still running at the end of the grace period were stopped with "
        "UNAVAILABLE)");
  }
  // Everything the daemon promised is done. gRPC's library shutdown, run as its last objects
  // are destroyed, waits up to 10 s for the connections of clients that keep them open; exit
  // without it (after the leak check of a sanitizer build).
  ExitNow(device_failed ? kExitDeviceFailed : 0);
}

}  // namespace
}  // namespace gpupipe::daemon

int main(int argc, char** argv) {
  using namespace gpupipe::daemon;
  // gRPC locks absl mutexes on every call; the distribution's Abseil checks each lock order
  // for deadlock cycles unless told not to, which costs more than the lock.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::StatusOr<DaemonOptions> options =
      ParseFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!options.ok()) {
    std::cerr << "gpupiped: " << options.status().message() << "\n";
    return 2;
  }
  if (options->help) {
    std::cout << Usage();
    return 0;
  }
  if (options->version) {
    std::cout << "gpupiped " << kVersion
              << (gpupipe::engine::BuiltWithCuda() ? " (cuda, cpu)" : " (cpu)") << "\n";
    return 0;
  }
  const int code = Run(*options);
  TheLog().Flush();
  return code;
}
