// libFuzzer target: the ops grammar of `gpupipe --ops`. Every text gets ops or a message; ops
// it accepts format back to text that parses to the same ops.
#include <cstddef>
#include <cstdint>
#include <string>

#include "client/ops_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<gpupipe::v1::Op>> ops = gpupipe::client::ParseOps(text);
  if (!ops.ok()) return 0;
  absl::StatusOr<std::vector<gpupipe::v1::Op>> again =
      gpupipe::client::ParseOps(gpupipe::client::FormatOps(*ops));
  if (!again.ok() || again->size() != ops->size()) __builtin_trap();
  for (size_t i = 0; i < ops->size(); ++i) {
    if ((*again)[i].SerializeAsString() != (*ops)[i].SerializeAsString()) __builtin_trap();
  }
  return 0;
}
