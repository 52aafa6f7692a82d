// Child processes for integration tests: the daemon, kept running, and one-shot commands.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpupipe::testing {

struct CommandResult {
  int exit_code = -1;  // 128 + signal when killed by one
  std::string out;
  std::string err;
  // The child's peak resident set in KiB (wait4's ru_maxrss); -1 if it did not run. Linux counts
  // into it the parent's resident set at the spawn (exec records the peak of the memory it
  // replaces), so it bounds the child's own peak from above: measure from a small parent.
  int64_t max_rss_kib = -1;
};

// A field of /proc/<pid>/status in bytes (VmRSS: resident now; VmHWM: its peak); -1 if
// unreadable.
int64_t ProcStatusBytes(pid_t pid, const std::string& field);

// Runs argv[0] with arguments and waits; stdin is /dev/null.
CommandResult RunCommand(const std::vector<std::string>& argv);

// A child process left running (stdin, stdout and stderr on /dev/null), for tests that signal
// a client mid-call: SIGSTOP (a client that stops answering), SIGKILL (one that vanishes).
class ChildProcess {
 public:
  explicit ChildProcess(const std::vector<std::string>& argv);
  ~ChildProcess();  // SIGKILL if still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int sig);
  // Waits for the child; its exit code (128 + signal when killed by one).
  int Wait();

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
};

// A loopback TCP port that was free a moment ago (bound to port 0, then closed).
int FreeLoopbackPort();

// gpupiped on a free loopback port (`--listen 127.0.0.1:0`, and its metrics on another,
// metrics_port()), its stderr collected.
class DaemonProcess {
 public:
  // Starts the daemon and waits for its "listening on" line; with `listen_port`, on that port
  // instead, waiting until it accepts connections (for a daemon that logs no such line, as at
  // --log-level warning). On failure, `error()` says why (the daemon's own log included) and
  // `port()` is 0.
  DaemonProcess(const std::string& binary, std::vector<std::string> args, int listen_port = 0);
  ~DaemonProcess();  // SIGKILL if still running

  int port() const { return port_; }
  // The metrics port from the daemon's log; 0 without metrics.
  int metrics_port() const;
  pid_t pid() const { return pid_; }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& error() const { return error_; }
  // The log's whole lines so far; once the daemon's stderr has closed, all of it.
  std::string log() const;
  bool alive();
  // SIGTERM and wait; the exit code, or -1 on timeout.
  int Terminate(std::chrono::seconds timeout = std::chrono::seconds(20));
  // Waits up to `timeout` for `text` to appear in the log; whether it did.
  bool WaitForLog(const std::string& text,
                  std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_code_ = -1;
  std::string error_;
  mutable std::mutex mu_;
  std::string log_;
  bool log_ended_ = false;  // the reader saw the pipe close
  std::thread reader_;
};

}  // namespace gpupipe::testing
