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
  kJobGaveUp,       ///< the worker stops for good with its job unfinished, and says why (detail; token if
                    ///< holding): the only way a worker says "gave up" (docs/worker-protocol.md)
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
  /// protocol.error: the offending line, verbatim (cut at 4 KiB); worker.exit of a worker that
  /// failed or crashed (an exit status other than 0, or an exit without job.done or job.gave_up):
  /// the last lines of its stderr.
  std::string line;

  /// Every field equal (an absent optional equals only an absent one).
  friend bool operator==(const Event&, const Event&) = default;
};

/// Serialises to one compact JSON object (no newline). Absent optionals and empty strings are
/// omitted. Thread-safe (pure).
[[nodiscard]] std::string to_json_line(const Event& e);
[[nodiscard]] nlohmann::json to_json(const Event& e);

/// Parses one JSON line (any bytes; no padding needed after them): a history.jsonl line, a
/// worker's line. The rules are event_from_json's: one JSON object; "kind" a string naming a known
/// kind; t_ns and src_ns integers (absent: 0); the other integer fields JSON integers (1.0 and 1e3
/// are refused; one above INT64_MAX up to UINT64_MAX wraps, as nlohmann's get<int64_t>); the
/// string fields strings; null is absent; unknown keys are ignored (their values must be JSON); of
/// a repeated key the last wins; nothing but white space after the object.
/// Parsed with simdjson's ondemand API (workers/proto/src/event_simdjson.cpp: about 8x faster,
/// docs/performance.md) when the line is plain (every key an Event field at most once, integers
/// within int64, nothing after the object: every line fencecheck writes); any other line goes to
/// the reference, detail::event_from_json_line_nlohmann. So the Event, and the message of any
/// error, are the reference's on every input (tests/proto/event_parse_test.cpp checks it).
/// Throws std::invalid_argument naming the problem: "not a JSON event: <nlohmann's parse error,
/// with its column>", "event is not a JSON object", "event has no string field 'kind'", "unknown
/// event kind '<name>'", "field '<f>' must be an integer", "field '<f>' must be a string"; the
/// caller adds the file/line it came from.
/// Thread-safe: each thread has its own simdjson parser and padded copy of the line
/// (thread_local, kept for the thread's life, about the size of the longest line it parsed).
[[nodiscard]] Event event_from_json_line(std::string_view line);

/// How many readable bytes event_from_padded_line needs after a line (simdjson's
/// SIMDJSON_PADDING, which event_simdjson.cpp checks at compile time).
inline constexpr std::size_t kLinePadding = 64;

/// event_from_json_line for a reader that keeps its lines in buffers of its own (the history
/// reader, harness/check/src/history.cpp): the same Event, or the same std::invalid_argument, on
/// every input, but `line` is not copied and `out` is reused (its strings keep their capacity;
/// every field is set, absent ones to their defaults). Requires kLinePadding readable bytes after
/// line.data() + line.size(), of any content: simdjson reads them but their content does not
/// affect the parse (simdjson's padding rule; its maintainers, simdjson issue 1965). On a throw
/// `out` holds unspecified field values. About 1.17x faster than event_from_json_line on a
/// history's lines read from .zst (bench_history_parse at 10^6: 5.35 M against 4.58 M lines per
/// CPU second). Returns true when the simdjson fast path took the line (see event_from_json_line:
/// then every key in it is an Event field, at the top level, at most once), false when the
/// reference parsed it. Thread-safe as event_from_json_line.
bool event_from_padded_line(std::string_view line, Event& out);
/// Reads an Event from a parsed JSON value, by the rules of event_from_json_line; throws
/// std::invalid_argument as it does (all but the "not a JSON event" message). Thread-safe (pure).
[[nodiscard]] Event event_from_json(const nlohmann::json& j);

namespace detail {
/// The reference implementation of event_from_json_line: nlohmann::json::parse, then
/// event_from_json (a parse error, or a number beyond a double's range, is "not a JSON event:
/// ..."). About 0.5 M lines per CPU second. For the differential tests, the fuzz target and
/// bench/bench_history_parse; production code calls event_from_json_line. Thread-safe (pure).
[[nodiscard]] Event event_from_json_line_nlohmann(std::string_view line);
/// event_from_json_line's simdjson fast path alone: true with `out` set when the line is plain
/// (see event_from_json_line); false otherwise (`out` then holds a partial Event). Never throws
/// on bad input (std::bad_alloc aside). Thread-safe as event_from_json_line.
[[nodiscard]] bool event_from_json_line_fast(std::string_view line, Event& out);
}  // namespace detail

/// CLOCK_MONOTONIC now, ns: the clock every t_ns and src_ns uses.
[[nodiscard]] std::int64_t monotonic_ns();

}  // namespace fencecheck
