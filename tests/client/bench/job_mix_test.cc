#include "client/bench/job_mix.h"

#include <gtest/gtest.h>

#include "client/dtype.h"

namespace gpupipe::bench {
namespace {

TEST(JobMix, ParsesALineWithEveryKey) {
  absl::StatusOr<MixEntry> e = ParseMixLine(
      "weight=3; shape=2x8; dtype=float16; priority=high; ops=affine(alpha=2) | softmax");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->weight, 3);
  EXPECT_EQ(e->shape, (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(e->dtype, v1::DTYPE_FLOAT16);
  EXPECT_EQ(e->priority, v1::PRIORITY_HIGH);
  ASSERT_EQ(e->ops.size(), 2u);
  EXPECT_EQ(EntryLabel(*e), "affine(alpha=2) | softmax 2x8 float16 high");
}

TEST(JobMix, DefaultsToOneRowOf1024Float32AtNormalPriority) {
  absl::StatusOr<MixEntry> e = ParseMixLine("ops=relu");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->shape, (std::vector<int64_t>{1, 1024}));
  EXPECT_EQ(e->dtype, v1::DTYPE_FLOAT32);
  EXPECT_EQ(e->priority, v1::PRIORITY_NORMAL);
  EXPECT_EQ(e->weight, 1);
}

TEST(JobMix, RefusesBadLinesNamingTheKey) {
  for (const auto& [line, says] : std::vector<std::pair<std::string, std::string>>{
           {"shape=2x8", "missing ops"},
           {"ops=relu; shape=2x0", "shape"},
           {"ops=relu; dtype=float128", "dtype"},
           {"ops=relu; priority=urgent", "priority"},
           {"ops=relu; weight=0", "weight"},
           {"ops=relu; colour=red", "unknown key 'colour'"},
           {"ops=sofmax", "ops:"},
           {"ops=relu; shape=100000x100000", "at most"},
           {"ops=relu; nonsense", "key=value"}}) {
    absl::StatusOr<MixEntry> e = ParseMixLine(line);
    ASSERT_FALSE(e.ok()) << line;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(e.status().message()).find(says), std::string::npos)
        << line << ": " << e.status();
  }
}

TEST(JobMix, AFileSkipsCommentsAndNamesTheBadLine) {
  absl::StatusOr<std::vector<MixEntry>> mix =
      ParseMixText("# a mix\n\nweight=9; ops=relu\n  # indented comment\nops=softmax\n");
  ASSERT_TRUE(mix.ok()) << mix.status();
  ASSERT_EQ(mix->size(), 2u);
  EXPECT_EQ((*mix)[0].weight, 9);
  absl::StatusOr<std::vector<MixEntry>> bad = ParseMixText("ops=relu\nops=relu; weight=x\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("line 2"), std::string::npos);
  EXPECT_FALSE(ParseMixText("# nothing\n").ok());
}

TEST(JobMix, EntryRequestsCarryDistinctInputsOfTheRightSize) {
  for (v1::DType dtype : {v1::DTYPE_FLOAT32, v1::DTYPE_FLOAT64, v1::DTYPE_FLOAT16, v1::DTYPE_INT32,
                          v1::DTYPE_INT64}) {
    MixEntry entry = *ParseMixLine("ops=abs; shape=3x5");
    entry.dtype = dtype;
    absl::StatusOr<std::vector<v1::SubmitRequest>> requests = EntryRequests(entry, 7);
    ASSERT_TRUE(requests.ok()) << requests.status();
    ASSERT_EQ(requests->size(), static_cast<size_t>(kInputVariants));
    for (const v1::SubmitRequest& r : *requests) {
      EXPECT_EQ(r.input().data().size(), 15 * client::DTypeSize(dtype));
      EXPECT_EQ(r.input().dtype(), dtype);
      EXPECT_EQ(r.ops_size(), 1);
    }
    EXPECT_NE((*requests)[0].input().data(), (*requests)[1].input().data());
  }
}

}  // namespace
}  // namespace gpupipe::bench
