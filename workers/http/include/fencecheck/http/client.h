// fencecheck — one HTTP/1.1 exchange on its own TCP connection (Boost.Beast, plain http only),
// bounded by timeouts and cancellable from a std::stop_token. The HTTP client of the worker's
// etcd client (EtcdClient) and store client (StoreClient).
//
// Why not cpp-httplib: Debian's libcpp-httplib.so is built with OpenSSL, zlib and brotli, so a
// process linking it maps libcrypto and libssl (3.4 MiB of a worker's resident memory) that plain
// loopback HTTP never uses. Beast and Asio are header-only: this costs no shared library at all.
//
// Each call opens one connection (sends "Connection: close"), runs a private io_context on the
// calling thread until the reply is complete or the exchange failed, and closes the connection.
// Thread-safety: exchange() shares nothing between calls; call it from any number of threads.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fencecheck::http {

/// Where to connect: a host name or an IP address literal (IPv6 without brackets) and a TCP port.
struct Endpoint {
  std::string host;
  int port = 0;
};

struct Request {
  std::string method = "GET";  ///< any token: "GET", "POST", "PUT", ...
  std::string target = "/";    ///< the path (and query), already percent-encoded
  std::string content_type;    ///< sent as Content-Type when not empty
  std::vector<std::pair<std::string, std::string>> headers;  ///< sent as given, after Host
  std::string body;            ///< sent with Content-Length when not empty or when the method is not GET
};

/// Every bound is per operation, as a socket timeout would be: `read` bounds each wait for the
/// next bytes of the reply (so a streamed reply may last forever while bytes keep coming), not
/// the reply as a whole. A bound that passed while the process was stopped (SIGSTOP) does not
/// hide bytes that arrived meanwhile: they are read first. A bound below 1 ms counts as 1 ms.
struct Timeouts {
  std::chrono::milliseconds connect{2000};
  std::chrono::milliseconds read{5000};
  std::chrono::milliseconds write{5000};
};

/// Why an exchange has no complete reply.
enum class Failure {
  kNone,         ///< a complete reply: status line, headers (and trailers) and the whole body
  kConnection,   ///< could not connect: refused, unreachable, name not resolved, or `connect` passed
  kWrite,        ///< the request could not be sent: reset, or `write` passed
  kReadTimeout,  ///< `read` passed without a byte of the reply (the server is slow, stalled or gone)
  kRead,         ///< the connection closed or broke before the reply was complete, or the reply was not HTTP
  kCanceled,     ///< the stop token was requested (or the body sink returned false)
};

/// "Connection", "Write", "Read timeout", "Read", "Canceled" ("" for kNone).
[[nodiscard]] std::string_view failure_name(Failure failure);

struct Reply {
  Failure failure = Failure::kNone;
  /// The reply's status once its status line and headers arrived, even when the body then failed;
  /// 0 when no status line arrived.
  int status = 0;
  /// The reply's header fields (name, value), names as the server spelt them, values without
  /// surrounding whitespace, in the order received except that the fields of one name are kept
  /// together (Beast's basic_fields; their own order is kept). Set once the head arrived, even
  /// when the body then failed (empty when no head arrived). Trailer fields are not included.
  std::vector<std::pair<std::string, std::string>> headers;
  /// The whole body (when no sink was given); with a failure, what arrived of it.
  std::string body;
  /// The failure's cause in words ("Connection refused", "no reply within 500 ms"); "" for kNone.
  std::string detail;
  /// From the start of the call to its end (connect included).
  std::chrono::milliseconds elapsed{0};

  [[nodiscard]] bool complete() const { return failure == Failure::kNone; }
  /// The value of header field `name`, compared case-insensitively (RFC 9110 §5.1); a field sent
  /// more than once gives its values joined by ", " in the order received (RFC 9110 §5.3);
  /// nullopt when absent.
  [[nodiscard]] std::optional<std::string> header(std::string_view name) const;
  /// "<failure name> (<detail>)", e.g. "Connection (Connection refused)"; "" for kNone.
  [[nodiscard]] std::string error_text() const;
};

/// Receives the body piece by piece as it arrives (chunked or not; chunk framing and trailers are
/// removed), with the reply's status. Returns false to stop reading: the exchange then ends with
/// kCanceled. An exception it throws ends the exchange (the connection is closed) and propagates.
using BodySink = std::function<bool(int status, std::string_view piece)>;

/// Sends `request` to `endpoint` and reads the reply. Never throws for a network or protocol
/// failure (see Reply::failure); throws only what `sink` throws, or std::bad_alloc.
/// `stop`: a request from any thread closes the connection at once, so a call blocked in connect
/// or in a read returns promptly with kCanceled; a token already stopped returns kCanceled without
/// connecting. With `sink`, body pieces go to it and Reply::body stays empty.
Reply exchange(const Endpoint& endpoint, const Request& request, const Timeouts& timeouts,
               std::stop_token stop = {}, const BodySink& sink = {});

}  // namespace fencecheck::http
