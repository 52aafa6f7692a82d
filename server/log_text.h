// Text from outside the daemon (a client's tag, an error message that quotes a request) made
// safe for one log line: it can neither end the line nor forge a field, in text or in JSON.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace gpupipe::daemon {

// `text` as the inside of a double-quoted log field: backslash and double quote escaped with a
// backslash, control characters (newlines included) and DEL as \n, \r, \t or \xHH. Bytes of
// 0x80 and above pass unchanged, so UTF-8 stays readable.
std::string QuoteForLog(absl::string_view text);
// The same, appended to `out`.
void AppendQuotedForLog(absl::string_view text, std::string* out);

// Appends `text` as a JSON string, quotes included: `"` and `\` escaped, control characters as
// \b, \t, \n, \f, \r or \u00XX, and what is not well-formed UTF-8 replaced by U+FFFD, one for
// each maximal ill-formed part (Unicode's recommended practice, as nlohmann::json's `replace`
// handler does), so that every collector parses the line.
void AppendJsonString(absl::string_view text, std::string* out);

}  // namespace gpupipe::daemon
