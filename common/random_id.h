// Random identifiers that stand for a capability (a region's id, a descriptor's ticket, a split
// run's key): whoever knows one may use what it names, so they come from the system's entropy
// source and carry 128 bits.
#pragma once

#include <cstdio>
#include <random>
#include <string>

namespace gpupipe {

// 32 lower-case hex digits.
inline std::string RandomHex128() {
  std::random_device device;
  char text[33];
  std::snprintf(text, sizeof(text), "%08x%08x%08x%08x", device(), device(), device(), device());
  return std::string(text, 32);
}

}  // namespace gpupipe
