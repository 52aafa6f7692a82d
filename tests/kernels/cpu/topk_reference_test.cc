// The top-k reference against np.sort(row)[::-1][:k]: NaN largest, ties kept, rows packed.
#include "kernels/cpu/topk_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/float16.h"

namespace gpupipe::kernels::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(TopkReference, NanIsLargestAndTiesAreKept) {
  const std::vector<float> x = {3, kNaN, 1, 5, 5, -kInf};
  std::vector<float> y(4);
  ASSERT_TRUE(RowTopk(x.data(), ElementType::kFloat32, y.data(), 1, 6, 4));
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 5);
  EXPECT_EQ(y[2], 5);
  EXPECT_EQ(y[3], 3);
}

TEST(TopkReference, WholeRowIsSortedDescending) {
  const std::vector<double> x = {0.5, -kInf, 2, -1, kInf, 0};
  std::vector<double> y(6);
  ASSERT_TRUE(RowTopk(x.data(), ElementType::kFloat64, y.data(), 1, 6, 6));
  EXPECT_EQ(y, (std::vector<double>{kInf, 2, 0.5, 0, -1, -kInf}));
}

TEST(TopkReference, Int32RowsArePacked) {
  const std::vector<int32_t> x = {-1, 7, 7, std::numeric_limits<int32_t>::min(), 2,
                                  4, 4, 4, 4, -9};
  std::vector<int32_t> y(6);
  ASSERT_TRUE(RowTopk(x.data(), ElementType::kInt32, y.data(), 2, 5, 3));
  EXPECT_EQ(y, (std::vector<int32_t>{7, 7, 2, 4, 4, 4}));
}

TEST(TopkReference, Float16) {
  std::vector<uint16_t> x;
  for (float v : {0.5f, 3.0f, -2.0f, kNaN, 65504.0f}) x.push_back(DoubleToHalf(v));
  std::vector<uint16_t> y(3);
  ASSERT_TRUE(RowTopk(x.data(), ElementType::kFloat16, y.data(), 1, 5, 3));
  EXPECT_TRUE(std::isnan(HalfToFloat(y[0])));
  EXPECT_EQ(HalfToFloat(y[1]), 65504.0f);
  EXPECT_EQ(HalfToFloat(y[2]), 3.0f);
}

TEST(TopkReference, TopkOfChunkTopksIsTopkOfRow) {
  std::vector<float> x(40);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::fmod(i * 7.3f, 11.0f) - 5;
  x[17] = kNaN;
  std::vector<float> whole(5);
  ASSERT_TRUE(RowTopk(x.data(), ElementType::kFloat32, whole.data(), 1, 40, 5));
  std::vector<float> partial(4 * 5);
  ASSERT_TRUE(RowTopk(x.data(), ElementType::kFloat32, partial.data(), 4, 10, 5));
  std::vector<float> combined(5);
  ASSERT_TRUE(RowTopk(partial.data(), ElementType::kFloat32, combined.data(), 1, 20, 5));
  ASSERT_TRUE(std::isnan(whole[0]) && std::isnan(combined[0]));
  for (int i = 1; i < 5; ++i) EXPECT_EQ(combined[i], whole[i]) << i;
}

TEST(TopkReference, Float16BitsRoundTrip) {
  for (double v : {0.0, -0.0, 1.0, 65504.0, 6.103515625e-05, 5.960464477539063e-08, -3.5}) {
    EXPECT_EQ(HalfToFloat(DoubleToHalf(v)), static_cast<float>(v)) << v;
  }
  EXPECT_EQ(DoubleToHalf(65520.0), 0x7c00);  // rounds to infinity
  EXPECT_EQ(DoubleToHalf(1.0 + 1.0 / 2048), 0x3c00);  // tie to even
  EXPECT_EQ(DoubleToHalf(1.0 + 3.0 / 2048), 0x3c02);
  EXPECT_EQ(DoubleToHalf(2.9802322387695312e-08), 0);  // half the smallest subnormal
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(DoubleToHalf(f), h) << h;
  }
}

TEST(TopkReference, RejectsInvalidArguments) {
  const float x[] = {1, 2};
  float y[2];
  EXPECT_FALSE(RowTopk(x, ElementType::kFloat32, y, 1, 2, 0));
  EXPECT_FALSE(RowTopk(x, ElementType::kFloat32, y, 1, 2, 3));
  EXPECT_FALSE(RowTopk(x, ElementType::kInt64, y, 1, 2, 1));
}

}  // namespace
}  // namespace gpupipe::kernels::cpu
