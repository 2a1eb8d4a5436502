// fencecheck — the worker's side of the resource axis: one interface for every resource kind's
// write path (docs/architecture.md, "The resource axis").
//
// The reference worker talks to "a resource writer" and never knows which resource it is: the
// store (StoreClient, HTTP), PostgreSQL (the user's SQL, libpq) or any HTTP service speaking the
// contract of docs/resource-http.md. Every outcome is in Jepsen's terms (Kingsbury, "Jepsen:
// knossos"/"elle": invoke / ok / fail / info): accepted = ok, rejected = fail (the fence refused
// the token, nothing was written), unknown = info (no reply, a 5xx, an SQL error: the write may or
// may not have happened, and the checkers treat it as possibly applied, never as rejected).
//
// A writer is told where its resource is by an *endpoint*: a JSON object {"kind": NAME, ...} with
// the kind's resolved fields (an address, a DSN, SQL statements). The harness builds it
// (ResourceInstance::endpoint(), resource_kind.h) and hands it to workers (fencecheck-worker
// --resource JSON); make_resource_writer() turns it back into a writer.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fencecheck/proto/token.h"
#include "fencecheck/resources/effect_mode.h"

namespace fencecheck {

/// The outcome of one write, in Jepsen's terms.
enum class WriteOutcome {
  kAccepted,  ///< ok: the resource accepted and persisted the write
  kRejected,  ///< fail: the resource refused the token (fenced); nothing was written
  kUnknown,   ///< info: no reply (timeout, connection reset, 5xx, SQL error): may or may not have happened
  kInvalid,   ///< the resource called the request malformed (4xx other than its rejection status); nothing was written
};

struct WriteReply {
  WriteOutcome outcome = WriteOutcome::kUnknown;
  std::int64_t high_water = 0;  ///< the key's high-water mark after this request (0 when the resource did not say)
  std::int64_t seq = 0;         ///< acceptance order when accepted (0 when the resource did not say)
  int http_status = 0;          ///< 0 when there was no HTTP reply (or the kind is not HTTP)
  std::string error;            ///< the resource's message, or the transport / database error
};

/// The outcome of one side effect request.
enum class EffectOutcome {
  kApplied,    ///< 200 applied: the store performed it
  kDuplicate,  ///< 200 duplicate: idempotent, already applied before; ignored (the effect stands)
  kRejected,   ///< 409: fenced, not performed
  kUnknown,    ///< no reply / 5xx / a reply breaking the contract: it may or may not have happened
  kInvalid,    ///< 4xx other than 409, or a kind without side effects: nothing happened
};

struct EffectReply {
  EffectOutcome outcome = EffectOutcome::kUnknown;
  std::int64_t high_water = 0;  ///< the mark the store compared against (0 when unknown)
  std::int64_t seq = 0;         ///< the effect record's seq (0 when unknown)
  /// The guard the resource applied (its configured effect mode, the reply's "mode"); nullopt
  /// when the reply did not say (no reply, an error reply, an older store).
  std::optional<EffectMode> mode;
  int http_status = 0;          ///< 0 when there was no reply
  std::string error;            ///< the store's message, or the transport error
};

/// The outcome of reading a counter.
struct CounterReply {
  bool ok = false;              ///< the value was read
  std::int64_t value = 0;
  std::int64_t high_water = 0;
  int http_status = 0;          ///< 0 when there was no HTTP reply
  std::string error;            ///< when !ok: the resource's message or the transport error
};

/// One resource's write path, as the reference worker uses it. Implementations: StoreClient
/// (kind store), HttpResourceClient (kind http), PostgresWriter (kind postgres).
///
/// Thread-safety: not thread-safe; one writer per thread (each worker has one). No method throws
/// for a transport or database failure: those are outcomes (kUnknown with `error`).
class ResourceWriter {
 public:
  virtual ~ResourceWriter() = default;

  /// The kind's registered name ("store", "postgres", "http").
  [[nodiscard]] virtual std::string_view kind() const = 0;

  /// Writes one chunk (`bytes`, self-describing: fencecheck/proto/chunk.h) of key/segment/chunk
  /// under `token`, as writer `client`.
  virtual WriteReply write(std::string_view key, std::int64_t segment, std::int64_t chunk, FencingToken token,
                           std::string_view client, std::string_view bytes) = 0;

  /// The counter job (catalogue item 9): set counter `key` to `value` under `token`. Kinds without
  /// counters answer kInvalid naming the kind (the default).
  virtual WriteReply write_counter(std::string_view key, std::int64_t value, FencingToken token, std::string_view client);
  /// Reads counter `key`. Kinds without counters answer ok=false naming the kind (the default).
  virtual CounterReply read_counter(std::string_view key);
  /// The side-effect job (catalogue items 8, 11): ask for effect `effect_id` of `key` under
  /// `token`. How it is guarded (fenced, unfenced, idempotent) is the resource's configuration,
  /// set when it started, never the caller's choice (issue 14); the reply says which applied.
  /// Kinds without side effects answer kInvalid naming the kind (the default).
  virtual EffectReply post_effect(std::string_view key, std::string_view effect_id, FencingToken token,
                                  std::string_view client);
};

/// Builds the writer an endpoint names ({"kind": "store", "url": ...}; see each kind's
/// documentation for its fields). `timeout` bounds each request (connect, send, each wait for
/// reply bytes; for postgres the statement via statement_timeout and the connect). Connects lazily
/// where the kind can (the first write). Throws std::invalid_argument naming the kind and the
/// field for an endpoint that is not valid (unknown kind, missing field).
[[nodiscard]] std::unique_ptr<ResourceWriter> make_resource_writer(const nlohmann::json& endpoint,
                                                                   std::chrono::milliseconds timeout);

/// Builds a kind's writer from an endpoint (make_resource_writer's per-kind step).
using ResourceWriterFactory =
    std::function<std::unique_ptr<ResourceWriter>(const nlohmann::json& endpoint, std::chrono::milliseconds timeout)>;
/// Adds the writer of kind `name` to the writer registry at run time, after the built-in table
/// (one row per kind in resources/kinds.h). resources::register_resource_kind calls it for a kind's
/// own make_writer; a worker-only program (which links no kinds) may call it directly. For tests
/// and out-of-tree kinds. Throws std::invalid_argument when `name` already has a writer. Thread-safe.
void register_resource_writer(std::string_view name, ResourceWriterFactory factory);
/// Every kind with a writer: the built-in table's order, then those registered. Thread-safe.
[[nodiscard]] std::vector<std::string> resource_writer_names();

}  // namespace fencecheck
