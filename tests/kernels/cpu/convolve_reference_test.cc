// The convolution reference against values np.convolve returns (worked by hand, checked
// against NumPy's definitions: 'same' centred with the left margin (min(N, M) - 1) / 2, the
// operands swapped when the taps are longer than the row).
#include "kernels/cpu/convolve_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/float16.h"

namespace gpupipe::kernels::cpu {
namespace {

std::vector<double> Conv64(const std::vector<double>& x, const std::vector<double>& taps,
                           ConvolveMode mode) {
  std::vector<double> out(
      static_cast<size_t>(ConvolveOutputLength(static_cast<int64_t>(x.size()),
                                               static_cast<int64_t>(taps.size()), mode)));
  EXPECT_TRUE(RowConvolve(x.data(), ElementType::kFloat64, out.data(), 1,
                          static_cast<int64_t>(x.size()), taps.data(),
                          static_cast<int32_t>(taps.size()), mode));
  return out;
}

using V = std::vector<double>;

TEST(ConvolveGeometry, OutputRanges) {
  int64_t b = 0;
  int64_t c = 0;
  ConvolveOutputRange(10, 3, ConvolveMode::kFull, &b, &c);
  EXPECT_EQ(b, 0);
  EXPECT_EQ(c, 12);
  ConvolveOutputRange(10, 3, ConvolveMode::kSame, &b, &c);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(c, 10);
  ConvolveOutputRange(10, 4, ConvolveMode::kSame, &b, &c);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(c, 10);
  ConvolveOutputRange(10, 4, ConvolveMode::kValid, &b, &c);
  EXPECT_EQ(b, 3);
  EXPECT_EQ(c, 7);
  ConvolveOutputRange(2, 5, ConvolveMode::kSame, &b, &c);  // swapped: centred on the row
  EXPECT_EQ(b, 0);
  EXPECT_EQ(c, 5);
  ConvolveOutputRange(2, 5, ConvolveMode::kValid, &b, &c);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(c, 4);
}

TEST(ConvolveReference, OddTaps) {
  const V x = {1, 2, 3};
  const V h = {0, 1, 0.5};
  EXPECT_EQ(Conv64(x, h, ConvolveMode::kFull), (V{0, 1, 2.5, 4, 1.5}));
  EXPECT_EQ(Conv64(x, h, ConvolveMode::kSame), (V{1, 2.5, 4}));
  EXPECT_EQ(Conv64(x, h, ConvolveMode::kValid), (V{2.5}));
}

TEST(ConvolveReference, EvenTaps) {
  const V x = {1, 2, 3, 4};
  const V h = {1, 1};
  EXPECT_EQ(Conv64(x, h, ConvolveMode::kFull), (V{1, 3, 5, 7, 4}));
  EXPECT_EQ(Conv64(x, h, ConvolveMode::kSame), (V{1, 3, 5, 7}));
  EXPECT_EQ(Conv64(x, h, ConvolveMode::kValid), (V{3, 5, 7}));
}

TEST(ConvolveReference, TapsLongerThanRowSwapOperands) {
  // np.convolve([1, 2], [1, 2, 3, 4], mode)
  EXPECT_EQ(Conv64({1, 2}, {1, 2, 3, 4}, ConvolveMode::kFull), (V{1, 4, 7, 10, 8}));
  EXPECT_EQ(Conv64({1, 2}, {1, 2, 3, 4}, ConvolveMode::kSame), (V{1, 4, 7, 10}));
  EXPECT_EQ(Conv64({1, 2}, {1, 2, 3, 4}, ConvolveMode::kValid), (V{4, 7, 10}));
  // np.convolve([1, 2, 3], [1, 1, 1, 1, 1], mode)
  const V ones(5, 1.0);
  EXPECT_EQ(Conv64({1, 2, 3}, ones, ConvolveMode::kFull), (V{1, 3, 6, 6, 6, 5, 3}));
  EXPECT_EQ(Conv64({1, 2, 3}, ones, ConvolveMode::kSame), (V{3, 6, 6, 6, 5}));
  EXPECT_EQ(Conv64({1, 2, 3}, ones, ConvolveMode::kValid), (V{6, 6, 6}));
}

TEST(ConvolveReference, SingleElementAndSingleTap) {
  EXPECT_EQ(Conv64({3}, {2}, ConvolveMode::kFull), (V{6}));
  EXPECT_EQ(Conv64({3}, {2}, ConvolveMode::kSame), (V{6}));
  EXPECT_EQ(Conv64({3}, {2}, ConvolveMode::kValid), (V{6}));
  EXPECT_EQ(Conv64({1, 2, 3}, {-1}, ConvolveMode::kSame), (V{-1, -2, -3}));
}

TEST(ConvolveReference, InfinityOnlyReachesOutputsThatReadIt) {
  const double inf = std::numeric_limits<double>::infinity();
  const V y = Conv64({1, inf, 1, 1, 1}, {1, 1}, ConvolveMode::kFull);
  ASSERT_EQ(y.size(), 6u);
  EXPECT_EQ(y[0], 1);
  EXPECT_EQ(y[1], inf);
  EXPECT_EQ(y[2], inf);
  EXPECT_EQ(y[3], 2);
  EXPECT_EQ(y[4], 2);
  EXPECT_EQ(y[5], 1);
}

TEST(ConvolveReference, RowsFloat32AndFloat16) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};  // two rows of 3
  const double h[] = {1, 0.5};
  std::vector<float> y(8);
  ASSERT_TRUE(RowConvolve(x.data(), ElementType::kFloat32, y.data(), 2, 3, h, 2,
                          ConvolveMode::kFull));
  EXPECT_EQ(y, (std::vector<float>{1, 2.5, 4, 1.5, 4, 7, 8.5, 3}));

  std::vector<uint16_t> xh;
  for (float v : x) xh.push_back(DoubleToHalf(v));
  std::vector<uint16_t> yh(6);
  ASSERT_TRUE(RowConvolve(xh.data(), ElementType::kFloat16, yh.data(), 2, 3, h, 2,
                          ConvolveMode::kSame));
  std::vector<float> yf;
  for (uint16_t v : yh) yf.push_back(HalfToFloat(v));
  EXPECT_EQ(yf, (std::vector<float>{1, 2.5, 4, 4, 7, 8.5}));
}

TEST(ConvolveReference, TapsRoundToFloat32ForFloat32Data) {
  const float x[] = {1};
  const double h[] = {0.1};
  float y = 0;
  ASSERT_TRUE(RowConvolve(x, ElementType::kFloat32, &y, 1, 1, h, 1, ConvolveMode::kFull));
  EXPECT_EQ(y, 0.1f);
}

TEST(ConvolveReference, WindowsEqualOneCall) {
  V x(50);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * i) * 3;
  const V h = {0.25, -1, 2, 0.5, 1.5, -0.75, 3};
  for (ConvolveMode mode : {ConvolveMode::kFull, ConvolveMode::kSame, ConvolveMode::kValid}) {
    const V whole = Conv64(x, h, mode);
    int64_t b = 0;
    int64_t c = 0;
    ConvolveOutputRange(50, 7, mode, &b, &c);
    for (int64_t split : {int64_t{0}, int64_t{1}, c / 2, c - 1, c}) {
      V parts(static_cast<size_t>(c));
      for (int part = 0; part < 2; ++part) {
        ConvolveWindow w;
        w.row_length = 50;
        w.out_begin = part == 0 ? b : b + split;
        w.out_count = part == 0 ? split : c - split;
        ConvolveWindowInput(50, 7, w.out_begin, w.out_count, &w.in_begin, &w.in_count);
        ASSERT_TRUE(IsValidConvolveWindow(w, 7));
        ASSERT_TRUE(RowConvolveWindow(x.data() + w.in_begin, ElementType::kFloat64,
                                      parts.data() + (w.out_begin - b), w, h.data(), 7));
      }
      EXPECT_EQ(parts, whole) << "split " << split;
    }
  }
}

TEST(ConvolveReference, RejectsInvalidArguments) {
  const double x[] = {1, 2};
  double y[4] = {};
  const double h[] = {1};
  EXPECT_FALSE(RowConvolve(x, ElementType::kInt32, y, 1, 2, h, 1, ConvolveMode::kFull));
  EXPECT_FALSE(RowConvolve(x, ElementType::kFloat64, y, 1, 2, h, 0, ConvolveMode::kFull));
  EXPECT_FALSE(RowConvolve(x, ElementType::kFloat64, y, 1, 2, h, kMaxConvolveTaps + 1,
                           ConvolveMode::kFull));
  EXPECT_FALSE(RowConvolve(x, ElementType::kFloat64, y, 0, 2, h, 1, ConvolveMode::kFull));
  ConvolveWindow w;
  w.row_length = 2;
  w.in_begin = 1;
  w.in_count = 1;
  w.out_begin = 0;
  w.out_count = 2;  // needs element 0, not in the window
  EXPECT_FALSE(RowConvolveWindow(x + 1, ElementType::kFloat64, y, w, h, 1));
}

}  // namespace
}  // namespace gpupipe::kernels::cpu
