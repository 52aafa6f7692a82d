#include "server/job_log.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/engine/job/op_catalog.h"

namespace gpupipe::daemon {

JobLogLine JobLog(const engine::JobRecord& r) {
  JobLogLine line;
  const std::string status(r.status.ok() ? "OK" : absl::StatusCodeToString(r.status.code()));
  const absl::StatusCode code = r.status.code();
  if (code == absl::StatusCode::kInternal || code == absl::StatusCode::kUnknown ||
      code == absl::StatusCode::kDataLoss) {
    line.level = LogLevel::kError;
  }
  line.message = absl::StrCat("job ", r.job_id, " ", status);
  std::string ops = absl::StrJoin(r.spec.ops, "|", [](std::string* out, const engine::OpSpec& op) {
    out->append(engine::GetOpInfo(op.kind).name);
  });
  const engine::JobTiming& t = r.timing;
  std::vector<LogField>& f = line.fields;
  f.reserve(24);  // room for the fields below: a daemon makes one such line a job
  f.push_back({"job_id", r.job_id, /*in_text=*/false});
  f.push_back({"status", status, /*in_text=*/false});
  f.push_back({"client", r.spec.client});
  f.push_back({"priority", std::string(engine::PriorityName(r.spec.priority))});
  f.push_back({"dtype", std::string(engine::DTypeName(r.spec.dtype))});
  f.push_back({"shape", r.spec.shape});
  f.push_back({"ops", std::move(ops)});
  f.push_back({"backend", r.backend});
  if (!t.stream.empty()) f.push_back({"stream", t.stream});
  f.push_back({"queue_us", t.queue_us});
  f.push_back({"h2d_us", t.h2d_us});
  f.push_back({"compute_us", t.compute_us});
  f.push_back({"d2h_us", t.d2h_us});
  f.push_back({"total_us", t.total_us});
  f.push_back({"result_stream_us", t.result_stream_us});
  f.push_back({"kernels", int64_t{t.kernels}});
  f.push_back({"chunks", int64_t{t.chunks}});
  f.push_back({"bytes_in", t.bytes_in});
  f.push_back({"bytes_out", t.bytes_out});
  f.push_back({"gbps", t.gbps});
  // The lanes' order: jobs are handed over (and logged) by several threads, so a log's order
  // need not be the order in which they ran.
  if (t.lane_run > 0) f.push_back({"lane_run", t.lane_run});
  if (!r.spec.client_tag.empty()) f.push_back({"tag", r.spec.client_tag});
  if (!r.status.ok()) f.push_back({"error", std::string(r.status.message())});
  return line;
}

}  // namespace gpupipe::daemon
