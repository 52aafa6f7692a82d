#include "client/cli/proto_json.h"

#include <cmath>
#include <map>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "client/dtype.h"
#include "client/enum_names.h"
#include "gpupipe/v1/gpupipe.pb.h"

namespace gpupipe {
namespace cli {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

nlohmann::ordered_json Number(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

std::string EnumName(const FieldDescriptor& field, int number) {
  if (field.enum_type() == v1::DType_descriptor()) {
    return client::DTypeName(static_cast<v1::DType>(number));
  }
  return client::FlagEnumName(*field.enum_type(), number);
}

// Element `index` of a repeated field, or the singular field when index is -1.
nlohmann::ordered_json Value(const Message& m, const FieldDescriptor& f, int index) {
  const Reflection& r = *m.GetReflection();
  const bool repeated = index >= 0;
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return repeated ? r.GetRepeatedInt32(m, &f, index) : r.GetInt32(m, &f);
    case FieldDescriptor::CPPTYPE_INT64:
      return repeated ? r.GetRepeatedInt64(m, &f, index) : r.GetInt64(m, &f);
    case FieldDescriptor::CPPTYPE_UINT32:
      return repeated ? r.GetRepeatedUInt32(m, &f, index) : r.GetUInt32(m, &f);
    case FieldDescriptor::CPPTYPE_UINT64:
      return repeated ? r.GetRepeatedUInt64(m, &f, index) : r.GetUInt64(m, &f);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return Number(repeated ? r.GetRepeatedDouble(m, &f, index) : r.GetDouble(m, &f));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return Number(repeated ? r.GetRepeatedFloat(m, &f, index) : r.GetFloat(m, &f));
    case FieldDescriptor::CPPTYPE_BOOL:
      return repeated ? r.GetRepeatedBool(m, &f, index) : r.GetBool(m, &f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return EnumName(f, repeated ? r.GetRepeatedEnumValue(m, &f, index) : r.GetEnumValue(m, &f));
    case FieldDescriptor::CPPTYPE_STRING: {
      const std::string s = repeated ? r.GetRepeatedString(m, &f, index) : r.GetString(m, &f);
      return f.type() == FieldDescriptor::TYPE_BYTES ? absl::Base64Escape(s) : s;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return ProtoJson(repeated ? r.GetRepeatedMessage(m, &f, index) : r.GetMessage(m, &f));
  }
  return nullptr;
}

}  // namespace

nlohmann::ordered_json ProtoJson(const Message& m) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  const google::protobuf::Descriptor& d = *m.GetDescriptor();
  const Reflection& r = *m.GetReflection();
  for (int i = 0; i < d.field_count(); ++i) {
    const FieldDescriptor& f = *d.field(i);
    if (f.is_map()) {
      const FieldDescriptor& key = *f.message_type()->map_key();
      const FieldDescriptor& value = *f.message_type()->map_value();
      // Sorted by key: a proto map has no order of its own, and output must not change
      // between two calls with the same contents.
      std::map<std::string, nlohmann::ordered_json> entries;
      for (int k = 0; k < r.FieldSize(m, &f); ++k) {
        const Message& entry = r.GetRepeatedMessage(m, &f, k);
        const nlohmann::ordered_json key_json = Value(entry, key, -1);
        entries[key_json.is_string() ? key_json.get<std::string>() : key_json.dump()] =
            Value(entry, value, -1);
      }
      nlohmann::ordered_json map = nlohmann::ordered_json::object();
      for (auto& [k, v] : entries) map[k] = std::move(v);
      out[f.name()] = std::move(map);
    } else if (f.is_repeated()) {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (int k = 0; k < r.FieldSize(m, &f); ++k) list.push_back(Value(m, f, k));
      out[f.name()] = std::move(list);
    } else if (f.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE || f.real_containing_oneof()) {
      if (r.HasField(m, &f)) out[f.name()] = Value(m, f, -1);
    } else {
      out[f.name()] = Value(m, f, -1);
    }
  }
  return out;
}

}  // namespace cli
}  // namespace gpupipe
