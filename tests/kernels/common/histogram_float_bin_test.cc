// The float bin placement of kernels/common/histogram_float_bin.h, which the CUDA histogram
// kernel runs, against HistogramBin (the double placement the CPU reference uses), value by
// value: floats on and next to every edge, random floats across and around the range, and
// the special values. Compiled for the host, the same functions as on the device except the
// two rounding helpers (floor, round-up to float), whose device forms are exact too.
#include "kernels/common/histogram_float_bin.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/common/histogram_bin.h"

namespace gpupipe::kernels {
namespace {

struct Range {
  int32_t bins;
  double lo;
  double hi;
};

// The bin HistogramBin gives, with `outside` for values it does not count.
int32_t Expected(float x, const HistogramBinning& b) {
  const int32_t bin = HistogramBin(static_cast<double>(x), b);
  return bin < 0 ? b.bins : bin;
}

std::vector<FloatEdgePair> EdgeTable(const HistogramBinning& b) {
  std::vector<FloatEdgePair> edges(b.bins);
  for (int32_t i = 0; i < b.bins; ++i) edges[i] = MakeFloatEdgePair(i, b);
  return edges;
}

// Checks every value of `values` and returns how many disagreed (the first few are printed).
int CountMismatches(const Range& r, const std::vector<float>& values) {
  const HistogramBinning b = HistogramBinning::Make(r.bins, r.lo, r.hi);
  const FloatBinning f = PlanFloatBinning(b, true);
  const std::vector<FloatEdgePair> edges = EdgeTable(b);
  int mismatches = 0;
  for (float x : values) {
    const int32_t got = AdjacentFloatBin(x, f, edges.data(), b.bins);
    const int32_t want = Expected(x, b);
    if (got != want && ++mismatches <= 5) {
      ADD_FAILURE() << "histogram(" << r.bins << ", " << r.lo << ", " << r.hi << "): x = "
                    << std::hexfloat << x << std::defaultfloat << " (" << x << ") gave bin "
                    << got << ", HistogramBin " << want;
    }
  }
  return mismatches;
}

// The floats on and next to every edge (up to 4 steps either way), and the range's ends.
std::vector<float> ValuesAtEdges(const Range& r) {
  const HistogramBinning b = HistogramBinning::Make(r.bins, r.lo, r.hi);
  std::vector<float> values;
  for (int32_t k = 0; k <= r.bins; ++k) {
    const double edge = k == r.bins ? r.hi : detail::MulAddNoFma(k, b.step, b.lo);
    float x = detail::FloatAtLeast(edge);
    for (int s = 0; s < 4; ++s) x = std::nextafter(x, -INFINITY);
    for (int s = 0; s < 9; ++s, x = std::nextafter(x, INFINITY)) values.push_back(x);
  }
  return values;
}

// Random floats over the range and a bin either side of it, and the special values.
std::vector<float> RandomValues(const Range& r, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double width = (r.hi - r.lo) / r.bins;
  std::uniform_real_distribution<double> uniform(r.lo - width, r.hi + width);
  std::vector<float> values;
  for (int i = 0; i < 20000; ++i) values.push_back(static_cast<float>(uniform(rng)));
  for (float x : {std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY, 0.0f, -0.0f,
                  std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min()}) {
    values.push_back(x);
  }
  return values;
}

// Ranges that take the adjacent path, from the benchmark's to ones at its limit
// (max(|lo|, |hi|) * bins / (hi - lo) close to 2^20) and power-of-two widths, where x - lo
// can land exactly on the next edge.
const std::vector<Range> kAdjacentRanges = {
    {256, 0, 1},        {64, -2, 2},           {2, -1, 1},           {256, 0, 256},
    {8, 3, 5},          {4, 0, 0x1p-124},      {4, -0x1p-120, 0x1p-120},
    {65536, -32768, 32768},                    {65536, 0, 16},       {100, -1, 3.7},
    {1000, 0.1, 0.7},   {7, -1e3, 1e3},        {1, 0, 1},            {3, -0.3, 0.1},
    {15, 65536, 65537}, {1000, 1000, 1001},    {1, 1e6, 1e6 + 0.96}, {255, -1e-3, 7e-4},
    {4096, -1.5, 2.25}, {10, 0.1, 0.2},        {333, -7.25, -7.0}};

TEST(HistogramFloatBin, AdjacentPathMatchesHistogramBinAtEveryEdge) {
  for (const Range& r : kAdjacentRanges) {
    const FloatBinning f = PlanFloatBinning(HistogramBinning::Make(r.bins, r.lo, r.hi), true);
    ASSERT_EQ(f.path, FloatBinPath::kAdjacent) << r.bins << ", " << r.lo << ", " << r.hi;
    EXPECT_EQ(CountMismatches(r, ValuesAtEdges(r)), 0);
  }
}

TEST(HistogramFloatBin, AdjacentPathMatchesHistogramBinOnRandomValues) {
  const uint64_t seed = std::random_device{}();
  for (const Range& r : kAdjacentRanges) {
    EXPECT_EQ(CountMismatches(r, RandomValues(r, seed)), 0) << "seed " << seed;
  }
}

TEST(HistogramFloatBin, PathFollowsTheSpanLimits) {
  const auto path = [](int32_t bins, double lo, double hi, bool float_input = true) {
    return PlanFloatBinning(HistogramBinning::Make(bins, lo, hi), float_input).path;
  };
  EXPECT_EQ(path(256, 0, 1), FloatBinPath::kAdjacent);
  EXPECT_EQ(path(256, 0, 1, false), FloatBinPath::kDouble);  // int32, float64 input
  EXPECT_EQ(path(16, 65536, 65537), FloatBinPath::kChecked);  // span 65537 * 16 > 2^20
  EXPECT_EQ(path(15, 65536, 65537), FloatBinPath::kAdjacent);  // span 65537 * 15 < 2^20
  EXPECT_EQ(path(10, 1e6, 1e6 + 1), FloatBinPath::kChecked);
  EXPECT_EQ(path(10, 1e12, 1e12 + 1), FloatBinPath::kDouble);  // span 1e13 > 2^40
  EXPECT_EQ(path(10, -1e30, 1e30), FloatBinPath::kDouble);     // beyond 2^64
}

TEST(HistogramFloatBin, EstimateStaysInsideTheTable) {
  const HistogramBinning b = HistogramBinning::Make(256, 0, 1);
  const FloatBinning f = PlanFloatBinning(b, true);
  for (float x : RandomValues({256, -1e30, 1e30}, 7)) {
    const int32_t i = FloatBinEstimate(x, f);
    EXPECT_GE(i, 0) << x;
    EXPECT_LT(i, b.bins) << x;
  }
}

}  // namespace
}  // namespace gpupipe::kernels
