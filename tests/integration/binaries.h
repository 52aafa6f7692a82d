// Where the binaries under test are: $GPUPIPE_BIN_DIR when set (a relocated bundle), else the
// build tree's paths compiled in.
#pragma once

#include <cstdlib>
#include <string>

namespace gpupipe::testing {

inline std::string BinaryPath(const std::string& name, const char* built_path) {
  if (const char* dir = std::getenv("GPUPIPE_BIN_DIR")) return std::string(dir) + "/" + name;
  return built_path;
}

inline std::string DaemonBinary() { return BinaryPath("gpupiped", GPUPIPED); }
inline std::string CliBinary() { return BinaryPath("gpupipe", GPUPIPE_CLI); }

}  // namespace gpupipe::testing
