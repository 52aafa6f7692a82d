// Targets as the channel takes them: one daemon as before, lists as static address URIs, and
// the service config every channel gets.
#include "client/targets.h"

#include <string>

#include "client/shm_submit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpupipe {
namespace client {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

ChannelTarget MustResolve(const std::string& target) {
  absl::StatusOr<ChannelTarget> t = ResolveTarget(target);
  EXPECT_TRUE(t.ok()) << target << ": " << t.status();
  return t.ok() ? *t : ChannelTarget{};
}

absl::Status ErrorOf(const std::string& target) {
  absl::StatusOr<ChannelTarget> t = ResolveTarget(target);
  EXPECT_FALSE(t.ok()) << target << " resolved to " << t->uri;
  return t.status();
}

TEST(ResolveTargetTest, OneDaemonIsAsBefore) {
  for (const auto& [given, uri] : std::vector<std::pair<std::string, std::string>>{
           {"gpu7", "gpu7:50051"},
           {"gpu7:6000", "gpu7:6000"},
           {"[::1]", "[::1]:50051"},
           {"10.0.0.7", "10.0.0.7:50051"},
           {"unix:/run/gpupipe.sock", "unix:/run/gpupipe.sock"},
           {"unix:///run/gpupipe.sock", "unix:///run/gpupipe.sock"},
           {"ipv4:10.0.0.7:50051", "ipv4:10.0.0.7:50051"}}) {
    const ChannelTarget t = MustResolve(given);
    EXPECT_EQ(t.uri, uri) << given;
    EXPECT_FALSE(t.balanced) << given;
    EXPECT_EQ(t.addresses, 1) << given;
  }
}

TEST(ResolveTargetTest, APortOutsideOneTo65535IsRefused) {
  for (const char* target : {"127.0.0.1:117597", "127.0.0.1:-13475", "gpu7:0", "gpu7:65536",
                             "[::1]:70000", "gpu7:port"}) {
    const absl::Status s = ErrorOf(target);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << target;
    EXPECT_NE(s.message().find("the port must be 1 to 65535"), std::string::npos) << s;
  }
  EXPECT_EQ(MustResolve("gpu7:65535").uri, "gpu7:65535");
}

TEST(ResolveTargetTest, ADnsNameOrAnAddressListUriIsBalanced) {
  const ChannelTarget dns = MustResolve("dns:///gpupipe.default.svc:50051");
  EXPECT_EQ(dns.uri, "dns:///gpupipe.default.svc:50051");
  EXPECT_TRUE(dns.balanced);
  EXPECT_EQ(dns.addresses, 0);  // known only as it resolves
  const ChannelTarget uri = MustResolve("ipv4:10.0.0.7:1,10.0.0.8:2");
  EXPECT_EQ(uri.uri, "ipv4:10.0.0.7:1,10.0.0.8:2");
  EXPECT_TRUE(uri.balanced);
  EXPECT_EQ(uri.addresses, 2);
}

TEST(ResolveTargetTest, AListBecomesOneAddressListUri) {
  const ChannelTarget v4 = MustResolve("127.0.0.1:7001, 10.0.0.8 ,10.0.0.9:7003");
  EXPECT_EQ(v4.uri, "ipv4:127.0.0.1:7001,10.0.0.8:50051,10.0.0.9:7003");
  EXPECT_TRUE(v4.balanced);
  EXPECT_EQ(v4.addresses, 3);
  const ChannelTarget v6 = MustResolve("[::1]:7001,[fd00::9]");
  EXPECT_EQ(v6.uri, "ipv6:[::1]:7001,[fd00::9]:50051");
  EXPECT_EQ(v6.addresses, 2);
  // The same address twice is one daemon.
  EXPECT_EQ(MustResolve("127.0.0.1:7001,127.0.0.1:7001").addresses, 1);
}

TEST(ResolveTargetTest, NamesInAListAreResolvedOnceToTheListsFamily) {
  // localhost has an IPv4 address everywhere (and maybe ::1, which an IPv4 list leaves out).
  const ChannelTarget named = MustResolve("localhost:7001,127.0.0.1:7002");
  EXPECT_THAT(named.uri, StartsWith("ipv4:"));
  EXPECT_THAT(named.uri, HasSubstr("127.0.0.1:7001"));
  EXPECT_THAT(named.uri, HasSubstr("127.0.0.1:7002"));
  EXPECT_THAT(MustResolve("localhost:7001,localhost:7002").uri, StartsWith("ipv4:"));
}

TEST(ResolveTargetTest, RefusesWhatOneChannelCannotTake) {
  EXPECT_EQ(ErrorOf("").code(), absl::StatusCode::kInvalidArgument);
  const absl::Status mixed = ErrorOf("127.0.0.1:7001,[::1]:7002");
  EXPECT_EQ(mixed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mixed.message(), HasSubstr("cannot mix IPv4 and IPv6"));
  EXPECT_THAT(ErrorOf("a:1,,b:2").message(), HasSubstr("an empty entry"));
  EXPECT_THAT(ErrorOf("::1:7001,::2:7002").message(), HasSubstr("takes brackets"));
  EXPECT_THAT(ErrorOf("a:1,dns:///b:2").message(), HasSubstr("a URI goes alone"));
  EXPECT_THAT(ErrorOf("a:1,unix:/x.sock").message(), HasSubstr("a URI goes alone"));
  EXPECT_THAT(ErrorOf("a:0,b:1").message(), HasSubstr("1 to 65535"));
  EXPECT_THAT(ErrorOf("a:http,b:1").message(), HasSubstr("1 to 65535"));
  EXPECT_THAT(ErrorOf("[::1,[::2]:1").message(), HasSubstr("no closing ']'"));
  EXPECT_THAT(ErrorOf(":1,b:2").message(), HasSubstr("no host"));
  // RFC 6761: .invalid never resolves.
  const absl::Status unresolved = ErrorOf("gpu.invalid:7001,127.0.0.1:7002");
  EXPECT_EQ(unresolved.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(unresolved.message(), HasSubstr("cannot resolve 'gpu.invalid'"));
}

TEST(ServiceConfigJsonTest, RoundRobinRetriesOnlyWhatChangesNothingHealthWhenBalanced) {
  for (bool health : {false, true}) {
    const nlohmann::json config = nlohmann::json::parse(ServiceConfigJson(health));
    EXPECT_EQ(config["loadBalancingConfig"][0].begin().key(), "round_robin");
    EXPECT_EQ(config.contains("healthCheckConfig"), health);
    if (health) EXPECT_EQ(config["healthCheckConfig"]["serviceName"], "gpupipe.v1.JobService");
    ASSERT_EQ(config["methodConfig"].size(), 1u);
    const nlohmann::json& method = config["methodConfig"][0];
    std::vector<std::string> names;
    for (const auto& name : method["name"]) {
      EXPECT_EQ(name["service"], "gpupipe.v1.JobService");
      names.push_back(name["method"]);
    }
    EXPECT_EQ(names, (std::vector<std::string>{"Describe", "GetStats"}));
    EXPECT_EQ(method["retryPolicy"]["maxAttempts"], 5);
    EXPECT_EQ(method["retryPolicy"]["retryableStatusCodes"],
              nlohmann::json::array({"UNAVAILABLE"}));
  }
}

TEST(IsLocalTargetTest, AListIsNotOneLocalDaemon) {
  EXPECT_TRUE(IsLocalTarget("127.0.0.1:7001"));
  EXPECT_FALSE(IsLocalTarget("127.0.0.1:7001,127.0.0.1:7002"));
}

}  // namespace
}  // namespace client
}  // namespace gpupipe
