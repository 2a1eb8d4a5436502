#include "fencecheck/locks/etcd/embedded_etcd.h"

#include <signal.h>

#include <memory>
#include <stdexcept>
#include <thread>

#include <spdlog/spdlog.h>

#include "fencecheck/locks/etcd/etcd_client.h"
#include "fencecheck/process/child_process.h"
#include "fencecheck/process/server_support.h"

namespace fencecheck {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string url(const std::string& host, int port) { return "http://" + host + ":" + std::to_string(port); }

}  // namespace

struct EmbeddedEtcd::Impl {
  std::unique_ptr<process::ChildProcess> child;
};

EmbeddedEtcd::EmbeddedEtcd() : EmbeddedEtcd(Options{}) {}
EmbeddedEtcd::EmbeddedEtcd(Options options) : options_(std::move(options)) {}
EmbeddedEtcd::~EmbeddedEtcd() { stop(); }

int EmbeddedEtcd::pid() const { return impl_ ? impl_->child->pid() : 0; }

bool EmbeddedEtcd::running() { return impl_ && impl_->child->running(); }

void EmbeddedEtcd::start(const fs::path& data_dir, const fs::path& log_file) {
  if (impl_) throw std::logic_error("EmbeddedEtcd::start: already started (" + client_url_ + ")");
  fs::path binary = options_.binary;
  if (binary.empty()) binary = process::find_on_path("etcd").value_or(fs::path());
  if (binary.empty() || !fs::exists(binary))
    throw std::runtime_error("etcd not found: install Debian's etcd-server (apt-get install etcd-server)");

  fs::create_directories(data_dir);
  if (log_file.has_parent_path()) fs::create_directories(log_file.parent_path());
  const fs::path member_dir = data_dir / "member";

  std::string last_failure;
  for (int attempt = 1; attempt <= std::max(1, options_.port_attempts); ++attempt) {
    const int client_port = options_.client_port > 0 ? options_.client_port : process::free_tcp_port(options_.host);
    int peer_port = options_.peer_port > 0 ? options_.peer_port : process::free_tcp_port(options_.host);
    while (peer_port == client_port) peer_port = process::free_tcp_port(options_.host);
    const auto url = [this](int port) { return ::fencecheck::url(options_.host, port); };
    const bool member_existed = fs::exists(member_dir);

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

    process::ChildSpec spec;
    spec.name = "etcd";
    spec.exe = binary;
    spec.args = std::move(args);
    spec.output_log = log_file;  // appended: a restart adds to it
    spec.env_drop_prefixes = {"ETCD_"};  // etcd reads ETCD_* variables as flags: the caller's must not reconfigure it
    auto impl = std::make_unique<Impl>();
    try {
      impl->child = std::make_unique<process::ChildProcess>(std::move(spec), nullptr);
    } catch (const std::runtime_error& err) {
      throw std::runtime_error(std::string("EmbeddedEtcd: ") + err.what());
    }
    spdlog::debug("embedded etcd pid {} starting on {} (peer {}), log {}", impl->child->pid(), url(client_port),
                  url(peer_port), log_file.string());

    EtcdClient probe(url(client_port), EtcdClient::Options{200ms, 1000ms});
    const auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
    bool healthy = false;
    bool exited = false;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!impl->child->running()) {
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
    if (!exited) impl->child->terminate(0ms);  // SIGKILL: it did not become healthy
    const std::string log = process::read_text(log_file, log_offset);
    const std::string what =
        "etcd on " + url(client_port) +
        (exited ? " (exit status " + std::to_string(impl->child->exit_code().value_or(-1)) + ")" : std::string());
    last_failure = process::start_failure(what, exited, {"was healthy", "become healthy"}, options_.start_timeout,
                                          log_file, log);
    if (!exited) throw std::runtime_error("EmbeddedEtcd: " + last_failure);
    if (!member_existed) {
      std::error_code ec;
      fs::remove_all(member_dir, ec);
    }
    if (!process::port_was_taken(log)) throw std::runtime_error("EmbeddedEtcd: " + last_failure);
    spdlog::warn("embedded etcd: port {} or {} was taken; retrying with new ports (attempt {})", client_port,
                 peer_port, attempt);
  }
  throw std::runtime_error("EmbeddedEtcd: no free ports after " + std::to_string(options_.port_attempts) +
                           " attempts; last: " + last_failure);
}

void EmbeddedEtcd::stop() noexcept {
  if (!impl_) return;
  try {
    auto& child = *impl_->child;
    if (child.running()) {
      // SIGCONT (a SIGSTOPped etcd, a fault, cannot act on SIGTERM otherwise), SIGTERM, SIGKILL
      // after stop_grace; reaped.
      child.terminate(options_.stop_grace);
      if (const auto code = child.exit_code(); code && *code == 128 + SIGKILL)
        spdlog::warn("embedded etcd pid {} ended by SIGKILL (it ignored SIGTERM for {} ms, or was killed)", child.pid(),
                     options_.stop_grace.count());
    }
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
