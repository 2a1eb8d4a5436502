// Kind http, the worker's side: the contract's validation (shared with the harness's kind) and
// HttpResourceClient (http_resource.h; docs/resource-http.md).
#include "fencecheck/resources/http_resource.h"

#include <array>
#include <charconv>
#include <cstdio>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/http/client.h"
#include "../kinds.h"

namespace fencecheck {
namespace {

bool is_alpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'); }
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

// RFC 3986 §2.3.
bool is_unreserved(char c) { return is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_' || c == '~'; }
// RFC 3986 §2.2.
bool is_sub_delim(char c) {
  return c == '!' || c == '$' || c == '&' || c == '\'' || c == '(' || c == ')' || c == '*' || c == '+' || c == ',' ||
         c == ';' || c == '=';
}
// RFC 3986 §3.3 pchar without pct-encoded (handled by the caller).
bool is_pchar(char c) { return is_unreserved(c) || is_sub_delim(c) || c == ':' || c == '@'; }
// RFC 9110 §5.6.2.
bool is_tchar(char c) {
  return is_alpha(c) || is_digit(c) || c == '!' || c == '#' || c == '$' || c == '%' || c == '&' || c == '\'' ||
         c == '*' || c == '+' || c == '-' || c == '.' || c == '^' || c == '_' || c == '`' || c == '|' || c == '~';
}

/// One character for a message: itself in quotes when printable, else \xNN.
std::string shown_char(char c) {
  auto u = static_cast<unsigned char>(c);
  if (u >= 0x21 && u < 0x7f) return std::string("'") + c + "'";
  if (c == ' ') return "a space";
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", u);
  return buf;
}

/// Untrusted text for a message: at most `n` bytes, control bytes and non-ASCII as \xNN.
std::string excerpt(std::string_view s, std::size_t n = 200) {
  std::string out;
  for (char c : s.substr(0, n)) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  if (s.size() > n) out += "...";
  return out;
}

// Percent-encodes one value (RFC 3986 §2.1: every byte but the unreserved characters), safe in a
// path segment and in a query alike.
std::string encode_component(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (is_unreserved(c)) {
      out += c;
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      out += buf;
    }
  }
  return out;
}

constexpr std::array<std::string_view, 3> kPlaceholders{"key", "segment", "chunk"};

/// The request-target checks shared by the write path and the plain paths: '/' first, only
/// characters a request target may carry unencoded, '%' as %XX only, no fragment. With
/// `placeholders`, {key} {segment} {chunk} are recognized and returned as seen (a bit each).
unsigned check_target(std::string_view field, std::string_view path, bool placeholders, bool allow_query = true) {
  if (path.empty()) throw HttpContractError(std::string(field), "is empty: a path starts with '/'");
  if (path.front() != '/')
    throw HttpContractError(std::string(field), "must start with '/' (a path below the service's url)", 0);
  unsigned seen = 0;
  for (std::size_t i = 0; i < path.size(); ++i) {
    const char c = path[i];
    if (c == '{') {
      if (!placeholders)
        throw HttpContractError(std::string(field),
                                "takes no placeholders ('{'): only the write path has {key} {segment} {chunk}", i);
      const auto close = path.find('}', i + 1);
      if (close == std::string_view::npos) throw HttpContractError(std::string(field), "has a '{' without its '}'", i);
      const std::string_view name = path.substr(i + 1, close - i - 1);
      bool known = false;
      for (std::size_t p = 0; p < kPlaceholders.size(); ++p) {
        if (name == kPlaceholders[p]) {
          seen |= 1u << p;
          known = true;
        }
      }
      if (!known)
        throw HttpContractError(std::string(field),
                                "unknown placeholder {" + excerpt(name, 40) + "}: expected {key}, {segment} or {chunk}", i);
      i = close;
      continue;
    }
    if (c == '}') throw HttpContractError(std::string(field), "has a '}' without its '{'", i);
    if (c == '%') {
      if (i + 2 >= path.size() || !is_hex(path[i + 1]) || !is_hex(path[i + 2]))
        throw HttpContractError(std::string(field), "has a '%' that does not start a %XX escape (RFC 3986 §2.1)", i);
      i += 2;
      continue;
    }
    if (c == '#')
      throw HttpContractError(std::string(field),
                              "has a fragment ('#'), which is never sent to the server (RFC 9110 §7.1)", i);
    if (c == '?' && !allow_query)
      throw HttpContractError(std::string(field), "has a query ('?'); put the base path alone in url", i);
    if (is_pchar(c) || c == '/' || c == '?') continue;
    throw HttpContractError(std::string(field),
                            "has " + shown_char(c) +
                                ", which a request target cannot carry unencoded; percent-encode it (RFC 3986 §2.1)",
                            i);
  }
  return seen;
}

/// A token (RFC 9110 §5.6.2): what a header name (§5.1) and a method (§9.1) are.
void check_token(std::string_view field, std::string_view name, const char* what = "a header name",
                 const char* rule = "RFC 9110 §5.1") {
  if (name.empty())
    throw HttpContractError(std::string(field), std::string("is empty: ") + what + " is a token (" + rule + ")");
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!is_tchar(name[i]))
      throw HttpContractError(std::string(field),
                              "has " + shown_char(name[i]) + ", which " + what + " cannot have (a token, " + rule + ")", i);
}

}  // namespace

std::string HttpUrl::str() const {
  const bool v6 = host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port) + base_path;
}

HttpUrl parse_http_url(std::string_view url) {
  auto fail = [&](const std::string& why, std::optional<std::size_t> at = std::nullopt) -> HttpContractError {
    return HttpContractError("url", why, at);
  };
  const auto sep = url.find("://");
  if (url.empty()) throw fail("is empty: expected http://host:port");
  if (sep == std::string_view::npos) throw fail("is not a URL: expected http://host:port", 0);
  const std::string_view scheme = url.substr(0, sep);
  if (iequals(scheme, "https"))
    throw fail("uses https, which fencecheck does not speak: it sends plain HTTP/1.1 (give the service a plain-HTTP "
               "listener on loopback or in the lab)",
               0);
  if (!iequals(scheme, "http")) throw fail("has scheme '" + excerpt(scheme, 40) + "': expected http://host:port", 0);
  const std::size_t auth_at = sep + 3;
  std::size_t auth_end = url.find_first_of("/?#", auth_at);
  if (auth_end == std::string_view::npos) auth_end = url.size();
  const std::string_view authority = url.substr(auth_at, auth_end - auth_at);
  if (auto at = authority.find('@'); at != std::string_view::npos)
    throw fail("has user information ('...@'): a password never goes in a scenario; the service must accept the "
               "writes without credentials in the URL",
               auth_at);
  HttpUrl out;
  std::string_view port_text;
  std::size_t port_at = 0;
  bool has_port = false;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) throw fail("has a '[' without its ']' (an IPv6 host is [addr])", auth_at);
    out.host = std::string(authority.substr(1, close - 1));
    for (std::size_t i = 0; i < out.host.size(); ++i)
      if (!is_hex(out.host[i]) && out.host[i] != ':' && out.host[i] != '.')
        throw fail("has " + shown_char(out.host[i]) + " in its IPv6 host", auth_at + 1 + i);
    if (out.host.empty()) throw fail("has an empty host", auth_at);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') throw fail("has text after the IPv6 host's ']'", auth_at + close + 1);
      has_port = true;
      port_text = after.substr(1);
      port_at = auth_at + close + 2;
    }
  } else {
    const auto colon = authority.rfind(':');
    const std::string_view host = authority.substr(0, colon);
    if (host.empty()) throw fail("has no host: expected http://host:port", auth_at);
    for (std::size_t i = 0; i < host.size(); ++i)
      if (!is_unreserved(host[i])) throw fail("has " + shown_char(host[i]) + " in its host", auth_at + i);
    out.host = std::string(host);
    if (colon != std::string_view::npos) {
      has_port = true;
      port_text = authority.substr(colon + 1);
      port_at = auth_at + colon + 1;
    }
  }
  if (has_port) {
    int p = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), p);
    if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() || p < 1 || p > 65535)
      throw fail("has port '" + excerpt(port_text, 20) + "': expected 1..65535", port_at);
    out.port = p;
  }
  std::string_view path = url.substr(auth_end);
  if (!path.empty()) {
    if (path.front() != '/') {
      // '?' or '#' right after the authority.
      throw fail(path.front() == '?' ? "has a query: url is the service's base address (put paths in path, "
                                       "read_back and health)"
                                     : "has a fragment ('#'), which is never sent to the server",
                 auth_end);
    }
    try {
      check_target("url", path, /*placeholders=*/false, /*allow_query=*/false);
    } catch (const HttpContractError& e) {
      throw fail(std::string("base path ") + e.what(), e.offset() ? std::optional(auth_end + *e.offset()) : std::nullopt);
    }
    while (!path.empty() && path.back() == '/') path.remove_suffix(1);
    out.base_path = std::string(path);
  }
  return out;
}

std::string rejected_status_refusal(std::int64_t status) {
  if (status < 400 || status > 499)
    return "must be a 4xx status (RFC 9110 §15.5): 2xx is accepted, 5xx and no reply are outcome unknown";
  switch (status) {
    case 401: return "401 Unauthorized comes from authentication (RFC 9110 §15.5.2), for every write alike";
    case 404: return "404 Not Found is what a wrong url or path gives for every write (RFC 9110 §15.5.5)";
    case 405: return "405 Method Not Allowed is what a wrong method gives for every write (RFC 9110 §15.5.6)";
    case 407: return "407 Proxy Authentication Required comes from a proxy (RFC 9110 §15.5.8)";
    case 408: return "408 Request Timeout means the request never arrived whole (RFC 9110 §15.5.9)";
    case 411: return "411 Length Required is the HTTP stack's framing rule (RFC 9110 §15.5.12)";
    case 413: return "413 Content Too Large is a size limit (RFC 9110 §15.5.14)";
    case 414: return "414 URI Too Long is a size limit (RFC 9110 §15.5.15)";
    case 415: return "415 Unsupported Media Type is the framework refusing the body's type (RFC 9110 §15.5.16)";
    case 417: return "417 Expectation Failed answers an Expect header (RFC 9110 §15.5.18)";
    case 421: return "421 Misdirected Request means the wrong server (RFC 9110 §15.5.20)";
    case 426: return "426 Upgrade Required is a protocol refusal (RFC 9110 §15.5.22)";
    case 429: return "429 Too Many Requests is rate limiting (RFC 6585 §4)";
    case 431: return "431 Request Header Fields Too Large is a size limit (RFC 6585 §5)";
    default: return "";
  }
}

void check_rejected_status(std::int64_t status) {
  const std::string why = rejected_status_refusal(status);
  if (!why.empty())
    throw HttpContractError("rejected_status",
                            std::to_string(status) + " cannot mean 'rejected by the fence': " + why +
                                " (409 Conflict is the default; 412 Precondition Failed for conditional requests)");
}

void check_method(std::string_view method) {
  check_token("method", method, "a method", "RFC 9110 §9.1");
  static constexpr std::array<std::string_view, 6> kNoContent{"GET", "HEAD", "DELETE", "CONNECT", "OPTIONS", "TRACE"};
  static constexpr std::array<std::string_view, 3> kWithContent{"PUT", "POST", "PATCH"};
  for (auto m : kNoContent) {
    if (iequals(method, m))
      throw HttpContractError("method", std::string(m) +
                                            " cannot carry the chunk: its content has no defined meaning or is not "
                                            "allowed (RFC 9110 §9.3); the write is PUT, POST, PATCH or the service's own "
                                            "method");
  }
  for (auto m : kWithContent) {
    if (method != m && iequals(method, m))
      throw HttpContractError("method", "'" + std::string(method) + "' is not " + std::string(m) +
                                            ": methods are case-sensitive (RFC 9110 §9.1)",
                              0);
  }
}

void check_write_path(std::string_view path) {
  const unsigned seen = check_target("path", path, /*placeholders=*/true);
  for (std::size_t p = 0; p < kPlaceholders.size(); ++p)
    if ((seen & (1u << p)) == 0)
      throw HttpContractError("path", "has no {" + std::string(kPlaceholders[p]) +
                                          "}: every chunk slot (key, segment, chunk) needs a request target of its own");
}

void check_plain_path(std::string_view field, std::string_view path) { (void)check_target(field, path, false); }

void check_request_header(std::string_view field, std::string_view name) {
  check_token(field, name);
  static constexpr std::array<std::string_view, 10> kOwn{
      "Host", "Content-Length", "Content-Type", "Transfer-Encoding", "Connection",
      "TE",   "Trailer",        "Upgrade",      "Keep-Alive",        "Expect"};
  for (auto own : kOwn)
    if (iequals(name, own))
      throw HttpContractError(std::string(field), "'" + std::string(own) +
                                                      "' is a header the HTTP client sets itself (RFC 9110 §7.2, §8.3, "
                                                      "§8.6; RFC 9112 §6, §9.6); give the token a header of its own");
}

void check_response_header(std::string_view field, std::string_view name) { check_token(field, name); }

void HttpContract::check() const {
  if (parse_http_url(url.str()) != url)
    throw HttpContractError("url", "'" + url.str() + "' is not a normalized http URL");
  check_method(method);
  check_write_path(path);
  check_request_header("token_header", token_header);
  check_request_header("writer_header", writer_header);
  if (iequals(token_header, writer_header))
    throw HttpContractError("writer_header", "is the token's header too ('" + token_header +
                                                 "'): the token and the writer id need a header each");
  check_rejected_status(rejected_status);
  switch (high_water.in) {
    case HighWaterSource::In::kNone:
      if (!high_water.name.empty()) throw HttpContractError("high_water", "names a source but says none");
      break;
    case HighWaterSource::In::kJsonField:
      if (high_water.name.empty()) throw HttpContractError("high_water_field", "is empty: name a top-level JSON field");
      break;
    case HighWaterSource::In::kHeader: check_response_header("high_water_header", high_water.name); break;
  }
}

std::string HttpContract::target(std::string_view key, std::int64_t segment, std::int64_t chunk) const {
  std::string out = url.base_path;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '{') {
      const auto close = path.find('}', i);
      const std::string_view name = std::string_view(path).substr(i + 1, close - i - 1);
      if (name == "key") out += encode_component(key);
      else if (name == "segment") out += encode_component(std::to_string(segment));
      else out += encode_component(std::to_string(chunk));
      i = close;
    } else {
      out += path[i];
    }
  }
  return out;
}

HttpContract http_contract_from_endpoint(const nlohmann::json& endpoint) {
  if (!endpoint.is_object()) throw HttpContractError("", "an http endpoint is a JSON object {\"kind\":\"http\",...}");
  auto string_member = [&](const char* name, std::string& out, bool required) {
    auto it = endpoint.find(name);
    if (it == endpoint.end()) {
      if (required) throw HttpContractError(name, "is missing");
      return;
    }
    if (!it->is_string()) throw HttpContractError(name, "must be a string");
    out = it->get<std::string>();
  };
  HttpContract c;
  std::string url;
  string_member("url", url, true);
  c.url = parse_http_url(url);
  string_member("method", c.method, false);
  string_member("path", c.path, false);
  string_member("token_header", c.token_header, false);
  string_member("writer_header", c.writer_header, false);
  if (auto it = endpoint.find("rejected_status"); it != endpoint.end()) {
    if (!it->is_number_integer()) throw HttpContractError("rejected_status", "must be an integer");
    const auto status = it->get<std::int64_t>();
    check_rejected_status(status);
    c.rejected_status = static_cast<int>(status);
  }
  if (auto it = endpoint.find("high_water"); it != endpoint.end()) {
    if (it->is_null()) {
      c.high_water = {HighWaterSource::In::kNone, ""};
    } else {
      const bool json = it->is_object() && it->size() == 1 && it->contains("json") && it->at("json").is_string();
      const bool header = it->is_object() && it->size() == 1 && it->contains("header") && it->at("header").is_string();
      if (!json && !header)
        throw HttpContractError("high_water", "must be {\"json\":FIELD}, {\"header\":NAME} or null");
      c.high_water = json ? HighWaterSource{HighWaterSource::In::kJsonField, it->at("json").get<std::string>()}
                          : HighWaterSource{HighWaterSource::In::kHeader, it->at("header").get<std::string>()};
    }
  }
  c.check();
  return c;
}

nlohmann::json to_endpoint(const HttpContract& c) {
  nlohmann::json hw;  // null: replies never say it
  if (c.high_water.in == HighWaterSource::In::kJsonField) hw = {{"json", c.high_water.name}};
  if (c.high_water.in == HighWaterSource::In::kHeader) hw = {{"header", c.high_water.name}};
  return {{"kind", "http"},
          {"url", c.url.str()},
          {"method", c.method},
          {"path", c.path},
          {"token_header", c.token_header},
          {"writer_header", c.writer_header},
          {"rejected_status", c.rejected_status},
          {"high_water", std::move(hw)}};
}

namespace {

/// A decimal int64 >= 0 from a header value or a JSON string; nullopt otherwise.
std::optional<std::int64_t> decimal(std::string_view text) {
  const TokenParse p = parse_token(text);
  return p.ok ? std::optional(p.token.value()) : std::nullopt;
}

/// The high-water mark the reply says, or 0 with a note saying why it could not be read.
std::int64_t high_water_of(const HighWaterSource& source, const http::Reply& res, const nlohmann::json& body,
                           std::string& note) {
  switch (source.in) {
    case HighWaterSource::In::kNone: return 0;
    case HighWaterSource::In::kHeader: {
      auto value = res.header(source.name);
      if (!value) return 0;
      if (auto v = decimal(*value)) return *v;
      note = "header " + source.name + ": '" + excerpt(*value, 40) + "' is not one decimal int64";
      return 0;
    }
    case HighWaterSource::In::kJsonField: {
      if (!body.is_object()) return 0;
      auto it = body.find(source.name);
      if (it == body.end() || it->is_null()) return 0;
      if (it->is_number_integer() && (it->is_number_unsigned() || it->get<std::int64_t>() >= 0) &&
          it->get<std::uint64_t>() <= static_cast<std::uint64_t>(INT64_MAX))
        return it->get<std::int64_t>();
      if (it->is_string())
        if (auto v = decimal(it->get<std::string>())) return *v;
      note = "JSON field " + source.name + ": " + excerpt(it->dump(), 40) + " is not a decimal int64";
      return 0;
    }
  }
  return 0;
}

WriteReply classify(const HttpContract& c, const http::Reply& res, const std::string& what) {
  WriteReply r;
  if (!res.complete()) {
    r.outcome = WriteOutcome::kUnknown;
    r.error = what + ": " + res.error_text();
    return r;
  }
  r.http_status = res.status;
  const nlohmann::json body = nlohmann::json::parse(res.body, nullptr, /*allow_exceptions=*/false);
  std::string said;  // the service's own message
  if (body.is_object()) {
    if (auto it = body.find("error"); it != body.end() && it->is_string()) said = it->get<std::string>();
  }
  std::string note;
  r.high_water = high_water_of(c.high_water, res, body, note);
  const std::string status = "HTTP " + std::to_string(res.status);
  auto in_words = [&] { return said.empty() ? status + ": " + excerpt(res.body) : said + " (" + status + ")"; };
  if (res.status >= 200 && res.status <= 299) {
    if (auto it = body.is_object() ? body.find("accepted") : body.end();
        it != body.end() && it->is_boolean() && !it->get<bool>()) {
      // A 2xx that says it did not accept breaks the contract: claim nothing.
      r.outcome = WriteOutcome::kUnknown;
      r.error = what + ": " + status + " with \"accepted\":false breaks the contract (a rejection is HTTP " +
                std::to_string(c.rejected_status) + "): outcome unknown";
      return r;
    }
    r.outcome = WriteOutcome::kAccepted;
    if (body.is_object()) {
      if (auto it = body.find("seq"); it != body.end() && it->is_number_integer() && it->get<std::int64_t>() > 0)
        r.seq = it->get<std::int64_t>();
    }
    r.error = note;  // a malformed mark, said for the record; the write stands
    return r;
  }
  if (res.status == c.rejected_status) {
    r.outcome = WriteOutcome::kRejected;
    r.error = said.empty() ? "rejected (" + status + ")" : said;
  } else if (res.status >= 400 && res.status <= 499) {
    r.outcome = WriteOutcome::kInvalid;
    r.error = what + ": " + in_words();
  } else {
    r.outcome = WriteOutcome::kUnknown;
    r.error = what + ": " + in_words();
    if (res.status >= 300 && res.status <= 399)
      r.error += "; a redirect is not followed, and it does not prove the write was not performed";
  }
  if (!note.empty()) r.error += "; " + note;
  return r;
}

}  // namespace

struct HttpResourceClient::Impl {
  http::Endpoint endpoint;
  std::chrono::milliseconds timeout{};
};

HttpResourceClient::HttpResourceClient(HttpContract contract, std::chrono::milliseconds timeout)
    : contract_(std::move(contract)), impl_(std::make_unique<Impl>()) {
  contract_.check();
  if (timeout.count() <= 0) throw std::invalid_argument("http resource client: the timeout must be positive");
  impl_->endpoint = http::Endpoint{contract_.url.host, contract_.url.port};
  impl_->timeout = timeout;
}

HttpResourceClient::~HttpResourceClient() = default;

WriteReply HttpResourceClient::write(std::string_view key, std::int64_t segment, std::int64_t chunk,
                                     FencingToken token, std::string_view client, std::string_view bytes) {
  http::Request req;
  req.method = contract_.method;
  req.target = contract_.target(key, segment, chunk);
  const std::string what = req.method + " " + contract_.url.str() + req.target.substr(contract_.url.base_path.size());
  // A header value cannot carry control characters (RFC 9110 §5.5); refuse rather than send a
  // request whose framing the writer id could break.
  for (char ch : client) {
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) {
      WriteReply r;
      r.outcome = WriteOutcome::kInvalid;
      r.error = what + ": not sent: the writer id has a control character, which a header value cannot carry";
      return r;
    }
  }
  req.content_type = "application/octet-stream";
  req.headers = {{contract_.token_header, token.str()}, {contract_.writer_header, std::string(client)}};
  req.body = std::string(bytes);
  const http::Reply res = http::exchange(impl_->endpoint, req, http::Timeouts{impl_->timeout, impl_->timeout, impl_->timeout});
  return classify(contract_, res, what);
}

}  // namespace fencecheck

namespace fencecheck::detail {

// kind http's endpoint (http_resource.h, http_contract_from_endpoint).
std::unique_ptr<ResourceWriter> make_http_writer(const nlohmann::json& endpoint, std::chrono::milliseconds timeout) {
  try {
    return std::make_unique<HttpResourceClient>(http_contract_from_endpoint(endpoint), timeout);
  } catch (const HttpContractError& e) {
    throw std::invalid_argument("http endpoint" + (e.field().empty() ? std::string() : " \"" + e.field() + "\"") +
                                ": " + e.what());
  }
}

}  // namespace fencecheck::detail
