#include "client/cli/compare.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/render.h"
#include "client/dtype.h"
#include "client/enum_names.h"

namespace gpupipe {
namespace cli {
namespace {

std::string LaunchName(v1::LaunchMode launch) {
  return client::FlagEnumName(*v1::LaunchMode_descriptor(), launch);
}

std::string StagingName(v1::Staging staging) {
  return client::FlagEnumName(*v1::Staging_descriptor(), staging);
}

}  // namespace

std::string ConfigName(v1::LaunchMode launch, v1::Staging staging) {
  return absl::StrCat(LaunchName(launch), "/", StagingName(staging));
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + mid);
  return (lower + upper) / 2;
}

size_t SpeedupBase(const std::vector<CompareRow>& rows) {
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].launch == v1::LAUNCH_STREAM && rows[i].staging == v1::STAGING_DIRECT) return i;
  }
  return 0;
}

int64_t FirstDifference(absl::string_view a, absl::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  const auto diff = std::mismatch(a.begin(), a.begin() + n, b.begin());
  if (diff.first != a.begin() + n) return diff.first - a.begin();
  return a.size() == b.size() ? -1 : static_cast<int64_t>(n);
}

std::vector<CompareStats> ComputeStats(const CompareReport& report) {
  std::vector<CompareStats> stats;
  for (const CompareRow& row : report.rows) {
    CompareStats s;
    s.device_us = Median(row.device_us);
    s.end_to_end_us = Median(row.end_to_end_us);
    // bytes per microsecond is MB/s; divide by 1e3 for GB/s.
    if (s.device_us > 0) {
      s.gbps = static_cast<double>(row.bytes_in + row.bytes_out) / s.device_us / 1e3;
    }
    stats.push_back(s);
  }
  if (stats.empty()) return stats;
  const double base = stats[SpeedupBase(report.rows)].device_us;
  for (CompareStats& s : stats) {
    if (base > 0 && s.device_us > 0) s.speedup = base / s.device_us;
  }
  return stats;
}

std::string MismatchMessage(const CompareReport& report) {
  std::vector<std::string> differing;
  for (const CompareRow& row : report.rows) {
    if (row.first_difference >= 0) {
      differing.push_back(absl::StrCat(ConfigName(row.launch, row.staging), " from byte ",
                                       row.first_difference));
    }
  }
  if (differing.empty()) return "";
  const CompareRow& reference = report.rows.front();
  return absl::StrCat("outputs differ from the first run (",
                      ConfigName(reference.launch, reference.staging),
                      "): ", absl::StrJoin(differing, ", "));
}

namespace {

// One dimension of PlanCompare: `asked` split by `supported`.
template <typename Enum>
absl::Status SplitBySupport(const std::vector<Enum>& asked, bool given,
                            const google::protobuf::RepeatedField<int>& supported, Enum automatic,
                            const char* flag, const google::protobuf::EnumDescriptor& type,
                            const std::string& backend, std::vector<Enum>* kept,
                            std::vector<Enum>* skipped) {
  const auto is_supported = [&](Enum e) {
    return std::find(supported.begin(), supported.end(), static_cast<int>(e)) != supported.end();
  };
  for (Enum e : asked) (is_supported(e) ? kept : skipped)->push_back(e);
  if (kept->empty() && !given && is_supported(automatic)) kept->push_back(automatic);
  if (kept->empty()) {
    std::vector<std::string> names;
    for (int s : supported) names.push_back(client::FlagEnumName(type, s));
    return absl::FailedPreconditionError(
        absl::StrCat("compare: the ", backend.empty() ? "serving" : backend,
                     " backend supports none of the ", flag, " values asked for (it supports ",
                     names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
  }
  return absl::OkStatus();
}

std::string NameList(const std::vector<v1::LaunchMode>& launches) {
  std::vector<std::string> names;
  for (v1::LaunchMode l : launches) names.push_back(LaunchName(l));
  return absl::StrJoin(names, ", ");
}

std::string NameList(const std::vector<v1::Staging>& stagings) {
  std::vector<std::string> names;
  for (v1::Staging s : stagings) names.push_back(StagingName(s));
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::StatusOr<ComparePlan> PlanCompare(const CompareArgs& args, const v1::DescribeResponse& d) {
  ComparePlan plan;
  absl::Status s = SplitBySupport(args.launches, args.launches_given, d.launch_modes(),
                                  v1::LAUNCH_AUTO, "--launch", *v1::LaunchMode_descriptor(),
                                  d.backend(), &plan.launches, &plan.skipped_launches);
  if (!s.ok()) return s;
  s = SplitBySupport(args.stagings, args.stagings_given, d.stagings(), v1::STAGING_AUTO,
                     "--staging", *v1::Staging_descriptor(), d.backend(), &plan.stagings,
                     &plan.skipped_stagings);
  if (!s.ok()) return s;
  return plan;
}

std::string RenderCompareText(const CompareReport& report) {
  std::string text;
  text += Line("ops", report.ops);
  text += Line("input", absl::StrCat(report.input_path, " ", client::DTypeName(report.input_dtype),
                                     "[", absl::StrJoin(report.input_shape, ", "), "] (",
                                     FormatBytes(report.input_bytes), "), backend ",
                                     report.backend.empty() ? "-" : report.backend));
  text += Line("runs", absl::StrCat(report.repeat, " per configuration after 1 warm-up; ",
                                    "times are medians"));
  if (!report.skipped_launches.empty() || !report.skipped_stagings.empty()) {
    std::vector<std::string> parts;
    if (!report.skipped_launches.empty()) {
      parts.push_back("launch " + NameList(report.skipped_launches));
    }
    if (!report.skipped_stagings.empty()) {
      parts.push_back("staging " + NameList(report.skipped_stagings));
    }
    text += Line("skipped",
                 absl::StrCat(absl::StrJoin(parts, "; "), ": not supported by the ",
                              report.backend.empty() ? "serving" : report.backend, " backend"));
  }
  text += "\n";
  const std::vector<CompareStats> stats = ComputeStats(report);
  std::vector<std::vector<std::string>> rows = {
      {"launch", "staging", "device", "end-to-end", "GB/s", "speedup", "graph"}};
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const CompareRow& row = report.rows[i];
    const CompareStats& s = stats[i];
    rows.push_back({LaunchName(row.launch), StagingName(row.staging), FormatMicros(s.device_us),
                    FormatMicros(s.end_to_end_us), absl::StrFormat("%.2f", s.gbps),
                    s.speedup ? absl::StrFormat("%.2fx", *s.speedup) : std::string("-"),
                    row.graph.empty() ? std::string("-") : row.graph});
  }
  text += FormatTable(rows, {false, false, true, true, true, true, false}, 0);
  text += "\n";
  const std::string mismatch = MismatchMessage(report);
  if (mismatch.empty()) {
    text += Line("results", absl::StrCat("identical in all ", report.rows.size(),
                                         report.rows.size() == 1 ? " configuration"
                                                                 : " configurations"));
  } else {
    text += Line("results", mismatch);
  }
  return text;
}

nlohmann::ordered_json CompareJson(const CompareReport& report) {
  const std::string mismatch = MismatchMessage(report);
  nlohmann::ordered_json j;
  if (mismatch.empty()) {
    j["status"] = "ok";
  } else {
    j["status"] = "error";
    j["code"] = "INTERNAL";
    j["message"] = mismatch;
  }
  j["ops"] = report.ops;
  j["input"] = {{"path", report.input_path},
                {"shape", report.input_shape},
                {"dtype", client::DTypeName(report.input_dtype)}};
  j["backend"] = report.backend;
  j["repeat"] = report.repeat;
  const std::vector<CompareStats> stats = ComputeStats(report);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const CompareRow& row = report.rows[i];
    const CompareStats& s = stats[i];
    rows.push_back({{"launch", LaunchName(row.launch)},
                    {"staging", StagingName(row.staging)},
                    {"device_us", s.device_us},
                    {"end_to_end_us", s.end_to_end_us},
                    {"gbps", s.gbps},
                    {"speedup", s.speedup ? nlohmann::ordered_json(*s.speedup)
                                          : nlohmann::ordered_json(nullptr)},
                    {"graph", row.graph.empty() ? nlohmann::ordered_json(nullptr)
                                                : nlohmann::ordered_json(row.graph)}});
  }
  j["rows"] = std::move(rows);
  nlohmann::ordered_json skipped_launches = nlohmann::ordered_json::array();
  for (v1::LaunchMode l : report.skipped_launches) skipped_launches.push_back(LaunchName(l));
  nlohmann::ordered_json skipped_stagings = nlohmann::ordered_json::array();
  for (v1::Staging s : report.skipped_stagings) skipped_stagings.push_back(StagingName(s));
  j["skipped"] = {{"launch", skipped_launches}, {"staging", skipped_stagings}};
  j["identical"] = mismatch.empty();
  return j;
}

}  // namespace cli
}  // namespace gpupipe
