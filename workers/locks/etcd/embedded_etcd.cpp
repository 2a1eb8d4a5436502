#include "fencecheck/locks/etcd/embedded_etcd.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <spdlog/spdlog.h>

#include "fencecheck/locks/etcd/etcd_client.h"

namespace fencecheck {
namespace {

namespace bp = boost::process;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

/// Runs in the child between fork and exec: only async-signal-safe calls.
struct ChildSetup : bp::extend::handler {
  int log_fd = -1;
  pid_t parent = 0;
  template <class Executor>
  void on_exec_setup(Executor& /*exec*/) const {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
  }
};

std::string read_from(const fs::path& file, std::uintmax_t offset) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return {};
  in.seekg(static_cast<std::streamoff>(offset));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tail(const std::string& text, std::size_t max_bytes = 2000) {
  return text.size() <= max_bytes ? text : "..." + text.substr(text.size() - max_bytes);
}

std::string url(const std::string& host, int port) { return "http://" + host + ":" + std::to_string(port); }

}  // namespace

int pick_free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket(): ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    throw std::runtime_error(std::string("binding a free port on 127.0.0.1: ") + std::strerror(err));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

struct EmbeddedEtcd::Impl {
  bp::child child;
};

EmbeddedEtcd::EmbeddedEtcd() : EmbeddedEtcd(Options{}) {}
EmbeddedEtcd::EmbeddedEtcd(Options options) : options_(std::move(options)) {}
EmbeddedEtcd::~EmbeddedEtcd() { stop(); }

int EmbeddedEtcd::pid() const { return impl_ ? impl_->child.id() : 0; }

bool EmbeddedEtcd::running() {
  if (!impl_) return false;
  std::error_code ec;
  return impl_->child.running(ec);
}

void EmbeddedEtcd::start(const fs::path& data_dir, const fs::path& log_file) {
  if (impl_) throw std::logic_error("EmbeddedEtcd::start: already started (" + client_url_ + ")");
  fs::path binary = options_.binary;
  if (binary.empty()) binary = bp::search_path("etcd").string();
  if (binary.empty() || !fs::exists(binary))
    throw std::runtime_error("etcd not found: install Debian's etcd-server (apt-get install etcd-server)");

  fs::create_directories(data_dir);
  if (log_file.has_parent_path()) fs::create_directories(log_file.parent_path());
  const fs::path member_dir = data_dir / "member";

  // etcd reads ETCD_* variables as flags; the caller's environment must not reconfigure it.
  bp::environment env = boost::this_process::environment();
  std::vector<std::string> etcd_vars;
  for (const auto& entry : env)
    if (entry.get_name().rfind("ETCD_", 0) == 0) etcd_vars.push_back(entry.get_name());
  for (const auto& name : etcd_vars) env.erase(name);

  std::string last_failure;
  for (int attempt = 1; attempt <= std::max(1, options_.port_attempts); ++attempt) {
    const int client_port = options_.client_port > 0 ? options_.client_port : pick_free_loopback_port();
    int peer_port = options_.peer_port > 0 ? options_.peer_port : pick_free_loopback_port();
    while (peer_port == client_port) peer_port = pick_free_loopback_port();
    const auto url = [this](int port) { return ::fencecheck::url(options_.host, port); };
    const bool member_existed = fs::exists(member_dir);

    int log_fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0)
      throw std::runtime_error("EmbeddedEtcd: cannot open log file " + log_file.string() + ": " + std::strerror(errno));
    std::error_code size_ec;
    const auto log_offset = fs::file_size(log_file, size_ec);

    std::vector<std::string> args{"--name", "default",
                                  "--data-dir", data_dir.string(),
                                  "--listen-client-urls", url(client_port),
                                  "--advertise-client-urls", url(client_port),
                                  "--listen-peer-urls", url(peer_port),
                                  "--initial-advertise-peer-urls", url(peer_port),
                                  "--initial-cluster", "default=" + url(peer_port),
                                  "--initial-cluster-state", "new"};
    args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());

    ChildSetup setup;
    setup.log_fd = log_fd;
    setup.parent = ::getpid();
    auto impl = std::make_unique<Impl>();
    std::error_code spawn_ec;
    impl->child = bp::child(bp::exe = binary.string(), bp::args = args, env, bp::std_in < bp::null, setup, spawn_ec);
    ::close(log_fd);
    if (spawn_ec) throw std::runtime_error("EmbeddedEtcd: cannot start " + binary.string() + ": " + spawn_ec.message());
    spdlog::debug("embedded etcd pid {} starting on {} (peer {}), log {}", impl->child.id(), url(client_port),
                  url(peer_port), log_file.string());

    EtcdClient probe(url(client_port), EtcdClient::Options{200ms, 1000ms});
    const auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
    bool healthy = false;
    bool exited = false;
    while (std::chrono::steady_clock::now() < deadline) {
      std::error_code ec;
      if (!impl->child.running(ec)) {
        exited = true;
        break;
      }
      if (probe.health()) {
        healthy = true;
        break;
      }
      std::this_thread::sleep_for(50ms);
    }
    if (healthy) {
      impl_ = std::move(impl);
      client_url_ = url(client_port);
      peer_url_ = url(peer_port);
      return;
    }
    if (!exited) {
      std::error_code ec;
      impl->child.terminate(ec);
      throw std::runtime_error("EmbeddedEtcd: etcd on " + url(client_port) + " not healthy within " +
                               std::to_string(options_.start_timeout.count()) + " ms; killed it. Log " +
                               log_file.string() + ":\n" + tail(read_from(log_file, log_offset)));
    }
    const std::string log = read_from(log_file, log_offset);
    const int code = impl->child.exit_code();
    last_failure = "etcd exited with status " + std::to_string(code) + " before it was healthy. Log " +
                   log_file.string() + ":\n" + tail(log);
    if (!member_existed) {
      std::error_code ec;
      fs::remove_all(member_dir, ec);
    }
    if (log.find("address already in use") == std::string::npos) throw std::runtime_error("EmbeddedEtcd: " + last_failure);
    spdlog::warn("embedded etcd: port {} or {} was taken; retrying with new ports (attempt {})", client_port,
                 peer_port, attempt);
  }
  throw std::runtime_error("EmbeddedEtcd: no free ports after " + std::to_string(options_.port_attempts) +
                           " attempts; last: " + last_failure);
}

void EmbeddedEtcd::stop() noexcept {
  if (!impl_) return;
  try {
    auto& child = impl_->child;
    std::error_code ec;
    if (child.running(ec)) {
      const pid_t pid = child.id();
      ::kill(pid, SIGTERM);
      ::kill(pid, SIGCONT);  // a SIGSTOPped etcd (a fault) cannot act on SIGTERM otherwise
      const auto deadline = std::chrono::steady_clock::now() + options_.stop_grace;
      while (child.running(ec) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
      if (child.running(ec)) {
        spdlog::warn("embedded etcd pid {} ignored SIGTERM for {} ms; SIGKILL", pid, options_.stop_grace.count());
        child.terminate(ec);  // SIGKILL and reap
      }
    }
    if (child.valid() && child.joinable()) child.wait(ec);
  } catch (const std::exception& err) {
    spdlog::warn("embedded etcd: stopping it failed: {} (it ends with the harness: PR_SET_PDEATHSIG)", err.what());
  } catch (...) {  // stop() must not throw; not a std::exception, so nothing more to say
    spdlog::warn("embedded etcd: stopping it failed (unknown exception)");
  }
  impl_.reset();
  client_url_.clear();
  peer_url_.clear();
}

}  // namespace fencecheck
