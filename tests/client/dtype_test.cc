#include "client/dtype.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpupipe {
namespace client {
namespace {

TEST(DTypeTest, SizesAndNames) {
  EXPECT_EQ(DTypeSize(v1::DTYPE_FLOAT32), 4u);
  EXPECT_EQ(DTypeSize(v1::DTYPE_FLOAT64), 8u);
  EXPECT_EQ(DTypeSize(v1::DTYPE_FLOAT16), 2u);
  EXPECT_EQ(DTypeSize(v1::DTYPE_INT32), 4u);
  EXPECT_EQ(DTypeSize(v1::DTYPE_INT64), 8u);
  EXPECT_EQ(DTypeSize(v1::DTYPE_UNSPECIFIED), 0u);
  EXPECT_EQ(DTypeName(v1::DTYPE_FLOAT16), "float16");
  EXPECT_EQ(DTypeName(static_cast<v1::DType>(42)), "dtype(42)");
}

TEST(DTypeTest, TensorBytes) {
  EXPECT_EQ(*TensorBytes(v1::DTYPE_FLOAT32, {}), 4);
  EXPECT_EQ(*TensorBytes(v1::DTYPE_FLOAT64, {2, 3}), 48);
  EXPECT_EQ(*TensorBytes(v1::DTYPE_INT32, {0, 5}), 0);
  EXPECT_FALSE(TensorBytes(v1::DTYPE_UNSPECIFIED, {1}).ok());
  EXPECT_FALSE(TensorBytes(v1::DTYPE_FLOAT32, {-1}).ok());
  EXPECT_FALSE(TensorBytes(v1::DTYPE_FLOAT32, {1LL << 40, 1LL << 40}).ok());
  EXPECT_FALSE(TensorBytes(v1::DTYPE_FLOAT64, {1LL << 61}).ok());
}

TEST(DTypeTest, ShapeString) {
  EXPECT_EQ(ShapeString({}), "[]");
  EXPECT_EQ(ShapeString({2, 3}), "[2, 3]");
}

TEST(DTypeTest, HalfToFloat) {
  EXPECT_EQ(HalfToFloat(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x03ff), 1023 * std::ldexp(1.0f, -24));  // largest subnormal
  EXPECT_EQ(HalfToFloat(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(HalfToFloat(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
}

}  // namespace
}  // namespace client
}  // namespace gpupipe
