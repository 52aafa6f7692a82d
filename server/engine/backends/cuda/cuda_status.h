// CUDA errors as engine statuses: one wording for every CUDA file of the backend.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpupipe::engine {

// INTERNAL: "<what>: <error name> (<error string>)".
inline absl::Status CudaError(cudaError_t err, absl::string_view what) {
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
}

}  // namespace gpupipe::engine

// Returns CudaError(err, what) from the enclosing function when `expr` fails.
#define GPUPIPE_CUDA_RETURN(expr, what)                   \
  do {                                                    \
    if (cudaError_t err_ = (expr); err_ != cudaSuccess) { \
      return ::gpupipe::engine::CudaError(err_, what);    \
    }                                                     \
  } while (0)
