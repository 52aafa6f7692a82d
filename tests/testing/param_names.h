// gtest parameter names for value-parameterized kernel tests: "float32", "pipeline_thread", so
// a test reads Types/Suite.Test/float32 and a --gtest_filter can name one type or strategy.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "kernels/common/element_type.h"
#include "kernels/cuda/ops.h"

namespace gpupipe::testing {

inline std::string ElementTypeParamName(
    const ::testing::TestParamInfo<kernels::ElementType>& info) {
  return kernels::ElementTypeName(info.param);
}

// gtest names allow only letters, digits and '_': "pipeline-thread" becomes "pipeline_thread".
inline std::string StagingParamName(
    const ::testing::TestParamInfo<kernels::cuda::Staging>& info) {
  std::string name = kernels::cuda::StagingName(info.param);
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  return name;
}

}  // namespace gpupipe::testing
