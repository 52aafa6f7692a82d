#include "client/cli/submit_output.h"

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "client/cli/render.h"
#include "client/npy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpupipe {
namespace cli {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

class SubmitOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/submit_output_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      names.push_back(e.path().filename().string());
    }
    return names;
  }

  std::string dir_;
};

TEST_F(SubmitOutputTest, WithoutAFileKeepsOnlyWhatIsShown) {
  SubmitOutput small("");
  ASSERT_TRUE(small.Begin(v1::DTYPE_FLOAT32, {kMaxShownElements}).ok());
  ASSERT_TRUE(small.Write(0, std::string(32, 'a')).ok());
  ASSERT_TRUE(small.Write(32, std::string(32, 'b')).ok());
  ASSERT_TRUE(small.Finish().ok());
  EXPECT_EQ(small.TakeShown(), std::string(32, 'a') + std::string(32, 'b'));

  SubmitOutput large("");
  ASSERT_TRUE(large.Begin(v1::DTYPE_FLOAT32, {kMaxShownElements + 1}).ok());
  ASSERT_TRUE(large.Write(0, std::string(68, 'a')).ok());
  ASSERT_TRUE(large.Finish().ok());
  EXPECT_THAT(large.TakeShown(), IsEmpty());
  EXPECT_TRUE(large.error().ok());
}

TEST_F(SubmitOutputTest, WritesTheFileAtFinish) {
  const std::string path = dir_ + "/y.npy";
  SubmitOutput out(path);
  ASSERT_TRUE(out.Begin(v1::DTYPE_INT32, {2, 2}).ok());
  const std::string data("\1\0\0\0\2\0\0\0\3\0\0\0\4\0\0\0", 16);
  ASSERT_TRUE(out.Write(0, data.substr(0, 12)).ok());
  ASSERT_TRUE(out.Write(12, data.substr(12)).ok());
  EXPECT_FALSE(std::filesystem::exists(path)) << "y.npy must not exist before Finish";
  ASSERT_TRUE(out.Finish().ok());
  absl::StatusOr<client::NpyArray> y = client::ReadNpy(path);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(y->data, data);
  // Small enough to show: --json prints the values of a written result too.
  EXPECT_EQ(out.TakeShown(), data);
}

TEST_F(SubmitOutputTest, AnUnfinishedOutputLeavesNoFile) {
  {
    SubmitOutput out(dir_ + "/y.npy");
    ASSERT_TRUE(out.Begin(v1::DTYPE_FLOAT32, {1000}).ok());
    ASSERT_TRUE(out.Write(0, std::string(400, 'x')).ok());
    EXPECT_EQ(Names().size(), 1u);  // the temporary file
  }
  EXPECT_THAT(Names(), IsEmpty());
}

TEST_F(SubmitOutputTest, FileErrorsAreRecorded) {
  SubmitOutput out("/nonexistent-dir/y.npy");
  absl::Status s = out.Begin(v1::DTYPE_FLOAT32, {4});
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent-dir/y.npy: cannot open for writing"));
  EXPECT_EQ(out.error(), s);

  // A stream that ends short of the output fails Finish, which is recorded too.
  SubmitOutput short_output(dir_ + "/y.npy");
  ASSERT_TRUE(short_output.Begin(v1::DTYPE_FLOAT32, {4}).ok());
  ASSERT_TRUE(short_output.Write(0, "abcd").ok());
  EXPECT_EQ(short_output.Finish().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(short_output.error().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Names(), IsEmpty());

  SubmitOutput never_begun(dir_ + "/y.npy");
  EXPECT_EQ(never_begun.Finish().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace cli
}  // namespace gpupipe
