#include "client/cli/args.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpupipe {
namespace cli {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

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
  EXPECT_FALSE(a.submit.options.profile());
  EXPECT_FALSE(a.submit.explain);
  EXPECT_FALSE(a.submit.dry_run);
}

TEST(ArgsTest, SubmitTakesEveryStagingStrategy) {
  const std::pair<const char*, v1::Staging> cases[] = {
      {"auto", v1::STAGING_AUTO},
      {"direct", v1::STAGING_DIRECT},
      {"pipeline", v1::STAGING_PIPELINE},
      {"pipeline-thread", v1::STAGING_PIPELINE_THREAD},
      {"primitives", v1::STAGING_PRIMITIVES},
      {"bulk", v1::STAGING_BULK},
  };
  for (const auto& [name, staging] : cases) {
    Args a = MustParse({"submit", "--input", "x.npy", "--ops", "relu", "--staging", name,
                        "--stages", "8"});
    EXPECT_EQ(a.submit.options.staging(), staging) << name;
    EXPECT_EQ(a.submit.options.stages(), 8u) << name;
  }
}

TEST(ArgsTest, SubmitStreamModes) {
  EXPECT_EQ(MustParse({"submit", "--input", "x", "--ops", "relu"}).submit.stream,
            StreamMode::kAuto);
  EXPECT_EQ(MustParse({"submit", "--input", "x", "--ops", "relu", "--stream", "always"})
                .submit.stream,
            StreamMode::kAlways);
  EXPECT_EQ(MustParse({"submit", "--input", "x", "--ops", "relu", "--stream=never"}).submit.stream,
            StreamMode::kNever);
  EXPECT_THAT(Error({"submit", "--input", "x", "--ops", "relu", "--stream", "sometimes"}),
              HasSubstr("--stream: expected auto, always or never, got 'sometimes'"));
  EXPECT_THAT(Error({"compare", "--input", "x", "--ops", "relu", "--stream", "always"}),
              HasSubstr("--stream"));
}

TEST(ArgsTest, SubmitPlanAndProfileFlags) {
  Args a = MustParse({"submit", "--input", "x.npy", "--ops", "softmax", "--launch", "graph-pdl",
                      "--profile", "--explain", "--dry-run"});
  EXPECT_EQ(a.submit.options.launch(), v1::LAUNCH_GRAPH_PDL);
  EXPECT_TRUE(a.submit.options.profile());
  EXPECT_TRUE(a.submit.explain);
  EXPECT_TRUE(a.submit.dry_run);
  EXPECT_EQ(MustParse({"submit", "--input", "x", "--ops", "sum", "--launch=graph"})
                .submit.options.launch(),
            v1::LAUNCH_GRAPH);
  // The proto's spelling works too.
  EXPECT_EQ(MustParse({"submit", "--input", "x", "--ops", "sum", "--launch", "graph_pdl"})
                .submit.options.launch(),
            v1::LAUNCH_GRAPH_PDL);
}

TEST(ArgsTest, CompareDefaults) {
  Args a = MustParse({"compare", "--input", "x.npy", "--ops", "affine(alpha=2) | softmax"});
  EXPECT_EQ(a.command, Command::kCompare);
  const CompareArgs& c = a.compare;
  EXPECT_EQ(c.input, "x.npy");
  ASSERT_EQ(c.ops.size(), 2u);
  EXPECT_EQ(c.ops[0].affine().alpha(), 2);
  EXPECT_EQ(c.launches, (std::vector<v1::LaunchMode>{v1::LAUNCH_STREAM, v1::LAUNCH_PDL,
                                                     v1::LAUNCH_GRAPH, v1::LAUNCH_GRAPH_PDL}));
  EXPECT_EQ(c.stagings,
            (std::vector<v1::Staging>{v1::STAGING_DIRECT, v1::STAGING_PIPELINE,
                                      v1::STAGING_PIPELINE_THREAD, v1::STAGING_PRIMITIVES,
                                      v1::STAGING_BULK}));
  EXPECT_EQ(c.repeat, 5);
  EXPECT_EQ(c.stages, 0u);
  EXPECT_EQ(c.priority, v1::PRIORITY_UNSPECIFIED);
  EXPECT_FALSE(a.json);
}

TEST(ArgsTest, CompareWithEverything) {
  Args a = MustParse({"compare", "--input=x.npy", "--ops", "relu", "--launch", "graph-pdl, auto",
                      "--staging=pipeline", "--stages", "3", "--repeat", "2", "--priority",
                      "high", "--json", "--target", "h:4"});
  const CompareArgs& c = a.compare;
  EXPECT_EQ(c.launches, (std::vector<v1::LaunchMode>{v1::LAUNCH_GRAPH_PDL, v1::LAUNCH_AUTO}));
  EXPECT_EQ(c.stagings, (std::vector<v1::Staging>{v1::STAGING_PIPELINE}));
  EXPECT_EQ(c.stages, 3u);
  EXPECT_EQ(c.repeat, 2);
  EXPECT_EQ(c.priority, v1::PRIORITY_HIGH);
  EXPECT_TRUE(a.json);
  EXPECT_EQ(a.target, "h:4");
}

TEST(ArgsTest, CompareUsageErrors) {
  const std::vector<std::string> base = {"compare", "--input", "x", "--ops", "relu"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), extra.begin(), extra.end());
    return Error(argv);
  };
  EXPECT_EQ(with({"--launch", "stream,warp"}),
            "--launch: unknown value 'warp' (expected auto, stream, pdl, graph, graph-pdl)");
  EXPECT_THAT(with({"--launch", "stream,,pdl"}), HasSubstr("--launch: empty item in 'stream,,pdl'"));
  EXPECT_THAT(with({"--launch", ""}), HasSubstr("--launch: empty item"));
  EXPECT_EQ(with({"--launch", "pdl,graph,PDL"}), "--launch: 'pdl' listed twice");
  EXPECT_EQ(with({"--staging", "direct,shared"}),
            "--staging: unknown value 'shared' (expected auto, direct, pipeline, "
            "pipeline-thread, primitives, bulk)");
  EXPECT_EQ(with({"--repeat", "0"}), "--repeat: expected an integer from 1 to 1000, got '0'");
  EXPECT_THAT(with({"--repeat", "x"}), HasSubstr("--repeat: expected an integer"));
  EXPECT_THAT(with({"--repeat", "1001"}), HasSubstr("--repeat"));
  EXPECT_THAT(with({"--stages", "9"}), HasSubstr("--stages: expected an integer from 0"));
  EXPECT_EQ(with({"--output", "y.npy"}), "option --output belongs to the submit command");
  EXPECT_EQ(with({"--explain"}), "option --explain belongs to the submit command");
  EXPECT_EQ(with({"--tag", "t"}), "option --tag belongs to the submit command");
  EXPECT_THAT(Error({"compare", "--ops", "relu"}), HasSubstr("compare: missing --input"));
  EXPECT_THAT(Error({"compare", "--input", "x"}), HasSubstr("compare: missing --ops"));
  EXPECT_THAT(Error({"compare", "--input", "x", "--ops", "relu | sofmax"}),
              StartsWith("ops: unknown op 'sofmax' at 1:8: did you mean 'softmax'? (known: affine, "
                         "relu, sum, softmax"));
  EXPECT_EQ(Error({"submit", "--input", "x", "--ops", "relu", "--repeat", "2"}),
            "option --repeat belongs to the compare command");
  // A list is only for compare.
  EXPECT_THAT(Error({"submit", "--input", "x", "--ops", "relu", "--launch", "stream,pdl"}),
              HasSubstr("--launch: unknown value 'stream,pdl'"));
  EXPECT_EQ(Error({"submit", "--input", "x", "--ops", "relu", "--profile=yes"}),
            "--profile takes no value");
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
  EXPECT_EQ(MustParse({"help", "compare"}).help_topic, "compare");
  EXPECT_EQ(MustParse({"compare", "--help"}).help_topic, "compare");
  EXPECT_EQ(MustParse({"compare", "--launch", "bogus", "--help"}).command, Command::kHelp);
  EXPECT_EQ(MustParse({"--version"}).command, Command::kVersion);
  EXPECT_EQ(MustParse({"version"}).command, Command::kVersion);
  // Help needs no required options.
  EXPECT_EQ(MustParse({"submit", "--ops", "bogus(", "--help"}).command, Command::kHelp);
}

TEST(ArgsTest, UsageErrors) {
  EXPECT_THAT(Error({}), HasSubstr("missing command"));
  EXPECT_EQ(Error({"sumbit"}),
            "unknown command 'sumbit': did you mean 'submit'? (commands: submit, compare, "
            "bench, describe, stats, health)");
  EXPECT_EQ(Error({"frobnicate"}),
            "unknown command 'frobnicate' (commands: submit, compare, bench, describe, stats, "
            "health)");
  EXPECT_THAT(Error({"help", "sumbit"}),
              HasSubstr("'sumbit': did you mean 'submit'? (topics: submit, compare, bench, "
                        "describe, stats, health)"));
  EXPECT_THAT(Error({"submit", "--ops", "relu"}), HasSubstr("missing --input"));
  EXPECT_THAT(Error({"submit", "--input", "x.npy"}), HasSubstr("missing --ops"));
  EXPECT_THAT(Error({"submit", "--input"}), HasSubstr("--input needs a value"));
  EXPECT_THAT(Error({"submit", "--bogus"}),
              HasSubstr("unknown option '--bogus' for submit (see gpupipe submit --help)"));
  EXPECT_EQ(Error({"submit", "--stagin", "pipeline"}),
            "unknown option '--stagin' for submit: did you mean '--staging'? (see gpupipe submit "
            "--help)");
  // Only the command's own options and the global ones are suggested.
  EXPECT_EQ(Error({"describe", "--watc", "1"}),
            "unknown option '--watc' for describe (see gpupipe describe --help)");
  EXPECT_THAT(Error({"--tagret", "h:1", "describe"}), HasSubstr("did you mean '--target'?"));
  EXPECT_EQ(Error({"describe", "--input", "x"}),
            "option --input belongs to the submit and compare commands");
  EXPECT_EQ(Error({"--input", "x", "submit"}),
            "option --input belongs to the submit and compare commands");
  EXPECT_THAT(Error({"submit", "--input", "a", "--input", "b", "--ops", "relu"}),
              HasSubstr("--input given twice"));
  EXPECT_THAT(Error({"submit", "--input", "x", "--ops", "relu", "--priority", "urgent"}),
              HasSubstr("--priority: unknown value 'urgent' (expected low, normal, high)"));
  EXPECT_THAT(Error({"submit", "--input", "x", "--ops", "relu", "--priority", "hihg"}),
              HasSubstr("--priority: unknown value 'hihg': did you mean 'high'?"));
  EXPECT_THAT(Error({"submit", "--input", "x", "--ops", "relu", "--staging", "x"}),
              HasSubstr("(expected auto, direct, pipeline, pipeline-thread, primitives, bulk)"));
  EXPECT_THAT(Error({"submit", "--input", "x", "--ops", "relu", "--launch", "x"}),
              HasSubstr("(expected auto, stream, pdl, graph, graph-pdl)"));
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

TEST(ArgsTest, HealthAndStats) {
  Args h = MustParse({"health", "--service", "gpupipe.v1.JobService"});
  EXPECT_EQ(h.command, Command::kHealth);
  EXPECT_EQ(h.health_service, "gpupipe.v1.JobService");
  Args once = MustParse({"stats", "--json"});
  EXPECT_EQ(once.command, Command::kStats);
  EXPECT_EQ(once.watch_seconds, 0);
  EXPECT_TRUE(once.json);
  Args watch = MustParse({"stats", "--watch", "0.5", "--count=3"});
  EXPECT_EQ(watch.watch_seconds, 0.5);
  EXPECT_EQ(watch.watch_count, 3);
  EXPECT_EQ(MustParse({"help", "stats"}).help_topic, "stats");
  EXPECT_THAT(Error({"stats", "--watch", "0.01"}),
              HasSubstr("--watch: expected seconds from 0.1 to 86400, got '0.01'"));
  EXPECT_THAT(Error({"stats", "--watch", "x"}), HasSubstr("--watch: expected seconds"));
  EXPECT_THAT(Error({"stats", "--watch", "inf"}), HasSubstr("--watch"));
  EXPECT_EQ(Error({"stats", "--count", "2"}), "--count needs --watch");
  EXPECT_THAT(Error({"stats", "--watch", "1", "--count", "0"}),
              HasSubstr("--count: expected a positive integer"));
  EXPECT_EQ(Error({"submit", "--watch", "1"}), "option --watch belongs to the stats command");
}

TEST(ArgsTest, OpsErrorsArePrefixed) {
  // The list of known ops follows the proto, which grows; the first ops are stable.
  EXPECT_THAT(Error({"submit", "--input", "x", "--ops", "affine | sofmax"}),
              StartsWith("ops: unknown op 'sofmax' at 1:10: did you mean 'softmax'? (known: "
                         "affine, relu, sum, softmax"));
  EXPECT_THAT(Error({"submit", "--input", "x", "--ops", ""}), HasSubstr("ops: empty pipeline"));
}

TEST(ArgsTest, WantsJson) {
  EXPECT_TRUE(WantsJson({"submit", "--json"}));
  EXPECT_TRUE(WantsJson({"--json", "bogus"}));
  EXPECT_FALSE(WantsJson({"submit", "--tag", "--json"}));
  EXPECT_TRUE(WantsJson({"submit", "--dry-run", "--json"}));
  EXPECT_TRUE(WantsJson({"compare", "--repeat", "2", "--json"}));
  EXPECT_FALSE(WantsJson({"describe"}));
}

TEST(ArgsTest, HelpTextsMentionOptions) {
  EXPECT_THAT(MainHelp(), HasSubstr("--target HOST:PORT"));
  EXPECT_THAT(SubmitHelp(), HasSubstr("--priority P         low|normal|high"));
  EXPECT_THAT(SubmitHelp(), HasSubstr("(ops: affine, relu, sum, softmax"));
  EXPECT_THAT(DescribeHelp(), HasSubstr("describe [--json]"));
  EXPECT_THAT(MainHelp(), HasSubstr("compare    time a pipeline"));
  EXPECT_THAT(SubmitHelp(), HasSubstr("--launch L           auto|stream|pdl|graph|graph-pdl"));
  for (const char* option : {"--profile", "--explain", "--dry-run"}) {
    EXPECT_THAT(SubmitHelp(), HasSubstr(option));
  }
  EXPECT_THAT(CompareHelp(), HasSubstr("(default stream,pdl,graph,graph-pdl)"));
  EXPECT_THAT(CompareHelp(), HasSubstr("(default direct,pipeline,pipeline-thread,primitives,bulk)"));
  EXPECT_THAT(CompareHelp(), HasSubstr("--repeat N           measured runs per configuration, "
                                       "1 to 1000 (default 5)"));
  // Every help line fits in 100 columns.
  for (const std::string& help : {MainHelp(), SubmitHelp(), CompareHelp(), DescribeHelp()}) {
    for (absl::string_view line : absl::StrSplit(help, '\n')) {
      EXPECT_LE(line.size(), 100u) << line;
    }
  }
}

}  // namespace
}  // namespace cli
}  // namespace gpupipe

namespace gpupipe {
namespace cli {
namespace {

TEST(ArgsTest, SubmitTimelineTakesAnOptionalSvgFile) {
  Args plain = MustParse({"submit", "--input", "x.npy", "--ops", "relu", "--timeline"});
  EXPECT_TRUE(plain.submit.options.timeline());
  EXPECT_EQ(plain.submit.timeline_svg, "");
  Args before = MustParse({"submit", "--timeline", "--input", "x.npy", "--ops", "relu"});
  EXPECT_TRUE(before.submit.options.timeline());
  EXPECT_EQ(before.submit.input, "x.npy");
  Args file = MustParse({"submit", "--input", "x.npy", "--ops", "relu", "--timeline", "t.svg"});
  EXPECT_TRUE(file.submit.options.timeline());
  EXPECT_EQ(file.submit.timeline_svg, "t.svg");
  Args eq = MustParse({"submit", "--input", "x.npy", "--ops", "relu", "--timeline=u.svg"});
  EXPECT_EQ(eq.submit.timeline_svg, "u.svg");
  EXPECT_TRUE(WantsJson({"submit", "--timeline", "--json"}));
}

TEST(ArgsTest, BenchFromFlags) {
  Args a = MustParse({"bench",
                      "--ops",
                      "affine(alpha=2) | softmax",
                      "--shape",
                      "4x256",
                      "--dtype",
                      "float64",
                      "--priority",
                      "high",
                      "--concurrency",
                      "1,8,64",
                      "--duration",
                      "2",
                      "--warmup",
                      "0",
                      "--channels",
                      "3",
                      "--no-echo",
                      "--csv",
                      "--timeline",
                      "lanes.svg"});
  EXPECT_EQ(a.command, Command::kBench);
  const BenchArgs& b = a.bench;
  ASSERT_EQ(b.mix.size(), 1u);
  EXPECT_EQ(b.mix[0].shape, (std::vector<int64_t>{4, 256}));
  EXPECT_EQ(b.mix[0].dtype, v1::DTYPE_FLOAT64);
  EXPECT_EQ(b.mix[0].priority, v1::PRIORITY_HIGH);
  EXPECT_EQ(b.concurrency, (std::vector<int>{1, 8, 64}));
  EXPECT_EQ(b.duration_seconds, 2);
  EXPECT_EQ(b.warmup_seconds, 0);
  EXPECT_EQ(b.channels, 3);
  EXPECT_FALSE(b.echo);
  EXPECT_TRUE(b.csv);
  EXPECT_EQ(b.timeline_svg, "lanes.svg");
}

TEST(ArgsTest, BenchDefaultsAndOpenLoop) {
  Args a = MustParse({"bench", "--ops", "relu"});
  EXPECT_EQ(a.bench.concurrency, (std::vector<int>{1, 4, 16, 64}));
  EXPECT_TRUE(a.bench.rates.empty());
  EXPECT_TRUE(a.bench.echo);
  EXPECT_EQ(a.bench.channels, 4);
  Args open = MustParse({"bench", "--ops", "relu", "--rate", "100,2000.5", "--requests", "50"});
  EXPECT_EQ(open.bench.rates, (std::vector<double>{100, 2000.5}));
  EXPECT_EQ(open.bench.requests, 50);
}

TEST(ArgsTest, BenchUsageErrors) {
  EXPECT_THAT(Error({"bench"}), HasSubstr("missing --ops"));
  EXPECT_THAT(Error({"bench", "--ops", "relu", "--concurrency", "0"}), HasSubstr("--concurrency"));
  EXPECT_THAT(Error({"bench", "--ops", "relu", "--concurrency", "1,x"}),
              HasSubstr("--concurrency"));
  EXPECT_THAT(Error({"bench", "--ops", "relu", "--rate", "5", "--concurrency", "4"}),
              HasSubstr("--rate and --concurrency"));
  EXPECT_THAT(Error({"bench", "--ops", "relu", "--channels", "9999"}), HasSubstr("--channels"));
  EXPECT_THAT(Error({"bench", "--ops", "relu", "--duration", "-1"}), HasSubstr("--duration"));
  EXPECT_THAT(Error({"bench", "--ops", "relu", "--timeline"}), HasSubstr("FILE.svg"));
  EXPECT_THAT(Error({"bench", "--ops", "relu", "--shape", "4xq"}), HasSubstr("shape"));
  EXPECT_THAT(Error({"bench", "--mix", "/nonexistent/mix"}), HasSubstr("--mix"));
  EXPECT_THAT(Error({"bench", "--mix", "m", "--ops", "relu"}), HasSubstr("--mix and --ops"));
  EXPECT_THAT(Error({"bench", "--ops", "relu", "--csv", "--json"}), HasSubstr("--csv and --json"));
  EXPECT_THAT(Error({"submit", "--input", "x", "--ops", "relu", "--shape", "2"}),
              HasSubstr("belongs to the bench command"));
}

}  // namespace
}  // namespace cli
}  // namespace gpupipe
