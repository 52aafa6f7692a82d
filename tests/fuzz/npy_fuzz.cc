// libFuzzer target: the .npy reader, header and data. Every file gets an array or a message;
// an array it accepts holds exactly shape x itemsize bytes and serializes back to a file that
// reads the same.
#include <cstddef>
#include <cstdint>
#include <string>

#include "client/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<gpupipe::client::NpyArray> array =
      gpupipe::client::ParseNpy(std::string(reinterpret_cast<const char*>(data), size));
  if (!array.ok()) return 0;
  absl::StatusOr<std::string> bytes = gpupipe::client::SerializeNpy(*array);
  if (!bytes.ok()) __builtin_trap();
  absl::StatusOr<gpupipe::client::NpyArray> again = gpupipe::client::ParseNpy(*bytes);
  if (!again.ok() || again->dtype != array->dtype || again->shape != array->shape ||
      again->data != array->data) {
    __builtin_trap();
  }
  return 0;
}
