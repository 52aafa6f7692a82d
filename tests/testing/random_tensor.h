// Fresh random test data with a seed that failures print, so a failing case can be replayed.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace gpupipe::testing {

// A seed from std::random_device, or GPUPIPE_TEST_SEED when set (to replay a failure).
inline uint64_t FreshSeed() {
  if (const char* env = std::getenv("GPUPIPE_TEST_SEED")) return std::stoull(env);
  std::random_device rd;
  return (uint64_t{rd()} << 32) ^ rd();
}

inline std::vector<float> RandomFloats(int64_t n, uint64_t seed, float lo = -4.0f,
                                       float hi = 4.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::string AsBytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

inline std::vector<float> AsFloats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

}  // namespace gpupipe::testing
