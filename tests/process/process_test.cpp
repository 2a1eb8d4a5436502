// Unit: the process library (fencecheck/process/). free_tcp_port gives a port that can then be
// bound; tail_text keeps the last lines and bytes of a known log; write_all writes every byte
// through a pipe; ChildProcess with output_log appends both streams of every start to one file
// and drops the variables it is told to.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "../support/temp_dir.h"
#include "fencecheck/process/child_process.h"
#include "fencecheck/process/server_support.h"
#include "fencecheck/process/write_all.h"

namespace fencecheck::process {
namespace {

using namespace std::chrono_literals;

/// Binds and listens on 127.0.0.1:port; errno's text on failure, "" on success.
std::string bind_and_listen(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::strerror(errno);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  std::string err;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 1) != 0) err = std::strerror(errno);
  ::close(fd);
  return err;
}

TEST(FreeTcpPort, GivesALoopbackPortThatCanThenBeBound) {
  for (int i = 0; i < 5; ++i) {
    const int port = free_tcp_port("127.0.0.1");
    ASSERT_GT(port, 0);
    ASSERT_LE(port, 65535);
    EXPECT_EQ(bind_and_listen(port), "") << "port " << port;
  }
}

TEST(FreeTcpPort, RefusesWhatIsNoAddress) {
  try {
    (void)free_tcp_port("not-an-address");
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "not an IPv4 address: not-an-address");
  }
}

class LogTail : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream out(log_);
    for (int i = 1; i <= 50; ++i) out << "line " << i << "\n";
  }
  testing::TempDir dir_{"process-tail"};
  std::filesystem::path log_ = dir_.path() / "server.log";
};

TEST_F(LogTail, KeepsTheLastLinesOfAKnownFile) {
  EXPECT_EQ(tail_text(read_text(log_), 3), "...line 48\nline 49\nline 50");
  EXPECT_EQ(tail_text(read_text(log_), 1), "...line 50");
}

TEST_F(LogTail, ByteLimitCutsInsideTheKeptLines) {
  EXPECT_EQ(tail_text(read_text(log_), 3, 10), "...49\nline 50");
  EXPECT_EQ(tail_text(read_text(log_), 3, 8), "...line 50");  // a cut at a newline drops it
  EXPECT_EQ(tail_text(read_text(log_), 3, 4), "...e 50");
}

TEST_F(LogTail, AShortLogIsWholeWithoutEllipsis) {
  EXPECT_EQ(tail_text("only\nthree\nlines\n", 30), "only\nthree\nlines");
  EXPECT_EQ(tail_text("", 30), "");
}

TEST_F(LogTail, ReadTextFromAnOffsetIsWhatThisStartAppended) {
  const auto before = std::filesystem::file_size(log_);
  std::ofstream(log_, std::ios::app) << "bind: address already in use\n";
  const std::string since = read_text(log_, before);
  EXPECT_EQ(since, "bind: address already in use\n");
  EXPECT_TRUE(port_was_taken(since));
  EXPECT_FALSE(port_was_taken(read_text(log_).substr(0, before)));
  EXPECT_EQ(read_text(dir_.path() / "missing.log"), "");
}

TEST(PortWasTaken, KnowsEachServersWords) {
  EXPECT_TRUE(port_was_taken("# Warning: Could not create server TCP listening socket *:6379: bind: Address already in use"));
  EXPECT_TRUE(port_was_taken("listen tcp 127.0.0.1:2379: bind: address already in use"));
  EXPECT_TRUE(port_was_taken("LOG:  could not bind IPv4 address \"127.0.0.1\": Address in use"));
  EXPECT_FALSE(port_was_taken("ready to accept connections"));
}

TEST(WriteAll, WritesEveryByteThroughAPipe) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string data(1 << 20, 'x');  // larger than a pipe's buffer: several short writes
  std::string got;
  std::thread reader([&] {
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<std::size_t>(n));
  });
  EXPECT_TRUE(write_all(fds[1], data));
  ::close(fds[1]);
  reader.join();
  ::close(fds[0]);
  EXPECT_EQ(got.size(), data.size());
  EXPECT_EQ(got, data);
}

TEST(WriteAll, AClosedDescriptorIsAFailureWithErrno) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[0]);
  ::close(fds[1]);
  errno = 0;
  EXPECT_FALSE(write_all(fds[1], "x"));
  EXPECT_EQ(errno, EBADF);
}

TEST(ChildProcessOutputLog, EveryStartAppendsBothStreamsToOneLog) {
  testing::TempDir dir("process-child");
  const auto log = dir.path() / "server.log";
  ::setenv("FC_PROCESS_TEST_DROPPED", "was passed", 1);
  ::setenv("FC_PROCESS_TEST_KEPT", "kept", 1);
  for (int start = 1; start <= 2; ++start) {
    ChildSpec spec;
    spec.name = "sh";
    spec.exe = "/bin/sh";
    spec.args = {"-c", "echo out " + std::to_string(start) + "; echo err " + std::to_string(start) +
                           " >&2; echo ${FC_PROCESS_TEST_DROPPED:-dropped} $FC_PROCESS_TEST_KEPT; exit 3"};
    spec.output_log = log;
    spec.env_drop_prefixes = {"FC_PROCESS_TEST_D"};
    ChildProcess child(spec, nullptr);
    EXPECT_EQ(child.wait_for(10s), 3);
  }
  ::unsetenv("FC_PROCESS_TEST_DROPPED");
  ::unsetenv("FC_PROCESS_TEST_KEPT");
  EXPECT_EQ(read_text(log), "out 1\nerr 1\ndropped kept\nout 2\nerr 2\ndropped kept\n");
}

TEST(ChildProcessOutputLog, ALogThatCannotBeOpenedIsNamed) {
  ChildSpec spec;
  spec.name = "sh";
  spec.exe = "/bin/sh";
  spec.args = {"-c", "exit 0"};
  spec.output_log = "/nonexistent-dir/server.log";
  try {
    ChildProcess child(spec, nullptr);
    FAIL() << "started";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot start sh: cannot open its log /nonexistent-dir/server.log: No such file or directory");
  }
}

}  // namespace
}  // namespace fencecheck::process
