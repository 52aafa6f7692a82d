// Timelines drawn as SVG: rows of bars on one time axis. `submit --timeline FILE.svg` draws a
// job's chunks (a row per stream: copies in, compute, copies out); `bench --timeline` draws
// the daemon's lanes (a row per lane, a bar per run, batches marked).
//
// Pure: no I/O. Thread-safe.
#ifndef GPUPIPE_CLIENT_CLI_TIMELINE_SVG_H_
#define GPUPIPE_CLIENT_CLI_TIMELINE_SVG_H_

#include <string>
#include <vector>

#include "gpupipe/v1/gpupipe.pb.h"

namespace gpupipe {
namespace cli {

struct TimelineBar {
  std::string row;   // the row it is drawn in, rows in order of first appearance
  std::string kind;  // picks the colour and the legend: "h2d", "compute", "d2h", "job", ...
  double start_us = 0;
  double end_us = 0;
  std::string label;  // the bar's tooltip
};

// A standalone SVG document: a title, the rows with their names, a time axis in
// microseconds or milliseconds, each bar as a <rect class="bar KIND">, and a legend.
std::string DrawTimelineSvg(const std::string& title, const std::vector<TimelineBar>& bars);

// A job's Timing.timeline: rows "h2d", "compute", "d2h"; a bar per chunk and stage.
std::vector<TimelineBar> JobTimelineBars(const v1::Timing& timing);

// StatsResponse.lane_activity over its last `window_us`: a row per lane, a bar per run
// (kind "job", "batch" for a batch, "failed"), times from the window's start.
std::vector<TimelineBar> LaneActivityBars(const v1::StatsResponse& stats, double window_us);

}  // namespace cli
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_CLI_TIMELINE_SVG_H_
