#include "client/cli/timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpupipe {
namespace cli {
namespace {

constexpr double kWidth = 960;  // the plot area
constexpr double kLeft = 190;   // row names
constexpr double kTop = 44;     // title
constexpr double kRowHeight = 22;
constexpr double kBarHeight = 16;

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        // Control characters are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t') out += c;
    }
  }
  return out;
}

std::string Colour(const std::string& kind) {
  static const std::map<std::string, std::string> colours = {
      {"h2d", "#4e79a7"}, {"compute", "#f28e2b"}, {"d2h", "#59a14f"},
      {"job", "#76b7b2"}, {"batch", "#e15759"},   {"failed", "#9c9c9c"}};
  const auto it = colours.find(kind);
  return it == colours.end() ? "#b07aa1" : it->second;
}

// A step of 1, 2 or 5 times a power of ten giving about `ticks` ticks over `span`.
double TickStep(double span, int ticks) {
  const double raw = span / ticks;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

}  // namespace

std::string DrawTimelineSvg(const std::string& title, const std::vector<TimelineBar>& bars) {
  std::vector<std::string> rows;
  std::vector<std::string> kinds;
  double t0 = 0, t1 = 0;
  bool first = true;
  for (const TimelineBar& b : bars) {
    if (std::find(rows.begin(), rows.end(), b.row) == rows.end()) rows.push_back(b.row);
    if (std::find(kinds.begin(), kinds.end(), b.kind) == kinds.end()) kinds.push_back(b.kind);
    t0 = first ? b.start_us : std::min(t0, b.start_us);
    t1 = first ? b.end_us : std::max(t1, b.end_us);
    first = false;
  }
  if (t1 <= t0) t1 = t0 + 1;
  const double span = t1 - t0;
  const bool millis = span >= 10000;
  const double scale = kWidth / span;
  const double plot_bottom =
      kTop + kRowHeight * static_cast<double>(std::max<size_t>(rows.size(), 1));
  const double height = plot_bottom + 70;
  std::string svg = absl::StrFormat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">%s</text>\n",
      kLeft + kWidth + 20, height, kLeft + kWidth + 20, height, Escape(title));
  for (size_t r = 0; r < rows.size(); ++r) {
    const double y = kTop + kRowHeight * static_cast<double>(r);
    absl::StrAppendFormat(
        &svg,
        "<text class=\"row\" x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n"
        "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n",
        kLeft - 8, y + kRowHeight / 2 + 4, Escape(rows[r]), kLeft, kLeft + kWidth, y + kRowHeight,
        y + kRowHeight);
  }
  // The axis: ticks from the first bar's start.
  const double step = TickStep(span, 8);
  for (double t = 0; t <= span + step * 1e-9; t += step) {
    const double x = kLeft + t * scale;
    absl::StrAppendFormat(
        &svg,
        "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.0f\" y2=\"%.0f\" stroke=\"#ccc\"/>\n"
        "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n",
        x, x, kTop, plot_bottom + 4, x, plot_bottom + 18,
        millis ? absl::StrFormat("%g ms", t / 1000) : absl::StrFormat("%g us", t));
  }
  for (const TimelineBar& b : bars) {
    const size_t r = static_cast<size_t>(std::find(rows.begin(), rows.end(), b.row) - rows.begin());
    const double y = kTop + kRowHeight * static_cast<double>(r) + (kRowHeight - kBarHeight) / 2;
    const double x = kLeft + (b.start_us - t0) * scale;
    const double w = std::max(0.5, (b.end_us - b.start_us) * scale);
    absl::StrAppendFormat(
        &svg,
        "<rect class=\"bar %s\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" "
        "fill=\"%s\"><title>%s: %.1f to %.1f us</title></rect>\n",
        Escape(b.kind), x, y, w, kBarHeight, Colour(b.kind),
        Escape(b.label.empty() ? b.kind : b.label), b.start_us - t0, b.end_us - t0);
  }
  double lx = kLeft;
  for (const std::string& kind : kinds) {
    absl::StrAppendFormat(&svg,
                          "<rect class=\"legend\" x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" "
                          "fill=\"%s\"/><text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
                          lx, plot_bottom + 34, Colour(kind), lx + 16, plot_bottom + 44,
                          Escape(kind));
    lx += 30 + 8 * static_cast<double>(kind.size());
  }
  svg += "</svg>\n";
  return svg;
}

std::vector<TimelineBar> JobTimelineBars(const v1::Timing& timing) {
  std::vector<TimelineBar> bars;
  // Rows in pipeline order, whatever order the entries come in.
  for (const char* row : {"h2d", "compute", "d2h"}) {
    for (const v1::TimelineEntry& e : timing.timeline()) {
      if (e.stream() != row) continue;
      bars.push_back({e.stream(), e.stage(), e.start_us(), e.end_us(),
                      absl::StrCat(e.stage(), " chunk ", e.chunk())});
    }
  }
  for (const v1::TimelineEntry& e : timing.timeline()) {
    if (e.stream() == "h2d" || e.stream() == "compute" || e.stream() == "d2h") continue;
    bars.push_back({e.stream(), e.stage(), e.start_us(), e.end_us(),
                    absl::StrCat(e.stage(), " chunk ", e.chunk())});
  }
  return bars;
}

std::vector<TimelineBar> LaneActivityBars(const v1::StatsResponse& stats, double window_us) {
  std::vector<TimelineBar> bars;
  double last = 0;
  for (const v1::LaneSpan& s : stats.lane_activity()) last = std::max(last, s.end_us());
  const double from = last - window_us;
  for (const v1::LaneSpan& s : stats.lane_activity()) {
    if (s.end_us() < from) continue;
    const std::string kind = !s.ok() ? "failed" : s.jobs() > 1 ? "batch" : "job";
    bars.push_back({s.lane(), kind, std::max(s.start_us(), from) - from, s.end_us() - from,
                    s.jobs() > 1 ? absl::StrCat("batch of ", s.jobs(), " jobs") : "one job"});
  }
  std::sort(bars.begin(), bars.end(),
            [](const TimelineBar& a, const TimelineBar& b) { return a.row < b.row; });
  return bars;
}

}  // namespace cli
}  // namespace gpupipe
