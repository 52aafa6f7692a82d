#include "server/log_text.h"

#include "absl/strings/str_format.h"

namespace gpupipe::daemon {

std::string QuoteForLog(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  AppendQuotedForLog(text, &out);
  return out;
}

void AppendQuotedForLog(absl::string_view text, std::string* out) {
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '\\': *out += "\\\\"; break;
      case '"': *out += "\\\""; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          absl::StrAppendFormat(out, "\\x%02x", u);
        } else {
          *out += c;
        }
    }
  }
}

}  // namespace gpupipe::daemon
