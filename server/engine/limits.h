// Request limits the engine enforces. Defaults suit one GPU node; the daemon's flags override.
#pragma once

#include <cstdint>

namespace gpupipe::engine {

struct Limits {
  int64_t max_input_bytes = int64_t{64} << 20;
  int max_ops = 64;
  int max_rank = 8;
  // Largest result chunk in one event: 1 MiB less room for the event's other fields, so every
  // message stays under 1 MiB.
  int64_t max_chunk_bytes = (int64_t{1} << 20) - 4096;
  int max_client_tag_bytes = 128;
};

}  // namespace gpupipe::engine
