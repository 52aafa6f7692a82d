#include "client/cli/timeline_svg.h"

#include <gtest/gtest.h>

namespace gpupipe::cli {
namespace {

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(TimelineSvg, AJobHasABarPerChunkAndStageInPipelineRows) {
  v1::Timing timing;
  for (int chunk = 0; chunk < 3; ++chunk) {
    for (const char* stage : {"d2h", "compute", "h2d"}) {
      v1::TimelineEntry* e = timing.add_timeline();
      e->set_stream(stage);
      e->set_stage(stage);
      e->set_chunk(chunk);
      e->set_start_us(chunk * 10.0);
      e->set_end_us(chunk * 10.0 + 8);
    }
  }
  const std::vector<TimelineBar> bars = JobTimelineBars(timing);
  ASSERT_EQ(bars.size(), 9u);
  EXPECT_EQ(bars.front().row, "h2d");  // pipeline order, whatever order they came in
  EXPECT_EQ(bars.back().row, "d2h");
  const std::string svg = DrawTimelineSvg("relu <&> \"x\"", bars);
  EXPECT_EQ(Count(svg, "<rect class=\"bar h2d\""), 3);
  EXPECT_EQ(Count(svg, "<rect class=\"bar compute\""), 3);
  EXPECT_EQ(Count(svg, "<rect class=\"bar d2h\""), 3);
  EXPECT_NE(svg.find("relu &lt;&amp;&gt; &quot;x&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("<&>"), std::string::npos);
  EXPECT_EQ(Count(svg, "<svg"), 1);
  EXPECT_EQ(Count(svg, "</svg>"), 1);
}

TEST(TimelineSvg, LaneActivityKeepsTheWindowAndMarksBatches) {
  v1::StatsResponse stats;
  const auto span = [&](const char* lane, double start, double end, int jobs, bool ok) {
    v1::LaneSpan* s = stats.add_lane_activity();
    s->set_lane(lane);
    s->set_start_us(start);
    s->set_end_us(end);
    s->set_jobs(jobs);
    s->set_ok(ok);
  };
  span("normal/0", 0, 100, 1, true);  // before the window
  span("normal/0", 5000, 5100, 1, true);
  span("normal/1", 5050, 5300, 12, true);
  span("high/0", 5200, 5400, 1, false);
  const std::vector<TimelineBar> bars = LaneActivityBars(stats, 1000);
  ASSERT_EQ(bars.size(), 3u);
  const std::string svg = DrawTimelineSvg("lanes", bars);
  EXPECT_EQ(Count(svg, "class=\"bar job\""), 1);
  EXPECT_EQ(Count(svg, "class=\"bar batch\""), 1);
  EXPECT_EQ(Count(svg, "class=\"bar failed\""), 1);
  EXPECT_NE(svg.find("batch of 12 jobs"), std::string::npos);
}

TEST(TimelineSvg, NoBarsStillMakeADocument) {
  const std::string svg = DrawTimelineSvg("empty", {});
  EXPECT_EQ(Count(svg, "<svg"), 1);
  EXPECT_EQ(Count(svg, "</svg>"), 1);
}

}  // namespace
}  // namespace gpupipe::cli
