#include "client/result_assembler.h"

#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpupipe {
namespace client {
namespace {

using ::testing::HasSubstr;

v1::JobEvent Accepted(v1::DType dtype, std::vector<int64_t> shape) {
  v1::JobEvent e;
  e.set_job_id("j1");
  e.mutable_accepted()->set_job_id("j1");
  e.mutable_accepted()->set_backend("cpu");
  e.mutable_accepted()->set_output_dtype(dtype);
  for (int64_t d : shape) e.mutable_accepted()->add_output_shape(d);
  return e;
}

v1::JobEvent Chunk(int64_t offset, std::string data) {
  v1::JobEvent e;
  e.mutable_chunk()->set_offset(offset);
  e.mutable_chunk()->set_data(std::move(data));
  return e;
}

v1::JobEvent Timing(double total_us) {
  v1::JobEvent e;
  e.mutable_timing()->set_total_us(total_us);
  e.mutable_timing()->set_kernels(2);
  return e;
}

v1::JobEvent Done(int code = 0, std::string message = "") {
  v1::JobEvent e;
  e.mutable_done()->set_code(code);
  e.mutable_done()->set_message(std::move(message));
  return e;
}

v1::JobEvent Plan(int kernels = 2) {
  v1::JobEvent e;
  v1::Plan* plan = e.mutable_plan();
  for (int i = 0; i < kernels; ++i) {
    v1::PlannedKernel* k = plan->add_kernels();
    k->set_index(i);
    k->set_name(i == 0 ? "softmax.stats" : "softmax.apply");
  }
  if (kernels > 1) {
    v1::PlanEdge* edge = plan->add_edges();
    edge->set_from(0);
    edge->set_to(1);
    edge->set_kind("pdl");
  }
  plan->set_launch("pdl");
  plan->set_staging("direct");
  return e;
}

TEST(ResultAssemblerTest, AssemblesChunksInOrder) {
  ResultAssembler a;
  ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {2, 2})).ok());
  ASSERT_TRUE(a.Add(Chunk(0, std::string(6, 'a'))).ok());
  ASSERT_TRUE(a.Add(Chunk(6, std::string(10, 'b'))).ok());
  ASSERT_TRUE(a.Add(Timing(12.5)).ok());
  ASSERT_TRUE(a.Add(Done()).ok());
  EXPECT_TRUE(a.done());
  absl::StatusOr<JobResult> r = a.Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->accepted.job_id(), "j1");
  EXPECT_EQ(r->output.dtype(), v1::DTYPE_FLOAT32);
  EXPECT_THAT(r->output.shape(), ::testing::ElementsAre(2, 2));
  EXPECT_EQ(r->output.data(), std::string(6, 'a') + std::string(10, 'b'));
  EXPECT_TRUE(r->has_timing);
  EXPECT_EQ(r->timing.total_us(), 12.5);
}

TEST(ResultAssemblerTest, KeepsThePlan) {
  ResultAssembler a;
  ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {1})).ok());
  ASSERT_TRUE(a.Add(Plan()).ok());
  ASSERT_TRUE(a.Add(Chunk(0, "abcd")).ok());
  ASSERT_TRUE(a.Add(Timing(3)).ok());
  ASSERT_TRUE(a.Add(Done()).ok());
  absl::StatusOr<JobResult> r = a.Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->has_plan);
  EXPECT_FALSE(r->dry_run);
  ASSERT_EQ(r->plan.kernels_size(), 2);
  EXPECT_EQ(r->plan.kernels(1).name(), "softmax.apply");
  EXPECT_EQ(r->plan.edges(0).kind(), "pdl");
  EXPECT_EQ(r->output.data(), "abcd");
}

TEST(ResultAssemblerTest, PlanIsOptional) {
  ResultAssembler a;
  ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {1})).ok());
  ASSERT_TRUE(a.Add(Chunk(0, "abcd")).ok());
  ASSERT_TRUE(a.Add(Done()).ok());
  absl::StatusOr<JobResult> r = a.Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_plan);
  EXPECT_EQ(r->plan.kernels_size(), 0);
}

TEST(ResultAssemblerTest, PlanOrderViolations) {
  {
    ResultAssembler a;
    EXPECT_THAT(a.Add(Plan()).message(), HasSubstr("Plan before Accepted"));
  }
  {
    ResultAssembler a;
    ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {1})).ok());
    ASSERT_TRUE(a.Add(Plan()).ok());
    absl::Status s = a.Add(Plan());
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(s.message(), HasSubstr("second Plan event"));
  }
  {
    ResultAssembler a;
    ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {1})).ok());
    ASSERT_TRUE(a.Add(Chunk(0, "ab")).ok());
    EXPECT_THAT(a.Add(Plan()).message(), HasSubstr("Plan after ResultChunk"));
  }
  {
    // An empty chunk still marks the start of the output.
    ResultAssembler a;
    ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {1})).ok());
    ASSERT_TRUE(a.Add(Chunk(0, "")).ok());
    EXPECT_THAT(a.Add(Plan()).message(), HasSubstr("Plan after ResultChunk"));
  }
  {
    ResultAssembler a;
    ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {0})).ok());
    ASSERT_TRUE(a.Add(Timing(1)).ok());
    EXPECT_THAT(a.Add(Plan()).message(), HasSubstr("Plan after Timing"));
  }
  {
    ResultAssembler a;
    ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {0})).ok());
    ASSERT_TRUE(a.Add(Done()).ok());
    EXPECT_THAT(a.Add(Plan()).message(), HasSubstr("event after Done"));
  }
}

TEST(ResultAssemblerTest, DryRunIsAcceptedPlanDone) {
  ResultAssembler a(/*dry_run=*/true);
  ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {64, 100})).ok());
  ASSERT_TRUE(a.Add(Plan()).ok());
  ASSERT_TRUE(a.Add(Done()).ok());
  absl::StatusOr<JobResult> r = a.Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->dry_run);
  EXPECT_TRUE(r->has_plan);
  EXPECT_FALSE(r->has_timing);
  // Shape and dtype say what the job would produce; there are no bytes.
  EXPECT_EQ(r->output.dtype(), v1::DTYPE_FLOAT32);
  EXPECT_THAT(r->output.shape(), ::testing::ElementsAre(64, 100));
  EXPECT_TRUE(r->output.data().empty());
}

TEST(ResultAssemblerTest, DryRunRejectsChunksAndNeedsAPlan) {
  {
    ResultAssembler a(/*dry_run=*/true);
    ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {1})).ok());
    ASSERT_TRUE(a.Add(Plan()).ok());
    absl::Status s = a.Add(Chunk(0, "abcd"));
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(s.message(), HasSubstr("ResultChunk in a dry run"));
  }
  {
    ResultAssembler a(/*dry_run=*/true);
    ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {1})).ok());
    ASSERT_TRUE(a.Add(Done()).ok());
    absl::StatusOr<JobResult> r = a.Finish();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(r.status().message(), HasSubstr("dry run ended without a Plan event"));
  }
  {
    // Without dry_run, a stream without chunks for a non-empty output is still short.
    ResultAssembler a;
    ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {1})).ok());
    ASSERT_TRUE(a.Add(Plan()).ok());
    ASSERT_TRUE(a.Add(Done()).ok());
    EXPECT_THAT(a.Finish().status().message(), HasSubstr("output is 0 bytes"));
  }
}

TEST(ResultAssemblerTest, EmptyAndScalarOutputs) {
  ResultAssembler empty;
  ASSERT_TRUE(empty.Add(Accepted(v1::DTYPE_FLOAT32, {0})).ok());
  ASSERT_TRUE(empty.Add(Done()).ok());
  absl::StatusOr<JobResult> r = empty.Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_timing);

  ResultAssembler scalar;
  ASSERT_TRUE(scalar.Add(Accepted(v1::DTYPE_FLOAT64, {})).ok());
  ASSERT_TRUE(scalar.Add(Chunk(0, std::string(8, 'x'))).ok());
  ASSERT_TRUE(scalar.Add(Done()).ok());
  EXPECT_TRUE(scalar.Finish().ok());
}

TEST(ResultAssemblerTest, AcceptedJobIdFallsBackToEventJobId) {
  ResultAssembler a;
  v1::JobEvent e = Accepted(v1::DTYPE_INT32, {});
  e.mutable_accepted()->clear_job_id();
  ASSERT_TRUE(a.Add(e).ok());
  ASSERT_TRUE(a.Add(Chunk(0, "1234")).ok());
  ASSERT_TRUE(a.Add(Done()).ok());
  EXPECT_EQ(a.Finish()->accepted.job_id(), "j1");
}

TEST(ResultAssemblerTest, DoneErrorKeepsCodeAndMessage) {
  ResultAssembler a;
  ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {4})).ok());
  absl::Status s = a.Add(Done(8, "device memory exhausted"));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "device memory exhausted");
  ResultAssembler b;
  EXPECT_EQ(b.Add(Done(99, "odd")).code(), absl::StatusCode::kUnknown);
}

TEST(ResultAssemblerTest, NonContiguousChunks) {
  ResultAssembler a;
  ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {4})).ok());
  ASSERT_TRUE(a.Add(Chunk(0, "abcd")).ok());
  absl::Status s = a.Add(Chunk(8, "efgh"));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("ResultChunk at offset 8, expected offset 4"));
  ResultAssembler b;
  ASSERT_TRUE(b.Add(Accepted(v1::DTYPE_FLOAT32, {4})).ok());
  ASSERT_TRUE(b.Add(Chunk(0, "abcd")).ok());
  EXPECT_THAT(b.Add(Chunk(0, "abcd")).message(), HasSubstr("at offset 0, expected offset 4"));
}

TEST(ResultAssemblerTest, ChunkOverrun) {
  ResultAssembler a;
  ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {2})).ok());
  ASSERT_TRUE(a.Add(Chunk(0, "abcd")).ok());
  EXPECT_THAT(a.Add(Chunk(4, "efghi")).message(),
              HasSubstr("ResultChunk [4, 9) overruns the 8-byte output"));
}

TEST(ResultAssemblerTest, ShortOutput) {
  ResultAssembler a;
  ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {2, 3})).ok());
  ASSERT_TRUE(a.Add(Chunk(0, "abcd")).ok());
  ASSERT_TRUE(a.Add(Done()).ok());
  absl::StatusOr<JobResult> r = a.Finish();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(),
              HasSubstr("output is 4 bytes but shape [2, 3] of float32 needs 24"));
}

TEST(ResultAssemblerTest, StreamWithoutDone) {
  ResultAssembler a;
  ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {1})).ok());
  ASSERT_TRUE(a.Add(Chunk(0, "abcd")).ok());
  EXPECT_FALSE(a.done());
  EXPECT_THAT(a.Finish().status().message(), HasSubstr("stream ended without a Done event"));
}

TEST(ResultAssemblerTest, OrderViolations) {
  {
    ResultAssembler a;
    EXPECT_THAT(a.Add(Chunk(0, "x")).message(), HasSubstr("ResultChunk before Accepted"));
  }
  {
    ResultAssembler a;
    EXPECT_THAT(a.Add(Timing(1)).message(), HasSubstr("Timing before Accepted"));
  }
  {
    ResultAssembler a;
    EXPECT_THAT(a.Add(Done()).message(), HasSubstr("Done without Accepted"));
  }
  {
    ResultAssembler a;
    ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {0})).ok());
    EXPECT_THAT(a.Add(Accepted(v1::DTYPE_FLOAT32, {0})).message(),
                HasSubstr("second Accepted event"));
  }
  {
    ResultAssembler a;
    ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {0})).ok());
    ASSERT_TRUE(a.Add(Done()).ok());
    EXPECT_THAT(a.Add(Timing(1)).message(), HasSubstr("event after Done"));
  }
}

TEST(ResultAssemblerTest, UnknownOutputDtype) {
  ResultAssembler a;
  absl::Status s = a.Add(Accepted(static_cast<v1::DType>(77), {2}));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("dtype dtype(77) is not supported"));
}

TEST(ResultAssemblerTest, UnknownEventKindsAreSkipped) {
  ResultAssembler a;
  ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {0})).ok());
  EXPECT_TRUE(a.Add(v1::JobEvent()).ok());
  ASSERT_TRUE(a.Add(Done()).ok());
  EXPECT_TRUE(a.Finish().ok());
}

// ---- with a ResultSink: the bytes are handed over, not kept --------------------------------

// Records what it is given; fails Begin, or the write after `fail_after_writes` writes, when
// asked to.
class RecordingSink : public ResultSink {
 public:
  absl::Status Begin(v1::DType output_dtype, const std::vector<int64_t>& output_shape) override {
    ++begins;
    dtype = output_dtype;
    shape = output_shape;
    return begin_error;
  }
  absl::Status Write(int64_t offset, absl::string_view data) override {
    if (static_cast<int>(writes.size()) == fail_after_writes) {
      return absl::ResourceExhaustedError("y.npy: write failed: No space left on device");
    }
    writes.emplace_back(offset, std::string(data));
    return absl::OkStatus();
  }

  int begins = 0;
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;
  std::vector<std::pair<int64_t, std::string>> writes;
  absl::Status begin_error;
  int fail_after_writes = -1;
};

using Writes = std::vector<std::pair<int64_t, std::string>>;

TEST(ResultAssemblerSinkTest, HandsChunksOverInOrderAndKeepsNoData) {
  RecordingSink sink;
  ResultAssembler a(/*dry_run=*/false, &sink);
  ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {2, 2})).ok());
  EXPECT_EQ(sink.begins, 1);
  EXPECT_EQ(sink.dtype, v1::DTYPE_FLOAT32);
  EXPECT_THAT(sink.shape, ::testing::ElementsAre(2, 2));
  EXPECT_TRUE(sink.writes.empty());
  ASSERT_TRUE(a.Add(Plan()).ok());
  ASSERT_TRUE(a.Add(Chunk(0, std::string(6, 'a'))).ok());
  ASSERT_TRUE(a.Add(Chunk(6, "")).ok());  // empty: not passed on
  ASSERT_TRUE(a.Add(Chunk(6, std::string(10, 'b'))).ok());
  ASSERT_TRUE(a.Add(Timing(12.5)).ok());
  ASSERT_TRUE(a.Add(Done()).ok());
  EXPECT_EQ(sink.writes, (Writes{{0, std::string(6, 'a')}, {6, std::string(10, 'b')}}));
  absl::StatusOr<JobResult> r = a.Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  // Everything but the bytes, as without a sink.
  EXPECT_EQ(r->accepted.job_id(), "j1");
  EXPECT_EQ(r->output.dtype(), v1::DTYPE_FLOAT32);
  EXPECT_THAT(r->output.shape(), ::testing::ElementsAre(2, 2));
  EXPECT_TRUE(r->output.data().empty());
  EXPECT_EQ(r->output.data().capacity(), std::string().capacity()) << "nothing reserved";
  EXPECT_TRUE(r->has_plan);
  EXPECT_EQ(r->timing.total_us(), 12.5);
  EXPECT_EQ(sink.begins, 1);
}

TEST(ResultAssemblerSinkTest, ProtocolErrorsAreTheSameAndReachNoSink) {
  struct Case {
    const char* name;
    std::vector<v1::JobEvent> events;  // the last one is refused
    const char* error;
  };
  const std::vector<Case> cases = {
      {"gap", {Accepted(v1::DTYPE_FLOAT32, {4}), Chunk(0, "abcd"), Chunk(8, "efgh")},
       "ResultChunk at offset 8, expected offset 4"},
      {"repeat", {Accepted(v1::DTYPE_FLOAT32, {4}), Chunk(0, "abcd"), Chunk(0, "abcd")},
       "ResultChunk at offset 0, expected offset 4"},
      {"overrun", {Accepted(v1::DTYPE_FLOAT32, {2}), Chunk(0, "abcd"), Chunk(4, "efghi")},
       "ResultChunk [4, 9) overruns the 8-byte output"},
      {"before Accepted", {Chunk(0, "abcd")}, "ResultChunk before Accepted"},
      {"after Done", {Accepted(v1::DTYPE_FLOAT32, {1}), Chunk(0, "abcd"), Done(), Chunk(4, "x")},
       "event after Done"},
      {"second Accepted", {Accepted(v1::DTYPE_FLOAT32, {1}), Accepted(v1::DTYPE_FLOAT32, {1})},
       "second Accepted event"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    RecordingSink sink;
    ResultAssembler a(/*dry_run=*/false, &sink);
    for (size_t i = 0; i + 1 < c.events.size(); ++i) ASSERT_TRUE(a.Add(c.events[i]).ok()) << i;
    const size_t writes_before = sink.writes.size();
    absl::Status s = a.Add(c.events.back());
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(s.message(), HasSubstr(c.error));
    EXPECT_EQ(sink.writes.size(), writes_before) << "a refused chunk must not be written";
    EXPECT_LE(sink.begins, 1);
  }
}

TEST(ResultAssemblerSinkTest, ShortOutputAndMissingDoneFailFinish) {
  RecordingSink sink;
  ResultAssembler a(/*dry_run=*/false, &sink);
  ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {2, 3})).ok());
  ASSERT_TRUE(a.Add(Chunk(0, "abcd")).ok());
  EXPECT_THAT(a.Finish().status().message(), HasSubstr("stream ended without a Done event"));
  ASSERT_TRUE(a.Add(Done()).ok());
  absl::StatusOr<JobResult> r = a.Finish();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(),
              HasSubstr("output is 4 bytes but shape [2, 3] of float32 needs 24"));
}

TEST(ResultAssemblerSinkTest, DoneErrorKeepsCodeAndMessage) {
  RecordingSink sink;
  ResultAssembler a(/*dry_run=*/false, &sink);
  ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {4})).ok());
  ASSERT_TRUE(a.Add(Chunk(0, "abcd")).ok());
  absl::Status s = a.Add(Done(8, "device memory exhausted"));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "device memory exhausted");
}

TEST(ResultAssemblerSinkTest, SinkErrorsAreReturnedUnchanged) {
  {
    RecordingSink sink;
    sink.begin_error = absl::PermissionDeniedError("y.npy: cannot open for writing");
    ResultAssembler a(/*dry_run=*/false, &sink);
    EXPECT_EQ(a.Add(Accepted(v1::DTYPE_FLOAT32, {1})), sink.begin_error);
  }
  {
    RecordingSink sink;
    sink.fail_after_writes = 1;
    ResultAssembler a(/*dry_run=*/false, &sink);
    ASSERT_TRUE(a.Add(Accepted(v1::DTYPE_FLOAT32, {2})).ok());
    ASSERT_TRUE(a.Add(Chunk(0, "abcd")).ok());
    absl::Status s = a.Add(Chunk(4, "efgh"));
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(s.message(), "y.npy: write failed: No space left on device");
  }
}

TEST(ResultAssemblerSinkTest, DryRunAndEmptyOutputs) {
  // A dry run has no output to take: the sink is not begun.
  RecordingSink dry_sink;
  ResultAssembler dry(/*dry_run=*/true, &dry_sink);
  ASSERT_TRUE(dry.Add(Accepted(v1::DTYPE_FLOAT32, {64, 100})).ok());
  ASSERT_TRUE(dry.Add(Plan()).ok());
  ASSERT_TRUE(dry.Add(Done()).ok());
  EXPECT_TRUE(dry.Finish().ok());
  EXPECT_EQ(dry_sink.begins, 0);

  // An empty output is begun (its file gets a header) and written nothing.
  RecordingSink empty_sink;
  ResultAssembler empty(/*dry_run=*/false, &empty_sink);
  ASSERT_TRUE(empty.Add(Accepted(v1::DTYPE_FLOAT32, {0, 3})).ok());
  ASSERT_TRUE(empty.Add(Done()).ok());
  EXPECT_TRUE(empty.Finish().ok());
  EXPECT_EQ(empty_sink.begins, 1);
  EXPECT_TRUE(empty_sink.writes.empty());
}

}  // namespace
}  // namespace client
}  // namespace gpupipe

namespace gpupipe {
namespace client {
namespace {

v1::JobEvent CompleteEvent(bool with_done) {
  v1::JobEvent e;
  e.set_job_id("j");
  v1::CompleteJob* job = e.mutable_complete();
  job->mutable_accepted()->set_output_dtype(v1::DTYPE_FLOAT32);
  job->mutable_accepted()->add_output_shape(1);
  job->mutable_chunk()->set_data(std::string(4, '\0'));
  job->mutable_timing()->set_total_us(3);
  if (with_done) job->mutable_done();
  return e;
}

TEST(ResultAssemblerCompact, ACompleteJobIsTheEventsItStandsFor) {
  ResultAssembler assembler(false);
  ASSERT_TRUE(assembler.Add(CompleteEvent(true)).ok());
  absl::StatusOr<JobResult> result = assembler.Finish();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->output.data().size(), 4u);
  EXPECT_EQ(result->accepted.job_id(), "j");
  EXPECT_EQ(result->timing.total_us(), 3);
}

TEST(ResultAssemblerCompact, ACompleteJobMustStandAloneAndEndTheJob) {
  ResultAssembler without_done(false);
  EXPECT_EQ(without_done.Add(CompleteEvent(false)).code(), absl::StatusCode::kDataLoss);
  ResultAssembler after_accepted(false);
  v1::JobEvent accepted;
  *accepted.mutable_accepted() = CompleteEvent(true).complete().accepted();
  ASSERT_TRUE(after_accepted.Add(accepted).ok());
  EXPECT_EQ(after_accepted.Add(CompleteEvent(true)).code(), absl::StatusCode::kDataLoss);
}

// AddComplete against Add of the same job as a JobEvent: the same verdict, message and result,
// for good jobs and for every breach a CompleteJob can carry.
TEST(ResultAssemblerCompact, AddCompleteMovesWhatAddWouldCopyAndJudgesTheSame) {
  struct Case {
    const char* name;
    bool dry_run;
    std::function<void(v1::CompleteJob*)> edit;
  };
  const std::vector<Case> cases = {
      {"whole", false, [](v1::CompleteJob*) {}},
      {"no chunk for an empty output", false,
       [](v1::CompleteJob* j) {
         j->mutable_accepted()->set_output_shape(0, 0);
         j->clear_chunk();
       }},
      {"a failed job", false,
       [](v1::CompleteJob* j) {
         j->clear_chunk();
         j->mutable_done()->set_code(8);
         j->mutable_done()->set_message("full");
       }},
      {"without Done", false, [](v1::CompleteJob* j) { j->clear_done(); }},
      {"a chunk past the output", false,
       [](v1::CompleteJob* j) { j->mutable_chunk()->mutable_data()->append("more"); }},
      {"a chunk at the wrong offset", false,
       [](v1::CompleteJob* j) { j->mutable_chunk()->set_offset(4); }},
      {"a short output", false,
       [](v1::CompleteJob* j) { j->mutable_chunk()->mutable_data()->resize(2); }},
      {"a chunk in a dry run", true, [](v1::CompleteJob*) {}},
      {"no Accepted", false, [](v1::CompleteJob* j) { j->clear_accepted(); }},
  };
  std::mt19937 rng(7);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    v1::JobEvent event = CompleteEvent(true);
    v1::CompleteJob* job = event.mutable_complete();
    job->mutable_accepted()->set_job_id("j");
    job->mutable_accepted()->set_output_shape(0, 16);
    std::string bytes(64, '\0');
    for (char& b : bytes) b = static_cast<char>(rng());
    job->mutable_chunk()->set_data(bytes);
    job->mutable_timing()->set_stream("normal/0");
    c.edit(job);

    ResultAssembler by_event(c.dry_run);
    ResultAssembler by_move(c.dry_run);
    const absl::Status added = by_event.Add(event);
    v1::CompleteJob moved = *job;
    const absl::Status moved_in = by_move.AddComplete(&moved);
    EXPECT_EQ(moved_in, added);
    if (!added.ok()) continue;
    // The result's bytes were taken, not copied.
    if (std::string(c.name) == "whole") EXPECT_TRUE(moved.chunk().data().empty());
    const absl::StatusOr<JobResult> expected = by_event.Finish();
    const absl::StatusOr<JobResult> got = by_move.Finish();
    EXPECT_EQ(got.status(), expected.status());
    if (!expected.ok() || !got.ok()) continue;
    EXPECT_EQ(got->output.data(), expected->output.data());
    EXPECT_EQ(got->output.dtype(), expected->output.dtype());
    EXPECT_EQ(std::vector<int64_t>(got->output.shape().begin(), got->output.shape().end()),
              std::vector<int64_t>(expected->output.shape().begin(),
                                   expected->output.shape().end()));
    EXPECT_EQ(got->accepted.SerializeAsString(), expected->accepted.SerializeAsString());
    EXPECT_EQ(got->timing.SerializeAsString(), expected->timing.SerializeAsString());
  }
}

TEST(ResultAssemblerCompact, AddCompleteAfterOtherEventsIsABreach) {
  ResultAssembler assembler(false);
  v1::JobEvent accepted;
  *accepted.mutable_accepted() = CompleteEvent(true).complete().accepted();
  ASSERT_TRUE(assembler.Add(accepted).ok());
  v1::CompleteJob job = CompleteEvent(true).complete();
  EXPECT_EQ(assembler.AddComplete(&job).code(), absl::StatusCode::kDataLoss);
}

TEST(ResultAssemblerCompact, ForEachEventSplitsInOrder) {
  std::vector<v1::JobEvent::EventCase> kinds;
  ASSERT_TRUE(ForEachEvent(CompleteEvent(true), [&](const v1::JobEvent& e) {
                kinds.push_back(e.event_case());
                EXPECT_EQ(e.job_id(), "j");
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(kinds,
            (std::vector<v1::JobEvent::EventCase>{v1::JobEvent::kAccepted, v1::JobEvent::kChunk,
                                                  v1::JobEvent::kTiming, v1::JobEvent::kDone}));
}

}  // namespace
}  // namespace client
}  // namespace gpupipe
