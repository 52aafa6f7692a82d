#include "server/metrics/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpupipe::metrics {
namespace {

constexpr size_t kMaxRequestBytes = 8192;
constexpr std::chrono::milliseconds kRequestTimeout{1000};
constexpr std::chrono::milliseconds kResponseTimeout{2000};

// Sends `bytes` within kResponseTimeout in all, however slowly the client reads; then gives up.
void SendAll(int fd, const std::string& bytes) {
  const auto deadline = std::chrono::steady_clock::now() + kResponseTimeout;
  size_t sent = 0;
  while (sent < bytes.size()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLOUT, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return;
    const ssize_t n =
        send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

std::string Response(int code, const char* reason, const std::string& content_type,
                     const std::string& body) {
  return absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
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
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
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

void HttpServer::Loop() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;  // wakes to notice stop_
    const int connection = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) continue;
    Serve(connection);
    close(connection);
  }
}

void HttpServer::Serve(int connection) {
  // The whole request within kRequestTimeout, however slowly its bytes trickle in.
  const auto deadline = std::chrono::steady_clock::now() + kRequestTimeout;
  std::string request;
  char buf[1024];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < kMaxRequestBytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{connection, POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return;
    const ssize_t n = recv(connection, buf, sizeof(buf), 0);
    if (n <= 0) return;
    request.append(buf, static_cast<size_t>(n));
  }
  const std::string line = request.substr(0, request.find("\r\n"));
  if (!absl::StartsWith(line, "GET ") && !absl::StartsWith(line, "HEAD ")) {
    SendAll(connection, Response(405, "Method Not Allowed", "text/plain", "GET /metrics\n"));
    return;
  }
  const size_t path_begin = line.find(' ') + 1;
  const std::string path = line.substr(path_begin, line.find(' ', path_begin) - path_begin);
  if (path != "/metrics" && !absl::StartsWith(path, "/metrics?")) {
    SendAll(connection, Response(404, "Not Found", "text/plain", "see /metrics\n"));
    return;
  }
  std::string response = Response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", render_());
  if (absl::StartsWith(line, "HEAD ")) response.resize(response.find("\r\n\r\n") + 4);
  SendAll(connection, response);
}

}  // namespace gpupipe::metrics
