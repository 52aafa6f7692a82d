#include "server/flags.h"

#include <functional>
#include <initializer_list>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gpupipe::daemon {
namespace {

absl::Status ParseInt(const std::string& flag, const std::string& value, int64_t lo, int64_t hi,
                      int64_t* out) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v) || v < lo || v > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": expected an integer in ", lo, "..", hi, ", got '", value, "'"));
  }
  *out = v;
  return absl::OkStatus();
}

// The value `choices` names `value`, or an error naming the flag and its choices in order
// ("expected auto, cuda or cpu, got 'tpu'").
template <typename T>
absl::StatusOr<T> Choose(const std::string& flag, const std::string& value,
                         std::initializer_list<std::pair<const char*, T>> choices) {
  std::string names;
  size_t i = 0;
  for (const auto& [name, choice] : choices) {
    if (value == name) return choice;
    absl::StrAppend(&names, i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ", name);
    ++i;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(flag, ": expected ", names, ", got '", value, "'"));
}

// A listening address's port, where it has one (not a Unix socket): 0 (any free port) to
// 65535. gRPC would take 117608 as 117608 mod 65536 and listen there.
absl::Status CheckListenPort(const std::string& flag, const std::string& address) {
  if (absl::StartsWith(address, "unix:") || absl::StartsWith(address, "unix-abstract:")) {
    return absl::OkStatus();
  }
  const size_t colon = address.rfind(':');
  const size_t bracket = address.rfind(']');
  if (colon == std::string::npos || (bracket != std::string::npos && colon < bracket)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": expected HOST:PORT or [IPV6]:PORT, got '", address, "'"));
  }
  const std::string port = address.substr(colon + 1);
  int64_t v = 0;
  if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(port, &v) || v > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": the port must be 0 (any free port) to 65535, got '", port, "' in '", address,
        "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseDeviceMemory(const std::string& value, double* fraction, int64_t* bytes) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "--device-memory: expected a percentage of the device's memory (1% to 95%), or a size "
        "in MiB or GiB (\"512MiB\", \"2GiB\"; a plain number is MiB), got '", value, "'"));
  };
  std::string number = value;
  int64_t unit = int64_t{1} << 20;
  bool percent = false;
  const auto strip = [&](const std::string& suffix) {
    if (number.size() > suffix.size() &&
        number.compare(number.size() - suffix.size(), suffix.size(), suffix) == 0) {
      number.resize(number.size() - suffix.size());
      return true;
    }
    return false;
  };
  if (strip("%")) {
    percent = true;
  } else if (strip("GiB") || strip("G")) {
    unit = int64_t{1} << 30;
  } else if (strip("MiB") || strip("M")) {
    unit = int64_t{1} << 20;
  }
  double v = 0;
  if (!absl::SimpleAtod(number, &v) || !(v > 0)) return bad();
  if (percent) {
    if (v < 1 || v > 95) return bad();
    *fraction = v / 100.0;
    *bytes = 0;
    return absl::OkStatus();
  }
  if (v * static_cast<double>(unit) > 1e15) return bad();
  *bytes = static_cast<int64_t>(v * static_cast<double>(unit));
  *fraction = 0;
  return absl::OkStatus();
}

std::string Usage() {
  return R"(usage: gpupiped [flags]

Runs the gpupipe job service: a gRPC daemon that owns one GPU.

  --listen ADDR              address to serve on (default 127.0.0.1:50051; port 0 picks a
                             free port, printed at start), or a Unix socket,
                             unix:///run/gpupipe/gpupipe.sock, whose file permissions then
                             say who may call
  --metrics-listen ADDR      serve Prometheus metrics at http://ADDR/metrics (default
                             127.0.0.1:9464; port 0 picks one; '' for none)
  --priority-listen ADDR     a second address, served by threads of its own, that takes
                             SubmitSmall calls of jobs of --priority-min and above only: their
                             requests and replies do not queue behind the main address's
                             traffic (default none; the same TLS and tokens as --listen)
  --priority-min P           the lowest priority the priority listener takes: low, normal or
                             high (default high); lower ones get PERMISSION_DENIED
  --priority-max-calls N     calls the priority listener has in progress at once; one more
                             gets RESOURCE_EXHAUSTED (default 64); calls without a valid
                             token (--token-file) are refused first and take no place
  --priority-threads N       threads of the priority listener's own: they read its calls, run
                             their jobs where a lane is idle, and send the replies (default 2)
  --backend auto|cuda|cpu    auto uses the GPU when one is usable, else the CPU (default auto)
  --device N                 CUDA device ordinal (default 0)
  --cuda-wait MODE           how threads wait for the GPU: spin (quickest to see a job end,
                             a core busy meanwhile), yield (spin, giving the core away between
                             polls), block (sleep until the device interrupts: the least CPU,
                             the slowest wake-up) or auto (CUDA's choice: spin unless the
                             process has more contexts than the host has cores) (default auto)
  --streams-per-priority N   lanes (CUDA streams with their own buffers) per priority (default 2)
  --mapped-io-max-kib N      a job of one chunk with at most N KiB of input and N KiB of
                             output runs with no copies: its kernels read the input from and
                             write the result to page-locked host memory mapped into the GPU's
                             address space (pipelines of elementwise, reduction, argmax,
                             softmax and normalize steps, with auto staging, whose input came
                             in the request; 0: every job copies; default 64)
  --max-input-mib N          largest input tensor accepted by Submit, in MiB (default 64)
  --max-stream-input-gib N   largest input tensor accepted by Run, the streaming upload, in
                             GiB (default 4)
  --device-memory SIZE       device memory for the lanes' chunk buffers, allocated at start:
                             a percentage of the GPU's memory ("40%") or a size ("2GiB",
                             "512MiB"); the lanes take what --chunk-mib needs within it
                             (default 25%)
  --chunk-mib N              input MiB per chunk of a job's copy/compute/copy pipeline, also
                             the most a job's options.chunk_bytes may ask for (default 16)
  --input-ring-mib N         the most memory one upload streamed with Run holds: its input
                             lands in a ring of chunk buffers of at most N MiB (at least one
                             chunk of the job), refilled as the job consumes it (default 64)
  --input-ring-total-mib N   memory allocated at start for the rings of every upload in
                             progress (page-locked on the cuda backend, so chunks are copied
                             to the GPU straight from it); an upload that finds no room is
                             refused with RESOURCE_EXHAUSTED (0: no streamed uploads;
                             default 512)
  --rpc-memory-mib N         gRPC's own buffers (reads in progress, every stream's
                             flow-control window) share this quota; under pressure gRPC
                             offers clients smaller windows (default 128)
  --rpc-stream-window-kib N  the flow-control window every stream is offered: the most a
                             client may send ahead of what the daemon has read, so an upload
                             the daemon is not reading holds at most this much of gRPC's
                             memory (0: gRPC's automatic window from its bandwidth-delay
                             estimate, which a host slow to answer pings can push past
                             --rpc-memory-mib; 64 to 1048576; default 4096)
  --upload-idle-timeout-seconds N
                             a running job whose upload has room in its ring but sends
                             nothing for N s ends with DEADLINE_EXCEEDED and frees its lane
                             (0: no limit; default 30)
  --priority-hold-ms N       while a job of a higher priority runs, a job holds its next
                             chunk back for at most N ms, then sends it and asks again
                             (0: priorities only order the streams; default 20)
  --batch-window-us N        dynamic batching: concurrent small jobs of one priority with
                             the same ops, dtype and row length run as one launch, their
                             rows stacked; a lane holds such a job up to N us for others to
                             join while other jobs are in flight (a lone job never waits)
                             (0: no batching; default 100)
  --batch-max-jobs N         jobs in one batch at most (2 to 4096; default 64)
  --batch-max-kib N          input of one batch at most, in KiB; larger jobs run alone
                             (default 4096)
  --direct-run-max-kib N     a job of at most N KiB of input and output, and little work,
                             that finds an idle lane of its priority and nothing queued runs
                             on the thread that received it, without two thread hand-offs
                             (0: every job goes through the queue; default 64)
  --reader-idle-timeout-seconds N
                             a call whose client reads none of its job's events for N s
                             while one waits is cancelled, and its job ends with
                             DEADLINE_EXCEEDED, freeing its lane (0: no limit; default 30)
  --reader-idle-busy-seconds N
                             the same after N s where sooner, for a call whose job holds its
                             lane waiting for the client while jobs of its priority wait for
                             a lane (0: only the idle timeout, which 0 turns off for both;
                             default 10)
  --max-queued-jobs N        accepted jobs of one priority waiting for a lane before new
                             ones of that priority are refused with RESOURCE_EXHAUSTED
                             (default 1024)
  --max-queued-mib N         memory held by jobs waiting for a lane (their Submit inputs and
                             upload rings), likewise, all priorities (default 2048)
  --max-client-jobs N        jobs one client may have queued or running (default 256)
  --max-client-queued-mib N  memory one client's queued jobs may hold (default 512)
  --max-client-uploads N     Run uploads one client may have in progress (default 4)
                             (a client: its TLS identity, else its address without the
                             port, refined by a `client-id` metadata value; within a
                             priority, lanes take clients' jobs round-robin)
  --max-client-unread-mib N  results of one client's finished jobs that it has not read yet
                             before its next job is refused (default 256)
  --max-unread-mib N         the same over all clients, for clients holding any (default 1024)
  --max-run-streams N        calls one Run may be split over (RunRequest.stripes), each
                             holding at most one data message while it waits (default 16)
  --max-work-per-byte N      refuse a job whose estimated work exceeds N element operations
                             per byte of its input and output (beyond a small allowance)
                             with RESOURCE_EXHAUSTED (0: no limit; default 4096)
  --max-region-gib N         shared-memory regions (RegisterRegion) the daemon maps for
                             clients, page-locked on the cuda backend, in GiB over all
                             clients (0: no regions; default 32)
  --max-client-region-gib N  likewise per client (default 16)
  --max-client-regions N     regions one client may have registered (default 64)
  --max-regions N            regions over all clients (default 1024)
  --region-any-owner         map shared-memory objects whatever user owns them (default:
                             only the daemon's user's), where every caller that can reach
                             the daemon is trusted with what the daemon's user can open
  --region-idle-timeout-seconds N
                             a region no job used for N s is unregistered, so a client that
                             died leaves nothing mapped (0: never; default 600)
  --region-fd-socket PATH    a Unix socket where local processes pass descriptors of
                             shared-memory objects without a name (memfd) to register as
                             regions (RegisterRegion.fd_ticket); its file's permissions are
                             the access control (default: none)
  --keepalive-seconds N      ping a connection with calls in progress after N s without
                             traffic, to find dead clients (0: never; default 60)
  --keepalive-timeout-seconds N
                             close a connection whose ping is not answered in N s
                             (default 20)
  --max-connection-idle-seconds N
                             close a connection with no call for N s (0: never; default 300)
  --handshake-timeout-seconds N
                             close a connection that has not finished its HTTP/2 (or TLS)
                             handshake after N s (default 10)
  --tls-cert FILE, --tls-key FILE
                             serve TLS with this certificate chain and private key (PEM)
  --tls-client-ca FILE       require every client to present a certificate signed by this CA
                             (mutual TLS; needs --tls-cert)
  --token-file FILE          require a bearer token on every call (health checks excepted):
                             one `name:token` per line, re-read on SIGHUP; the name stands for
                             the caller in logs, stats and per-client limits
  --insecure                 allow plaintext calls without tokens on an address beyond
                             loopback (refused at start otherwise)
  --shutdown-grace-seconds N on SIGINT/SIGTERM, how long running and queued jobs may take
                             to finish; then running jobs are stopped (UNAVAILABLE) and the
                             daemon exits within 2 s more (default 10)
  --log-format text|json     log lines as text, or as one JSON object each, for log
                             collectors (default text)
  --log-level info|warning|error
                             the least severe lines written (default info: every job's line;
                             warning: only what needs a look)
  --log-gather-ms N          job lines are written together, about N ms after the first
                             of them: one write a while for a busy daemon's lines instead of
                             one a job (0: each at once; at most 10000) (default 50)
  --quiet                    no log line per job
  --version, --help
)";
}

absl::StatusOr<DaemonOptions> ParseFlags(const std::vector<std::string>& args) {
  DaemonOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    bool has_value = false;
    if (size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    auto take_value = [&]() -> absl::StatusOr<std::string> {
      if (has_value) return value;
      if (i + 1 >= args.size()) return absl::InvalidArgumentError(flag + ": needs a value");
      return args[++i];
    };
    int64_t n = 0;
    if (flag == "--help" || flag == "-h") {
      o.help = true;
    } else if (flag == "--version") {
      o.version = true;
    } else if (flag == "--region-any-owner") {
      o.region_any_owner = true;
    } else if (flag == "--quiet") {
      o.log_jobs = false;
    } else if (flag == "--log-format") {
      auto v = take_value();
      if (!v.ok()) return v.status();
      absl::StatusOr<LogFormat> format = ParseLogFormat(*v);
      if (!format.ok()) return format.status();
      o.log_format = *format;
    } else if (flag == "--log-level") {
      auto v = take_value();
      if (!v.ok()) return v.status();
      absl::StatusOr<LogLevel> level = ParseLogLevel(*v);
      if (!level.ok()) return level.status();
      o.log_level = *level;
    } else if (flag == "--insecure") {
      o.insecure = true;
#if GPUPIPE_FAULT_INJECTION
    } else if (flag == "--inject-device-fault") {
      // Test builds only: the Nth job launches a device fault (sticky or launch).
      auto v = take_value();
      if (!v.ok()) return v.status();
      const size_t colon = v->find(':');
      if (colon == std::string::npos ||
          !absl::SimpleAtoi(v->substr(colon + 1), &o.inject_fault_at_job)) {
        return absl::InvalidArgumentError("--inject-device-fault: expected KIND:N");
      }
      o.inject_fault = v->substr(0, colon);
#endif
    } else if (flag == "--region-fd-socket") {
      auto v = take_value();
      if (!v.ok()) return v.status();
      if (v->empty()) return absl::InvalidArgumentError(flag + ": empty path");
      o.region_fd_socket = *v;
    } else if (flag == "--tls-cert" || flag == "--tls-key" || flag == "--tls-client-ca" ||
               flag == "--token-file") {
      auto v = take_value();
      if (!v.ok()) return v.status();
      if (v->empty()) return absl::InvalidArgumentError(flag + ": empty path");
      (flag == "--tls-cert"        ? o.tls_cert
       : flag == "--tls-key"       ? o.tls_key
       : flag == "--tls-client-ca" ? o.tls_client_ca
                                   : o.token_file) = *v;
    } else if (flag == "--listen") {
      auto v = take_value();
      if (!v.ok()) return v.status();
      if (v->empty()) return absl::InvalidArgumentError("--listen: empty address");
      if (absl::Status bad = CheckListenPort(flag, *v); !bad.ok()) return bad;
      o.listen = *v;
    } else if (flag == "--priority-listen") {
      auto v = take_value();
      if (!v.ok()) return v.status();
      if (!v->empty()) {
        if (absl::Status bad = CheckListenPort(flag, *v); !bad.ok()) return bad;
      }
      o.priority_listen = *v;
    } else if (flag == "--priority-min") {
      auto v = take_value();
      if (!v.ok()) return v.status();
      absl::StatusOr<engine::Priority> p = Choose<engine::Priority>(
          flag, *v,
          {{"low", engine::Priority::kLow}, {"normal", engine::Priority::kNormal},
           {"high", engine::Priority::kHigh}});
      if (!p.ok()) return p.status();
      o.priority_min = *p;
    } else if (flag == "--metrics-listen") {
      auto v = take_value();
      if (!v.ok()) return v.status();
      if (!v->empty()) {
        if (absl::Status bad = CheckListenPort(flag, *v); !bad.ok()) return bad;
      }
      o.metrics_listen = *v;
    } else if (flag == "--device-memory") {
      auto v = take_value();
      if (!v.ok()) return v.status();
      if (absl::Status s = ParseDeviceMemory(*v, &o.device_memory_fraction,
                                             &o.device_memory_bytes);
          !s.ok()) {
        return s;
      }
    } else if (flag == "--cuda-wait") {
      auto v = take_value();
      if (!v.ok()) return v.status();
      absl::StatusOr<engine::CudaWait> wait = Choose<engine::CudaWait>(
          flag, *v,
          {{"auto", engine::CudaWait::kAuto}, {"spin", engine::CudaWait::kSpin},
           {"yield", engine::CudaWait::kYield}, {"block", engine::CudaWait::kBlock}});
      if (!wait.ok()) return wait.status();
      o.cuda_wait = *wait;
    } else if (flag == "--backend") {
      auto v = take_value();
      if (!v.ok()) return v.status();
      absl::StatusOr<engine::BackendChoice> backend = Choose<engine::BackendChoice>(
          flag, *v,
          {{"auto", engine::BackendChoice::kAuto}, {"cuda", engine::BackendChoice::kCuda},
           {"cpu", engine::BackendChoice::kCpu}});
      if (!backend.ok()) return backend.status();
      o.backend = *backend;
    } else {
      // Integer flags: name, range, and where the value goes.
      struct IntFlag {
        const char* name;
        int64_t lo, hi;
        std::function<void(int64_t)> set;
      };
      const IntFlag int_flags[] = {
          {"--device", 0, 1023, [&](int64_t v) { o.device = static_cast<int>(v); }},
          {"--priority-max-calls", 1, 1024,
           [&](int64_t v) { o.priority_max_calls = static_cast<int>(v); }},
          {"--priority-threads", 1, 64,
           [&](int64_t v) { o.priority_threads = static_cast<int>(v); }},
          {"--streams-per-priority", 1, 16,
           [&](int64_t v) { o.streams_per_priority = static_cast<int>(v); }},
          {"--mapped-io-max-kib", 0, 1 << 20, [&](int64_t v) { o.mapped_io_max_bytes = v << 10; }},
          {"--max-input-mib", 1, 1024, [&](int64_t v) { o.max_input_bytes = v << 20; }},
          {"--chunk-mib", 1, 1024, [&](int64_t v) { o.chunk_bytes = v << 20; }},
          {"--input-ring-mib", 1, 1 << 16, [&](int64_t v) { o.input_ring_bytes = v << 20; }},
          {"--input-ring-total-mib", 0, 1 << 20,
           [&](int64_t v) { o.input_ring_total_bytes = v << 20; }},
          {"--rpc-memory-mib", 16, 1 << 20, [&](int64_t v) { o.rpc_memory_bytes = v << 20; }},
          {"--rpc-stream-window-kib", 0, 1 << 20,
           [&](int64_t v) { o.rpc_stream_window_bytes = v << 10; }},
          {"--upload-idle-timeout-seconds", 0, 86400,
           [&](int64_t v) { o.upload_idle_timeout_ms = v * 1000; }},
          {"--priority-hold-ms", 0, 60000, [&](int64_t v) { o.priority_hold_us = v * 1000; }},
          {"--batch-window-us", 0, 1000000, [&](int64_t v) { o.batch_window_us = v; }},
          {"--batch-max-jobs", 2, 4096, [&](int64_t v) { o.batch_max_jobs = static_cast<int>(v); }},
          {"--batch-max-kib", 1, 1 << 20, [&](int64_t v) { o.batch_max_bytes = v << 10; }},
          {"--direct-run-max-kib", 0, 1 << 20,
           [&](int64_t v) { o.direct_run_max_bytes = v << 10; }},
          {"--max-stream-input-gib", 1, 1024,
           [&](int64_t v) { o.max_stream_input_bytes = v << 30; }},
          {"--max-queued-jobs", 1, 1 << 20,
           [&](int64_t v) { o.max_queued_jobs = static_cast<int>(v); }},
          {"--max-queued-mib", 1, 1 << 20, [&](int64_t v) { o.max_queued_bytes = v << 20; }},
          {"--max-client-jobs", 1, 1 << 20,
           [&](int64_t v) { o.max_client_jobs = static_cast<int>(v); }},
          {"--max-client-queued-mib", 1, 1 << 20,
           [&](int64_t v) { o.max_client_queued_bytes = v << 20; }},
          {"--max-client-unread-mib", 1, 1 << 20,
           [&](int64_t v) { o.max_client_unread_bytes = v << 20; }},
          {"--max-unread-mib", 1, 1 << 20, [&](int64_t v) { o.max_unread_bytes = v << 20; }},
          {"--max-client-uploads", 1, 1 << 16,
           [&](int64_t v) { o.max_client_uploads = static_cast<int>(v); }},
          {"--max-run-streams", 1, 256,
           [&](int64_t v) { o.max_run_streams = static_cast<int>(v); }},
          {"--max-work-per-byte", 0, int64_t{1} << 40, [&](int64_t v) { o.max_work_per_byte = v; }},
          {"--max-region-gib", 0, 1 << 16, [&](int64_t v) { o.max_region_bytes = v << 30; }},
          {"--max-client-region-gib", 1, 1 << 16,
           [&](int64_t v) { o.max_client_region_bytes = v << 30; }},
          {"--max-client-regions", 1, 1 << 16,
           [&](int64_t v) { o.max_client_regions = static_cast<int>(v); }},
          {"--max-regions", 1, 1 << 20, [&](int64_t v) { o.max_regions = static_cast<int>(v); }},
          {"--region-idle-timeout-seconds", 0, 86400 * 7,
           [&](int64_t v) { o.region_idle_timeout_ms = v * 1000; }},
          {"--reader-idle-timeout-seconds", 0, 86400,
           [&](int64_t v) { o.reader_idle_timeout_ms = v * 1000; }},
          {"--reader-idle-busy-seconds", 0, 86400,
           [&](int64_t v) { o.reader_idle_busy_timeout_ms = v * 1000; }},
          {"--keepalive-seconds", 0, 86400, [&](int64_t v) { o.keepalive_ms = v * 1000; }},
          {"--keepalive-timeout-seconds", 1, 3600,
           [&](int64_t v) { o.keepalive_timeout_ms = v * 1000; }},
          {"--max-connection-idle-seconds", 0, 86400 * 7,
           [&](int64_t v) { o.max_connection_idle_ms = v * 1000; }},
          {"--handshake-timeout-seconds", 1, 3600,
           [&](int64_t v) { o.handshake_timeout_ms = v * 1000; }},
          {"--shutdown-grace-seconds", 0, 3600,
           [&](int64_t v) { o.shutdown_grace_seconds = static_cast<int>(v); }},
          {"--log-gather-ms", 0, 10000,
           [&](int64_t v) { o.log_gather_ms = static_cast<int>(v); }},
      };
      const IntFlag* match = nullptr;
      for (const IntFlag& f : int_flags) {
        if (flag == f.name) match = &f;
      }
      if (match == nullptr) {
        return absl::InvalidArgumentError("unknown flag '" + args[i] + "' (see --help)");
      }
      auto v = take_value();
      if (!v.ok()) return v.status();
      if (absl::Status s = ParseInt(flag, *v, match->lo, match->hi, &n); !s.ok()) return s;
      match->set(n);
    }
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!o.tls_client_ca.empty() && o.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca: client certificates need TLS (--tls-cert and --tls-key)");
  }
  // Port 0 picks a free port for each.
  if (!o.priority_listen.empty() && o.priority_listen == o.listen &&
      !absl::EndsWith(o.listen, ":0")) {
    return absl::InvalidArgumentError(
        "--priority-listen: needs an address of its own, not --listen's");
  }
  if (o.rpc_stream_window_bytes > 0 && o.rpc_stream_window_bytes < (int64_t{64} << 10)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rpc-stream-window-kib: ", o.rpc_stream_window_bytes >> 10,
        " KiB is under 64 KiB, about HTTP/2's default window (0 leaves the window to gRPC)"));
  }
  if (o.input_ring_total_bytes > 0 && o.input_ring_total_bytes < o.input_ring_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--input-ring-total-mib (", o.input_ring_total_bytes >> 20,
        ") must be at least --input-ring-mib (", o.input_ring_bytes >> 20, ")"));
  }
  return o;
}

}  // namespace gpupipe::daemon
