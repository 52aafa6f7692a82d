// Soak: many clients against one daemon (CPU backend, small pools), each job with a random
// size, pipeline, priority and behaviour: read it all, cancel it, give it a short deadline,
// stop reading, stall or break its upload, or vanish (a CLI process killed mid-call); and
// high-priority small jobs through the priority listener, read, cancelled or given a deadline
// of milliseconds, more at once than its --priority-max-calls. Asserts
// that every call ends with exactly one status (and a Done that agrees with it), every result
// is right, every accepted job is logged exactly once, no lane is left stuck, and the daemon's
// resident memory returns to its band.
//
// Bounded in time and count: GPUPIPE_SOAK_SECONDS (default 15), GPUPIPE_SOAK_JOBS (default no
// limit), GPUPIPE_SOAK_CLIENTS (default 24), GPUPIPE_SOAK_RSS_BAND_MIB (default 160); the
// daemon's idle timeouts GPUPIPE_SOAK_IDLE_SECONDS (default 1); GPUPIPE_SOAK_BACKEND=cuda runs
// it against the CUDA backend on a GPU host (default cpu).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/npy.h"
#include "gpupipe/v1/gpupipe.grpc.pb.h"
#include "tests/integration/binaries.h"
#include "tests/integration/process.h"

namespace gpupipe::testing {
namespace {

using Clock = std::chrono::steady_clock;

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoll(v) : fallback;
}

// The daemon's reader and upload idle timeouts in the soak (GPUPIPE_SOAK_IDLE_SECONDS, default
// 1), and how long a stalling client stalls: past them, and past the reader watch's next look
// (it looks every quarter timeout, at most every second: server/rpc/stall_watch.cc), so that
// every stall is seen. A client that reads everything must never reach the reader timeout;
// under a sanitizer on a host of two cores the clients' own threads can be kept off the CPU
// that long, so the sanitized run (scripts/sanitize.sh) gives the timeouts more room.
int64_t IdleTimeoutSeconds() {
  return std::max<int64_t>(1, EnvInt("GPUPIPE_SOAK_IDLE_SECONDS", 1));
}
std::chrono::milliseconds Stall() {
  const int64_t timeout_ms = IdleTimeoutSeconds() * 1000;
  return std::chrono::milliseconds(timeout_ms + std::min<int64_t>(timeout_ms / 4 + 1, 1000) +
                                   400);
}

// What a client does with its job.
enum class Behaviour {
  kRead,          // reads everything
  kCancel,        // cancels after a random delay
  kShortDeadline, // a deadline of a few milliseconds
  kStopReading,   // reads nothing after Accepted for longer than the reader idle timeout
  kStallUpload,   // Run: sends part of the input, then nothing for longer than the idle timeout
  kBreakUpload,   // Run: half-closes before the last byte
  kVanish,        // a CLI process, killed mid-call
};
constexpr int kBehaviours = 7;
const char* const kBehaviourNames[kBehaviours] = {"read",        "cancel",       "deadline",
                                                  "stop-reading", "stall-upload", "break-upload",
                                                  "vanish"};

// The pipelines the soak runs: each has a result the test checks exactly (inputs are small
// integers, so every sum is exact in float32 whatever the order).
enum class Pipeline { kRelu, kAffineRelu, kSum, kCumsum, kTopk };
constexpr int kPipelines = 5;

struct Job {
  Pipeline pipeline = Pipeline::kRelu;
  int64_t rows = 1;
  int64_t cols = 1;
  v1::Priority priority = v1::PRIORITY_NORMAL;
  std::vector<float> x;

  v1::SubmitRequest Spec(bool with_data) const {
    v1::SubmitRequest r;
    r.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
    r.mutable_input()->add_shape(rows);
    r.mutable_input()->add_shape(cols);
    if (with_data) {
      r.mutable_input()->set_data(reinterpret_cast<const char*>(x.data()), x.size() * 4);
    }
    switch (pipeline) {
      case Pipeline::kRelu:
        r.add_ops()->mutable_relu();
        break;
      case Pipeline::kAffineRelu:
        r.add_ops()->mutable_affine()->set_alpha(2);
        r.mutable_ops(0)->mutable_affine()->set_beta(1);
        r.add_ops()->mutable_relu();
        break;
      case Pipeline::kSum:
        r.add_ops()->mutable_sum();
        break;
      case Pipeline::kCumsum:
        r.add_ops()->mutable_cumsum();
        break;
      case Pipeline::kTopk:
        r.add_ops()->mutable_topk()->set_k(static_cast<int32_t>(std::min<int64_t>(cols, 4)));
        break;
    }
    r.set_priority(priority);
    r.set_client_tag("soak");
    return r;
  }

  std::string Expected() const {
    std::vector<float> y;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x.data() + r * cols;
      switch (pipeline) {
        case Pipeline::kRelu:
          for (int64_t c = 0; c < cols; ++c) y.push_back(std::max(row[c], 0.0f));
          break;
        case Pipeline::kAffineRelu:
          for (int64_t c = 0; c < cols; ++c) y.push_back(std::max(2 * row[c] + 1, 0.0f));
          break;
        case Pipeline::kSum: {
          float s = 0;
          for (int64_t c = 0; c < cols; ++c) s += row[c];
          y.push_back(s);
          break;
        }
        case Pipeline::kCumsum: {
          float s = 0;
          for (int64_t c = 0; c < cols; ++c) y.push_back(s += row[c]);
          break;
        }
        case Pipeline::kTopk: {
          std::vector<float> sorted(row, row + cols);
          std::sort(sorted.rbegin(), sorted.rend());
          for (int64_t c = 0; c < std::min<int64_t>(cols, 4); ++c) y.push_back(sorted[c]);
          break;
        }
      }
    }
    return std::string(reinterpret_cast<const char*>(y.data()), y.size() * 4);
  }
};

// What the clients saw, for the final checks.
struct Tally {
  std::mutex mu;
  std::set<std::string> accepted_ids;
  std::map<std::string, int> outcomes;  // "<behaviour> <status>" -> count
  std::vector<std::string> failures;
  std::atomic<int64_t> jobs{0};

  void Record(Behaviour b, grpc::StatusCode code, const std::string& id) {
    std::lock_guard<std::mutex> lock(mu);
    ++outcomes[std::string(kBehaviourNames[static_cast<int>(b)]) + " " + std::to_string(code)];
    if (!id.empty() && !accepted_ids.insert(id).second) {
      failures.push_back("job id " + id + " accepted twice");
    }
  }
  void Fail(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    if (failures.size() < 50) failures.push_back(what);
  }
};

// Statuses a behaviour may end with; anything else is a failure.
bool Allowed(Behaviour b, grpc::StatusCode code) {
  using C = grpc::StatusCode;
  if (code == C::RESOURCE_EXHAUSTED) return true;  // a limit: the pool, the client's share
  if (code == C::OK) return b != Behaviour::kBreakUpload;
  switch (b) {
    case Behaviour::kRead:
      return false;
    case Behaviour::kCancel:
      return code == C::CANCELLED;
    case Behaviour::kShortDeadline:
      return code == C::DEADLINE_EXCEEDED;
    case Behaviour::kStopReading:
      return code == C::CANCELLED;  // the server cancels a call that does not read
    case Behaviour::kStallUpload:
      // The idle timeout counts only while the job waits for the bytes: a job still queued
      // when the client gives up sees the early half-close instead.
      return code == C::DEADLINE_EXCEEDED || code == C::INVALID_ARGUMENT;
    case Behaviour::kBreakUpload:
      return code == C::INVALID_ARGUMENT;
    case Behaviour::kVanish:
      return true;
  }
  return false;
}

// Cancels a client call still blocked well past its own deadline. The gRPC client library has
// been seen to leave a sync stream's Read waiting after a deadline of a few milliseconds
// passed, with the daemon idle; a call rescued so is counted, and is a failure unless its
// deadline was one of those short ones (the client library's business, not the daemon's).
class Watchdog {
 public:
  static constexpr auto kGrace = std::chrono::seconds(5);

  Watchdog() : thread_([this] { Loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  // Watches `context` until destroyed.
  class Guard {
   public:
    Guard(Watchdog* owner, int64_t id) : owner_(owner), id_(id) {}
    ~Guard() {
      std::lock_guard<std::mutex> lock(owner_->mu_);
      owner_->calls_.erase(id_);
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    Watchdog* owner_;
    int64_t id_;
  };
  std::unique_ptr<Guard> Watch(grpc::ClientContext* context, Clock::time_point deadline,
                               bool short_deadline) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_[next_id_] = Call{context, deadline + kGrace, short_deadline};
    return std::make_unique<Guard>(this, next_id_++);
  }
  int64_t rescued_short() { std::lock_guard<std::mutex> l(mu_); return rescued_short_; }
  int64_t rescued_other() { std::lock_guard<std::mutex> l(mu_); return rescued_other_; }

 private:
  struct Call {
    grpc::ClientContext* context;
    Clock::time_point overdue;
    bool short_deadline;
  };
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!wake_.wait_for(lock, std::chrono::milliseconds(200), [&] { return stop_; })) {
      const auto now = Clock::now();
      for (auto& [id, call] : calls_) {
        if (call.context == nullptr || now < call.overdue) continue;
        call.context->TryCancel();  // under the lock: the call's Guard cannot end it meanwhile
        ++(call.short_deadline ? rescued_short_ : rescued_other_);
        call.context = nullptr;
      }
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::map<int64_t, Call> calls_;
  int64_t next_id_ = 0;
  int64_t rescued_short_ = 0;
  int64_t rescued_other_ = 0;
  std::thread thread_;
};

class Soak {
 public:
  Soak(const DaemonProcess& daemon, Tally* tally, std::string npy)
      : daemon_(daemon), tally_(tally), npy_(std::move(npy)) {}

  Watchdog& watchdog() { return watchdog_; }

  void Client(int index, Clock::time_point until, int64_t max_jobs) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);  // a reader that stops stalls the server at once
    auto channel =
        grpc::CreateCustomChannel(daemon_.target(), grpc::InsecureChannelCredentials(), args);
    auto stub = v1::JobService::NewStub(channel);
    std::mt19937_64 rng(0x50a4 + static_cast<uint64_t>(index));
    while (Clock::now() < until && tally_->jobs.fetch_add(1) < max_jobs) {
      Job job = RandomJob(rng);
      const int roll = static_cast<int>(rng() % 100);
      Behaviour b = roll < 62   ? Behaviour::kRead
                    : roll < 72 ? Behaviour::kCancel
                    : roll < 80 ? Behaviour::kShortDeadline
                    : roll < 83 ? Behaviour::kStopReading
                    : roll < 86 ? Behaviour::kStallUpload
                    : roll < 92 ? Behaviour::kBreakUpload
                    : roll < 93 ? Behaviour::kVanish
                                : Behaviour::kRead;
      const bool upload = b == Behaviour::kStallUpload || b == Behaviour::kBreakUpload ||
                          (b != Behaviour::kVanish && rng() % 3 == 0);
      if (b == Behaviour::kVanish) {
        Vanish(rng);
      } else if (upload) {
        RunUpload(*stub, job, b, rng, "client-" + std::to_string(index % 5));
      } else {
        RunSubmit(*stub, job, b, rng, "client-" + std::to_string(index % 5));
      }
    }
  }

  // High-priority small jobs through the priority listener (SubmitSmall on 127.0.0.1:`port`):
  // read, cancelled a moment after they start, or given a deadline of milliseconds.
  void PriorityClient(int index, int port, Clock::time_point until, int64_t max_jobs) {
    auto stub = v1::JobService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
    std::mt19937_64 rng(0x9a10 + static_cast<uint64_t>(index));
    while (Clock::now() < until && tally_->jobs.fetch_add(1) < max_jobs) {
      Job job = RandomJob(rng);
      job.priority = v1::PRIORITY_HIGH;
      job.rows = std::min<int64_t>(job.rows, 4);
      job.cols = std::min<int64_t>(job.cols, 2048);
      job.x.resize(static_cast<size_t>(job.rows * job.cols));
      const int roll = static_cast<int>(rng() % 100);
      const Behaviour b = roll < 70   ? Behaviour::kRead
                          : roll < 85 ? Behaviour::kCancel
                                      : Behaviour::kShortDeadline;
      grpc::ClientContext context;
      const std::unique_ptr<Watchdog::Guard> guard =
          SetUp(&context, b, rng, "priority-" + std::to_string(index));
      const v1::SubmitRequest request = job.Spec(true);
      v1::CompleteJob response;
      std::promise<grpc::Status> done;
      stub->async()->SubmitSmall(&context, &request, &response,
                                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
      std::future<grpc::Status> finished = done.get_future();
      if (b == Behaviour::kCancel &&
          finished.wait_for(std::chrono::microseconds(rng() % 3000)) !=
              std::future_status::ready) {
        context.TryCancel();
      }
      const grpc::Status status = finished.get();
      const std::string id = response.accepted().job_id();
      tally_->Record(b, status.error_code(), status.ok() ? id : "");
      if (!Allowed(b, status.error_code())) {
        tally_->Fail(std::string("priority listener: ") + kBehaviourNames[static_cast<int>(b)] +
                     " ended with " + std::to_string(status.error_code()) + ": " +
                     status.error_message());
      } else if (status.ok() && (response.done().code() != 0 ||
                                 response.chunk().data() != job.Expected())) {
        tally_->Fail("priority listener: job " + id + " came back wrong");
      }
    }
  }

 private:
  Job RandomJob(std::mt19937_64& rng) {
    Job job;
    job.pipeline = static_cast<Pipeline>(rng() % kPipelines);
    job.rows = 1 + static_cast<int64_t>(rng() % 48);
    job.cols = 1 + static_cast<int64_t>(rng() % (rng() % 8 == 0 ? 65536 : 2048));
    job.priority = static_cast<v1::Priority>(1 + rng() % 3);
    job.x.resize(static_cast<size_t>(job.rows * job.cols));
    for (float& v : job.x) v = static_cast<float>(static_cast<int>(rng() % 17) - 8);
    return job;
  }

  // Sets the call's metadata and deadline and has the watchdog watch it.
  std::unique_ptr<Watchdog::Guard> SetUp(grpc::ClientContext* context, Behaviour b,
                                         std::mt19937_64& rng, const std::string& client_id) {
    context->AddMetadata("client-id", client_id);
    const auto timeout =
        std::chrono::milliseconds(b == Behaviour::kShortDeadline ? 1 + rng() % 20 : 30000);
    context->set_deadline(std::chrono::system_clock::now() + timeout);
    return watchdog_.Watch(context, Clock::now() + timeout, b == Behaviour::kShortDeadline);
  }

  // Reads a call's events: the job id, the result bytes in order, the Done events.
  template <typename Reader>
  void ReadEvents(Reader& reader, grpc::ClientContext& context, Behaviour b,
                  std::mt19937_64& rng, std::string* id, std::string* out, int* dones,
                  int* done_code) {
    v1::JobEvent e;
    const auto cancel_at = Clock::now() + std::chrono::microseconds(rng() % 3000);
    bool stopped = false;
    while (reader.Read(&e)) {
      if (e.has_accepted()) {
        *id = e.accepted().job_id();
        if (b == Behaviour::kStopReading && !stopped) {
          stopped = true;
          std::this_thread::sleep_for(Stall());
        }
      }
      if (e.has_chunk()) {
        if (e.chunk().offset() != static_cast<int64_t>(out->size())) {
          tally_->Fail("chunk out of order in job " + *id);
        }
        out->append(e.chunk().data());
      }
      if (e.has_done()) {
        ++*dones;
        *done_code = e.done().code();
      }
      if (b == Behaviour::kCancel && *dones == 0 && Clock::now() >= cancel_at) {
        context.TryCancel();
      }
    }
  }

  void Check(Behaviour b, const Job& job, const std::string& id, const std::string& out,
             int dones, int done_code, const grpc::Status& status) {
    tally_->Record(b, status.error_code(), id);
    if (!Allowed(b, status.error_code())) {
      tally_->Fail(std::string(kBehaviourNames[static_cast<int>(b)]) + " ended with " +
                   std::to_string(status.error_code()) + ": " + status.error_message());
    }
    if (dones > 1) tally_->Fail("job " + id + ": " + std::to_string(dones) + " Done events");
    // A Done and the call's status agree, unless the client's own deadline passed between them.
    const bool own_deadline = b == Behaviour::kShortDeadline &&
                              status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (dones == 1 && done_code != status.error_code() && !own_deadline) {
      tally_->Fail("job " + id + ": Done " + std::to_string(done_code) + " but status " +
                   std::to_string(status.error_code()));
    }
    if (status.ok() && out != job.Expected()) tally_->Fail("job " + id + ": wrong result");
  }

  void RunSubmit(v1::JobService::Stub& stub, const Job& job, Behaviour b, std::mt19937_64& rng,
                 const std::string& client_id) {
    grpc::ClientContext context;
    const auto watched = SetUp(&context, b, rng, client_id);
    auto reader = stub.Submit(&context, job.Spec(true));
    std::string id, out;
    int dones = 0, done_code = -1;
    ReadEvents(*reader, context, b, rng, &id, &out, &dones, &done_code);
    Check(b, job, id, out, dones, done_code, reader->Finish());
  }

  void RunUpload(v1::JobService::Stub& stub, const Job& job, Behaviour b, std::mt19937_64& rng,
                 const std::string& client_id) {
    grpc::ClientContext context;
    const auto watched = SetUp(&context, b, rng, client_id);
    auto stream = stub.Run(&context);
    const std::string bytes(reinterpret_cast<const char*>(job.x.data()), job.x.size() * 4);
    const size_t piece = 1 + static_cast<size_t>(rng() % (256 << 10));
    const size_t stop_at = b == Behaviour::kStallUpload || b == Behaviour::kBreakUpload
                               ? static_cast<size_t>(rng() % std::max<size_t>(1, bytes.size()))
                               : bytes.size();
    const auto upload = [&] {
      v1::RunRequest m;
      *m.mutable_spec() = job.Spec(false);
      if (!stream->Write(m)) return;
      for (size_t at = 0; at < stop_at; at += piece) {
        m.set_data(bytes.substr(at, std::min(piece, stop_at - at)));
        if (!stream->Write(m)) return;
      }
      if (b == Behaviour::kStallUpload) std::this_thread::sleep_for(Stall());
      stream->WritesDone();
    };
    std::string id, out;
    int dones = 0, done_code = -1;
    if (b == Behaviour::kShortDeadline) {
      // Uploaded first, then read: with a deadline of milliseconds, a Read beside a Write on
      // another thread has been seen to outlive both the deadline and TryCancel in gRPC's sync
      // client (under the sanitizers' timing), which is the client library's, not the daemon's.
      upload();
      ReadEvents(*stream, context, b, rng, &id, &out, &dones, &done_code);
    } else {
      std::thread writer(upload);
      ReadEvents(*stream, context, b, rng, &id, &out, &dones, &done_code);
      writer.join();
    }
    Check(b, job, id, out, dones, done_code, stream->Finish());
  }

  void Vanish(std::mt19937_64& rng) {
    ChildProcess cli({CliBinary(), "--target", daemon_.target(), "--client-id", "vanishing",
                      "submit", "--input", npy_, "--ops", "relu | cumsum"});
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 60));
    cli.Signal(SIGKILL);
    cli.Wait();
    tally_->Record(Behaviour::kVanish, grpc::StatusCode::UNKNOWN, "");
  }

  const DaemonProcess& daemon_;
  Tally* tally_;
  const std::string npy_;
  Watchdog watchdog_;
};

// "job <id> <STATUS>" lines of the daemon's log: how often each id was logged.
std::map<std::string, int> LoggedJobs(const std::string& log, std::map<std::string, int>* codes) {
  std::map<std::string, int> ids;
  const std::string marker = "gpupiped: job ";
  for (size_t at = log.find(marker); at != std::string::npos; at = log.find(marker, at + 1)) {
    const size_t id_begin = at + marker.size();
    const size_t id_end = log.find(' ', id_begin);
    const size_t code_end = log.find(' ', id_end + 1);
    if (id_end == std::string::npos || code_end == std::string::npos) break;
    ++ids[log.substr(id_begin, id_end - id_begin)];
    ++(*codes)[log.substr(id_end + 1, code_end - id_end - 1)];
  }
  return ids;
}

// A float32 .npy of 4 MiB for the clients that vanish mid-call.
std::string WriteInput(const std::string& dir) {
  const std::string path = dir + "/x.npy";
  const std::vector<float> x(64 * 16384, 1.0f);
  const absl::Status s =
      client::WriteNpy(path, {v1::DTYPE_FLOAT32,
                              {64, 16384},
                              std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4)});
  EXPECT_TRUE(s.ok()) << s;
  return path;
}

TEST(Soak, ManyHostileClientsEveryJobEndsOnceNoLaneStuckMemoryReturns) {
  const int64_t seconds = EnvInt("GPUPIPE_SOAK_SECONDS", 15);
  const int64_t max_jobs = EnvInt("GPUPIPE_SOAK_JOBS", int64_t{1} << 40);
  const int clients = static_cast<int>(EnvInt("GPUPIPE_SOAK_CLIENTS", 24));
  const int64_t band = EnvInt("GPUPIPE_SOAK_RSS_BAND_MIB", 160) << 20;
  char dir_template[] = "/tmp/gpupipe-soak-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string npy = WriteInput(dir);
  const char* backend = std::getenv("GPUPIPE_SOAK_BACKEND");
  const std::string idle_timeout = std::to_string(IdleTimeoutSeconds());
  DaemonProcess daemon(DaemonBinary(),
                       {"--backend", backend != nullptr ? backend : "cpu", "--streams-per-priority",
                        "2", "--chunk-mib", "1",
                        "--input-ring-mib", "4", "--input-ring-total-mib", "48",
                        "--max-client-jobs", "24", "--reader-idle-timeout-seconds",
                        idle_timeout, "--upload-idle-timeout-seconds", idle_timeout,
                        "--priority-listen", "127.0.0.1:0",
                        "--priority-max-calls", "4", "--priority-threads", "3"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  int priority_port = 0;
  {
    ASSERT_TRUE(daemon.WaitForLog("priority listener on", std::chrono::seconds(10)));
    std::smatch m;
    const std::string log = daemon.log();
    ASSERT_TRUE(std::regex_search(log, m, std::regex("priority listener on [^ ]*:([0-9]+)")))
        << log;
    priority_port = std::stoi(m[1]);
  }
  Tally tally;
  Soak soak(daemon, &tally, npy);
  const auto run = [&](int64_t run_seconds, int64_t jobs) {
    const auto until = Clock::now() + std::chrono::seconds(run_seconds);
    std::vector<std::thread> threads;
    for (int i = 0; i < clients; ++i) {
      threads.emplace_back([&, i] { soak.Client(i, until, jobs); });
    }
    for (int i = 0; i < 6; ++i) {
      threads.emplace_back([&, i] { soak.PriorityClient(i, priority_port, until, jobs); });
    }
    for (std::thread& t : threads) t.join();
  };
  // A warm-up round sets the memory baseline: pools touched, threads started.
  run(std::max<int64_t>(2, seconds / 10), max_jobs);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const int64_t baseline = ProcStatusBytes(daemon.pid(), "VmRSS");
  const auto start = Clock::now();
  run(seconds, max_jobs);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();

  // Every job still running ends (the idle timeouts end the stalled ones); then a job of every
  // priority is served at once: no lane is stuck.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  for (v1::Priority p : {v1::PRIORITY_LOW, v1::PRIORITY_NORMAL, v1::PRIORITY_HIGH}) {
    Job probe;
    probe.rows = 2;
    probe.cols = 3;
    probe.priority = p;
    probe.x = {-1, 2, -3, 4, -5, 6};
    auto stub = v1::JobService::NewStub(
        grpc::CreateChannel(daemon.target(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    auto reader = stub->Submit(&context, probe.Spec(true));
    v1::JobEvent e;
    std::string out;
    while (reader->Read(&e)) {
      if (e.has_chunk()) out += e.chunk().data();
    }
    const grpc::Status s = reader->Finish();
    EXPECT_TRUE(s.ok()) << "priority " << p << ": " << s.error_message();
    EXPECT_EQ(out, probe.Expected());
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const int64_t final_rss = ProcStatusBytes(daemon.pid(), "VmRSS");

  std::map<std::string, int> codes;
  const std::map<std::string, int> logged = LoggedJobs(daemon.log(), &codes);
  int64_t twice = 0;
  for (const auto& [id, n] : logged) twice += n > 1;
  std::lock_guard<std::mutex> lock(tally.mu);
  int64_t unlogged = 0;
  for (const std::string& id : tally.accepted_ids) unlogged += logged.count(id) == 0;
  std::string summary = "soak: " + std::to_string(tally.jobs.load()) + " jobs from " +
                        std::to_string(clients) + " clients in " + std::to_string(took) +
                        " s; daemon VmRSS baseline " + std::to_string(baseline >> 20) +
                        " MiB, after " + std::to_string(final_rss >> 20) + " MiB\n";
  for (const auto& [what, n] : tally.outcomes) summary += "  " + what + ": " + std::to_string(n) + "\n";
  summary += "  calls the client library left past their deadline, cancelled by the watchdog: " +
             std::to_string(soak.watchdog().rescued_short()) + " with a deadline of 1-20 ms, " +
             std::to_string(soak.watchdog().rescued_other()) + " others\n";
  summary += "  logged:";
  for (const auto& [code, n] : codes) summary += " " + code + "=" + std::to_string(n);
  std::printf("%s\n", summary.c_str());
  EXPECT_TRUE(tally.failures.empty()) << tally.failures.size() << " failures, first: "
                                      << (tally.failures.empty() ? "" : tally.failures[0]);
  for (size_t i = 0; i < tally.failures.size() && i < 10; ++i) ADD_FAILURE() << tally.failures[i];
  EXPECT_EQ(soak.watchdog().rescued_other(), 0) << "calls hung past their deadline";
  EXPECT_EQ(twice, 0) << "jobs logged more than once";
  EXPECT_EQ(unlogged, 0) << "accepted jobs never logged";
  EXPECT_LE(final_rss, baseline + band) << summary;
  const int exit_code = daemon.Terminate();
  EXPECT_EQ(exit_code, 0);
  if (exit_code != 0 || !tally.failures.empty()) {
    // The daemon's own account of its end: a sanitizer report or a failed check is in it.
    const std::string log = daemon.log();
    const size_t keep = 64 << 10;
    std::printf("gpupiped log (last %zu bytes):\n%s\n", std::min(keep, log.size()),
                log.substr(log.size() > keep ? log.size() - keep : 0).c_str());
  }
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace gpupipe::testing
