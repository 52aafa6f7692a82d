#include "client/enum_names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace gpupipe {
namespace client {
namespace {

// Length of the prefix, ending in '_', that every value name of `type` starts with.
size_t CommonPrefixLength(const google::protobuf::EnumDescriptor& type) {
  if (type.value_count() < 2) {
    // With one value there is nothing to compare; strip up to its first underscore.
    if (type.value_count() == 0) return 0;
    const std::string& name = type.value(0)->name();
    const size_t underscore = name.find('_');
    return underscore == std::string::npos ? 0 : underscore + 1;
  }
  const std::string& first = type.value(0)->name();
  size_t common = first.size();
  for (int i = 1; i < type.value_count(); ++i) {
    const std::string& name = type.value(i)->name();
    size_t n = 0;
    while (n < common && n < name.size() && name[n] == first[n]) ++n;
    common = n;
  }
  // Cut back to the last underscore inside the common part so that whole words remain, and
  // never strip a value name down to nothing.
  const size_t underscore = first.rfind('_', common == 0 ? 0 : common - 1);
  if (common == 0 || underscore == std::string::npos) return 0;
  for (int i = 0; i < type.value_count(); ++i) {
    if (type.value(i)->name().size() <= underscore + 1) return 0;
  }
  return underscore + 1;
}

}  // namespace

std::string ShortEnumName(const google::protobuf::EnumValueDescriptor& value) {
  return absl::AsciiStrToLower(value.name().substr(CommonPrefixLength(*value.type())));
}

std::string ShortEnumName(const google::protobuf::EnumDescriptor& type, int number) {
  const google::protobuf::EnumValueDescriptor* value = type.FindValueByNumber(number);
  return value == nullptr ? absl::StrCat(number) : ShortEnumName(*value);
}

std::string FlagEnumName(const google::protobuf::EnumValueDescriptor& value) {
  return absl::StrReplaceAll(ShortEnumName(value), {{"_", "-"}});
}

std::string FlagEnumName(const google::protobuf::EnumDescriptor& type, int number) {
  return absl::StrReplaceAll(ShortEnumName(type, number), {{"_", "-"}});
}

const google::protobuf::EnumValueDescriptor* FindEnumValue(
    const google::protobuf::EnumDescriptor& type, absl::string_view name) {
  const std::string normalized = absl::StrReplaceAll(name, {{"-", "_"}});
  for (int i = 0; i < type.value_count(); ++i) {
    const google::protobuf::EnumValueDescriptor* value = type.value(i);
    if (absl::EqualsIgnoreCase(normalized, ShortEnumName(*value)) ||
        absl::EqualsIgnoreCase(normalized, value->name())) {
      return value;
    }
  }
  return nullptr;
}

std::vector<std::string> ShortEnumNames(const google::protobuf::EnumDescriptor& type) {
  std::vector<std::string> names;
  for (int i = 0; i < type.value_count(); ++i) {
    std::string name = ShortEnumName(*type.value(i));
    if (name != "unspecified") names.push_back(std::move(name));
  }
  return names;
}

std::vector<std::string> FlagEnumNames(const google::protobuf::EnumDescriptor& type) {
  std::vector<std::string> names = ShortEnumNames(type);
  for (std::string& name : names) name = absl::StrReplaceAll(name, {{"_", "-"}});
  return names;
}

}  // namespace client
}  // namespace gpupipe
