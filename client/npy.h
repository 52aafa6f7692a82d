// Reading and writing NumPy .npy files.
//
// Reads format versions 1.0, 2.0 and 3.0 and the little-endian dtypes the API carries:
// '<f4', '<f8', '<f2', '<i4', '<i8' (the '|' and '=' byte-order spellings of these are
// accepted too: this client runs on little-endian hosts only). Writes version 1.0, or 2.0 when
// the header does not fit 1.0's 16-bit length, always C-ordered with a '<' descr.
//
// Errors are absl::Status values whose message starts with the file name (or the `name` given
// to the in-memory variants) and names the cause. All functions are thread-safe; they share no
// state.
#ifndef GPUPIPE_CLIENT_NPY_H_
#define GPUPIPE_CLIENT_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupipe/v1/gpupipe.pb.h"

namespace gpupipe {
namespace client {

struct NpyArray {
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;  // empty: a scalar (one element)
  std::string data;            // raw little-endian, C-ordered element bytes
};

// Parses the bytes of a whole .npy file. `name` prefixes error messages. Takes the bytes by
// value so that a caller that moves its buffer in pays no second copy of the data.
absl::StatusOr<NpyArray> ParseNpy(std::string bytes, absl::string_view name = "<memory>");

// Serializes `array` into .npy bytes. Fails when the dtype is unsupported or the data size
// does not match shape x dtype.
absl::StatusOr<std::string> SerializeNpy(const NpyArray& array);

// Where a .npy file's element bytes are, for reading them from disk in pieces (streaming an
// input larger than memory should hold twice).
struct NpyFileInfo {
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;
  int64_t data_offset = 0;  // first element byte within the file
  int64_t data_bytes = 0;   // prod(shape) * itemsize; the file holds exactly these after the header
};

// Reads and checks only the header of `path` (and its size against the shape), with the same
// errors as ReadNpy.
absl::StatusOr<NpyFileInfo> ReadNpyHeader(const std::string& path);

// ParseNpy on the contents of `path`.
absl::StatusOr<NpyArray> ReadNpy(const std::string& path);

// SerializeNpy into `path`, replacing any existing file.
absl::Status WriteNpy(const std::string& path, const NpyArray& array);

// The descr this library writes for `dtype` ("<f4"), or "" when unsupported.
absl::string_view NpyDescr(v1::DType dtype);

}  // namespace client
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_NPY_H_
