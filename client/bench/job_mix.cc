#include "client/bench/job_mix.h"

#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/dtype.h"
#include "client/enum_names.h"
#include "client/ops_grammar.h"
#include "common/float16.h"

namespace gpupipe {
namespace bench {
namespace {

absl::Status Bad(const std::string& message) { return absl::InvalidArgumentError(message); }

template <typename Enum>
absl::Status ParseEnum(const std::string& key, const std::string& value,
                       const google::protobuf::EnumDescriptor& type, Enum* out) {
  const google::protobuf::EnumValueDescriptor* v = client::FindEnumValue(type, value);
  if (v == nullptr || v->number() == 0) {
    return Bad(absl::StrCat(key, ": unknown value '", value, "' (expected ",
                            absl::StrJoin(client::FlagEnumNames(type), ", "), ")"));
  }
  *out = static_cast<Enum>(v->number());
  return absl::OkStatus();
}

template <typename T>
void FillIntegers(std::mt19937_64& rng, int64_t n, std::string* out) {
  std::uniform_int_distribution<int64_t> dist(-100, 100);
  out->resize(static_cast<size_t>(n) * sizeof(T));
  T* p = reinterpret_cast<T*>(out->data());
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(dist(rng));
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ParseShape(const std::string& text) {
  std::vector<int64_t> shape;
  if (absl::StripAsciiWhitespace(text).empty()) return shape;  // a scalar
  for (absl::string_view part : absl::StrSplit(text, 'x')) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &d) || d < 1) {
      return Bad(absl::StrCat("shape: expected positive dimensions joined by 'x' (1x1024), got '",
                              text, "'"));
    }
    shape.push_back(d);
  }
  return shape;
}

std::string ShapeText(const std::vector<int64_t>& shape) { return absl::StrJoin(shape, "x"); }

absl::StatusOr<MixEntry> ParseMixLine(const std::string& line) {
  MixEntry entry;
  bool has_ops = false;
  for (absl::string_view field : absl::StrSplit(line, ';')) {
    field = absl::StripAsciiWhitespace(field);
    if (field.empty()) continue;
    const size_t eq = field.find('=');
    if (eq == absl::string_view::npos) {
      return Bad(absl::StrCat("expected key=value, got '", field, "'"));
    }
    const std::string key(absl::StripAsciiWhitespace(field.substr(0, eq)));
    const std::string value(absl::StripAsciiWhitespace(field.substr(eq + 1)));
    if (key == "ops") {
      absl::StatusOr<std::vector<v1::Op>> ops = client::ParseOps(value);
      if (!ops.ok()) return Bad(absl::StrCat("ops: ", ops.status().message()));
      if (ops->empty()) return Bad("ops: empty pipeline");
      entry.ops = *std::move(ops);
      entry.ops_text = value;
      has_ops = true;
    } else if (key == "shape") {
      absl::StatusOr<std::vector<int64_t>> shape = ParseShape(value);
      if (!shape.ok()) return shape.status();
      entry.shape = *std::move(shape);
    } else if (key == "dtype") {
      if (absl::Status s = ParseEnum(key, value, *v1::DType_descriptor(), &entry.dtype); !s.ok()) {
        return s;
      }
    } else if (key == "priority") {
      if (absl::Status s = ParseEnum(key, value, *v1::Priority_descriptor(), &entry.priority);
          !s.ok()) {
        return s;
      }
    } else if (key == "weight") {
      if (!absl::SimpleAtoi(value, &entry.weight) || entry.weight < 1 || entry.weight > 1000000) {
        return Bad(
            absl::StrCat("weight: expected an integer from 1 to 1000000, got '", value, "'"));
      }
    } else {
      return Bad(absl::StrCat("unknown key '", key, "' (expected ops, shape, dtype, priority, ",
                              "weight)"));
    }
  }
  if (!has_ops) return Bad("missing ops=PIPELINE");
  absl::StatusOr<int64_t> bytes = client::TensorBytes(entry.dtype, entry.shape);
  if (!bytes.ok()) return Bad(absl::StrCat("shape: ", bytes.status().message()));
  if (*bytes > kMaxEntryInputBytes) {
    return Bad(absl::StrCat("shape: ", *bytes, " bytes of input; a bench entry takes at most ",
                            kMaxEntryInputBytes));
  }
  return entry;
}

absl::StatusOr<std::vector<MixEntry>> ParseMixText(const std::string& text) {
  std::vector<MixEntry> entries;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    const absl::string_view stripped = absl::StripAsciiWhitespace(line);
    if (stripped.empty() || stripped[0] == '#') continue;
    absl::StatusOr<MixEntry> entry = ParseMixLine(std::string(stripped));
    if (!entry.ok()) return Bad(absl::StrCat("line ", number, ": ", entry.status().message()));
    entries.push_back(*std::move(entry));
    if (entries.size() > static_cast<size_t>(kMaxMixEntries)) {
      return Bad(absl::StrCat("more than ", kMaxMixEntries, " entries"));
    }
  }
  if (entries.empty()) return Bad("no entries (each non-comment line is one: ops=...; ...)");
  return entries;
}

absl::StatusOr<std::vector<MixEntry>> ReadMixFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the mix file ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<MixEntry>> entries = ParseMixText(text.str());
  if (!entries.ok()) return Bad(absl::StrCat(path, ": ", entries.status().message()));
  return entries;
}

absl::StatusOr<std::vector<v1::SubmitRequest>> EntryRequests(const MixEntry& entry, uint64_t seed) {
  absl::StatusOr<int64_t> n = client::NumElements(entry.shape);
  if (!n.ok()) return n.status();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> real(-4.0, 4.0);
  std::vector<v1::SubmitRequest> requests(kInputVariants);
  for (v1::SubmitRequest& request : requests) {
    request.set_priority(entry.priority);
    for (const v1::Op& op : entry.ops) *request.add_ops() = op;
    v1::Tensor* input = request.mutable_input();
    input->set_dtype(entry.dtype);
    for (int64_t d : entry.shape) input->add_shape(d);
    std::string* data = input->mutable_data();
    switch (entry.dtype) {
      case v1::DTYPE_FLOAT32: {
        data->resize(static_cast<size_t>(*n) * sizeof(float));
        float* p = reinterpret_cast<float*>(data->data());
        for (int64_t i = 0; i < *n; ++i) p[i] = static_cast<float>(real(rng));
        break;
      }
      case v1::DTYPE_FLOAT64: {
        data->resize(static_cast<size_t>(*n) * sizeof(double));
        double* p = reinterpret_cast<double*>(data->data());
        for (int64_t i = 0; i < *n; ++i) p[i] = real(rng);
        break;
      }
      case v1::DTYPE_FLOAT16: {
        data->resize(static_cast<size_t>(*n) * sizeof(HalfBits));
        HalfBits* p = reinterpret_cast<HalfBits*>(data->data());
        for (int64_t i = 0; i < *n; ++i) p[i] = FloatToHalf(static_cast<float>(real(rng)));
        break;
      }
      case v1::DTYPE_INT32:
        FillIntegers<int32_t>(rng, *n, data);
        break;
      case v1::DTYPE_INT64:
        FillIntegers<int64_t>(rng, *n, data);
        break;
      default:
        return Bad(absl::StrCat("dtype: ", client::DTypeName(entry.dtype), " is not supported"));
    }
  }
  return requests;
}

std::string EntryLabel(const MixEntry& entry) {
  return absl::StrCat(client::FormatOps(entry.ops), " ", ShapeText(entry.shape), " ",
                      client::FlagEnumName(*v1::DType_descriptor(), entry.dtype), " ",
                      client::FlagEnumName(*v1::Priority_descriptor(), entry.priority));
}

}  // namespace bench
}  // namespace gpupipe
