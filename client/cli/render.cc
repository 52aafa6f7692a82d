#include "client/cli/render.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/cli/proto_json.h"
#include "client/dtype.h"
#include "client/enum_names.h"

namespace gpupipe {
namespace cli {
namespace {

using client::DTypeName;
using client::DTypeSize;

template <typename T>
T Load(const std::string& data, size_t index) {
  T v;
  std::memcpy(&v, data.data() + index * sizeof(T), sizeof(T));
  return v;
}

// Shortest "%g" form with at most `max_digits` significant digits that `same` accepts.
template <typename Same>
std::string Shortest(double v, int max_digits, Same same) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  std::string out;
  for (int digits = 1; digits <= max_digits; ++digits) {
    out = absl::StrFormat("%.*g", digits, v);
    double back;
    if (absl::SimpleAtod(out, &back) && same(back)) break;
  }
  return out;
}

std::string ElementText(const v1::Tensor& t, size_t i) {
  switch (t.dtype()) {
    case v1::DTYPE_FLOAT32: {
      const float v = Load<float>(t.data(), i);
      return Shortest(v, 9, [v](double back) { return static_cast<float>(back) == v; });
    }
    case v1::DTYPE_FLOAT64: {
      const double v = Load<double>(t.data(), i);
      return Shortest(v, 17, [v](double back) { return back == v; });
    }
    case v1::DTYPE_FLOAT16: {
      // Five significant digits tell every pair of half values apart.
      const double v = client::HalfToFloat(Load<uint16_t>(t.data(), i));
      return Shortest(v, 5,
                      [v](double back) { return std::fabs(back - v) <= std::fabs(v) * 1e-4; });
    }
    case v1::DTYPE_INT32: return absl::StrCat(Load<int32_t>(t.data(), i));
    case v1::DTYPE_INT64: return absl::StrCat(Load<int64_t>(t.data(), i));
    default: return "?";
  }
}

// Appends the elements of dimension `dim` onward starting at element `*next`.
void AppendNested(const v1::Tensor& t, int dim, size_t* next, std::string* out) {
  if (dim == t.shape_size()) {
    out->append(ElementText(t, (*next)++));
    return;
  }
  out->push_back('[');
  for (int64_t k = 0; k < t.shape(dim); ++k) {
    if (k > 0) out->append(", ");
    AppendNested(t, dim + 1, next, out);
  }
  out->push_back(']');
}

std::string TensorType(v1::DType dtype, const std::vector<int64_t>& shape) {
  return absl::StrCat(DTypeName(dtype), "[", absl::StrJoin(shape, ", "), "]");
}

std::vector<int64_t> ShapeOf(const google::protobuf::RepeatedField<int64_t>& shape) {
  return {shape.begin(), shape.end()};
}

// Elements held in `t`'s data.
int64_t Elements(const v1::Tensor& t) {
  const size_t size = DTypeSize(t.dtype());
  return size == 0 ? 0 : static_cast<int64_t>(t.data().size() / size);
}

// Elements of `t`'s shape, whether or not its data is held; a shape without a valid count
// counts as too many to show.
int64_t ShapeElements(const v1::Tensor& t) {
  return client::NumElements(ShapeOf(t.shape())).value_or(kMaxShownElements + 1);
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

nlohmann::ordered_json StringOrNull(const std::string& s) {
  return s.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s);
}

}  // namespace

std::string Line(absl::string_view label, absl::string_view text) {
  // A label as wide as the column or wider still keeps a space before its text.
  if (label.size() >= static_cast<size_t>(kLabelWidth)) return absl::StrCat(label, " ", text, "\n");
  return absl::StrFormat("%-*s%s\n", kLabelWidth, label, text);
}

std::string FormatTable(const std::vector<std::vector<std::string>>& rows,
                        const std::vector<bool>& right_aligned, int indent) {
  std::vector<size_t> width;
  for (const std::vector<std::string>& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const std::vector<std::string>& row : rows) {
    std::string line(static_cast<size_t>(std::max(indent, 0)), ' ');
    for (size_t i = 0; i < row.size(); ++i) {
      if (i > 0) line += "  ";
      const std::string pad(width[i] - row[i].size(), ' ');
      const bool right = i < right_aligned.size() && right_aligned[i];
      line += right ? pad + row[i] : row[i] + pad;
    }
    absl::StrAppend(&out, absl::StripTrailingAsciiWhitespace(line), "\n");
  }
  return out;
}

std::string RenderPlanText(const v1::Plan& plan) {
  std::string text =
      Line("plan", absl::StrCat(plan.kernels_size(), plan.kernels_size() == 1 ? " kernel" : " kernels",
                                ", launch ", OrDash(plan.launch()), ", staging ",
                                OrDash(plan.staging())));
  std::vector<std::vector<std::string>> rows;
  for (const v1::PlannedKernel& k : plan.kernels()) {
    rows.push_back({absl::StrCat("k", k.index()), OrDash(k.name()), absl::StrCat("step ", k.step()),
                    OrDash(k.ops()), absl::StrCat(k.rows(), " x ", k.cols()),
                    k.blocks() > 0 ? absl::StrCat("grid ", k.blocks(), " x ", k.threads())
                                   : std::string("grid -")});
  }
  text += FormatTable(rows, {}, kLabelWidth);
  for (const v1::PlanEdge& e : plan.edges()) {
    std::string edge = absl::StrCat("k", e.from(), " -> k", e.to());
    if (!e.kind().empty()) absl::StrAppend(&edge, " ", e.kind());
    if (!e.reason().empty()) absl::StrAppend(&edge, ": ", e.reason());
    text += Line("", edge);
  }
  return text;
}

nlohmann::ordered_json PlanJson(const v1::Plan& plan) {
  nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
  for (const v1::PlannedKernel& k : plan.kernels()) {
    kernels.push_back({{"index", k.index()}, {"name", k.name()},   {"step", k.step()},
                       {"ops", k.ops()},     {"rows", k.rows()},   {"cols", k.cols()},
                       {"blocks", k.blocks()}, {"threads", k.threads()}});
  }
  nlohmann::ordered_json edges = nlohmann::ordered_json::array();
  for (const v1::PlanEdge& e : plan.edges()) {
    edges.push_back(
        {{"from", e.from()}, {"to", e.to()}, {"kind", e.kind()}, {"reason", e.reason()}});
  }
  return {{"launch", plan.launch()},
          {"staging", plan.staging()},
          {"kernels", std::move(kernels)},
          {"edges", std::move(edges)}};
}

// A table whose header shares the label column; the rows are indented under it.
static std::string LabeledTable(const char* label,
                                const std::vector<std::vector<std::string>>& rows,
                                const std::vector<bool>& right_aligned) {
  std::string table = FormatTable(rows, right_aligned, 0);
  std::string text;
  bool first = true;
  for (absl::string_view line : absl::StrSplit(table, '\n', absl::SkipEmpty())) {
    text += Line(first ? label : "", line);
    first = false;
  }
  return text;
}

std::string RenderStepsText(const v1::Timing& timing) {
  std::vector<std::vector<std::string>> rows = {{"step", "ops", "kernels", "device"}};
  for (const v1::StepTiming& st : timing.steps()) {
    rows.push_back({absl::StrCat(st.step()), OrDash(st.ops()), absl::StrCat(st.kernels()),
                    FormatMicros(st.device_us())});
  }
  std::string text = LabeledTable("steps", rows, {false, false, true, true});
  if (timing.kernel_times_size() > 0) {
    std::vector<std::vector<std::string>> kernels = {{"kernel", "name", "step", "device"}};
    for (const v1::KernelTiming& k : timing.kernel_times()) {
      kernels.push_back({absl::StrCat("k", k.index()), OrDash(k.name()), absl::StrCat(k.step()),
                         FormatMicros(k.device_us())});
    }
    text += LabeledTable("kernels", kernels, {false, false, true, true});
  }
  return text;
}

std::string RenderTimelineText(const v1::Timing& timing) {
  // One row per chunk: its stages as start-end, in microseconds from the job's first copy.
  std::map<int, std::map<std::string, std::string>> chunks;
  for (const v1::TimelineEntry& e : timing.timeline()) {
    chunks[e.chunk()][e.stage()] = absl::StrFormat("%.1f-%.1f", e.start_us(), e.end_us());
  }
  std::vector<std::vector<std::string>> rows = {{"chunk", "h2d us", "compute us", "d2h us"}};
  int shown = 0;
  for (const auto& [chunk, chunk_stages] : chunks) {
    if (shown++ == kMaxTimelineChunks) break;
    const std::map<std::string, std::string>& stages = chunk_stages;  // lambdas capture no bindings
    const auto cell = [&](const char* stage) {
      auto it = stages.find(stage);
      return it == stages.end() ? std::string("-") : it->second;
    };
    rows.push_back({absl::StrCat(chunk), cell("h2d"), cell("compute"), cell("d2h")});
  }
  std::string text = LabeledTable("timeline", rows, {true, true, true, true});
  if (static_cast<int>(chunks.size()) > kMaxTimelineChunks) {
    text += Line("", absl::StrCat("... ", chunks.size() - kMaxTimelineChunks,
                                  " more chunks (--json has them all)"));
  }
  return text;
}

std::string FormatMicros(double us) {
  if (us < 1000) return absl::StrFormat("%.1f us", us);
  if (us < 1e6) return absl::StrFormat("%.2f ms", us / 1e3);
  return absl::StrFormat("%.2f s", us / 1e6);
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return absl::StrFormat("%.1f %s", v, units[u]);
}

double Throughput(const v1::Timing& timing) {
  if (!(timing.total_us() > 0)) return 0;
  // bytes per microsecond is MB/s; divide by 1e3 for GB/s.
  return static_cast<double>(timing.bytes_in() + timing.bytes_out()) / timing.total_us() / 1e3;
}

std::string FormatValues(const v1::Tensor& tensor) {
  std::string out;
  size_t next = 0;
  AppendNested(tensor, 0, &next, &out);
  return out;
}

nlohmann::ordered_json ValuesJson(const v1::Tensor& tensor) {
  nlohmann::ordered_json values = nlohmann::ordered_json::array();
  const int64_t n = Elements(tensor);
  for (int64_t i = 0; i < n; ++i) {
    double v = 0;
    switch (tensor.dtype()) {
      case v1::DTYPE_INT32: values.push_back(Load<int32_t>(tensor.data(), i)); continue;
      case v1::DTYPE_INT64: values.push_back(Load<int64_t>(tensor.data(), i)); continue;
      case v1::DTYPE_FLOAT32: v = Load<float>(tensor.data(), i); break;
      case v1::DTYPE_FLOAT64: v = Load<double>(tensor.data(), i); break;
      case v1::DTYPE_FLOAT16: v = client::HalfToFloat(Load<uint16_t>(tensor.data(), i)); break;
      default: break;
    }
    if (std::isfinite(v)) {
      values.push_back(v);
    } else {
      values.push_back(nullptr);
    }
  }
  return values;
}

std::string RenderSubmitText(const SubmitReport& r) {
  const client::JobResult& res = r.result;
  if (res.dry_run) return RenderPlanText(res.plan);
  const v1::Tensor& out = res.output;
  std::string text;
  if (res.has_plan) {
    text += RenderPlanText(res.plan);
  } else if (r.explain) {
    text += Line("plan", "not reported by the server");
  }
  text += Line("job",
               absl::StrCat(res.accepted.job_id(), " (backend ", res.accepted.backend(), ")"));
  text += Line("ops", r.ops);
  text += Line("tensor", absl::StrCat(TensorType(r.input_dtype, r.input_shape), " -> ",
                                      TensorType(out.dtype(), ShapeOf(out.shape()))));
  if (res.has_timing) {
    const v1::Timing& t = res.timing;
    text += Line("timing", absl::StrCat("queue ", FormatMicros(t.queue_us()), ", h2d ",
                                        FormatMicros(t.h2d_us()), ", compute ",
                                        FormatMicros(t.compute_us()), ", d2h ",
                                        FormatMicros(t.d2h_us()), ", total ",
                                        FormatMicros(t.total_us()), ", then result stream ",
                                        FormatMicros(t.result_stream_us())));
    std::string stream = absl::StrCat(OrDash(t.stream()), ", ", t.kernels(),
                                      t.kernels() == 1 ? " kernel" : " kernels", ", staging ",
                                      OrDash(t.staging()), ", launch ", OrDash(t.launch()));
    if (!t.graph().empty()) absl::StrAppend(&stream, ", graph ", t.graph());
    text += Line("stream", stream);
    text += Line("bytes", absl::StrFormat("in %s, out %s, %.2f GB/s", FormatBytes(t.bytes_in()),
                                          FormatBytes(t.bytes_out()), Throughput(t)));
    if (t.steps_size() > 0) {
      text += RenderStepsText(t);
    } else if (r.profile) {
      text += Line("steps", "not reported by the server");
    }
    if (t.timeline_size() > 0) {
      text += Line("chunks", absl::StrCat(t.chunks()));
      text += RenderTimelineText(t);
    } else if (r.timeline) {
      text += Line("timeline", "not reported by the server");
    }
  } else {
    text += Line("timing", "not reported by the server");
  }
  const int64_t n = ShapeElements(out);
  if (!r.output_path.empty()) {
    text += Line("output", absl::StrCat("written to ", r.output_path));
  } else if (n <= kMaxShownElements) {
    text += Line("output", FormatValues(out));
  } else {
    text += Line("output", absl::StrCat("not saved (", n,
                                        " elements; pass --output FILE.npy to save it)"));
  }
  return text;
}

nlohmann::ordered_json SubmitJson(const SubmitReport& r) {
  const client::JobResult& res = r.result;
  const v1::Tensor& out = res.output;
  nlohmann::ordered_json j;
  j["status"] = "ok";
  j["job_id"] = res.accepted.job_id();
  j["backend"] = res.accepted.backend();
  j["dry_run"] = res.dry_run;
  j["ops"] = r.ops;
  j["input"] = {{"path", r.input_path},
                {"shape", r.input_shape},
                {"dtype", DTypeName(r.input_dtype)}};
  j["upload"] = r.upload;
  nlohmann::ordered_json output = {{"shape", ShapeOf(out.shape())},
                                   {"dtype", DTypeName(out.dtype())}};
  if (!res.dry_run) {
    output["path"] = StringOrNull(r.output_path);
    if (ShapeElements(out) <= kMaxShownElements) output["values"] = ValuesJson(out);
  }
  j["output"] = std::move(output);
  if (res.has_plan) j["plan"] = PlanJson(res.plan);
  if (res.dry_run) return j;
  if (res.has_timing) {
    const v1::Timing& t = res.timing;
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (const v1::StepTiming& st : t.steps()) {
      steps.push_back({{"step", st.step()},
                       {"ops", st.ops()},
                       {"kernels", st.kernels()},
                       {"device_us", st.device_us()}});
    }
    nlohmann::ordered_json kernel_times = nlohmann::ordered_json::array();
    for (const v1::KernelTiming& k : t.kernel_times()) {
      kernel_times.push_back({{"index", k.index()},
                              {"name", k.name()},
                              {"step", k.step()},
                              {"device_us", k.device_us()}});
    }
    nlohmann::ordered_json timeline = nlohmann::ordered_json::array();
    for (const v1::TimelineEntry& e : t.timeline()) {
      timeline.push_back({{"stream", e.stream()},
                          {"stage", e.stage()},
                          {"chunk", e.chunk()},
                          {"start_us", e.start_us()},
                          {"end_us", e.end_us()}});
    }
    j["timing"] = {{"queue_us", t.queue_us()},     {"h2d_us", t.h2d_us()},
                   {"compute_us", t.compute_us()}, {"d2h_us", t.d2h_us()},
                   {"total_us", t.total_us()},     {"bytes_in", t.bytes_in()},
                   {"bytes_out", t.bytes_out()},   {"kernels", t.kernels()},
                   {"stream", t.stream()},         {"staging", t.staging()},
                   {"launch", t.launch()},         {"graph", StringOrNull(t.graph())},
                   {"gbps", Throughput(t)},        {"result_stream_us", t.result_stream_us()},
                   {"steps", std::move(steps)},    {"kernel_times", std::move(kernel_times)},
                   {"chunks", t.chunks()},         {"timeline", std::move(timeline)}};
  } else {
    j["timing"] = nullptr;
  }
  return j;
}

std::string RenderDescribeText(const v1::DescribeResponse& d) {
  std::string text;
  text += Line("server", absl::StrCat(d.server_version().empty() ? "gpupiped" : d.server_version(),
                                      " (backend ", d.backend(), ")"));
  if (d.has_device()) {
    const v1::Device& dev = d.device();
    text += Line("device", absl::StrCat(dev.name(), " (ordinal ", dev.ordinal(), ", compute ",
                                        dev.compute_capability(), ", ", dev.multiprocessors(),
                                        " SMs, ", FormatBytes(dev.memory_bytes()), ")"));
    text += Line("", absl::StrCat("driver ", dev.driver_version(), ", runtime ",
                                  dev.runtime_version()));
    if (!dev.wait().empty()) text += Line("", absl::StrCat("waits for the device: ", dev.wait()));
    if (!dev.kernel_code().empty()) {
      text += Line("", absl::StrCat("kernels: ", dev.kernel_code(), " (",
                                    dev.features().empty() ? "no sm_90 features"
                                                           : absl::StrJoin(dev.features(), ", "),
                                    ")"));
    }
    text += Line("streams", absl::StrCat("device priorities ", dev.least_stream_priority(),
                                         " (least) to ", dev.greatest_stream_priority(),
                                         " (greatest)"));
    for (const v1::PriorityMapping& p : dev.priorities()) {
      text += Line("", absl::StrFormat(
                           "%-8s-> device priority %d, %d %s",
                           client::ShortEnumName(*v1::Priority_descriptor(), p.priority()),
                           p.device_priority(), p.streams(),
                           p.streams() == 1 ? "stream" : "streams"));
    }
  } else {
    text += Line("device", "none (CPU backend)");
  }
  size_t width = 0;
  for (const v1::OpInfo& op : d.ops()) width = std::max(width, op.name().size());
  bool first = true;
  for (const v1::OpInfo& op : d.ops()) {
    const std::string pad(width + 2, ' ');
    text += Line(first ? "ops" : "", absl::StrFormat("%-*s%-15s%s", static_cast<int>(width + 2),
                                                     op.name(), op.kind(), op.description()));
    first = false;
    if (op.params_size() > 0) {
      std::vector<std::string> params;
      for (const v1::ParamInfo& p : op.params()) {
        std::string desc = absl::StrCat(p.name(), " (", p.type().empty() ? "number" : p.type());
        if (p.required()) {
          absl::StrAppend(&desc, ", required");
        } else if (!p.default_value().empty()) {
          absl::StrAppend(&desc, ", default ", p.default_value());
        }
        absl::StrAppend(&desc, ")");
        if (!p.description().empty()) absl::StrAppend(&desc, ": ", p.description());
        params.push_back(std::move(desc));
      }
      text += Line("", absl::StrCat(pad, "params: ", absl::StrJoin(params, "; ")));
    }
    std::vector<std::string> dtypes;
    for (int dt : op.dtypes()) dtypes.push_back(DTypeName(static_cast<v1::DType>(dt)));
    if (!dtypes.empty()) {
      text += Line("", absl::StrCat(pad, "dtypes: ", absl::StrJoin(dtypes, ", ")));
    }
  }
  if (d.ops_size() == 0) text += Line("ops", "none");
  auto enum_list = [](const auto& values, const google::protobuf::EnumDescriptor& type) {
    std::vector<std::string> names;
    for (int v : values) names.push_back(client::FlagEnumName(type, v));
    return names.empty() ? std::string("-") : absl::StrJoin(names, ", ");
  };
  text += Line("staging", enum_list(d.stagings(), *v1::Staging_descriptor()));
  text += Line("launch", enum_list(d.launch_modes(), *v1::LaunchMode_descriptor()));
  if (d.has_graph_cache()) {
    const v1::GraphCacheStats& g = d.graph_cache();
    // A backend without CUDA graphs reports a cache of capacity 0.
    text += Line("graphs", g.capacity() == 0
                               ? std::string("no cache")
                               : absl::StrCat(g.entries(), " of ", g.capacity(), " cached; ",
                                              g.hits(), " hits, ", g.updates(), " updates, ",
                                              g.misses(), " misses, ", g.evictions(),
                                              " evictions"));
  }
  if (d.has_batching()) {
    const v1::Batching& b = d.batching();
    text +=
        Line("batching", b.window_us() == 0
                             ? std::string("off")
                             : absl::StrCat("window ", b.window_us(), " us, at most ", b.max_jobs(),
                                            " jobs and ", FormatBytes(b.max_bytes()), " a batch"));
  }
  text += Line("direct runs", d.direct_run_max_bytes() == 0
                                  ? std::string("off")
                                  : absl::StrCat("jobs of at most ",
                                                 FormatBytes(d.direct_run_max_bytes()),
                                                 " in and out, on an idle lane"));
  if (d.has_priority_listener()) {
    const v1::PriorityListener& p = d.priority_listener();
    text += Line("priority",
                 absl::StrCat(p.address(), ": SubmitSmall of priority ",
                              client::ShortEnumName(*v1::Priority_descriptor(), p.lowest()),
                              " and above, ", p.max_calls(), " calls at once, ",
                              p.threads(), p.threads() == 1 ? " thread" : " threads"));
  }
  if (d.has_limits()) {
    const v1::Limits& l = d.limits();
    const std::string streamed =
        l.max_stream_input_bytes() > 0
            ? absl::StrCat(" (streamed ", FormatBytes(l.max_stream_input_bytes()), ")")
            : std::string();
    text += Line("limits", absl::StrCat("input ", FormatBytes(l.max_input_bytes()), streamed, ", ",
                                        l.max_ops(), " ops, rank ", l.max_rank(), ", chunks ",
                                        FormatBytes(l.max_chunk_bytes())));
    if (l.input_ring_total_bytes() > 0) {
      text += Line("uploads", absl::StrCat("ring of at most ", FormatBytes(l.input_ring_bytes()),
                                           " each, from a pool of ",
                                           FormatBytes(l.input_ring_total_bytes())));
    }
    if (l.max_queued_jobs() > 0) {
      // Daemons that bound unread results state it (0: not stated).
      const auto unread = [](int64_t bytes, absl::string_view before) {
        return bytes > 0 ? absl::StrCat(before, FormatBytes(bytes), " unread") : std::string();
      };
      text += Line("queue", absl::StrCat(l.max_queued_jobs(), " jobs per priority, ",
                                         FormatBytes(l.max_queued_bytes()), " held",
                                         unread(l.max_unread_bytes(), ", results of ")));
      text += Line("client", absl::StrCat(l.max_client_jobs(), " jobs, ",
                                          FormatBytes(l.max_client_queued_bytes()), " queued, ",
                                          l.max_client_uploads(), " uploads",
                                          unread(l.max_client_unread_bytes(), ", ")));
    }
    if (l.min_chunk_bytes() > 0 || l.max_work_per_byte() > 0) {
      text +=
          Line("work", absl::StrCat("chunks of at least ", FormatBytes(l.min_chunk_bytes()),
                                    ", at most ", l.max_work_per_byte(), " operations per byte"));
    }
    const auto seconds = [](int64_t ms) {
      return ms > 0 ? absl::StrCat(ms / 1000.0, " s") : std::string("none");
    };
    if (l.upload_idle_timeout_ms() > 0 || l.reader_idle_timeout_ms() > 0) {
      std::string idle = absl::StrCat("upload ", seconds(l.upload_idle_timeout_ms()), ", reader ",
                                      seconds(l.reader_idle_timeout_ms()));
      if (l.reader_idle_busy_timeout_ms() > 0 &&
          l.reader_idle_busy_timeout_ms() < l.reader_idle_timeout_ms()) {
        absl::StrAppend(&idle, " (", seconds(l.reader_idle_busy_timeout_ms()),
                        " while its lane is wanted)");
      }
      text += Line("idle", idle);
    }
  }
  return text;
}

absl::StatusOr<std::string> DescribeJson(const v1::DescribeResponse& response) {
  return ProtoJson(response).dump();
}

nlohmann::ordered_json ErrorJson(absl::StatusCode code, const std::string& message) {
  return {{"status", "error"}, {"code", absl::StatusCodeToString(code)}, {"message", message}};
}

}  // namespace cli
}  // namespace gpupipe
