// EmbeddedRedis (embedded_redis.h): Debian's redis-server as the harness's child.
#include "embedded_redis.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include "fencecheck/locks/lock_client.h"
#include "fencecheck/locks/lock_service_kind.h"

namespace fencecheck::locks::redis_detail {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

/// A port of `host` that was free a moment ago (bind to port 0, read it back, close).
int free_port(const std::string& host) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket(): ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    ::close(fd);
    throw std::runtime_error("embedded redis: host " + host + " is not an IPv4 address");
  }
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error("embedded redis: binding a free port on " + host + ": " + std::strerror(err));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string log_since(const fs::path& file, std::uintmax_t offset, std::size_t max_bytes = 2000) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return {};
  in.seekg(static_cast<std::streamoff>(offset));
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  return text.size() <= max_bytes ? text : "..." + text.substr(text.size() - max_bytes);
}

/// PING answered PONG: up (a server loading its AOF answers -LOADING).
bool answers(const Endpoint& ep) {
  try {
    Connection c(ep, 200ms, 1000ms);
    const Reply r = c.command({"PING"}, "PING");
    return r->type == REDIS_REPLY_STATUS && std::string_view(r->str, r->len) == "PONG";
  } catch (const LockServiceError&) {
    return false;
  }
}

}  // namespace

fs::path find_redis_server(const fs::path& explicit_path) {
  if (!explicit_path.empty()) return ::access(explicit_path.c_str(), X_OK) == 0 ? explicit_path : fs::path();
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const fs::path candidate = fs::path(dir) / "redis-server";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

EmbeddedRedis::EmbeddedRedis(EmbeddedRedisOptions options) : options_(std::move(options)), port_(options_.port) {}

EmbeddedRedis::~EmbeddedRedis() { stop(); }

bool EmbeddedRedis::reap(bool block) {
  if (pid_ == 0) return true;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_ || (r < 0 && errno == ECHILD)) {
    pid_ = 0;
    return true;
  }
  return false;
}

bool EmbeddedRedis::running() { return pid_ != 0 && !reap(false); }

void EmbeddedRedis::start(const fs::path& dir, const fs::path& log_file) {
  if (pid_ != 0) throw std::logic_error("EmbeddedRedis::start: already running on " + endpoint().text());
  if (binary_.empty()) binary_ = find_redis_server(options_.binary);
  if (binary_.empty())
    throw LockServiceUnavailable(
        (options_.binary.empty() ? std::string("redis-server not found on PATH")
                                 : "redis-server " + options_.binary.string() + " is not executable") +
        ": install Debian's redis-server (scripts/install-deps.sh redis, or apt-get install redis-server; fencecheck starts its own server, the "
        "system service need not run), or give lock_service.endpoints");
  fs::create_directories(dir);
  if (log_file.has_parent_path()) fs::create_directories(log_file.parent_path());

  const bool fixed_port = port_ != 0;
  std::string last_failure;
  for (int attempt = 1; attempt <= std::max(1, options_.port_attempts); ++attempt) {
    const int port = fixed_port ? port_ : free_port(options_.host);
    const std::vector<std::string> args{
        binary_.string(),
        "--port", std::to_string(port),
        "--bind", options_.host,
        "--protected-mode", "no",
        "--daemonize", "no",
        "--supervised", "no",
        "--dir", dir.string(),
        "--logfile", "",
        "--save", "",
        "--appendonly", options_.aof ? "yes" : "no",
        "--appendfsync", options_.aof ? "always" : "everysec",
        "--auto-aof-rewrite-percentage", "0",
        "--notify-keyspace-events", "Kg$x",
        "--databases", "1"};
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);

    const int log_fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0)
      throw std::runtime_error("embedded redis: cannot open log file " + log_file.string() + ": " + std::strerror(errno));
    std::error_code size_ec;
    const auto log_offset = fs::file_size(log_file, size_ec);
    const pid_t parent = ::getpid();
    const pid_t child = ::fork();
    if (child < 0) {
      const int err = errno;
      ::close(log_fd);
      throw std::runtime_error(std::string("embedded redis: fork: ") + std::strerror(err));
    }
    if (child == 0) {
      // Between fork and exec: async-signal-safe calls only.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the harness died before prctl took effect
      const int devnull = ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
      ::dup2(log_fd, STDOUT_FILENO);
      ::dup2(log_fd, STDERR_FILENO);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(log_fd);
    pid_ = child;
    port_ = port;
    spdlog::debug("embedded redis pid {} starting on {}:{} (dir {}, {}), log {}", child, options_.host, port, dir.string(),
                  options_.aof ? "appendonly, fsync always" : "no persistence", log_file.string());

    const auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (reap(false)) break;
      if (answers(endpoint())) return;
      std::this_thread::sleep_for(20ms);
    }
    if (pid_ != 0) {
      stop();
      throw LockServiceUnavailable("embedded redis-server on " + options_.host + ":" + std::to_string(port) +
                                   " did not answer PING within " + std::to_string(options_.start_timeout.count()) +
                                   " ms; killed it. Log " + log_file.string() + ":\n" + log_since(log_file, log_offset));
    }
    const std::string log = log_since(log_file, log_offset);
    last_failure = "redis-server exited before it answered. Log " + log_file.string() + ":\n" + log;
    if (fixed_port || log.find("Address already in use") == std::string::npos)
      throw LockServiceUnavailable("embedded redis-server on " + options_.host + ":" + std::to_string(port) + ": " +
                                   last_failure);
    port_ = 0;
    spdlog::warn("embedded redis: port {} was taken; retrying with another (attempt {})", port, attempt);
  }
  throw LockServiceUnavailable("embedded redis-server: no free port after " + std::to_string(options_.port_attempts) +
                               " attempts; last: " + last_failure);
}

void EmbeddedRedis::stop() noexcept {
  if (pid_ == 0) return;
  try {
    const pid_t pid = pid_;
    ::kill(pid, SIGCONT);  // a stopped server can neither answer SHUTDOWN nor act on SIGTERM
    bool asked = false;
    if (!options_.aof) {
      // persistence none: SHUTDOWN NOSAVE says so explicitly (nothing is written, whatever the
      // save points); the server closes the connection instead of replying.
      std::unique_ptr<Connection> c;
      try {
        c = std::make_unique<Connection>(endpoint(), 500ms, 1000ms);
      } catch (const std::exception& err) {  // no SHUTDOWN then: SIGTERM below ends it the same way
        spdlog::debug("embedded redis pid {}: no connection for SHUTDOWN ({}); SIGTERM instead", pid, err.what());
      }
      if (c) {
        try {
          c->command({"SHUTDOWN", "NOSAVE"}, "SHUTDOWN NOSAVE");
        } catch (const std::exception&) {  // the expected end: the server closed the connection
        }
        asked = true;
      }
    }
    const auto wait_exit = [this](std::chrono::milliseconds grace) {
      const auto deadline = std::chrono::steady_clock::now() + grace;
      while (!reap(false) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
      return pid_ == 0;
    };
    if (asked && wait_exit(options_.stop_grace)) return;
    ::kill(pid, SIGTERM);  // aof: Redis fsyncs the AOF and exits (no save points are configured)
    if (wait_exit(options_.stop_grace)) return;
    spdlog::warn("embedded redis pid {} ignored SIGTERM for {} ms; SIGKILL", pid, options_.stop_grace.count());
    ::kill(pid, SIGKILL);
    reap(true);
  } catch (const std::exception& err) {
    spdlog::warn("embedded redis pid {}: stopping it failed: {} (it ends with the harness: PR_SET_PDEATHSIG)", pid_,
                 err.what());
  } catch (...) {  // stop() must not throw; not a std::exception, so nothing more to say
    spdlog::warn("embedded redis pid {}: stopping it failed (unknown exception)", pid_);
  }
  pid_ = 0;
}

}  // namespace fencecheck::locks::redis_detail
