#include "kernels/cpu/reference_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace gpupipe::kernels::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

EwProgram Program(std::initializer_list<EwInstr> instrs) {
  EwProgram p;
  for (const EwInstr& in : instrs) EXPECT_TRUE(p.Append(in));
  return p;
}
EwInstr Affine(float a, float b) { return {EwOpcode::kAffine, a, b}; }
EwInstr Relu() { return {EwOpcode::kRelu, 0.0f, 0.0f}; }

TEST(ReferenceElementwise, EmptyProgramIsIdentity) {
  const std::vector<float> in = {1.5f, -2.0f, 0.0f};
  std::vector<float> out(in.size());
  Elementwise(in.data(), out.data(), 3, EwProgram{});
  EXPECT_EQ(out, in);
}

TEST(ReferenceElementwise, Affine) {
  const std::vector<float> in = {0.0f, 1.0f, -3.0f, 0.5f};
  std::vector<float> out(in.size());
  Elementwise(in.data(), out.data(), 4, Program({Affine(2.0f, 1.0f)}));
  EXPECT_EQ(out, (std::vector<float>{1.0f, 3.0f, -5.0f, 2.0f}));
}

TEST(ReferenceElementwise, AffineRoundsOnce) {
  // a*x + b with a = x = 1 + 2^-12, b = -(1 + 2^-11): the exact result is 2^-24, which a
  // separately rounded multiply (giving 1 + 2^-11) would turn into 0.
  const float x = 1.0f + std::ldexp(1.0f, -12);
  const float b = -(1.0f + std::ldexp(1.0f, -11));
  float out = 0.0f;
  Elementwise(&x, &out, 1, Program({Affine(x, b)}));
  EXPECT_EQ(out, std::ldexp(1.0f, -24));
}

TEST(ReferenceElementwise, ReluSpecialValues) {
  const std::vector<float> in = {-1.0f, 2.0f, -0.0f, 0.0f, kNaN, -kInf, kInf};
  std::vector<float> out(in.size());
  Elementwise(in.data(), out.data(), static_cast<int64_t>(in.size()), Program({Relu()}));
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_FALSE(std::signbit(out[0]));  // a negative input gives +0
  EXPECT_EQ(out[1], 2.0f);
  // -0 < 0 is false, so -0 passes through unchanged (sign kept).
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_TRUE(std::signbit(out[2]));
  EXPECT_FALSE(std::signbit(out[3]));
  EXPECT_TRUE(std::isnan(out[4]));  // NaN stays NaN
  EXPECT_EQ(out[5], 0.0f);
  EXPECT_EQ(out[6], kInf);
}

TEST(ReferenceElementwise, ProgramRunsInOrder) {
  const std::vector<float> in = {-1.0f, 1.0f, 3.0f};
  std::vector<float> out(in.size());
  // relu(x - 2) * 10 + 1
  Elementwise(in.data(), out.data(), 3, Program({Affine(1.0f, -2.0f), Relu(), Affine(10.0f, 1.0f)}));
  EXPECT_EQ(out, (std::vector<float>{1.0f, 1.0f, 11.0f}));
}

TEST(ReferenceElementwise, InPlace) {
  std::vector<float> buf = {1.0f, -1.0f};
  Elementwise(buf.data(), buf.data(), 2, Program({Affine(-1.0f, 0.0f)}));
  EXPECT_EQ(buf, (std::vector<float>{-1.0f, 1.0f}));
}

TEST(ReferenceElementwise, ZeroLengthTouchesNothing) {
  float out = 42.0f;
  const float in = 1.0f;
  Elementwise(&in, &out, 0, Program({Affine(2.0f, 0.0f)}));
  EXPECT_EQ(out, 42.0f);
}

TEST(ReferenceRowSum, Rows) {
  const std::vector<float> in = {1.0f, 2.0f, 3.0f,  //
                                 -1.0f, 0.5f, 0.25f};
  std::vector<float> out(2);
  RowSum(in.data(), out.data(), 2, 3);
  EXPECT_EQ(out, (std::vector<float>{6.0f, -0.25f}));
}

TEST(ReferenceRowSum, RowsOfLengthOne) {
  const std::vector<float> in = {1.0f, -2.0f, 3.5f};
  std::vector<float> out(3);
  RowSum(in.data(), out.data(), 3, 1);
  EXPECT_EQ(out, in);
}

TEST(ReferenceRowSum, AccumulatesInDouble) {
  // 1e8 + 1 + 1 + ... - 1e8: float accumulation would lose every +1.
  std::vector<float> in(1002, 1.0f);
  in.front() = 1e8f;
  in.back() = -1e8f;
  float out = 0.0f;
  RowSum(in.data(), &out, 1, static_cast<int64_t>(in.size()));
  EXPECT_EQ(out, 1000.0f);
}

TEST(ReferenceRowSoftmax, HandComputed) {
  const std::vector<float> in = {0.0f, std::log(3.0f),  // e^0 : e^ln3 = 1 : 3
                                 5.0f, 5.0f};
  std::vector<float> out(4);
  RowSoftmax(in.data(), out.data(), 2, 2);
  EXPECT_FLOAT_EQ(out[0], 0.25f);
  EXPECT_FLOAT_EQ(out[1], 0.75f);
  EXPECT_FLOAT_EQ(out[2], 0.5f);
  EXPECT_FLOAT_EQ(out[3], 0.5f);
}

TEST(ReferenceRowSoftmax, LargeValuesDoNotOverflow) {
  // exp(1000) overflows even a double; subtracting the max keeps it finite.
  const std::vector<float> in = {1000.0f, 1000.0f, 999.0f, -1000.0f};
  std::vector<float> out(4);
  RowSoftmax(in.data(), out.data(), 1, 4);
  const double e = std::exp(-1.0);
  const double s = 2.0 + e + std::exp(-2000.0);
  EXPECT_FLOAT_EQ(out[0], static_cast<float>(1.0 / s));
  EXPECT_FLOAT_EQ(out[1], static_cast<float>(1.0 / s));
  EXPECT_FLOAT_EQ(out[2], static_cast<float>(e / s));
  EXPECT_EQ(out[3], 0.0f);
}

TEST(ReferenceRowSoftmax, RowsOfLengthOneAreOne) {
  const std::vector<float> in = {-7.0f, 0.0f, 1e30f};
  std::vector<float> out(3);
  RowSoftmax(in.data(), out.data(), 3, 1);
  EXPECT_EQ(out, (std::vector<float>{1.0f, 1.0f, 1.0f}));
}

TEST(ReferenceRowSoftmax, NegativeInfinityGetsZero) {
  const std::vector<float> in = {-kInf, 0.0f};
  std::vector<float> out(2);
  RowSoftmax(in.data(), out.data(), 1, 2);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 1.0f);
}

TEST(ReferenceRowSoftmax, NaNPoisonsTheRowOnly) {
  const std::vector<float> in = {1.0f, kNaN, 0.0f, 0.0f};
  std::vector<float> out(4);
  RowSoftmax(in.data(), out.data(), 2, 2);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_FLOAT_EQ(out[2], 0.5f);
  EXPECT_FLOAT_EQ(out[3], 0.5f);
}

TEST(ReferenceRowSoftmax, RowsSumToOne) {
  std::vector<float> in(3 * 7);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 5) - 2.0f;
  std::vector<float> out(in.size());
  RowSoftmax(in.data(), out.data(), 3, 7);
  for (int r = 0; r < 3; ++r) {
    double s = 0.0;
    for (int c = 0; c < 7; ++c) s += out[r * 7 + c];
    EXPECT_NEAR(s, 1.0, 1e-6);
  }
}

}  // namespace
}  // namespace gpupipe::kernels::cpu
