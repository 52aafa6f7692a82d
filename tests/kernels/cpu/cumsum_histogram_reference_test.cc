// The cumsum and histogram CPU references against results computed with NumPy 1.24
// (np.cumsum, np.histogram), written out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/cumsum_reference.h"
#include "common/float16.h"
#include "kernels/cpu/histogram_reference.h"

namespace gpupipe::kernels::cpu {
namespace {

TEST(CumsumReference, Float32RowsScanIndependently) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  std::vector<float> y(6);
  ASSERT_TRUE(RowCumsum(x.data(), ElementType::kFloat32, y.data(), 2, 3));
  EXPECT_EQ(y, (std::vector<float>{1, 3, 6, 4, 9, 15}));
}

TEST(CumsumReference, Int32GivesInt64WithoutOverflow) {
  // np.cumsum(np.array([2147483647, 1, -5], np.int32)) -> int64 [2147483647, 2147483648, 2147483643]
  const std::vector<int32_t> x = {2147483647, 1, -5};
  std::vector<int64_t> y(3);
  ASSERT_TRUE(RowCumsum(x.data(), ElementType::kInt32, y.data(), 1, 3));
  EXPECT_EQ(y, (std::vector<int64_t>{2147483647, 2147483648LL, 2147483643LL}));
  EXPECT_EQ(CumsumOutputType(ElementType::kInt32), ElementType::kInt64);
  EXPECT_EQ(CumsumOutputType(ElementType::kFloat16), ElementType::kFloat16);
}

TEST(CumsumReference, Float64) {
  const std::vector<double> x = {0.1, 0.2, 0.3};
  std::vector<double> y(3);
  ASSERT_TRUE(RowCumsum(x.data(), ElementType::kFloat64, y.data(), 1, 3));
  EXPECT_EQ(y[0], 0.1);
  EXPECT_EQ(y[1], 0.1 + 0.2);
  EXPECT_EQ(y[2], (0.1 + 0.2) + 0.3);  // 0.6000000000000001, as np.cumsum
}

TEST(CumsumReference, Float16AccumulatesWider) {
  // [0.5, 0.25, 0.125] -> [0.5, 0.75, 0.875]. With NumPy's float16 accumulation
  // [2048, 1, 1] gives [2048, 2048, 2048]; accumulating in float32 (as the kernels do) and
  // rounding each output once gives [2048, 2048 (2049 ties to even), 2050].
  const std::vector<uint16_t> x = {0x3800, 0x3400, 0x3000};
  std::vector<uint16_t> y(3);
  ASSERT_TRUE(RowCumsum(x.data(), ElementType::kFloat16, y.data(), 1, 3));
  EXPECT_EQ(y, (std::vector<uint16_t>{0x3800, 0x3A00, 0x3B00}));
  const std::vector<uint16_t> big = {FloatToHalf(2048), FloatToHalf(1), FloatToHalf(1)};
  ASSERT_TRUE(RowCumsum(big.data(), ElementType::kFloat16, y.data(), 1, 3));
  EXPECT_EQ(HalfToFloat(y[0]), 2048.0f);
  EXPECT_EQ(HalfToFloat(y[1]), 2048.0f);
  EXPECT_EQ(HalfToFloat(y[2]), 2050.0f);
}

TEST(CumsumReference, CarryChainsPieces) {
  const std::vector<float> x = {1, 2, 3, 4};
  std::vector<float> whole(4), pieces(4);
  ASSERT_TRUE(RowCumsum(x.data(), ElementType::kFloat32, whole.data(), 1, 4));
  float carry = 0;
  ASSERT_TRUE(RowCumsum(x.data(), ElementType::kFloat32, pieces.data(), 1, 1, &carry));
  ASSERT_TRUE(RowCumsum(x.data() + 1, ElementType::kFloat32, pieces.data() + 1, 1, 3, &carry));
  EXPECT_EQ(pieces, whole);
  EXPECT_EQ(carry, 10.0f);
}

TEST(CumsumReference, RejectsInt64AndEmptyShapes) {
  int64_t v = 1;
  EXPECT_FALSE(RowCumsum(&v, ElementType::kInt64, &v, 1, 1));
  EXPECT_FALSE(RowCumsum(&v, ElementType::kFloat32, &v, 0, 1));
}

TEST(Float16Bits, RoundTripsAndRounds) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);        // rounds to inf
  EXPECT_EQ(FloatToHalf(5.9604645e-8f), 0x0001);   // smallest subnormal
  EXPECT_EQ(FloatToHalf(2.9802322e-8f), 0x0000);   // half of it ties to even (0)
  EXPECT_EQ(HalfToFloat(0x0001), 5.9604645e-8f);
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    ASSERT_EQ(FloatToHalf(HalfToFloat(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(HistogramReference, LastBinClosedOutsideAndNanDropped) {
  // np.histogram([0, 0.5, 1, 1.5, -0.1, nan], bins=2, range=(0, 1))[0] == [1, 2]
  const std::vector<double> x = {0, 0.5, 1, 1.5, -0.1, std::nan("")};
  std::vector<int64_t> counts(2, -7);
  ASSERT_TRUE(RowHistogram(x.data(), ElementType::kFloat64, counts.data(), 1, 6, 2, 0, 1, false));
  EXPECT_EQ(counts, (std::vector<int64_t>{1, 2}));
}

TEST(HistogramReference, ValuesOnRoundedEdgesFollowNumpysEdges) {
  // np.histogram([0.1, 0.2, 0.3], bins=3, range=(0, 0.3))[0] == [0, 1, 2]: the edges are
  // 0.3 / 3 * i, just below 0.1 and 0.2, so both land one bin up.
  const std::vector<double> x = {0.1, 0.2, 0.3};
  std::vector<int64_t> counts(3);
  ASSERT_TRUE(RowHistogram(x.data(), ElementType::kFloat64, counts.data(), 1, 3, 3, 0, 0.3, false));
  EXPECT_EQ(counts, (std::vector<int64_t>{0, 1, 2}));
}

TEST(HistogramReference, Int32Rows) {
  // np.histogram(np.arange(1, 11, dtype=np.int32), bins=4, range=(1, 10))[0] == [3, 2, 2, 3];
  // second row: np.histogram([0, 1, 10, 11, 5, 5, 5, 5, 5, 5], 4, (1, 10))[0] == [1, 6, 0, 1]
  const std::vector<int32_t> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                  0, 1, 10, 11, 5, 5, 5, 5, 5, 5};
  std::vector<int64_t> counts(8);
  ASSERT_TRUE(RowHistogram(x.data(), ElementType::kInt32, counts.data(), 2, 10, 4, 1, 10, false));
  EXPECT_EQ(counts, (std::vector<int64_t>{3, 2, 2, 3, 1, 6, 0, 1}));
}

TEST(HistogramReference, TinyNegativeAndJustAboveHi) {
  // np.histogram([-1e-300, 0.0, 2.5, 7.0, 7.0000001], bins=7, range=(0, 7))[0]
  //   == [1, 0, 1, 0, 0, 0, 1]
  const std::vector<double> x = {-1e-300, 0.0, 2.5, 7.0, 7.0000001};
  std::vector<int64_t> counts(7);
  ASSERT_TRUE(RowHistogram(x.data(), ElementType::kFloat64, counts.data(), 1, 5, 7, 0, 7, false));
  EXPECT_EQ(counts, (std::vector<int64_t>{1, 0, 1, 0, 0, 0, 1}));
}

TEST(HistogramReference, Float32AndFloat16AndAccumulate) {
  const std::vector<float> x = {0.25f, 0.75f, 0.75f, 2.0f};
  std::vector<int64_t> counts(2);
  ASSERT_TRUE(RowHistogram(x.data(), ElementType::kFloat32, counts.data(), 1, 4, 2, 0, 1, false));
  EXPECT_EQ(counts, (std::vector<int64_t>{1, 2}));
  ASSERT_TRUE(RowHistogram(x.data(), ElementType::kFloat32, counts.data(), 1, 2, 2, 0, 1, true));
  EXPECT_EQ(counts, (std::vector<int64_t>{2, 3}));
  const std::vector<uint16_t> h = {FloatToHalf(0.25f), FloatToHalf(1.0f)};
  ASSERT_TRUE(RowHistogram(h.data(), ElementType::kFloat16, counts.data(), 1, 2, 2, 0, 1, false));
  EXPECT_EQ(counts, (std::vector<int64_t>{1, 1}));
}

TEST(HistogramReference, RejectsBadRanges) {
  const float x = 0;
  int64_t c = 0;
  EXPECT_FALSE(RowHistogram(&x, ElementType::kFloat32, &c, 1, 1, 1, 1, 1, false));
  EXPECT_FALSE(RowHistogram(&x, ElementType::kFloat32, &c, 1, 1, 1, 0,
                            std::numeric_limits<double>::infinity(), false));
  EXPECT_FALSE(RowHistogram(&x, ElementType::kFloat32, &c, 1, 1, 0, 0, 1, false));
  EXPECT_FALSE(RowHistogram(&x, ElementType::kFloat32, &c, 1, 1, 1, -1e308, 1e308, false));
}

}  // namespace
}  // namespace gpupipe::kernels::cpu
