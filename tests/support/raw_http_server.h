// fencecheck tests — a loopback TCP server that answers HTTP requests with exact bytes written by
// the test (chunked bodies with trailers, a reply that never comes, a connection closed mid-body):
// the wire edges an HTTP server library would not produce on request.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace fencecheck::testing {

/// Listens on 127.0.0.1:<any port>. For each connection (one thread each) it reads one request:
/// the head up to the blank line and a Content-Length body; records it (requests(),
/// wait_for_requests()); then calls respond(fd, request, server) on that thread, which writes
/// whatever bytes it likes with send_all(); the connection is closed when respond returns.
/// respond may wait in hold() until the test calls release(); the destructor releases it too.
/// Thread-safe; not copyable. Throws std::runtime_error when it cannot listen.
class RawHttpServer {
 public:
  using Respond = std::function<void(int fd, const std::string& request, RawHttpServer& server)>;

  explicit RawHttpServer(Respond respond) : respond_(std::move(respond)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listen_fd_, 16) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      throw std::runtime_error(std::string("raw http server: cannot listen: ") + std::strerror(errno));
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  RawHttpServer(const RawHttpServer&) = delete;
  RawHttpServer& operator=(const RawHttpServer&) = delete;
  ~RawHttpServer() {
    release();
    ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
    acceptor_.join();
    for (auto& t : connections_) t.join();
    ::close(listen_fd_);
  }

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  /// Waits until at least n requests have arrived (at most `limit`, a bound against hangs);
  /// returns whether they did.
  bool wait_for_requests(std::size_t n, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return requests_.size() >= n; });
  }
  [[nodiscard]] std::vector<std::string> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }

  /// For respond: blocks until release() (a reply that comes late, or never).
  void hold() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return released_; });
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

  /// An HTTP/1.1 reply with a chunked body, one chunk per piece, ended the way etcd's gateway ends
  /// every reply: a last chunk and the trailer "Grpc-Trailer-Content-Type: application/grpc".
  static std::string chunked_reply(std::string_view status, const std::vector<std::string>& pieces) {
    std::string out = "HTTP/1.1 " + std::string(status) +
                      "\r\nContent-Type: application/json\r\nTrailer: Grpc-Trailer-Content-Type\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n";
    char size[32];
    for (const auto& p : pieces) {
      std::snprintf(size, sizeof size, "%zx\r\n", p.size());
      out += size + p + "\r\n";
    }
    return out + "0\r\nGrpc-Trailer-Content-Type: application/grpc\r\n\r\n";
  }

  /// Writes every byte (or gives up when the peer is gone).
  static void send_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }

 private:
  void accept_loop() {
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR) continue;
        return;
      }
      connections_.emplace_back([this, fd] {
        std::string request = read_request(fd);
        {
          std::lock_guard lock(mu_);
          requests_.push_back(request);
        }
        cv_.notify_all();
        respond_(fd, request, *this);
        ::close(fd);
      });
    }
  }

  static std::string read_request(int fd) {
    std::string in;
    char buf[4096];
    for (;;) {
      if (auto head_end = in.find("\r\n\r\n"); head_end != std::string::npos) {
        std::size_t body = 0;
        if (auto cl = in.find("Content-Length: "); cl != std::string::npos && cl < head_end)
          body = std::stoul(in.substr(cl + 16));
        if (in.size() >= head_end + 4 + body) return in;
      }
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return in;
      in.append(buf, static_cast<std::size_t>(n));
    }
  }

  Respond respond_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::vector<std::thread> connections_;  // only the acceptor thread adds; joined after it ends
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> requests_;
  bool released_ = false;
};

}  // namespace fencecheck::testing
