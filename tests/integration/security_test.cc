// Transport security against the real daemon: TLS and mutual TLS with certificates made here
// with openssl, bearer tokens (and their reload on SIGHUP), health without a token, and the
// listen rules (no plaintext beyond loopback without --insecure, no shared port).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "client/job_client.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/integration/binaries.h"
#include "tests/integration/process.h"
#include "tests/testing/random_tensor.h"

namespace gpupipe::testing {
namespace {

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A CA, a server certificate for localhost and 127.0.0.1, a client certificate (CN worker-1)
// from that CA, and a second CA that signed none of them; made with openssl in a temporary
// directory.
class Pki {
 public:
  Pki() {
    char tmpl[] = "/tmp/gpupipe-pki-XXXXXX";
    dir_ = mkdtemp(tmpl);
    Ca("ca");
    Ca("other-ca");
    WriteText(dir_ + "/server.ext", "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
    Signed("server", "localhost", "server.ext");
    WriteText(dir_ + "/client.ext", "extendedKeyUsage=clientAuth\n");
    Signed("client", "worker-1", "client.ext");
  }
  ~Pki() { std::system(("rm -rf " + dir_).c_str()); }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string pem(const std::string& name) const { return ReadText(path(name)); }
  const std::string& error() const { return error_; }

 private:
  void Run(const std::vector<std::string>& argv) {
    CommandResult r = RunCommand(argv);
    if (r.exit_code != 0) error_ += argv[1] + ": " + r.err + "\n";
  }
  void Ca(const std::string& name) {
    Run({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
         "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", path(name + ".key"), "-out",
         path(name + ".pem"), "-days", "2", "-subj", "/CN=gpupipe test " + name});
  }
  void Signed(const std::string& name, const std::string& cn, const std::string& ext) {
    Run({"/usr/bin/openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", path(name + ".key"), "-out", path(name + ".csr"), "-subj",
         "/CN=" + cn});
    Run({"/usr/bin/openssl", "x509", "-req", "-in", path(name + ".csr"), "-CA", path("ca.pem"),
         "-CAkey", path("ca.key"), "-CAcreateserial", "-out", path(name + ".pem"), "-days", "2",
         "-extfile", path(ext)});
  }

  std::string dir_;
  std::string error_;
};

v1::SubmitRequest Relu(const std::vector<float>& x) {
  v1::SubmitRequest r;
  r.mutable_input()->set_dtype(v1::DTYPE_FLOAT32);
  r.mutable_input()->add_shape(static_cast<int64_t>(x.size()));
  r.mutable_input()->set_data(AsBytes(x));
  r.add_ops()->mutable_relu();
  return r;
}

absl::Status RunJob(const std::string& target, const client::ClientOptions& options) {
  auto c = client::JobClient::Create(target, options);
  if (!c.ok()) return c.status();
  absl::StatusOr<client::JobResult> r = (*c)->Submit(Relu({-1, 2}));
  if (!r.ok()) return r.status();
  return AsFloats(r->output.data()) == std::vector<float>{0, 2}
             ? absl::OkStatus()
             : absl::InternalError("wrong result");
}

std::string Localhost(const DaemonProcess& d) { return "localhost:" + std::to_string(d.port()); }

int JobLines(const std::string& log) {
  int n = 0;
  for (size_t at = log.find("gpupiped: job "); at != std::string::npos;
       at = log.find("gpupiped: job ", at + 1)) {
    ++n;
  }
  return n;
}

TEST(Security, TlsServesTlsClientsOnly) {
  Pki pki;
  ASSERT_TRUE(pki.error().empty()) << pki.error();
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--tls-cert", pki.path("server.pem"),
                                        "--tls-key", pki.path("server.key")});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  EXPECT_NE(daemon.log().find("(version 0.1.0, TLS)"), std::string::npos) << daemon.log();
  client::ClientOptions tls;
  tls.tls_ca_pem = pki.pem("ca.pem");
  EXPECT_TRUE(RunJob(Localhost(daemon), tls).ok());
  EXPECT_EQ(RunJob(Localhost(daemon), {}).code(), absl::StatusCode::kUnavailable)
      << "a plaintext client";
  client::ClientOptions wrong_ca;
  wrong_ca.tls_ca_pem = pki.pem("other-ca.pem");
  EXPECT_EQ(RunJob(Localhost(daemon), wrong_ca).code(), absl::StatusCode::kUnavailable)
      << "a client that trusts another CA";
  // Job lines are written in batches: the daemon writes what waits as it stops.
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.log();
  EXPECT_EQ(JobLines(daemon.log()), 1) << daemon.log();
}

TEST(Security, MutualTlsNeedsAClientCertificateFromTheCa) {
  Pki pki;
  ASSERT_TRUE(pki.error().empty()) << pki.error();
  DaemonProcess daemon(DaemonBinary(),
                       {"--backend", "cpu", "--tls-cert", pki.path("server.pem"), "--tls-key",
                        pki.path("server.key"), "--tls-client-ca", pki.path("ca.pem")});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  client::ClientOptions no_cert;
  no_cert.tls_ca_pem = pki.pem("ca.pem");
  EXPECT_EQ(RunJob(Localhost(daemon), no_cert).code(), absl::StatusCode::kUnavailable);
  client::ClientOptions with_cert = no_cert;
  with_cert.tls_cert_pem = pki.pem("client.pem");
  with_cert.tls_key_pem = pki.pem("client.key");
  EXPECT_TRUE(RunJob(Localhost(daemon), with_cert).ok());
  // The certificate's identity is the client the daemon counts and logs.
  EXPECT_TRUE(daemon.WaitForLog("client=\"worker-1\"")) << daemon.log();
}

class Tokens : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpupipe-tokens-XXXXXX";
    dir_ = mkdtemp(tmpl);
    WriteText(file(), "# test tokens\nci:" + std::string(kToken) + "\n");
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string file() const { return dir_ + "/tokens"; }

  static client::ClientOptions WithToken(const std::string& token) {
    client::ClientOptions o;
    o.token = token;
    return o;
  }

  static constexpr char kToken[] = "Zm9vYmFyYmF6cXV4LXRva2VuLTE";
  std::string dir_;
};

TEST_F(Tokens, ACallWithoutAValidTokenRunsNothingAndHealthNeedsNone) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--token-file", file()});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  const absl::Status none = RunJob(daemon.target(), {});
  EXPECT_EQ(none.code(), absl::StatusCode::kUnauthenticated) << none;
  EXPECT_EQ(RunJob(daemon.target(), WithToken("not-the-token-at-all-0000")).code(),
            absl::StatusCode::kUnauthenticated);
  auto describe = client::JobClient::Create(daemon.target(), {});
  EXPECT_EQ((*describe)->Describe().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(JobLines(daemon.log()), 0) << "a refused call ran a job";
  auto with_token = client::JobClient::Create(daemon.target(), WithToken(kToken));
  ASSERT_TRUE(with_token.ok());
  const auto ended = [&](const v1::StatsResponse& stats) {
    int64_t n = 0;
    for (const v1::PriorityStats& p : stats.priorities()) {
      for (const auto& [status, count] : p.jobs().by_status()) n += count;
    }
    return n;
  };
  absl::StatusOr<v1::StatsResponse> stats = (*with_token)->GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(ended(*stats), 0) << "the jobs counter moved for refused calls";
  EXPECT_EQ(stats->rejected().at("unauthenticated"), 3);
  EXPECT_EQ((*describe)->GetStats().status().code(), absl::StatusCode::kUnauthenticated);

  EXPECT_TRUE(RunJob(daemon.target(), WithToken(kToken)).ok());
  EXPECT_TRUE(daemon.WaitForLog("client=\"token:ci\"")) << daemon.log();
  EXPECT_EQ(JobLines(daemon.log()), 1);
  stats = (*with_token)->GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(ended(*stats), 1);
  ASSERT_EQ(stats->clients_size(), 1);
  EXPECT_EQ(stats->clients(0).client(), "token:ci");  // the token's name, never the token
  EXPECT_EQ(daemon.log().find(kToken), std::string::npos) << "the token reached the log";

  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(daemon.target(), grpc::InsecureChannelCredentials()));
  for (const char* service : {"", "gpupipe.v1.JobService"}) {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status s = health->Check(&context, request, &response);
    EXPECT_TRUE(s.ok()) << service << ": " << s.error_message();
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING) << service;
  }
}

TEST_F(Tokens, SighupReReadsTheTokensAndABrokenFileKeepsThoseInForce) {
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--token-file", file()});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  ASSERT_TRUE(RunJob(daemon.target(), WithToken(kToken)).ok());
  const std::string next = "bmV4dC10b2tlbi10d28tMDAwMDA";
  WriteText(file(), "ops:" + next + "\n");
  kill(daemon.pid(), SIGHUP);
  ASSERT_TRUE(daemon.WaitForLog("SIGHUP: tokens: 1")) << daemon.log();
  EXPECT_EQ(RunJob(daemon.target(), WithToken(kToken)).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(RunJob(daemon.target(), WithToken(next)).ok());
  WriteText(file(), "broken line\n");
  kill(daemon.pid(), SIGHUP);
  ASSERT_TRUE(daemon.WaitForLog("SIGHUP: kept the tokens in force")) << daemon.log();
  EXPECT_TRUE(RunJob(daemon.target(), WithToken(next)).ok());
  // An emptied file would refuse every call: it keeps the tokens in force too.
  WriteText(file(), "");
  kill(daemon.pid(), SIGHUP);
  ASSERT_TRUE(daemon.WaitForLog("holds no token")) << daemon.log();
  EXPECT_TRUE(RunJob(daemon.target(), WithToken(next)).ok());
  // A FIFO in the file's place is refused without being read: the signal thread, which would
  // block reading it, still stops the daemon on SIGTERM.
  ASSERT_EQ(unlink(file().c_str()), 0);
  ASSERT_EQ(mkfifo(file().c_str(), 0600), 0);
  kill(daemon.pid(), SIGHUP);
  ASSERT_TRUE(daemon.WaitForLog("not a regular file")) << daemon.log();
  EXPECT_TRUE(RunJob(daemon.target(), WithToken(next)).ok());
  EXPECT_EQ(daemon.Terminate(std::chrono::seconds(10)), 0) << daemon.log();
}

// The CLI refuses a token file that holds no token, a token or TLS file that is not a regular
// file (at once: a FIFO is not opened for reading), and a client id or token that gRPC
// metadata cannot carry, with a usage error rather than a call without them (or an abort).
TEST_F(Tokens, TheCliRefusesTokensAndClientIdsItCannotSend) {
  WriteText(dir_ + "/empty", "\n");
  ASSERT_EQ(mkfifo((dir_ + "/fifo").c_str(), 0600), 0);  // would wait for a writer
  const std::string target = "127.0.0.1:1";  // never reached
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--token-file", dir_ + "/empty"},
        std::vector<std::string>{"--token-file", dir_},
        std::vector<std::string>{"--token-file", dir_ + "/fifo"},
        std::vector<std::string>{"--tls-ca", dir_ + "/fifo"},
        std::vector<std::string>{"--tls-ca", dir_ + "/empty"},  // not PEM
        std::vector<std::string>{"--client-id", "caf\xc3\xa9"},
        std::vector<std::string>{"--client-id", "a\nb"}}) {
    std::vector<std::string> command = {CliBinary(), "--target", target};
    command.insert(command.end(), args.begin(), args.end());
    command.push_back("describe");
    CommandResult r = RunCommand(command);
    EXPECT_EQ(r.exit_code, 2) << args[0] << " " << args[1] << ": " << r.err;
    EXPECT_NE(r.err.find(args[0]), std::string::npos) << r.err;
  }
  setenv("GPUPIPE_TOKEN", "line\nbreak-in-the-middle", 1);
  CommandResult r = RunCommand({CliBinary(), "--target", target, "describe"});
  unsetenv("GPUPIPE_TOKEN");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("the token holds a byte gRPC metadata cannot carry"), std::string::npos)
      << r.err;
}

TEST_F(Tokens, TheCliTakesTlsAndTokensFromFlagsAndTheEnvironment) {
  Pki pki;
  ASSERT_TRUE(pki.error().empty()) << pki.error();
  DaemonProcess daemon(DaemonBinary(),
                       {"--backend", "cpu", "--token-file", file(), "--tls-cert",
                        pki.path("server.pem"), "--tls-key", pki.path("server.key")});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  WriteText(dir_ + "/token", std::string(kToken) + "\n");
  CommandResult flags = RunCommand({CliBinary(), "--target", Localhost(daemon), "--tls-ca",
                                    pki.path("ca.pem"), "--token-file", dir_ + "/token",
                                    "describe", "--json"});
  EXPECT_EQ(flags.exit_code, 0) << flags.err;
  setenv("GPUPIPE_TARGET", Localhost(daemon).c_str(), 1);
  setenv("GPUPIPE_TLS_CA", pki.path("ca.pem").c_str(), 1);
  setenv("GPUPIPE_TOKEN", kToken, 1);
  CommandResult env = RunCommand({CliBinary(), "describe", "--json"});
  EXPECT_EQ(env.exit_code, 0) << env.err;
  unsetenv("GPUPIPE_TOKEN");
  CommandResult no_token = RunCommand({CliBinary(), "describe"});
  EXPECT_EQ(no_token.exit_code, 1);
  EXPECT_NE(no_token.err.find("UNAUTHENTICATED"), std::string::npos) << no_token.err;
  unsetenv("GPUPIPE_TARGET");
  unsetenv("GPUPIPE_TLS_CA");
}

// A TLS file the daemon cannot use stops it at start, the message naming the flag.
TEST(ListenRules, AnUnreadableTlsFileNamesItsFlag) {
  char dir_template[] = "/tmp/gpupipe-tls-flag-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0600), 0);
  WriteText(dir + "/file", "not checked before every file is read\n");
  const char* const tls_flags[] = {"--tls-cert", "--tls-key", "--tls-client-ca"};
  for (const char* flag : tls_flags) {
    std::vector<std::string> command = {"/usr/bin/timeout", "20", DaemonBinary(), "--backend",
                                        "cpu"};
    for (const char* f : tls_flags) {
      command.push_back(f);
      command.push_back(dir + (std::string(f) == flag ? "/fifo" : "/file"));
    }
    CommandResult r = RunCommand(command);
    EXPECT_EQ(r.exit_code, 1) << flag << ": " << r.err;
    EXPECT_NE(r.err.find(std::string(flag) + ": " + dir + "/fifo: not a regular file"),
              std::string::npos)
        << r.err;
  }
  std::filesystem::remove_all(dir);
}

// A TLS file that is not PEM of its kind (a key for a certificate, text, a certificate cut
// short) stops the daemon and the CLI at once, naming the flag and the file, instead of
// failing later as a listen or a connection that names something else.
TEST(ListenRules, ATlsFileThatIsNotPemNamesItsFlagAndFile) {
  Pki pki;
  ASSERT_TRUE(pki.error().empty()) << pki.error();
  const std::string cut = pki.path("cut.pem");
  const std::string full = pki.pem("server.pem");
  WriteText(cut, full.substr(0, full.size() / 2));
  const std::map<std::string, std::string> good = {{"--tls-cert", pki.path("server.pem")},
                                                   {"--tls-key", pki.path("server.key")},
                                                   {"--tls-client-ca", pki.path("ca.pem")}};
  for (const auto& [flag, bad, expected] :
       {std::tuple{std::string("--tls-cert"), pki.path("server.key"),
                   std::string("not a PEM certificate")},
        std::tuple{std::string("--tls-key"), pki.path("server.pem"),
                   std::string("not a PEM private key")},
        std::tuple{std::string("--tls-client-ca"), cut,
                   std::string("a PEM certificate cut short")}}) {
    std::vector<std::string> command = {"/usr/bin/timeout", "20", DaemonBinary(), "--backend",
                                        "cpu"};
    for (const auto& [f, path] : good) {
      command.push_back(f);
      command.push_back(f == flag ? bad : path);
    }
    CommandResult r = RunCommand(command);
    EXPECT_EQ(r.exit_code, 1) << flag << ": " << r.err;
    EXPECT_NE(r.err.find(flag + ": " + bad + ": " + expected), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("cannot listen"), std::string::npos) << r.err;
  }
  DaemonProcess daemon(DaemonBinary(), {"--backend", "cpu", "--tls-cert", pki.path("server.pem"),
                                        "--tls-key", pki.path("server.key")});
  ASSERT_NE(daemon.port(), 0) << daemon.error();
  CommandResult cli = RunCommand({CliBinary(), "--target", Localhost(daemon), "--tls-ca",
                                  pki.path("ca.key"), "describe"});
  EXPECT_EQ(cli.exit_code, 2) << cli.err;
  EXPECT_NE(cli.err.find("--tls-ca: " + pki.path("ca.key") + ": not a PEM certificate"),
            std::string::npos)
      << cli.err;
  client::ClientOptions options;
  options.tls_ca_pem = pki.pem("ca.key");
  absl::StatusOr<std::unique_ptr<client::JobClient>> library =
      client::JobClient::Create(Localhost(daemon), options);
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(library.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(library.status().message().find("ClientOptions::tls_ca_pem: not a PEM certificate"),
            std::string::npos)
      << library.status();
  options.tls_ca_pem = pki.pem("ca.pem");  // and with its certificate, it works
  EXPECT_TRUE(RunJob(Localhost(daemon), options).ok());
}

TEST(ListenRules, PlaintextBeyondLoopbackNeedsInsecure) {
  // (under `timeout`: a daemon that wrongly started would otherwise serve on)
  CommandResult refused = RunCommand(
      {"/usr/bin/timeout", "20", DaemonBinary(), "--backend", "cpu", "--listen", "0.0.0.0:0"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("--insecure"), std::string::npos) << refused.err;
  DaemonProcess insecure(DaemonBinary(),
                         {"--backend", "cpu", "--listen", "0.0.0.0:0", "--insecure"});
  ASSERT_NE(insecure.port(), 0) << insecure.error();
  EXPECT_NE(insecure.log().find("warning: --insecure"), std::string::npos) << insecure.log();
}

TEST(ListenRules, ASecondDaemonOnTheSamePortFailsToStart) {
  DaemonProcess first(DaemonBinary(), {"--backend", "cpu"});
  ASSERT_NE(first.port(), 0) << first.error();
  CommandResult second = RunCommand({"/usr/bin/timeout", "20", DaemonBinary(), "--backend", "cpu",
                                     "--listen", "127.0.0.1:" + std::to_string(first.port())});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("the address is in use"), std::string::npos) << second.err;
  EXPECT_TRUE(RunJob(first.target(), {}).ok()) << "the first daemon keeps its port";
}

}  // namespace
}  // namespace gpupipe::testing
