// fencecheck — resource kind `http`: any HTTP service that speaks the small contract of
// docs/resource-http.md (fencecheck-store is its reference implementation).
//
// The write (one request per chunk, one connection per request):
//   <method> <base path><path with {key} {segment} {chunk} filled in, each value percent-encoded>
//   <token_header>: <decimal int64>     the writer's fencing token
//   <writer_header>: <writer id>        who writes (the read-back's "client")
//   body: the chunk's bytes (Content-Type: application/octet-stream)
// The reply, in Jepsen's terms (writer.h's WriteOutcome):
//   2xx                      accepted (ok); but a JSON body saying "accepted":false breaks the
//                            contract and is outcome unknown
//   <rejected_status>        rejected by the fence (fail): 409 Conflict by default (RFC 9110
//                            §15.5.10); 412 Precondition Failed for services built on conditional
//                            requests (RFC 9110 §13.1, §15.5.13)
//   any other 4xx            invalid request (fail, not fenced): nothing happened (RFC 9110 §15.5:
//                            a client error; the server did not perform the request)
//   1xx, 3xx, 5xx, no reply  outcome unknown (info): possibly applied, never counted as rejected
//                            (a 3xx is not followed: RFC 9110 §15.4.4's 303 may follow a performed
//                            POST, so a redirect does not prove that nothing happened)
//   The key's high-water mark may come back in a header or in a top-level JSON field of the body
//   (HighWaterSource); a top-level integer "seq" is taken as the acceptance order and a top-level
//   string "error" as the service's message.
//
// Two sides use this header: the worker (HttpResourceClient, built from the endpoint JSON the
// harness hands it) and the harness's kind (resources/http/http_kind.cpp), which validates the
// scenario's fields with the same check_* functions, so both sides refuse the same things.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json_fwd.hpp>

#include "fencecheck/proto/token.h"
#include "fencecheck/resources/writer.h"

namespace fencecheck {

/// The defaults: fencecheck-store's own contract (store_server.h).
inline constexpr std::string_view kHttpDefaultMethod = "PUT";
inline constexpr std::string_view kHttpDefaultPath = "/v1/keys/{key}/segments/{segment}/chunks/{chunk}";
inline constexpr std::string_view kHttpDefaultTokenHeader = "Fencing-Token";
inline constexpr std::string_view kHttpDefaultWriterHeader = "Fencecheck-Client";
inline constexpr int kHttpDefaultRejectedStatus = 409;
inline constexpr std::string_view kHttpDefaultHighWaterField = "high_water";
inline constexpr std::string_view kHttpDefaultReadBack = "/v1/readback";

/// A field of the contract that is not valid: which field, why, and (for a string) the byte offset
/// inside it of the first offending character, so the scenario loader can point at it
/// (KindFields::fail). what() is the reason alone, without the field's name.
class HttpContractError : public std::invalid_argument {
 public:
  HttpContractError(std::string field, const std::string& message, std::optional<std::size_t> offset = std::nullopt)
      : std::invalid_argument(message), field_(std::move(field)), offset_(offset) {}
  /// The field at fault: "url", "method", "path", "token_header", "writer_header",
  /// "rejected_status", "high_water_header", "high_water_field", "read_back", "health".
  [[nodiscard]] const std::string& field() const noexcept { return field_; }
  /// Byte offset inside the field's string value; nullopt when the value as a whole is wrong.
  [[nodiscard]] std::optional<std::size_t> offset() const noexcept { return offset_; }

 private:
  std::string field_;
  std::optional<std::size_t> offset_;
};

/// Where a reply says the key's high-water mark (the highest token the service accepted for the
/// key). The value is a decimal int64: a header's value, or a JSON integer or decimal string (a
/// string because protobuf's JSON mapping writes int64 as one). Absent or malformed: the reply
/// "did not say" (WriteReply::high_water = 0). Value type.
struct HighWaterSource {
  enum class In {
    kNone,       ///< replies never say it
    kJsonField,  ///< a top-level field of a JSON object body
    kHeader,     ///< a response header field (case-insensitive, RFC 9110 §5.1)
  };
  In in = In::kJsonField;
  std::string name = std::string(kHttpDefaultHighWaterField);  ///< the field or header name ("" for kNone)
  friend bool operator==(const HighWaterSource&, const HighWaterSource&) = default;
};

/// The service's address: "http://host[:port][/base/path]" (plain HTTP only; port 80 when absent).
/// Value type.
struct HttpUrl {
  std::string host;       ///< a name or an IP literal (IPv6 without brackets)
  int port = 80;          ///< 1..65535
  std::string base_path;  ///< "" or "/base/path": prefixed to every path; no trailing '/'
  /// The normalized form: "http://host:port/base/path" (IPv6 in brackets, scheme lowercase).
  [[nodiscard]] std::string str() const;
  friend bool operator==(const HttpUrl&, const HttpUrl&) = default;
};

/// One service's write contract: every field of docs/resource-http.md the writer needs.
/// Value type; build it with http_contract_from_endpoint() or fill it and call check().
struct HttpContract {
  HttpUrl url;
  std::string method = std::string(kHttpDefaultMethod);
  std::string path = std::string(kHttpDefaultPath);  ///< the template, with {key} {segment} {chunk}
  std::string token_header = std::string(kHttpDefaultTokenHeader);
  std::string writer_header = std::string(kHttpDefaultWriterHeader);
  int rejected_status = kHttpDefaultRejectedStatus;
  HighWaterSource high_water;

  /// Checks every field with the check_* functions below. Throws HttpContractError.
  void check() const;
  /// The request target of one chunk's write: url.base_path + path with every placeholder
  /// replaced by its value, each percent-encoded (RFC 3986 §2.1: every byte but the unreserved
  /// characters), so any key reaches the service intact. Pure; thread-safe.
  [[nodiscard]] std::string target(std::string_view key, std::int64_t segment, std::int64_t chunk) const;
  friend bool operator==(const HttpContract&, const HttpContract&) = default;
};

// Validators shared by the harness (the scenario's fields) and the worker (the endpoint). Each
// throws HttpContractError naming its field, with an offset where one character is at fault.
// All are pure functions of their arguments: thread-safe.

/// Parses "http://host[:port][/base]" (RFC 3986 §3). Refused: another scheme (https: fencecheck
/// speaks plain HTTP/1.1 only), user:password@ (a password never goes in a scenario), an empty
/// host, a port outside 1..65535, a query or fragment, a '{' or '}' in the base path.
[[nodiscard]] HttpUrl parse_http_url(std::string_view url);
/// A method is an HTTP token (RFC 9110 §9.1) that carries the chunk as content: GET, HEAD,
/// DELETE, CONNECT, OPTIONS and TRACE are refused (content has no defined meaning or is not
/// allowed there, RFC 9110 §9.3), and so is a case variant of a standard method ("put": methods
/// are case-sensitive, RFC 9110 §9.1).
void check_method(std::string_view method);
/// The write path template: starts with '/', only characters allowed unencoded in a request
/// target (RFC 3986 §3.3-3.4: pchar, '/', '?'), '%' only as %XX, placeholders {key} {segment}
/// {chunk} only, each at least once (every chunk slot needs a request target of its own).
void check_write_path(std::string_view path);
/// A read-back or health path (`field` names which): as check_write_path but no placeholders.
void check_plain_path(std::string_view field, std::string_view path);
/// A request header name fencecheck sends (`field`: "token_header" or "writer_header"): an HTTP
/// token (RFC 9110 §5.1) and not one the client sets itself (Host, Content-Length,
/// Content-Type, Transfer-Encoding, Connection, TE, Trailer, Upgrade, Keep-Alive, Expect).
void check_request_header(std::string_view field, std::string_view name);
/// A response header name (high_water_header): an HTTP token (RFC 9110 §5.1).
void check_response_header(std::string_view field, std::string_view name);
/// The rejection status: 400..499 except the statuses that something other than the service's
/// fence produces for every request alike, before the fence is ever asked (docs/resource-http.md,
/// "Which statuses may mean rejected"): 401, 404, 405, 407, 408, 411, 413, 414, 415, 417, 421,
/// 426, 429, 431. With one of those, a wrong path or a proxy's refusal would be counted as the
/// fence working.
void check_rejected_status(std::int64_t status);
/// Why `status` cannot be the rejection status ("" when it can).
[[nodiscard]] std::string rejected_status_refusal(std::int64_t status);

/// The endpoint JSON a worker is given (writer.h):
///   {"kind":"http","url":"http://127.0.0.1:8080","method":"PUT",
///    "path":"/v1/keys/{key}/segments/{segment}/chunks/{chunk}","token_header":"Fencing-Token",
///    "writer_header":"Fencecheck-Client","rejected_status":409,"high_water":{"json":"high_water"}}
/// "high_water" is {"json": FIELD}, {"header": NAME} or null (replies never say it). Only "url" is
/// required; every other member defaults as above. Throws HttpContractError naming the member
/// for a missing url, a member of the wrong type, or a value the check_* functions refuse.
[[nodiscard]] HttpContract http_contract_from_endpoint(const nlohmann::json& endpoint);
/// The endpoint JSON of a contract, every member present (the inverse of the above).
[[nodiscard]] nlohmann::json to_endpoint(const HttpContract& contract);

/// The worker's writer for kind http. Each write() opens its own connection (Boost.Beast,
/// fencecheck/http/client.h; "Connection: close"), so a write stalled by a partition never blocks
/// a later one beyond its own timeout. `timeout` bounds the connect, the sending of the request
/// and each wait for the reply's next bytes.
///
/// Thread-safety: not thread-safe; one client per thread (the worker has one). Never throws for a
/// transport failure or a reply that breaks the contract: those are outcomes (kUnknown).
class HttpResourceClient final : public ResourceWriter {
 public:
  /// Throws HttpContractError when contract.check() does, std::invalid_argument for a timeout
  /// that is not positive.
  explicit HttpResourceClient(HttpContract contract,
                              std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  ~HttpResourceClient() override;
  HttpResourceClient(const HttpResourceClient&) = delete;
  HttpResourceClient& operator=(const HttpResourceClient&) = delete;

  /// "http".
  [[nodiscard]] std::string_view kind() const override { return "http"; }

  /// Sends one chunk's write and classifies the reply (the header comment's table). `error` says
  /// what happened in words for every outcome but kAccepted: the service's "error" when its
  /// reply has one, else "rejected (HTTP 412)", "HTTP 404: <body>", or for no reply
  /// "<METHOD> <url>: <failure> (<cause>)", e.g. "PUT http://127.0.0.1:9/v1/keys/k/segments/0/chunks/0:
  /// Connection (Connection refused)". `high_water`: the mark the reply says (0 when it does not);
  /// `seq`: the reply's "seq" when accepted (0 when absent); `http_status`: 0 without a reply.
  WriteReply write(std::string_view key, std::int64_t segment, std::int64_t chunk, FencingToken token,
                   std::string_view client, std::string_view bytes) override;

  [[nodiscard]] const HttpContract& contract() const { return contract_; }

 private:
  struct Impl;
  HttpContract contract_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fencecheck
