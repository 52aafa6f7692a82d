// `gpupipe compare`: the measurements of every launch mode x staging configuration, their
// statistics, and the text and JSON renderings. Pure: no I/O. Thread-safe.
#ifndef GPUPIPE_CLIENT_CLI_COMPARE_H_
#define GPUPIPE_CLIENT_CLI_COMPARE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/cli/args.h"
#include "gpupipe/v1/gpupipe.pb.h"
#include "nlohmann/json.hpp"

namespace gpupipe {
namespace cli {

// The measured runs of one configuration (warm-up excluded).
struct CompareRow {
  v1::LaunchMode launch = v1::LAUNCH_AUTO;
  v1::Staging staging = v1::STAGING_AUTO;
  std::vector<double> device_us;      // Timing.compute_us of each run
  std::vector<double> end_to_end_us;  // client wall-clock time of each Submit call
  int64_t bytes_in = 0;               // of the last run
  int64_t bytes_out = 0;
  std::string graph;  // Timing.graph of the last run; empty outside graph modes
  // Offset of the first output byte, over all runs of this configuration (warm-up included),
  // that differs from the reference output (the first run of the first configuration); -1
  // when every run matched.
  int64_t first_difference = -1;
};

struct CompareReport {
  std::string input_path;
  v1::DType input_dtype = v1::DTYPE_UNSPECIFIED;
  std::vector<int64_t> input_shape;
  int64_t input_bytes = 0;
  std::string ops;      // canonical pipeline text
  std::string backend;  // from Accepted
  int repeat = 0;       // measured runs per configuration
  std::vector<CompareRow> rows;
  // Launch modes and stagings asked for (or the defaults) that the backend does not support.
  std::vector<v1::LaunchMode> skipped_launches;
  std::vector<v1::Staging> skipped_stagings;
};

// The configurations to run: those of `args` that the serving backend supports (Describe's
// launch_modes and stagings), and those skipped. Where every default of a dimension is
// unsupported but its `auto` is (the CPU backend), that dimension runs `auto` alone. Fails with
// FAILED_PRECONDITION when a dimension is left with nothing to run.
struct ComparePlan {
  std::vector<v1::LaunchMode> launches;
  std::vector<v1::Staging> stagings;
  std::vector<v1::LaunchMode> skipped_launches;
  std::vector<v1::Staging> skipped_stagings;
};
absl::StatusOr<ComparePlan> PlanCompare(const CompareArgs& args,
                                        const v1::DescribeResponse& description);

// What one row shows.
struct CompareStats {
  double device_us = 0;      // median
  double end_to_end_us = 0;  // median
  double gbps = 0;           // (bytes_in + bytes_out) over device_us; 0 when device_us is 0
  // Device time of the base row over this row's; empty when either is not positive.
  std::optional<double> speedup;
};

// "graph-pdl/pipeline".
std::string ConfigName(v1::LaunchMode launch, v1::Staging staging);

// The median; the mean of the middle two for an even count; 0 for none.
double Median(std::vector<double> values);

// Index of the row that speedups are relative to: stream/direct when present, else 0.
size_t SpeedupBase(const std::vector<CompareRow>& rows);

// Offset of the first byte where `a` and `b` differ (the shorter length when one is a prefix
// of the other); -1 when they are equal.
int64_t FirstDifference(absl::string_view a, absl::string_view b);

// Statistics of every row, in order.
std::vector<CompareStats> ComputeStats(const CompareReport& report);

// One line naming the configurations whose output differed from the reference, e.g.
//   "outputs differ from the first run (stream/direct): graph/pipeline from byte 1024"
// Empty when all outputs were identical.
std::string MismatchMessage(const CompareReport& report);

// The header lines and the table:
//   ops       affine(alpha=2) | softmax
//   input     x.npy float32[64, 100] (25.0 KiB), backend cuda
//   runs      5 per configuration after 1 warm-up; times are medians
//
//   launch  staging   device  end-to-end  GB/s  speedup  graph
//   stream  direct   20.0 us     1.20 ms  2.56    1.00x  -
//   graph   direct   10.0 us     1.10 ms  5.12    2.00x  hit
//
//   results   identical in all 2 configurations
std::string RenderCompareText(const CompareReport& report);

// {"status":"ok","ops","input":{path,shape,dtype},"backend","repeat",
//  "rows":[{launch,staging,device_us,end_to_end_us,gbps,speedup,graph}],"identical":true}.
// speedup and graph are null when not applicable. With a mismatch, "status" is "error" and
// "code" ("INTERNAL") and "message" (MismatchMessage) follow it, and "identical" is false.
nlohmann::ordered_json CompareJson(const CompareReport& report);

}  // namespace cli
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_CLI_COMPARE_H_
