#include "client/dtype.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/float16.h"

namespace gpupipe {
namespace client {

size_t DTypeSize(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_FLOAT32: return 4;
    case v1::DTYPE_FLOAT64: return 8;
    case v1::DTYPE_FLOAT16: return 2;
    case v1::DTYPE_INT32: return 4;
    case v1::DTYPE_INT64: return 8;
    default: return 0;
  }
}

std::string DTypeName(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_FLOAT32: return "float32";
    case v1::DTYPE_FLOAT64: return "float64";
    case v1::DTYPE_FLOAT16: return "float16";
    case v1::DTYPE_INT32: return "int32";
    case v1::DTYPE_INT64: return "int64";
    case v1::DTYPE_UNSPECIFIED: return "unspecified";
    default: return absl::StrCat("dtype(", static_cast<int>(dtype), ")");
  }
}

absl::StatusOr<int64_t> NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", ShapeString(shape), " has a negative dimension"));
    }
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", ShapeString(shape), " has too many elements"));
    }
    n *= d;
  }
  return n;
}

absl::StatusOr<int64_t> TensorBytes(v1::DType dtype, const std::vector<int64_t>& shape) {
  const int64_t size = static_cast<int64_t>(DTypeSize(dtype));
  if (size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype ", DTypeName(dtype), " is not supported"));
  }
  absl::StatusOr<int64_t> n = NumElements(shape);
  if (!n.ok()) return n.status();
  if (*n > std::numeric_limits<int64_t>::max() / size) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape ", ShapeString(shape), " is too large"));
  }
  return *n * size;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

float HalfToFloat(uint16_t bits) { return gpupipe::HalfToFloat(bits); }

}  // namespace client
}  // namespace gpupipe
