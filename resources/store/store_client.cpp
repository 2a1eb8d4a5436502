#include "fencecheck/resources/store_client.h"

#include <unistd.h>

#include <charconv>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/http/client.h"
#include "../kinds.h"

namespace fencecheck {
namespace {

/// The outcome of a reply other than 200: 409 the fence rejected it, another 4xx the store called
/// the request invalid, anything else (5xx: the store failed mid-write) unknown: it may or may not
/// stand. Fills `error` from the status and body when the reply's JSON gave none.
template <typename Outcome>
Outcome outcome_of_refusal(const http::Reply& res, std::string& error, Outcome rejected, Outcome invalid,
                           Outcome unknown) {
  if (res.status == 409) {
    if (error.empty()) error = "rejected (409)";
    return rejected;
  }
  if (error.empty()) error = "HTTP " + std::to_string(res.status) + ": " + res.body.substr(0, 200);
  return res.status >= 400 && res.status < 500 ? invalid : unknown;
}

// Percent-encodes one path segment (RFC 3986: everything but unreserved characters), so any key
// reaches the server intact and gets the server's own verdict rather than a mangled URL.
std::string encode_segment(std::string_view s) {
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~') {
      out += c;
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", u);
      out += buf;
    }
  }
  return out;
}

template <typename T>
T json_int(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && it->is_number_integer() ? it->get<T>() : T{};
}

std::string json_error(const nlohmann::json& j) {
  auto it = j.find("error");
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

struct StoreClient::Impl {
  http::Endpoint endpoint;
  std::chrono::milliseconds timeout;

  /// One request on its own connection; `timeout` bounds the connect, the send and each wait for
  /// the reply's next bytes. Callers treat a reply that is not complete() as no reply.
  http::Reply send(std::string method, std::string path, std::string content_type = {}, std::string body = {},
                   std::vector<std::pair<std::string, std::string>> headers = {}) const {
    http::Request req;
    req.method = std::move(method);
    req.target = std::move(path);
    req.content_type = std::move(content_type);
    req.body = std::move(body);
    req.headers = std::move(headers);
    return http::exchange(endpoint, req, http::Timeouts{timeout, timeout, timeout});
  }
};

namespace {

std::vector<std::pair<std::string, std::string>> fencing_headers(FencingToken token, std::string_view client) {
  return {{"Fencing-Token", token.str()}, {"Fencecheck-Client", std::string(client)}};
}

}  // namespace

StoreClient::StoreClient(std::string base_url, std::chrono::milliseconds timeout)
    : base_url_(std::move(base_url)), impl_(std::make_unique<Impl>()) {
  constexpr std::string_view kScheme = "http://";
  const std::string_view url(base_url_);
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("store URL '" + base_url_ + "' " + why + ": expected http://host:port");
  };
  if (url.substr(0, kScheme.size()) != kScheme) throw bad("does not start with http://");
  std::string_view rest = url.substr(kScheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  std::string_view host;
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {
    auto close = rest.find(']');
    if (close == std::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':') throw bad("has a bad IPv6 host");
    host = rest.substr(1, close - 1);
    port = rest.substr(close + 2);
  } else {
    auto colon = rest.rfind(':');
    if (colon == std::string_view::npos) throw bad("has no port");
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty() || host.find('/') != std::string_view::npos) throw bad("has no host");
  int p = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535)
    throw bad("has a bad port");
  if (timeout.count() <= 0) throw std::invalid_argument("store client timeout must be positive");
  impl_->endpoint = http::Endpoint{std::string(host), p};
  impl_->timeout = timeout;
}

StoreClient::~StoreClient() = default;

namespace {

// Classifies a PUT's reply (chunk or counter) in Jepsen's terms.
WriteReply classify_write(const http::Reply& res, const std::string& what) {
  WriteReply reply;
  if (!res.complete()) {
    reply.outcome = WriteOutcome::kUnknown;
    reply.error = what + ": " + res.error_text();
    return reply;
  }
  reply.http_status = res.status;
  nlohmann::json body = nlohmann::json::parse(res.body, nullptr, /*allow_exceptions=*/false);
  const bool parsed = body.is_object();
  if (parsed) {
    reply.high_water = json_int<std::int64_t>(body, "high_water");
    reply.error = json_error(body);
  }
  if (res.status == 200) {
    auto acc = parsed ? body.find("accepted") : body.end();
    if (parsed && acc != body.end() && acc->is_boolean() && acc->get<bool>() && body.contains("seq")) {
      reply.outcome = WriteOutcome::kAccepted;
      reply.seq = json_int<std::int64_t>(body, "seq");
    } else {
      // A 200 whose body breaks the contract: do not claim more than we know.
      reply.outcome = WriteOutcome::kUnknown;
      reply.error = "200 reply without {\"accepted\":true,...}: " + res.body.substr(0, 200);
    }
  } else {
    reply.outcome = outcome_of_refusal(res, reply.error, WriteOutcome::kRejected, WriteOutcome::kInvalid,
                                       WriteOutcome::kUnknown);
  }
  return reply;
}

}  // namespace

WriteReply StoreClient::write(std::string_view key, std::int64_t segment, std::int64_t chunk, FencingToken token,
                              std::string_view client, std::string_view bytes) {
  const std::string path = "/v1/keys/" + encode_segment(key) + "/segments/" + std::to_string(segment) + "/chunks/" +
                           std::to_string(chunk);
  auto res = impl_->send("PUT", path, "application/octet-stream", std::string(bytes), fencing_headers(token, client));
  return classify_write(res, "PUT " + base_url_ + path);
}

WriteReply StoreClient::write_counter(std::string_view key, std::int64_t value, FencingToken token,
                                      std::string_view client) {
  const std::string path = "/v1/counters/" + encode_segment(key);
  auto res = impl_->send("PUT", path, "text/plain", std::to_string(value), fencing_headers(token, client));
  return classify_write(res, "PUT " + base_url_ + path);
}

CounterReply StoreClient::read_counter(std::string_view key) {
  CounterReply reply;
  const std::string path = "/v1/counters/" + encode_segment(key);
  auto res = impl_->send("GET", path);
  if (!res.complete()) {
    reply.error = "GET " + base_url_ + path + ": " + res.error_text();
    return reply;
  }
  reply.http_status = res.status;
  nlohmann::json body = nlohmann::json::parse(res.body, nullptr, /*allow_exceptions=*/false);
  if (res.status != 200) {
    reply.error = "GET " + base_url_ + path + ": HTTP " + std::to_string(res.status) + ": " +
                  (body.is_object() && !json_error(body).empty() ? json_error(body) : res.body.substr(0, 200));
    return reply;
  }
  auto value = body.is_object() ? body.find("value") : body.end();
  auto hw = body.is_object() ? body.find("high_water") : body.end();
  if (value == body.end() || !value->is_number_integer() || hw == body.end() || !hw->is_number_integer()) {
    reply.error = "GET " + base_url_ + path + ": 200 reply without {\"value\":N,\"high_water\":T}: " + res.body.substr(0, 200);
    return reply;
  }
  reply.ok = true;
  reply.value = value->get<std::int64_t>();
  reply.high_water = hw->get<std::int64_t>();
  return reply;
}

EffectReply StoreClient::post_effect(std::string_view key, std::string_view effect_id, FencingToken token,
                                     std::string_view client) {
  EffectReply reply;
  const std::string path = "/v1/effects/" + encode_segment(key);
  auto headers = fencing_headers(token, client);
  auto res = impl_->send("POST", path, "text/plain", std::string(effect_id), std::move(headers));
  if (!res.complete()) {
    reply.error = "POST " + base_url_ + path + ": " + res.error_text();
    return reply;
  }
  reply.http_status = res.status;
  nlohmann::json body = nlohmann::json::parse(res.body, nullptr, /*allow_exceptions=*/false);
  const bool parsed = body.is_object();
  if (parsed) {
    reply.high_water = json_int<std::int64_t>(body, "high_water");
    reply.seq = json_int<std::int64_t>(body, "seq");
    reply.error = json_error(body);
    if (auto m = body.find("mode"); m != body.end() && m->is_string()) reply.mode = effect_mode_from_name(m->get<std::string>());
  }
  auto flag = [&](const char* name) {
    auto it = parsed ? body.find(name) : body.end();
    return it != body.end() && it->is_boolean() ? std::optional<bool>(it->get<bool>()) : std::nullopt;
  };
  if (res.status == 200) {
    if (flag("applied") == true) {
      reply.outcome = EffectOutcome::kApplied;
    } else if (flag("applied") == false && flag("duplicate") == true) {
      reply.outcome = EffectOutcome::kDuplicate;
    } else {
      reply.outcome = EffectOutcome::kUnknown;
      reply.error = "200 reply without {\"applied\":...}: " + res.body.substr(0, 200);
    }
  } else {
    reply.outcome = outcome_of_refusal(res, reply.error, EffectOutcome::kRejected, EffectOutcome::kInvalid,
                                       EffectOutcome::kUnknown);
  }
  return reply;
}

namespace {

// A temporary file for a reply spilled as it arrives: made in temp_directory_path() ($TMPDIR, else
// /tmp) and unlinked at once, so it is gone with the process whatever happens.
class SpillFile {
 public:
  SpillFile() {
    std::string name = (std::filesystem::temp_directory_path() / "fencecheck-readback-XXXXXX").string();
    const int fd = ::mkstemp(name.data());
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "cannot make a temporary file " + name);
    ::unlink(name.c_str());
    file_ = ::fdopen(fd, "w+b");
    if (file_ == nullptr) {
      const int err = errno;
      ::close(fd);
      throw std::system_error(err, std::generic_category(), "cannot open a temporary file");
    }
  }
  ~SpillFile() { std::fclose(file_); }
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;
  [[nodiscard]] std::FILE* get() const { return file_; }

 private:
  std::FILE* file_ = nullptr;
};

}  // namespace

ReadBack StoreClient::readback() {
  std::vector<AcceptedWrite> log;
  ReadBack rb = readback_into(ReadBackLogSink{[&](AcceptedWrite&& w) { log.push_back(std::move(w)); }, [&] { log.clear(); }});
  rb.log = std::move(log);
  return rb;
}

ReadBack StoreClient::readback_into(const ReadBackLogSink& log) {
  const std::string url = base_url_ + "/v1/readback";
  // The reply goes to a temporary file as it arrives and is read from there element by element:
  // neither the body (about 100 bytes a log entry) nor a DOM of it is held.
  SpillFile spill;
  std::string refusal;  // a reply other than 200: its first bytes, for the error
  http::Request req;
  req.method = "GET";
  req.target = "/v1/readback";
  const http::Reply res = http::exchange(
      impl_->endpoint, req, http::Timeouts{impl_->timeout, impl_->timeout, impl_->timeout}, {},
      [&](int status, std::string_view piece) {
        if (status != 200) {
          if (refusal.size() < 500) refusal.append(piece.substr(0, 500 - refusal.size()));
          return true;
        }
        if (std::fwrite(piece.data(), 1, piece.size(), spill.get()) != piece.size())
          throw std::system_error(errno, std::generic_category(), "GET " + url + ": cannot spill the reply to a temporary file");
        return true;
      });
  if (!res.complete()) throw std::runtime_error("GET " + url + ": " + res.error_text());
  if (res.status != 200) throw std::runtime_error("GET " + url + ": HTTP " + std::to_string(res.status) + ": " + refusal);
  if (std::fflush(spill.get()) != 0 || std::fseek(spill.get(), 0, SEEK_SET) != 0)
    throw std::system_error(errno, std::generic_category(), "GET " + url + ": cannot read back the spilled reply");
  try {
    return read_readback_stream(spill.get(), url, {}, &log);
  } catch (const ReadBackSyntaxError&) {
    throw std::runtime_error("GET " + url + ": reply is not JSON");
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("GET " + url + ": " + e.what());
  }
}

bool StoreClient::healthy() {
  auto res = impl_->send("GET", "/healthz");
  return res.complete() && res.status == 200;
}

}  // namespace fencecheck

namespace fencecheck::detail {

// kind store's endpoint: {"kind":"store","url":"http://host:port"}.
std::unique_ptr<ResourceWriter> make_store_writer(const nlohmann::json& endpoint, std::chrono::milliseconds timeout) {
  auto url = endpoint.find("url");
  if (url == endpoint.end() || !url->is_string())
    throw std::invalid_argument("a store endpoint needs \"url\" (\"http://host:port\")");
  return std::make_unique<StoreClient>(url->get<std::string>(), timeout);
}

}  // namespace fencecheck::detail
