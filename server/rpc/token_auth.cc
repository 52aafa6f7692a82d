#include "server/rpc/token_auth.h"

#include <cctype>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gpupipe::rpc {
namespace {

constexpr size_t kMinTokenBytes = 16;

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

bool ValidToken(absl::string_view token) {
  if (token.size() < kMinTokenBytes || token.size() > 4096) return false;
  for (char c : token) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

// Whether `a` equals `b`, looking at every byte of the longer one whatever the contents.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const TokenTable>> TokenTable::Parse(absl::string_view text) {
  auto table = std::make_shared<TokenTable>();
  std::set<std::string> names, tokens;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripTrailingAsciiWhitespace(absl::StripLeadingAsciiWhitespace(line));
    if (line.empty() || line.front() == '#') continue;
    const size_t colon = line.find(':');
    const absl::string_view name = line.substr(0, colon);
    const absl::string_view token =
        colon == absl::string_view::npos ? absl::string_view() : line.substr(colon + 1);
    const std::string where = absl::StrCat("tokens, line ", line_number, ": ");
    if (colon == absl::string_view::npos || !ValidName(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "expected name:token, the name of letters, digits, '-', '_' or '.'"));
    }
    if (!ValidToken(token)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "the token of '", name, "' must be ", kMinTokenBytes,
          " to 4096 printable bytes without spaces"));
    }
    if (!names.insert(std::string(name)).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, "the name '", name, "' again"));
    }
    if (!tokens.insert(std::string(token)).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, "the token of '", name,
                                                     "' is another name's token too"));
    }
    table->entries_.emplace_back(std::string(name), std::string(token));
  }
  return std::shared_ptr<const TokenTable>(std::move(table));
}

std::optional<std::string> TokenTable::Find(absl::string_view token) const {
  const std::string* found = nullptr;
  for (const auto& [name, candidate] : entries_) {
    if (ConstantTimeEquals(token, candidate)) found = &name;
  }
  if (found == nullptr) return std::nullopt;
  return *found;
}

void Authenticator::SetTokens(std::shared_ptr<const TokenTable> tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  tokens_ = std::move(tokens);
}

bool Authenticator::required() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tokens_ != nullptr;
}

absl::StatusOr<std::string> Authenticator::Authenticate(
    const grpc::ServerContextBase& context) const {
  std::shared_ptr<const TokenTable> tokens;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tokens = tokens_;
  }
  if (tokens == nullptr) return std::string();
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(kAuthorizationMetadataKey);
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "this server needs a token: send `authorization: Bearer <token>` (gpupipe --token-file "
        "or GPUPIPE_TOKEN)");
  }
  const absl::string_view value(it->second.data(), it->second.size());
  constexpr absl::string_view kBearer = "Bearer ";
  if (value.substr(0, kBearer.size()) != kBearer) {
    return absl::UnauthenticatedError("the authorization metadata is not a bearer token");
  }
  std::optional<std::string> name = tokens->Find(value.substr(kBearer.size()));
  if (!name) return absl::UnauthenticatedError("the token is not one this server accepts");
  return *std::move(name);
}

}  // namespace gpupipe::rpc
