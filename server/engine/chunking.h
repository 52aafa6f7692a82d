// Splits a host buffer into result chunks of bounded size.
#pragma once

#include <algorithm>
#include <cstdint>

#include "server/engine/backend.h"

namespace gpupipe::engine {

// Emits `size` bytes at `data`, which belong at output byte `base`, in chunks of at most
// `max_chunk_bytes`; false if `emit` was.
inline bool EmitInChunks(const char* data, int64_t size, int64_t max_chunk_bytes,
                         const ChunkEmitter& emit, int64_t base = 0) {
  for (int64_t offset = 0; offset < size; offset += max_chunk_bytes) {
    if (!emit(base + offset, data + offset, std::min(max_chunk_bytes, size - offset))) {
      return false;
    }
  }
  return true;
}

}  // namespace gpupipe::engine
