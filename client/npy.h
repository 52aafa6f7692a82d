// Reading and writing NumPy .npy files.
//
// Reads format versions 1.0, 2.0 and 3.0 and the little-endian dtypes the API carries:
// '<f4', '<f8', '<f2', '<i4', '<i8' (the '|' and '=' byte-order spellings of these are
// accepted too: this client runs on little-endian hosts only). Writes version 1.0, or 2.0 when
// the header does not fit 1.0's 16-bit length, always C-ordered with a '<' descr.
//
// Headers longer than NumPy's own limit (kNpyMaxHeaderBytes) are refused, as np.load refuses
// them. Of a key given twice in a header, the last value counts, as in Python.
//
// Errors are absl::Status values whose message starts with the file name (or the `name` given
// to the in-memory variants) and names the cause. All functions are thread-safe; they share no
// state. An NpyFileWriter is used by one thread at a time.
#ifndef GPUPIPE_CLIENT_NPY_H_
#define GPUPIPE_CLIENT_NPY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpupipe/v1/gpupipe.pb.h"

namespace gpupipe {
namespace client {

// The longest header (the bytes after the header length field, dict and padding) that
// numpy.load accepts by default (its max_header_size). A reader checks the length field against
// it before reading the header, so a file declaring a huge header costs nothing.
inline constexpr int64_t kNpyMaxHeaderBytes = 10000;

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

// Writes a .npy file whose data arrives in pieces, without holding it: the header at Create,
// then each piece at its offset within the data, in any order.
//
// The bytes go to a temporary file beside the target, "<path>.tmp-<pid>-<n>", which Finish
// renames over `path` once every data byte was written. Until then `path` is untouched (a file
// already there stays as it was), and a writer that fails, or is destroyed before a successful
// Finish, removes its temporary file: a failed job never leaves a complete-looking file at
// `path`. (A process killed mid-write leaves the temporary file, whose name does not end in
// .npy.) When `path` is a symbolic link, the file it points to is replaced and the link kept.
class NpyFileWriter {
 public:
  // Creates the temporary file and writes the header. Fails on an unsupported dtype or an
  // invalid shape, when `path` exists and is not a regular file (or a link to one), and when
  // the file cannot be created or written.
  static absl::StatusOr<std::unique_ptr<NpyFileWriter>> Create(const std::string& path,
                                                               v1::DType dtype,
                                                               const std::vector<int64_t>& shape);
  NpyFileWriter(const NpyFileWriter&) = delete;
  NpyFileWriter& operator=(const NpyFileWriter&) = delete;
  ~NpyFileWriter();  // without a successful Finish: closes and removes the temporary file

  // Writes `data` at byte `offset` of the element data (the file's header_bytes() + offset).
  // Pieces may overlap; a byte written twice holds the later value. A piece that does not lie
  // within the data_bytes() is refused with OUT_OF_RANGE and writes nothing. An I/O error
  // (errno's code) fails the writer: the temporary file is removed and later calls fail.
  absl::Status Write(int64_t offset, absl::string_view data);

  // Checks that every data byte was written (DATA_LOSS naming the first missing one if not),
  // flushes the file to disk (fsync), closes it and renames it over `path`. Any failure removes
  // the temporary file and leaves `path` as it was. Call once; Write is refused afterwards.
  absl::Status Finish();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  int64_t header_bytes() const { return header_bytes_; }
  int64_t data_bytes() const { return data_bytes_; }

 private:
  NpyFileWriter(std::string path, std::string target, std::string temp_path, int fd,
                int64_t header_bytes, int64_t data_bytes);

  // Closes and removes the temporary file, for good; returns `error`.
  absl::Status Fail(absl::Status error);
  // Records that [begin, end) of the data was written.
  void MarkWritten(int64_t begin, int64_t end);

  const std::string path_;    // as given, for messages
  const std::string target_;  // the file the rename replaces (`path_`, or a link's target)
  const std::string temp_path_;
  int fd_;
  const int64_t header_bytes_;
  const int64_t data_bytes_;
  std::map<int64_t, int64_t> written_;  // data ranges written: begin -> end, disjoint, merged
  enum class State { kOpen, kFinished, kFailed } state_ = State::kOpen;
};

// The descr this library writes for `dtype` ("<f4"), or "" when unsupported.
absl::string_view NpyDescr(v1::DType dtype);

}  // namespace client
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_NPY_H_
