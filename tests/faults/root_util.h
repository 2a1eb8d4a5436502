// Test helpers for the real (root) fault tests: target processes with observable progress,
// bounded waits on observable events, and TCP endpoints inside a network namespace.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "child.h"  // wait_until, TreeChild

namespace fctest {

inline bool is_root() { return ::geteuid() == 0; }

inline std::vector<pid_t> task_ids(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec))
    out.push_back(static_cast<pid_t>(std::stol(e.path().filename().string())));
  return out;
}

/// A child process whose main thread and `extra_threads` more threads spin on the CPU.
class BusyChild {
 public:
  explicit BusyChild(int extra_threads) {
    pid_ = ::fork();
    if (pid_ == 0) {
      for (int i = 0; i < extra_threads; ++i) {
        pthread_t t;
        ::pthread_create(&t, nullptr, &BusyChild::spin, nullptr);
      }
      spin(nullptr);
      ::_exit(0);
    }
  }
  ~BusyChild() { reap(); }
  void reap() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  static void* spin(void*) {
    volatile std::uint64_t x = 0;
    for (;;) x = x + 1;
    return nullptr;
  }
  pid_t pid_ = -1;
};

/// A child that writes an increasing 64-bit counter into a pipe about every millisecond: its
/// progress is observable from the parent.
class CounterChild {
 public:
  CounterChild() {
    int p[2];
    if (::pipe(p) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(p[0]);
      for (std::uint64_t n = 1;; ++n) {
        if (::write(p[1], &n, sizeof n) != static_cast<ssize_t>(sizeof n)) ::_exit(1);
        ::usleep(1000);
      }
    }
    ::close(p[1]);
    fd_ = p[0];
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
  }
  ~CounterChild() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] pid_t pid() const { return pid_; }

  /// Reads everything available now; the last counter value, if any arrived.
  std::optional<std::uint64_t> drain() {
    std::optional<std::uint64_t> last;
    std::uint64_t buf[512];
    for (;;) {
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) break;
      if (n >= static_cast<ssize_t>(sizeof(std::uint64_t))) last = buf[static_cast<std::size_t>(n) / sizeof(std::uint64_t) - 1];
    }
    return last;
  }
  /// Waits (bounded) for new counter values; the latest one.
  std::optional<std::uint64_t> next(std::chrono::milliseconds timeout) {
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
    return drain();
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
};

/// Runs fn on a fresh thread that first joins network namespace `netns` (setns(2) changes only
/// the calling thread's namespace); a socket created there stays in that namespace for good.
/// netns: a name under /run/netns, or a path such as /proc/<pid>/ns/net (that process's).
template <typename Fn>
auto in_netns(const std::string& netns, Fn fn) -> decltype(fn()) {
  decltype(fn()) result{};
  const std::string path = !netns.empty() && netns.front() == '/' ? netns : "/run/netns/" + netns;
  std::thread t([&] {
    int nsfd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (nsfd < 0) return;
    if (::setns(nsfd, CLONE_NEWNET) == 0) result = fn();
    ::close(nsfd);
  });
  t.join();
  return result;
}

inline sockaddr_in sockaddr_of(const std::string& addr, std::uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
  return sa;
}

/// A TCP echo server listening on addr:port inside netns, served by one poll thread. It records
/// every byte it received (what it "acted on"), and sends `greeting` first on each connection it
/// accepts (a service that speaks first, so that its direction can be seen alone).
class EchoServer {
 public:
  EchoServer(const std::string& netns, const std::string& addr, std::uint16_t port, std::string greeting = {})
      : greeting_(std::move(greeting)) {
    listen_fd_ = in_netns(netns, [] { return ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) + 1; }) - 1;
    if (listen_fd_ < 0) return;
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    auto sa = sockaddr_of(addr, port);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(listen_fd_, 16) != 0) {
      ::close(listen_fd_);
      listen_fd_ = -1;
      return;
    }
    if (::pipe(stop_) != 0) return;
    thread_ = std::thread([this] { loop(); });
  }
  ~EchoServer() {
    if (thread_.joinable()) {
      char c = 'x';
      (void)!::write(stop_[1], &c, 1);
      thread_.join();
    }
    for (int fd : {listen_fd_, stop_[0], stop_[1]})
      if (fd >= 0) ::close(fd);
  }
  [[nodiscard]] bool ok() const { return listen_fd_ >= 0 && thread_.joinable(); }
  /// Everything received so far, on every connection, in arrival order.
  [[nodiscard]] std::string received() const {
    std::lock_guard lock(mu_);
    return received_;
  }
  /// Waits (bounded) until what was received contains `want`.
  [[nodiscard]] bool wait_received(const std::string& want, std::chrono::milliseconds timeout) const {
    return wait_until([&] { return received().find(want) != std::string::npos; }, timeout);
  }
  /// Connections accepted so far.
  [[nodiscard]] int accepted() const { return accepted_.load(); }

 private:
  void loop() {
    std::vector<int> clients;
    for (;;) {
      std::vector<pollfd> fds{{stop_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
      for (int c : clients) fds.push_back({c, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents) break;
      if (fds[1].revents & POLLIN) {
        int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) {
          clients.push_back(c);
          ++accepted_;
          if (!greeting_.empty()) (void)!::write(c, greeting_.data(), greeting_.size());
        }
      }
      for (std::size_t i = 2; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        char buf[4096];
        ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
        if (n > 0) {
          {
            std::lock_guard lock(mu_);
            received_.append(buf, static_cast<std::size_t>(n));
          }
          (void)!::write(fds[i].fd, buf, static_cast<std::size_t>(n));
        } else {
          ::close(fds[i].fd);
          clients.erase(std::find(clients.begin(), clients.end(), fds[i].fd));
        }
      }
    }
    for (int c : clients) ::close(c);
  }
  std::string greeting_;
  mutable std::mutex mu_;
  std::string received_;
  std::atomic<int> accepted_{0};
  int listen_fd_ = -1;
  int stop_[2] = {-1, -1};
  std::thread thread_;
};

enum class Connect { kConnected, kTimedOut, kRefused, kError };

/// A TCP connection attempt from inside netns, waiting at most timeout. fd receives the socket
/// (connected or still connecting); the caller closes it.
inline Connect connect_from(const std::string& netns, const std::string& addr, std::uint16_t port,
                            std::chrono::milliseconds timeout, int& fd) {
  fd = in_netns(netns, [] { return ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0) + 1; }) - 1;
  if (fd < 0) return Connect::kError;
  auto sa = sockaddr_of(addr, port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) return Connect::kConnected;
  if (errno == ECONNREFUSED) return Connect::kRefused;
  if (errno != EINPROGRESS) return Connect::kError;
  pollfd pfd{fd, POLLOUT, 0};
  if (::poll(&pfd, 1, static_cast<int>(timeout.count())) == 0) return Connect::kTimedOut;
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err == 0) return Connect::kConnected;
  return err == ECONNREFUSED ? Connect::kRefused : Connect::kError;
}

/// Waits (bounded) until `want` bytes arrived on fd; true when they did and equal want.
inline bool receive(int fd, const std::string& want, std::chrono::milliseconds timeout) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (got.size() < want.size()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[256];
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) return false;
    got.append(buf, static_cast<std::size_t>(n));
  }
  return got == want;
}

inline bool send_all(int fd, const std::string& s) {
  return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
}

/// The kernel's TCP state of a socket (TCP_ESTABLISHED = 1) and its pending error (SO_ERROR).
inline int tcp_state(int fd) {
  tcp_info ti{};
  socklen_t len = sizeof ti;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return -1;
  return ti.tcpi_state;
}
inline int socket_error(int fd) {
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  return err;
}

}  // namespace fctest
