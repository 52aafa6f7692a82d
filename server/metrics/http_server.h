// A minimal HTTP/1.1 server for the Prometheus scrape: GET /metrics answers with the text a
// callback renders at that moment; another path is 404, another method 405, another HTTP
// version 505, and a request line that is not HTTP's 400 (lines may end CRLF or bare LF, and
// empty lines before the request line are passed over). One thread serves every
// connection at once (poll), each closed after its answer; a request must arrive whole within
// a second and its answer be read within two, so a client that connects and says nothing,
// trickles its bytes or reads slowly holds its own connection for at most three seconds and
// delays no other. At most 64 connections are open at once, a new one taking the oldest one's
// place, so a client that holds many cannot keep a scrape out either; while the process has no
// descriptor left for a connection, the listener rests a tenth of a second between tries
// instead of spinning. (None of it touches the job path: the server shares nothing with it but
// the figures it reads.)
//
// Thread safety: the render callback runs on the server's thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace gpupipe::metrics {

class HttpServer {
 public:
  using Render = std::function<std::string()>;

  // Listens on `address` ("host:port"; port 0 picks one) and serves until destroyed.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& address,
                                                           Render render);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }

 private:
  struct Connection;
  HttpServer(int fd, int port, Render render);
  void Loop();
  // Reads what `c`'s request has sent, or sends what its answer can take; false once the
  // connection is done or broken.
  bool Serve(Connection& c);
  // The answer to `request` (a whole request, or its first kMaxRequestBytes).
  std::string Answer(const std::string& request) const;

  const int fd_;
  const int port_;
  const Render render_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gpupipe::metrics
