// Geometry of np.convolve(row, taps, mode), shared by the CUDA kernels, the CPU reference and
// the engine's chunking. Everything is expressed in full-convolution indices: with N = row
// length and M = tap count, full output n (0 <= n < N + M - 1) is
//   y[n] = sum_{j=0}^{M-1} taps[j] * x[n - j]   (x is 0 outside [0, N)).
// That formula is symmetric in the operands, so NumPy's swap when M > N changes nothing but
// the order of summation; each mode is a contiguous range of full outputs (ConvolveOutputRange).
#pragma once

#include <algorithm>
#include <cstdint>

namespace gpupipe::kernels {

enum class ConvolveMode { kFull, kSame, kValid };

// Tap counts 1..kMaxConvolveTaps; the kernels carry the taps by value in their parameters.
inline constexpr int32_t kMaxConvolveTaps = 1024;

// The range [*begin, *begin + *count) of full-convolution indices that np.convolve returns:
//   full:  [0, N + M - 1)
//   same:  length max(N, M), starting at (min(N, M) - 1) / 2 (NumPy centers on the full output,
//          the left margin rounded down)
//   valid: length max(N, M) - min(N, M) + 1, starting at min(N, M) - 1.
// Requires N >= 1 and M >= 1.
inline void ConvolveOutputRange(int64_t n, int64_t m, ConvolveMode mode, int64_t* begin,
                                int64_t* count) {
  const int64_t lo = std::min(n, m);
  const int64_t hi = std::max(n, m);
  switch (mode) {
    case ConvolveMode::kFull: *begin = 0; *count = n + m - 1; return;
    case ConvolveMode::kSame: *begin = (lo - 1) / 2; *count = hi; return;
    case ConvolveMode::kValid: *begin = lo - 1; *count = hi - lo + 1; return;
  }
  *begin = 0;
  *count = 0;
}

inline int64_t ConvolveOutputLength(int64_t n, int64_t m, ConvolveMode mode) {
  int64_t begin = 0;
  int64_t count = 0;
  ConvolveOutputRange(n, m, mode, &begin, &count);
  return count;
}

// A contiguous range of one row's outputs computed from a window of that row's input, so the
// engine can convolve a row too long for one chunk without copying halos: chunk c writes full
// outputs [out_begin, out_begin + out_count) from the input elements
// [in_begin, in_begin + in_count) of a row of row_length elements.
// Valid when 0 <= in_begin, in_begin + in_count <= row_length, 0 <= out_begin,
// out_begin + out_count <= row_length + M - 1, and the window holds every input element the
// outputs read: [max(0, out_begin - (M - 1)), min(row_length, out_begin + out_count)) lies
// inside [in_begin, in_begin + in_count) (ConvolveWindowInput gives the smallest such window).
struct ConvolveWindow {
  int64_t row_length = 0;
  int64_t in_begin = 0;
  int64_t in_count = 0;
  int64_t out_begin = 0;
  int64_t out_count = 0;
};

// The input elements [*in_begin, *in_begin + *in_count) that full outputs
// [out_begin, out_begin + out_count) of a row of `row_length` elements read with M taps.
inline void ConvolveWindowInput(int64_t row_length, int64_t m, int64_t out_begin,
                                int64_t out_count, int64_t* in_begin, int64_t* in_count) {
  const int64_t lo = std::max<int64_t>(0, out_begin - (m - 1));
  const int64_t hi = std::min(row_length, out_begin + out_count);
  *in_begin = std::min(lo, hi);
  *in_count = std::max<int64_t>(0, hi - lo);
}

inline bool IsValidConvolveWindow(const ConvolveWindow& w, int64_t m) {
  if (m < 1 || m > kMaxConvolveTaps) return false;
  if (w.row_length < 1 || w.in_begin < 0 || w.in_count < 0 || w.out_begin < 0 ||
      w.out_count < 0) {
    return false;
  }
  if (w.in_begin > w.row_length - w.in_count) return false;
  if (w.out_begin > w.row_length + m - 1 - w.out_count) return false;
  if (w.out_count == 0) return true;
  int64_t need_begin = 0;
  int64_t need_count = 0;
  ConvolveWindowInput(w.row_length, m, w.out_begin, w.out_count, &need_begin, &need_count);
  return need_count == 0 ||
         (need_begin >= w.in_begin && need_begin + need_count <= w.in_begin + w.in_count);
}

}  // namespace gpupipe::kernels
