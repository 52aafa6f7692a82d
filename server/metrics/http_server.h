// A minimal HTTP/1.1 server for the Prometheus scrape: GET /metrics answers with the text a
// callback renders at that moment; anything else is 404 (or 405 for other methods). One thread
// serves one connection at a time, each closed after its answer; a request must arrive whole
// within a second and its answer be read within two, so a client that connects and says
// nothing, trickles its bytes or reads slowly holds it for at most three seconds. (A client
// that keeps doing so delays scrapes, never jobs: the server shares nothing with the job path
// but the figures it reads.)
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
  HttpServer(int fd, int port, Render render);
  void Loop();
  void Serve(int connection);

  const int fd_;
  const int port_;
  const Render render_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gpupipe::metrics
