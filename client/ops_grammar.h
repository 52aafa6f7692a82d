// The text form of an op pipeline, as the CLI takes it:
//
//   affine(alpha=2, beta=1) | relu | softmax
//
//   pipeline := op ('|' op)*
//   op       := NAME [ '(' [ param (',' param)* [','] ] ')' ]
//   param    := NAME '=' value
//   value    := scalar | '[' [ scalar (',' scalar)* [','] ] ']'
//   scalar   := ['-' | '+'] NUMBER | ['-' | '+'] inf | nan | IDENT
//
// Whitespace (newlines included) may appear between any two tokens.
//
// The grammar is driven by protobuf reflection over gpupipe.v1.Op: an op's NAME is the name of
// a field of the `kind` oneof, and its params are the fields of that field's message. Numeric
// fields (double, float, [s|u]int32/64, [s]fixed32/64) take numbers, bool fields take
// true/false, enum fields take a value name (see enum_names.h), and repeated fields take
// lists. An op added to the proto therefore needs no change here.
//
// All functions are pure and thread-safe.
#ifndef GPUPIPE_CLIENT_OPS_GRAMMAR_H_
#define GPUPIPE_CLIENT_OPS_GRAMMAR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "gpupipe/v1/gpupipe.pb.h"

namespace gpupipe {
namespace client {

// Parses `text`. On failure returns INVALID_ARGUMENT whose message names the cause and its
// position as LINE:COLUMN (both from 1), e.g.
//   unknown op 'sofmax' at 1:25 (known: affine, relu, sum, softmax)
absl::StatusOr<std::vector<v1::Op>> ParseOps(absl::string_view text);

// Canonical text for `ops`: ops joined by " | ", params in field-number order as
// "name(key=value, ...)", parentheses only when a param is set, numbers in the shortest form
// that reads back to the same value. ParseOps(FormatOps(ops)) yields `ops` again for every
// op whose kind is set (an op without a kind formats as "?").
std::string FormatOps(const std::vector<v1::Op>& ops);

// Names of the ops the grammar knows, in proto declaration order.
std::vector<std::string> KnownOps();

// The same grammar over any op message type: `prototype`'s type must have a oneof named
// `kind` whose fields are messages. Every returned message is a prototype.New(), owned by the
// caller. Lets tests exercise param types that gpupipe.v1 does not use yet.
absl::StatusOr<std::vector<std::unique_ptr<google::protobuf::Message>>> ParseOpsAs(
    absl::string_view text, const google::protobuf::Message& prototype);
std::string FormatOpsAs(const std::vector<const google::protobuf::Message*>& ops);

}  // namespace client
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_OPS_GRAMMAR_H_
