#include "client/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/dtype.h"

namespace gpupipe {
namespace client {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// NumPy aligns the start of the data to 64 bytes so that it can be memory-mapped.
constexpr size_t kAlign = 64;
constexpr char kSupported[] = "<f4, <f8, <f2, <i4, <i8";

struct DescrEntry {
  char kind_size[3];
  v1::DType dtype;
};
constexpr DescrEntry kDescrs[] = {
    {"f4", v1::DTYPE_FLOAT32}, {"f8", v1::DTYPE_FLOAT64}, {"f2", v1::DTYPE_FLOAT16},
    {"i4", v1::DTYPE_INT32},   {"i8", v1::DTYPE_INT64},
};

// ---- a minimal reader for the Python literal that forms the header ---------------------
//
// The header is `repr()` of a dict of str keys with str, bool, int or tuple values; a
// structured dtype puts a list of tuples into 'descr'. Only what those need is parsed.

struct PyValue {
  enum Kind { kStr, kInt, kBool, kNone, kTuple, kList, kDict } kind = kNone;
  std::string str;
  int64_t num = 0;
  bool flag = false;
  std::vector<PyValue> items;                            // tuple / list elements
  std::vector<std::pair<std::string, PyValue>> entries;  // dict entries (str keys only)
};

class LiteralParser {
 public:
  explicit LiteralParser(absl::string_view text) : text_(text) {}

  absl::Status ParseTop(PyValue* out) {
    absl::Status s = ParseValue(out, 0);
    if (!s.ok()) return s;
    SkipSpace();
    if (pos_ != text_.size()) return Error("trailing characters");
    return absl::OkStatus();
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed header (", what, " at offset ", pos_, ")"));
  }

  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }

  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  absl::Status ParseSequence(char close, PyValue* out, int depth) {
    for (;;) {
      if (Consume(close)) return absl::OkStatus();
      PyValue item;
      absl::Status s = ParseValue(&item, depth + 1);
      if (!s.ok()) return s;
      out->items.push_back(std::move(item));
      if (Consume(',')) continue;
      if (Consume(close)) return absl::OkStatus();
      return Error(absl::StrCat("expected ',' or '", std::string(1, close), "'"));
    }
  }

  absl::Status ParseValue(PyValue* out, int depth) {
    if (depth > 16) return Error("nesting too deep");
    SkipSpace();
    if (pos_ >= text_.size()) return Error("unexpected end");
    const char c = text_[pos_];
    if (c == '\'' || c == '"') {
      out->kind = PyValue::kStr;
      return ParseString(&out->str);
    }
    if (c == '(' || c == '[') {
      ++pos_;
      out->kind = c == '(' ? PyValue::kTuple : PyValue::kList;
      return ParseSequence(c == '(' ? ')' : ']', out, depth);
    }
    if (c == '{') {
      ++pos_;
      out->kind = PyValue::kDict;
      for (;;) {
        if (Consume('}')) return absl::OkStatus();
        SkipSpace();
        std::string key;
        if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
          return Error("expected a string key");
        }
        absl::Status s = ParseString(&key);
        if (!s.ok()) return s;
        if (!Consume(':')) return Error("expected ':'");
        PyValue value;
        s = ParseValue(&value, depth + 1);
        if (!s.ok()) return s;
        out->entries.emplace_back(std::move(key), std::move(value));
        if (Consume(',')) continue;
        if (Consume('}')) return absl::OkStatus();
        return Error("expected ',' or '}'");
      }
    }
    if (c == '-' || absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      size_t end = pos_ + 1;
      while (end < text_.size() && absl::ascii_isdigit(static_cast<unsigned char>(text_[end]))) {
        ++end;
      }
      if (!absl::SimpleAtoi(text_.substr(pos_, end - pos_), &out->num)) {
        return Error("bad integer");
      }
      out->kind = PyValue::kInt;
      pos_ = end;
      // Python 2 wrote longs with an 'L' suffix, as in (3L,).
      if (pos_ < text_.size() && (text_[pos_] == 'L' || text_[pos_] == 'l')) ++pos_;
      return absl::OkStatus();
    }
    for (absl::string_view word : {"True", "False", "None"}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        out->kind = word == "None" ? PyValue::kNone : PyValue::kBool;
        out->flag = word == "True";
        return absl::OkStatus();
      }
    }
    return Error(absl::StrCat("unexpected character '", std::string(1, c), "'"));
  }

  // Header strings are plain ASCII names; escapes are kept verbatim after the backslash.
  absl::Status ParseString(std::string* out) {
    const char quote = text_[pos_++];
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
      out->push_back(text_[pos_++]);
    }
    if (pos_ >= text_.size()) return Error("unterminated string");
    ++pos_;
    return absl::OkStatus();
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

// The value of `key` in `dict`; of a key given more than once, the last value, as a Python dict
// literal (and so NumPy) takes it.
const PyValue* FindKey(const PyValue& dict, absl::string_view key) {
  for (auto it = dict.entries.rbegin(); it != dict.entries.rend(); ++it) {
    if (it->first == key) return &it->second;
  }
  return nullptr;
}

absl::StatusOr<v1::DType> DTypeFromDescr(const std::string& descr) {
  if (descr.size() == 3 && (descr[0] == '<' || descr[0] == '|' || descr[0] == '=')) {
    for (const DescrEntry& e : kDescrs) {
      if (descr.compare(1, 2, e.kind_size) == 0) return e.dtype;
    }
  }
  if (!descr.empty() && descr[0] == '>') {
    const std::string little = absl::StrCat("<", descr.substr(1));
    for (const DescrEntry& e : kDescrs) {
      if (descr.compare(1, std::string::npos, e.kind_size) == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("dtype '", descr, "' is big-endian, which is not supported (convert with ",
                         "arr.astype('", little, "'))"));
      }
    }
  }
  // Escaped: a descr is the file's text, and may hold bytes a terminal would hide (a NUL).
  return absl::InvalidArgumentError(absl::StrCat(
      "dtype '", absl::CHexEscape(descr), "' is not supported (supported: ", kSupported, ")"));
}

std::string ShapeTuple(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

uint32_t ReadLe(absl::string_view bytes, size_t offset, size_t width) {
  uint32_t v = 0;
  for (size_t i = 0; i < width; ++i) {
    v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  }
  return v;
}

absl::Status Prefixed(absl::string_view name, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(name, ": ", s.message()));
}

}  // namespace

absl::string_view NpyDescr(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_FLOAT32: return "<f4";
    case v1::DTYPE_FLOAT64: return "<f8";
    case v1::DTYPE_FLOAT16: return "<f2";
    case v1::DTYPE_INT32: return "<i4";
    case v1::DTYPE_INT64: return "<i8";
    default: return "";
  }
}

namespace {

// Parses the header at the start of `bytes` (which must hold at least the whole header) of a
// file of `file_size` bytes.
absl::StatusOr<NpyFileInfo> ParseHeader(absl::string_view bytes, uint64_t file_size,
                                        absl::string_view name) {
  auto error = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", parts...));
  };
  if (bytes.size() < kMagicLen || bytes.compare(0, kMagicLen, absl::string_view(kMagic, kMagicLen)) != 0) {
    return error("not a .npy file (bad magic; expected \\x93NUMPY, a file written by numpy.save)");
  }
  if (bytes.size() < kMagicLen + 2) {
    return error("truncated file (", bytes.size(), " bytes, no format version)");
  }
  const int major = static_cast<unsigned char>(bytes[kMagicLen]);
  const int minor = static_cast<unsigned char>(bytes[kMagicLen + 1]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    return error(".npy format version ", major, ".", minor,
                 " is not supported (supported: 1.0, 2.0, 3.0)");
  }
  const size_t len_width = major == 1 ? 2 : 4;
  const size_t header_start = kMagicLen + 2 + len_width;
  if (bytes.size() < header_start) {
    return error("truncated file (", bytes.size(), " bytes, header length missing)");
  }
  const size_t header_len = ReadLe(bytes, kMagicLen + 2, len_width);
  // From the length field alone, before anything reads or allocates that many bytes. (NumPy
  // compares the decoded header's length after reading it: the same number for the ASCII
  // headers that it writes.)
  if (header_len > static_cast<size_t>(kNpyMaxHeaderBytes)) {
    return error("header is ", header_len, " bytes, over NumPy's limit of ", kNpyMaxHeaderBytes,
                 " (numpy.load's max_header_size); the file is refused unread");
  }
  const size_t data_start = header_start + header_len;
  if (bytes.size() < data_start) {
    return error("truncated header (file is ", file_size, " bytes, header ends at byte ",
                 data_start, ")");
  }

  PyValue header;
  absl::Status s = LiteralParser(bytes.substr(header_start, header_len)).ParseTop(&header);
  if (!s.ok()) return Prefixed(name, s);
  if (header.kind != PyValue::kDict) return error("malformed header (not a dict)");
  const PyValue* descr = FindKey(header, "descr");
  const PyValue* fortran = FindKey(header, "fortran_order");
  const PyValue* shape = FindKey(header, "shape");
  if (descr == nullptr || fortran == nullptr || shape == nullptr) {
    return error("malformed header (needs the keys 'descr', 'fortran_order' and 'shape')");
  }

  NpyFileInfo info;
  if (descr->kind == PyValue::kList) {
    return error("structured dtype is not supported (supported: ", kSupported, ")");
  }
  if (descr->kind != PyValue::kStr) return error("malformed header ('descr' is not a string)");
  absl::StatusOr<v1::DType> dtype = DTypeFromDescr(descr->str);
  if (!dtype.ok()) return Prefixed(name, dtype.status());
  info.dtype = *dtype;

  if (fortran->kind != PyValue::kBool) {
    return error("malformed header ('fortran_order' is not True or False)");
  }
  if (fortran->flag) {
    return error("fortran_order=True is not supported (save a C-ordered array: ",
                 "np.save(path, np.ascontiguousarray(arr)))");
  }

  if (shape->kind != PyValue::kTuple) return error("malformed header ('shape' is not a tuple)");
  for (const PyValue& dim : shape->items) {
    if (dim.kind != PyValue::kInt || dim.num < 0) {
      return error("malformed header ('shape' must hold non-negative integers)");
    }
    info.shape.push_back(dim.num);
  }
  absl::StatusOr<int64_t> want = TensorBytes(info.dtype, info.shape);
  if (!want.ok()) return Prefixed(name, want.status());
  const uint64_t have = file_size - data_start;
  if (have != static_cast<uint64_t>(*want)) {
    return error("data is ", have, " bytes but shape ", ShapeTuple(info.shape), " of ",
                 descr->str, " needs ", *want, have < static_cast<uint64_t>(*want)
                                                      ? " (truncated file)"
                                                      : " (trailing bytes)");
  }
  info.data_offset = static_cast<int64_t>(data_start);
  info.data_bytes = *want;
  return info;
}

}  // namespace

absl::StatusOr<NpyArray> ParseNpy(std::string bytes, absl::string_view name) {
  absl::StatusOr<NpyFileInfo> info = ParseHeader(bytes, bytes.size(), name);
  if (!info.ok()) return info.status();
  NpyArray array;
  array.dtype = info->dtype;
  array.shape = std::move(info->shape);
  bytes.erase(0, static_cast<size_t>(info->data_offset));
  array.data = std::move(bytes);
  return array;
}

namespace {

// Everything of a .npy file before its data: magic, version, header length and the padded
// header dict, `extra` bytes reserved beyond it. Fails on an unsupported dtype or a shape
// without a valid byte size.
absl::StatusOr<std::string> FileHeader(v1::DType dtype, const std::vector<int64_t>& shape,
                                       size_t extra = 0) {
  const absl::string_view descr = NpyDescr(dtype);
  if (descr.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write dtype ", DTypeName(dtype), " to .npy"));
  }
  absl::StatusOr<int64_t> bytes = TensorBytes(dtype, shape);
  if (!bytes.ok()) return bytes.status();
  std::string dict = absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ",
                                  ShapeTuple(shape), ", }");
  // Pad with spaces and a final newline so that the data starts on a 64-byte boundary.
  int major = 1;
  size_t prefix = kMagicLen + 2 + 2;
  size_t total = ((prefix + dict.size() + 1 + kAlign - 1) / kAlign) * kAlign;
  if (total - prefix > 0xffff) {
    major = 2;
    prefix = kMagicLen + 2 + 4;
    total = ((prefix + dict.size() + 1 + kAlign - 1) / kAlign) * kAlign;
  }
  const size_t header_len = total - prefix;
  dict.append(header_len - dict.size() - 1, ' ');
  dict.push_back('\n');

  std::string out;
  out.reserve(total + extra);
  out.append(kMagic, kMagicLen);
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) {
    out.push_back(static_cast<char>((header_len >> (8 * i)) & 0xff));
  }
  out += dict;
  return out;
}

}  // namespace

absl::StatusOr<std::string> SerializeNpy(const NpyArray& array) {
  absl::StatusOr<std::string> out = FileHeader(array.dtype, array.shape, array.data.size());
  if (!out.ok()) return out.status();
  const int64_t want = *TensorBytes(array.dtype, array.shape);  // FileHeader checked it
  if (array.data.size() != static_cast<uint64_t>(want)) {
    return absl::InvalidArgumentError(
        absl::StrCat("data is ", array.data.size(), " bytes but shape ", ShapeTuple(array.shape),
                     " of ", NpyDescr(array.dtype), " needs ", want));
  }
  *out += array.data;
  return out;
}

namespace {

// "path: what: strerror(errno)", with errno's status code.
absl::Status ErrnoError(const std::string& path, absl::string_view what, int err) {
  return absl::Status(absl::ErrnoToStatusCode(err),
                      absl::StrCat(path, ": ", what, ": ", std::strerror(err)));
}
absl::Status ErrnoError(const std::string& path, const char* what) {
  return ErrnoError(path, what, errno);
}

// A regular file open for reading, closed when this goes away.
class RegularFile {
 public:
  RegularFile() = default;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile() {
    if (fd_ >= 0) ::close(fd_);
  }

  absl::Status Open(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return ErrnoError(path, "cannot open");
    struct stat st;
    if (::fstat(fd_, &st) != 0) return ErrnoError(path, "cannot stat");
    if (!S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
    }
    size_ = static_cast<uint64_t>(st.st_size);
    return absl::OkStatus();
  }
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace

absl::StatusOr<NpyFileInfo> ReadNpyHeader(const std::string& path) {
  RegularFile file;
  if (absl::Status s = file.Open(path); !s.ok()) return s;
  // The prefix up to the header length first, then the whole header.
  std::string prefix;
  auto read_prefix = [&](size_t want) -> absl::Status {
    want = std::min<size_t>(want, static_cast<size_t>(file.size()));
    while (prefix.size() < want) {
      char buffer[4096];
      const ssize_t n = ::pread(file.fd(), buffer, std::min(sizeof(buffer), want - prefix.size()),
                                static_cast<off_t>(prefix.size()));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoError(path, "read failed");
      if (n == 0) break;
      prefix.append(buffer, static_cast<size_t>(n));
    }
    return absl::OkStatus();
  };
  if (absl::Status s = read_prefix(kMagicLen + 6); !s.ok()) return s;
  if (prefix.size() >= kMagicLen + 2 && prefix.compare(0, kMagicLen, kMagic, kMagicLen) == 0) {
    const int major = static_cast<unsigned char>(prefix[kMagicLen]);
    const size_t len_width = major == 1 ? 2 : 4;
    if (prefix.size() >= kMagicLen + 2 + len_width) {
      const size_t header_len = ReadLe(prefix, kMagicLen + 2, len_width);
      // ParseHeader refuses a longer header from its length field; reading it would be waste.
      if (header_len <= static_cast<size_t>(kNpyMaxHeaderBytes)) {
        if (absl::Status s = read_prefix(kMagicLen + 2 + len_width + header_len); !s.ok()) {
          return s;
        }
      }
    }
  }
  return ParseHeader(prefix, file.size(), path);
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  RegularFile file;
  if (absl::Status s = file.Open(path); !s.ok()) return s;
  std::string bytes;
  bytes.resize(static_cast<size_t>(file.size()));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(file.fd(), &bytes[done], bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(path, "read failed");
    if (n == 0) break;  // the file shrank while we read it
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return ParseNpy(std::move(bytes), path);
}

absl::Status WriteNpy(const std::string& path, const NpyArray& array) {
  absl::StatusOr<std::string> bytes = SerializeNpy(array);
  if (!bytes.ok()) return Prefixed(path, bytes.status());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    const int err = errno;
    return absl::Status(absl::ErrnoToStatusCode(err),
                        absl::StrCat(path, ": cannot open for writing: ", std::strerror(err)));
  }
  out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  out.close();
  if (!out) {
    return absl::DataLossError(absl::StrCat(path, ": write failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

namespace {

// Numbers the temporary files of the writers of this process.
std::atomic<uint64_t> temp_file_counter{0};

// The file that replacing `path` replaces: `path` itself, or the file a symbolic link there
// points to (so that the link survives). Refuses anything else that exists there.
absl::StatusOr<std::string> ReplacedFile(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return path;
    return ErrnoError(path, "cannot stat");
  }
  std::string target = path;
  if (S_ISLNK(st.st_mode)) {
    char* resolved = ::realpath(path.c_str(), nullptr);
    if (resolved == nullptr) return ErrnoError(path, "cannot resolve the symbolic link");
    target = resolved;
    std::free(resolved);
    if (::stat(target.c_str(), &st) != 0) return ErrnoError(path, "cannot stat");
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a regular file (the .npy is written beside it and renamed over it)"));
  }
  return target;
}

// Writes all of `data` at `offset` of `fd` (pwrite may write less than asked).
absl::Status PwriteAll(int fd, absl::string_view data, int64_t offset, const std::string& name) {
  while (!data.empty()) {
    const ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(name, "write failed");
    data.remove_prefix(static_cast<size_t>(n));
    offset += n;
  }
  return absl::OkStatus();
}

// Makes a rename in the directory of `file` durable. Best effort: the rename has happened and
// the file is complete either way; only its survival of a crash right now is at stake.
void SyncDirectoryOf(const std::string& file) {
  const size_t slash = file.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : slash == 0 ? "/" : file.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

absl::StatusOr<std::unique_ptr<NpyFileWriter>> NpyFileWriter::Create(
    const std::string& path, v1::DType dtype, const std::vector<int64_t>& shape) {
  absl::StatusOr<std::string> header = FileHeader(dtype, shape);
  if (!header.ok()) return Prefixed(path, header.status());
  const int64_t data_bytes = *TensorBytes(dtype, shape);  // FileHeader checked it
  absl::StatusOr<std::string> target = ReplacedFile(path);
  if (!target.ok()) return target.status();

  std::string temp_path;
  int fd = -1;
  // O_EXCL never reuses a name; a clash (a leftover of an earlier process with this pid) only
  // moves on to the next number.
  for (int attempt = 0; fd < 0; ++attempt) {
    temp_path = absl::StrCat(*target, ".tmp-", ::getpid(), "-", temp_file_counter++);
    fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && (errno != EEXIST || attempt == 100)) {
      const int err = errno;
      return ErrnoError(path, absl::StrCat("cannot open for writing (as ", temp_path, ")"), err);
    }
  }
  std::unique_ptr<NpyFileWriter> writer(new NpyFileWriter(
      path, *std::move(target), std::move(temp_path), fd,
      static_cast<int64_t>(header->size()), data_bytes));
  if (absl::Status s = PwriteAll(fd, *header, 0, path); !s.ok()) return writer->Fail(s);
  return writer;
}

NpyFileWriter::NpyFileWriter(std::string path, std::string target, std::string temp_path, int fd,
                             int64_t header_bytes, int64_t data_bytes)
    : path_(std::move(path)),
      target_(std::move(target)),
      temp_path_(std::move(temp_path)),
      fd_(fd),
      header_bytes_(header_bytes),
      data_bytes_(data_bytes) {}

NpyFileWriter::~NpyFileWriter() {
  if (state_ == State::kOpen) Fail(absl::OkStatus()).IgnoreError();
}

absl::Status NpyFileWriter::Fail(absl::Status error) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temp_path_.c_str());
  state_ = State::kFailed;
  return error;
}

absl::Status NpyFileWriter::Write(int64_t offset, absl::string_view data) {
  if (state_ != State::kOpen) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": write after Finish or after a failed write"));
  }
  const int64_t size = static_cast<int64_t>(data.size());
  if (offset < 0 || offset > data_bytes_ || size > data_bytes_ - offset) {
    return absl::OutOfRangeError(absl::StrCat(path_, ": a write of ", size, " bytes at offset ",
                                              offset, " is outside the ", data_bytes_,
                                              " data bytes"));
  }
  if (size == 0) return absl::OkStatus();
  if (absl::Status s = PwriteAll(fd_, data, header_bytes_ + offset, path_); !s.ok()) {
    return Fail(std::move(s));
  }
  MarkWritten(offset, offset + size);
  return absl::OkStatus();
}

void NpyFileWriter::MarkWritten(int64_t begin, int64_t end) {
  // Absorb every range that overlaps or touches [begin, end); what remains stays disjoint.
  auto it = written_.upper_bound(begin);
  if (it != written_.begin() && std::prev(it)->second >= begin) --it;
  while (it != written_.end() && it->first <= end) {
    begin = std::min(begin, it->first);
    end = std::max(end, it->second);
    it = written_.erase(it);
  }
  written_.emplace(begin, end);
}

absl::Status NpyFileWriter::Finish() {
  if (state_ != State::kOpen) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": Finish after Finish or after a failed write"));
  }
  // Merged ranges: complete means one range, [0, data_bytes).
  const bool complete =
      data_bytes_ == 0 || (written_.size() == 1 && written_.begin()->first == 0 &&
                           written_.begin()->second == data_bytes_);
  if (!complete) {
    int64_t have = 0;
    for (const auto& [begin, end] : written_) have += end - begin;
    const int64_t first_missing =
        !written_.empty() && written_.begin()->first == 0 ? written_.begin()->second : 0;
    return Fail(absl::DataLossError(absl::StrCat(
        path_, ": incomplete: ", have, " of ", data_bytes_,
        " data bytes written (the first missing one at offset ", first_missing, ")")));
  }
  if (::fsync(fd_) != 0) return Fail(ErrnoError(path_, "fsync failed"));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return Fail(ErrnoError(path_, "close failed"));
  if (::rename(temp_path_.c_str(), target_.c_str()) != 0) {
    const int err = errno;
    return Fail(ErrnoError(path_, absl::StrCat("cannot rename ", temp_path_, " over it"), err));
  }
  state_ = State::kFinished;
  SyncDirectoryOf(target_);
  return absl::OkStatus();
}

}  // namespace client
}  // namespace gpupipe
