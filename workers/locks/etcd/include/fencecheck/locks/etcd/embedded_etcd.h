// fencecheck — a single-member etcd started as a child process, for tests and for the harness's
// default lock service. Binds 127.0.0.1 only.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace fencecheck {

/// Owns one `etcd` child process, started through process::ChildProcess (fencecheck/process/
/// child_process.h, the one way fencecheck starts a program). RAII: the destructor stops it.
///
/// The child runs with prctl(PR_SET_PDEATHSIG, SIGKILL), so it dies with the process that
/// started it even after a kill -9. Linux delivers that signal when the *thread* that forked the
/// child exits, so call start() from a thread that lives as long as etcd should (the main thread,
/// or the orchestrator's long-lived thread), not from a short-lived helper thread.
///
/// Thread-safety: not synchronised; use one instance from one thread at a time (client_url() and
/// pid() may be read concurrently once start() has returned and until stop()).
class EmbeddedEtcd {
 public:
  struct Options {
    /// The etcd binary; empty = look "etcd" up on PATH.
    std::filesystem::path binary;
    /// How long start() waits for GET /health to say true, per attempt.
    std::chrono::milliseconds start_timeout{15000};
    /// How long stop() waits after SIGTERM before SIGKILL.
    std::chrono::milliseconds stop_grace{5000};
    /// Attempts with fresh ports when the chosen ports turned out to be taken.
    int port_attempts = 5;
    /// Appended to etcd's command line (e.g. "--election-timeout=3000").
    std::vector<std::string> extra_args;
    /// The address etcd listens on and advertises. 127.0.0.1 by default; in a run with network
    /// namespaces, the lock service's address in the hub namespace (the caller's thread must be in
    /// that namespace: the child inherits it, and the health probe runs from it).
    std::string host = "127.0.0.1";
    /// Fixed ports (0 = pick free ones). Fixed ports are how a restarted lock service comes back
    /// at the same URL its clients know.
    int client_port = 0;
    int peer_port = 0;
  };

  EmbeddedEtcd();
  explicit EmbeddedEtcd(Options options);
  ~EmbeddedEtcd();
  EmbeddedEtcd(const EmbeddedEtcd&) = delete;
  EmbeddedEtcd& operator=(const EmbeddedEtcd&) = delete;

  /// Launches `etcd --name default --data-dir data_dir` on Options::host, on two free ports (client
  /// and peer; or the fixed ones from Options) with stdout and stderr appended to log_file, and returns once GET /health says true.
  /// Ports are picked by binding port 0 and releasing it (process::free_tcp_port), so another process can take one before
  /// etcd binds it: etcd then exits with "address already in use", and start() retries with new
  /// ports (Options::port_attempts), removing the member directory the failed attempt created.
  /// Throws std::runtime_error when: etcd is not installed ("etcd not found: install Debian's
  /// etcd-server (apt-get install etcd-server)"); it exits (with the tail of its log); it is not
  /// healthy within start_timeout (it is killed); already started (std::logic_error).
  void start(const std::filesystem::path& data_dir, const std::filesystem::path& log_file);

  /// SIGTERM, wait up to stop_grace, then SIGKILL; reaps the child. Idempotent; never throws.
  void stop() noexcept;

  /// True while the child process exists (started and not reaped).
  [[nodiscard]] bool running();

  /// "http://127.0.0.1:PORT"; empty before start().
  [[nodiscard]] const std::string& client_url() const { return client_url_; }
  /// "http://127.0.0.1:PORT" of the peer listener; empty before start().
  [[nodiscard]] const std::string& peer_url() const { return peer_url_; }
  /// The child's pid; 0 when not running.
  [[nodiscard]] int pid() const;

 private:
  struct Impl;
  Options options_;
  std::unique_ptr<Impl> impl_;
  std::string client_url_;
  std::string peer_url_;
};

}  // namespace fencecheck
