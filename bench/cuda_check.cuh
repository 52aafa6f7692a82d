// CK(call): ends a standalone experiment program with the CUDA error and its line where `call`
// fails. Shared by the experiments under bench/*/experiments, which have no error handling of
// their own to carry.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                          \
  do {                                                                                 \
    const cudaError_t e_ = (x);                                                        \
    if (e_ != cudaSuccess) {                                                           \
      printf("CUDA %s at line %d\n", cudaGetErrorString(e_), __LINE__);                \
      exit(2);                                                                         \
    }                                                                                  \
  } while (0)
