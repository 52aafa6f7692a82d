// Which addresses need TLS or tokens, the credentials built for each setting, and how the
// files behind them are read.
#include "server/transport.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/config_file.h"

namespace gpupipe::daemon {
namespace {

TEST(Transport, LoopbackAddressesAreLocal) {
  for (const char* a : {"127.0.0.1:50051", "127.0.0.2:0", "localhost:1", "[::1]:50051",
                        "ipv6:[::1]:2", "unix:/run/gpupipe.sock", "unix-abstract:gpupipe"}) {
    EXPECT_TRUE(IsLoopbackAddress(a)) << a;
  }
  for (const char* a : {"0.0.0.0:50051", "[::]:50051", "10.0.0.7:50051", "gpu7:50051"}) {
    EXPECT_FALSE(IsLoopbackAddress(a)) << a;
  }
}

TEST(Transport, BeyondLoopbackNeedsTlsOrTokensOrInsecure) {
  TransportSecurity plain;
  EXPECT_TRUE(CheckListenSecurity("127.0.0.1:50051", plain).ok());
  const absl::Status refused = CheckListenSecurity("0.0.0.0:50051", plain);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("--insecure"), std::string::npos);
  TransportSecurity tls;
  tls.tls_cert_pem = "pem";
  EXPECT_TRUE(CheckListenSecurity("0.0.0.0:50051", tls).ok());
  TransportSecurity tokens;
  tokens.tokens = true;
  EXPECT_TRUE(CheckListenSecurity("0.0.0.0:50051", tokens).ok());
  TransportSecurity insecure;
  insecure.insecure = true;
  EXPECT_TRUE(CheckListenSecurity("0.0.0.0:50051", insecure).ok());
}

// The TLS and token files: a regular file is read whole; a FIFO (which would block the signal
// thread's SIGHUP reload), a directory and an oversized file are refused at once, by name.
TEST(Transport, ConfigFilesAreSmallRegularFiles) {
  char dir_template[] = "/tmp/gpupipe-transport-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string file = dir + "/tokens", fifo = dir + "/fifo", big = dir + "/big";
  FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("alice:secret-token-of-alice\n", f);
  std::fclose(f);
  absl::StatusOr<std::string> read = ReadConfigFile(file);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "alice:secret-token-of-alice\n");

  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::string> from_fifo = ReadConfigFile(fifo);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ASSERT_FALSE(from_fifo.ok());
  EXPECT_NE(from_fifo.status().message().find("not a regular file"), std::string::npos)
      << from_fifo.status();

  absl::StatusOr<std::string> from_dir = ReadConfigFile(dir);
  ASSERT_FALSE(from_dir.ok());
  EXPECT_NE(from_dir.status().message().find("a directory"), std::string::npos)
      << from_dir.status();

  f = std::fopen(big.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(std::string(2000, 'x').c_str(), f);
  std::fclose(f);
  absl::StatusOr<std::string> too_big = ReadConfigFile(big, 1000);
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("2000 bytes"), std::string::npos) << too_big.status();

  absl::StatusOr<std::string> missing = ReadConfigFile(dir + "/none");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace gpupipe::daemon
