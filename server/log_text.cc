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

namespace {

// The length of the well-formed UTF-8 sequence at the start of `s` (1 to 4), or, where there is
// none, minus the length of its maximal ill-formed part (at least 1 byte).
int Utf8Sequence(absl::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  int length;
  unsigned char low = 0x80;  // the second byte's range; the later ones are 80-BF
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return -1;  // a continuation byte, C0, C1 or F5-FF: never a lead
  }
  for (int i = 1; i < length; ++i) {
    if (static_cast<size_t>(i) >= s.size()) return -i;
    const unsigned char b = byte(static_cast<size_t>(i));
    const bool ok = i == 1 ? (b >= low && b <= high) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return -i;
  }
  return length;
}

}  // namespace

void AppendJsonString(absl::string_view text, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const int n = Utf8Sequence(text.substr(i));
      if (n > 0) {
        out->append(text.data() + i, static_cast<size_t>(n));
        i += static_cast<size_t>(n);
      } else {
        out->append("\xEF\xBF\xBD");  // U+FFFD
        i += static_cast<size_t>(-n);
      }
      continue;
    }
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\b': out->append("\\b"); break;
      case '\t': out->append("\\t"); break;
      case '\n': out->append("\\n"); break;
      case '\f': out->append("\\f"); break;
      case '\r': out->append("\\r"); break;
      default:
        if (c < 0x20) {
          const char escaped[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
          out->append(escaped, sizeof(escaped));
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out->push_back('"');
}

}  // namespace gpupipe::daemon
