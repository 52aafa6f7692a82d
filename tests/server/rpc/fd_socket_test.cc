// The region socket and its tickets: a descriptor passed by a client comes out of its ticket
// once, tickets expire and are bounded, and hostile connections (silent, wordless, too many)
// are dropped without holding the socket up for others.
#include "server/rpc/fd_socket.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/fd_passing.h"

namespace gpupipe::rpc {
namespace {

using std::chrono::milliseconds;

class FdSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpupipe-fd-socket-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/regions.sock";
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  std::unique_ptr<FdSocket> Listen(FdTickets* tickets, FdSocket::Options options = {}) {
    absl::StatusOr<std::unique_ptr<FdSocket>> s = FdSocket::Listen(path_, tickets, options);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  // A connected socket to path_, or -1.
  int Connect() {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path_.data(), path_.size());
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      close(fd);
      return -1;
    }
    return fd;
  }

  static ino_t Inode(int fd) {
    struct stat st {};
    fstat(fd, &st);
    return st.st_ino;
  }

  std::string dir_;
  std::string path_;
};

TEST_F(FdSocketTest, APassedDescriptorComesOutOfItsTicketOnce) {
  FdTickets tickets(8, std::chrono::seconds(30));
  std::unique_ptr<FdSocket> socket = Listen(&tickets);
  const int memfd = memfd_create("gpupipe-test", MFD_CLOEXEC);
  ASSERT_GE(memfd, 0);
  absl::StatusOr<std::string> ticket = client::PassDescriptor(path_, memfd);
  ASSERT_TRUE(ticket.ok()) << ticket.status();
  EXPECT_EQ(ticket->size(), 32u);
  absl::StatusOr<int> fd = tickets.Take(*ticket);
  ASSERT_TRUE(fd.ok()) << fd.status();
  EXPECT_NE(*fd, memfd);
  EXPECT_EQ(Inode(*fd), Inode(memfd));  // the same object
  close(*fd);
  EXPECT_EQ(tickets.Take(*ticket).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(tickets.Take("00000000000000000000000000000000").status().code(),
            absl::StatusCode::kNotFound);
  close(memfd);
}

TEST_F(FdSocketTest, TicketsExpireAndAreBounded) {
  FdTickets tickets(2, milliseconds(100));
  std::unique_ptr<FdSocket> socket = Listen(&tickets);
  const int memfd = memfd_create("gpupipe-test", MFD_CLOEXEC);
  absl::StatusOr<std::string> first = client::PassDescriptor(path_, memfd);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(client::PassDescriptor(path_, memfd).ok());
  absl::StatusOr<std::string> third = client::PassDescriptor(path_, memfd);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(third.status().message().find("2 passed descriptors wait"), std::string::npos)
      << third.status();
  std::this_thread::sleep_for(milliseconds(150));
  EXPECT_EQ(tickets.pending(), 0u);  // expired, and their descriptors closed
  EXPECT_EQ(tickets.Take(*first).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(client::PassDescriptor(path_, memfd).ok());  // room again
  close(memfd);
}

// A passed descriptor that nobody registers is closed when its ticket expires, with no other
// call to the tickets to notice: the daemon holds no file past a ticket's life.
TEST_F(FdSocketTest, AnExpiredTicketsDescriptorIsClosedOnTime) {
  const auto open_fds = [] {
    int n = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      (void)entry;
      ++n;
    }
    return n;
  };
  // Tickets good for a second: long enough that both descriptors are still held when counted,
  // on a loaded machine too.
  FdTickets tickets(8, milliseconds(1000));
  std::unique_ptr<FdSocket> socket = Listen(&tickets);
  const int memfd = memfd_create("gpupipe-test", MFD_CLOEXEC);
  ASSERT_GE(memfd, 0);
  const int before = open_fds();
  // Before the first ticket is issued: no ticket can expire sooner than a second after this.
  const auto sending = std::chrono::steady_clock::now();
  ASSERT_TRUE(client::PassDescriptor(path_, memfd).ok());
  ASSERT_TRUE(client::PassDescriptor(path_, memfd).ok());
  // The daemon's copies, waiting under their tickets (its ends of the two connections may take
  // a moment more to close).
  bool held = false;
  while (!held && std::chrono::steady_clock::now() < sending + milliseconds(900)) {
    held = open_fds() == before + 2;
    if (!held) std::this_thread::sleep_for(milliseconds(2));
  }
  EXPECT_TRUE(held) << open_fds() - before << " descriptors held";
  // Closed once the tickets expire. A loaded machine may run the sweep late, so the test waits
  // for it with a deadline rather than a fixed sleep.
  const auto deadline = sending + std::chrono::seconds(4);
  while (open_fds() != before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  const auto closed_after = std::chrono::duration_cast<milliseconds>(
      std::chrono::steady_clock::now() - sending);
  EXPECT_EQ(open_fds(), before) << "still open " << closed_after.count() << " ms after";
  EXPECT_GE(closed_after, milliseconds(1000)) << "closed before the tickets expired";
  close(memfd);
}

TEST_F(FdSocketTest, HostileConnectionsAreDroppedAndOthersServed) {
  FdTickets tickets(8, std::chrono::seconds(30));
  FdSocket::Options options;
  options.timeout = milliseconds(300);
  options.max_connections = 4;
  std::unique_ptr<FdSocket> socket = Listen(&tickets, options);
  const int memfd = memfd_create("gpupipe-test", MFD_CLOEXEC);

  // A byte without a descriptor gets an error line.
  {
    const int c = Connect();
    ASSERT_GE(c, 0);
    ASSERT_EQ(write(c, "x", 1), 1);
    char reply[128] = {};
    ASSERT_GT(read(c, reply, sizeof(reply) - 1), 0);
    EXPECT_NE(std::string(reply).find("error send exactly one descriptor"), std::string::npos)
        << reply;
    close(c);
  }
  // Silent connections: one is served beside them, and they are dropped at the timeout.
  std::vector<int> silent;
  for (int i = 0; i < 3; ++i) silent.push_back(Connect());
  EXPECT_TRUE(client::PassDescriptor(path_, memfd).ok());
  for (int i = 0; i < 3; ++i) silent.push_back(Connect());  // over max_connections now
  const auto start = std::chrono::steady_clock::now();
  char byte;
  for (int c : silent) {
    ASSERT_GE(c, 0);
    EXPECT_LE(read(c, &byte, 1), 0);  // closed: at accept, or at the timeout
    close(c);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(3000));
  EXPECT_TRUE(client::PassDescriptor(path_, memfd).ok());  // served again
  close(memfd);
}

TEST_F(FdSocketTest, TheSocketFileIsReplacedWhenStaleRefusedWhenNotASocketAndRemovedAtEnd) {
  FdTickets tickets(8, std::chrono::seconds(30));
  {
    std::unique_ptr<FdSocket> first = Listen(&tickets);
    ASSERT_NE(first, nullptr);
  }
  struct stat st {};
  EXPECT_NE(lstat(path_.c_str(), &st), 0);  // removed
  // A stale socket file (a daemon that was killed) is replaced.
  const int stale = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path_.data(), path_.size());
  ASSERT_EQ(bind(stale, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  close(stale);
  EXPECT_NE(Listen(&tickets), nullptr);
  // Any other file is left alone.
  const std::string file = dir_ + "/file";
  std::FILE* f = std::fopen(file.c_str(), "w");
  std::fclose(f);
  absl::StatusOr<std::unique_ptr<FdSocket>> refused = FdSocket::Listen(file, &tickets, {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("is not a socket"), std::string::npos);
}

}  // namespace
}  // namespace gpupipe::rpc
