// Which addresses need TLS or tokens, and the credentials built for each setting.
#include "server/transport.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gpupipe::daemon
