#include "kernels/cpu/reference_ops.h"

#include "common/float16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
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
EwInstr Op(EwOpcode op, float a = 0.0f, float b = 0.0f) { return {op, a, b}; }

// Runs a one-instruction program over `in`.
std::vector<float> Run1(EwInstr instr, const std::vector<float>& in) {
  std::vector<float> out(in.size());
  Elementwise(in.data(), out.data(), static_cast<int64_t>(in.size()), Program({instr}));
  return out;
}

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

TEST(ReferenceElementwise, OpcodesAreDenseAndValidated) {
  for (int32_t op = 0; op < kEwOpcodeCount; ++op) {
    EXPECT_TRUE(IsValidEwOpcode(static_cast<EwOpcode>(op))) << op;
  }
  EXPECT_FALSE(IsValidEwOpcode(static_cast<EwOpcode>(-1)));
  EXPECT_FALSE(IsValidEwOpcode(static_cast<EwOpcode>(kEwOpcodeCount)));
  // Exact opcodes promise bit-identical host/device results; the transcendental ones a bound.
  for (EwOpcode op : {EwOpcode::kAffine, EwOpcode::kRelu, EwOpcode::kClamp, EwOpcode::kAbs,
                      EwOpcode::kSqrt}) {
    EXPECT_EQ(EwHostDeviceUlp(op), 0);
  }
  for (EwOpcode op : {EwOpcode::kExp, EwOpcode::kLog, EwOpcode::kSigmoid, EwOpcode::kTanh,
                      EwOpcode::kPow}) {
    EXPECT_GT(EwHostDeviceUlp(op), 0);
    EXPECT_LE(EwHostDeviceUlp(op), 8);
  }
}

TEST(ReferenceElementwise, ClampIsNumpyClip) {
  const std::vector<float> in = {-5.0f, -1.5f, 0.0f, 2.0f, 7.0f, kNaN, -kInf, kInf, -0.0f};
  const std::vector<float> out = Run1(Op(EwOpcode::kClamp, -1.5f, 2.0f), in);
  EXPECT_EQ(out[0], -1.5f);
  EXPECT_EQ(out[1], -1.5f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 2.0f);
  EXPECT_EQ(out[4], 2.0f);
  EXPECT_TRUE(std::isnan(out[5]));  // NaN stays NaN
  EXPECT_EQ(out[6], -1.5f);
  EXPECT_EQ(out[7], 2.0f);
  EXPECT_TRUE(std::signbit(out[8]));  // -0 inside the range passes unchanged
  // lo > hi: np.clip gives hi everywhere (minimum(maximum(x, lo), hi)).
  const std::vector<float> swapped = Run1(Op(EwOpcode::kClamp, 3.0f, -3.0f), {-9.0f, 0.0f, 9.0f});
  EXPECT_EQ(swapped, (std::vector<float>{-3.0f, -3.0f, -3.0f}));
  // A NaN bound gives NaN (np.maximum / np.minimum propagate it).
  EXPECT_TRUE(std::isnan(Run1(Op(EwOpcode::kClamp, kNaN, 1.0f), {0.5f})[0]));
  EXPECT_TRUE(std::isnan(Run1(Op(EwOpcode::kClamp, 0.0f, kNaN), {0.5f})[0]));
  // An infinite bound is no bound.
  EXPECT_EQ(Run1(Op(EwOpcode::kClamp, -kInf, kInf), {1e30f})[0], 1e30f);
}

TEST(ReferenceElementwise, AbsAndSqrt) {
  const std::vector<float> abs = Run1(Op(EwOpcode::kAbs), {-2.5f, 3.0f, -0.0f, -kInf, kNaN});
  EXPECT_EQ(abs[0], 2.5f);
  EXPECT_EQ(abs[1], 3.0f);
  EXPECT_FALSE(std::signbit(abs[2]));
  EXPECT_EQ(abs[3], kInf);
  EXPECT_TRUE(std::isnan(abs[4]));

  const std::vector<float> sq = Run1(Op(EwOpcode::kSqrt), {4.0f, 2.0f, 0.0f, -0.0f, -1.0f, kInf,
                                                          -kInf, kNaN});
  EXPECT_EQ(sq[0], 2.0f);
  EXPECT_EQ(sq[1], std::sqrt(2.0f));  // correctly rounded on both sides
  EXPECT_EQ(sq[2], 0.0f);
  EXPECT_EQ(sq[3], 0.0f);
  EXPECT_TRUE(std::signbit(sq[3]));  // sqrt(-0) = -0
  EXPECT_TRUE(std::isnan(sq[4]));
  EXPECT_EQ(sq[5], kInf);
  EXPECT_TRUE(std::isnan(sq[6]));
  EXPECT_TRUE(std::isnan(sq[7]));
}

TEST(ReferenceElementwise, ExpAndLog) {
  const std::vector<float> e = Run1(Op(EwOpcode::kExp), {0.0f, 1.0f, -kInf, kInf, 100.0f, kNaN});
  EXPECT_EQ(e[0], 1.0f);
  EXPECT_FLOAT_EQ(e[1], 2.7182817f);
  EXPECT_EQ(e[2], 0.0f);
  EXPECT_EQ(e[3], kInf);
  EXPECT_EQ(e[4], kInf);  // overflow
  EXPECT_TRUE(std::isnan(e[5]));

  const std::vector<float> l =
      Run1(Op(EwOpcode::kLog), {1.0f, 0.0f, -0.0f, -1.0f, kInf, -kInf, kNaN, 2.7182817f});
  EXPECT_EQ(l[0], 0.0f);
  EXPECT_EQ(l[1], -kInf);
  EXPECT_EQ(l[2], -kInf);
  EXPECT_TRUE(std::isnan(l[3]));
  EXPECT_EQ(l[4], kInf);
  EXPECT_TRUE(std::isnan(l[5]));
  EXPECT_TRUE(std::isnan(l[6]));
  EXPECT_FLOAT_EQ(l[7], 1.0f);
}

TEST(ReferenceElementwise, SigmoidIsSafeForLargeMagnitudes) {
  const std::vector<float> in = {0.0f, 1.0f, -1.0f, 50.0f, -50.0f, 100.0f, -100.0f, kInf, -kInf,
                                 kNaN, 3.4e38f, -3.4e38f};
  const std::vector<float> s = Run1(Op(EwOpcode::kSigmoid), in);
  EXPECT_EQ(s[0], 0.5f);
  EXPECT_FLOAT_EQ(s[1], static_cast<float>(1.0 / (1.0 + std::exp(-1.0))));
  EXPECT_FLOAT_EQ(s[2], static_cast<float>(1.0 / (1.0 + std::exp(1.0))));
  EXPECT_EQ(s[3], 1.0f);
  // e^-50 / (1 + e^-50): full relative precision, no 1 / inf.
  EXPECT_FLOAT_EQ(s[4], static_cast<float>(std::exp(-50.0)));
  EXPECT_EQ(s[5], 1.0f);
  EXPECT_GT(s[6], 0.0f);  // e^-100 ~ 3.7e-44 is a (coarse) denormal, not 0
  EXPECT_NEAR(s[6], std::exp(-100.0), 2e-45);
  EXPECT_EQ(s[7], 1.0f);
  EXPECT_EQ(s[8], 0.0f);
  EXPECT_TRUE(std::isnan(s[9]));
  EXPECT_EQ(s[10], 1.0f);
  EXPECT_EQ(s[11], 0.0f);
  for (float v : s) EXPECT_TRUE(std::isnan(v) || (v >= 0.0f && v <= 1.0f));
}

TEST(ReferenceElementwise, Tanh) {
  const std::vector<float> t = Run1(Op(EwOpcode::kTanh), {0.0f, -0.0f, 0.5f, 20.0f, -kInf, kNaN});
  EXPECT_EQ(t[0], 0.0f);
  EXPECT_TRUE(std::signbit(t[1]));
  EXPECT_FLOAT_EQ(t[2], static_cast<float>(std::tanh(0.5)));
  EXPECT_EQ(t[3], 1.0f);
  EXPECT_EQ(t[4], -1.0f);
  EXPECT_TRUE(std::isnan(t[5]));
}

TEST(ReferenceElementwise, Pow) {
  EXPECT_EQ(Run1(Op(EwOpcode::kPow, 3.0f), {2.0f, -2.0f}), (std::vector<float>{8.0f, -8.0f}));
  EXPECT_EQ(Run1(Op(EwOpcode::kPow, 0.5f), {16.0f})[0], 4.0f);
  EXPECT_TRUE(std::isnan(Run1(Op(EwOpcode::kPow, 0.5f), {-4.0f})[0]));  // negative base
  EXPECT_EQ(Run1(Op(EwOpcode::kPow, 0.0f), {kNaN})[0], 1.0f);  // C99: pow(x, 0) = 1
  EXPECT_EQ(Run1(Op(EwOpcode::kPow, kNaN), {1.0f})[0], 1.0f);  // C99: pow(1, y) = 1
  EXPECT_EQ(Run1(Op(EwOpcode::kPow, -1.0f), {0.0f})[0], kInf);
  EXPECT_EQ(Run1(Op(EwOpcode::kPow, -1.0f), {-0.0f})[0], -kInf);
}

TEST(ReferenceElementwise, MixedProgram) {
  // sqrt(clamp(|x| * 2 - 1, 0, 8)): exercises several opcodes in order.
  const std::vector<float> in = {-3.0f, 0.25f, 10.0f};
  std::vector<float> out(in.size());
  Elementwise(in.data(), out.data(), 3,
              Program({Op(EwOpcode::kAbs), Affine(2.0f, -1.0f), Op(EwOpcode::kClamp, 0.0f, 8.0f),
                       Op(EwOpcode::kSqrt)}));
  EXPECT_EQ(out, (std::vector<float>{std::sqrt(5.0f), 0.0f, std::sqrt(8.0f)}));
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

TEST(ReferenceRowReduce, AllKinds) {
  const std::vector<float> in = {3.0f, -4.0f, 1.0f, 0.0f,  //
                                 2.0f, 2.0f, 2.0f, 2.0f};
  auto run = [&](RowReduceKind kind) {
    std::vector<float> out(2);
    RowReduce(in.data(), out.data(), 2, 4, kind);
    return out;
  };
  EXPECT_EQ(run(RowReduceKind::kSum), (std::vector<float>{0.0f, 8.0f}));
  EXPECT_EQ(run(RowReduceKind::kMin), (std::vector<float>{-4.0f, 2.0f}));
  EXPECT_EQ(run(RowReduceKind::kMax), (std::vector<float>{3.0f, 2.0f}));
  EXPECT_EQ(run(RowReduceKind::kMean), (std::vector<float>{0.0f, 2.0f}));
  EXPECT_EQ(run(RowReduceKind::kNorm2), (std::vector<float>{std::sqrt(26.0f), 4.0f}));
}

TEST(ReferenceRowReduce, MinMaxPropagateNaN) {
  // NaN first, in the middle, last: np.min / np.max give NaN for all of them.
  const std::vector<float> in = {kNaN, 1.0f, 2.0f,  //
                                 1.0f, kNaN, 2.0f,  //
                                 1.0f, 2.0f, kNaN,  //
                                 -kInf, kInf, 0.0f};
  for (RowReduceKind kind : {RowReduceKind::kMin, RowReduceKind::kMax}) {
    std::vector<float> out(4);
    RowReduce(in.data(), out.data(), 4, 3, kind);
    EXPECT_TRUE(std::isnan(out[0]));
    EXPECT_TRUE(std::isnan(out[1]));
    EXPECT_TRUE(std::isnan(out[2]));
    EXPECT_EQ(out[3], kind == RowReduceKind::kMin ? -kInf : kInf);
  }
}

TEST(ReferenceRowReduce, MeanAndNorm2AccumulateInDouble) {
  std::vector<float> in(1002, 1.0f);
  in.front() = 1e8f;
  in.back() = -1e8f;
  float mean = 0.0f;
  RowReduce(in.data(), &mean, 1, static_cast<int64_t>(in.size()), RowReduceKind::kMean);
  EXPECT_FLOAT_EQ(mean, 1000.0f / 1002.0f);
  // 1e20 squared overflows float, not double.
  const std::vector<float> big = {3e20f, 4e20f};
  float norm = 0.0f;
  RowReduce(big.data(), &norm, 1, 2, RowReduceKind::kNorm2);
  EXPECT_FLOAT_EQ(norm, 5e20f);
}

TEST(ReferenceRowArgmax, FirstMaximumNaNWins) {
  const std::vector<float> in = {1.0f, 3.0f, 3.0f, 2.0f,    // tie: first
                                 1.0f, kNaN, 9.0f, kNaN,    // first NaN, even below a 9
                                 -kInf, -kInf, -kInf, -kInf,  // all -inf: 0
                                 -0.0f, 0.0f, -1.0f, -2.0f,   // -0 and +0 tie
                                 kInf, 1.0f, kInf, kNaN};     // NaN beats inf
  std::vector<int64_t> out(5);
  RowArgmax(in.data(), out.data(), 5, 4);
  EXPECT_EQ(out, (std::vector<int64_t>{1, 1, 0, 0, 3}));
}

TEST(ReferenceRowNormalize, L2) {
  const std::vector<float> in = {3.0f, -4.0f, 0.0f, 0.0f, 5.0f, 0.0f};
  std::vector<float> out(in.size());
  RowNormalize(in.data(), out.data(), 3, 2, RowNormalizeKind::kL2Normalize);
  EXPECT_FLOAT_EQ(out[0], 0.6f);
  EXPECT_FLOAT_EQ(out[1], -0.8f);
  EXPECT_TRUE(std::isnan(out[2]));  // zero row: 0 / 0
  EXPECT_TRUE(std::isnan(out[3]));
  EXPECT_EQ(out[4], 1.0f);
  EXPECT_EQ(out[5], 0.0f);
}

TEST(ReferenceRowNormalize, Standardize) {
  // Population std of {1, 2, 3} is sqrt(2/3). The second row is the first shifted by 1e6: the
  // result must not change (a variance from E[x^2] - E[x]^2 in float would be garbage).
  const std::vector<float> in = {1.0f, 2.0f, 3.0f, 1e6f + 1.0f, 1e6f + 2.0f, 1e6f + 3.0f,
                                 7.0f, 7.0f, 7.0f};
  std::vector<float> out(in.size());
  RowNormalize(in.data(), out.data(), 3, 3, RowNormalizeKind::kStandardize);
  const float z = static_cast<float>(1.0 / std::sqrt(2.0 / 3.0));
  for (int r = 0; r < 2; ++r) {
    EXPECT_FLOAT_EQ(out[3 * r + 0], -z);
    EXPECT_EQ(out[3 * r + 1], 0.0f);
    EXPECT_FLOAT_EQ(out[3 * r + 2], z);
  }
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(std::isnan(out[6 + c]));  // constant row: 0 / 0
}

TEST(ReferenceRowNormalize, SingleColumn) {
  const std::vector<float> in = {-2.0f, 0.0f, 5.0f};
  std::vector<float> l2(3), st(3);
  RowNormalize(in.data(), l2.data(), 3, 1, RowNormalizeKind::kL2Normalize);
  RowNormalize(in.data(), st.data(), 3, 1, RowNormalizeKind::kStandardize);
  EXPECT_EQ(l2[0], -1.0f);
  EXPECT_TRUE(std::isnan(l2[1]));
  EXPECT_EQ(l2[2], 1.0f);
  for (float v : st) EXPECT_TRUE(std::isnan(v));  // std of one value is 0
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


// The grouped form the kernels use (every instruction applied to N values before the next)
// gives each value exactly what ApplyEw gives it, for every opcode and special value.
TEST(ReferenceElementwise, GroupedApplicationMatchesPerValue) {
  const float values[16] = {-0.0f, 0.0f, kInf, -kInf, kNaN, 1e-40f, -1e-40f, 3.4e38f,
                            -2.5f, 0.5f, 1.0f, 2.0f, 7.25f, -88.0f, 88.7f, 1e-30f};
  const EwProgram programs[] = {
      Program({Affine(2.0f, 1.0f), Relu(), Affine(0.5f, -1.0f), Op(EwOpcode::kSqrt),
               Affine(3.0f, 0.25f), Relu()}),
      Program({Op(EwOpcode::kAbs), Op(EwOpcode::kClamp, -1.5f, 2.0f),
               Op(EwOpcode::kClamp, kNaN, 1.0f), Op(EwOpcode::kExp), Op(EwOpcode::kLog),
               Op(EwOpcode::kSigmoid),
               Op(EwOpcode::kTanh), Op(EwOpcode::kPow, -1.5f), Op(EwOpcode::kClamp, 3.0f, -3.0f)}),
  };
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    return u;
  };
  for (const EwProgram& program : programs) {
    float x[16];
    std::copy(std::begin(values), std::end(values), x);
    ApplyEwN(program, x);
    for (int k = 0; k < 16; ++k) {
      const float want = ApplyEw(program, values[k]);
      EXPECT_TRUE((std::isnan(want) && std::isnan(x[k])) || bits(want) == bits(x[k]))
          << "value " << values[k] << ": grouped " << x[k] << ", per value " << want;
    }
  }
}

// ---- other element types ---------------------------------------------------------------------

constexpr double kInfD = std::numeric_limits<double>::infinity();
constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();

std::vector<HalfBits> Halves(std::initializer_list<float> values) {
  std::vector<HalfBits> h;
  for (float v : values) h.push_back(FloatToHalf(v));
  return h;
}

TEST(ReferenceHalf, ConversionRoundsToNearestEven) {
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.0f)), 1.0f);
  EXPECT_EQ(HalfToFloat(FloatToHalf(65504.0f)), 65504.0f);  // largest finite
  EXPECT_EQ(HalfToFloat(FloatToHalf(65520.0f)), kInf);      // rounds up to inf
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.0f + 0x1p-11f)), 1.0f);  // tie to even (down)
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.0f + 3 * 0x1p-11f)), 1.0f + 0x1p-9f);  // tie to even (up)
  EXPECT_EQ(HalfToFloat(FloatToHalf(0x1p-24f)), 0x1p-24f);  // smallest subnormal
  EXPECT_EQ(HalfToFloat(FloatToHalf(0x1p-26f)), 0.0f);
  EXPECT_TRUE(std::signbit(HalfToFloat(FloatToHalf(-0.0f))));
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(kNaN))));
  for (uint32_t h = 0; h < 0x10000; ++h) {  // every non-NaN half survives a round trip
    const float f = HalfToFloat(static_cast<HalfBits>(h));
    if (!std::isnan(f)) ASSERT_EQ(FloatToHalf(f), h) << h;
  }
}

TEST(ReferenceHalf, ElementwiseComputesInFloatAndRoundsOnce) {
  // 1 + 2^-11 + 2^-11 is 1 + 2^-10 in float; two separate float16 roundings would give 1.
  const std::vector<HalfBits> in = Halves({1.0f, -3.0f, 2.0f});
  std::vector<HalfBits> out(in.size());
  const EwProgram p = Program({Affine(1.0f, 0x1p-11f), Affine(1.0f, 0x1p-11f), Relu()});
  ASSERT_TRUE(Elementwise(in.data(), ElementType::kFloat16, out.data(), 3, p));
  EXPECT_EQ(HalfToFloat(out[0]), 1.0f + 0x1p-10f);
  EXPECT_EQ(HalfToFloat(out[1]), 0.0f);
  EXPECT_EQ(HalfToFloat(out[2]), 2.0f);  // 2 + 2^-10 rounds to 2 (float16 ulp 2^-9 there)
}

TEST(ReferenceHalf, SumAccumulatesWideThenRounds) {
  // Accumulated in float32 or wider, rounded once: 2050 (an every-step float16 sum stays 2048).
  const std::vector<HalfBits> in = Halves({2048.0f, 1.0f, 1.0f});
  HalfBits out = 0;
  ASSERT_TRUE(RowReduce(in.data(), ElementType::kFloat16, &out, 1, 3, RowReduceKind::kSum));
  EXPECT_EQ(HalfToFloat(out), 2050.0f);
  int64_t idx = -1;
  ASSERT_TRUE(RowArgmax(in.data(), ElementType::kFloat16, &idx, 1, 3));
  EXPECT_EQ(idx, 0);
}

TEST(ReferenceHalf, SoftmaxIsTheFloat32ReferenceRounded) {
  const std::vector<float> x = {0.5f, -1.25f, 3.0f, 2.0f, -0.75f};
  const std::vector<HalfBits> h = Halves({0.5f, -1.25f, 3.0f, 2.0f, -0.75f});
  std::vector<float> want(x.size());
  RowSoftmax(x.data(), want.data(), 1, 5);
  std::vector<HalfBits> got(x.size());
  ASSERT_TRUE(RowSoftmax(h.data(), ElementType::kFloat16, got.data(), 1, 5));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(got[i], FloatToHalf(want[i])) << i;
}

TEST(ReferenceFloat64, ProgramsKeepDoubleParameters) {
  const std::vector<double> in = {1.0, 3.0};
  std::vector<double> out(2);
  ASSERT_TRUE(Elementwise(in.data(), ElementType::kFloat64, out.data(), 2,
                          Program({{EwOpcode::kAffine, 0.1, 1e-300}})));
  EXPECT_EQ(out[0], std::fma(0.1, 1.0, 1e-300));
  EXPECT_EQ(out[1], std::fma(0.1, 3.0, 1e-300));
  ASSERT_TRUE(Elementwise(in.data(), ElementType::kFloat64, out.data(), 2,
                          Program({{EwOpcode::kPow, 0.5, 0.0}})));
  EXPECT_EQ(out[1], std::pow(3.0, 0.5));
}

TEST(ReferenceFloat64, ReductionsAndNormalizationsInDouble) {
  // 1e16 + 1 is not a double (their spacing is 2 there): a double accumulator would lose the 1;
  // the wider one keeps it, so the sum is exactly 1.5.
  const std::vector<double> x = {1e16, 1.0, -1e16, 0.5};
  double sum = 0;
  ASSERT_TRUE(RowReduce(x.data(), ElementType::kFloat64, &sum, 1, 4, RowReduceKind::kSum));
  EXPECT_EQ(sum, 1.5);
  double mx = 0;
  ASSERT_TRUE(RowReduce(x.data(), ElementType::kFloat64, &mx, 1, 4, RowReduceKind::kMax));
  EXPECT_EQ(mx, 1e16);
  const std::vector<double> row = {3.0, 4.0};
  std::vector<double> y(2);
  ASSERT_TRUE(RowNormalize(row.data(), ElementType::kFloat64, y.data(), 1, 2,
                           RowNormalizeKind::kL2Normalize));
  EXPECT_EQ(y[0], 0.6);
  EXPECT_EQ(y[1], 0.8);
}

TEST(ReferenceInt32, ElementwiseWrapsAroundLikeNumpy) {
  const std::vector<int32_t> in = {kMax32, kMin32, -5, 0, 7};
  std::vector<int32_t> out(in.size());
  ASSERT_TRUE(Elementwise(in.data(), ElementType::kInt32, out.data(), 5,
                          Program({{EwOpcode::kAffine, 1.0, 1.0}})));
  EXPECT_EQ(out, (std::vector<int32_t>{kMin32, kMin32 + 1, -4, 1, 8}));
  ASSERT_TRUE(Elementwise(in.data(), ElementType::kInt32, out.data(), 5,
                          Program({{EwOpcode::kAbs, 0.0, 0.0}})));
  EXPECT_EQ(out, (std::vector<int32_t>{kMax32, kMin32, 5, 0, 7}));  // np.abs(int32 min) wraps
  ASSERT_TRUE(Elementwise(in.data(), ElementType::kInt32, out.data(), 5,
                          Program({{EwOpcode::kRelu, 0.0, 0.0}})));
  EXPECT_EQ(out, (std::vector<int32_t>{kMax32, 0, 0, 0, 7}));
  ASSERT_TRUE(Elementwise(in.data(), ElementType::kInt32, out.data(), 5,
                          Program({{EwOpcode::kClamp, -kInfD, 3.0}})));  // no lower bound
  EXPECT_EQ(out, (std::vector<int32_t>{3, kMin32, -5, 0, 3}));
  ASSERT_TRUE(Elementwise(in.data(), ElementType::kInt32, out.data(), 5,
                          Program({{EwOpcode::kClamp, -1.0, kInfD}})));
  EXPECT_EQ(out, (std::vector<int32_t>{kMax32, -1, -1, 0, 7}));
}

TEST(ReferenceInt32, RejectsNonIntegerOpcodes) {
  const std::vector<int32_t> in = {1, 2};
  std::vector<int32_t> out(2, 9);
  EXPECT_FALSE(Elementwise(in.data(), ElementType::kInt32, out.data(), 2,
                           Program({{EwOpcode::kExp, 0.0, 0.0}})));
  EXPECT_EQ(out, (std::vector<int32_t>{9, 9}));
  double d = 0;
  EXPECT_FALSE(RowSoftmax(in.data(), ElementType::kInt32, &d, 1, 2));
  EXPECT_FALSE(RowReduce(in.data(), ElementType::kInt32, &d, 1, 2, RowReduceKind::kMean));
}

TEST(ReferenceInt32, SumIsInt64MinMaxStayInt32) {
  const std::vector<int32_t> in = {kMax32, kMax32, 1, kMin32, -3, kMin32};
  std::vector<int64_t> sums(2);
  ASSERT_TRUE(RowReduce(in.data(), ElementType::kInt32, sums.data(), 2, 3, RowReduceKind::kSum));
  EXPECT_EQ(sums[0], 2 * int64_t{kMax32} + 1);  // no int32 wrap
  EXPECT_EQ(sums[1], 2 * int64_t{kMin32} - 3);
  std::vector<int32_t> m(2);
  ASSERT_TRUE(RowReduce(in.data(), ElementType::kInt32, m.data(), 2, 3, RowReduceKind::kMin));
  EXPECT_EQ(m, (std::vector<int32_t>{1, kMin32}));
  ASSERT_TRUE(RowReduce(in.data(), ElementType::kInt32, m.data(), 2, 3, RowReduceKind::kMax));
  EXPECT_EQ(m, (std::vector<int32_t>{kMax32, -3}));
  std::vector<int64_t> idx(2);
  ASSERT_TRUE(RowArgmax(in.data(), ElementType::kInt32, idx.data(), 2, 3));
  EXPECT_EQ(idx, (std::vector<int64_t>{0, 1}));  // the first maximum
}

TEST(ReferencePrologue, Float16RunsThePrologueInFloat32) {
  // max(x + 2^-11 + 2^-11) over [1, 1]: float32 1 + 2^-10 (float16-representable); rounding
  // the prologue to float16 first would give 1.
  const std::vector<HalfBits> in = Halves({1.0f, 1.0f});
  const EwProgram pre = Program({Affine(1.0f, 0x1p-11f), Affine(1.0f, 0x1p-11f)});
  HalfBits out = 0;
  ASSERT_TRUE(RunWithPrologue(in.data(), ElementType::kFloat16, 2, pre, &out,
                              ElementType::kFloat16, 1,
                              [](const void* x, ElementType t, void* y) {
                                EXPECT_EQ(t, ElementType::kFloat32);
                                return RowReduce(x, t, y, 1, 2, RowReduceKind::kMax);
                              }));
  EXPECT_EQ(HalfToFloat(out), 1.0f + 0x1p-10f);
}

}  // namespace
}  // namespace gpupipe::kernels::cpu
