// Text and JSON renderings of the CLI's results. Pure: no I/O. Thread-safe.
#ifndef GPUPIPE_CLIENT_CLI_RENDER_H_
#define GPUPIPE_CLIENT_CLI_RENDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/result_assembler.h"
#include "gpupipe/v1/gpupipe.pb.h"
#include "nlohmann/json.hpp"

namespace gpupipe {
namespace cli {

// Results with at most this many elements are shown when not written to a file.
inline constexpr int64_t kMaxShownElements = 16;

struct SubmitReport {
  std::string input_path;
  v1::DType input_dtype = v1::DTYPE_UNSPECIFIED;
  std::vector<int64_t> input_shape;
  std::string ops;          // canonical pipeline text (FormatOps)
  std::string output_path;  // empty: not written
  client::JobResult result;
};

// The human summary of a finished job, several lines, each ending in '\n'.
std::string RenderSubmitText(const SubmitReport& report);

// {"status":"ok","job_id","backend","ops","input":{...},"output":{...},"timing":{...}}.
nlohmann::ordered_json SubmitJson(const SubmitReport& report);

// The human description of a daemon.
std::string RenderDescribeText(const v1::DescribeResponse& response);

// The DescribeResponse in proto3 JSON with the proto's field names, on one line.
absl::StatusOr<std::string> DescribeJson(const v1::DescribeResponse& response);

// {"status":"error","code":"INVALID_ARGUMENT","message":...}; `code` from absl.
nlohmann::ordered_json ErrorJson(absl::StatusCode code, const std::string& message);

// Elements of `tensor` as text: "2.5" for a scalar, "[1, 2]" or "[[1, 2], [3, 4]]" otherwise.
// Floats use the shortest form that reads back to the same value of their dtype. Requires
// data of exactly shape x dtype bytes.
std::string FormatValues(const v1::Tensor& tensor);

// Elements of `tensor` as a flat JSON array (numbers; NaN and infinities become null).
nlohmann::ordered_json ValuesJson(const v1::Tensor& tensor);

// "812.0 us", "2.31 ms", "1.20 s".
std::string FormatMicros(double us);
// "512 B", "4.0 KiB", "16.0 MiB", "1.5 GiB".
std::string FormatBytes(int64_t bytes);
// (bytes_in + bytes_out) / total in GB/s (1e9 bytes per second); 0 when total is 0.
double Throughput(const v1::Timing& timing);

}  // namespace cli
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_CLI_RENDER_H_
