#include "client/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/ascii.h"
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

const PyValue* FindKey(const PyValue& dict, absl::string_view key) {
  for (const auto& entry : dict.entries) {
    if (entry.first == key) return &entry.second;
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
  return absl::InvalidArgumentError(
      absl::StrCat("dtype '", descr, "' is not supported (supported: ", kSupported, ")"));
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

absl::StatusOr<std::string> SerializeNpy(const NpyArray& array) {
  const absl::string_view descr = NpyDescr(array.dtype);
  if (descr.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write dtype ", DTypeName(array.dtype), " to .npy"));
  }
  absl::StatusOr<int64_t> want = TensorBytes(array.dtype, array.shape);
  if (!want.ok()) return want.status();
  if (array.data.size() != static_cast<uint64_t>(*want)) {
    return absl::InvalidArgumentError(
        absl::StrCat("data is ", array.data.size(), " bytes but shape ", ShapeTuple(array.shape),
                     " of ", descr, " needs ", *want));
  }
  std::string dict = absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ",
                                  ShapeTuple(array.shape), ", }");
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
  out.reserve(total + array.data.size());
  out.append(kMagic, kMagicLen);
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) {
    out.push_back(static_cast<char>((header_len >> (8 * i)) & 0xff));
  }
  out += dict;
  out += array.data;
  return out;
}

namespace {

// "path: what: strerror(errno)", with errno's status code.
absl::Status ErrnoError(const std::string& path, const char* what) {
  const int err = errno;
  return absl::Status(absl::ErrnoToStatusCode(err),
                      absl::StrCat(path, ": ", what, ": ", std::strerror(err)));
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
      if (absl::Status s = read_prefix(kMagicLen + 2 + len_width + header_len); !s.ok()) return s;
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

}  // namespace client
}  // namespace gpupipe
