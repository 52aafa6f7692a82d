#include "client/cli/args.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/enum_names.h"
#include "client/job_client.h"
#include "client/ops_grammar.h"
#include "client/suggest.h"

namespace gpupipe {
namespace cli {
namespace {

constexpr size_t kMaxTagBytes = 128;
constexpr uint32_t kMaxStages = 8;
constexpr int kMaxRepeat = 1000;
// stats --watch: fast enough to follow a burst, slow enough not to load the daemon; a day at most.
constexpr double kMinWatchSeconds = 0.1;
constexpr double kMaxWatchSeconds = 86400;

std::string Choices(const google::protobuf::EnumDescriptor& type) {
  return absl::StrJoin(client::FlagEnumNames(type), "|");
}

// Help text column of option descriptions, and the width help lines stay within.
constexpr size_t kHelpIndent = 23;
constexpr size_t kHelpWidth = 92;

// `text` broken at spaces into lines of at most kHelpWidth columns, each indented by `indent`
// spaces and ending in a newline: the list of ops grows with the proto.
std::string Wrapped(absl::string_view text, size_t indent) {
  std::string out;
  std::string line;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line.empty() && indent + line.size() + 1 + word.size() > kHelpWidth) {
      absl::StrAppend(&out, std::string(indent, ' '), line, "\n");
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  if (!line.empty()) absl::StrAppend(&out, std::string(indent, ' '), line, "\n");
  return out;
}

absl::Status Usage(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

struct OptionSpec {
  bool takes_value;
  // Commands the option belongs to; empty for global options.
  std::vector<std::string> commands;
  // The value may be left out (for `submit`, which takes no other arguments): the next
  // argument is the value unless it is an option.
  bool value_optional = false;
};

const std::map<std::string, OptionSpec>& Options() {
  static const auto* options = new std::map<std::string, OptionSpec>{
      {"--target", {true, {}}},
      {"--deadline", {true, {}}},
      {"--client-id", {true, {}}},
      {"--priority-target", {true, {}}},
      {"--tls-ca", {true, {}}},
      {"--tls-cert", {true, {}}},
      {"--tls-key", {true, {}}},
      {"--token-file", {true, {}}},
      {"--input", {true, {"submit", "compare"}}},
      {"--ops", {true, {"submit", "compare", "bench"}}},
      {"--output", {true, {"submit"}}},
      {"--priority", {true, {"submit", "compare", "bench"}}},
      {"--staging", {true, {"submit", "compare"}}},
      {"--stages", {true, {"submit", "compare"}}},
      {"--launch", {true, {"submit", "compare"}}},
      {"--tag", {true, {"submit"}}},
      {"--repeat", {true, {"compare"}}},
      {"--profile", {false, {"submit"}}},
      {"--timeline", {true, {"submit", "bench"}, /*value_optional=*/true}},
      {"--explain", {false, {"submit"}}},
      {"--dry-run", {false, {"submit"}}},
      {"--stream", {true, {"submit"}}},
      {"--transport", {true, {"submit"}}},
      {"--streams", {true, {"submit"}}},
      {"--service", {true, {"health"}}},
      {"--watch", {true, {"stats"}}},
      {"--count", {true, {"stats"}}},
      {"--mix", {true, {"bench"}}},
      {"--shape", {true, {"bench"}}},
      {"--dtype", {true, {"bench"}}},
      {"--concurrency", {true, {"bench"}}},
      {"--rate", {true, {"bench"}}},
      {"--duration", {true, {"bench"}}},
      {"--warmup", {true, {"bench"}}},
      {"--requests", {true, {"bench"}}},
      {"--channels", {true, {"bench"}}},
      {"--no-echo", {false, {"bench"}}},
      {"--echo-stream", {false, {"bench"}}},
      {"--streamed", {false, {"bench"}}},
      {"--csv", {false, {"bench"}}},
  };
  return *options;
}

// The commands with their own help, in the order the main help lists them.
const std::vector<std::string>& HelpTopics() {
  static const auto* topics =
      new std::vector<std::string>{"submit", "compare", "bench", "describe", "stats", "health"};
  return *topics;
}

const std::vector<std::string>& CommandNames() {
  static const auto* names = [] {
    auto* all = new std::vector<std::string>(HelpTopics());
    all->push_back("help");
    all->push_back("version");
    return all;
  }();
  return *names;
}

bool IsIn(const std::vector<std::string>& names, absl::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool IsCommand(absl::string_view name) { return IsIn(CommandNames(), name); }
bool IsHelpTopic(absl::string_view name) { return IsIn(HelpTopics(), name); }

// The options a mistyped `name` may have meant: global ones and those of `command`.
std::vector<std::string> OptionsFor(const std::string& command) {
  std::vector<std::string> names = {"--json", "--help", "--version"};
  for (const auto& [option, spec] : Options()) {
    if (spec.commands.empty() || command.empty() || IsIn(spec.commands, command)) {
      names.push_back(option);
    }
  }
  return names;
}

std::string BelongsTo(const std::string& option, const std::vector<std::string>& commands) {
  return absl::StrCat("option ", option, " belongs to the ", absl::StrJoin(commands, " and "),
                      commands.size() == 1 ? " command" : " commands");
}

template <typename Enum>
absl::Status ParseEnumOption(const std::string& option, const std::string& value,
                             const google::protobuf::EnumDescriptor& type, Enum* out) {
  const google::protobuf::EnumValueDescriptor* v = client::FindEnumValue(type, value);
  if (v == nullptr) {
    return Usage(absl::StrCat(option, ": unknown value '", value, "'",
                              client::DidYouMean(value, client::FlagEnumNames(type)), " (expected ",
                              absl::StrJoin(client::FlagEnumNames(type), ", "), ")"));
  }
  *out = static_cast<Enum>(v->number());
  return absl::OkStatus();
}

// A comma-separated list of distinct values, e.g. "stream, pdl,graph".
template <typename Enum>
absl::Status ParseEnumList(const std::string& option, const std::string& value,
                           const google::protobuf::EnumDescriptor& type, std::vector<Enum>* out) {
  out->clear();
  for (absl::string_view item : absl::StrSplit(value, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item.empty()) {
      return Usage(absl::StrCat(option, ": empty item in '", value, "' (expected a list like ",
                                absl::StrJoin(client::FlagEnumNames(type), ","), ")"));
    }
    Enum e;
    absl::Status st = ParseEnumOption(option, std::string(item), type, &e);
    if (!st.ok()) return st;
    if (std::find(out->begin(), out->end(), e) != out->end()) {
      return Usage(absl::StrCat(option, ": '", client::FlagEnumName(type, e), "' listed twice"));
    }
    out->push_back(e);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::Op>> ParseOpsOption(const std::string& text) {
  absl::StatusOr<std::vector<v1::Op>> ops = client::ParseOps(text);
  if (!ops.ok()) return Usage(absl::StrCat("ops: ", ops.status().message()));
  return ops;
}

// A comma-separated list of numbers, each in [lo, hi].
template <typename T>
absl::Status ParseNumberList(const std::string& option, const std::string& value, T lo, T hi,
                             std::vector<T>* out) {
  out->clear();
  for (absl::string_view item : absl::StrSplit(value, ',')) {
    item = absl::StripAsciiWhitespace(item);
    T v{};
    bool ok;
    if constexpr (std::is_integral_v<T>) {
      ok = absl::SimpleAtoi(item, &v);
    } else {
      ok = absl::SimpleAtod(item, &v) && std::isfinite(v);
    }
    if (!ok || v < lo || v > hi) {
      return Usage(absl::StrCat(option, ": expected numbers from ", lo, " to ", hi,
                                " separated by commas, got '", value, "'"));
    }
    out->push_back(v);
  }
  return absl::OkStatus();
}

absl::StatusOr<Args> ParseBench(Args args, const std::map<std::string, std::string>& values,
                                const std::set<std::string>& given, v1::Priority priority) {
  args.command = Command::kBench;
  BenchArgs& b = args.bench;
  const auto get = [&](const std::string& name) -> const std::string* {
    const auto it = values.find(name);
    return it == values.end() ? nullptr : &it->second;
  };
  if (const std::string* path = get("--mix")) {
    for (const char* single : {"--ops", "--shape", "--dtype", "--priority"}) {
      if (given.count(single) != 0) {
        return Usage(absl::StrCat("--mix and ", single, ": the mix file names every entry's"));
      }
    }
    absl::StatusOr<std::vector<bench::MixEntry>> mix = bench::ReadMixFile(*path);
    if (!mix.ok()) return Usage(absl::StrCat("--mix: ", mix.status().message()));
    b.mix = *std::move(mix);
  } else {
    const std::string* ops = get("--ops");
    if (ops == nullptr) return Usage("bench: missing --ops PIPELINE (or --mix FILE)");
    std::string line = absl::StrCat("ops=", *ops);
    if (const std::string* v = get("--shape")) absl::StrAppend(&line, "; shape=", *v);
    if (const std::string* v = get("--dtype")) absl::StrAppend(&line, "; dtype=", *v);
    if (priority != v1::PRIORITY_UNSPECIFIED) {
      absl::StrAppend(&line,
                      "; priority=", client::FlagEnumName(*v1::Priority_descriptor(), priority));
    }
    if (absl::StrContains(*ops, ';')) return Usage("ops: ';' is not part of a pipeline");
    absl::StatusOr<bench::MixEntry> entry = bench::ParseMixLine(line);
    if (!entry.ok()) return Usage(std::string(entry.status().message()));
    b.mix = {*std::move(entry)};
  }
  if (const std::string* v = get("--concurrency")) {
    if (absl::Status s =
            ParseNumberList("--concurrency", *v, 1, kMaxBenchConcurrency, &b.concurrency);
        !s.ok()) {
      return s;
    }
  }
  if (const std::string* v = get("--rate")) {
    if (given.count("--concurrency") != 0) {
      return Usage(
          "--rate and --concurrency: an open loop sends at its rate, whatever is in flight");
    }
    if (absl::Status s = ParseNumberList("--rate", *v, 0.1, 1e6, &b.rates); !s.ok()) return s;
  }
  for (const auto& [name, target, lo, hi] : {std::tuple<const char*, double*, double, double>{
                                                 "--duration", &b.duration_seconds, 0.1, 3600},
                                             {"--warmup", &b.warmup_seconds, 0, 600}}) {
    if (const std::string* v = get(name)) {
      double d = 0;
      if (!absl::SimpleAtod(*v, &d) || !std::isfinite(d) || d < lo || d > hi) {
        return Usage(
            absl::StrCat(name, ": expected seconds from ", lo, " to ", hi, ", got '", *v, "'"));
      }
      *target = d;
    }
  }
  if (const std::string* v = get("--requests")) {
    if (!absl::SimpleAtoi(*v, &b.requests) || b.requests < 1) {
      return Usage(absl::StrCat("--requests: expected a positive integer, got '", *v, "'"));
    }
  }
  if (const std::string* v = get("--channels")) {
    if (!absl::SimpleAtoi(*v, &b.channels) || b.channels < 1 || b.channels > kMaxBenchChannels) {
      return Usage(absl::StrCat("--channels: expected an integer from 1 to ", kMaxBenchChannels,
                                ", got '", *v, "'"));
    }
  }
  if (const std::string* v = get("--timeline")) {
    if (v->empty()) return Usage("--timeline: bench draws into a file: --timeline FILE.svg");
    b.timeline_svg = *v;
  }
  b.echo = given.count("--no-echo") == 0;
  b.echo_stream = given.count("--echo-stream") != 0;
  b.streamed = given.count("--streamed") != 0;
  if (b.echo_stream && !b.echo) return Usage("--echo-stream and --no-echo: choose one");
  b.csv = given.count("--csv") != 0;
  if (b.csv && args.json) return Usage("--csv and --json: choose one");
  return args;
}

}  // namespace

bool WantsJson(const std::vector<std::string>& argv) {
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--json") return true;
    const auto it = Options().find(argv[i]);
    if (it != Options().end() && it->second.takes_value &&
        !(it->second.value_optional && (i + 1 >= argv.size() || argv[i + 1].rfind('-', 0) == 0))) {
      ++i;  // `--tag --json` is a tag
    }
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
  // Raw values of the command's options, interpreted once all arguments are read.
  std::map<std::string, std::string> values;

  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-') {
      if (!have_command) {
        if (IsCommand(arg)) {
          have_command = true;
          command_name = arg;
          continue;
        }
        return Usage(absl::StrCat("unknown command '", arg, "'",
                                  client::DidYouMean(arg, CommandNames()),
                                  " (commands: ", absl::StrJoin(HelpTopics(), ", "), ")"));
      }
      if (command_name == "help" && args.help_topic.empty()) {
        if (!IsHelpTopic(arg)) {
          return Usage(absl::StrCat("no help for '", arg, "'",
                                    client::DidYouMean(arg, HelpTopics()),
                                    " (topics: ", absl::StrJoin(HelpTopics(), ", "), ")"));
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
    const auto spec = Options().find(name);
    if (spec == Options().end()) {
      return Usage(absl::StrCat(
          "unknown option '", name, "'", have_command ? absl::StrCat(" for ", command_name) : "",
          client::DidYouMean(name, OptionsFor(command_name)), " (see gpupipe ",
          have_command ? command_name + " " : "", "--help)"));
    }
    const std::vector<std::string>& commands = spec->second.commands;
    if (!commands.empty() &&
        std::find(commands.begin(), commands.end(), command_name) == commands.end()) {
      return Usage(BelongsTo(name, commands));
    }
    if (!spec->second.takes_value) {
      if (has_value) return Usage(absl::StrCat(name, " takes no value"));
    } else if (!has_value) {
      const bool next_is_value = i + 1 < argv.size() && argv[i + 1].rfind('-', 0) != 0;
      if (spec->second.value_optional && !next_is_value) {
        // Given without its value.
      } else if (i + 1 >= argv.size()) {
        return Usage(absl::StrCat(name, " needs a value"));
      } else {
        value = argv[++i];
      }
    }
    if (!given.insert(name).second) return Usage(absl::StrCat(name, " given twice"));

    if (name == "--target") {
      if (value.empty()) return Usage("--target: empty (expected HOST:PORT)");
      args.target = value;
      args.target_given = true;
    } else if (name == "--deadline") {
      double d;
      if (!absl::SimpleAtod(value, &d) || !std::isfinite(d) || d <= 0) {
        return Usage(absl::StrCat("--deadline: expected a positive number of seconds, got '",
                                  value, "'"));
      }
      args.deadline_seconds = d;
    } else if (name == "--priority-target") {
      if (value.empty()) return Usage("--priority-target: empty address");
      args.priority_target = value;
    } else if (name == "--client-id") {
      if (value.empty() || value.size() > kMaxClientIdBytes) {
        return Usage(
            absl::StrCat("--client-id: 1 to ", kMaxClientIdBytes, " bytes, got ", value.size()));
      }
      if (!client::IsMetadataValue(value)) {
        return Usage("--client-id: printable ASCII only (space to '~'), as gRPC metadata is");
      }
      args.client_id = value;
    } else if (name == "--tls-ca" || name == "--tls-cert" || name == "--tls-key" ||
               name == "--token-file") {
      if (value.empty()) return Usage(absl::StrCat(name, ": empty path"));
      (name == "--tls-ca"     ? args.tls_ca
       : name == "--tls-cert" ? args.tls_cert
       : name == "--tls-key"  ? args.tls_key
                              : args.token_file) = value;
    } else {
      values[name] = value;
    }
  }

  if (help || command_name == "help") {
    args.command = Command::kHelp;
    if (IsHelpTopic(command_name)) args.help_topic = command_name;
    return args;
  }
  if (version || command_name == "version") {
    args.command = Command::kVersion;
    return args;
  }
  if (!have_command) {
    return Usage(absl::StrCat("missing command (commands: ", absl::StrJoin(HelpTopics(), ", "),
                              "; see gpupipe --help)"));
  }
  if (command_name == "describe") {
    args.command = Command::kDescribe;
    return args;
  }
  if (command_name == "health") {
    args.command = Command::kHealth;
    if (const auto it = values.find("--service"); it != values.end()) {
      args.health_service = it->second;
    }
    return args;
  }
  if (command_name == "stats") {
    args.command = Command::kStats;
    if (const auto it = values.find("--watch"); it != values.end()) {
      double seconds;
      if (!absl::SimpleAtod(it->second, &seconds) || !std::isfinite(seconds) ||
          seconds < kMinWatchSeconds || seconds > kMaxWatchSeconds) {
        return Usage(absl::StrCat("--watch: expected seconds from ", kMinWatchSeconds, " to ",
                                  kMaxWatchSeconds, ", got '", it->second, "'"));
      }
      args.watch_seconds = seconds;
    }
    if (const auto it = values.find("--count"); it != values.end()) {
      if (!absl::SimpleAtoi(it->second, &args.watch_count) || args.watch_count < 1) {
        return Usage(absl::StrCat("--count: expected a positive integer, got '", it->second, "'"));
      }
      if (args.watch_seconds == 0) return Usage("--count needs --watch");
    }
    return args;
  }

  // Options shared by submit and compare.
  const auto get = [&](const std::string& name) -> const std::string* {
    const auto it = values.find(name);
    return it == values.end() ? nullptr : &it->second;
  };
  std::string input;
  if (const std::string* v = get("--input")) {
    if (v->empty()) return Usage("--input: empty path");
    input = *v;
  }
  v1::Priority priority = v1::PRIORITY_UNSPECIFIED;
  if (const std::string* v = get("--priority")) {
    absl::Status st = ParseEnumOption("--priority", *v, *v1::Priority_descriptor(), &priority);
    if (!st.ok()) return st;
  }
  uint32_t stages = 0;
  if (const std::string* v = get("--stages")) {
    if (!absl::SimpleAtoi(*v, &stages) || stages > kMaxStages) {
      return Usage(absl::StrCat("--stages: expected an integer from 0 (backend default) to ",
                                kMaxStages, ", got '", *v, "'"));
    }
  }
  const std::string* ops_text = get("--ops");

  if (command_name == "bench") return ParseBench(std::move(args), values, given, priority);

  if (command_name == "compare") {
    args.command = Command::kCompare;
    CompareArgs& c = args.compare;
    c.priority = priority;
    c.stages = stages;
    c.launches = {v1::LAUNCH_STREAM, v1::LAUNCH_PDL, v1::LAUNCH_GRAPH, v1::LAUNCH_GRAPH_PDL};
    c.stagings = {v1::STAGING_DIRECT, v1::STAGING_PIPELINE, v1::STAGING_PIPELINE_THREAD,
                  v1::STAGING_PRIMITIVES, v1::STAGING_BULK};
    if (const std::string* v = get("--launch")) {
      absl::Status st = ParseEnumList("--launch", *v, *v1::LaunchMode_descriptor(), &c.launches);
      if (!st.ok()) return st;
      c.launches_given = true;
    }
    if (const std::string* v = get("--staging")) {
      absl::Status st = ParseEnumList("--staging", *v, *v1::Staging_descriptor(), &c.stagings);
      if (!st.ok()) return st;
      c.stagings_given = true;
    }
    if (const std::string* v = get("--repeat")) {
      if (!absl::SimpleAtoi(*v, &c.repeat) || c.repeat < 1 || c.repeat > kMaxRepeat) {
        return Usage(absl::StrCat("--repeat: expected an integer from 1 to ", kMaxRepeat,
                                  ", got '", *v, "'"));
      }
    }
    if (input.empty()) return Usage("compare: missing --input FILE.npy");
    if (ops_text == nullptr) return Usage("compare: missing --ops PIPELINE");
    c.input = input;
    c.ops_text = *ops_text;
    absl::StatusOr<std::vector<v1::Op>> ops = ParseOpsOption(c.ops_text);
    if (!ops.ok()) return ops.status();
    c.ops = *std::move(ops);
    return args;
  }

  args.command = Command::kSubmit;
  SubmitArgs& s = args.submit;
  s.priority = priority;
  s.options.set_stages(stages);
  if (const std::string* v = get("--output")) {
    if (v->empty()) return Usage("--output: empty path");
    s.output = *v;
  }
  if (const std::string* v = get("--staging")) {
    v1::Staging staging;
    absl::Status st = ParseEnumOption("--staging", *v, *v1::Staging_descriptor(), &staging);
    if (!st.ok()) return st;
    s.options.set_staging(staging);
  }
  if (const std::string* v = get("--launch")) {
    v1::LaunchMode launch;
    absl::Status st = ParseEnumOption("--launch", *v, *v1::LaunchMode_descriptor(), &launch);
    if (!st.ok()) return st;
    s.options.set_launch(launch);
  }
  if (const std::string* v = get("--tag")) {
    if (v->size() > kMaxTagBytes) {
      return Usage(absl::StrCat("--tag: ", v->size(), " bytes; at most ", kMaxTagBytes));
    }
    s.tag = *v;
  }
  s.options.set_profile(given.count("--profile") != 0);
  s.options.set_timeline(given.count("--timeline") != 0);
  if (const std::string* v = get("--timeline")) s.timeline_svg = *v;
  s.explain = given.count("--explain") != 0;
  s.dry_run = given.count("--dry-run") != 0;
  if (const std::string* v = get("--stream")) {
    if (*v == "auto") s.stream = StreamMode::kAuto;
    else if (*v == "always") s.stream = StreamMode::kAlways;
    else if (*v == "never") s.stream = StreamMode::kNever;
    else return Usage(absl::StrCat("--stream: expected auto, always or never, got '", *v, "'"));
  }
  if (const std::string* v = get("--transport")) {
    if (*v == "auto")
      s.transport = TransportMode::kAuto;
    else if (*v == "grpc")
      s.transport = TransportMode::kGrpc;
    else if (*v == "shm")
      s.transport = TransportMode::kShm;
    else
      return Usage(absl::StrCat("--transport: expected auto, grpc or shm, got '", *v, "'"));
  }
  if (const std::string* v = get("--streams")) {
    int n = 0;
    if (!absl::SimpleAtoi(*v, &n) || n < 1 || n > kMaxStreams) {
      return Usage(absl::StrCat("--streams: expected a number of calls from 1 to ", kMaxStreams,
                                ", got '", *v, "'"));
    }
    s.streams = n;
  }
  if (s.transport == TransportMode::kShm && s.streams > 0) {
    return Usage("--transport shm and --streams: shared memory carries the input itself");
  }
  if (s.transport == TransportMode::kShm && s.stream == StreamMode::kAlways) {
    return Usage("--transport shm and --stream always: shared memory carries the input itself");
  }
  if (input.empty()) return Usage("submit: missing --input FILE.npy");
  if (ops_text == nullptr) return Usage("submit: missing --ops PIPELINE");
  s.input = input;
  s.ops_text = *ops_text;
  absl::StatusOr<std::vector<v1::Op>> ops = ParseOpsOption(s.ops_text);
  if (!ops.ok()) return ops.status();
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
      "  compare    time a pipeline under every launch mode and staging strategy\n"
      "             (gpupipe compare --help)\n"
      "  bench      load the daemon with a mix of jobs and measure throughput and\n"
      "             latency beside a plain gRPC echo (gpupipe bench --help)\n"
      "  describe   show the daemon's device, ops, launch modes and limits\n"
      "  stats      show what the daemon has done and is doing: jobs by priority and\n"
      "             client, latencies, pools, refusals (gpupipe stats --help)\n"
      "  health     ask the daemon's health service (no token needed); exit 0 only when\n"
      "             it is serving (gpupipe health --help)\n"
      "\n"
      "global options (also accepted after the command):\n"
      "  --target HOST:PORT   daemon address; a host alone means port 50051 (default\n"
      "                       $GPUPIPE_TARGET, else ",
      kDefaultTarget,
      ").\n"
      "                       Several daemons: HOST:PORT,HOST:PORT,... (names resolved\n"
      "                       once) or dns:///NAME:PORT (every address, followed as it\n"
      "                       changes): calls go round-robin over those that serve, a\n"
      "                       draining one gets no new jobs, and a job it refused is sent\n"
      "                       to the next (never one it accepted). describe, stats and\n"
      "                       health ask one of them; shared memory and split uploads\n"
      "                       need a target that names one\n"
      "  --priority-target HOST:PORT\n"
      "                       the daemon's priority listener (gpupiped --priority-listen):\n"
      "                       bench sends its high-priority jobs there, each job as one\n"
      "                       SubmitSmall call; everything else goes to --target\n"
      "  --deadline SECONDS   give up on a call after this long (default 300)\n"
      "  --client-id ID       who the daemon counts this client as, within its address\n"
      "                       (per-client limits and fair share; default: the address)\n"
      "  --tls-ca FILE        talk TLS, trusting the server certificate this CA (PEM)\n"
      "                       signed ($GPUPIPE_TLS_CA)\n"
      "  --tls-cert FILE, --tls-key FILE\n"
      "                       a client certificate and key for mutual TLS\n"
      "  --token-file FILE    send the token in FILE with every call ($GPUPIPE_TOKEN holds\n"
      "                       the token itself)\n"
      "  --json               print one JSON object instead of text\n"
      "  -h, --help           show help (gpupipe <command> --help for a command)\n"
      "  --version            print the version\n"
      "\n"
      "exit status: 0 on success, 1 on a runtime or server error, 2 on a usage error\n");
}

std::string HealthHelp() {
  return "usage: gpupipe [--target HOST:PORT] health [--service NAME] [--json]\n"
         "\n"
         "Asks the daemon's standard gRPC health service, which needs no token, whether it\n"
         "serves: the whole server, or --service NAME (gpupipe.v1.JobService). Prints\n"
         "SERVING, NOT_SERVING (starting, draining, or its device failed) or SERVICE_UNKNOWN,\n"
         "and exits 0 only for SERVING: for scripts and container health checks. With several\n"
         "daemons (--target A,B,...) it asks one that serves, and fails when none does.\n";
}

std::string StatsHelp() {
  return "usage: gpupipe [--target HOST:PORT] stats [--watch SECONDS [--count N]] [--json]\n"
         "\n"
         "Shows the daemon's figures (the GetStats RPC; the same as its Prometheus metrics):\n"
         "per priority the lanes, busy lanes, queued jobs, jobs ended (ok and failed), queue\n"
         "wait, device time and total time (p50 and p99 from histograms), bytes in and out;\n"
         "per client its active jobs, uploads, queued bytes and ended jobs; the memory pools;\n"
         "the graph cache; calls refused before a job existed, by reason. With several\n"
         "daemons (--target A,B,...) one of them answers: ask each with a target of its own.\n"
         "\n"
         "options:\n"
         "  --watch SECONDS      show them again every SECONDS (0.1 to 86400) until stopped;\n"
         "                       with --json, one object per line; a daemon that cannot be\n"
         "                       reached is asked again at the next refresh\n"
         "  --count N            with --watch, stop after N refreshes (exit 1 when the last\n"
         "                       could not reach the daemon)\n";
}

std::string SubmitHelp() {
  return absl::StrCat(
      "usage: gpupipe [--target HOST:PORT] submit --input X.npy --ops PIPELINE [options]\n"
      "\n"
      "Runs PIPELINE on the tensor in X.npy and prints a summary with timings.\n"
      "\n"
      "options:\n"
      "  --input X.npy        input tensor (<f4, <f8, <f2, <i4 or <i8, C order)\n"
      "  --ops PIPELINE       ops joined by '|', e.g. 'affine(alpha=2, beta=1) | relu | softmax'\n",
      Wrapped(absl::StrCat("(ops: ", absl::StrJoin(client::KnownOps(), ", "),
                           "; see gpupipe describe)"),
              kHelpIndent),
      "  --output Y.npy       write the result here as it arrives (into a temporary file\n"
      "                       renamed over Y.npy once complete); without it, results of at\n"
      "                       most 16 elements are printed\n"
      "  --priority P         ",
      Choices(*v1::Priority_descriptor()),
      " (default normal)\n"
      "  --staging S          ",
      Choices(*v1::Staging_descriptor()),
      " (default auto)\n"
      "  --stages N           buffers in flight for the staged strategies (all but direct),\n"
      "                       1 to 8 (0: backend default)\n"
      "  --launch L           ",
      Choices(*v1::LaunchMode_descriptor()),
      " (default auto)\n"
      "                       stream: plain launches; pdl: dependent kernels overlap their\n"
      "                       prologue (Programmatic Dependent Launch); graph: the plan is\n"
      "                       captured once as a CUDA graph and replayed; graph-pdl: both\n"
      "  --profile            time every plan step on its own and print a table of steps\n"
      "                       (the events between steps add a little time)\n"
      "  --timeline [FILE.svg]\n"
      "                       print when each chunk was copied in, computed and copied out;\n"
      "                       with a file, also draw it there (a bar per chunk and stage)\n"
      "                       (jobs run in chunks: gpupiped --chunk-mib)\n"
      "  --explain            print the plan first: kernels, their grids and dependencies\n"
      "  --dry-run            validate and plan only; print the plan, run nothing, write no\n"
      "                       --output\n"
      "  --tag TEXT           free text for the daemon's log line (at most 128 bytes)\n"
      "  --stream MODE        auto|always|never: upload the input in chunks with the Run RPC\n"
      "                       (read from disk as it is sent, for inputs over the Submit\n"
      "                       limit); auto streams inputs over ",
      kStreamAutoBytes >> 20,
      " MiB (default auto).\n"
      "                       On a terminal, a progress bar shows the upload and the result\n"
      "  --streams N          split a streamed upload and its result over N calls, each on a\n"
      "                       connection of its own (default: 1 below 64 MiB, else 2,\n"
      "                       at most the daemon's --max-run-streams)\n"
      "  --transport MODE     auto|grpc|shm: shm puts the input and the result in shared\n"
      "                       memory the daemon maps (same host; a container needs\n"
      "                       --ipc=host or a shared /dev/shm), so only events cross the\n"
      "                       connection; auto does so for a local target (unix:, localhost,\n"
      "                       127.x, ::1) and inputs of ",
      kShmAutoBytes >> 20,
      " MiB or more, else and where\n"
      "                       the daemon cannot map it uses grpc (default auto)\n"
      "  --json               print one JSON object instead of text\n"
      "  --target HOST:PORT   daemon address (default ",
      kDefaultTarget, ")\n");
}

std::string CompareHelp() {
  return absl::StrCat(
      "usage: gpupipe [--target HOST:PORT] compare --input X.npy --ops PIPELINE [options]\n"
      "\n"
      "Runs PIPELINE on X.npy under every launch mode x staging strategy: one unmeasured\n"
      "warm-up run per configuration, then --repeat measured runs. Prints one row per\n"
      "configuration: the median device time (Timing.compute_us), the median end-to-end time\n"
      "of the Submit call as the client sees it, GB/s (input + output bytes over the device\n"
      "time), the speedup of the device time against stream/direct (or the first row when\n"
      "stream/direct is not compared), and the graph cache status of the last run.\n"
      "Every configuration must return the same output bytes; a difference is an error\n"
      "(exit 1). Results are not written anywhere.\n"
      "\n"
      "options:\n"
      "  --input X.npy        input tensor (<f4, <f8, <f2, <i4 or <i8, C order)\n"
      "  --ops PIPELINE       ops joined by '|' (as for submit)\n"
      "  --launch L,...       launch modes from ", Choices(*v1::LaunchMode_descriptor()), "\n"
      "                       (default stream,pdl,graph,graph-pdl)\n"
      "  --staging S,...      staging strategies from ", Choices(*v1::Staging_descriptor()),
      "\n"
      "                       (default direct,pipeline,pipeline-thread,primitives,bulk)\n"
      "  --stages N           buffers in flight for the staged strategies (all but direct),\n"
      "                       1 to 8 (0: backend default)\n"
      "  --repeat N           measured runs per configuration, 1 to ", kMaxRepeat, " (default ",
      kDefaultRepeat, ")\n"
      "  --priority P         ", Choices(*v1::Priority_descriptor()), " (default normal)\n"
      "  --json               print one JSON object instead of the table\n"
      "  --target HOST:PORT   daemon address (default ", kDefaultTarget, ")\n");
}

std::string DescribeHelp() {
  return absl::StrCat(
      "usage: gpupipe [--target HOST:PORT] describe [--json]\n"
      "\n"
      "Shows the daemon's backend, device, stream priorities, ops (with params and dtypes),\n"
      "staging and launch modes, graph cache counters, and request limits.\n"
      "\n"
      "options:\n"
      "  --json               print the DescribeResponse as one JSON object\n"
      "  --target HOST:PORT   daemon address (default ", kDefaultTarget, ")\n");
}

}  // namespace cli
}  // namespace gpupipe

namespace gpupipe {
namespace cli {

std::string BenchHelp() {
  return absl::StrCat(
      "usage: gpupipe [--target HOST:PORT] bench (--ops PIPELINE [--shape 1x1024]\n"
      "                [--dtype float32] [--priority P] | --mix FILE) [options]\n"
      "\n"
      "Loads the daemon with jobs and reports throughput, latency (p50, p90, p99, max) and\n"
      "where the time went (accept, queue, device, transport, from each job's timing).\n"
      "Every point is measured twice in the same run: against the daemon, and against a\n"
      "plain unary gRPC echo that a process started by the bench serves on loopback with\n"
      "the same message sizes, the floor any gRPC service pays. Each job's result is\n"
      "checked against the first result of the same input; a difference is reported as a\n"
      "mismatch. Failed jobs are counted as errors (with their messages); either makes the\n"
      "exit status 1.\n"
      "\n"
      "A mix file has one entry per line, keys separated by ';', e.g.\n"
      "  weight=255; shape=1x1024; priority=low;  ops=affine(alpha=2) | relu | softmax\n"
      "  weight=1;   shape=1x1024; priority=high; ops=softmax\n"
      "(keys: ops, shape, dtype, priority, weight; '#' starts a comment line).\n"
      "\n"
      "options:\n"
      "  --concurrency N,...  closed loop: N jobs in flight, one point per value (default\n"
      "                       1,4,16,64; at most ",
      kMaxBenchConcurrency,
      ")\n"
      "  --rate R,...         open loop instead: R jobs per second, whatever is in flight\n"
      "  --duration SECONDS   measured time per point and service (default 5)\n"
      "  --warmup SECONDS     unmeasured time before it (default 1)\n"
      "  --requests N         a point of N measured jobs instead (with --warmup 0, exactly\n"
      "                       N are sent)\n"
      "  --channels N         connections, each its own client (default 4; at most ",
      kMaxBenchChannels,
      "); with\n"
      "                       several daemons (--target A,B,...), each channel balances over\n"
      "                       all of them, and the report counts the jobs each daemon ran\n"
      "                       (\"per daemon\"; \"daemons\" in --json, a column in --csv)\n"
      "  --no-echo            leave the echo floor out\n"
      "  --echo-stream        also measure the floor as a server-streaming call with one\n"
      "                       reply, the shape of a job's Submit (echo-stream)\n"
      "  --streamed           send every job as a Submit stream, never as one unary\n"
      "                       SubmitSmall call (as a small job goes by default)\n"
      "  --csv                CSV (one line per point and service) instead of the table\n"
      "  --timeline FILE.svg  draw the daemon's lanes over the last point's final second\n"
      "                       (from its stats: a bar per launch, batches marked)\n"
      "  --json               one JSON object with every figure\n"
      "\n"
      "On a terminal, a progress line shows on stderr.\n");
}

}  // namespace cli
}  // namespace gpupipe
