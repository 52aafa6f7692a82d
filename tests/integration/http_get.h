// A plain HTTP/1.1 GET over loopback, for tests that read the daemon's metrics endpoint and a
// Prometheus server's query API without an HTTP library.
#pragma once

#include <chrono>
#include <string>

namespace gpupipe::testing {

struct HttpResponse {
  int status = -1;  // -1: no answer (refused, timed out, malformed)
  std::string headers;
  std::string body;
};

// GET http://127.0.0.1:port<path>, reading until the server closes the connection.
HttpResponse HttpGet(int port, const std::string& path,
                     std::chrono::milliseconds timeout = std::chrono::seconds(5));

// `text` with every byte outside [A-Za-z0-9-._~] written as %XX, for a query parameter.
std::string UrlEncode(const std::string& text);

}  // namespace gpupipe::testing
