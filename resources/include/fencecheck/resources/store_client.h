// fencecheck — HTTP client for fencecheck-store (and any resource speaking its contract).
//
// The store's HTTP contract (docs/architecture.md, "The reference fenced store"):
//   PUT /v1/keys/{key}/segments/{segment}/chunks/{chunk}
//       headers: Fencing-Token: <decimal int64>, Fencecheck-Client: <writer id>; body: chunk bytes
//       200 {"accepted":true,"high_water":N,"seq":S}            accepted and durable (fsynced)
//       409 {"accepted":false,"high_water":N,"error":"..."}     fenced: token below the key's high-water
//       400/404/413 {"error":"..."}                              bad request; nothing changed
//   GET /v1/counters/{key} -> {"value":N,"high_water":T}
//   PUT /v1/counters/{key}   Fencing-Token, Fencecheck-Client; body: the new value -> as the chunk PUT
//   POST /v1/effects/{key}   Fencing-Token, Fencecheck-Client, Fencecheck-Effect; body: effect id
//       200 {"applied":true,...} | 200 {"applied":false,"duplicate":true,...} | 409 {"applied":false,...}
//   GET /v1/readback  -> fencecheck::ReadBack JSON (fencecheck/proto/readback.h) + "effects", "counters"
//   GET /healthz      -> 200 "ok"
//   GET /metrics      -> Prometheus text format
// (store_server.h has the full contract.)
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fencecheck/proto/readback.h"
#include "fencecheck/proto/token.h"
#include "fencecheck/resources/effect_mode.h"

namespace fencecheck {

/// The outcome of one write, in Jepsen's terms.
enum class WriteOutcome {
  kAccepted,  ///< ok: the resource accepted and persisted the write
  kRejected,  ///< fail: the resource refused the token (fenced); nothing was written
  kUnknown,   ///< info: no reply (timeout, connection reset): the write may or may not have happened
  kInvalid,   ///< the resource called the request malformed (4xx other than 409); nothing was written
};

struct WriteReply {
  WriteOutcome outcome = WriteOutcome::kUnknown;
  std::int64_t high_water = 0;  ///< the key's high-water mark after this request (0 when unknown)
  std::int64_t seq = 0;         ///< acceptance order when accepted
  int http_status = 0;          ///< 0 when there was no reply
  std::string error;            ///< the resource's message, or the transport error
};

/// The outcome of one side effect request.
enum class EffectOutcome {
  kApplied,    ///< 200 applied: the store performed it
  kDuplicate,  ///< 200 duplicate: idempotent, already applied before; ignored (the effect stands)
  kRejected,   ///< 409: fenced, not performed
  kUnknown,    ///< no reply / 5xx / a reply breaking the contract: it may or may not have happened
  kInvalid,    ///< 4xx other than 409: malformed, nothing happened
};

struct EffectReply {
  EffectOutcome outcome = EffectOutcome::kUnknown;
  std::int64_t high_water = 0;  ///< the mark the store compared against (0 when unknown)
  std::int64_t seq = 0;         ///< the effect record's seq (0 when unknown)
  int http_status = 0;          ///< 0 when there was no reply
  std::string error;            ///< the store's message, or the transport error
};

/// The outcome of reading a counter.
struct CounterReply {
  bool ok = false;              ///< 200 with {"value":N,"high_water":T}
  std::int64_t value = 0;
  std::int64_t high_water = 0;
  int http_status = 0;          ///< 0 when there was no reply
  std::string error;            ///< when !ok: the store's message or the transport error
};

/// Talks to one store at base_url ("http://127.0.0.1:PORT") in plain HTTP/1.1 (Boost.Beast,
/// fencecheck/http/client.h; no TLS). Not thread-safe: use one client per thread. Each call opens
/// its own connection (closed when the call returns), so a call stalled by a partition never
/// blocks a later one beyond its own timeout. `timeout` bounds the connect, the sending of the
/// request and each wait for the reply's next bytes. A transport error reads "<METHOD> <url>:
/// <failure> (<cause>)", e.g. "PUT http://127.0.0.1:9/v1/keys/k/...: Connection (Connection refused)"
/// or "...: Read timeout (no reply within 5000 ms)".
class StoreClient {
 public:
  /// Throws std::invalid_argument when base_url is not "http://host:port".
  explicit StoreClient(std::string base_url, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  /// Writes one chunk under a fencing token. Never throws for transport errors (they are kUnknown).
  WriteReply write(std::string_view key, std::int64_t segment, std::int64_t chunk, FencingToken token,
                   std::string_view client, std::string_view bytes);

  /// Sets counter `key` to `value` under a fencing token (PUT /v1/counters/{key}). Outcomes as
  /// write(); never throws for transport errors.
  WriteReply write_counter(std::string_view key, std::int64_t value, FencingToken token, std::string_view client);

  /// Reads counter `key` (GET /v1/counters/{key}). Never throws: ok=false with the reason.
  CounterReply read_counter(std::string_view key);

  /// Asks for side effect `effect_id` of `key` (POST /v1/effects/{key}). Never throws for
  /// transport errors (they are kUnknown).
  EffectReply post_effect(std::string_view key, std::string_view effect_id, EffectMode mode, FencingToken token,
                          std::string_view client);

  /// Reads everything back. Throws std::runtime_error naming the URL on a transport or HTTP error.
  ReadBack readback();

  /// True when GET /healthz answered 200 within the timeout.
  bool healthy();

  [[nodiscard]] const std::string& base_url() const { return base_url_; }

 private:
  struct Impl;
  std::string base_url_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fencecheck
