// Element-type facts shared by the client: sizes, names and half-precision decoding.
//
// All functions are pure and thread-safe.
#ifndef GPUPIPE_CLIENT_DTYPE_H_
#define GPUPIPE_CLIENT_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpupipe/v1/gpupipe.pb.h"

namespace gpupipe {
namespace client {

// Bytes per element; 0 for DTYPE_UNSPECIFIED and values this client does not know.
size_t DTypeSize(v1::DType dtype);

// NumPy's name for the type ("float32", "int64", ...); "dtype(N)" for unknown values.
std::string DTypeName(v1::DType dtype);

// Number of elements of `shape` (1 for the scalar shape []). Fails on negative dimensions and
// on products that overflow int64.
absl::StatusOr<int64_t> NumElements(const std::vector<int64_t>& shape);

// Bytes a tensor of `shape` and `dtype` occupies. Fails like NumElements, on an unknown dtype,
// and when the byte count overflows int64.
absl::StatusOr<int64_t> TensorBytes(v1::DType dtype, const std::vector<int64_t>& shape);

// "[2, 3]"; "[]" for a scalar.
std::string ShapeString(const std::vector<int64_t>& shape);

// IEEE 754 binary16 bits to float (exact: every half value is representable).
float HalfToFloat(uint16_t bits);

}  // namespace client
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_DTYPE_H_
