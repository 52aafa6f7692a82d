// CUDA errors as engine statuses: one wording for every CUDA file of the backend, and one
// place that notices a sticky error (the CUDA context is then unusable for good: every later
// call fails, and only a new process can use the device again).
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpupipe::engine {

// INTERNAL: "<what>: <error name> (<error string>)". A sticky `err` is also recorded for
// StickyCudaError.
absl::Status CudaError(cudaError_t err, absl::string_view what);

// Whether `err` leaves the context unusable (an illegal address, an illegal instruction, a
// device-side assert, an uncorrectable ECC error, ...).
bool IsStickyCudaError(cudaError_t err);

// OK until a sticky error was seen by CudaError in this process; then that error, for good.
absl::Status StickyCudaError();

}  // namespace gpupipe::engine

// Returns CudaError(err, what) from the enclosing function when `expr` fails.
#define GPUPIPE_CUDA_RETURN(expr, what)                   \
  do {                                                    \
    if (cudaError_t err_ = (expr); err_ != cudaSuccess) { \
      return ::gpupipe::engine::CudaError(err_, what);    \
    }                                                     \
  } while (0)
