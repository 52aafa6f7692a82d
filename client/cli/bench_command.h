// `gpupipe bench`: runs the load points of BenchArgs against the daemon and, point by point,
// against the echo floor in this process, and gathers the report.
#ifndef GPUPIPE_CLIENT_CLI_BENCH_COMMAND_H_
#define GPUPIPE_CLIENT_CLI_BENCH_COMMAND_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/bench/bench_report.h"
#include "client/cli/args.h"
#include "client/job_client.h"

namespace gpupipe {
namespace cli {

// The hidden command that makes this binary serve the bench's echo floor
// (bench::ServeEchoFloorProcess); main() runs it before anything else but turning off
// Abseil's deadlock detection.
inline constexpr char kEchoFloorCommand[] = "__echo-floor";

// Makes the client of channel i (a connection of its own, a client-id of its own).
using ConnectChannel = std::function<absl::StatusOr<std::unique_ptr<client::JobClient>>(int i)>;

struct BenchOutput {
  bench::BenchReport report;
  std::string timeline_svg;  // with BenchArgs::timeline_svg: the drawing
  bool failed = false;       // a job failed or a result mismatched
};

// Fails only when the daemon cannot be reached or described, or the echo floor cannot start;
// failed jobs are counted in the report. `progress` shows a line on stderr.
absl::StatusOr<BenchOutput> RunBench(const BenchArgs& args, const std::string& target,
                                     double deadline_seconds, const ConnectChannel& connect,
                                     bool progress);

}  // namespace cli
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_CLI_BENCH_COMMAND_H_
