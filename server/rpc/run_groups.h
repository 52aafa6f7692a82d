// The calls of a Run split over several calls (RunRequest.stripes and join), brought together:
// each call takes its seat in the run named by its client's identity and the run's key, and
// once every seat is taken the job is submitted, with its events dealt over the calls
// (FanOutSink) and its upload put back in order (engine::StripedInput). A run whose calls
// disagree (their count, a stripe claimed twice), one of whose calls claims a stripe that
// cannot be (RunReactor::RefuseSeat), whose spec cannot run, or whose call is cancelled
// before the job starts is refused on every call, once; a run whose calls have not
// all come within the timeout ends on every call with DEADLINE_EXCEEDED. A refused run's name
// is remembered for 30 s after the refusal, so its late calls get the same answer.
//
// Memory: a run waiting for its calls holds its spec and one seat per call that came (a call
// reads nothing more until the run starts); at most RunGroupLimits runs wait, each for the
// timeout at most (30 s where uploads have none), and a call beyond the limits is refused with
// RESOURCE_EXHAUSTED.
//
// Thread safety: every method may be called from any thread. One thread of its own (the
// timeout), joined by the destructor.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gpupipe/v1/gpupipe.pb.h"
#include "server/engine/engine.h"
#include "server/engine/pipeline/striped_input.h"
#include "server/rpc/event_stream.h"

namespace gpupipe::rpc {

// One call's seat in a run: its event stream, and how to start its upload. Shared by the call's
// reactor, which leaves when it ends, and the run.
class RunSeat {
 public:
  using Start = std::function<void(std::shared_ptr<engine::StripedInput> upload)>;
  RunSeat(std::shared_ptr<EventStream> stream, int index, Start start)
      : stream_(std::move(stream)), index_(index), start_(std::move(start)) {}

  const std::shared_ptr<EventStream>& stream() const { return stream_; }
  int index() const { return index_; }
  // Starts the call's stripe of `upload`; false when the call has left.
  bool StartUpload(std::shared_ptr<engine::StripedInput> upload);
  // The call is over: StartUpload does nothing from now on (one in progress has returned).
  void Leave();

 private:
  friend class RunGroups;
  const std::shared_ptr<EventStream> stream_;
  const int index_;
  std::recursive_mutex mu_;  // a start may end its own call
  Start start_;
  std::string run_;  // the run's name in RunGroups, once seated (RunGroups' lock)
};

// How many runs may wait for their calls: per client (its identity, as the engine's limits
// count clients) and over all clients. A run that starts or is refused no longer counts.
struct RunGroupLimits {
  int max_client_runs = 4;
  int max_runs = 1024;
};

class RunGroups {
 public:
  // `timeout`: how long a run's calls have to arrive (0: 30 s).
  RunGroups(engine::Engine* engine, std::chrono::milliseconds timeout, RunGroupLimits limits);
  ~RunGroups();
  RunGroups(const RunGroups&) = delete;
  RunGroups& operator=(const RunGroups&) = delete;

  // Whether `stripes` is a valid seat: the key's length, count within 2..max_streams, and an
  // index of 0 for the call with the spec (`with_spec`), else 1 to count - 1.
  static absl::Status Check(const v1::RunStripes& stripes, bool with_spec, int max_streams);
  // Of those, whether the key and the count could name a run (whatever the index).
  static absl::Status CheckName(const v1::RunStripes& stripes, bool with_spec, int max_streams);

  // Seats `seat` (already checked) in the run (`client`, stripes.key); the call with stripe 0
  // brings the job's `spec`. The last call to come starts the job, from its own thread.
  void Arrive(const std::string& client, const v1::RunStripes& stripes,
              std::shared_ptr<RunSeat> seat, std::optional<engine::JobSpec> spec);
  // The call with stripe 0 brings a spec that cannot run (`status`): the run is refused on all
  // of its calls, this one included, once.
  void Refuse(const std::string& client, const v1::RunStripes& stripes,
              std::shared_ptr<RunSeat> seat, const absl::Status& status);
  // A seated call went away (cancelled) before its run started: the run fails with `status`.
  void Leave(const RunSeat& seat, const absl::Status& status);

 private:
  struct Run {
    std::string name;  // the client's identity and the key
    std::string client;
    int count = 0;
    std::vector<std::shared_ptr<RunSeat>> seats;  // by stripe; null until the call came
    int seated = 0;
    std::optional<engine::JobSpec> spec;
    absl::Status failure;  // set once refused; the run then waits for its deadline, seatless
    std::chrono::steady_clock::time_point deadline;
  };

  // The run named by `client` and `key`, made where it is new (with `count` seats). Where a
  // new one would exceed the limits, `refusal` is set and the run returned is refused already
  // (or null, where even refusals are at their bound). Called with mu_ held.
  Run* Find(const std::string& client, const std::string& key, int count, absl::Status* refusal);
  // A run no longer waits (it starts, or is refused). Called with mu_ held.
  void Uncount(const Run& run);
  // Refuses `run` with `status`: its seats are moved to `refused` (to be finished outside the
  // lock) and the refusal is counted once. Called with mu_ held.
  void FailLocked(Run& run, absl::Status status, std::vector<std::shared_ptr<RunSeat>>* refused);
  // Submits a complete run and starts its calls' uploads.
  void StartRun(Run run);
  void Loop();

  engine::Engine* const engine_;
  const std::chrono::milliseconds timeout_;
  const RunGroupLimits limits_;
  mutable std::mutex mu_;
  std::map<std::string, int> waiting_by_client_;  // runs waiting, not refused
  int waiting_ = 0;
  std::condition_variable wake_;
  bool stop_ = false;
  std::map<std::string, Run> runs_;
  std::thread thread_;
};

}  // namespace gpupipe::rpc
