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
      s.gb_per_s = static_cast<double>(row.bytes_in + row.bytes_out) / s.device_us / 1e3;
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

std::string RenderCompareText(const CompareReport& report) {
  std::string text;
  text += Line("ops", report.ops);
  text += Line("input", absl::StrCat(report.input_path, " ", client::DTypeName(report.input_dtype),
                                     "[", absl::StrJoin(report.input_shape, ", "), "] (",
                                     FormatBytes(report.input_bytes), "), backend ",
                                     report.backend.empty() ? "-" : report.backend));
  text += Line("runs", absl::StrCat(report.repeat, " per configuration after 1 warm-up; ",
                                    "times are medians"));
  text += "\n";
  const std::vector<CompareStats> stats = ComputeStats(report);
  std::vector<std::vector<std::string>> rows = {
      {"launch", "staging", "device", "end-to-end", "GB/s", "speedup", "graph"}};
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const CompareRow& row = report.rows[i];
    const CompareStats& s = stats[i];
    rows.push_back({LaunchName(row.launch), StagingName(row.staging), FormatMicros(s.device_us),
                    FormatMicros(s.end_to_end_us), absl::StrFormat("%.2f", s.gb_per_s),
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
                    {"gb_per_s", s.gb_per_s},
                    {"speedup", s.speedup ? nlohmann::ordered_json(*s.speedup)
                                          : nlohmann::ordered_json(nullptr)},
                    {"graph", row.graph.empty() ? nlohmann::ordered_json(nullptr)
                                                : nlohmann::ordered_json(row.graph)}});
  }
  j["rows"] = std::move(rows);
  j["identical"] = mismatch.empty();
  return j;
}

}  // namespace cli
}  // namespace gpupipe
