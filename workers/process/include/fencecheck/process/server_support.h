// fencecheck — small helpers for the embedded servers the harness runs itself (the lock-service
// kinds' etcd, ZooKeeper and Redis, the resource kinds' PostgreSQL and http service): what an
// embedded server is given (EmbeddedOptions), a free port, a log's tail for an error message,
// whether a process is gone. Part of fencecheck_process (workers/process/): the only free-port and
// log-tail functions in fencecheck; every server starts through ChildProcess (child_process.h).
//
// Thread-safety: every function is safe to call from any thread (no shared state).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

namespace fencecheck::process {

/// Where and how an embedded server the harness runs itself lives: what the orchestrator's run
/// context gives every such server (PostgreSQL's and ZooKeeper's; a kind adds its own settings
/// beside it). Plain data.
struct EmbeddedOptions {
  std::filesystem::path run_dir;  ///< its data directory goes below it
  /// The log file of a named process; run_dir/logs/<name>.log when empty.
  std::function<std::filesystem::path(const std::string&)> log_path;
  std::string run_id;  ///< the run's id (names of directories outside run_dir)
  std::string host = "127.0.0.1";  ///< the address it listens on (loopback, or the network lab's)
  int port = 0;  ///< 0: a free port of `host` (free_tcp_port; retried when taken), kept across restarts
  std::chrono::milliseconds start_timeout{60000};  ///< until it serves, per attempt
  std::chrono::milliseconds stop_grace{5000};      ///< after the polite stop signal, before harder ones
};

/// A TCP port of `host` (an IPv4 or IPv6 address) that was free a moment ago: bound to port 0 and
/// released, so a server started on it may still lose the race (its starter retries). Throws
/// std::runtime_error when `host` is not an address or nothing can be bound there.
[[nodiscard]] int free_tcp_port(const std::string& host);

/// A file's bytes from byte `from` on ("" when it cannot be read). `from`: where this start's
/// output began in a log that every restart appends to (its size before the start).
[[nodiscard]] std::string read_text(const std::filesystem::path& file, std::uintmax_t from = 0);

/// The tail of a log for an error message (the one such helper): the last `max_lines` lines of
/// `text`, and of those at most the last `max_bytes` bytes, with "..." in front when anything was
/// cut. The newlines at the very end are dropped and not counted as lines. Pure. Use
/// tail_text(read_text(log, from)) for a file.
[[nodiscard]] std::string tail_text(std::string_view text, std::size_t max_lines = 30, std::size_t max_bytes = 2000);

/// Why a server the harness started did not come up, for its Unavailable error: "<what> exited
/// before it <ready>" or "<what> did not <ready> within <timeout> ms; stopped it", then the log
/// file's name and the tail of `log_text`. `ready` in both tenses: {"accepted connections",
/// "accept connections"}.
[[nodiscard]] std::string start_failure(const std::string& what, bool exited,
                                        const std::pair<std::string, std::string>& ready,
                                        std::chrono::milliseconds timeout, const std::filesystem::path& log,
                                        const std::string& log_text);

/// True when a server's log says it could not bind its port ("Address already in use", Go's (etcd's)
/// "address already in use", PostgreSQL's "could not bind"): a start on another free port may succeed.
[[nodiscard]] bool port_was_taken(const std::string& log_text);

/// True when `pid` no longer runs: no such process, or a zombie its parent has not reaped yet.
[[nodiscard]] bool process_gone(pid_t pid);

/// Waits up to `bound` until process_gone(pid). True when it is gone.
bool wait_process_gone(pid_t pid, std::chrono::milliseconds bound);

}  // namespace fencecheck::process
