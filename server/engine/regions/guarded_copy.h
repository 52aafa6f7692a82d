// Copies to and from memory a client shares with the daemon (a registered region), where the
// client may shrink the object under the mapping at any time: a load or store beyond the
// object's end raises SIGBUS, which must end the job, not the daemon. GuardedCopy catches that
// fault on the calling thread and answers FAILED_PRECONDITION instead.
//
// Only plain byte copies run under the guard: the fault unwinds by siglongjmp, which skips
// destructors, so nothing with one may run inside it. Any other code that touches a region's
// mapping must not (the engine computes on its own copies; devices DMA from page-locked
// pages, which outlive a shrink).
//
// Thread safety: safe from any thread. The SIGBUS handler is installed on first use and passes
// every fault outside a guarded copy on to the handler that was there before (or the default
// action), so an unrelated SIGBUS still ends the process as it would have.
#pragma once

#include <cstddef>

#include "absl/status/status.h"

namespace gpupipe::engine {

// memcpy(dst, src, bytes), or FAILED_PRECONDITION naming `what` when either side faults.
absl::Status GuardedCopy(void* dst, const void* src, size_t bytes, const char* what);

}  // namespace gpupipe::engine
