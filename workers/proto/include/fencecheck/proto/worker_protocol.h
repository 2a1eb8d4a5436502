// fencecheck — the worker protocol: what a worker process sends the harness, and how the harness
// reads it. The document is docs/worker-protocol.md; this is its one implementation, used by the
// orchestrator for every worker (fencecheck-worker and a user's command alike).
//
// A worker writes JSON lines (event.h's schema) to the file descriptor named by
// FENCECHECK_EVENTS_FD (3). The first line is {"kind":"hello","protocol":1}. Each later line is
// one event a worker may send (worker_may_send), with the fields its kind requires
// (required_fields). Anything else is a protocol error: the orchestrator records it as a
// protocol.error event, keeps the line, and the run cannot be judged safe through it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fencecheck/proto/event.h"

namespace fencecheck {

/// The protocol version this harness speaks (the hello line's "protocol").
inline constexpr std::int64_t kWorkerProtocolVersion = 1;

/// The descriptor a worker's event channel is on (FENCECHECK_EVENTS_FD).
inline constexpr int kWorkerEventsFd = 3;

/// The longest line kept verbatim in a protocol.error (longer ones are cut, with "...").
inline constexpr std::size_t kProtocolLineKept = 4096;

/// Whether a worker may send this kind: hello, the Jepsen-style acquire / write / release
/// operations, keepalive.fail, lease.lost, pause, job.done, job.gave_up and log. The harness's own kinds
/// (worker.exit, fault.*, lock.*, run.*, protocol.error) are not a worker's to send. Pure.
[[nodiscard]] bool worker_may_send(EventKind kind);

/// The fields an event of this kind must carry (docs/worker-protocol.md, "Required fields"):
/// acquire.ok: token, lock_key; write.*: key, token; release.*: lock_key; pause: duration_ns;
/// job.gave_up: detail (why it gave up); hello: protocol. Empty for the rest. A required key,
/// lock_key or detail must not be empty either. Pure.
[[nodiscard]] std::vector<std::string_view> required_fields(EventKind kind);

/// One line read from a worker's event channel.
struct WorkerLine {
  std::optional<Event> event;  ///< the event when the line keeps the protocol
  std::string error;           ///< else what is wrong ("write.ok has no field 'token'")
  std::string field;           ///< the field at fault, "" when the line as a whole is
};

/// Reads one line. `first`: it is the first line the worker sent (which must be hello, with
/// this harness's version). A line that is not one JSON object, an unknown kind, a kind that is
/// not a worker's, a missing required field, a field of the wrong type (a token that is not an
/// integer) or a second hello gives `error`. Never throws. Pure; thread-safe.
[[nodiscard]] WorkerLine read_worker_line(std::string_view line, bool first);

}  // namespace fencecheck
