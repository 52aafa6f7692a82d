#include "client/cli/args.h"

#include <cmath>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/enum_names.h"
#include "client/ops_grammar.h"

namespace gpupipe {
namespace cli {
namespace {

constexpr size_t kMaxTagBytes = 128;
constexpr uint32_t kMaxStages = 8;

std::string Choices(const google::protobuf::EnumDescriptor& type) {
  return absl::StrJoin(client::ShortEnumNames(type), "|");
}

absl::Status Usage(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

// Options that take a value; the rest are flags.
const std::set<std::string>& ValueOptions() {
  static const auto* options = new std::set<std::string>{
      "--target", "--deadline", "--input", "--ops", "--output", "--priority",
      "--staging", "--stages", "--launch", "--tag"};
  return *options;
}

template <typename Enum>
absl::Status ParseEnumOption(const std::string& option, const std::string& value,
                             const google::protobuf::EnumDescriptor& type, Enum* out) {
  const google::protobuf::EnumValueDescriptor* v = client::FindEnumValue(type, value);
  if (v == nullptr) {
    return Usage(absl::StrCat(option, ": unknown value '", value, "' (expected ",
                              absl::StrJoin(client::ShortEnumNames(type), ", "), ")"));
  }
  *out = static_cast<Enum>(v->number());
  return absl::OkStatus();
}

}  // namespace

bool WantsJson(const std::vector<std::string>& argv) {
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--json") return true;
    if (ValueOptions().count(argv[i]) != 0) ++i;  // skip the value: `--tag --json` is a tag
  }
  return false;
}

absl::StatusOr<Args> ParseArgs(const std::vector<std::string>& argv) {
  Args args;
  bool have_command = false;
  bool help = false;
  bool version = false;
  std::string command_name;
  std::set<std::string> given;

  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-') {
      if (!have_command) {
        if (arg == "submit" || arg == "describe" || arg == "help" || arg == "version") {
          have_command = true;
          command_name = arg;
          continue;
        }
        return Usage(absl::StrCat("unknown command '", arg, "' (commands: submit, describe)"));
      }
      if (command_name == "help" && args.help_topic.empty()) {
        if (arg != "submit" && arg != "describe") {
          return Usage(absl::StrCat("no help for '", arg, "' (topics: submit, describe)"));
        }
        args.help_topic = arg;
        continue;
      }
      return Usage(absl::StrCat("unexpected argument '", arg, "'"));
    }

    std::string name = arg;
    std::string value;
    bool has_value = false;
    if (const size_t eq = arg.find('='); absl::StartsWith(arg, "--") && eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    if (name == "-h" || name == "--help") {
      help = true;
      continue;
    }
    if (name == "--json" || name == "--version") {
      if (has_value) return Usage(absl::StrCat(name, " takes no value"));
      (name == "--json" ? args.json : version) = true;
      continue;
    }
    if (ValueOptions().count(name) == 0) {
      return Usage(absl::StrCat("unknown option '", name, "'",
                                have_command ? absl::StrCat(" for ", command_name) : "",
                                " (see gpupipe ", have_command ? command_name + " " : "",
                                "--help)"));
    }
    const bool global = name == "--target" || name == "--deadline";
    if (!global && command_name != "submit") {
      return Usage(absl::StrCat("option ", name, " belongs to the submit command"));
    }
    if (!has_value) {
      if (i + 1 >= argv.size()) return Usage(absl::StrCat(name, " needs a value"));
      value = argv[++i];
    }
    if (!given.insert(name).second) return Usage(absl::StrCat(name, " given twice"));

    SubmitArgs& s = args.submit;
    if (name == "--target") {
      if (value.empty()) return Usage("--target: empty (expected HOST:PORT)");
      args.target = value;
    } else if (name == "--deadline") {
      double d;
      if (!absl::SimpleAtod(value, &d) || !std::isfinite(d) || d <= 0) {
        return Usage(absl::StrCat("--deadline: expected a positive number of seconds, got '",
                                  value, "'"));
      }
      args.deadline_seconds = d;
    } else if (name == "--input") {
      if (value.empty()) return Usage("--input: empty path");
      s.input = value;
    } else if (name == "--output") {
      if (value.empty()) return Usage("--output: empty path");
      s.output = value;
    } else if (name == "--ops") {
      s.ops_text = value;
    } else if (name == "--priority") {
      absl::Status st = ParseEnumOption(name, value, *v1::Priority_descriptor(), &s.priority);
      if (!st.ok()) return st;
    } else if (name == "--staging") {
      v1::Staging staging;
      absl::Status st = ParseEnumOption(name, value, *v1::Staging_descriptor(), &staging);
      if (!st.ok()) return st;
      s.options.set_staging(staging);
    } else if (name == "--launch") {
      v1::LaunchMode launch;
      absl::Status st = ParseEnumOption(name, value, *v1::LaunchMode_descriptor(), &launch);
      if (!st.ok()) return st;
      s.options.set_launch(launch);
    } else if (name == "--stages") {
      uint32_t stages;
      if (!absl::SimpleAtoi(value, &stages) || stages > kMaxStages) {
        return Usage(absl::StrCat("--stages: expected an integer from 0 (backend default) to ",
                                  kMaxStages, ", got '", value, "'"));
      }
      s.options.set_stages(stages);
    } else if (name == "--tag") {
      if (value.size() > kMaxTagBytes) {
        return Usage(absl::StrCat("--tag: ", value.size(), " bytes; at most ", kMaxTagBytes));
      }
      s.tag = value;
    }
  }

  if (help || command_name == "help") {
    args.command = Command::kHelp;
    if (command_name == "submit" || command_name == "describe") args.help_topic = command_name;
    return args;
  }
  if (version || command_name == "version") {
    args.command = Command::kVersion;
    return args;
  }
  if (!have_command) {
    return Usage("missing command (commands: submit, describe; see gpupipe --help)");
  }
  if (command_name == "describe") {
    args.command = Command::kDescribe;
    return args;
  }
  args.command = Command::kSubmit;
  SubmitArgs& s = args.submit;
  if (s.input.empty()) return Usage("submit: missing --input FILE.npy");
  if (given.count("--ops") == 0) return Usage("submit: missing --ops PIPELINE");
  absl::StatusOr<std::vector<v1::Op>> ops = client::ParseOps(s.ops_text);
  if (!ops.ok()) return Usage(absl::StrCat("ops: ", ops.status().message()));
  s.ops = *std::move(ops);
  return args;
}

std::string MainHelp() {
  return absl::StrCat(
      "usage: gpupipe [--target HOST:PORT] [--deadline SECONDS] <command> [options]\n"
      "\n"
      "Client for gpupiped, the daemon that runs op pipelines on a GPU.\n"
      "\n"
      "commands:\n"
      "  submit     run a pipeline on a tensor from a .npy file (gpupipe submit --help)\n"
      "  describe   show the daemon's device, ops and limits\n"
      "\n"
      "global options (also accepted after the command):\n"
      "  --target HOST:PORT   daemon address (default ", kDefaultTarget, ")\n"
      "  --deadline SECONDS   give up on a call after this long (default 300)\n"
      "  --json               print one JSON object instead of text\n"
      "  -h, --help           show help (gpupipe <command> --help for a command)\n"
      "  --version            print the version\n"
      "\n"
      "exit status: 0 on success, 1 on a runtime or server error, 2 on a usage error\n");
}

std::string SubmitHelp() {
  return absl::StrCat(
      "usage: gpupipe [--target HOST:PORT] submit --input X.npy --ops PIPELINE [options]\n"
      "\n"
      "Runs PIPELINE on the tensor in X.npy and prints a summary with timings.\n"
      "\n"
      "options:\n"
      "  --input X.npy        input tensor (<f4, <f8, <f2, <i4 or <i8, C order)\n"
      "  --ops PIPELINE       ops joined by '|', e.g. 'affine(alpha=2, beta=1) | relu | softmax'\n"
      "                       (ops: ", absl::StrJoin(client::KnownOps(), ", "),
      "; see gpupipe describe)\n"
      "  --output Y.npy       write the result here; without it, results of at most 16\n"
      "                       elements are printed\n"
      "  --priority P         ", Choices(*v1::Priority_descriptor()), " (default normal)\n"
      "  --staging S          ", Choices(*v1::Staging_descriptor()),
      " (default auto)\n"
      "  --stages N           pipeline depth for --staging pipeline, 1 to 8 (0: backend default)\n"
      "  --launch L           ", Choices(*v1::LaunchMode_descriptor()), " (default auto)\n"
      "  --tag TEXT           free text for the daemon's log line (at most 128 bytes)\n"
      "  --json               print one JSON object instead of text\n"
      "  --target HOST:PORT   daemon address (default ", kDefaultTarget, ")\n");
}

std::string DescribeHelp() {
  return absl::StrCat(
      "usage: gpupipe [--target HOST:PORT] describe [--json]\n"
      "\n"
      "Shows the daemon's backend, device, stream priorities, ops (with params and dtypes),\n"
      "staging and launch modes, and request limits.\n"
      "\n"
      "options:\n"
      "  --json               print the DescribeResponse as one JSON object\n"
      "  --target HOST:PORT   daemon address (default ", kDefaultTarget, ")\n");
}

}  // namespace cli
}  // namespace gpupipe
