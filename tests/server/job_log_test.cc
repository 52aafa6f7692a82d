// A finished job's log line: its status in the message, its fields named as the CLI's JSON
// names them, and the level that tells a daemon fault from a client's.
#include "server/job_log.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace gpupipe::daemon {
namespace {

engine::JobRecord Record() {
  engine::JobRecord r;
  r.job_id = "7f-3";
  r.backend = "cuda";
  r.spec.client = "worker-1";
  r.spec.priority = engine::Priority::kHigh;
  r.spec.shape = {4, 256};
  engine::OpSpec scale;
  scale.kind = engine::OpKind::kScale;
  engine::OpSpec relu;
  relu.kind = engine::OpKind::kRelu;
  r.spec.ops = {scale, relu};
  r.timing.stream = "high-0";
  r.timing.total_us = 1500;
  r.timing.bytes_in = 4096;
  r.timing.bytes_out = 4096;
  r.timing.chunks = 1;
  r.timing.kernels = 1;
  r.timing.gbps = 5.5;
  return r;
}

std::map<std::string, LogField> ByKey(const JobLogLine& line) {
  std::map<std::string, LogField> fields;
  for (const LogField& f : line.fields) fields[f.key] = f;
  return fields;
}

TEST(JobLog, AnOkJobIsAnInfoLineWithItsClientShapeOpsAndTimes) {
  const JobLogLine line = JobLog(Record());
  EXPECT_EQ(line.level, LogLevel::kInfo);
  EXPECT_EQ(line.message, "job 7f-3 OK");
  std::map<std::string, LogField> f = ByKey(line);
  EXPECT_EQ(std::get<std::string>(f["job_id"].value), "7f-3");
  EXPECT_FALSE(f["job_id"].in_text);  // the text message names it already
  EXPECT_EQ(std::get<std::string>(f["status"].value), "OK");
  EXPECT_EQ(std::get<std::string>(f["client"].value), "worker-1");
  EXPECT_EQ(std::get<std::string>(f["priority"].value), "high");
  EXPECT_EQ(std::get<std::string>(f["dtype"].value), "float32");
  EXPECT_EQ(std::get<std::vector<int64_t>>(f["shape"].value), (std::vector<int64_t>{4, 256}));
  EXPECT_EQ(std::get<std::string>(f["ops"].value), "scale|relu");
  EXPECT_EQ(std::get<std::string>(f["backend"].value), "cuda");
  EXPECT_EQ(std::get<std::string>(f["stream"].value), "high-0");
  EXPECT_DOUBLE_EQ(std::get<double>(f["total_us"].value), 1500);
  EXPECT_EQ(std::get<int64_t>(f["bytes_in"].value), 4096);
  EXPECT_EQ(std::get<int64_t>(f["chunks"].value), 1);
  EXPECT_DOUBLE_EQ(std::get<double>(f["gbps"].value), 5.5);
  EXPECT_EQ(f.count("tag"), 0u);    // none given
  EXPECT_EQ(f.count("error"), 0u);  // none happened
}

TEST(JobLog, AFailedJobCarriesItsErrorAndTag) {
  engine::JobRecord r = Record();
  r.spec.client_tag = "nightly";
  r.status = absl::InvalidArgumentError("shape [4, 256]: too many rows");
  const JobLogLine line = JobLog(r);
  EXPECT_EQ(line.level, LogLevel::kInfo);  // the client's mistake, not the daemon's
  EXPECT_EQ(line.message, "job 7f-3 INVALID_ARGUMENT");
  std::map<std::string, LogField> f = ByKey(line);
  EXPECT_EQ(std::get<std::string>(f["tag"].value), "nightly");
  EXPECT_EQ(std::get<std::string>(f["error"].value), "shape [4, 256]: too many rows");
}

TEST(JobLog, FailuresInsideTheDaemonAreErrors) {
  for (const absl::Status& s :
       {absl::InternalError("x"), absl::UnknownError("x"), absl::DataLossError("x")}) {
    engine::JobRecord r = Record();
    r.status = s;
    EXPECT_EQ(JobLog(r).level, LogLevel::kError) << s;
  }
  for (const absl::Status& s : {absl::CancelledError("x"), absl::DeadlineExceededError("x"),
                                absl::ResourceExhaustedError("x"), absl::UnavailableError("x")}) {
    engine::JobRecord r = Record();
    r.status = s;
    EXPECT_EQ(JobLog(r).level, LogLevel::kInfo) << s;
  }
}

}  // namespace
}  // namespace gpupipe::daemon
