#include "server/metrics/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/poll_deadlines.h"
#include "common/thread_name.h"

namespace gpupipe::metrics {
namespace {

constexpr size_t kMaxRequestBytes = 8192;
constexpr std::chrono::milliseconds kRequestTimeout{1000};
constexpr std::chrono::milliseconds kResponseTimeout{2000};
// Connections open at once; a new one beyond takes the place of the oldest.
constexpr size_t kMaxConnections = 64;

// While accept fails for want of resources (descriptors, memory), the listener is left out of
// poll this long: its pending connection would wake poll at once, again and again.
constexpr std::chrono::milliseconds kAcceptBackoff{100};

std::string Response(int code, const char* reason, const std::string& content_type,
                     const std::string& body, const char* extra_headers = "") {
  return absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\n", extra_headers,
                      "Connection: close\r\n\r\n", body);
}

// Where a request's header section ends, or npos: a blank line, its line ends CRLF or, as
// RFC 9112 lets a server accept, bare LF.
size_t HeaderEnd(const std::string& request) {
  const size_t crlf = request.find("\r\n\r\n");
  const size_t lf = request.find("\n\n");
  return std::min(crlf, lf);
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& address,
                                                              Render render) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen ", address, ": expected HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int rc =
          getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen ", address, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(found, &freeaddrinfo);
  // Non-blocking: the loop accepts every pending connection, then goes back to poll.
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  // Every scrape leaves this side's end of its connection in TIME_WAIT (the server closes
  // first); without SO_REUSEADDR a restarted daemon could not bind the port for a minute. (A
  // port another process listens on is still refused: that is SO_REUSEPORT, not set.)
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, found->ai_addr, found->ai_addrlen) != 0 || listen(fd, 16) != 0) {
    const std::string why = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address, ": ", why));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int bound_port = bound.ss_family == AF_INET6
                             ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                             : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return std::unique_ptr<HttpServer>(new HttpServer(fd, bound_port, std::move(render)));
}

HttpServer::HttpServer(int fd, int port, Render render)
    : fd_(fd), port_(port), render_(std::move(render)), thread_([this] { Loop(); }) {}

HttpServer::~HttpServer() {
  stop_ = true;
  thread_.join();
  close(fd_);
}

// One connection: its request as it arrives, then its answer as the client takes it, each
// within its own deadline.
struct HttpServer::Connection {
  int fd;
  std::chrono::steady_clock::time_point deadline;
  std::string request;
  std::string answer;  // empty while the request is still coming
  size_t sent = 0;
};

void HttpServer::Loop() {
  NameThisThread("gp-metrics");
  using Clock = std::chrono::steady_clock;
  std::deque<Connection> connections;  // oldest first
  std::vector<pollfd> polled;
  Clock::time_point accept_paused_until{};
  while (!stop_) {
    // Drop the connections whose time is up; wake for the next deadline, or to notice stop_.
    const Clock::time_point now = Clock::now();
    int wait_ms = CloseExpired(connections, now, 200);
    const bool accepting = now >= accept_paused_until;
    if (!accepting) wait_ms = std::min(wait_ms, PollMillisUntil(accept_paused_until, now));
    polled.assign({pollfd{fd_, static_cast<short>(accepting ? POLLIN : 0), 0}});
    for (const Connection& c : connections) {
      polled.push_back(pollfd{c.fd, static_cast<short>(c.answer.empty() ? POLLIN : POLLOUT), 0});
    }
    if (poll(polled.data(), polled.size(), wait_ms) <= 0) continue;
    // Serve those that can go on; a connection done or broken is closed.
    std::deque<Connection> open;
    for (size_t i = 0; i < connections.size(); ++i) {
      Connection& c = connections[i];
      if (polled[i + 1].revents == 0 || Serve(c)) {
        open.push_back(std::move(c));
      } else {
        close(c.fd);
      }
    }
    connections.swap(open);
    if ((polled[0].revents & POLLIN) != 0) {
      while (true) {
        const int fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
          // Nothing more pending, or a connection that went away: try again at the next poll.
          // Anything else (EMFILE, ENFILE, ENOBUFS, ENOMEM, ...) would fail again at once.
          if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
              errno != ECONNABORTED) {
            accept_paused_until = Clock::now() + kAcceptBackoff;
          }
          break;
        }
        // A client that holds many connections open (saying nothing, trickling, not reading)
        // cannot keep a scrape out: the newest connection takes the oldest one's place.
        if (connections.size() >= kMaxConnections) {
          close(connections.front().fd);
          connections.pop_front();
        }
        connections.push_back(Connection{fd, Clock::now() + kRequestTimeout, {}, {}, 0});
      }
    }
  }
  for (const Connection& c : connections) close(c.fd);
}

bool HttpServer::Serve(Connection& c) {
  if (c.answer.empty()) {
    char buf[1024];
    const ssize_t n = recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
    if (n <= 0) return false;
    c.request.append(buf, static_cast<size_t>(n));
    if (HeaderEnd(c.request) == std::string::npos && c.request.size() < kMaxRequestBytes) {
      return true;  // more to come, within the request's deadline
    }
    c.answer = Answer(c.request);
    c.deadline = std::chrono::steady_clock::now() + kResponseTimeout;
  }
  const ssize_t n = send(c.fd, c.answer.data() + c.sent, c.answer.size() - c.sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
  if (n <= 0) return false;
  c.sent += static_cast<size_t>(n);
  return c.sent < c.answer.size();
}

std::string HttpServer::Answer(const std::string& request) const {
  // The request line, METHOD SP TARGET SP HTTP/x.y, after any empty lines (RFC 9112 2.2).
  const size_t begin = request.find_first_not_of("\r\n");
  std::string line =
      begin == std::string::npos ? "" : request.substr(begin, request.find('\n', begin) - begin);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const std::vector<std::string> parts = absl::StrSplit(line, ' ');
  const auto is_version = [](const std::string& v) {
    return v.size() == 8 && absl::StartsWith(v, "HTTP/") && absl::ascii_isdigit(v[5]) &&
           v[6] == '.' && absl::ascii_isdigit(v[7]);
  };
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty() || !is_version(parts[2])) {
    return Response(400, "Bad Request", "text/plain", "GET /metrics HTTP/1.1\n");
  }
  if (!absl::StartsWith(parts[2], "HTTP/1.")) {
    return Response(505, "HTTP Version Not Supported", "text/plain", "HTTP/1.1\n");
  }
  const std::string& method = parts[0];
  if (method != "GET" && method != "HEAD") {
    return Response(405, "Method Not Allowed", "text/plain", "GET /metrics\n",
                    "Allow: GET, HEAD\r\n");
  }
  // The target in origin form, or in absolute form (http://host:port/path), which a server must
  // also accept (RFC 9112 3.2.2).
  std::string path = parts[1];
  for (const char* scheme : {"http://", "https://"}) {
    if (absl::StartsWith(path, scheme)) {
      const size_t slash = path.find('/', std::strlen(scheme));
      path = slash == std::string::npos ? "/" : path.substr(slash);
    }
  }
  if (path != "/metrics" && !absl::StartsWith(path, "/metrics?")) {
    return Response(404, "Not Found", "text/plain", "see /metrics\n");
  }
  std::string response = Response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", render_());
  if (method == "HEAD") response.resize(response.find("\r\n\r\n") + 4);
  return response;
}

}  // namespace gpupipe::metrics
