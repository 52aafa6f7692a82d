#include "server/engine/backends/backend.h"

#include <algorithm>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpupipe::engine {
namespace {

template <typename T>
bool Contains(const std::vector<T>& values, T value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

template <typename T, typename NameFn>
std::string Names(const std::vector<T>& values, NameFn name) {
  std::vector<std::string> names;
  for (T v : values) names.push_back(name(v));
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::StatusOr<HostBlock> Backend::AllocateInputMemory(int64_t bytes) {
  // Left untouched, so pages become resident only as rings use them.
  char* data = new (std::nothrow) char[static_cast<size_t>(std::max<int64_t>(bytes, 1))];
  if (data == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes of host memory for input rings"));
  }
  return HostBlock{data, /*pinned=*/false, [](char* p) { delete[] p; }};
}

absl::StatusOr<HostPin> Backend::PinHostMemory(char* /*data*/, int64_t /*bytes*/) {
  return HostPin{};
}

absl::StatusOr<DeviceMapping> Backend::OpenCudaIpc(const std::string& /*handle*/) {
  return absl::FailedPreconditionError(absl::StrCat("cuda_ipc_handle: this server runs on the ",
                                                    name(), " backend; CUDA IPC needs cuda"));
}

absl::Status Backend::CopyDeviceMemory(char* /*to*/, const char* /*from*/, int64_t /*bytes*/) {
  return absl::FailedPreconditionError(absl::StrCat("the ", name(), " backend has no device"));
}

absl::Status Backend::CheckOptions(const JobSpec& spec) const {
  if (!Contains(stagings(), spec.staging)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.staging: ", StagingName(spec.staging), " is not supported by the ", name(),
        " backend (supported: ", Names(stagings(), StagingName), ")"));
  }
  if (!Contains(launch_modes(), spec.launch)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.launch: ", LaunchModeName(spec.launch), " is not supported by the ", name(),
        " backend (supported: ", Names(launch_modes(), LaunchModeName), ")"));
  }
  return absl::OkStatus();
}

}  // namespace gpupipe::engine
