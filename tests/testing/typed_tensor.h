// Random tensors of every job dtype, and reading one element of a result back as a double, for
// the tests that run jobs of every dtype against the CPU backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/float16.h"
#include "server/engine/job/types.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::testing {

// `count` elements of `dtype` from the uniform floats of RandomFloats(count, seed): float16
// and float64 converted; int32 small integers with a few anywhere in the range, so that add
// wraps around.
inline std::string RandomInput(engine::DType dtype, int64_t count, uint64_t seed) {
  using engine::DType;
  const std::vector<float> f = RandomFloats(count, seed);
  std::string bytes(static_cast<size_t>(count * engine::DTypeSize(dtype)), '\0');
  for (int64_t i = 0; i < count; ++i) {
    switch (dtype) {
      case DType::kFloat64: reinterpret_cast<double*>(bytes.data())[i] = f[i]; break;
      case DType::kFloat16:
        reinterpret_cast<gpupipe::HalfBits*>(bytes.data())[i] = gpupipe::FloatToHalf(f[i]);
        break;
      case DType::kInt32:
        reinterpret_cast<int32_t*>(bytes.data())[i] =
            i % 97 == 5 ? static_cast<int32_t>(f[i] * 5e8f) : static_cast<int32_t>(f[i] * 250);
        break;
      default: reinterpret_cast<float*>(bytes.data())[i] = f[i]; break;
    }
  }
  return bytes;
}

// Element `i` of `bytes`, a tensor of `dtype`, as a double.
inline double ValueOf(engine::DType dtype, const std::string& bytes, size_t i) {
  using engine::DType;
  switch (dtype) {
    case DType::kFloat64: return reinterpret_cast<const double*>(bytes.data())[i];
    case DType::kFloat16:
      return gpupipe::HalfToFloat(reinterpret_cast<const gpupipe::HalfBits*>(bytes.data())[i]);
    case DType::kInt32: return reinterpret_cast<const int32_t*>(bytes.data())[i];
    case DType::kInt64:
      return static_cast<double>(reinterpret_cast<const int64_t*>(bytes.data())[i]);
    default: return reinterpret_cast<const float*>(bytes.data())[i];
  }
}

}  // namespace gpupipe::testing
