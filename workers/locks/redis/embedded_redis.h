// fencecheck — internal to the redis lock-service kind: Debian's redis-server 7 run by the harness
// itself as a child process, never the machine's service (which is neither needed nor touched).
//
// - Configuration entirely on the command line (redis-server accepts every redis.conf directive as
//   --name value; https://redis.io/docs/management/config/): no config file is read, so neither
//   /etc/redis/redis.conf nor a user's file changes it. `--daemonize no --supervised no`: it stays
//   our child; `--logfile ""`: it logs to stdout, which goes (with stderr) to the log file, opened
//   O_APPEND so that a restart adds to it.
// - `--bind <host> --port <port> --protected-mode no`: it listens on the given address only
//   (loopback, or the network lab's lock-service address, which protected mode would refuse for a
//   password-less server).
// - Its own directory `dir` (--dir): persistence none = `--save "" --appendonly no` (nothing is ever
//   written: a restart starts empty); aof = `--appendonly yes --appendfsync always` (each write is
//   fsynced before the reply; Redis persistence docs, "AOF") with `--auto-aof-rewrite-percentage 0`
//   (no background rewrite: no forked child that could outlive the server) and no RDB snapshots.
// - `--notify-keyspace-events Kg$x`: keyspace notifications (K) for generic commands (g: del,
//   expire), string commands ($: set) and expiries (x): the issuer's history (redis_watch.cpp).
// - Started through process::ChildProcess (fencecheck/process/child_process.h, the one way
//   fencecheck starts a program), stdout and stderr appended to the log (ChildSpec::output_log):
//   PR_SET_PDEATHSIG=SIGKILL, set in the child between fork and exec, and the child checks that its
//   parent is still the one that forked it (else it exits 127 at once). A harness that dies in any
//   way (kill -9 too) takes the server with it, and redis-server never forks a long-lived child
//   with these settings (no BGSAVE, no AOF rewrite, no daemonizing): so, unlike the postgres kind,
//   whose postmaster runs under another uid that clears PDEATHSIG, nothing is left for `fencecheck
//   cleanup` to find. tests/locks/redis_kind_test.cpp kills a holder with SIGKILL and sees its
//   server go.
//
// Not thread-safe; start and stop it from the harness's main thread: PR_SET_PDEATHSIG follows the
// THREAD that forked the child (prctl(2)), and the main thread outlives every child.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "redis_connection.h"

namespace fencecheck::process {
class ChildProcess;
}

namespace fencecheck::locks::redis_detail {

struct EmbeddedRedisOptions {
  std::filesystem::path binary;  ///< redis-server; empty: looked up on PATH
  std::string host = "127.0.0.1";
  int port = 0;       ///< 0: a free port of `host`, chosen at the first start and kept afterwards
  bool aof = false;   ///< persistence aof (appendfsync always); false: none
  std::chrono::milliseconds start_timeout{15000};  ///< until it answers PING with PONG
  std::chrono::milliseconds stop_grace{5000};      ///< after SIGTERM / SHUTDOWN, then SIGKILL
  int port_attempts = 5;  ///< a free port taken by someone else between choosing and binding: retry
  /// Variables added to the server's environment (redlock: LD_PRELOAD of the clock shim and
  /// FENCECHECK_CLOCK_FILE, fencecheck/faults/clock_offset.h). Empty for the redis kind.
  std::vector<std::pair<std::string, std::string>> env;
  /// A wrapper argv (ChildSpec::prefix): {"ip", "netns", "exec", "<ns>"} runs the server in a
  /// network namespace (redlock's members under `network: namespaces`). Empty: the harness's.
  std::vector<std::string> prefix;
};

class EmbeddedRedis {
 public:
  explicit EmbeddedRedis(EmbeddedRedisOptions options);
  /// stop().
  ~EmbeddedRedis();
  EmbeddedRedis(const EmbeddedRedis&) = delete;
  EmbeddedRedis& operator=(const EmbeddedRedis&) = delete;

  /// Starts redis-server on directory `dir` (created when missing), logging to `log_file`
  /// (appended), and waits until it answers PING (an AOF being loaded answers LOADING: it waits
  /// on). The port is the options' or the one chosen at the first start. Throws
  /// LockServiceUnavailable: no redis-server binary (naming Debian's package), or the server exited
  /// or did not answer in time (with the tail of its log). std::logic_error when already running.
  void start(const std::filesystem::path& dir, const std::filesystem::path& log_file);
  /// Stops the server: persistence none with SHUTDOWN NOSAVE (nothing is written), aof with SIGTERM
  /// (Redis fsyncs the AOF and exits); SIGCONT first (a stopped server cannot act), SIGKILL after
  /// stop_grace. Waits for the exit. Idempotent; never throws.
  void stop() noexcept;
  /// SIGKILL (a crash: nothing is flushed), then reaps it. Idempotent; never throws.
  void kill() noexcept;

  [[nodiscard]] bool running();
  /// The running server's pid, 0 when stopped.
  [[nodiscard]] pid_t pid() const;
  /// host and port (valid after the first start).
  [[nodiscard]] Endpoint endpoint() const { return Endpoint{options_.host, port_}; }

 private:
  EmbeddedRedisOptions options_;
  std::filesystem::path binary_;
  int port_ = 0;
  std::unique_ptr<process::ChildProcess> proc_;
};

/// PING answered PONG within 1 s to connect and 2 s to answer; otherwise false with *why (when
/// given) saying what happened. Never throws.
[[nodiscard]] bool pings(const Endpoint& ep, std::string* why);
/// The user's server must publish the keyspace events the watch reads (K, with g, $ and x, or A
/// for all of them); adds what is missing with CONFIG SET and says so (a warning). Throws
/// LockServiceError when the server does not answer or refuses CONFIG.
void ensure_notifications(const Endpoint& ep);

/// The path of redis-server: `explicit_path` when given and executable, else the first on PATH
/// (process::find_on_path); empty when there is none.
[[nodiscard]] std::filesystem::path find_redis_server(const std::filesystem::path& explicit_path = {});

}  // namespace fencecheck::locks::redis_detail
