#include "client/targets.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gpupipe {
namespace client {
namespace {

// One entry of a list: a host (a name or a numeric address, without brackets) and a port.
struct Entry {
  std::string text;  // as given, for messages
  std::string host;
  int port = kDefaultPort;
};

absl::StatusOr<Entry> ParseEntry(absl::string_view text) {
  Entry entry;
  entry.text = std::string(text);
  absl::string_view port;
  if (absl::StartsWith(text, "[")) {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("target '", text, "': no closing ']'"));
    }
    entry.host = std::string(text.substr(1, close - 1));
    absl::string_view rest = text.substr(close + 1);
    if (!rest.empty() && !absl::ConsumePrefix(&rest, ":")) {
      return absl::InvalidArgumentError(
          absl::StrCat("target '", text, "': expected [ADDRESS]:PORT"));
    }
    port = rest;
  } else {
    const size_t colons = std::count(text.begin(), text.end(), ':');
    if (colons > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "target '", text, "': an IPv6 address in a list takes brackets ([::1]:50051)"));
    }
    const size_t colon = text.find(':');
    entry.host = std::string(text.substr(0, colon));
    if (colon != absl::string_view::npos) port = text.substr(colon + 1);
  }
  if (entry.host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("target '", text, "': no host"));
  }
  if (!port.empty() &&
      (!absl::SimpleAtoi(port, &entry.port) || entry.port < 1 || entry.port > 65535)) {
    return absl::InvalidArgumentError(
        absl::StrCat("target '", text, "': the port must be 1 to 65535, got '", port, "'"));
  }
  return entry;
}

// An entry's addresses, as inet_ntop writes them, by family.
struct Addresses {
  bool numeric = false;
  std::vector<std::string> v4, v6;
};

absl::StatusOr<Addresses> AddressesOf(const Entry& entry) {
  Addresses a;
  char text[INET6_ADDRSTRLEN];
  in_addr v4;
  in6_addr v6;
  if (inet_pton(AF_INET, entry.host.c_str(), &v4) == 1) {
    a.numeric = true;
    a.v4.push_back(inet_ntop(AF_INET, &v4, text, sizeof(text)));
    return a;
  }
  if (inet_pton(AF_INET6, entry.host.c_str(), &v6) == 1) {
    a.numeric = true;
    a.v6.push_back(inet_ntop(AF_INET6, &v6, text, sizeof(text)));
    return a;
  }
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int err = getaddrinfo(entry.host.c_str(), nullptr, &hints, &found); err != 0) {
    return absl::UnavailableError(absl::StrCat("target '", entry.text, "': cannot resolve '",
                                               entry.host, "': ", gai_strerror(err)));
  }
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(ai->ai_addr);
      a.v4.push_back(inet_ntop(AF_INET, &sin->sin_addr, text, sizeof(text)));
    } else if (ai->ai_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(ai->ai_addr);
      a.v6.push_back(inet_ntop(AF_INET6, &sin6->sin6_addr, text, sizeof(text)));
    }
  }
  freeaddrinfo(found);
  return a;
}

absl::StatusOr<ChannelTarget> ResolveList(const std::string& target) {
  std::vector<Entry> entries;
  std::vector<Addresses> addresses;
  bool numeric_v4 = false, numeric_v6 = false;
  for (absl::string_view piece : absl::StrSplit(target, ',')) {
    piece = absl::StripAsciiWhitespace(piece);
    if (piece.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("target '", target, "': an empty entry (expected HOST:PORT,HOST:PORT)"));
    }
    if (IsTargetUri(std::string(piece))) {
      return absl::InvalidArgumentError(
          absl::StrCat("target '", piece,
                       "': a list takes HOST:PORT entries; a URI goes alone (as "
                       "dns:///NAME:PORT for every address of a name)"));
    }
    absl::StatusOr<Entry> entry = ParseEntry(piece);
    if (!entry.ok()) return entry.status();
    entries.push_back(*std::move(entry));
  }
  // Names are resolved once the whole list is known to be well formed.
  for (const Entry& entry : entries) {
    absl::StatusOr<Addresses> a = AddressesOf(entry);
    if (!a.ok()) return a.status();
    numeric_v4 |= a->numeric && !a->v4.empty();
    numeric_v6 |= a->numeric && !a->v6.empty();
    addresses.push_back(*std::move(a));
  }
  if (numeric_v4 && numeric_v6) {
    return absl::InvalidArgumentError(
        absl::StrCat("target '", target,
                     "': one channel cannot mix IPv4 and IPv6 addresses; list one family "
                     "(or use a name with dns:///)"));
  }
  // The family: the numeric entries' if any, else IPv4 where every name has an IPv4 address.
  bool v6 = numeric_v6;
  if (!numeric_v4 && !numeric_v6) {
    v6 = std::any_of(addresses.begin(), addresses.end(),
                     [](const Addresses& a) { return a.v4.empty(); });
  }
  std::vector<std::string> list;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::vector<std::string>& of_family = v6 ? addresses[i].v6 : addresses[i].v4;
    if (of_family.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "target '", target, "': '", entries[i].host, "' has no ", v6 ? "IPv6" : "IPv4",
          " address, and one channel cannot mix IPv4 and IPv6 (the list's other entries are ",
          v6 ? "IPv6" : "IPv4", ")"));
    }
    for (const std::string& address : of_family) {
      std::string item = v6 ? absl::StrCat("[", address, "]:", entries[i].port)
                            : absl::StrCat(address, ":", entries[i].port);
      if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
    }
  }
  ChannelTarget out;
  out.uri = absl::StrCat(v6 ? "ipv6:" : "ipv4:", absl::StrJoin(list, ","));
  out.balanced = true;
  out.addresses = static_cast<int>(list.size());
  return out;
}

}  // namespace

std::string ServiceConfigJson(bool health_checks) {
  // Only the calls that change nothing: a second Describe or GetStats is harmless, a second
  // RegisterRegion or Submit is not.
  std::string config =
      R"({"loadBalancingConfig": [{"round_robin": {}}],)"
      R"( "methodConfig": [{"name": [{"service": "gpupipe.v1.JobService", "method": "Describe"},)"
      R"( {"service": "gpupipe.v1.JobService", "method": "GetStats"}],)"
      R"( "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.05s", "maxBackoff": "1s",)"
      R"( "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}])";
  if (health_checks) {
    absl::StrAppend(&config, R"(, "healthCheckConfig": {"serviceName": "gpupipe.v1.JobService"})");
  }
  return config + "}";
}

bool IsTargetUri(const std::string& target) {
  // "scheme://...": a scheme is a letter, then letters, digits, '+', '-' or '.'.
  const size_t slashes = target.find("://");
  if (slashes != std::string::npos && slashes > 0 && absl::ascii_isalpha(target[0]) &&
      std::all_of(target.begin(), target.begin() + slashes, [](char c) {
        return absl::ascii_isalnum(c) || c == '+' || c == '-' || c == '.';
      })) {
    return true;
  }
  for (const char* scheme : {"dns:", "unix:", "unix-abstract:", "ipv4:", "ipv6:", "vsock:"}) {
    if (absl::StartsWith(target, scheme)) return true;
  }
  return false;
}

std::string TargetWithPort(const std::string& target) {
  if (IsTargetUri(target)) return target;
  if (!target.empty() && target.front() == '[') {  // [v6] or [v6]:port
    return target.back() == ']' ? absl::StrCat(target, ":", kDefaultPort) : target;
  }
  const size_t colons = std::count(target.begin(), target.end(), ':');
  return colons == 0 ? absl::StrCat(target, ":", kDefaultPort) : target;
}

absl::StatusOr<ChannelTarget> ResolveTarget(const std::string& target) {
  if (target.empty()) return absl::InvalidArgumentError("target is empty (expected HOST:PORT)");
  if (IsTargetUri(target)) {
    // Several addresses in a static URI ("ipv4:a:1,b:2"), or a name that may resolve to several.
    ChannelTarget out;
    out.uri = target;
    const bool dns = absl::StartsWith(target, "dns:");
    const bool list = absl::StartsWith(target, "ipv4:") || absl::StartsWith(target, "ipv6:");
    const int commas = static_cast<int>(std::count(target.begin(), target.end(), ','));
    out.balanced = dns || (list && commas > 0);
    out.addresses = dns ? 0 : list ? commas + 1 : 1;
    return out;
  }
  if (target.find(',') == std::string::npos) {
    // Where the port can be told apart (HOST:PORT, [V6]:PORT), it is checked as a list's is:
    // gRPC would take 117597 as 117597 mod 65536, another daemon's port.
    if (absl::StartsWith(target, "[") || std::count(target.begin(), target.end(), ':') == 1) {
      if (absl::StatusOr<Entry> entry = ParseEntry(target); !entry.ok()) return entry.status();
    }
    ChannelTarget out;
    out.uri = TargetWithPort(target);
    return out;
  }
  return ResolveList(target);
}

}  // namespace client
}  // namespace gpupipe
