#include "client/cli/args.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpupipe {
namespace cli {
namespace {

using ::testing::HasSubstr;

Args MustParse(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = ParseArgs(argv);
  EXPECT_TRUE(args.ok()) << args.status();
  return args.ok() ? *args : Args{};
}

std::string Error(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = ParseArgs(argv);
  EXPECT_FALSE(args.ok());
  if (!args.ok()) {
    EXPECT_EQ(args.status().code(), absl::StatusCode::kInvalidArgument);
  }
  return args.ok() ? "" : std::string(args.status().message());
}

TEST(ArgsTest, SubmitWithEverything) {
  Args a = MustParse({"--target", "h:1", "submit", "--input", "x.npy", "--ops",
                      "affine(alpha=2,beta=1) | relu", "--output=y.npy", "--priority", "high",
                      "--staging", "pipeline", "--stages", "4", "--launch=pdl", "--json",
                      "--tag", "run 1", "--deadline", "2.5"});
  EXPECT_EQ(a.command, Command::kSubmit);
  EXPECT_EQ(a.target, "h:1");
  EXPECT_EQ(a.deadline_seconds, 2.5);
  EXPECT_TRUE(a.json);
  EXPECT_EQ(a.submit.input, "x.npy");
  EXPECT_EQ(a.submit.output, "y.npy");
  ASSERT_EQ(a.submit.ops.size(), 2u);
  EXPECT_EQ(a.submit.ops[0].affine().alpha(), 2);
  EXPECT_EQ(a.submit.priority, v1::PRIORITY_HIGH);
  EXPECT_EQ(a.submit.options.staging(), v1::STAGING_PIPELINE);
  EXPECT_EQ(a.submit.options.stages(), 4u);
  EXPECT_EQ(a.submit.options.launch(), v1::LAUNCH_PDL);
  EXPECT_EQ(a.submit.tag, "run 1");
}

TEST(ArgsTest, Defaults) {
  Args a = MustParse({"submit", "--input", "x.npy", "--ops", "relu"});
  EXPECT_EQ(a.target, "127.0.0.1:50051");
  EXPECT_EQ(a.deadline_seconds, 300);
  EXPECT_FALSE(a.json);
  EXPECT_EQ(a.submit.priority, v1::PRIORITY_UNSPECIFIED);
  EXPECT_EQ(a.submit.options.staging(), v1::STAGING_AUTO);
  EXPECT_EQ(a.submit.options.launch(), v1::LAUNCH_AUTO);
  EXPECT_TRUE(a.submit.output.empty());
}

TEST(ArgsTest, TargetAfterCommand) {
  EXPECT_EQ(MustParse({"describe", "--target=h:2"}).target, "h:2");
  EXPECT_EQ(MustParse({"submit", "--input", "x", "--ops", "sum", "--target", "h:3"}).target,
            "h:3");
}

TEST(ArgsTest, Describe) {
  Args a = MustParse({"describe", "--json"});
  EXPECT_EQ(a.command, Command::kDescribe);
  EXPECT_TRUE(a.json);
}

TEST(ArgsTest, HelpAndVersion) {
  EXPECT_EQ(MustParse({"--help"}).command, Command::kHelp);
  EXPECT_EQ(MustParse({"-h"}).help_topic, "");
  Args a = MustParse({"submit", "--help"});
  EXPECT_EQ(a.command, Command::kHelp);
  EXPECT_EQ(a.help_topic, "submit");
  EXPECT_EQ(MustParse({"describe", "-h"}).help_topic, "describe");
  EXPECT_EQ(MustParse({"help", "submit"}).help_topic, "submit");
  EXPECT_EQ(MustParse({"--version"}).command, Command::kVersion);
  EXPECT_EQ(MustParse({"version"}).command, Command::kVersion);
  // Help needs no required options.
  EXPECT_EQ(MustParse({"submit", "--ops", "bogus(", "--help"}).command, Command::kHelp);
}

TEST(ArgsTest, UsageErrors) {
  EXPECT_THAT(Error({}), HasSubstr("missing command"));
  EXPECT_THAT(Error({"sumbit"}), HasSubstr("unknown command 'sumbit'"));
  EXPECT_THAT(Error({"submit", "--ops", "relu"}), HasSubstr("missing --input"));
  EXPECT_THAT(Error({"submit", "--input", "x.npy"}), HasSubstr("missing --ops"));
  EXPECT_THAT(Error({"submit", "--input"}), HasSubstr("--input needs a value"));
  EXPECT_THAT(Error({"submit", "--bogus"}),
              HasSubstr("unknown option '--bogus' for submit (see gpupipe submit --help)"));
  EXPECT_THAT(Error({"describe", "--input", "x"}), HasSubstr("belongs to the submit command"));
  EXPECT_THAT(Error({"submit", "--input", "a", "--input", "b", "--ops", "relu"}),
              HasSubstr("--input given twice"));
  EXPECT_THAT(Error({"submit", "--input", "x", "--ops", "relu", "--priority", "urgent"}),
              HasSubstr("--priority: unknown value 'urgent' (expected low, normal, high)"));
  EXPECT_THAT(Error({"submit", "--input", "x", "--ops", "relu", "--staging", "x"}),
              HasSubstr("(expected auto, direct, pipeline)"));
  EXPECT_THAT(Error({"submit", "--input", "x", "--ops", "relu", "--launch", "x"}),
              HasSubstr("(expected auto, stream, pdl)"));
  EXPECT_THAT(Error({"submit", "--input", "x", "--ops", "relu", "--stages", "9"}),
              HasSubstr("--stages: expected an integer from 0"));
  EXPECT_THAT(Error({"submit", "--input", "x", "--ops", "relu", "--stages", "-1"}),
              HasSubstr("--stages"));
  EXPECT_THAT(Error({"submit", "--input", "x", "--ops", "relu", "--tag", std::string(129, 't')}),
              HasSubstr("--tag: 129 bytes; at most 128"));
  EXPECT_THAT(Error({"--deadline", "0", "describe"}), HasSubstr("--deadline"));
  EXPECT_THAT(Error({"describe", "extra"}), HasSubstr("unexpected argument 'extra'"));
  EXPECT_THAT(Error({"--json=1", "describe"}), HasSubstr("--json takes no value"));
  EXPECT_THAT(Error({"--target", "", "describe"}), HasSubstr("--target: empty"));
}

TEST(ArgsTest, OpsErrorsArePrefixed) {
  EXPECT_EQ(Error({"submit", "--input", "x", "--ops", "affine | sofmax"}),
            "ops: unknown op 'sofmax' at 1:10 (known: affine, relu, sum, softmax)");
  EXPECT_THAT(Error({"submit", "--input", "x", "--ops", ""}), HasSubstr("ops: empty pipeline"));
}

TEST(ArgsTest, WantsJson) {
  EXPECT_TRUE(WantsJson({"submit", "--json"}));
  EXPECT_TRUE(WantsJson({"--json", "bogus"}));
  EXPECT_FALSE(WantsJson({"submit", "--tag", "--json"}));
  EXPECT_FALSE(WantsJson({"describe"}));
}

TEST(ArgsTest, HelpTextsMentionOptions) {
  EXPECT_THAT(MainHelp(), HasSubstr("--target HOST:PORT"));
  EXPECT_THAT(SubmitHelp(), HasSubstr("--priority P         low|normal|high"));
  EXPECT_THAT(SubmitHelp(), HasSubstr("affine, relu, sum, softmax"));
  EXPECT_THAT(DescribeHelp(), HasSubstr("describe [--json]"));
}

}  // namespace
}  // namespace cli
}  // namespace gpupipe
