#include "client/npy.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpupipe {
namespace client {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string Fixture(const std::string& name) {
  return std::string(GPUPIPE_CLIENT_TEST_DATA) + "/" + name;
}

template <typename T>
std::vector<T> Values(const NpyArray& a) {
  std::vector<T> v(a.data.size() / sizeof(T));
  std::memcpy(v.data(), a.data.data(), v.size() * sizeof(T));
  return v;
}

NpyArray Read(const std::string& name) {
  absl::StatusOr<NpyArray> a = ReadNpy(Fixture(name));
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *a : NpyArray{};
}

std::string ReadError(const std::string& name) {
  absl::StatusOr<NpyArray> a = ReadNpy(Fixture(name));
  EXPECT_FALSE(a.ok()) << name;
  return a.ok() ? "" : std::string(a.status().message());
}

// ---- files written by NumPy (make_fixtures.py) --------------------------------------------

TEST(NpyReadTest, Float32OneDim) {
  NpyArray a = Read("f4_1d.npy");
  EXPECT_EQ(a.dtype, v1::DTYPE_FLOAT32);
  EXPECT_THAT(a.shape, ElementsAre(6));
  EXPECT_THAT(Values<float>(a), ElementsAre(0, 0.5, 1, 1.5, 2, 2.5));
}

TEST(NpyReadTest, Float32TwoDim) {
  NpyArray a = Read("f4_2d.npy");
  EXPECT_EQ(a.dtype, v1::DTYPE_FLOAT32);
  EXPECT_THAT(a.shape, ElementsAre(3, 4));
  std::vector<float> want;
  for (int i = 0; i < 12; ++i) want.push_back(i * 0.5f);
  EXPECT_THAT(Values<float>(a), ElementsAreArray(want));
}

TEST(NpyReadTest, Float32Scalar) {
  NpyArray a = Read("f4_scalar.npy");
  EXPECT_EQ(a.dtype, v1::DTYPE_FLOAT32);
  EXPECT_THAT(a.shape, IsEmpty());
  EXPECT_THAT(Values<float>(a), ElementsAre(2.5f));
}

TEST(NpyReadTest, Float64) {
  NpyArray a = Read("f8.npy");
  EXPECT_EQ(a.dtype, v1::DTYPE_FLOAT64);
  EXPECT_THAT(a.shape, ElementsAre(5));
  EXPECT_THAT(Values<double>(a), ElementsAre(-1, -0.5, 0, 0.5, 1));
}

TEST(NpyReadTest, Float16) {
  NpyArray a = Read("f2.npy");
  EXPECT_EQ(a.dtype, v1::DTYPE_FLOAT16);
  EXPECT_THAT(a.shape, ElementsAre(4));
  // binary16 bits of 0, 0.5, 1, 1.5.
  EXPECT_THAT(Values<uint16_t>(a), ElementsAre(0x0000, 0x3800, 0x3c00, 0x3e00));
}

TEST(NpyReadTest, Int32) {
  NpyArray a = Read("i4.npy");
  EXPECT_EQ(a.dtype, v1::DTYPE_INT32);
  EXPECT_THAT(a.shape, ElementsAre(2, 3));
  EXPECT_THAT(Values<int32_t>(a), ElementsAre(-3, -2, -1, 0, 1, 2));
}

TEST(NpyReadTest, Int64) {
  NpyArray a = Read("i8.npy");
  EXPECT_EQ(a.dtype, v1::DTYPE_INT64);
  EXPECT_THAT(Values<int64_t>(a),
              ElementsAre(0, 1000000000000, 2000000000000, 3000000000000));
}

TEST(NpyReadTest, ZeroLength) {
  NpyArray a = Read("empty.npy");
  EXPECT_EQ(a.dtype, v1::DTYPE_FLOAT32);
  EXPECT_THAT(a.shape, ElementsAre(0));
  EXPECT_THAT(a.data, IsEmpty());
  NpyArray b = Read("empty_2d.npy");
  EXPECT_THAT(b.shape, ElementsAre(2, 0));
  EXPECT_THAT(b.data, IsEmpty());
}

TEST(NpyReadTest, Version2And3Headers) {
  for (const char* name : {"f4_v2.npy", "f4_v3.npy"}) {
    NpyArray a = Read(name);
    EXPECT_EQ(a.dtype, v1::DTYPE_FLOAT32) << name;
    EXPECT_THAT(Values<float>(a), ElementsAre(0, 0.5, 1, 1.5)) << name;
  }
}

TEST(NpyReadTest, FortranOrderIsRejected) {
  EXPECT_THAT(ReadError("fortran.npy"), HasSubstr("fortran_order=True is not supported"));
}

TEST(NpyReadTest, BigEndianIsRejected) {
  const std::string e = ReadError("big_endian.npy");
  EXPECT_THAT(e, HasSubstr("big_endian.npy: dtype '>f4' is big-endian"));
  EXPECT_THAT(e, HasSubstr("astype('<f4')"));
}

TEST(NpyReadTest, UnsupportedDtypesAreRejected) {
  EXPECT_THAT(ReadError("u2.npy"),
              HasSubstr("u2.npy: dtype '<u2' is not supported (supported: <f4, <f8, <f2, <i4, "
                        "<i8)"));
  EXPECT_THAT(ReadError("bool.npy"), HasSubstr("dtype '|b1' is not supported"));
  EXPECT_THAT(ReadError("unicode.npy"), HasSubstr("dtype '<U2' is not supported"));
  EXPECT_THAT(ReadError("object.npy"), HasSubstr("dtype '|O' is not supported"));
  EXPECT_THAT(ReadError("structured.npy"), HasSubstr("structured dtype is not supported"));
}

TEST(NpyReadTest, AnUnsupportedDtypeIsNamedWithItsBytesEscaped) {
  std::string header = "{'descr': '<f";
  header += '\0';
  header += "4', 'fortran_order': False, 'shape': (1,), }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string file = "\x93NUMPY";
  file += '\x01';
  file += '\x00';
  file += static_cast<char>(header.size() & 0xff);
  file += static_cast<char>(header.size() >> 8);
  file += header;
  file.append(4, '\0');
  absl::StatusOr<NpyArray> a = ParseNpy(file, "nul.npy");
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("dtype '<f\\x00\\x34' is not supported"));
  EXPECT_EQ(a.status().message().find('\0'), absl::string_view::npos);
}

TEST(NpyReadTest, MissingFile) {
  absl::StatusOr<NpyArray> a = ReadNpy(Fixture("no_such.npy"));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(a.status().message(), HasSubstr("no_such.npy: cannot open"));
}

TEST(NpyReadTest, DirectoryIsRejected) {
  absl::StatusOr<NpyArray> a = ReadNpy(GPUPIPE_CLIENT_TEST_DATA);
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("not a regular file"));
}

// ---- malformed bytes ---------------------------------------------------------------------

std::string ValidBytes() {
  NpyArray a{v1::DTYPE_FLOAT32, {3}, std::string(12, '\0')};
  return *SerializeNpy(a);
}

std::string ParseError(std::string bytes) {
  absl::StatusOr<NpyArray> a = ParseNpy(std::move(bytes), "x.npy");
  EXPECT_FALSE(a.ok());
  if (!a.ok()) {
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  }
  return a.ok() ? "" : std::string(a.status().message());
}

// Replaces the header dict of a version 1.0 file, keeping its length.
std::string WithHeader(const std::string& dict) {
  std::string bytes = ValidBytes();
  const size_t len =
      static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
  std::string header = dict;
  header.resize(len - 1, ' ');
  header.push_back('\n');
  return bytes.substr(0, 10) + header + bytes.substr(10 + len);
}

TEST(NpyParseTest, BadMagic) {
  EXPECT_THAT(ParseError("PK\x03\x04 zip file"), HasSubstr("x.npy: not a .npy file (bad magic"));
  EXPECT_THAT(ParseError(""), HasSubstr("not a .npy file"));
}

TEST(NpyParseTest, Truncated) {
  const std::string bytes = ValidBytes();
  EXPECT_THAT(ParseError(bytes.substr(0, 7)), HasSubstr("truncated file"));
  EXPECT_THAT(ParseError(bytes.substr(0, 9)), HasSubstr("truncated file"));
  EXPECT_THAT(ParseError(bytes.substr(0, 40)), HasSubstr("truncated header"));
  EXPECT_THAT(ParseError(bytes.substr(0, bytes.size() - 1)),
              HasSubstr("data is 11 bytes but shape (3,) of <f4 needs 12 (truncated file)"));
}

TEST(NpyParseTest, TrailingBytes) {
  EXPECT_THAT(ParseError(ValidBytes() + "xyz"),
              HasSubstr("data is 15 bytes but shape (3,) of <f4 needs 12 (trailing bytes)"));
}

TEST(NpyParseTest, UnsupportedVersion) {
  std::string bytes = ValidBytes();
  bytes[6] = 4;
  EXPECT_THAT(ParseError(bytes), HasSubstr("format version 4.0 is not supported"));
}

TEST(NpyParseTest, MalformedHeaders) {
  EXPECT_THAT(ParseError(WithHeader("{'descr': '<f4', 'shape': (3,)}")),
              HasSubstr("needs the keys 'descr', 'fortran_order' and 'shape'"));
  EXPECT_THAT(ParseError(WithHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (3,")),
              HasSubstr("malformed header"));
  EXPECT_THAT(ParseError(WithHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}")),
              HasSubstr("non-negative"));
  EXPECT_THAT(ParseError(WithHeader("{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}")),
              HasSubstr("'fortran_order' is not True or False"));
  EXPECT_THAT(ParseError(WithHeader("[1, 2]")), HasSubstr("not a dict"));
}

TEST(NpyParseTest, ByteOrderSpellings) {
  for (const char* descr : {"|f4", "=f4", "<f4"}) {
    absl::StatusOr<NpyArray> a = ParseNpy(WithHeader(absl::StrCat(
        "{'descr': '", descr, "', 'fortran_order': False, 'shape': (3,), }")));
    ASSERT_TRUE(a.ok()) << descr << ": " << a.status();
    EXPECT_EQ(a->dtype, v1::DTYPE_FLOAT32);
  }
}

// A version `major` file of float32[3] whose header (dict, padding, newline) is `header_len`
// bytes long.
std::string WithHeaderLength(size_t header_len, int major = 1) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
  header.resize(header_len - 1, ' ');
  header.push_back('\n');
  std::string bytes = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) {
    bytes.push_back(static_cast<char>((header_len >> (8 * i)) & 0xff));
  }
  return bytes + header + std::string(12, '\0');
}

TEST(NpyParseTest, HeaderUpToNumpysLimitIsRead) {
  // numpy.load refuses a header only when it is longer than max_header_size (10000).
  for (int major : {1, 2}) {
    absl::StatusOr<NpyArray> a = ParseNpy(WithHeaderLength(kNpyMaxHeaderBytes, major));
    ASSERT_TRUE(a.ok()) << major << ": " << a.status();
    EXPECT_THAT(a->shape, ElementsAre(3));
  }
}

TEST(NpyParseTest, HeaderOverNumpysLimitIsRefused) {
  for (int major : {1, 2, 3}) {
    SCOPED_TRACE(major);
    EXPECT_THAT(ParseError(WithHeaderLength(kNpyMaxHeaderBytes + 1, major)),
                HasSubstr("x.npy: header is 10001 bytes, over NumPy's limit of 10000 "
                          "(numpy.load's max_header_size)"));
  }
  // The length field alone decides: a file that declares a 4 GiB header but holds 16 bytes is
  // refused for the length, not reported truncated after an attempt to read it.
  const std::string declares_huge =
      std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff", 12) + "{'descr'";
  EXPECT_THAT(ParseError(declares_huge), HasSubstr("header is 4294967295 bytes, over NumPy's"));
}

TEST(NpyParseTest, DuplicatedKeysTakeTheLastValue) {
  // As in a Python dict literal, which is what NumPy evaluates the header as.
  absl::StatusOr<NpyArray> a = ParseNpy(WithHeader(
      "{'descr': '<i4', 'fortran_order': True, 'shape': (2,), 'descr': '<f4', 'shape': (3,), "
      "'fortran_order': False}"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->dtype, v1::DTYPE_FLOAT32);
  EXPECT_THAT(a->shape, ElementsAre(3));
  // And the last value is checked: an unsupported one after a good one is refused.
  EXPECT_THAT(ParseError(WithHeader(
                  "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'descr': '<u2'}")),
              HasSubstr("dtype '<u2' is not supported"));
}

TEST(NpyParseTest, Python2LongsInShape) {
  absl::StatusOr<NpyArray> a =
      ParseNpy(WithHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (3L,), }"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->shape, ElementsAre(3));
}

// ---- writing -----------------------------------------------------------------------------

TEST(NpyWriteTest, RoundTripsEveryDtypeAndShape) {
  const std::vector<std::pair<v1::DType, size_t>> dtypes = {
      {v1::DTYPE_FLOAT32, 4}, {v1::DTYPE_FLOAT64, 8}, {v1::DTYPE_FLOAT16, 2},
      {v1::DTYPE_INT32, 4},   {v1::DTYPE_INT64, 8}};
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {5}, {2, 3}, {2, 1, 3, 1}};
  for (const auto& [dtype, size] : dtypes) {
    for (const auto& shape : shapes) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      NpyArray a{dtype, shape, std::string(n * size, '\0')};
      for (size_t i = 0; i < a.data.size(); ++i) a.data[i] = static_cast<char>(i * 7 + 1);
      absl::StatusOr<std::string> bytes = SerializeNpy(a);
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      EXPECT_EQ((bytes->size() - a.data.size()) % 64, 0u) << "data must start 64-aligned";
      absl::StatusOr<NpyArray> b = ParseNpy(*bytes);
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_EQ(b->dtype, dtype);
      EXPECT_EQ(b->shape, shape);
      EXPECT_EQ(b->data, a.data);
    }
  }
}

TEST(NpyWriteTest, ScalarAndOneDimHeaders) {
  NpyArray scalar{v1::DTYPE_FLOAT64, {}, std::string(8, '\0')};
  EXPECT_THAT(*SerializeNpy(scalar), HasSubstr("'shape': (), }"));
  NpyArray vec{v1::DTYPE_FLOAT64, {1}, std::string(8, '\0')};
  EXPECT_THAT(*SerializeNpy(vec), HasSubstr("'shape': (1,), }"));
  NpyArray mat{v1::DTYPE_INT32, {2, 1}, std::string(8, '\0')};
  EXPECT_THAT(*SerializeNpy(mat),
              HasSubstr("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 1), }"));
}

TEST(NpyWriteTest, LargeHeaderUsesVersion2) {
  // A rank that makes the header longer than 65535 bytes. Such a header is also over NumPy's
  // default limit, so np.load (and this reader) refuse the file unless told otherwise.
  NpyArray a{v1::DTYPE_FLOAT32, std::vector<int64_t>(30000, 1), std::string(4, '\0')};
  absl::StatusOr<std::string> bytes = SerializeNpy(a);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ((*bytes)[6], 2);
  EXPECT_THAT(ParseError(*bytes), HasSubstr("over NumPy's limit of 10000"));
}

TEST(NpyWriteTest, RejectsInconsistentArrays) {
  NpyArray wrong_size{v1::DTYPE_FLOAT32, {3}, std::string(8, '\0')};
  EXPECT_THAT(SerializeNpy(wrong_size).status().message(),
              HasSubstr("data is 8 bytes but shape (3,) of <f4 needs 12"));
  NpyArray no_dtype{v1::DTYPE_UNSPECIFIED, {}, ""};
  EXPECT_FALSE(SerializeNpy(no_dtype).ok());
  NpyArray negative{v1::DTYPE_FLOAT32, {-1}, ""};
  EXPECT_FALSE(SerializeNpy(negative).ok());
}

class TempFile {
 public:
  TempFile() {
    const char* dir = std::getenv("TEST_TMPDIR");
    path_ = std::string(dir != nullptr ? dir : "/tmp") + "/npy_test_XXXXXX";
    const int fd = mkstemp(path_.data());
    if (fd >= 0) close(fd);
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(NpyWriteTest, FileRoundTrip) {
  TempFile tmp;
  NpyArray a{v1::DTYPE_INT64, {2}, std::string(16, '\0')};
  const int64_t values[2] = {-7, 1LL << 40};
  std::memcpy(a.data.data(), values, sizeof values);
  ASSERT_TRUE(WriteNpy(tmp.path(), a).ok());
  absl::StatusOr<NpyArray> b = ReadNpy(tmp.path());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->data, a.data);
}

TEST(NpyWriteTest, UnwritablePath) {
  absl::Status s =
      WriteNpy("/nonexistent-dir/y.npy", NpyArray{v1::DTYPE_FLOAT32, {}, std::string(4, '\0')});
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent-dir/y.npy: cannot open for writing"));
}

// NumPy reads what WriteNpy writes. Skipped where /usr/bin/python3 with numpy is missing.
TEST(NpyWriteTest, NumpyReadsOurFiles) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 with numpy not available";
  }
  TempFile tmp;
  NpyArray a{v1::DTYPE_FLOAT32, {2, 3}, std::string(24, '\0')};
  const float values[6] = {0, 0.5f, 1, 1.5f, 2, 2.5f};
  std::memcpy(a.data.data(), values, sizeof values);
  ASSERT_TRUE(WriteNpy(tmp.path(), a).ok());
  const std::string cmd =
      "/usr/bin/python3 -c \"import numpy as np, sys; a = np.load(sys.argv[1]); "
      "sys.exit(0 if a.dtype == np.dtype('<f4') and a.shape == (2, 3) and "
      "(a.ravel() == np.arange(6) * 0.5).all() and a.flags.c_contiguous else 1)\" " +
      tmp.path();
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

// ---- the header alone, for streaming -----------------------------------------------------

TEST(NpyHeaderTest, LocatesTheDataOfEveryFixture) {
  for (const char* name : {"f4_1d.npy", "f4_2d.npy", "f4_scalar.npy", "f4_v2.npy", "f4_v3.npy",
                           "f8.npy", "f2.npy", "i4.npy", "i8.npy", "empty_2d.npy"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<NpyFileInfo> info = ReadNpyHeader(Fixture(name));
    ASSERT_TRUE(info.ok()) << info.status();
    NpyArray whole = Read(name);
    EXPECT_EQ(info->dtype, whole.dtype);
    EXPECT_EQ(info->shape, whole.shape);
    EXPECT_EQ(info->data_bytes, static_cast<int64_t>(whole.data.size()));
    std::ifstream in(Fixture(name), std::ios::binary);
    std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(file.substr(static_cast<size_t>(info->data_offset)), whole.data);
  }
}

TEST(NpyHeaderTest, SameErrorsAsReadNpy) {
  for (const char* name : {"fortran.npy", "big_endian.npy", "object.npy", "bool.npy"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<NpyFileInfo> info = ReadNpyHeader(Fixture(name));
    ASSERT_FALSE(info.ok());
    EXPECT_EQ(std::string(info.status().message()), ReadError(name));
  }
  EXPECT_EQ(ReadNpyHeader(Fixture("no_such.npy")).status().code(), absl::StatusCode::kNotFound);
}

TEST(NpyHeaderTest, HeaderOverNumpysLimitIsRefusedUnread) {
  // A 2.0 file declaring a 3 GiB header, sparse so that reading it would have something to read.
  TempFile tmp;
  std::ofstream(tmp.path(), std::ios::binary)
      << std::string("\x93NUMPY\x02\x00\x00\x00\x00\xc0", 12) << "{'descr': '<f4'";
  ASSERT_EQ(truncate(tmp.path().c_str(), off_t{13} << 28), 0);
  absl::StatusOr<NpyFileInfo> info = ReadNpyHeader(tmp.path());
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(info.status().message(),
              HasSubstr("header is 3221225472 bytes, over NumPy's limit of 10000"));
}

TEST(NpyHeaderTest, TruncatedDataIsReported) {
  TempFile tmp;
  std::string bytes = ValidBytes();
  bytes.pop_back();
  std::ofstream(tmp.path(), std::ios::binary) << bytes;
  absl::StatusOr<NpyFileInfo> info = ReadNpyHeader(tmp.path());
  ASSERT_FALSE(info.ok());
  EXPECT_THAT(info.status().message(), HasSubstr("truncated file"));
}

// ---- writing in pieces --------------------------------------------------------------------

class TempDir {
 public:
  TempDir() {
    const char* dir = std::getenv("TEST_TMPDIR");
    std::string tmpl = std::string(dir != nullptr ? dir : "/tmp") + "/npy_writer_test_XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    if (!path_.empty()) std::filesystem::remove_all(path_);
  }
  const std::string& path() const { return path_; }
  // The names in the directory, sorted.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string path_;
};

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::unique_ptr<NpyFileWriter> CreateWriter(const std::string& path, v1::DType dtype,
                                            const std::vector<int64_t>& shape) {
  absl::StatusOr<std::unique_ptr<NpyFileWriter>> w = NpyFileWriter::Create(path, dtype, shape);
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? *std::move(w) : nullptr;
}

// Element bytes 0, 1, 2, ... (mod 251, so that a shifted piece shows).
std::string PatternBytes(size_t n) {
  std::string bytes(n, '\0');
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>(i % 251);
  return bytes;
}

TEST(NpyFileWriterTest, WritesWhatSerializeNpyWrites) {
  TempDir dir;
  const std::vector<std::pair<v1::DType, std::vector<int64_t>>> cases = {
      {v1::DTYPE_FLOAT32, {}},       {v1::DTYPE_FLOAT32, {0}},   {v1::DTYPE_FLOAT64, {7}},
      {v1::DTYPE_FLOAT16, {3, 1000}}, {v1::DTYPE_INT32, {2, 3, 4}}, {v1::DTYPE_INT64, {4096}}};
  for (const auto& [dtype, shape] : cases) {
    SCOPED_TRACE(absl::StrCat(NpyDescr(dtype), " rank ", shape.size()));
    const std::string path = dir.path() + "/y.npy";
    std::unique_ptr<NpyFileWriter> w = CreateWriter(path, dtype, shape);
    ASSERT_NE(w, nullptr);
    const NpyArray want{dtype, shape, PatternBytes(static_cast<size_t>(w->data_bytes()))};
    // In pieces of 1000 bytes, in order, as a result stream delivers them.
    for (size_t at = 0; at < want.data.size(); at += 1000) {
      ASSERT_TRUE(w->Write(static_cast<int64_t>(at), absl::string_view(want.data).substr(at, 1000))
                      .ok());
    }
    ASSERT_TRUE(w->Finish().ok());
    EXPECT_EQ(FileBytes(path), *SerializeNpy(want));
    EXPECT_EQ(w->header_bytes() % 64, 0);
    absl::StatusOr<NpyArray> got = ReadNpy(path);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->dtype, dtype);
    EXPECT_EQ(got->shape, shape);
    EXPECT_EQ(got->data, want.data);
  }
}

TEST(NpyFileWriterTest, PiecesMayComeInAnyOrderAndOverlap) {
  TempDir dir;
  const std::string path = dir.path() + "/y.npy";
  std::unique_ptr<NpyFileWriter> w = CreateWriter(path, v1::DTYPE_INT32, {100});
  ASSERT_NE(w, nullptr);
  const std::string data = PatternBytes(400);
  const absl::string_view view(data);
  // Back to front, with a piece that bridges two others and one rewritten with the same bytes.
  for (const auto& [at, n] : std::vector<std::pair<size_t, size_t>>{
           {300, 100}, {100, 50}, {200, 100}, {0, 10}, {140, 70}, {10, 90}, {150, 50}}) {
    ASSERT_TRUE(w->Write(static_cast<int64_t>(at), view.substr(at, n)).ok()) << at;
  }
  ASSERT_TRUE(w->Finish().ok());
  absl::StatusOr<NpyArray> got = ReadNpy(path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->data, data);
}

TEST(NpyFileWriterTest, FinishFailsWhenBytesAreMissing) {
  TempDir dir;
  const std::string path = dir.path() + "/y.npy";
  std::unique_ptr<NpyFileWriter> w = CreateWriter(path, v1::DTYPE_FLOAT32, {10});
  ASSERT_NE(w, nullptr);
  const std::string data = PatternBytes(40);
  ASSERT_TRUE(w->Write(0, absl::string_view(data).substr(0, 12)).ok());
  ASSERT_TRUE(w->Write(20, absl::string_view(data).substr(20, 20)).ok());
  absl::Status s = w->Finish();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(),
              HasSubstr("y.npy: incomplete: 32 of 40 data bytes written (the first missing one "
                        "at offset 12)"));
  // Nothing is left: no y.npy, no temporary file; and the writer is done.
  EXPECT_THAT(dir.Names(), IsEmpty());
  EXPECT_EQ(w->Write(12, "abcdefgh").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(w->Finish().code(), absl::StatusCode::kFailedPrecondition);

  std::unique_ptr<NpyFileWriter> none = CreateWriter(path, v1::DTYPE_FLOAT32, {10});
  ASSERT_NE(none, nullptr);
  EXPECT_THAT(none->Finish().message(), HasSubstr("0 of 40 data bytes written (the first "
                                                  "missing one at offset 0)"));
}

TEST(NpyFileWriterTest, WritesOutsideTheDataAreRefused) {
  TempDir dir;
  std::unique_ptr<NpyFileWriter> w = CreateWriter(dir.path() + "/y.npy", v1::DTYPE_INT64, {2});
  ASSERT_NE(w, nullptr);
  absl::Status s = w->Write(10, "abcdefgh");
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(),
              HasSubstr("a write of 8 bytes at offset 10 is outside the 16 data bytes"));
  EXPECT_EQ(w->Write(-1, "a").code(), absl::StatusCode::kOutOfRange);
  // A refused write changes nothing: the writer goes on.
  ASSERT_TRUE(w->Write(0, PatternBytes(16)).ok());
  EXPECT_TRUE(w->Finish().ok());
}

TEST(NpyFileWriterTest, TheTargetAppearsOnlyAtFinish) {
  TempDir dir;
  const std::string path = dir.path() + "/y.npy";
  std::unique_ptr<NpyFileWriter> w = CreateWriter(path, v1::DTYPE_FLOAT32, {4});
  ASSERT_NE(w, nullptr);
  // The header went to a temporary file beside the target, named so that it is no .npy.
  EXPECT_EQ(w->temp_path().rfind(path + ".tmp-", 0), 0u) << w->temp_path();
  EXPECT_EQ(dir.Names(), std::vector<std::string>{w->temp_path().substr(dir.path().size() + 1)});
  EXPECT_EQ(FileBytes(w->temp_path()).size(), static_cast<size_t>(w->header_bytes()));
  ASSERT_TRUE(w->Write(0, PatternBytes(16)).ok());
  ASSERT_TRUE(w->Finish().ok());
  EXPECT_EQ(dir.Names(), std::vector<std::string>{"y.npy"});
  EXPECT_TRUE(ReadNpy(path).ok());
}

TEST(NpyFileWriterTest, AnExistingFileStaysUntilFinishReplacesIt) {
  TempDir dir;
  const std::string path = dir.path() + "/y.npy";
  std::ofstream(path, std::ios::binary) << "the previous result";
  {
    // A writer that never finishes (a failed job) leaves the old file and nothing else.
    std::unique_ptr<NpyFileWriter> w = CreateWriter(path, v1::DTYPE_FLOAT32, {4});
    ASSERT_NE(w, nullptr);
    ASSERT_TRUE(w->Write(0, PatternBytes(8)).ok());
    EXPECT_EQ(dir.Names().size(), 2u);
  }
  EXPECT_EQ(dir.Names(), std::vector<std::string>{"y.npy"});
  EXPECT_EQ(FileBytes(path), "the previous result");

  std::unique_ptr<NpyFileWriter> w = CreateWriter(path, v1::DTYPE_FLOAT32, {4});
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(w->Write(0, PatternBytes(16)).ok());
  EXPECT_EQ(FileBytes(path), "the previous result");
  ASSERT_TRUE(w->Finish().ok());
  EXPECT_EQ(FileBytes(path), *SerializeNpy({v1::DTYPE_FLOAT32, {4}, PatternBytes(16)}));
  EXPECT_EQ(dir.Names(), std::vector<std::string>{"y.npy"});
}

TEST(NpyFileWriterTest, ASymbolicLinkIsKeptAndItsTargetReplaced) {
  TempDir dir;
  const std::string target = dir.path() + "/real.npy", link = dir.path() + "/y.npy";
  std::ofstream(target, std::ios::binary) << "old";
  ASSERT_EQ(symlink("real.npy", link.c_str()), 0);
  std::unique_ptr<NpyFileWriter> w = CreateWriter(link, v1::DTYPE_INT32, {1});
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(w->Write(0, "abcd").ok());
  ASSERT_TRUE(w->Finish().ok());
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(FileBytes(target), *SerializeNpy({v1::DTYPE_INT32, {1}, "abcd"}));
}

TEST(NpyFileWriterTest, CreateErrors) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<NpyFileWriter>> w =
      NpyFileWriter::Create("/nonexistent-dir/y.npy", v1::DTYPE_FLOAT32, {1});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(w.status().message(), HasSubstr("/nonexistent-dir/y.npy: cannot open for writing"));
  w = NpyFileWriter::Create(dir.path(), v1::DTYPE_FLOAT32, {1});
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), HasSubstr(": not a regular file"));
  w = NpyFileWriter::Create(dir.path() + "/y.npy", v1::DTYPE_UNSPECIFIED, {1});
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), HasSubstr("y.npy: cannot write dtype"));
  w = NpyFileWriter::Create(dir.path() + "/y.npy", v1::DTYPE_FLOAT32, {-2});
  EXPECT_FALSE(w.ok());
  EXPECT_THAT(dir.Names(), IsEmpty());
}

}  // namespace
}  // namespace client
}  // namespace gpupipe
