// fencecheck — small helpers for the embedded servers the harness runs itself (the postgres
// resource kind's PostgreSQL, the zookeeper lock-service kind's ZooKeeper): a free port, a log's
// tail for an error message, whether a process is gone. Part of fencecheck_process.
//
// Thread-safety: every function is safe to call from any thread (no shared state).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <string>
#include <utility>

namespace fencecheck::harness {

/// A TCP port of `host` (an IPv4 or IPv6 address) that was free a moment ago: bound to port 0 and
/// released, so a server started on it may still lose the race (its starter retries). Throws
/// std::runtime_error when `host` is not an address or nothing can be bound there.
[[nodiscard]] int free_tcp_port(const std::string& host);

/// A file's bytes ("" when it cannot be read).
[[nodiscard]] std::string read_text(const std::filesystem::path& file);

/// The last `max_bytes` of `text`, with "..." in front when it was cut: a log's tail in a message.
[[nodiscard]] std::string tail_text(const std::string& text, std::size_t max_bytes = 2000);

/// Why a server the harness started did not come up, for its Unavailable error: "<what> exited
/// before it <ready>" or "<what> did not <ready> within <timeout> ms; stopped it", then the log
/// file's name and the tail of `log_text`. `ready` in both tenses: {"accepted connections",
/// "accept connections"}.
[[nodiscard]] std::string start_failure(const std::string& what, bool exited,
                                        const std::pair<std::string, std::string>& ready,
                                        std::chrono::milliseconds timeout, const std::filesystem::path& log,
                                        const std::string& log_text);

/// True when a server's log says it could not bind its port ("Address already in use", PostgreSQL's
/// "could not bind"): a start on another free port may succeed.
[[nodiscard]] bool port_was_taken(const std::string& log_text);

/// True when `pid` no longer runs: no such process, or a zombie its parent has not reaped yet.
[[nodiscard]] bool process_gone(pid_t pid);

/// Waits up to `bound` until process_gone(pid). True when it is gone.
bool wait_process_gone(pid_t pid, std::chrono::milliseconds bound);

}  // namespace fencecheck::harness
