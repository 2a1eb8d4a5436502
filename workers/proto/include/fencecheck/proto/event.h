// fencecheck — the one event schema, spoken by workers (JSON lines on stdout), the harness
// (fault and lock-service events) and read by the checkers. docs/architecture.md lists every kind.
//
// Shape (one JSON object per line):
//   {"t_ns":123,"src_ns":456,"source":"w1","kind":"write.ok","token":34,"key":"ledger",...}
// `t_ns` is the orchestrator's monotonic clock (CLOCK_MONOTONIC, ns) when it received the line;
// `src_ns` the sender's own CLOCK_MONOTONIC stamp when it emitted it. Both clocks are the same
// kernel clock on one machine, so they are comparable; across machines only t_ns is.
// Kinds follow Jepsen's operation types: "<op>.invoke", "<op>.ok" (definitely happened),
// "<op>.fail" (definitely did not happen), "<op>.info" (outcome unknown, e.g. a lost reply).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace fencecheck {

/// Every event kind. Names on the wire are the strings in kind_name().
enum class EventKind {
  kAcquireInvoke,   ///< worker asks for a lease + lock (fields: lock, ttl_ms)
  kAcquireOk,       ///< lock held (lock, lock_key, lease_id, token, revision)
  kAcquireFail,     ///< acquire failed (lock, detail)
  kKeepaliveFail,   ///< one keepalive round trip failed, lease state unknown (lease_id, detail)
  kLeaseLost,       ///< keepalive answered without TTL: the issuer says the lease is gone (lease_id, token)
  kWriteInvoke,     ///< worker sends a chunk (key, segment, chunk, token)
  kWriteOk,         ///< resource accepted it (key, segment, chunk, token, high_water)
  kWriteFail,       ///< resource rejected it (fenced): (key, segment, chunk, token, high_water, detail)
  kWriteInfo,       ///< outcome unknown (timeout, connection reset): (key, segment, chunk, token, detail)
  kPause,           ///< the holder's own ticker saw a gap (duration_ns, token if holding)
  kReleaseInvoke,   ///< worker releases its lock key (lock_key, lease_id, token)
  kReleaseOk,       ///< unlock done; revision = the revision of the delete (lock_key, token, revision)
  kReleaseFail,     ///< unlock failed (lock_key, detail)
  kJobDone,         ///< the worker wrote every segment (token of the last holding)
  kWorkerExit,      ///< harness: a worker process ended (detail: exit status)
  kFaultInject,     ///< harness: a fault took effect (fault, target, duration_ns planned)
  kFaultHeal,       ///< harness: a fault was healed (fault, target, duration_ns actual)
  kLockGrant,       ///< lock service (watch): a lock key was created (lock_key, lease_id, token=create_revision, revision)
  kLockDelete,      ///< lock service (watch): a lock key was deleted (lock_key, token=its create_revision, revision)
  kRunStart,        ///< harness: the run's clock starts (detail: scenario name)
  kRunEnd,          ///< harness: every worker ended or the run timed out
  kLog,             ///< free-form note (detail)
  kHello,           ///< a worker's first line: the protocol version it speaks (protocol; docs/worker-protocol.md)
  kProtocolError,   ///< harness: a worker's line broke the protocol (target = worker, detail = line number,
                    ///< field and problem, line = the offending line as received)
};

/// The wire name of a kind, e.g. "write.ok". Total: every enumerator has one.
[[nodiscard]] std::string_view kind_name(EventKind kind);
/// The kind for a wire name; nullopt for an unknown name.
[[nodiscard]] std::optional<EventKind> kind_from_name(std::string_view name);

/// One history entry. Value type, not synchronised: share it by copy or under a lock.
struct Event {
  std::int64_t t_ns = 0;    ///< orchestrator monotonic receive time, ns
  std::int64_t src_ns = 0;  ///< sender's monotonic emit time, ns
  std::string source;       ///< worker id ("w1"), "harness", "lock" or "resource"
  EventKind kind = EventKind::kLog;

  std::optional<std::int64_t> token;        ///< fencing token presented / granted
  std::optional<std::int64_t> high_water;   ///< resource's high-water mark in its reply
  std::optional<std::int64_t> lease_id;     ///< etcd lease id
  std::optional<std::int64_t> revision;     ///< etcd revision of the change (grant, delete, release)
  std::optional<std::int64_t> segment;      ///< segment index in the job
  std::optional<std::int64_t> chunk;        ///< chunk index in the segment
  std::optional<std::int64_t> duration_ns;  ///< pause length, fault duration
  std::optional<std::int64_t> ttl_ms;       ///< lease TTL asked for, ms
  std::optional<std::int64_t> protocol;     ///< hello: the worker protocol version (docs/worker-protocol.md)
  std::optional<std::int64_t> line_no;      ///< protocol.error: the 1-based line number on the worker's channel
  std::string lock;                         ///< lock name (the etcd lock prefix)
  std::string lock_key;                     ///< the holder's own key under the prefix
  std::string key;                          ///< resource key written
  std::string fault;                        ///< fault kind ("sigstop", ...)
  std::string target;                       ///< fault target (worker id)
  std::string detail;                       ///< human text: error, exit status, scenario name
  /// protocol.error: the offending line, verbatim (cut at 4 KiB); worker.exit of a failed worker
  /// (exit status other than 0 and 1): the last lines of its stderr.
  std::string line;
};

/// Serialises to one compact JSON object (no newline). Absent optionals and empty strings are
/// omitted. Thread-safe (pure).
[[nodiscard]] std::string to_json_line(const Event& e);
[[nodiscard]] nlohmann::json to_json(const Event& e);

/// Parses one JSON line. Throws std::invalid_argument naming the problem (not JSON, missing
/// "kind", unknown kind, a field of the wrong type) — the caller adds the file/line it came from.
[[nodiscard]] Event event_from_json_line(std::string_view line);
[[nodiscard]] Event event_from_json(const nlohmann::json& j);

/// CLOCK_MONOTONIC now, ns: the clock every t_ns and src_ns uses.
[[nodiscard]] std::int64_t monotonic_ns();

}  // namespace fencecheck
