// gpupipe: command-line client for gpupiped. See `gpupipe --help`.
//
// Exit status: 0 on success, 1 on a runtime or server error, 2 on a usage error. Every error is
// one line on stderr, "gpupipe: <cause>"; with --json, stdout also gets one JSON object
// {"status":"error","code":...,"message":...}.
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "client/cli/args.h"
#include "client/cli/render.h"
#include "client/job_client.h"
#include "client/npy.h"
#include "client/ops_grammar.h"

#ifndef GPUPIPE_VERSION
#define GPUPIPE_VERSION "0.0.0"
#endif

namespace gpupipe {
namespace cli {
namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

class Reporter {
 public:
  explicit Reporter(bool json) : json_(json) {}

  // Reports `status`: `line` goes to stderr after "gpupipe: ", the status's own message into
  // the JSON object. Returns `exit_code`.
  int Fail(int exit_code, const absl::Status& status, const std::string& line) const {
    std::cerr << "gpupipe: " << OneLine(line) << std::endl;
    if (json_) std::cout << ErrorJson(status.code(), OneLine(status.message())).dump() << std::endl;
    return exit_code;
  }
  int Fail(int exit_code, const absl::Status& status) const {
    return Fail(exit_code, status, std::string(status.message()));
  }

 private:
  static std::string OneLine(absl::string_view text) {
    return absl::StrReplaceAll(absl::StripTrailingAsciiWhitespace(text), {{"\r", ""}, {"\n", " "}});
  }

  bool json_;
};

// An RPC failure, worded for the person at the terminal.
int FailRpc(const Reporter& reporter, const Args& args, const absl::Status& status,
            bool got_events) {
  const std::string code(absl::StatusCodeToString(status.code()));
  if (status.code() == absl::StatusCode::kUnavailable && !got_events) {
    return reporter.Fail(kExitRuntime, status,
                         absl::StrCat("cannot reach ", args.target, " (", code, ": ",
                                      status.message(), ")"));
  }
  std::string line = absl::StrCat("server ", args.target, ": ", code, ": ", status.message());
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    absl::StrAppend(&line, " (after ", args.deadline_seconds, " s; see --deadline)");
  }
  return reporter.Fail(kExitRuntime, status, line);
}

absl::StatusOr<std::unique_ptr<client::JobClient>> Connect(const Args& args) {
  client::ClientOptions options;
  options.deadline_seconds = args.deadline_seconds;
  return client::JobClient::Create(args.target, options);
}

int RunSubmit(const Args& args, const Reporter& reporter) {
  const SubmitArgs& s = args.submit;
  absl::StatusOr<client::NpyArray> input = client::ReadNpy(s.input);
  if (!input.ok()) return reporter.Fail(kExitRuntime, input.status());

  v1::SubmitRequest request;
  v1::Tensor* tensor = request.mutable_input();
  tensor->set_dtype(input->dtype);
  for (int64_t d : input->shape) tensor->add_shape(d);
  *tensor->mutable_data() = std::move(input->data);
  for (const v1::Op& op : s.ops) *request.add_ops() = op;
  request.set_priority(s.priority);
  *request.mutable_options() = s.options;
  request.set_client_tag(s.tag);

  absl::StatusOr<std::unique_ptr<client::JobClient>> client = Connect(args);
  if (!client.ok()) return reporter.Fail(kExitUsage, client.status());
  bool got_events = false;
  absl::StatusOr<client::JobResult> result =
      (*client)->Submit(request, [&](const v1::JobEvent&) { got_events = true; });
  if (!result.ok()) return FailRpc(reporter, args, result.status(), got_events);

  SubmitReport report;
  report.input_path = s.input;
  report.input_dtype = input->dtype;
  report.input_shape = input->shape;
  report.ops = client::FormatOps(s.ops);
  report.result = *std::move(result);
  if (!s.output.empty()) {
    client::NpyArray out;
    out.dtype = report.result.output.dtype();
    out.shape.assign(report.result.output.shape().begin(), report.result.output.shape().end());
    out.data = report.result.output.data();
    absl::Status written = client::WriteNpy(s.output, out);
    if (!written.ok()) return reporter.Fail(kExitRuntime, written);
    report.output_path = s.output;
  }
  if (args.json) {
    std::cout << SubmitJson(report).dump() << std::endl;
  } else {
    std::cout << RenderSubmitText(report);
  }
  return 0;
}

int RunDescribe(const Args& args, const Reporter& reporter) {
  absl::StatusOr<std::unique_ptr<client::JobClient>> client = Connect(args);
  if (!client.ok()) return reporter.Fail(kExitUsage, client.status());
  absl::StatusOr<v1::DescribeResponse> response = (*client)->Describe();
  if (!response.ok()) return FailRpc(reporter, args, response.status(), false);
  if (!args.json) {
    std::cout << RenderDescribeText(*response);
    return 0;
  }
  absl::StatusOr<std::string> json = DescribeJson(*response);
  if (!json.ok()) return reporter.Fail(kExitRuntime, json.status());
  std::cout << *json << std::endl;
  return 0;
}

int Main(int argc, char** argv) {
  const std::vector<std::string> argv_vec(argv + 1, argv + argc);
  const Reporter usage_reporter(WantsJson(argv_vec));
  absl::StatusOr<Args> args = ParseArgs(argv_vec);
  if (!args.ok()) return usage_reporter.Fail(kExitUsage, args.status());
  const Reporter reporter(args->json);
  switch (args->command) {
    case Command::kHelp:
      std::cout << (args->help_topic == "submit"     ? SubmitHelp()
                    : args->help_topic == "describe" ? DescribeHelp()
                                                     : MainHelp());
      return 0;
    case Command::kVersion:
      std::cout << "gpupipe " << GPUPIPE_VERSION << std::endl;
      return 0;
    case Command::kSubmit:
      return RunSubmit(*args, reporter);
    case Command::kDescribe:
      return RunDescribe(*args, reporter);
  }
  return kExitUsage;
}

}  // namespace
}  // namespace cli
}  // namespace gpupipe

int main(int argc, char** argv) { return gpupipe::cli::Main(argc, argv); }
