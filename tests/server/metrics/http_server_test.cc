#include "server/metrics/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpupipe::metrics {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

// Sends `request` on `fd`, reads until the server closes the connection (or 5 s pass without
// a byte), and closes `fd`.
std::string ExchangeOn(int fd, const std::string& request) {
  const timeval limit{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string answer;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) answer.append(buf, static_cast<size_t>(n));
  close(fd);
  return answer;
}
std::string Exchange(int port, const std::string& request) {
  return ExchangeOn(Connect(port), request);
}

TEST(HttpServerTest, ServesTheRenderedTextAtMetrics) {
  std::atomic<int> renders{0};
  auto server = HttpServer::Start("127.0.0.1:0",
                                  [&] { return "gpupipe_up " + std::to_string(++renders) + "\n"; });
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  ASSERT_GT(port, 0);
  const std::string a = Exchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(a, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(a, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(a, HasSubstr("Content-Length: 13\r\n"));
  EXPECT_THAT(a, EndsWith("\r\n\r\ngpupipe_up 1\n"));
  // Rendered afresh for every scrape.
  EXPECT_THAT(Exchange(port, "GET /metrics HTTP/1.0\r\n\r\n"), EndsWith("gpupipe_up 2\n"));
}

TEST(HttpServerTest, OtherPathsAndMethodsAreRefused) {
  auto server = HttpServer::Start("127.0.0.1:0", [] { return std::string("x\n"); });
  ASSERT_TRUE(server.ok());
  const int port = (*server)->port();
  EXPECT_THAT(Exchange(port, "GET / HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 404"));
  EXPECT_THAT(Exchange(port, "POST /metrics HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 405"));
  const std::string head = Exchange(port, "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_THAT(head, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(head, HasSubstr("Content-Length: 2\r\n"));
  EXPECT_THAT(head, EndsWith("\r\n\r\n"));  // no body
}

TEST(HttpServerTest, ARequestLineThatIsNotHttpIsABadRequest) {
  auto server = HttpServer::Start("127.0.0.1:0", [] { return std::string("x\n"); });
  ASSERT_TRUE(server.ok());
  const int port = (*server)->port();
  for (const char* bad : {"hello\r\n\r\n", "GET /metrics\r\n\r\n", "\r\n\r\n", "\n\n",
                          "GET  /metrics HTTP/1.1\r\n\r\n", "GET /metrics FTP/1\r\n\r\n",
                          "GET /metrics HTTP/\r\n\r\n", "GET /metrics HTTP/1.1x\r\n\r\n"}) {
    EXPECT_THAT(Exchange(port, bad), StartsWith("HTTP/1.1 400 Bad Request\r\n")) << bad;
  }
  EXPECT_THAT(Exchange(port, "GET /metrics HTTP/2.0\r\n\r\n"), StartsWith("HTTP/1.1 505 "));
  // A target in absolute form.
  EXPECT_THAT(Exchange(port, "GET http://localhost:9400/metrics HTTP/1.1\r\n\r\n"),
              StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(Exchange(port, "GET http://localhost:9400 HTTP/1.1\r\n\r\n"),
              StartsWith("HTTP/1.1 404 "));
  // An empty line before the request line is passed over.
  EXPECT_THAT(Exchange(port, "\r\nGET /metrics HTTP/1.1\r\n\r\n"),
              StartsWith("HTTP/1.1 200 OK\r\n"));
  // Another method of HTTP's is told which ones are allowed.
  EXPECT_THAT(Exchange(port, "DELETE /metrics HTTP/1.1\r\n\r\n"),
              HasSubstr("\r\nAllow: GET, HEAD\r\n"));
  // Lines may end with a bare LF.
  EXPECT_THAT(Exchange(port, "GET /metrics HTTP/1.1\nHost: x\n\n"),
              StartsWith("HTTP/1.1 200 OK\r\n"));
}

// The process's CPU time, in seconds.
double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// Takes every descriptor the process may open (under a limit a few above those open now) and
// gives them back, and the limit, when it goes.
class AllDescriptorsTaken {
 public:
  AllDescriptorsTaken() {
    getrlimit(RLIMIT_NOFILE, &saved_);
    int open_now = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      (void)entry;
      ++open_now;
    }
    rlimit low = saved_;
    low.rlim_cur = static_cast<rlim_t>(open_now + 16);
    limited_ = setrlimit(RLIMIT_NOFILE, &low) == 0;
    for (int fd; limited_ && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) {
      fillers_.push_back(fd);
    }
    all_taken_ = limited_ && errno == EMFILE;
  }
  ~AllDescriptorsTaken() {
    for (int fd : fillers_) close(fd);
    if (limited_) setrlimit(RLIMIT_NOFILE, &saved_);
  }
  bool all_taken() const { return all_taken_ && !fillers_.empty(); }
  void GiveOneBack() {
    close(fillers_.back());
    fillers_.pop_back();
  }

 private:
  rlimit saved_{};
  bool limited_ = false;
  bool all_taken_ = false;
  std::vector<int> fillers_;
};

TEST(HttpServerTest, NoDescriptorLeftForAConnectionDoesNotSpinTheServer) {
  auto server = HttpServer::Start("127.0.0.1:0", [] { return std::string("ok\n"); });
  ASSERT_TRUE(server.ok());
  const int port = (*server)->port();
  int client = -1;
  {
    AllDescriptorsTaken taken;
    ASSERT_TRUE(taken.all_taken());
    // One connection waits in the listener's backlog that the server cannot accept.
    taken.GiveOneBack();
    client = Connect(port);
    ASSERT_GE(client, 0);
    const double cpu_before = ProcessCpuSeconds();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const double cpu = ProcessCpuSeconds() - cpu_before;
    EXPECT_LT(cpu, 0.3) << "the server spent " << cpu << " s of CPU in one second";
  }
  // Descriptors again: the waiting connection is taken and served.
  EXPECT_THAT(ExchangeOn(client, "GET /metrics HTTP/1.1\r\n\r\n"),
              StartsWith("HTTP/1.1 200 OK\r\n"));
}

TEST(HttpServerTest, AClientThatSaysNothingOrTricklesIsDroppedWithinTheTimeout) {
  auto server = HttpServer::Start("127.0.0.1:0", [] { return std::string("ok\n"); });
  ASSERT_TRUE(server.ok());
  const int port = (*server)->port();
  const int silent = Connect(port);
  const int trickle = Connect(port);
  const auto start = std::chrono::steady_clock::now();
  // A trickle of single bytes never completes a request; the server answers the next scrape
  // at once all the same, beside the silent and the trickling connection.
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    while (!stop) {
      send(trickle, "G", 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  });
  const std::string a = Exchange(port, "GET /metrics HTTP/1.1\r\n\r\n");
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stop = true;
  sender.join();
  close(silent);
  close(trickle);
  EXPECT_THAT(a, EndsWith("ok\n"));
  EXPECT_LT(took, 1.0) << "a scrape waits for no other connection";
}

// Many connections that say nothing or trickle, more than the server keeps open: a scrape is
// answered at once all the same (the newest connection takes the oldest one's place).
TEST(HttpServerTest, ManySlowConnectionsDoNotKeepAScrapeOut) {
  auto server = HttpServer::Start("127.0.0.1:0", [] { return std::string("ok\n"); });
  ASSERT_TRUE(server.ok());
  const int port = (*server)->port();
  std::vector<int> slow;
  for (int i = 0; i < 100; ++i) slow.push_back(Connect(port));
  std::atomic<bool> stop{false};
  std::thread trickler([&] {
    while (!stop) {
      for (int fd : slow) send(fd, "G", 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int scrape = 0; scrape < 3; ++scrape) {
    const auto start = std::chrono::steady_clock::now();
    const std::string a = Exchange(port, "GET /metrics HTTP/1.1\r\n\r\n");
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_THAT(a, EndsWith("ok\n"));
    EXPECT_LT(took, 1.0) << "scrape " << scrape;
  }
  stop = true;
  trickler.join();
  for (int fd : slow) close(fd);
}

TEST(HttpServerTest, AClientThatNeverReadsItsAnswerIsDroppedWithinTheTimeout) {
  // An answer far larger than the sockets' buffers, so that sending it needs the client to read.
  const std::string big(32 << 20, 'x');
  auto server = HttpServer::Start("127.0.0.1:0", [&] { return big; });
  ASSERT_TRUE(server.ok());
  const int port = (*server)->port();
  const int stalled = Connect(port);
  const std::string request = "GET /metrics HTTP/1.1\r\n\r\n";
  send(stalled, request.data(), request.size(), MSG_NOSIGNAL);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // its answer is being sent
  const auto start = std::chrono::steady_clock::now();
  const std::string a = Exchange(port, request);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  close(stalled);
  EXPECT_EQ(a.size() > big.size() && a.compare(a.size() - big.size(), big.size(), big) == 0, true);
  EXPECT_LT(took, 4.0) << "the answer nobody read must be given up after about 2 s";
}

TEST(HttpServerTest, ARestartedServerTakesItsPortAgainAtOnce) {
  int port = 0;
  {
    auto server = HttpServer::Start("127.0.0.1:0", [] { return std::string("ok\n"); });
    ASSERT_TRUE(server.ok());
    port = (*server)->port();
    // The server closes first, so its end of this connection stays in TIME_WAIT.
    EXPECT_THAT(Exchange(port, "GET /metrics HTTP/1.1\r\n\r\n"), EndsWith("ok\n"));
  }
  auto again =
      HttpServer::Start("127.0.0.1:" + std::to_string(port), [] { return std::string("again\n"); });
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(Exchange(port, "GET /metrics HTTP/1.1\r\n\r\n"), EndsWith("again\n"));
}

TEST(HttpServerTest, ATakenPortFailsToStart) {
  auto first = HttpServer::Start("127.0.0.1:0", [] { return std::string(); });
  ASSERT_TRUE(first.ok());
  auto second = HttpServer::Start("127.0.0.1:" + std::to_string((*first)->port()),
                                  [] { return std::string(); });
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("cannot serve metrics on"));
  EXPECT_FALSE(HttpServer::Start("nonsense", [] { return std::string(); }).ok());
}

}  // namespace
}  // namespace gpupipe::metrics
