// gpupipe: command-line client for gpupiped. See `gpupipe --help`.
//
// Exit status: 0 on success, 1 on a runtime or server error, 2 on a usage error. Every error is
// one line on stderr, "gpupipe: <cause>"; with --json, stdout also gets one JSON object
// {"status":"error","code":...,"message":...}.
#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/bench/echo_floor.h"
#include "client/cli/args.h"
#include "client/cli/bench_command.h"
#include "client/cli/timeline_svg.h"
#include "common/config_file.h"
#include "common/pem.h"
#include "nlohmann/json.hpp"
#include "client/cli/compare.h"
#include "client/cli/progress.h"
#include "client/cli/render.h"
#include "client/cli/stats_view.h"
#include "client/cli/submit_output.h"
#include "client/dtype.h"
#include "client/job_client.h"
#include "client/shm_submit.h"
#include "client/npy.h"
#include "client/ops_grammar.h"

#ifndef GPUPIPE_VERSION
#define GPUPIPE_VERSION "0.0.0"
#endif

namespace gpupipe {
namespace cli {
namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

class Reporter {
 public:
  explicit Reporter(bool json) : json_(json) {}

  // Reports `status`: `line` goes to stderr after "gpupipe: ", the status's own message into
  // the JSON object. Returns `exit_code`.
  int Fail(int exit_code, const absl::Status& status, const std::string& line) const {
    std::cerr << "gpupipe: " << OneLine(line) << std::endl;
    if (json_) std::cout << ErrorJson(status.code(), OneLine(status.message())).dump() << std::endl;
    return exit_code;
  }
  int Fail(int exit_code, const absl::Status& status) const {
    return Fail(exit_code, status, std::string(status.message()));
  }

  static std::string OneLine(absl::string_view text) {
    return absl::StrReplaceAll(absl::StripTrailingAsciiWhitespace(text), {{"\r", ""}, {"\n", " "}});
  }

  bool json_;
};

// An RPC failure, worded for the person at the terminal. `context`, when not empty, leads the
// line and the JSON message ("compare graph/direct").
int FailRpc(const Reporter& reporter, const Args& args, const absl::Status& status,
            bool got_events, const std::string& context = "") {
  const std::string code(absl::StatusCodeToString(status.code()));
  const std::string lead = context.empty() ? "" : context + ": ";
  const absl::Status reported(status.code(), absl::StrCat(lead, status.message()));
  if (status.code() == absl::StatusCode::kUnavailable && !got_events) {
    return reporter.Fail(kExitRuntime, reported,
                         absl::StrCat(lead, "cannot reach ", args.target, " (", code, ": ",
                                      status.message(), ")"));
  }
  std::string line =
      absl::StrCat(lead, "server ", args.target, ": ", code, ": ", status.message());
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    absl::StrAppend(&line, " (after ", args.deadline_seconds, " s; see --deadline)");
  }
  return reporter.Fail(kExitRuntime, reported, line);
}

// The contents of `path`, a small regular file (common/config_file.h), named by `flag` in
// errors.
absl::StatusOr<std::string> ReadSmallFile(const std::string& flag, const std::string& path) {
  absl::StatusOr<std::string> contents = ReadConfigFile(path);
  if (!contents.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", contents.status().message()));
  }
  if (contents->empty()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path,
                                                                        " is empty"));
  return contents;
}

// What the command line left out, from the environment: GPUPIPE_TARGET, GPUPIPE_TLS_CA (a
// path) and GPUPIPE_TOKEN (the token itself).
void ApplyEnvironment(Args* args) {
  const auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? std::string(v) : std::string();
  };
  if (!args->target_given && !env("GPUPIPE_TARGET").empty()) args->target = env("GPUPIPE_TARGET");
  if (args->tls_ca.empty()) args->tls_ca = env("GPUPIPE_TLS_CA");
  if (args->token_file.empty()) args->token = env("GPUPIPE_TOKEN");
}

absl::StatusOr<std::unique_ptr<client::JobClient>> Connect(const Args& args,
                                                           bool own_connection = false,
                                                           bool submit_small = true) {
  client::ClientOptions options;
  options.own_connection = own_connection;
  options.submit_small = submit_small;
  options.deadline_seconds = args.deadline_seconds;
  options.client_id = args.client_id;
  options.priority_target = args.priority_target;
  options.token = args.token;
  // The TLS files are PEM of their kind; the token file is not PEM at all.
  for (auto [flag, path, contents, kind] :
       {std::tuple{"--tls-ca", &args.tls_ca, &options.tls_ca_pem,
                   std::optional(PemKind::kCertificate)},
        std::tuple{"--tls-cert", &args.tls_cert, &options.tls_cert_pem,
                   std::optional(PemKind::kCertificate)},
        std::tuple{"--tls-key", &args.tls_key, &options.tls_key_pem,
                   std::optional(PemKind::kPrivateKey)},
        std::tuple{"--token-file", &args.token_file, &options.token,
                   std::optional<PemKind>()}}) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> read = ReadSmallFile(flag, *path);
    if (!read.ok()) return read.status();
    if (kind.has_value()) {
      if (absl::Status s = CheckPem(*read, *kind); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(flag, ": ", *path, ": ", s.message()));
      }
    }
    *contents = *std::move(read);
  }
  // A token file holds the token and perhaps a line end.
  while (!options.token.empty() && std::isspace(static_cast<unsigned char>(options.token.back()))) {
    options.token.pop_back();
  }
  if (!args.token_file.empty() && options.token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--token-file: ", args.token_file, " holds no token"));
  }
  return client::JobClient::Create(args.target, options);
}

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// A request carrying `input` (moved in, so its bytes are not copied) through `ops`.
v1::SubmitRequest MakeRequest(client::NpyArray& input, const std::vector<v1::Op>& ops,
                              v1::Priority priority, const std::string& tag) {
  v1::SubmitRequest request;
  v1::Tensor* tensor = request.mutable_input();
  tensor->set_dtype(input.dtype);
  for (int64_t d : input.shape) tensor->add_shape(d);
  *tensor->mutable_data() = std::move(input.data);
  for (const v1::Op& op : ops) *request.add_ops() = op;
  request.set_priority(priority);
  request.set_client_tag(tag);
  return request;
}

// Reads a file's bytes in order from `offset` on, for the Run upload: the input goes from disk
// to the wire without being held in memory.
class FileReader {
 public:
  static absl::StatusOr<std::unique_ptr<FileReader>> Open(const std::string& path,
                                                          int64_t offset) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      return absl::Status(absl::ErrnoToStatusCode(err),
                          absl::StrCat(path, ": cannot open: ", std::strerror(err)));
    }
    return std::unique_ptr<FileReader>(new FileReader(path, fd, offset));
  }
  ~FileReader() { ::close(fd_); }

  absl::Status Read(char* buffer, int64_t n) {
    while (n > 0) {
      const ssize_t got = ::pread(fd_, buffer, static_cast<size_t>(n), static_cast<off_t>(offset_));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        const int err = errno;
        return absl::Status(absl::ErrnoToStatusCode(err),
                            absl::StrCat(path_, ": read failed: ", std::strerror(err)));
      }
      if (got == 0) {
        return absl::DataLossError(absl::StrCat(path_, ": the file shrank while it was sent"));
      }
      buffer += got;
      n -= got;
      offset_ += got;
    }
    return absl::OkStatus();
  }

 private:
  FileReader(std::string path, int fd, int64_t offset)
      : path_(std::move(path)), fd_(fd), offset_(offset) {}
  std::string path_;
  int fd_;
  int64_t offset_;
};

// True when `s` should travel through the streaming Run RPC.
bool ShouldStream(StreamMode mode, int64_t input_bytes) {
  switch (mode) {
    case StreamMode::kAlways: return true;
    case StreamMode::kNever: return false;
    case StreamMode::kAuto: return input_bytes > kStreamAutoBytes;
  }
  return false;
}

// Whether `submit` tries shared memory (TransportMode).
bool UseSharedMemory(const Args& args, int64_t input_bytes) {
  const SubmitArgs& s = args.submit;
  if (s.dry_run || s.stream == StreamMode::kAlways) return false;
  switch (s.transport) {
    case TransportMode::kShm:
      return true;
    case TransportMode::kGrpc:
      return false;
    case TransportMode::kAuto:
      return input_bytes >= kShmAutoBytes && client::IsLocalTarget(args.target);
  }
  return false;
}

int RunSubmit(const Args& args, const Reporter& reporter) {
  const SubmitArgs& s = args.submit;
  // The header decides how the input travels; only the unary path reads the whole file.
  absl::StatusOr<client::NpyFileInfo> header = client::ReadNpyHeader(s.input);
  if (!header.ok()) return reporter.Fail(kExitRuntime, header.status());
  bool shm = UseSharedMemory(args, header->data_bytes);

  absl::StatusOr<std::unique_ptr<client::JobClient>> client = Connect(args);
  if (!client.ok()) return reporter.Fail(kExitUsage, client.status());
  bool got_events = false;
  ProgressBar progress(!args.json && ::isatty(STDERR_FILENO), stderr);
  int64_t result_bytes = 0;
  int64_t received = 0;
  const client::EventCallback on_event = [&](const v1::JobEvent& event) {
    got_events = true;
    if (event.has_accepted()) {
      const std::vector<int64_t> shape(event.accepted().output_shape().begin(),
                                       event.accepted().output_shape().end());
      result_bytes = client::TensorBytes(event.accepted().output_dtype(), shape).value_or(0);
    } else if (event.has_chunk()) {
      received += static_cast<int64_t>(event.chunk().data().size());
      progress.Result(received, result_bytes);
    }
  };
  // The result goes to the --output file as it arrives (a dry run has none to write).
  SubmitOutput output(s.dry_run ? "" : s.output);
  absl::StatusOr<client::JobResult> result;
  client::NpyArray input;
  input.dtype = header->dtype;
  input.shape = header->shape;
  if (shm) {
    v1::SubmitRequest request = MakeRequest(input, s.ops, s.priority, s.tag);
    *request.mutable_options() = s.options;
    request.set_explain(s.explain);
    absl::StatusOr<std::unique_ptr<FileReader>> reader =
        FileReader::Open(s.input, header->data_offset);
    if (!reader.ok()) return reporter.Fail(kExitRuntime, reader.status());
    result = client::SubmitThroughSharedMemory(
        **client, std::move(request), header->data_bytes,
        [&](char* buffer, int64_t n) { return (*reader)->Read(buffer, n); }, on_event, &output);
    // auto: a daemon that cannot map this process's memory gets the bytes over the connection.
    if (!result.ok() && s.transport == TransportMode::kAuto &&
        client::RegionsUnavailable(result.status()) && output.error().ok()) {
      shm = false;
    }
  }
  // Decided only now: a fallback from shared memory takes the connection's usual way.
  const bool stream = !shm && ShouldStream(s.stream, header->data_bytes);
  if (!shm) {
    if (stream) {
      v1::SubmitRequest request = MakeRequest(input, s.ops, s.priority, s.tag);
      *request.mutable_options() = s.options;
      request.set_explain(s.explain || s.dry_run);
      request.set_dry_run(s.dry_run);
      absl::StatusOr<std::unique_ptr<FileReader>> reader =
          FileReader::Open(s.input, header->data_offset);
      if (!reader.ok()) return reporter.Fail(kExitRuntime, reader.status());
      result = (*client)->Run(
          request, header->data_bytes,
          [&](char* buffer, int64_t n) { return (*reader)->Read(buffer, n); }, on_event,
          [&](int64_t sent, int64_t total) { progress.Upload(sent, total); }, &output, s.streams);
    } else {
      absl::StatusOr<client::NpyArray> read = client::ReadNpy(s.input);
      if (!read.ok()) return reporter.Fail(kExitRuntime, read.status());
      v1::SubmitRequest request = MakeRequest(*read, s.ops, s.priority, s.tag);
      *request.mutable_options() = s.options;
      // A dry run's stream carries the plan anyway; asking for it keeps that explicit.
      request.set_explain(s.explain || s.dry_run);
      request.set_dry_run(s.dry_run);
      result = (*client)->Submit(request, on_event, &output);
    }
  }
  if (!result.ok()) {
    progress.Close();
    if (!output.error().ok()) return reporter.Fail(kExitRuntime, output.error());
    return FailRpc(reporter, args, result.status(), got_events);
  }
  // The bar stays up until the file is complete: the flush to disk can take a while.
  const absl::Status written = output.Finish();
  progress.Close();
  if (!written.ok()) return reporter.Fail(kExitRuntime, written);

  SubmitReport report;
  report.input_path = s.input;
  report.input_dtype = input.dtype;
  report.input_shape = input.shape;
  report.upload = shm ? "shm" : stream ? "stream" : "inline";
  report.ops = client::FormatOps(s.ops);
  report.explain = s.explain;
  report.profile = s.options.profile();
  report.timeline = s.options.timeline();
  report.result = *std::move(result);
  *report.result.output.mutable_data() = output.TakeShown();
  if (!s.output.empty() && !s.dry_run) report.output_path = s.output;
  if (!s.timeline_svg.empty()) {
    const v1::Timing& t = report.result.timing;
    if (t.timeline_size() == 0) {
      return reporter.Fail(kExitRuntime,
                           absl::FailedPreconditionError(
                               "--timeline: the server reported no timeline for this job"));
    }
    const std::string svg =
        DrawTimelineSvg(absl::StrCat(report.ops, " on ", t.stream(), ": ", t.chunks(), " chunk",
                                     t.chunks() == 1 ? "" : "s"),
                        JobTimelineBars(t));
    if (absl::Status written = WriteTextFile(s.timeline_svg, svg); !written.ok()) {
      return reporter.Fail(kExitRuntime, written);
    }
  }
  if (args.json) {
    std::cout << SubmitJson(report).dump() << std::endl;
  } else {
    std::cout << RenderSubmitText(report);
  }
  return 0;
}

int RunCompare(const Args& args, const Reporter& reporter) {
  const CompareArgs& c = args.compare;
  absl::StatusOr<client::NpyArray> input = client::ReadNpy(c.input);
  if (!input.ok()) return reporter.Fail(kExitRuntime, input.status());

  CompareReport report;
  report.input_path = c.input;
  report.input_dtype = input->dtype;
  report.input_shape = input->shape;
  report.input_bytes = static_cast<int64_t>(input->data.size());
  report.ops = client::FormatOps(c.ops);
  report.repeat = c.repeat;

  // One request, its options changed per configuration, so that the input is not copied.
  v1::SubmitRequest request = MakeRequest(*input, c.ops, c.priority, "gpupipe compare");
  request.mutable_options()->set_stages(c.stages);

  absl::StatusOr<std::unique_ptr<client::JobClient>> client = Connect(args);
  if (!client.ok()) return reporter.Fail(kExitUsage, client.status());
  // Only what the serving backend supports is run; the rest is reported as skipped.
  absl::StatusOr<v1::DescribeResponse> description = (*client)->Describe();
  if (!description.ok()) return FailRpc(reporter, args, description.status(), false, "compare");
  absl::StatusOr<ComparePlan> plan = PlanCompare(c, *description);
  if (!plan.ok()) return reporter.Fail(kExitRuntime, plan.status());
  report.backend = description->backend();
  report.skipped_launches = plan->skipped_launches;
  report.skipped_stagings = plan->skipped_stagings;

  std::string reference;  // output bytes of the very first run
  bool have_reference = false;
  for (v1::LaunchMode launch : plan->launches) {
    for (v1::Staging staging : plan->stagings) {
      const std::string config = ConfigName(launch, staging);
      request.mutable_options()->set_launch(launch);
      request.mutable_options()->set_staging(staging);
      CompareRow row;
      row.launch = launch;
      row.staging = staging;
      // Run 0 warms up: it may capture a graph, allocate, or load code, none of which the
      // later runs pay again.
      for (int run = 0; run <= c.repeat; ++run) {
        bool got_events = false;
        const auto start = std::chrono::steady_clock::now();
        absl::StatusOr<client::JobResult> result =
            (*client)->Submit(request, [&](const v1::JobEvent&) { got_events = true; });
        const double wall_us = std::chrono::duration<double, std::micro>(
                                   std::chrono::steady_clock::now() - start)
                                   .count();
        if (!result.ok()) {
          return FailRpc(reporter, args, result.status(), got_events,
                         absl::StrCat("compare ", config));
        }
        if (!result->has_timing) {
          return reporter.Fail(
              kExitRuntime,
              absl::DataLossError(absl::StrCat("compare ", config,
                                               ": the server sent no Timing event, so there is "
                                               "no device time to compare")));
        }
        if (!have_reference) {
          report.backend = result->accepted.backend();
          reference = std::move(*result->output.mutable_data());
          have_reference = true;
        } else if (row.first_difference < 0) {
          row.first_difference = FirstDifference(reference, result->output.data());
        }
        if (run == 0) continue;
        const v1::Timing& t = result->timing;
        row.device_us.push_back(t.compute_us());
        row.end_to_end_us.push_back(wall_us);
        row.bytes_in = t.bytes_in();
        row.bytes_out = t.bytes_out();
        row.graph = t.graph();
      }
      report.rows.push_back(std::move(row));
    }
  }

  const std::string mismatch = MismatchMessage(report);
  if (args.json) {
    std::cout << CompareJson(report).dump() << std::endl;
  } else {
    std::cout << RenderCompareText(report);
  }
  if (!mismatch.empty()) {
    // The JSON object above already carries the error; stderr gets the usual one line.
    std::cerr << "gpupipe: " << Reporter::OneLine(mismatch) << std::endl;
    return kExitRuntime;
  }
  return 0;
}

int RunDescribe(const Args& args, const Reporter& reporter) {
  absl::StatusOr<std::unique_ptr<client::JobClient>> client = Connect(args);
  if (!client.ok()) return reporter.Fail(kExitUsage, client.status());
  absl::StatusOr<v1::DescribeResponse> response = (*client)->Describe();
  if (!response.ok()) return FailRpc(reporter, args, response.status(), false);
  if (!args.json) {
    std::cout << RenderDescribeText(*response);
    return 0;
  }
  absl::StatusOr<std::string> json = DescribeJson(*response);
  if (!json.ok()) return reporter.Fail(kExitRuntime, json.status());
  std::cout << *json << std::endl;
  return 0;
}

int RunHealth(const Args& args, const Reporter& reporter) {
  absl::StatusOr<std::unique_ptr<client::JobClient>> client = Connect(args);
  if (!client.ok()) return reporter.Fail(kExitUsage, client.status());
  absl::StatusOr<std::string> status = (*client)->Health(args.health_service);
  if (!status.ok()) return FailRpc(reporter, args, status.status(), false);
  if (args.json) {
    std::cout << nlohmann::ordered_json{{"target", args.target},
                                        {"service", args.health_service},
                                        {"status", *status}}
                     .dump()
              << std::endl;
  } else {
    std::cout << *status << std::endl;
  }
  return *status == "SERVING" ? 0 : kExitRuntime;
}

// Shows the stats once, or every --watch seconds: --count times, or until the process is
// stopped. While watching, a daemon that cannot be reached (restarting, say) is reported and
// asked again at the next tick; any other error ends the command.
int RunBench(const Args& args, const Reporter& reporter) {
  const BenchArgs& b = args.bench;
  // Each channel is a client of its own: its own connection and client-id, as separate
  // processes would be, so that the daemon's per-client limits apply per channel.
  const ConnectChannel connect = [&args](int i) {
    Args channel = args;
    channel.client_id = absl::StrCat(args.client_id.empty() ? "bench" : args.client_id, "-", i);
    if (channel.client_id.size() > kMaxClientIdBytes) channel.client_id.resize(kMaxClientIdBytes);
    return Connect(channel, /*own_connection=*/true, /*submit_small=*/!args.bench.streamed);
  };
  absl::StatusOr<BenchOutput> out =
      RunBench(b, args.target, args.deadline_seconds, connect, ::isatty(STDERR_FILENO) == 1);
  if (!out.ok()) return FailRpc(reporter, args, out.status(), /*got_events=*/false);
  if (!b.timeline_svg.empty()) {
    if (absl::Status written = WriteTextFile(b.timeline_svg, out->timeline_svg); !written.ok()) {
      return reporter.Fail(kExitRuntime, written);
    }
  }
  if (args.json) {
    std::cout << bench::ReportJson(out->report).dump() << std::endl;
  } else if (b.csv) {
    std::cout << bench::ReportCsv(out->report) << std::flush;
  } else {
    std::cout << bench::ReportText(out->report) << std::flush;
  }
  if (out->failed) {
    std::cerr << "gpupipe: bench: some jobs failed or returned results that differ (see the "
                 "report)"
              << std::endl;
    return kExitRuntime;
  }
  return 0;
}

int RunStats(const Args& args, const Reporter& reporter) {
  absl::StatusOr<std::unique_ptr<client::JobClient>> client = Connect(args);
  if (!client.ok()) return reporter.Fail(kExitUsage, client.status());
  const bool watch = args.watch_seconds > 0;
  const bool clear_screen = watch && !args.json && ::isatty(STDOUT_FILENO);
  const auto period = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(args.watch_seconds));
  auto next = std::chrono::steady_clock::now();
  // With --count, the exit status says whether the last refresh reached the daemon.
  bool last_ok = true;
  for (int64_t shown = 0;; ++shown) {
    if (shown > 0 && (!watch || (args.watch_count > 0 && shown >= args.watch_count))) {
      return last_ok ? 0 : 1;
    }
    if (shown > 0) {
      next += period;
      std::this_thread::sleep_until(next);
    }
    absl::StatusOr<v1::StatsResponse> stats = (*client)->GetStats();
    last_ok = stats.ok();
    if (!stats.ok()) {
      const absl::StatusCode code = stats.status().code();
      if (!watch ||
          (code != absl::StatusCode::kUnavailable && code != absl::StatusCode::kDeadlineExceeded)) {
        return FailRpc(reporter, args, stats.status(), false);
      }
      std::cerr << "gpupipe: stats: " << args.target << ": " << absl::StatusCodeToString(code)
                << ": " << Reporter::OneLine(stats.status().message()) << " (asking again in "
                << args.watch_seconds << " s)" << std::endl;
      continue;
    }
    if (args.json) {
      std::cout << StatsJson(*stats).dump() << std::endl;
      continue;
    }
    if (clear_screen) std::cout << "\033[H\033[2J";
    if (watch)
      std::cout << absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::Now(), absl::LocalTimeZone()) << "  "
                << args.target << "\n";
    std::cout << RenderStatsText(*stats) << std::flush;
    if (watch && !clear_screen) std::cout << std::endl;
  }
}

int Main(int argc, char** argv) {
  // As the daemon: no deadlock-cycle checks on every gRPC lock (bench runs thousands of calls),
  // nor in the echo floor that bench starts, whose calls would otherwise pay for them and make
  // the floor higher than a plain echo's.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (argc == 2 && std::string(argv[1]) == kEchoFloorCommand) {
    return bench::ServeEchoFloorProcess();
  }
  const std::vector<std::string> argv_vec(argv + 1, argv + argc);
  const Reporter usage_reporter(WantsJson(argv_vec));
  absl::StatusOr<Args> args = ParseArgs(argv_vec);
  if (!args.ok()) return usage_reporter.Fail(kExitUsage, args.status());
  ApplyEnvironment(&*args);
  const Reporter reporter(args->json);
  switch (args->command) {
    case Command::kHelp:
      std::cout << (args->help_topic == "submit"     ? SubmitHelp()
                    : args->help_topic == "describe" ? DescribeHelp()
                    : args->help_topic == "compare"  ? CompareHelp()
                    : args->help_topic == "health"   ? HealthHelp()
                    : args->help_topic == "stats"    ? StatsHelp()
                    : args->help_topic == "bench"    ? BenchHelp()
                                                     : MainHelp());
      return 0;
    case Command::kVersion:
      std::cout << "gpupipe " << GPUPIPE_VERSION << std::endl;
      return 0;
    case Command::kSubmit:
      return RunSubmit(*args, reporter);
    case Command::kDescribe:
      return RunDescribe(*args, reporter);
    case Command::kCompare:
      return RunCompare(*args, reporter);
    case Command::kHealth:
      return RunHealth(*args, reporter);
    case Command::kStats:
      return RunStats(*args, reporter);
    case Command::kBench:
      return RunBench(*args, reporter);
  }
  return kExitUsage;
}

}  // namespace
}  // namespace cli
}  // namespace gpupipe

int main(int argc, char** argv) { return gpupipe::cli::Main(argc, argv); }
