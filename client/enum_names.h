// Short, user-facing names for proto enum values: "PRIORITY_HIGH" is "high" and
// "STAGING_PIPELINE" is "pipeline". The short name is the value name, lower-cased, with the
// prefix that all values of the enum share (up to an underscore) removed.
//
// Used by the ops grammar (enum params), the CLI's flags and its output, so that a value added
// to the proto is accepted and printed without code changes. The CLI spells multi-word names
// with '-' ("graph-pdl" for LAUNCH_GRAPH_PDL), the usual style of command-line values; the ops
// grammar keeps '_' because its identifiers cannot contain '-'. All functions are thread-safe.
#ifndef GPUPIPE_CLIENT_ENUM_NAMES_H_
#define GPUPIPE_CLIENT_ENUM_NAMES_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"

namespace gpupipe {
namespace client {

// The short name of `value` ("high").
std::string ShortEnumName(const google::protobuf::EnumValueDescriptor& value);

// The short name of the value numbered `number` in `type`, or the decimal number when `type`
// has no such value (a newer peer's value).
std::string ShortEnumName(const google::protobuf::EnumDescriptor& type, int number);

// The short name with '-' in place of '_' ("graph-pdl"), for the CLI.
std::string FlagEnumName(const google::protobuf::EnumValueDescriptor& value);
std::string FlagEnumName(const google::protobuf::EnumDescriptor& type, int number);

// The value whose short or full name equals `name`, ignoring case and treating '-' as '_';
// nullptr when none does.
const google::protobuf::EnumValueDescriptor* FindEnumValue(
    const google::protobuf::EnumDescriptor& type, absl::string_view name);

// Short names of all values in declaration order, without those named "unspecified" (zero
// values that only mean "not set").
std::vector<std::string> ShortEnumNames(const google::protobuf::EnumDescriptor& type);
// The same with '-' in place of '_'.
std::vector<std::string> FlagEnumNames(const google::protobuf::EnumDescriptor& type);

}  // namespace client
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_ENUM_NAMES_H_
