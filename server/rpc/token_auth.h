// Bearer tokens for the job service. A token table holds named tokens (`name:token` lines);
// a call proves itself with the metadata `authorization: Bearer <token>`, and is then known by
// the token's name: in the daemon's log, its stats and its per-client limits ("token:<name>"),
// never by the token itself. The table can be replaced while the daemon serves (SIGHUP
// re-reads the file): calls check against the table in place when they start.
//
// Thread safety: TokenTable is immutable; Authenticator may be used from any thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpupipe::rpc {

inline constexpr char kAuthorizationMetadataKey[] = "authorization";

class TokenTable {
 public:
  // Parses `name:token` lines: names of letters, digits, '-', '_' and '.'; tokens of at least
  // 16 printable bytes without spaces; blank lines and lines starting with '#' are skipped.
  // INVALID_ARGUMENT naming the line (never quoting a token) for anything else, and for a
  // name or token given twice.
  static absl::StatusOr<std::shared_ptr<const TokenTable>> Parse(absl::string_view text);

  // The name of `token`, if it is in the table. Every entry is compared, each in time that
  // does not depend on where the bytes first differ, so the time taken tells nothing of
  // how close a guess came.
  std::optional<std::string> Find(absl::string_view token) const;
  size_t size() const { return entries_.size(); }

 private:
  std::vector<std::pair<std::string, std::string>> entries_;  // name, token
};

class Authenticator {
 public:
  // `tokens`: the table calls must match; null: calls need no token.
  explicit Authenticator(std::shared_ptr<const TokenTable> tokens = nullptr)
      : tokens_(std::move(tokens)) {}

  void SetTokens(std::shared_ptr<const TokenTable> tokens);
  bool required() const;

  // The caller's token name (empty where no token is required), or UNAUTHENTICATED saying what
  // was wrong (no token, not a bearer token, an unknown token) without repeating it.
  absl::StatusOr<std::string> Authenticate(const grpc::ServerContextBase& context) const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const TokenTable> tokens_;
};

}  // namespace gpupipe::rpc
