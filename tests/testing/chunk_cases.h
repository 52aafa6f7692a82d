// Jobs that every chunking of the engine must run to the same result, shared by the CPU
// backend's chunk-invariance test and the CUDA backend's (which compares with the CPU).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "server/engine/job/types.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::testing {

struct ChunkCase {
  const char* name;
  std::vector<int64_t> shape;
  std::vector<engine::OpSpec> ops;
  // Whether a chunked run may differ from the whole-job run by rounding: a reduction whose
  // rows are split across chunks combines partial sums (float each), so it agrees within
  // SplitRowTolerance; every other chunking runs the same per-row arithmetic.
  bool split_sum_like = false;
  // The input's dtype; int32 inputs are small integers (ChunkCaseInput).
  engine::DType dtype = engine::DType::kFloat32;
};

// `n` convolution taps in [-0.75, 0.75].
inline std::vector<double> ChunkTaps(int n) {
  std::vector<double> taps(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) taps[static_cast<size_t>(j)] = 0.75 * std::sin(1.3 * j + 0.4);
  return taps;
}

inline engine::OpSpec Convolve(engine::ConvolveMode mode, int taps) {
  engine::OpSpec op{engine::OpKind::kConvolve};
  op.mode = mode;
  op.taps = ChunkTaps(taps);
  return op;
}

inline engine::OpSpec Topk(int64_t k) {
  engine::OpSpec op{engine::OpKind::kTopk};
  op.k = k;
  return op;
}

inline engine::OpSpec Histogram(int64_t bins, double lo, double hi) {
  engine::OpSpec op{engine::OpKind::kHistogram};
  op.bins = bins;
  op.lo = lo;
  op.hi = hi;
  return op;
}

inline std::vector<ChunkCase> ChunkCases() {
  using engine::ConvolveMode;
  using engine::DType;
  using engine::OpKind;
  using engine::OpSpec;
  OpSpec affine{OpKind::kAffine};
  affine.alpha = 0.5;
  affine.beta = -0.25;
  return {
      {"affine|relu", {37, 101}, {affine, {OpKind::kRelu}}},
      {"abs|sqrt|tanh (1-d)", {10007}, {{OpKind::kAbs}, {OpKind::kSqrt}, {OpKind::kTanh}}},
      {"sigmoid (3-d)", {3, 7, 11}, {{OpKind::kSigmoid}}},
      // Chunks smaller than a row split these rows too.
      {"sum", {37, 101}, {{OpKind::kSum}}, true},
      {"min", {37, 101}, {{OpKind::kMin}}},
      {"max", {37, 101}, {{OpKind::kMax}}},
      {"mean", {37, 101}, {{OpKind::kMean}}, true},
      {"norm2", {37, 101}, {{OpKind::kNorm2}}, true},
      {"argmax", {37, 101}, {{OpKind::kArgmax}}},
      {"affine|sum of one long row", {1, 5003}, {affine, {OpKind::kSum}}, true},
      {"mean of long rows", {3, 4099}, {{OpKind::kMean}}, true},
      {"norm2 of one long row", {1, 5003}, {{OpKind::kNorm2}}, true},
      {"min of one long row", {1, 5003}, {{OpKind::kMin}}},
      {"max of long rows", {2, 4099}, {{OpKind::kMax}}},
      {"abs|argmax of one long row", {1, 5003}, {{OpKind::kAbs}, {OpKind::kArgmax}}},
      {"argmax of long rows", {3, 4099}, {{OpKind::kArgmax}}},
      {"softmax", {37, 101}, {{OpKind::kSoftmax}}},
      {"l2normalize", {37, 101}, {{OpKind::kL2Normalize}}},
      {"standardize", {37, 101}, {{OpKind::kStandardize}}},
      {"softmax of long rows", {3, 3001}, {{OpKind::kSoftmax}}},
      {"softmax|sum", {37, 101}, {{OpKind::kSoftmax}, {OpKind::kSum}}},
      {"abs|standardize|max", {9, 257}, {{OpKind::kAbs}, {OpKind::kStandardize}, {OpKind::kMax}}},
      {"sum|softmax (3-d)", {4, 5, 6}, {{OpKind::kSum}, {OpKind::kSoftmax}}},
      {"sum|relu", {6, 50}, {{OpKind::kSum}, {OpKind::kRelu}}},
      // cumsum, histogram, convolve and topk: chunks smaller than a row split it into pieces
      // (cumsum with a carry, histogram accumulating, convolve windows with halos, topk
      // merging the pieces' top ks). A float cumsum carries a float between pieces.
      {"cumsum of one long row", {1, 5003}, {{OpKind::kCumsum}}, true},
      {"affine|cumsum of long rows", {3, 4099}, {affine, {OpKind::kCumsum}}, true},
      {"cumsum of int32 long rows", {2, 4099}, {{OpKind::kCumsum}}, false, DType::kInt32},
      {"histogram of one long row", {1, 5003}, {Histogram(37, -4, 4)}},
      {"abs|histogram of long rows", {3, 4099}, {{OpKind::kAbs}, Histogram(10, 0, 3)}},
      {"histogram of int32 long rows", {2, 4099}, {Histogram(7, -3, 3)}, false, DType::kInt32},
      {"convolve full, 1 tap", {1, 5003}, {Convolve(ConvolveMode::kFull, 1)}},
      {"convolve full, 5 taps", {1, 5003}, {Convolve(ConvolveMode::kFull, 5)}},
      {"convolve full, 63 taps", {1, 5003}, {Convolve(ConvolveMode::kFull, 63)}},
      {"convolve same, 1 tap", {1, 5003}, {Convolve(ConvolveMode::kSame, 1)}},
      {"convolve same, 5 taps", {1, 5003}, {Convolve(ConvolveMode::kSame, 5)}},
      {"convolve same, 63 taps", {1, 5003}, {Convolve(ConvolveMode::kSame, 63)}},
      {"convolve valid, 1 tap", {1, 5003}, {Convolve(ConvolveMode::kValid, 1)}},
      {"convolve valid, 5 taps", {1, 5003}, {Convolve(ConvolveMode::kValid, 5)}},
      {"convolve valid, 63 taps", {1, 5003}, {Convolve(ConvolveMode::kValid, 63)}},
      {"relu|convolve same, 63 taps, long rows", {3, 4099},
       {{OpKind::kRelu}, Convolve(ConvolveMode::kSame, 63)}},
      {"convolve full, 5 taps, long rows", {3, 4099}, {Convolve(ConvolveMode::kFull, 5)}},
      {"convolve valid, 63 taps, long rows", {2, 4099}, {Convolve(ConvolveMode::kValid, 63)}},
      {"topk 1 of one long row", {1, 5003}, {Topk(1)}},
      {"topk 16 of one long row", {1, 5003}, {Topk(16)}},
      {"topk 40 of one long row", {1, 5003}, {Topk(40)}},
      {"topk 16 of long rows", {3, 4099}, {Topk(16)}},
      {"affine|topk 40 of long rows", {3, 4099}, {affine, Topk(40)}},
      {"topk 16 of int32 long rows", {2, 4099}, {Topk(16)}, false, DType::kInt32},
  };
}

// The input of a case, as floats (int32 inputs as bit patterns of integers in [-3, 3]).
inline std::vector<float> ChunkCaseInput(const ChunkCase& c, int64_t count, uint64_t seed) {
  std::vector<float> x = RandomFloats(count, seed);
  if (c.dtype == engine::DType::kInt32) {
    for (float& v : x) {
      const int32_t k = static_cast<int32_t>(std::lround(v * 0.75f));
      std::memcpy(&v, &k, sizeof(k));
    }
  }
  return x;
}

// Chunk sizes in bytes for a job of `shape` (float32): the whole job (0 = backend default, which
// holds these jobs whole), one row, three rows, 1000 elements, and odd sizes.
inline std::vector<int64_t> ChunkSizes(const std::vector<int64_t>& shape) {
  const int64_t row = 4 * shape.back();
  return {0, row, 3 * row, 4000, 68, 4 * 997, 1};
}

// A combined partial sum of `cols` floats of magnitude up to 4 (scaled by 0.5 at most once
// by the cases' prologue): a few float roundings of partial sums of up to 4 * cols.
inline float SplitRowTolerance(int64_t cols) { return 4e-6f * 4.0f * static_cast<float>(cols); }

// Equal bit for bit (NaN equal to NaN), or within `tol` when tol > 0.
inline std::string CompareFloats(const std::vector<float>& got, const std::vector<float>& want,
                                 float tol) {
  if (got.size() != want.size()) {
    return "size " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    const bool ok = tol > 0 ? std::fabs(got[i] - want[i]) <= tol
                            : std::memcmp(&got[i], &want[i], sizeof(float)) == 0;
    if (!ok) {
      return "element " + std::to_string(i) + ": " + std::to_string(got[i]) + " vs " +
             std::to_string(want[i]);
    }
  }
  return "";
}

}  // namespace gpupipe::testing
