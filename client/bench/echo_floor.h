// The echo floor (echo_floor.proto): a server in this process on a loopback port, and the
// Issuer that loads it with the same concurrency and message sizes as the job service.
//
// Thread-safety: EchoFloor and the Issuer may be used from any thread.
#ifndef GPUPIPE_CLIENT_BENCH_ECHO_FLOOR_H_
#define GPUPIPE_CLIENT_BENCH_ECHO_FLOOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/bench/load_driver.h"

namespace gpupipe {
namespace bench {

class EchoFloor {
 public:
  // Serves EchoFloor on 127.0.0.1, on a port the system picks.
  static absl::StatusOr<std::unique_ptr<EchoFloor>> Start();
  ~EchoFloor();  // shuts the server down

  const std::string& target() const { return target_; }

 private:
  struct Server;
  explicit EchoFloor(std::unique_ptr<Server> server, std::string target);
  std::unique_ptr<Server> server_;
  std::string target_;
};

// The floor in a process of its own, as the daemon is: `binary` run with `argument`, which
// must serve EchoFloor (ServeEchoFloorProcess) and report its port. Stops it when destroyed.
class EchoFloorProcess {
 public:
  static absl::StatusOr<std::unique_ptr<EchoFloorProcess>> Start(const std::string& binary,
                                                                 const std::string& argument);
  ~EchoFloorProcess();
  const std::string& target() const { return target_; }
  int pid() const { return pid_; }  // for its CPU time (CpuMeter)

 private:
  EchoFloorProcess(int pid, int stdin_fd, std::string target)
      : pid_(pid), stdin_fd_(stdin_fd), target_(std::move(target)) {}
  int pid_;
  int stdin_fd_;
  std::string target_;
};

// The child's side of EchoFloorProcess: serves the floor, writes its port and a newline to
// stdout, and returns (0) once stdin reaches its end, the parent's signal to stop.
int ServeEchoFloorProcess();

// Per mix entry: the bytes a request carries and the bytes it asks back.
struct EchoSizes {
  int64_t request_bytes = 0;
  int64_t reply_bytes = 0;
};

// Sends request n on channel n % channels (each a connection of its own) to `target`, as a
// unary call, or with `streaming` as a server-streaming call with one reply (the shape of a
// job's Submit). Outcome::ok when the reply carried the size asked; the Issuer must outlive
// the load.
class EchoIssuer {
 public:
  EchoIssuer(const std::string& target, int channels, const std::vector<EchoSizes>& sizes,
             double deadline_seconds, bool streaming = false);
  ~EchoIssuer();
  Issuer issuer();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace bench
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_BENCH_ECHO_FLOOR_H_
