// Admission limits: per priority level, in total, and per client, each naming itself.
#include "server/engine/scheduling/admission.h"

#include <gtest/gtest.h>

#include <string>

namespace gpupipe::engine {
namespace {

AdmissionTicket Job(std::string client, Priority p = Priority::kNormal, int64_t bytes = 0,
                    bool upload = false) {
  return AdmissionTicket{std::move(client), p, bytes, upload};
}

void ExpectRefused(const absl::Status& s, const std::string& flag) {
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find(flag), std::string::npos) << s;
}

TEST(Admission, TheQueueLimitIsPerPriorityLevel) {
  AdmissionLimits limits;
  limits.max_queued_jobs = 2;
  limits.max_client_jobs = 100;
  Admission a(limits);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(a.Check(Job("x", Priority::kHigh)).ok());
    a.Queued(Job("x", Priority::kHigh));
  }
  ExpectRefused(a.Check(Job("y", Priority::kHigh)), "--max-queued-jobs");
  // Other levels are not touched by the high-priority flood.
  EXPECT_TRUE(a.Check(Job("y", Priority::kLow)).ok());
  EXPECT_TRUE(a.Check(Job("y", Priority::kNormal)).ok());
  // A job that leaves the queue makes room.
  a.Started(Job("x", Priority::kHigh));
  EXPECT_TRUE(a.Check(Job("y", Priority::kHigh)).ok());
}

TEST(Admission, AClientsJobsCountUntilTheyEndAndOthersAreNotTouched) {
  AdmissionLimits limits;
  limits.max_client_jobs = 3;
  Admission a(limits);
  for (int i = 0; i < 3; ++i) a.Queued(Job("flood"));
  a.Started(Job("flood"));  // running still counts
  ExpectRefused(a.Check(Job("flood")), "--max-client-jobs");
  EXPECT_NE(a.Check(Job("flood")).message().find("client 'flood'"), std::string::npos);
  EXPECT_TRUE(a.Check(Job("other")).ok());
  a.Ended(Job("flood"), /*started=*/true);
  EXPECT_TRUE(a.Check(Job("flood")).ok());
  EXPECT_EQ(a.active_clients(), 1u);
  a.Ended(Job("flood"), false);
  a.Ended(Job("flood"), false);
  EXPECT_EQ(a.active_clients(), 0u);
  EXPECT_EQ(a.queued_jobs(Priority::kNormal), 0);
}

TEST(Admission, QueuedBytesAreBoundedInTotalAndPerClientButAFirstJobAlwaysFits) {
  AdmissionLimits limits;
  limits.max_queued_bytes = 1000;
  limits.max_client_queued_bytes = 600;
  Admission a(limits);
  EXPECT_TRUE(a.Check(Job("big", Priority::kNormal, 5000)).ok());  // alone: fits
  a.Queued(Job("a", Priority::kNormal, 500));
  ExpectRefused(a.Check(Job("a", Priority::kNormal, 200)), "--max-client-queued-mib");
  EXPECT_TRUE(a.Check(Job("b", Priority::kNormal, 400)).ok());
  a.Queued(Job("b", Priority::kNormal, 400));
  ExpectRefused(a.Check(Job("c", Priority::kNormal, 200)), "--max-queued-mib");
  a.Started(Job("b", Priority::kNormal, 400));  // running jobs' inputs are the lanes' business
  EXPECT_TRUE(a.Check(Job("c", Priority::kNormal, 200)).ok());
  EXPECT_EQ(a.queued_bytes(), 500);
}

TEST(Admission, UploadsInProgressAreLimitedPerClient) {
  AdmissionLimits limits;
  limits.max_client_uploads = 2;
  Admission a(limits);
  a.Queued(Job("u", Priority::kLow, 0, true));
  a.Queued(Job("u", Priority::kHigh, 0, true));
  ExpectRefused(a.Check(Job("u", Priority::kNormal, 0, true)), "--max-client-uploads");
  EXPECT_TRUE(a.Check(Job("u", Priority::kNormal, 0, false)).ok());  // a Submit still fits
  a.Ended(Job("u", Priority::kLow, 0, true), false);
  EXPECT_TRUE(a.Check(Job("u", Priority::kNormal, 0, true)).ok());
}

TEST(Admission, AnAnonymousClientIsNamedSo) {
  AdmissionLimits limits;
  limits.max_client_jobs = 1;
  Admission a(limits);
  a.Queued(Job(""));
  const absl::Status s = a.Check(Job(""));
  EXPECT_NE(s.message().find("an anonymous client"), std::string::npos) << s;
}

}  // namespace
}  // namespace gpupipe::engine
