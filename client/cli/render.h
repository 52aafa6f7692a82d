// Text and JSON renderings of the CLI's results. Pure: no I/O. Thread-safe.
#ifndef GPUPIPE_CLIENT_CLI_RENDER_H_
#define GPUPIPE_CLIENT_CLI_RENDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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
  bool explain = false;     // the plan was asked for (--explain)
  bool profile = false;     // step timings were asked for (--profile)
  bool timeline = false;    // the per-chunk timeline was asked for (--timeline)
  // How the bytes travelled (JSON "upload"): "inline" (Submit), "stream" (Run) or "shm"
  // (shared-memory regions).
  std::string upload = "inline";
  // result.output needs its data only when it has at most kMaxShownElements elements: only
  // then are values shown; the element count comes from its shape.
  client::JobResult result;
};

// The human summary of a finished job, several lines, each ending in '\n': the plan first when
// the server sent one, then job, ops, tensor, timing, stream (with the graph cache status in
// graph modes), bytes, the step table when the server sent step timings, and the output. A dry
// run renders the plan only.
std::string RenderSubmitText(const SubmitReport& report);

// {"status":"ok","job_id","backend","dry_run","ops","input":{...},"output":{...},
//  "plan":{...} (when the server sent one),"timing":{..., "graph", "steps":[...]}}.
// "graph" is null outside graph modes. A dry run has no "timing" and no output values.
nlohmann::ordered_json SubmitJson(const SubmitReport& report);

// The plan as text, one line per kernel, then one per edge:
//   plan      2 kernels, launch pdl, staging direct
//             k0  softmax.stats  step 0  affine+softmax  64 x 100  grid 64 x 256
//             k1  softmax.apply  step 0  affine+softmax  64 x 100  grid 64 x 256
//             k0 -> k1 pdl: needs each row's max and sum
// "grid -" marks a kernel that the backend runs without a launch (cpu).
std::string RenderPlanText(const v1::Plan& plan);

// {"launch","staging","kernels":[{index,name,step,ops,rows,cols,blocks,threads}],
//  "edges":[{from,to,kind,reason}]}.
nlohmann::ordered_json PlanJson(const v1::Plan& plan);

// The per-step table of a profiled job (Timing.steps):
//   steps     step  ops             kernels     device
//             0     affine+softmax        2   812.0 us
std::string RenderStepsText(const v1::Timing& timing);

// The per-chunk timeline (Timing.timeline), the first kMaxTimelineChunks chunks:
//   timeline  chunk      h2d us  compute us     d2h us
//                 0     0.0-9.8   10.1-19.6  19.9-29.3
std::string RenderTimelineText(const v1::Timing& timing);
inline constexpr int kMaxTimelineChunks = 32;

// Left-aligned label column of the text renderings: "label     text\n" (a longer label is
// followed by one space).
inline constexpr int kLabelWidth = 10;
std::string Line(absl::string_view label, absl::string_view text);

// Rows of cells as columns two spaces apart; `right_aligned[i]` right-aligns column i (for
// numbers). Each row becomes one line, prefixed by `indent` spaces, with no trailing spaces.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows,
                        const std::vector<bool>& right_aligned, int indent);

// The human description of a daemon.
std::string RenderDescribeText(const v1::DescribeResponse& response);

// The DescribeResponse as ProtoJson writes it, on one line.
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
