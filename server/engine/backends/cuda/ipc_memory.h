// Device memory that another process of this host exported with cudaIpcGetMemHandle, opened
// in the daemon for a device region (regions/region.h).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "server/engine/regions/region.h"

namespace gpupipe::engine {

// Opens `handle` (the bytes of a cudaIpcMemHandle_t) on `device`: the mapping starts at the
// exported allocation's base and covers the whole allocation; closing it
// (cudaIpcCloseMemHandle) is DeviceMapping::close. INVALID_ARGUMENT for a handle of the wrong
// size or one the driver cannot open (not exported, exported by this process, from another
// device or host, or its allocation freed).
absl::StatusOr<DeviceMapping> OpenIpcMemory(int device, const std::string& handle);

}  // namespace gpupipe::engine
