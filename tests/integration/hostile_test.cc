// The daemon against hostile clients, one test per way a client once wedged it, starved
// others, pinned its memory or made it break a promise: each asserts the fixed behaviour and
// that the daemon then serves a normal job. (Idle and stalled uploads are in stream_test, the
// Run protocol's extra bytes in tests/server/rpc/run_test, forged log lines in daemon_test.)
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/job_client.h"
#include "client/npy.h"
#include "gpupipe/v1/gpupipe.grpc.pb.h"
#include "tests/integration/binaries.h"
#include "tests/integration/process.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::testing {
namespace {

using Clock = std::chrono::steady_clock;
using RawRun = grpc::ClientReaderWriter<v1::RunRequest, v1::JobEvent>;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::shared_ptr<grpc::Channel> Channel(const DaemonProcess& daemon, bool grow_window = true) {
  grpc::ChannelArguments args;
  // Without BDP probing the receive window stays at 64 KiB: a client that stops reading
  // stalls the server's writes at once.
  if (!grow_window) args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(daemon.target(), grpc::InsecureChannelCredentials(), args);
}

v1::Op Relu() {
  v1::Op op;
  op.mutable_relu();
  return op;
}

v1::Op Convolve(int taps, v1::ConvolveOp::Mode mode = v1::ConvolveOp::MODE_FULL) {
  v1::Op op;
  for (int i = 0; i < taps; ++i) op.mutable_convolve()->add_taps(1.0 / taps);
  op.mutable_convolve()->set_mode(mode);
  return op;
}

v1::SubmitRequest Request(std::vector<int64_t> shape, std::vector<v1::Op> ops,
                          const std::string& data = {},
                          v1::Priority priority = v1::PRIORITY_NORMAL) {
  v1::SubmitRequest r;
  r.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
  for (int64_t d : shape) r.mutable_input()->add_shape(d);
  r.mutable_input()->set_data(data);
  for (v1::Op& op : ops) *r.add_ops() = std::move(op);
  r.set_priority(priority);
  return r;
}

// A job of about 10^9 multiply-adds per convolve, `convolves` of them: seconds of CPU each,
// within the default work limit (its input and output are 4 MiB each).
v1::SubmitRequest CostlyRequest(int convolves = 1, v1::Priority priority = v1::PRIORITY_NORMAL) {
  std::vector<v1::Op> ops(static_cast<size_t>(convolves),
                          Convolve(1024, v1::ConvolveOp::MODE_SAME));
  return Request({1 << 20}, std::move(ops), std::string(4 << 20, '\0'), priority);
}

// A small job whose result the daemon must get right.
absl::Status RunSmallJob(const DaemonProcess& daemon) {
  auto client = client::JobClient::Create(daemon.target());
  if (!client.ok()) return client.status();
  absl::StatusOr<client::JobResult> r =
      (*client)->Submit(Request({3}, {Relu()}, AsBytes(std::vector<float>{-1, 0.5f, 2})));
  if (!r.ok()) return r.status();
  if (AsFloats(r->output.data()) != std::vector<float>{0, 0.5f, 2}) {
    return absl::InternalError("wrong result");
  }
  return absl::OkStatus();
}

// Every "job <id> <STATUS>" line of the daemon's log: id -> status.
std::map<std::string, std::string> JobStatuses(const std::string& log) {
  std::map<std::string, std::string> out;
  static const std::regex line("gpupiped: job ([0-9a-f]+-[0-9]+) ([A-Z_]+) ");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator();
       ++it) {
    out[(*it)[1]] = (*it)[2];
  }
  return out;
}

// A Submit call's events and status, as a client that reads them all sees them.
struct Outcome {
  std::string job_id;
  int dones = 0;
  int done_code = -1;
  std::string done_message;
  grpc::Status status;
};

template <typename Reader>  // a Submit's ClientReader or a Run's ClientReaderWriter
Outcome ReadToEnd(Reader& reader) {
  Outcome out;
  v1::JobEvent e;
  while (reader.Read(&e)) {
    if (e.has_accepted()) out.job_id = e.accepted().job_id();
    if (e.has_done()) {
      ++out.dones;
      out.done_code = e.done().code();
      out.done_message = e.done().message();
    }
  }
  out.status = reader.Finish();
  return out;
}

// Many Submit calls in flight from one channel (the callback API), each counted as it ends.
class Calls {
 public:
  class Call final : public grpc::ClientReadReactor<v1::JobEvent> {
   public:
    Call(Calls* owner, v1::JobService::Stub* stub, v1::SubmitRequest request,
         const std::string& client_id)
        : owner_(owner), request_(std::move(request)) {
      context_.AddMetadata("client-id", client_id);
      stub->async()->Submit(&context_, &request_, this);
      StartRead(&event_);
      StartCall();
    }
    void Cancel() { context_.TryCancel(); }
    void OnReadDone(bool ok) override {
      if (!ok) return;
      if (event_.has_accepted()) owner_->Accepted();
      StartRead(&event_);
    }
    void OnDone(const grpc::Status& status) override { owner_->Ended(status); }

   private:
    Calls* owner_;
    grpc::ClientContext context_;
    v1::SubmitRequest request_;
    v1::JobEvent event_;
  };

  Call* Start(v1::JobService::Stub* stub, v1::SubmitRequest request, const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(std::make_unique<Call>(this, stub, std::move(request), id));
    return calls_.back().get();
  }
  // Waits until `n` calls have ended or been accepted (an accepted call is in the queue).
  bool WaitSettled(int n, std::chrono::seconds timeout = std::chrono::seconds(30)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return accepted_ + ended_ >= n; });
  }
  bool WaitEnded(int n, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return ended_ >= n; });
  }
  int accepted() {
    std::lock_guard<std::mutex> l(mu_);
    return accepted_;
  }
  int ok() {
    std::lock_guard<std::mutex> l(mu_);
    return ok_;
  }
  int refused_for(const std::string& flag) {
    std::lock_guard<std::mutex> l(mu_);
    return refused_[flag];
  }
  int ended() {
    std::lock_guard<std::mutex> l(mu_);
    return ended_;
  }

 private:
  void Accepted() {
    std::lock_guard<std::mutex> lock(mu_);
    ++accepted_;
    cv_.notify_all();
  }
  void Ended(const grpc::Status& status) {
    std::lock_guard<std::mutex> lock(mu_);
    ++ended_;
    if (status.ok()) ++ok_;
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      std::smatch found;
      static const std::regex flag("(--[a-z-]+)");
      const std::string& message = status.error_message();
      if (std::regex_search(message, found, flag)) ++refused_[found[1]];
    }
    cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Call>> calls_;
  int accepted_ = 0;
  int ended_ = 0;
  int ok_ = 0;
  std::map<std::string, int> refused_;
};

// Row 3: a Run spec declaring 40 GiB is accepted at once (its input lands in a bounded ring),
// and a SIGTERM still ends the daemon within its grace plus 2 s, the upload's client told why.
TEST(Hostile, AHugeDeclaredUploadIsAcceptedAtOnceAndSigtermStillExitsOnTime) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--max-stream-input-gib", "64",
                                        "--shutdown-grace-seconds", "1"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  auto stub = v1::JobService::NewStub(Channel(daemon));
  grpc::ClientContext context;
  std::unique_ptr<RawRun> run = stub->Run(&context);
  v1::RunRequest spec;
  *spec.mutable_spec() = Request({10, int64_t{1} << 30}, {Relu()});  // 40 GiB of float32
  const auto start = Clock::now();
  ASSERT_TRUE(run->Write(spec));
  v1::JobEvent accepted;
  ASSERT_TRUE(run->Read(&accepted)) << daemon.log();
  ASSERT_TRUE(accepted.has_accepted());
  EXPECT_LT(SecondsSince(start), 2.0);
  EXPECT_TRUE(RunSmallJob(daemon).ok()) << daemon.log();

  const auto signalled = Clock::now();
  const int code = daemon.Terminate(std::chrono::seconds(10));
  const double took = SecondsSince(signalled);
  EXPECT_EQ(code, 0) << daemon.log();
  EXPECT_LT(took, 1 + 2 + 0.5) << "grace 1 s; " << daemon.log();
  // The upload's job was stopped at the end of the grace, and its client was told so.
  Outcome out = ReadToEnd(*run);
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::UNAVAILABLE) << out.status.error_message();
  EXPECT_EQ(out.dones, 1);
  EXPECT_EQ(out.done_code, static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  EXPECT_NE(out.done_message.find("shutting down"), std::string::npos) << out.done_message;
  EXPECT_EQ(JobStatuses(daemon.log())[accepted.accepted().job_id()], "UNAVAILABLE") << daemon.log();
}

// Row 4: one client queueing 1,030 tiny high-priority jobs is refused beyond its own limit,
// another client's jobs of every priority are accepted, and in the high-priority lane the
// other client's job runs after at most one job of the flood.
TEST(Hostile, OneClientsFloodRefusesOnlyThatClientAndOthersKeepTheirTurn) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--streams-per-priority", "1"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  auto channel = Channel(daemon);
  auto stub = v1::JobService::NewStub(channel);
  Calls blocker_calls;
  Calls::Call* blocker =
      blocker_calls.Start(stub.get(), CostlyRequest(1, v1::PRIORITY_HIGH), "flood");
  ASSERT_TRUE(blocker_calls.WaitSettled(1));
  ASSERT_EQ(blocker_calls.accepted(), 1);

  Calls flood;
  constexpr int kFlood = 1030;
  const std::string tiny = AsBytes(std::vector<float>{1.0f});
  for (int i = 0; i < kFlood; ++i) {
    flood.Start(stub.get(), Request({1}, {Relu()}, tiny, v1::PRIORITY_HIGH), "flood");
  }
  ASSERT_TRUE(flood.WaitSettled(kFlood));
  // The blocker holds one of the client's 256 jobs (gpupiped --max-client-jobs).
  EXPECT_EQ(flood.accepted(), 255);
  EXPECT_EQ(flood.refused_for("--max-client-jobs"), kFlood - 255);

  client::ClientOptions other_options;
  other_options.client_id = "other";
  auto other = client::JobClient::Create(daemon.target(), other_options);
  ASSERT_TRUE(other.ok());
  absl::StatusOr<client::JobResult> high_result = absl::UnknownError("not run");
  std::thread high([&] {
    high_result = (*other)->Submit(Request({1}, {Relu()}, tiny, v1::PRIORITY_HIGH));
  });
  // The other levels' lanes are free: the other client's jobs there run at once.
  for (v1::Priority p : {v1::PRIORITY_LOW, v1::PRIORITY_NORMAL}) {
    const auto start = Clock::now();
    absl::StatusOr<client::JobResult> r = (*other)->Submit(Request({1}, {Relu()}, tiny, p));
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_LT(SecondsSince(start), 5.0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the high job is queued
  EXPECT_EQ(flood.ok(), 0) << "the flood ran while its blocker held the lane";
  blocker->Cancel();
  high.join();
  ASSERT_TRUE(high_result.ok()) << high_result.status();
  ASSERT_TRUE(flood.WaitEnded(kFlood));
  EXPECT_EQ(flood.ok(), 255);
  // Round-robin between the two clients in the one high-priority lane: at most one flood job
  // ran before the other client's. Each job's log line names the lane run it was part of
  // (lane_run: runs numbered in the order they took their lanes; a batch is one run, its jobs
  // logged in their order in it); the log's own order is not the lanes', since several
  // threads hand results over.
  const std::string other_id = high_result->accepted.job_id();
  ASSERT_TRUE(daemon.WaitForLog("job " + other_id + " OK")) << daemon.log();
  const auto lane_run = [](absl::string_view line) -> int64_t {
    const size_t at = line.find(" lane_run=");
    int64_t run = -1;
    if (at == absl::string_view::npos ||
        !absl::SimpleAtoi(line.substr(at + 10, line.find(' ', at + 10) - at - 10), &run)) {
      return -1;
    }
    return run;
  };
  int64_t other_run = -1;
  for (absl::string_view line : absl::StrSplit(daemon.log(), '\n')) {
    if (absl::StrContains(line, "job " + other_id + " OK")) other_run = lane_run(line);
  }
  ASSERT_GT(other_run, 0) << daemon.log();
  int flood_ok_before_other = 0;
  bool other_seen = false;
  for (absl::string_view line : absl::StrSplit(daemon.log(), '\n')) {
    if (absl::StrContains(line, "job " + other_id + " OK")) other_seen = true;
    if (!absl::StrContains(line, " OK ") || absl::StrContains(line, "/other\"")) continue;
    const int64_t run = lane_run(line);
    ASSERT_GT(run, 0) << line;
    if (run < other_run || (run == other_run && !other_seen)) ++flood_ok_before_other;
  }
  EXPECT_LE(flood_ok_before_other, 1) << daemon.log();
  ASSERT_TRUE(blocker_calls.WaitEnded(1));
  EXPECT_TRUE(RunSmallJob(daemon).ok());
}

// Row 5: requests cheap to send and costly to run are refused or bounded.
TEST(Hostile, CostlyRequestsAreRefusedOrBoundedAndTheDaemonServesOn) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  auto client = client::JobClient::Create(daemon.target());
  ASSERT_TRUE(client.ok());
  {
    SCOPED_TRACE("histogram(bins=65536) in chunks of 1 byte");
    std::vector<float> x = RandomFloats(1 << 20, FreshSeed(), 0.0f, 1.0f);
    v1::Op histogram;
    histogram.mutable_histogram()->set_bins(65536);
    histogram.mutable_histogram()->set_lo(0);
    histogram.mutable_histogram()->set_hi(1);
    v1::SubmitRequest r = Request({1 << 20}, {histogram}, AsBytes(x));
    r.mutable_options()->set_chunk_bytes(1);
    const auto start = Clock::now();
    absl::StatusOr<client::JobResult> got = (*client)->Submit(r);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_LT(SecondsSince(start), 10.0);
    const std::string& counts = got->output.data();
    ASSERT_EQ(counts.size(), 65536u * 8);
    int64_t total = 0;
    for (size_t i = 0; i < counts.size(); i += 8) {
      int64_t c;
      std::memcpy(&c, counts.data() + i, 8);
      total += c;
    }
    EXPECT_EQ(total, 1 << 20);
  }
  {
    SCOPED_TRACE("64 convolutions of 1024 taps on 8 KiB");
    std::vector<v1::Op> ops(64, Convolve(1024));
    const auto start = Clock::now();
    absl::StatusOr<client::JobResult> got =
        (*client)->Submit(Request({2048}, ops, std::string(8192, '\0')));
    EXPECT_EQ(got.status().code(), absl::StatusCode::kResourceExhausted) << got.status();
    EXPECT_NE(got.status().message().find("--max-work-per-byte"), std::string::npos);
    EXPECT_LT(SecondsSince(start), 2.0);
  }
  EXPECT_TRUE(RunSmallJob(daemon).ok());
}

// Row 5, continued: without the work limit, such a job still ends at its deadline or its
// cancel within milliseconds of work, as the log says.
TEST(Hostile, ACostlyJobEndsAtItsDeadlineOrCancelAndTheLogSaysWhy) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--max-work-per-byte", "0"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  std::vector<v1::Op> ops(64, Convolve(1024));
  const v1::SubmitRequest costly = Request({2048}, ops, std::string(8192, '\0'));
  auto stub = v1::JobService::NewStub(Channel(daemon));
  {
    SCOPED_TRACE("deadline");
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    const auto start = Clock::now();
    auto reader = stub->Submit(&context, costly);
    Outcome out = ReadToEnd(*reader);
    EXPECT_EQ(out.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    ASSERT_FALSE(out.job_id.empty());
    EXPECT_TRUE(daemon.WaitForLog("job " + out.job_id + " DEADLINE_EXCEEDED",
                                  std::chrono::milliseconds(1500)))
        << SecondsSince(start) << " s\n"
        << daemon.log();
  }
  {
    SCOPED_TRACE("cancel");
    grpc::ClientContext context;
    auto reader = stub->Submit(&context, costly);
    v1::JobEvent accepted;
    ASSERT_TRUE(reader->Read(&accepted));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    context.TryCancel();
    const auto cancelled = Clock::now();
    ReadToEnd(*reader);
    EXPECT_TRUE(daemon.WaitForLog("job " + accepted.accepted().job_id() + " CANCELLED",
                                  std::chrono::milliseconds(1000)))
        << SecondsSince(cancelled) << " s\n"
        << daemon.log();
  }
  EXPECT_TRUE(RunSmallJob(daemon).ok());
}

// Row 6: SIGTERM during a job of tens of seconds of CPU: the daemon exits within its grace
// plus 2 s, and the job's client hears UNAVAILABLE with the reason.
TEST(Hostile, SigtermDuringACostlyJobExitsWithinTheGrace) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--shutdown-grace-seconds", "3"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  auto stub = v1::JobService::NewStub(Channel(daemon));
  grpc::ClientContext context;
  auto reader = stub->Submit(&context, CostlyRequest(8));
  v1::JobEvent accepted;
  ASSERT_TRUE(reader->Read(&accepted)) << daemon.log();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto signalled = Clock::now();
  const int code = daemon.Terminate(std::chrono::seconds(30));
  const double took = SecondsSince(signalled);
  EXPECT_EQ(code, 0) << daemon.log();
  EXPECT_LT(took, 3 + 2) << daemon.log();
  EXPECT_GE(took, 2.9) << "the job had its grace";
  Outcome out = ReadToEnd(*reader);
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::UNAVAILABLE) << out.status.error_message();
  EXPECT_EQ(out.done_code, static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  EXPECT_NE(out.done_message.find("--shutdown-grace-seconds"), std::string::npos)
      << out.done_message;
}

// Row 7: SIGTERM while jobs finish, again and again: every job the log calls OK reached its
// client as OK with its whole result, and the daemon exits at once.
TEST(Hostile, SigtermAsJobsFinishLosesNoResult) {
  const std::vector<float> x = RandomFloats(4 << 20, FreshSeed());  // 16 MiB
  const std::string bytes = AsBytes(x);
  for (int round = 0; round < 8; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu"});
    ASSERT_NE(daemon.port(), 0) << daemon.error();
    auto client = client::JobClient::Create(daemon.target());
    ASSERT_TRUE(client.ok());
    constexpr int kJobs = 3;
    std::vector<absl::StatusOr<client::JobResult>> results(kJobs, absl::UnknownError("unset"));
    std::vector<std::string> ids(kJobs);
    std::atomic<int> accepted{0};
    std::vector<std::thread> threads;
    for (int j = 0; j < kJobs; ++j) {
      threads.emplace_back([&, j] {
        results[j] =
            (*client)->Submit(Request({4 << 20}, {Relu()}, bytes), [&, j](const v1::JobEvent& e) {
              if (e.has_accepted()) {
                ids[j] = e.accepted().job_id();
                ++accepted;
              }
            });
      });
    }
    while (accepted < kJobs) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(round * 10));
    const auto signalled = Clock::now();
    EXPECT_EQ(daemon.Terminate(), 0);
    EXPECT_LT(SecondsSince(signalled), 10 + 2);
    for (std::thread& t : threads) t.join();
    const std::map<std::string, std::string> logged = JobStatuses(daemon.log());
    for (int j = 0; j < kJobs; ++j) {
      ASSERT_EQ(logged.count(ids[j]), 1u) << daemon.log();
      EXPECT_EQ(logged.at(ids[j]), "OK") << "accepted jobs finish within the grace";
      ASSERT_TRUE(results[j].ok()) << results[j].status() << "\n" << daemon.log();
      EXPECT_TRUE(results[j]->output.data() == AsBytes([&] {
                    std::vector<float> y = x;
                    for (float& v : y) v = v < 0 ? 0.0f : v;
                    return y;
                  }()));
    }
  }
}

// Row 9: a client that cancels its upload is logged as CANCELLED, every time.
TEST(Hostile, ACancelledUploadIsLoggedAsCancelledEveryTime) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  auto stub = v1::JobService::NewStub(Channel(daemon));
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) {
    grpc::ClientContext context;
    std::unique_ptr<RawRun> run = stub->Run(&context);
    v1::RunRequest m;
    *m.mutable_spec() = Request({1 << 20}, {Relu()});
    ASSERT_TRUE(run->Write(m));
    m.set_data(std::string(64 << 10, '\0'));
    ASSERT_TRUE(run->Write(m));
    v1::JobEvent accepted;
    if (!run->Read(&accepted)) {
      const grpc::Status status = run->Finish();
      FAIL() << "run " << i << " ended before Accepted: " << status.error_code() << " "
             << status.error_message();
    }
    ids.push_back(accepted.accepted().job_id());
    context.TryCancel();
    ReadToEnd(*run);
    // The daemon hears of the cancel on its own time; until it has, the upload still counts
    // against the client's --max-client-uploads, which the next call would then find full.
    EXPECT_TRUE(daemon.WaitForLog("job " + ids.back() + " CANCELLED")) << daemon.log();
  }
  EXPECT_EQ(daemon.log().find("INVALID_ARGUMENT"), std::string::npos) << daemon.log();
  EXPECT_TRUE(RunSmallJob(daemon).ok());
}

// A Submit call of 16 MiB of results that reads its Accepted and nothing more, on a channel
// whose receive window does not grow: its job soon waits for the reader, holding its lane.
struct StalledReader {
  std::unique_ptr<v1::JobService::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader;
  std::string job_id;
};
std::unique_ptr<StalledReader> StallAReader(const DaemonProcess& daemon) {
  auto call = std::make_unique<StalledReader>();
  call->stub = v1::JobService::NewStub(Channel(daemon, /*grow_window=*/false));
  call->reader = call->stub->Submit(&call->context,
                                    Request({4 << 20}, {Relu()}, std::string(16 << 20, '\0')));
  v1::JobEvent accepted;
  EXPECT_TRUE(call->reader->Read(&accepted));
  call->job_id = accepted.accepted().job_id();
  return call;
}

// A client that stops reading its results holds its lane only until the reader idle timeout.
TEST(Hostile, AClientThatStopsReadingLosesItsLaneAtTheIdleTimeout) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--streams-per-priority", "1",
                                        "--reader-idle-timeout-seconds", "1"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  std::unique_ptr<StalledReader> stalled = StallAReader(daemon);
  const auto start = Clock::now();
  ASSERT_TRUE(daemon.WaitForLog("job " + stalled->job_id + " DEADLINE_EXCEEDED",
                                std::chrono::seconds(5)))
      << daemon.log();
  EXPECT_GE(SecondsSince(start), 0.5);
  EXPECT_NE(daemon.log().find("--reader-idle-timeout-seconds"), std::string::npos);
  // The normal-priority lane it held serves the next job.
  EXPECT_TRUE(RunSmallJob(daemon).ok());
}

// While another job waits for the lane, a client that stops reading loses it sooner: after
// --reader-idle-busy-seconds, not the idle timeout.
TEST(Hostile, AClientThatStopsReadingLosesItsLaneSoonerWhenAJobWaitsForIt) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--streams-per-priority", "1",
                                        "--reader-idle-timeout-seconds", "600",
                                        "--reader-idle-busy-seconds", "1"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  std::unique_ptr<StalledReader> stalled = StallAReader(daemon);
  const auto start = Clock::now();
  EXPECT_TRUE(RunSmallJob(daemon).ok());
  EXPECT_LT(SecondsSince(start), 5.0);
  ASSERT_TRUE(daemon.WaitForLog("job " + stalled->job_id + " DEADLINE_EXCEEDED",
                                std::chrono::seconds(5)))
      << daemon.log();
  EXPECT_NE(daemon.log().find("--reader-idle-busy-seconds"), std::string::npos);
}

// A client that sends jobs and reads none of their results (its receive window never opens)
// once pinned the results in the daemon's memory until each call's reader idle timeout: the
// jobs were done, so --max-client-jobs no longer counted them. Its unread results are bounded
// now (--max-client-unread-mib): further jobs are refused, marked as not accepted, the
// daemon's memory stays bounded, and other clients are served.
TEST(Hostile, AClientThatReadsNoResultsCannotPinTheDaemonsMemory) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--max-client-unread-mib", "8",
                                        "--reader-idle-timeout-seconds", "60"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  auto stub = v1::JobService::NewStub(Channel(daemon, /*grow_window=*/false));
  auto watcher = v1::JobService::NewStub(Channel(daemon));
  const auto unread_and_refused = [&](int64_t* unread, int64_t* refused) {
    grpc::ClientContext context;
    v1::StatsResponse stats;
    ASSERT_TRUE(watcher->GetStats(&context, v1::StatsRequest(), &stats).ok());
    for (const v1::PoolStats& pool : stats.pools()) {
      if (pool.name() == "unread_results") *unread = pool.used_bytes();
    }
    const auto it = stats.rejected().find("max-client-unread-mib");
    *refused = it == stats.rejected().end() ? 0 : it->second;
  };
  const int64_t rss_before = ProcStatusBytes(daemon.pid(), "VmRSS");

  struct Unread {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader;
  };
  std::vector<std::unique_ptr<Unread>> calls;
  constexpr int kCalls = 64;
  constexpr int64_t kMib = 1 << 20;
  int64_t unread = 0;
  int64_t refused = 0;
  for (int i = 0; i < kCalls; ++i) {
    auto call = std::make_unique<Unread>();
    call->reader = stub->Submit(&call->context,
                                Request({kMib / 4}, {Relu()}, std::string(kMib, '\0')));
    calls.push_back(std::move(call));
    // One call at a time: each is either held whole or refused before the next is sent.
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    do {
      unread_and_refused(&unread, &refused);
    } while (unread / kMib + refused < i + 1 && Clock::now() < deadline);
    ASSERT_EQ(unread / kMib + refused, i + 1) << "call " << i;
  }
  EXPECT_EQ(unread, 8 * kMib);
  EXPECT_EQ(refused, kCalls - 8);
  // Without the bound all 64 results would be held, at more than twice their size; with it the
  // daemon grows by less than the 64 results themselves.
  const int64_t rss_after = ProcStatusBytes(daemon.pid(), "VmRSS");
  EXPECT_LT(rss_after - rss_before, kCalls * kMib) << rss_before << " -> " << rss_after;
  // A refused call says why and that its job never ran.
  Outcome last = ReadToEnd(*calls.back()->reader);
  EXPECT_EQ(last.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(last.status.error_message().find("--max-client-unread-mib"), std::string::npos)
      << last.status.error_message();
  const auto& trailers = calls.back()->context.GetServerTrailingMetadata();
  ASSERT_EQ(trailers.count("gpupipe-accepted"), 1u);
  EXPECT_EQ(trailers.find("gpupipe-accepted")->second, "0");

  client::ClientOptions other_options;
  other_options.client_id = "other";
  auto other = client::JobClient::Create(daemon.target(), other_options);
  ASSERT_TRUE(other.ok());
  absl::StatusOr<client::JobResult> served =
      (*other)->Submit(Request({3}, {Relu()}, AsBytes(std::vector<float>{-1, 0.5f, 2})));
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(AsFloats(served->output.data()), (std::vector<float>{0, 0.5f, 2}));

  // Once its calls end, the client is served again and nothing is left held.
  for (auto& call : calls) call->context.TryCancel();
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  do {
    unread_and_refused(&unread, &refused);
  } while (unread != 0 && Clock::now() < deadline);
  EXPECT_EQ(unread, 0);
  EXPECT_TRUE(RunSmallJob(daemon).ok());
}

// A raw TCP connection to the daemon: what a client that speaks little or no HTTP/2 sees.
class RawConnection {
 public:
  explicit RawConnection(int port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval limit{15, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  }
  ~RawConnection() {
    if (fd_ >= 0) close(fd_);
  }
  bool connected() const { return connected_; }

  // The client preface and an empty SETTINGS frame: a connection that then makes no call.
  void SendPreface() {
    static const char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    Send(std::string(kPreface, sizeof(kPreface) - 1) + Frame(4, 0, ""));
  }

  // Reads frames, acknowledging SETTINGS and PINGs when `answer`, until the server closes the
  // connection (true) or 15 s pass (false). `*goaway` says whether a GOAWAY frame came first.
  bool ReadUntilClosed(bool* goaway, bool answer = true) {
    std::string buf;
    char chunk[4096];
    for (;;) {
      const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
      if (n == 0) return true;
      if (n < 0) return false;
      buf.append(chunk, static_cast<size_t>(n));
      while (buf.size() >= 9) {
        const size_t length = (static_cast<uint8_t>(buf[0]) << 16) |
                              (static_cast<uint8_t>(buf[1]) << 8) | static_cast<uint8_t>(buf[2]);
        if (buf.size() < 9 + length) break;
        const int type = static_cast<uint8_t>(buf[3]);
        const int flags = static_cast<uint8_t>(buf[4]);
        const std::string payload = buf.substr(9, length);
        buf.erase(0, 9 + length);
        if (type == 7) *goaway = true;
        if (answer && type == 4 && !(flags & 1)) Send(Frame(4, 1, ""));       // SETTINGS ack
        if (answer && type == 6 && !(flags & 1)) Send(Frame(6, 1, payload));  // PING ack
      }
    }
  }

 private:
  static std::string Frame(int type, int flags, const std::string& payload) {
    std::string f(9, '\0');
    f[0] = static_cast<char>(payload.size() >> 16);
    f[1] = static_cast<char>(payload.size() >> 8);
    f[2] = static_cast<char>(payload.size());
    f[3] = static_cast<char>(type);
    f[4] = static_cast<char>(flags);
    return f + payload;
  }
  void Send(const std::string& bytes) {
    if (send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) < 0) connected_ = false;
  }

  int fd_;
  bool connected_ = false;
};

// A connection with no call is told to go away and closed after --max-connection-idle-seconds.
TEST(Hostile, AnIdleConnectionIsClosed) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--max-connection-idle-seconds", "1"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  RawConnection connection(daemon.port());
  ASSERT_TRUE(connection.connected());
  connection.SendPreface();
  const auto start = Clock::now();
  bool goaway = false;
  EXPECT_TRUE(connection.ReadUntilClosed(&goaway)) << "the idle connection stayed open";
  EXPECT_TRUE(goaway);
  EXPECT_GE(SecondsSince(start), 0.9);
  EXPECT_LT(SecondsSince(start), 4.0);
  EXPECT_TRUE(RunSmallJob(daemon).ok());
}

// A TCP connection that never speaks HTTP/2 is dropped after --handshake-timeout-seconds.
TEST(Hostile, AConnectionThatNeverHandshakesIsDropped) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--handshake-timeout-seconds", "1"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  RawConnection connection(daemon.port());
  ASSERT_TRUE(connection.connected());
  const auto start = Clock::now();
  bool goaway = false;
  EXPECT_TRUE(connection.ReadUntilClosed(&goaway, /*answer=*/false))
      << "the silent connection stayed open";
  EXPECT_GE(SecondsSince(start), 0.9);
  EXPECT_LT(SecondsSince(start), 4.0);
  EXPECT_TRUE(RunSmallJob(daemon).ok());
}

// A client process that stops answering (SIGSTOP) mid-call is found by keepalive pings and
// its job ends long before any idle timeout would end it.
TEST(Hostile, KeepaliveFindsAClientThatStoppedAnswering) {
  char dir_template[] = "/tmp/gpupipe-hostile-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string input = dir + "/x.npy";
  // A float32 .npy of 16 MiB: its result is far more than the client's windows hold.
  const absl::Status written =
      client::WriteNpy(input, {v1::DTYPE_FLOAT32, {4 << 20}, std::string(16 << 20, '\0')});
  ASSERT_TRUE(written.ok()) << written;
  DaemonProcess daemon(
      DaemonBinary(),
      {"--backend", "cpu", "--keepalive-seconds", "1", "--keepalive-timeout-seconds", "1",
       "--upload-idle-timeout-seconds", "0", "--reader-idle-timeout-seconds", "0"});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  std::string taps;
  for (int i = 0; i < 1024; ++i) taps += i == 0 ? "0.001" : ", 0.001";
  ChildProcess cli({CliBinary(), "--target", daemon.target(), "submit", "--input", input, "--ops",
                    "convolve(taps=[" + taps + "], mode=same)", "--stream", "always", "--output",
                    dir + "/y.npy"});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // mid-job: seconds of CPU
  cli.Signal(SIGSTOP);
  const auto stopped = Clock::now();
  EXPECT_TRUE(daemon.WaitForLog(" CANCELLED ", std::chrono::seconds(8))) << daemon.log();
  EXPECT_LT(SecondsSince(stopped), 8.0);
  cli.Signal(SIGKILL);
  cli.Wait();
  std::system(("rm -rf " + dir).c_str());
  EXPECT_TRUE(RunSmallJob(daemon).ok());
}

}  // namespace
}  // namespace gpupipe::testing
