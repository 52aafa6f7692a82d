// The load loop of `gpupipe bench`, apart from what it sends: a closed loop (a fixed number of
// requests in flight, the next sent as one completes) or an open loop (requests sent at a fixed
// rate whatever the service does), a warm-up that is not measured, then a measured window of a
// duration or a number of completions. What a request is, and how it is sent, is the Issuer's
// business, so the job service and its echo floor go through the same loop.
//
// Thread-safety: RunLoad blocks its caller; the Issuer and its completions may run on any
// threads, and the loop sends follow-up requests from completion callbacks, so an Issuer must
// not block.
#ifndef GPUPIPE_CLIENT_BENCH_LOAD_DRIVER_H_
#define GPUPIPE_CLIENT_BENCH_LOAD_DRIVER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gpupipe {
namespace bench {

// What one request came to.
struct Outcome {
  bool ok = false;
  bool mismatch = false;  // a result that differs from the first result of the same input
  std::string error;      // why it failed (when !ok)
  // From the job's Timing; zero for the echo, which has none.
  double accept_us = 0;  // the request received until the job was accepted
  double queue_us = 0;   // accepted until a lane took it
  double device_us = 0;  // copies in, kernels, copies out
  double server_us = 0;  // accepted until the result was on the host, plus its streaming
  int kernels = 0;       // kernels of the launch that ran it
  int batch_jobs = 0;    // jobs that launch served (1: the job alone)
  std::string stream;    // the lane that ran it
  std::string daemon;    // the daemon that ran it (its address); empty for the echo
};

struct Sample {
  int entry = 0;          // index into the mix
  double start_us = 0;    // from the start of the measured window
  double latency_us = 0;  // sent until its completion was reported
  Outcome outcome;
};

// Sends request number `n`, of mix entry `entry`; calls `done` exactly once, from any thread.
using Issuer = std::function<void(int64_t n, int entry, std::function<void(Outcome)> done)>;

struct LoadConfig {
  int concurrency = 1;          // closed loop: requests in flight
  double rate = 0;              // > 0: open loop at this many requests per second
  int max_outstanding = 10000;  // open loop: a request due beyond this many is missed
  double warmup_seconds = 1;
  double duration_seconds = 5;
  // > 0: the window holds this many requests and ends when they completed. Once the window has
  // begun, no request is sent beyond those it needs (every one in flight completes inside it),
  // so with no warm-up exactly this many are sent.
  int64_t requests = 0;
  std::vector<int> weights;  // of the mix's entries, which requests pick at random
  uint64_t seed = 1;
  // Called on RunLoad's thread as the measured window begins and once it has ended (before the
  // requests still in flight complete), each exactly once, to read meters such as CPU time
  // over the window. The load goes on while they run.
  std::function<void()> at_window_start;
  std::function<void()> at_window_end;
};

struct LoadResult {
  std::vector<Sample> samples;  // completions inside the measured window
  double seconds = 0;           // the measured window's length
  int64_t missed = 0;           // open loop: requests not sent, over max_outstanding
  int64_t sent = 0;             // requests sent, warm-up included
};

struct LoadProgress {
  double elapsed_seconds = 0;  // since the start, warm-up included
  bool warming_up = true;
  int64_t completed = 0;  // measured so far
  int64_t failed = 0;
};

// Runs the load; `progress` (when set) is called about twice a second from the calling thread.
LoadResult RunLoad(const LoadConfig& config, const Issuer& issue,
                   const std::function<void(const LoadProgress&)>& progress = {});

}  // namespace bench
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_BENCH_LOAD_DRIVER_H_
