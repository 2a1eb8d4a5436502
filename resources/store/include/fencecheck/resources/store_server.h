// fencecheck — StoreServer: FencedStore on HTTP (cpp-httplib), speaking the contract documented
// in store_client.h, plus Prometheus metrics on the same port.
//
//   PUT /v1/keys/{key}/segments/{segment}/chunks/{chunk}
//       headers Fencing-Token: <0..2^63-1>, Fencecheck-Client: <writer id>; body: the chunk
//       200 {"accepted":true,"high_water":N,"seq":S}         accepted and durable
//       409 {"accepted":false,"high_water":N,"error":"..."}  fenced (Kleppmann's rule, store.h)
//       400 {"error":"..."}  bad key / segment / chunk / token / client / empty body
//       413 {"error":"..."}  body over max_body_bytes
//       500 {"error":"..."}  the store hit an I/O error: the write's fate is unknown
//   GET /v1/counters/{key}
//       200 {"value":N,"high_water":T}   the counter (0 when never written) and the mark a write
//                                        to it is compared against (0 when none)
//   PUT /v1/counters/{key}
//       headers Fencing-Token, Fencecheck-Client; body: the new value, decimal (a trailing newline
//       is allowed). Fenced exactly like a chunk write to the key; replies as the chunk PUT:
//       200 {"accepted":true,"high_water":N,"seq":S} / 409 {"accepted":false,"high_water":N,"error"}
//   POST /v1/effects/{key}
//       headers Fencing-Token, Fencecheck-Client; body: the effect id, [A-Za-z0-9_.:-]{1,256}
//       (e.g. "w1:seg2"). Guarded by the store's configured effect mode
//       (StoreServerOptions::effect_mode, fencecheck-store --effect-mode), never by the request:
//       how an effect is guarded is the resource's design. A Fencecheck-Effect header (which
//       clients before issue 14 sent to choose the mode) is not read at all: whatever it says, a
//       store configured fenced answers a token below the mark 409. Every reply says the mode
//       that guarded it ("mode").
//       200 {"applied":true,"mode":M,"high_water":N,"seq":S}                           performed, durable
//       200 {"applied":false,"duplicate":true,"mode":M,"high_water":N,"seq":S,"error"} idempotent repeat, ignored
//       409 {"applied":false,"mode":M,"high_water":N,"seq":S,"error":"..."}            fenced (not performed)
//     (every effect request, whatever its outcome, is recorded durably with its seq)
//   GET /v1/readback  200 fencecheck::ReadBack JSON (fencecheck/proto/readback.h) plus
//       "effects":[{"key","id","token","client","seq","applied":true|false}] (every effect request,
//       by seq) and "counters":{"<key>":N}; counter writes appear in "log" as
//       {"seq","key","kind":"counter","value":N,"token","client"} (no segment or chunk), and their
//       rejections in "rejections" the same way (plus "high_water").
//   GET /healthz      200 "ok" (503 {"error":...} once the store has failed)
//   GET /metrics      200 Prometheus text format 0.0.4:
//       fencecheck_store_writes_total{key,client,result="accepted"|"rejected"}  counter (chunks and counters)
//       fencecheck_store_effects_total{key,client,mode,result="applied"|"duplicate"|"rejected"}  counter
//       fencecheck_store_high_water_token{key}                                 gauge
//       fencecheck_store_fsyncs_total                                           counter
//   anything else: 404 (unknown path) or 405 (known path, wrong method; Allow header set).
// Every 4xx changes nothing in the store, and its "error" says exactly what was wrong.
//
// Fencing-Token and Fencecheck-Client are read from the request head as sent (cpp-httplib 0.11.4
// would drop an empty header line and percent-decode the others), each exactly once. Optional
// whitespace (SP, HTAB) around a value is not part of it (RFC 9110 §5.5) and is trimmed:
// "Fencing-Token:  34 " is token 34. Nothing else is forgiven: "12a", "1 2", "+5" and "%31%32"
// are 400 "bad header Fencing-Token: token '...' is not a number: ...", an empty or all-whitespace
// value is 400 "bad header Fencing-Token: token is empty: ...", and only a request without the
// header line is 400 "missing header Fencing-Token: ...".
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fencecheck/resources/store.h"

namespace prometheus {
class Registry;
}

namespace fencecheck {

/// Where and how the server listens.
struct StoreServerOptions {
  std::string host = "127.0.0.1";         ///< address to bind (a name or a literal IPv4/IPv6 address)
  int port = 0;                           ///< 0 = let the kernel pick a free port (see port())
  std::size_t max_body_bytes = 64 * 1024; ///< larger bodies get 413; 1..kMaxChunkBytes
  std::size_t threads = 128;              ///< worker threads: one per concurrent connection
  std::chrono::seconds read_timeout{30};  ///< per socket read (a client stalled mid-request)
  std::chrono::seconds write_timeout{30}; ///< per socket write
  /// How POST /v1/effects/{key} guards every side effect (effect_mode.h): the resource's design,
  /// fixed for the server's life (the harness sets it from the scenario's job.effect). fenced: the
  /// same token check as a write to the key; unfenced: always performed (partial fencing, catalogue
  /// item 8); idempotent: performed once per (key, effect id) (item 11). No request can change it.
  EffectMode effect_mode = EffectMode::kFenced;
  /// false: bind no socket at all; port() is 0, run() returns false at once, and only handle()
  /// answers requests. For driving the routes in process (the fuzz target
  /// tests/fuzz/store_request_fuzz.cpp).
  bool listen = true;
};

/// One request as the routes see it once HTTP has been parsed: the method ("GET", "PUT", ...;
/// HEAD is answered as GET), the percent-decoded path without the query, the headers (names
/// compared case-insensitively, as in HTTP), and the body.
struct StoreHttpRequest {
  std::string method;
  std::string path;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

/// The answer the server would send for it: status, headers the route set (e.g. Allow, and
/// Content-Type), body.
struct StoreHttpResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

/// Splits "host:port" or "[v6]:port" into host and port. Throws std::invalid_argument with a
/// message naming the input when there is no port, the port is not 0..65535, or the host is empty.
[[nodiscard]] std::pair<std::string, int> parse_listen_address(const std::string& text);

/// The HTTP front of one FencedStore. The constructor binds (so port() is known at once and
/// connections queue in the backlog); run() or start() serves them.
///
/// Thread-safety: stop() may be called from any thread (including a signal-handling thread);
/// the rest is meant for the owning thread. The store must outlive the server.
class StoreServer {
 public:
  /// Binds host:port. Throws std::invalid_argument when the options are out of range
  /// (max_body_bytes 0 or over kMaxChunkBytes, threads 0), std::runtime_error naming the address
  /// when it cannot bind.
  StoreServer(FencedStore& store, StoreServerOptions options);
  /// stop()s and joins the background thread if start() made one.
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  /// The bound port (the kernel's pick when options.port was 0).
  [[nodiscard]] int port() const;
  /// "host:port" as bound, e.g. "127.0.0.1:40123" (IPv6 hosts in brackets).
  [[nodiscard]] std::string address() const;
  /// "http://host:port", for StoreClient.
  [[nodiscard]] std::string base_url() const;

  /// Serves on the calling thread until stop(). Returns false when the accept loop failed.
  bool run();
  /// Serves on a background thread; returns at once (requests already queue from construction).
  void start();
  /// Answers one request in process, without a socket: the same routing and handlers a
  /// connection reaches, after the checks httplib makes first that are the store's (a body over
  /// max_body_bytes: 413). A handler's exception is a 500, as on the wire. Thread-safe like the
  /// server's own handler threads (any number at once).
  [[nodiscard]] StoreHttpResponse handle(const StoreHttpRequest& request);

  /// Stops accepting, finishes in-flight requests, makes run() return. Idempotent; never throws.
  void stop() noexcept;

  /// The metrics registry /metrics serialises; add your own families to it if you like.
  [[nodiscard]] prometheus::Registry& registry();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fencecheck
