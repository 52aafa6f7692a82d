#include "tests/integration/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace gpupipe::testing {

HttpResponse HttpGet(int port, const std::string& path, std::chrono::milliseconds timeout) {
  HttpResponse response;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return response;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return response;
  }
  const std::string request = "GET " + path +
                              " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                              "\r\nConnection: close\r\n\r\n";
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string raw;
  char buf[8192];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      close(fd);
      return response;
    }
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const size_t end = raw.find("\r\n\r\n");
  if (raw.compare(0, 9, "HTTP/1.1 ") != 0 && raw.compare(0, 9, "HTTP/1.0 ") != 0) return response;
  if (end == std::string::npos) return response;
  response.status = std::atoi(raw.c_str() + 9);
  response.headers = raw.substr(0, end);
  response.body = raw.substr(end + 4);
  // A chunked body (Prometheus answers so) is joined back together.
  if (response.headers.find("Transfer-Encoding: chunked") != std::string::npos) {
    std::string joined;
    size_t at = 0;
    while (at < response.body.size()) {
      const size_t line_end = response.body.find("\r\n", at);
      if (line_end == std::string::npos) break;
      const size_t size = std::strtoul(response.body.c_str() + at, nullptr, 16);
      if (size == 0) break;
      joined += response.body.substr(line_end + 2, size);
      at = line_end + 2 + size + 2;
    }
    response.body = joined;
  }
  return response;
}

std::string UrlEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

}  // namespace gpupipe::testing
