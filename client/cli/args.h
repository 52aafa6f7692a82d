// Command-line parsing for the `gpupipe` CLI: the command, its options and the help texts.
//
// Pure: no I/O. Thread-safe.
#ifndef GPUPIPE_CLIENT_CLI_ARGS_H_
#define GPUPIPE_CLIENT_CLI_ARGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/bench/job_mix.h"
#include "gpupipe/v1/gpupipe.pb.h"

namespace gpupipe {
namespace cli {

inline constexpr char kDefaultTarget[] = "127.0.0.1:50051";

enum class Command { kHelp, kVersion, kSubmit, kDescribe, kCompare, kHealth, kStats, kBench };

// How `submit` sends its input: in the request (Submit) or streamed in chunks (Run).
enum class StreamMode { kAuto, kAlways, kNever };
// kAuto streams inputs larger than this: half the daemon's default Submit limit (64 MiB), so
// that a request stays well inside it.
inline constexpr int64_t kStreamAutoBytes = int64_t{32} << 20;

// How `submit` moves the bytes: over the gRPC connection, or through shared memory the daemon
// maps (same host only). kAuto uses shared memory for a local target (Unix socket, loopback)
// and an input of at least kShmAutoBytes, and falls back to the connection when the daemon
// cannot map this process's shared memory.
enum class TransportMode { kAuto, kGrpc, kShm };
// Below this, two extra registrations and a plan cost more than the bytes' trip.
inline constexpr int64_t kShmAutoBytes = int64_t{1} << 20;
// The most calls --streams accepts (the daemon's own limit, --max-run-streams, may be lower).
inline constexpr int kMaxStreams = 256;

struct SubmitArgs {
  std::string input;     // --input, required
  std::string ops_text;  // --ops, required, as typed
  std::vector<v1::Op> ops;  // --ops, parsed
  std::string output;    // --output, optional
  v1::Priority priority = v1::PRIORITY_UNSPECIFIED;
  v1::LaunchOptions options;  // --staging, --stages, --launch, --profile
  std::string tag;            // --tag
  bool explain = false;       // --explain: ask for the plan and print it
  bool dry_run = false;       // --dry-run: plan only; implies printing the plan
  StreamMode stream = StreamMode::kAuto;  // --stream
  TransportMode transport = TransportMode::kAuto;  // --transport
  // --streams: the calls a streamed upload is split over (0: chosen from the input's size).
  int streams = 0;
  // --timeline [FILE.svg]: ask for the per-chunk timeline (options.timeline) and, with a
  // file, draw it there.
  std::string timeline_svg;
};

// `bench`: load the daemon with a mix of jobs, beside an echo floor in the same run.
struct BenchArgs {
  // --mix FILE, or one entry from --ops, --shape, --dtype and --priority.
  std::vector<bench::MixEntry> mix;
  // --concurrency: a closed loop per value (a sweep); --rate: an open loop per value instead.
  std::vector<int> concurrency = {1, 4, 16, 64};
  std::vector<double> rates;
  double duration_seconds = 5;  // --duration, measured per point and service
  double warmup_seconds = 1;    // --warmup
  int64_t requests = 0;         // --requests: end a point after this many (0: by duration)
  int channels = 4;             // --channels: connections, each its own client
  bool echo = true;             // --no-echo leaves the floor out
  bool echo_stream = false;     // --echo-stream: also the floor of a streaming call
  bool streamed = false;        // --streamed: jobs as Submit streams only (no SubmitSmall)
  bool csv = false;             // --csv: CSV instead of the table
  std::string timeline_svg;     // --timeline FILE.svg: the daemon's lanes during the last point
};
inline constexpr int kMaxBenchConcurrency = 4096;
inline constexpr int kMaxBenchChannels = 256;

// Default configurations of `compare`: every explicit mode; "auto" only when asked for, as it
// repeats one of them.
inline constexpr int kDefaultRepeat = 5;

struct CompareArgs {
  std::string input;        // --input, required
  std::string ops_text;     // --ops, required, as typed
  std::vector<v1::Op> ops;  // --ops, parsed
  v1::Priority priority = v1::PRIORITY_UNSPECIFIED;
  uint32_t stages = 0;                  // --stages, for every configuration
  std::vector<v1::LaunchMode> launches;  // --launch, in the order given
  std::vector<v1::Staging> stagings;     // --staging, in the order given
  bool launches_given = false;           // --launch was given (else the defaults)
  bool stagings_given = false;           // --staging was given
  int repeat = kDefaultRepeat;           // measured runs per configuration
};

struct Args {
  Command command = Command::kHelp;
  std::string help_topic;  // for kHelp: "", or a command with its own help
  std::string target = kDefaultTarget;
  bool target_given = false;  // --target was given (else GPUPIPE_TARGET may set it)
  double deadline_seconds = 300;
  std::string client_id;  // --client-id
  std::string priority_target;  // --priority-target; empty: none
  // Paths of --tls-ca, --tls-cert, --tls-key and --token-file (a file holding the token).
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string token_file;
  std::string token;  // the token itself, from GPUPIPE_TOKEN when there is no --token-file
  bool json = false;
  SubmitArgs submit;
  CompareArgs compare;
  BenchArgs bench;
  std::string health_service;  // health --service
  // stats --watch SECONDS (0: once) and --count N (refreshes before exiting; 0: until stopped).
  double watch_seconds = 0;
  int64_t watch_count = 0;
};

// Longest --client-id (the daemon keeps at most this much of it).
inline constexpr size_t kMaxClientIdBytes = 64;

// Parses the arguments after the program name. Options take their value as the next
// argument or after '='. Global options (--target, --deadline, --json, --help) are accepted
// before and after the command; a command's own options only after it. Fails with
// INVALID_ARGUMENT naming the offending argument; errors in --ops read "ops: <cause>".
// For compare, --launch and --staging take comma-separated lists.
absl::StatusOr<Args> ParseArgs(const std::vector<std::string>& argv);

// True when `argv` asks for JSON output, judged without parsing, so that even a usage error
// can be reported as JSON.
bool WantsJson(const std::vector<std::string>& argv);

// Help texts, each ending in a newline.
std::string MainHelp();
std::string SubmitHelp();
std::string DescribeHelp();
std::string CompareHelp();
std::string HealthHelp();
std::string StatsHelp();
std::string BenchHelp();

}  // namespace cli
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_CLI_ARGS_H_
