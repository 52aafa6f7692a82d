// The daemon's figures (GetStats) in Prometheus's text exposition format, version 0.0.4, every
// metric named gpupipe_* but the standard process_cpu_seconds_total: jobs by priority and final
// status, bytes and device time, latency histograms (queue wait, device time, total), queue
// depth, lanes and lanes busy, memory pools, the graph cache, uploads in progress, refused calls
// by reason, and the process's CPU time. Per-client figures stay in
// GetStats: a label per client would let clients grow the scraper's series without bound.
#pragma once

#include <string>

#include "gpupipe/v1/gpupipe.pb.h"

namespace gpupipe::metrics {

std::string RenderPrometheus(const v1::StatsResponse& stats);

// `value` escaped for a label value: backslash, double quote and line feed.
std::string EscapeLabel(const std::string& value);

}  // namespace gpupipe::metrics
