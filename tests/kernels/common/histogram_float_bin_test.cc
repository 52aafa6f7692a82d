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

enum class Placement { kAdjacent, kPow2 };

// Checks every value of `values` placed by `how` and returns how many disagreed (the first
// few are printed).
int CountMismatches(const Range& r, const std::vector<float>& values,
                    Placement how = Placement::kAdjacent) {
  const HistogramBinning b = HistogramBinning::Make(r.bins, r.lo, r.hi);
  const FloatBinning f = PlanFloatBinning(b, true);
  const std::vector<FloatEdgePair> edges = EdgeTable(b);
  int mismatches = 0;
  for (float x : values) {
    const int32_t got = how == Placement::kPow2
                            ? Pow2FloatBin(x, f, b.bins - 1, b.bins)
                            : AdjacentFloatBin(x, f, edges.data(), b.bins);
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

// Ranges within the adjacent path's span limit (max(|lo|, |hi|) * bins / (hi - lo) <= 2^20),
// from the benchmark's to ones close to the limit. Several have power-of-two widths and lo a
// whole number of widths, so that the kernel takes kPow2 for them; the adjacent placement is
// checked on them too (x - lo can land exactly on the next edge there).
const std::vector<Range> kAdjacentRanges = {
    {256, 0, 1},        {64, -2, 2},           {2, -1, 1},           {256, 0, 256},
    {8, 3, 5},          {4, 0, 0x1p-124},      {4, -0x1p-120, 0x1p-120},
    {65536, -32768, 32768},                    {65536, 0, 16},       {100, -1, 3.7},
    {1000, 0.1, 0.7},   {7, -1e3, 1e3},        {1, 0, 1},            {3, -0.3, 0.1},
    {15, 65536, 65537}, {1000, 1000, 1001},    {1, 1e6, 1e6 + 0.96}, {255, -1e-3, 7e-4},
    {4096, -1.5, 2.25}, {10, 0.1, 0.2},        {333, -7.25, -7.0},
    {65536, 0, 1e-30},  {4, 0, 1e-37},         {3, -1e-37, 2e-37}};

// Ranges of the pow2 path: power-of-two widths from 2^-10 to 2^12, lo negative, zero and
// positive, the index limit |k| + bins = 2^21 reached, and widths at the exponent limit.
const std::vector<Range> kPow2Ranges = {
    {256, 0, 1},       {256, 0, 256},        {64, -2, 2},           {2, -1, 1},
    {8, 3, 5},         {1, 0, 1},            {65536, -32768, 32768}, {16, -4096, 61440},
    {1024, -1, 0},     {3, -0.75, 0},        {5, 0.25, 1.5},        {4096, 1.0, 5.0},
    {65536, 2031616, 2097152},               {7, -2097145, -2097138},
    {4, 0, 0x1p-98},   {4, -0x1p-98, 0x1p-98}, {2, 0x1p100, 0x1p101}};

TEST(HistogramFloatBin, AdjacentPathMatchesHistogramBinAtEveryEdge) {
  for (const Range& r : kAdjacentRanges) {
    const FloatBinning f = PlanFloatBinning(HistogramBinning::Make(r.bins, r.lo, r.hi), true);
    ASSERT_TRUE(f.path == FloatBinPath::kAdjacent || f.path == FloatBinPath::kPow2)
        << r.bins << ", " << r.lo << ", " << r.hi;
    EXPECT_EQ(CountMismatches(r, ValuesAtEdges(r)), 0);
  }
}

TEST(HistogramFloatBin, AdjacentPathMatchesHistogramBinOnRandomValues) {
  const uint64_t seed = std::random_device{}();
  for (const Range& r : kAdjacentRanges) {
    EXPECT_EQ(CountMismatches(r, RandomValues(r, seed)), 0) << "seed " << seed;
  }
}

TEST(HistogramFloatBin, Pow2PathMatchesHistogramBinAtEveryEdgeAndOnRandomValues) {
  const uint64_t seed = std::random_device{}();
  for (const Range& r : kPow2Ranges) {
    const FloatBinning f = PlanFloatBinning(HistogramBinning::Make(r.bins, r.lo, r.hi), true);
    ASSERT_EQ(f.path, FloatBinPath::kPow2) << r.bins << ", " << r.lo << ", " << r.hi;
    EXPECT_EQ(CountMismatches(r, ValuesAtEdges(r), Placement::kPow2), 0);
    EXPECT_EQ(CountMismatches(r, RandomValues(r, seed), Placement::kPow2), 0) << "seed " << seed;
    // Values that scale below float's normal range: tiny ones either side of zero.
    std::vector<float> tiny;
    for (float x = std::numeric_limits<float>::denorm_min(); x < 1e-30f; x *= 3) {
      tiny.push_back(x);
      tiny.push_back(-x);
    }
    EXPECT_EQ(CountMismatches(r, tiny, Placement::kPow2), 0);
  }
}

TEST(HistogramFloatBin, PathFollowsTheSpanLimits) {
  const auto path = [](int32_t bins, double lo, double hi, bool float_input = true) {
    return PlanFloatBinning(HistogramBinning::Make(bins, lo, hi), float_input).path;
  };
  EXPECT_EQ(path(256, 0, 1), FloatBinPath::kPow2);
  EXPECT_EQ(path(256, 0, 1, false), FloatBinPath::kDouble);  // int32, float64 input
  EXPECT_EQ(path(255, 0, 1), FloatBinPath::kAdjacent);        // width 1/255
  EXPECT_EQ(path(256, 0.001, 1.001), FloatBinPath::kAdjacent);  // lo not a whole width
  EXPECT_EQ(path(4, 0, 0x1p-99), FloatBinPath::kAdjacent);      // width 2^-101: past the limit
  EXPECT_EQ(path(65536, 2031617, 2097153), FloatBinPath::kChecked);  // |k| + bins > 2^21
  EXPECT_EQ(path(7, -2097146, -2097139), FloatBinPath::kChecked);    // likewise
  EXPECT_EQ(path(17, 65536, 65537), FloatBinPath::kChecked);  // span 65537 * 17 > 2^20
  EXPECT_EQ(path(16, 65536, 65537), FloatBinPath::kPow2);     // width 2^-4, k = 2^20
  EXPECT_EQ(path(15, 65536, 65537), FloatBinPath::kAdjacent);  // span 65537 * 15 < 2^20
  EXPECT_EQ(path(10, 1e6, 1e6 + 1), FloatBinPath::kChecked);
  EXPECT_EQ(path(10, 1e12, 1e12 + 1), FloatBinPath::kDouble);  // span 1e13 > 2^40
  EXPECT_EQ(path(10, -1e30, 1e30), FloatBinPath::kDouble);     // beyond 2^64
  // Bins so narrow that bins / (hi - lo) overflows float: the double path, which places the
  // values the way HistogramBin does (a float estimate would be NaN or infinite).
  EXPECT_EQ(path(4, 0, 0x1p-124), FloatBinPath::kAdjacent);  // scale 2^126
  EXPECT_EQ(path(4, 0, 0x1p-126), FloatBinPath::kDouble);    // scale 2^128
  EXPECT_EQ(path(4, 0, 1e-50), FloatBinPath::kDouble);
  EXPECT_EQ(path(65536, 0, 1e-30), FloatBinPath::kAdjacent);  // scale 6.6e34: a float
  EXPECT_EQ(path(65536, 0, 1e-34), FloatBinPath::kDouble);    // scale 6.6e38: none
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
