// Any proto message as the CLI's JSON: the proto's field names, every enum by its short name as
// the CLI's flags and text spell it ("float32", "graph-pdl", "high"), and 64-bit integers as
// JSON numbers (proto3's own JSON mapping writes them as strings and enums in full), so that
// every JSON output of the CLI names things the same way. Pure. Thread-safe.
#ifndef GPUPIPE_CLIENT_CLI_PROTO_JSON_H_
#define GPUPIPE_CLIENT_CLI_PROTO_JSON_H_

#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"

namespace gpupipe {
namespace cli {

// Scalars are always written, zero or not; a message field only when set; a map as an object
// keyed by its keys as text, in key order; bytes in base64; NaN and infinities as null.
nlohmann::ordered_json ProtoJson(const google::protobuf::Message& message);

}  // namespace cli
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_CLI_PROTO_JSON_H_
