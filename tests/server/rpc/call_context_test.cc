// Who a call comes from: the address without its port, an authenticated identity first, and a
// client-id that refines either.
#include "server/rpc/call_context.h"

#include <gtest/gtest.h>

namespace gpupipe::rpc {
namespace {

TEST(ClientIdentity, OneHostsConnectionsAreOneClient) {
  EXPECT_EQ(ClientIdentity("ipv4:10.0.0.7:51234", "", ""), "ipv4:10.0.0.7");
  EXPECT_EQ(ClientIdentity("ipv4:10.0.0.7:40000", "", ""), "ipv4:10.0.0.7");
  EXPECT_EQ(ClientIdentity("ipv6:[::1]:51234", "", ""), "ipv6:[::1]");
  EXPECT_EQ(ClientIdentity("ipv6:%5B::1%5D:51234", "", ""), "ipv6:%5B::1%5D");
  EXPECT_EQ(ClientIdentity("unix:/run/gpupipe.sock", "", ""), "unix:/run/gpupipe.sock");
}

TEST(ClientIdentity, AnAuthenticatedIdentityWinsOverTheAddress) {
  EXPECT_EQ(ClientIdentity("ipv4:10.0.0.7:51234", "worker-3", ""), "worker-3");
}

TEST(ClientIdentity, AClientIdRefinesItAndCannotCarryControlBytes) {
  EXPECT_EQ(ClientIdentity("ipv4:10.0.0.7:51234", "", "tenant-a"), "ipv4:10.0.0.7/tenant-a");
  EXPECT_EQ(ClientIdentity("ipv4:10.0.0.7:1", "", "a\nb\x01"), "ipv4:10.0.0.7/a?b?");
  const std::string id = ClientIdentity("ipv4:1.2.3.4:5", "", std::string(500, 'x'));
  EXPECT_EQ(id.size(), std::string("ipv4:1.2.3.4/").size() + kMaxClientIdBytes);
}

TEST(IsLocalPeer, UnixSocketsAndLoopbackOnly) {
  EXPECT_TRUE(IsLocalPeer("unix:/run/gpupipe.sock"));
  EXPECT_TRUE(IsLocalPeer("ipv4:127.0.0.1:51234"));
  EXPECT_TRUE(IsLocalPeer("ipv4:127.3.4.5:1"));
  EXPECT_TRUE(IsLocalPeer("ipv6:[::1]:51234"));
  EXPECT_TRUE(IsLocalPeer("ipv6:[::ffff:127.0.0.1]:51234"));
  EXPECT_FALSE(IsLocalPeer("ipv4:10.0.0.7:51234"));
  EXPECT_FALSE(IsLocalPeer("ipv4:128.0.0.1:1"));
  EXPECT_FALSE(IsLocalPeer("ipv6:[2001:db8::1]:1"));
  EXPECT_FALSE(IsLocalPeer(""));
}

}  // namespace
}  // namespace gpupipe::rpc
