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
//   POST /v1/effects/{key}   Fencing-Token, Fencecheck-Client; body: effect id; guarded by the
//       store's --effect-mode, never by the request
//       200 {"applied":true,"mode":M,...} | 200 {"applied":false,"duplicate":true,...} | 409 {"applied":false,...}
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
#include "fencecheck/resources/writer.h"

namespace fencecheck {

/// Talks to one store at base_url ("http://127.0.0.1:PORT") in plain HTTP/1.1 (Boost.Beast,
/// fencecheck/http/client.h; no TLS). Not thread-safe: use one client per thread. Each call opens
/// its own connection (closed when the call returns), so a call stalled by a partition never
/// blocks a later one beyond its own timeout. `timeout` bounds the connect, the sending of the
/// request and each wait for the reply's next bytes. A transport error reads "<METHOD> <url>:
/// <failure> (<cause>)", e.g. "PUT http://127.0.0.1:9/v1/keys/k/...: Connection (Connection refused)"
/// or "...: Read timeout (no reply within 5000 ms)".
class StoreClient final : public ResourceWriter {
 public:
  /// Throws std::invalid_argument when base_url is not "http://host:port".
  explicit StoreClient(std::string base_url, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  ~StoreClient() override;
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  /// Writes one chunk under a fencing token. Never throws for transport errors (they are kUnknown).
  WriteReply write(std::string_view key, std::int64_t segment, std::int64_t chunk, FencingToken token,
                   std::string_view client, std::string_view bytes) override;

  /// "store".
  [[nodiscard]] std::string_view kind() const override { return "store"; }

  /// Sets counter `key` to `value` under a fencing token (PUT /v1/counters/{key}). Outcomes as
  /// write(); never throws for transport errors.
  WriteReply write_counter(std::string_view key, std::int64_t value, FencingToken token, std::string_view client) override;

  /// Reads counter `key` (GET /v1/counters/{key}). Never throws: ok=false with the reason.
  CounterReply read_counter(std::string_view key) override;

  /// Asks for side effect `effect_id` of `key` (POST /v1/effects/{key}); the store's configured
  /// effect mode guards it, and the reply's mode says which. Never throws for transport errors
  /// (they are kUnknown).
  EffectReply post_effect(std::string_view key, std::string_view effect_id, FencingToken token,
                          std::string_view client) override;

  /// Reads everything back. Throws std::runtime_error naming the URL on a transport or HTTP error
  /// or a reply that is not a read-back, std::system_error when the temporary file (below) fails.
  ReadBack readback();
  /// readback(), with the accept log's entries handed to `log` as they are read (ReadBack::log is
  /// then empty). The reply is spilled to an unlinked temporary file in $TMPDIR (or /tmp) as it
  /// arrives and read from there element by element, so neither the body nor the log as
  /// AcceptedWrites is held (a long run's log has tens of millions of entries). Errors as
  /// readback(), and what `log` throws.
  ReadBack readback_into(const ReadBackLogSink& log);

  /// True when GET /healthz answered 200 within the timeout.
  bool healthy();

  [[nodiscard]] const std::string& base_url() const { return base_url_; }

 private:
  struct Impl;
  std::string base_url_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fencecheck
