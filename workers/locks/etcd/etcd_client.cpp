#include "fencecheck/locks/etcd/etcd_client.h"

#include <charconv>
#include <exception>
#include <utility>

#include <nlohmann/json.hpp>

#include "fencecheck/http/client.h"
#include "fencecheck/proto/base64.h"

namespace fencecheck {
namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;

std::string shorten(std::string_view s, std::size_t max = 300) {
  if (s.size() <= max) return std::string(s);
  return std::string(s.substr(0, max)) + "...";
}

/// A protocol-level surprise: etcd answered, but not in the shape this client expects.
[[noreturn]] void throw_protocol(const std::string& endpoint, const std::string& path, int status,
                                 const std::string& what) {
  throw EtcdError(endpoint, path, status, -1, what,
                  "etcd " + endpoint + " POST " + path + ": unexpected reply: " + what);
}

/// proto3 JSON int64 / uint64 (T): a string of digits (what etcd sends), a number, or absent (= 0).
template <typename T>
T integer_field(const json& j, const char* name, const char* type) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return 0;
  if (it->is_number_integer()) return it->get<T>();
  if (it->is_string()) {
    const auto& s = it->get_ref<const std::string&>();
    T v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc() && p == s.data() + s.size()) return v;
  }
  throw std::invalid_argument(std::string("field '") + name + "' is not " + type + ": " + shorten(it->dump()));
}

std::int64_t i64(const json& j, const char* name) { return integer_field<std::int64_t>(j, name, "an int64"); }
/// Member ids are uint64: most do not fit an int64.
std::uint64_t u64(const json& j, const char* name) { return integer_field<std::uint64_t>(j, name, "a uint64"); }

bool boolean(const json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

std::string str(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_string()) throw std::invalid_argument(std::string("field '") + name + "' is not a string");
  return it->get<std::string>();
}

std::string b64_field(const json& j, const char* name) { return base64_decode(str(j, name)); }

KeyValue parse_kv(const json& j) {
  KeyValue kv;
  kv.key = b64_field(j, "key");
  kv.value = b64_field(j, "value");
  kv.create_revision = i64(j, "create_revision");
  kv.mod_revision = i64(j, "mod_revision");
  kv.version = i64(j, "version");
  kv.lease = i64(j, "lease");
  return kv;
}

std::int64_t header_revision(const json& j) {
  auto it = j.find("header");
  if (it == j.end() || !it->is_object()) return 0;
  return i64(*it, "revision");
}

/// etcd's error body: {"error":"...","message":"...","code":N} (unary calls) or
/// {"error":{"grpc_code":N,"http_code":N,"message":"...","http_status":"..."}} (streams).
void parse_error_body(const std::string& body, int& code, std::string& message) {
  code = -1;
  message.clear();
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    message = shorten(body);
    return;
  }
  auto err = j.find("error");
  if (err != j.end() && err->is_object()) {
    if (auto c = err->find("grpc_code"); c != err->end() && c->is_number_integer()) code = c->get<int>();
    if (auto m = err->find("message"); m != err->end() && m->is_string()) message = m->get<std::string>();
  } else {
    if (auto c = j.find("code"); c != j.end() && c->is_number_integer()) code = c->get<int>();
    if (auto m = j.find("message"); m != j.end() && m->is_string()) message = m->get<std::string>();
    if (message.empty() && err != j.end() && err->is_string()) message = err->get<std::string>();
  }
  if (message.empty()) message = shorten(body);
}

EtcdError http_error(const std::string& endpoint, const std::string& method, const std::string& path, int status,
                     const std::string& body) {
  int code = -1;
  std::string message;
  parse_error_body(body, code, message);
  std::string what = "etcd " + endpoint + " " + method + " " + path + ": HTTP " + std::to_string(status);
  if (code >= 0) what += ", grpc code " + std::to_string(code);
  what += ": " + message;
  return EtcdError(endpoint, path, status, code, message, what);
}

/// No (complete) reply. detail: "Connection (Connection refused)", "Read timeout (no reply within
/// 5000 ms)", "Read (Connection reset by peer)", ...
EtcdError transport_error(const std::string& endpoint, const std::string& method, const std::string& path,
                          const http::Reply& reply) {
  std::string detail = reply.error_text();
  std::string what = reply.failure == http::Failure::kConnection
                         ? "etcd endpoint " + endpoint + " unreachable: " + method + " " + path + ": " + detail
                         : "etcd " + endpoint + " " + method + " " + path + ": " + detail;
  return EtcdError(endpoint, path, 0, -1, std::move(detail), std::move(what),
                   /*unsent=*/reply.failure == http::Failure::kConnection);
}

}  // namespace

EtcdError::EtcdError(std::string endpoint, std::string path, int http_status, int grpc_code, std::string etcd_message,
                     std::string what, bool unsent)
    : std::runtime_error(std::move(what)),
      endpoint_(std::move(endpoint)),
      path_(std::move(path)),
      http_status_(http_status),
      grpc_code_(grpc_code),
      etcd_message_(std::move(etcd_message)),
      unsent_(unsent) {}

std::string prefix_range_end(std::string_view prefix) {
  std::string end(prefix);
  for (auto i = static_cast<std::ptrdiff_t>(end.size()) - 1; i >= 0; --i) {
    auto& c = reinterpret_cast<unsigned char&>(end[static_cast<std::size_t>(i)]);
    if (c < 0xff) {
      ++c;
      end.resize(static_cast<std::size_t>(i) + 1);
      return end;
    }
  }
  return std::string(1, '\0');  // every byte was 0xff: no upper bound
}

EtcdClient::EtcdClient(std::string endpoint) : EtcdClient(std::move(endpoint), Options{}) {}

EtcdClient::EtcdClient(std::string endpoint, Options options) : options_(options) {
  constexpr std::string_view scheme = "http://";
  std::string_view e = endpoint;
  if (!e.empty() && e.back() == '/') e.remove_suffix(1);
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("etcd endpoint '" + endpoint + "' " + why + " (expected http://host:port)");
  };
  if (e.substr(0, scheme.size()) != scheme) throw bad("does not start with http://");
  std::string_view hostport = e.substr(scheme.size());
  auto colon = hostport.rfind(':');
  if (colon == std::string_view::npos || colon == 0) throw bad("has no host:port");
  std::string_view port = hostport.substr(colon + 1);
  int p = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || p < 1 || p > 65535)
    throw bad("has no valid port");
  if (hostport.find('/') != std::string_view::npos) throw bad("has a path");
  host_ = std::string(hostport.substr(0, colon));
  port_ = p;
  endpoint_ = std::string(e);
}

namespace {

/// One call on its own connection (see fencecheck/http/client.h). `read_timeout` bounds each wait
/// for the reply's next bytes; a stop request closes the connection (Failure::kCanceled).
http::Reply exchange(const std::string& host, int port, const EtcdClient::Options& options, const std::string& method,
                     const std::string& path, const std::string& body, milliseconds read_timeout,
                     std::stop_token stop = {}, const http::BodySink& sink = {}) {
  http::Request req;
  req.method = method;
  req.target = path;
  if (method != "GET") {
    req.body = body;
    req.content_type = "application/json";
  }
  // etcd's gateway sends every gRPC error as a chunked body followed by a trailer
  // ("Grpc-Trailer-Content-Type"); Beast reads the trailer as part of the reply, so the whole
  // body arrives and the trailer is ignored.
  return http::exchange(http::Endpoint{host, port}, req,
                        http::Timeouts{options.connect_timeout, read_timeout, options.request_timeout},
                        std::move(stop), sink);
}

// One unary call: POST path with body; returns the parsed 2xx JSON or throws EtcdError.
json call(const std::string& endpoint, const std::string& host, int port, const EtcdClient::Options& options,
          const std::string& path, const json& body) {
  http::Reply x = exchange(host, port, options, "POST", path, body.dump(), options.request_timeout);
  if (!x.complete()) throw transport_error(endpoint, "POST", path, x);
  if (x.status < 200 || x.status > 299) throw http_error(endpoint, "POST", path, x.status, x.body);
  json j = json::parse(x.body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw_protocol(endpoint, path, x.status, "not a JSON object: " + shorten(x.body));
  return j;
}

}  // namespace

LeaseGrant EtcdClient::lease_grant(std::chrono::seconds ttl) const {
  const std::string path = "/v3/lease/grant";
  json j = call(endpoint_, host_, port_, options_, path, json{{"TTL", std::to_string(ttl.count())}});
  try {
    if (auto e = str(j, "error"); !e.empty())
      throw EtcdError(endpoint_, path, 200, -1, e, "etcd " + endpoint_ + " POST " + path + ": " + e);
    LeaseGrant g{i64(j, "ID"), std::chrono::seconds(i64(j, "TTL"))};
    if (g.id == 0) throw std::invalid_argument("lease grant reply has no ID");
    return g;
  } catch (const std::invalid_argument& e) {
    throw_protocol(endpoint_, path, 200, e.what());
  }
}

std::optional<std::chrono::seconds> EtcdClient::lease_keepalive(std::int64_t id) const {
  const std::string path = "/v3/lease/keepalive";
  http::Reply x = exchange(host_, port_, options_, "POST", path, json{{"ID", std::to_string(id)}}.dump(),
                           options_.request_timeout);
  if (!x.complete()) throw transport_error(endpoint_, "POST", path, x);
  if (x.status < 200 || x.status > 299) throw http_error(endpoint_, "POST", path, x.status, x.body);
  // A stream of one message: {"result":{...}}\n, or {"error":{...}} when the stream failed.
  std::string_view line = x.body;
  if (auto nl = line.find('\n'); nl != std::string_view::npos) line = line.substr(0, nl);
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw_protocol(endpoint_, path, x.status, "not a JSON object: " + shorten(x.body));
  if (j.contains("error")) throw http_error(endpoint_, "POST", path, x.status, std::string(line));
  auto result = j.find("result");
  if (result == j.end() || !result->is_object()) throw_protocol(endpoint_, path, x.status, "no 'result': " + shorten(x.body));
  try {
    std::int64_t ttl = i64(*result, "TTL");
    if (ttl <= 0) return std::nullopt;  // proto3: TTL omitted (0) = the lease does not exist
    return std::chrono::seconds(ttl);
  } catch (const std::invalid_argument& e) {
    throw_protocol(endpoint_, path, x.status, e.what());
  }
}

bool EtcdClient::lease_revoke(std::int64_t id) const {
  const std::string path = "/v3/lease/revoke";
  try {
    call(endpoint_, host_, port_, options_, path, json{{"ID", std::to_string(id)}});
    return true;
  } catch (const EtcdError& e) {
    if (e.grpc_code() == 5) return false;  // NotFound: "etcdserver: requested lease not found"
    throw;
  }
}

LeaseTimeToLive EtcdClient::lease_time_to_live(std::int64_t id) const {
  const std::string path = "/v3/lease/timetolive";
  json j = call(endpoint_, host_, port_, options_, path, json{{"ID", std::to_string(id)}});
  try {
    return LeaseTimeToLive{i64(j, "ID"), std::chrono::seconds(i64(j, "TTL")), std::chrono::seconds(i64(j, "grantedTTL"))};
  } catch (const std::invalid_argument& e) {
    throw_protocol(endpoint_, path, 200, e.what());
  }
}

std::optional<LockResult> EtcdClient::lock(std::string_view name, std::int64_t lease_id, milliseconds timeout,
                                           std::stop_token stop) const {
  const std::string path = "/v3/lock/lock";
  json body{{"name", base64_encode(name)}, {"lease", std::to_string(lease_id)}};
  http::Reply x = exchange(host_, port_, options_, "POST", path, body.dump(), timeout, stop);
  if (x.failure == http::Failure::kCanceled || stop.stop_requested()) return std::nullopt;
  if (x.failure == http::Failure::kReadTimeout) return std::nullopt;  // our own deadline
  if (!x.complete()) throw transport_error(endpoint_, "POST", path, x);
  if (x.status < 200 || x.status > 299) throw http_error(endpoint_, "POST", path, x.status, x.body);
  json j = json::parse(x.body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw_protocol(endpoint_, path, x.status, "not a JSON object: " + shorten(x.body));
  try {
    LockResult r{b64_field(j, "key"), header_revision(j)};
    if (r.key.empty()) throw std::invalid_argument("lock reply has no key");
    return r;
  } catch (const std::invalid_argument& e) {
    throw_protocol(endpoint_, path, x.status, e.what());
  }
}

std::int64_t EtcdClient::unlock(std::string_view key) const {
  const std::string path = "/v3/lock/unlock";
  json j = call(endpoint_, host_, port_, options_, path, json{{"key", base64_encode(key)}});
  try {
    return header_revision(j);
  } catch (const std::invalid_argument& e) {
    throw_protocol(endpoint_, path, 200, e.what());
  }
}

std::optional<KeyValue> EtcdClient::range(std::string_view key) const {
  const std::string path = "/v3/kv/range";
  json j = call(endpoint_, host_, port_, options_, path, json{{"key", base64_encode(key)}});
  try {
    auto kvs = j.find("kvs");
    if (kvs == j.end() || !kvs->is_array() || kvs->empty()) return std::nullopt;
    return parse_kv(kvs->front());
  } catch (const std::invalid_argument& e) {
    throw_protocol(endpoint_, path, 200, e.what());
  }
}

std::vector<KeyValue> EtcdClient::range_prefix(std::string_view prefix) const {
  const std::string path = "/v3/kv/range";
  json j = call(endpoint_, host_, port_, options_, path,
                json{{"key", base64_encode(prefix)}, {"range_end", base64_encode(prefix_range_end(prefix))}});
  std::vector<KeyValue> out;
  try {
    auto kvs = j.find("kvs");
    if (kvs == j.end() || !kvs->is_array()) return out;
    for (const auto& kv : *kvs) out.push_back(parse_kv(kv));
    return out;
  } catch (const std::invalid_argument& e) {
    throw_protocol(endpoint_, path, 200, e.what());
  }
}

std::int64_t EtcdClient::put(std::string_view key, std::string_view value, std::int64_t lease) const {
  const std::string path = "/v3/kv/put";
  json body{{"key", base64_encode(key)}, {"value", base64_encode(value)}};
  if (lease != 0) body["lease"] = std::to_string(lease);
  json j = call(endpoint_, host_, port_, options_, path, body);
  try {
    return header_revision(j);
  } catch (const std::invalid_argument& e) {
    throw_protocol(endpoint_, path, 200, e.what());
  }
}

CreateAllResult EtcdClient::create_all(const std::vector<std::pair<std::string, std::string>>& kvs,
                                       std::int64_t lease) const {
  if (kvs.empty()) throw std::invalid_argument("create_all: no keys");
  const std::string path = "/v3/kv/txn";
  json compare = json::array(), success = json::array(), failure = json::array();
  for (const auto& [key, value] : kvs) {
    // etcdserverpb.Compare: target CREATE, result EQUAL, create_revision 0 = "the key does not exist".
    compare.push_back({{"key", base64_encode(key)}, {"result", "EQUAL"}, {"target", "CREATE"}, {"create_revision", "0"}});
    json put{{"key", base64_encode(key)}, {"value", base64_encode(value)}};
    if (lease != 0) put["lease"] = std::to_string(lease);
    success.push_back({{"request_put", put}});
    failure.push_back({{"request_range", {{"key", base64_encode(key)}}}});
  }
  json j = call(endpoint_, host_, port_, options_, path, json{{"compare", compare}, {"success", success}, {"failure", failure}});
  try {
    CreateAllResult r;
    r.revision = header_revision(j);
    r.created = boolean(j, "succeeded");  // proto3: false is omitted
    if (r.created) return r;
    if (auto responses = j.find("responses"); responses != j.end() && responses->is_array())
      for (const auto& resp : *responses) {
        auto range = resp.find("response_range");
        if (range == resp.end() || !range->is_object()) continue;
        if (auto found = range->find("kvs"); found != range->end() && found->is_array())
          for (const auto& kv : *found) r.existing.push_back(parse_kv(kv));
      }
    return r;
  } catch (const std::invalid_argument& e) {
    throw_protocol(endpoint_, path, 200, e.what());
  }
}

DeleteResult EtcdClient::delete_key(std::string_view key) const {
  const std::string path = "/v3/kv/deleterange";
  json j = call(endpoint_, host_, port_, options_, path, json{{"key", base64_encode(key)}});
  try {
    return DeleteResult{header_revision(j), i64(j, "deleted")};
  } catch (const std::invalid_argument& e) {
    throw_protocol(endpoint_, path, 200, e.what());
  }
}

DeletePrefixResult EtcdClient::delete_prefix(std::string_view prefix) const {
  if (prefix.empty()) throw std::invalid_argument("etcd delete_prefix: empty prefix (would delete every key)");
  const std::string path = "/v3/kv/deleterange";
  json j = call(endpoint_, host_, port_, options_, path,
                json{{"key", base64_encode(prefix)}, {"range_end", base64_encode(prefix_range_end(prefix))},
                     {"prev_kv", true}});
  try {
    DeletePrefixResult out;
    out.revision = header_revision(j);
    if (auto kvs = j.find("prev_kvs"); kvs != j.end() && kvs->is_array())
      for (const auto& kv : *kvs) out.deleted.push_back(parse_kv(kv));
    if (static_cast<std::size_t>(i64(j, "deleted")) != out.deleted.size())
      throw std::invalid_argument("deleterange says " + std::to_string(i64(j, "deleted")) + " deleted but returned " +
                                  std::to_string(out.deleted.size()) + " prev_kvs");
    return out;
  } catch (const std::invalid_argument& e) {
    throw_protocol(endpoint_, path, 200, e.what());
  }
}


MemberStatus EtcdClient::status() const {
  const std::string path = "/v3/maintenance/status";
  json j = call(endpoint_, host_, port_, options_, path, json::object());
  try {
    MemberStatus st;
    const auto h = j.find("header");
    if (h != j.end() && h->is_object()) st.member_id = u64(*h, "member_id");
    st.leader = u64(j, "leader");
    st.raft_term = u64(j, "raftTerm");
    st.raft_index = u64(j, "raftIndex");
    st.revision = header_revision(j);
    return st;
  } catch (const std::invalid_argument& e) {
    throw_protocol(endpoint_, path, 200, e.what());
  }
}

void EtcdClient::move_leader(std::uint64_t target_id) const {
  (void)call(endpoint_, host_, port_, options_, "/v3/maintenance/transfer-leadership",
             json{{"targetID", std::to_string(target_id)}});
}

bool EtcdClient::health() const {
  try {
    http::Reply x = exchange(host_, port_, options_, "GET", "/health", {}, options_.request_timeout);
    if (!x.complete() || x.status != 200) return false;
    json j = json::parse(x.body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return false;
    auto h = j.find("health");
    return h != j.end() && ((h->is_string() && h->get<std::string>() == "true") || (h->is_boolean() && h->get<bool>()));
  } catch (const std::exception&) {
    return false;
  }
}

std::int64_t EtcdClient::watch(std::string_view prefix, std::int64_t start_revision, const WatchCallback& callback,
                               std::stop_token stop) const {
  if (prefix.empty()) throw std::invalid_argument("etcd watch: empty prefix (would watch nothing)");
  const std::string path = "/v3/watch";
  json create{{"key", base64_encode(prefix)},
              {"range_end", base64_encode(prefix_range_end(prefix))},
              {"prev_kv", true},
              {"progress_notify", true}};
  if (start_revision > 0) create["start_revision"] = std::to_string(start_revision);

  const std::string request = json{{"create_request", create}}.dump();
  int status = 0;
  std::string error_body;
  std::string buffer;
  std::exception_ptr failure;
  std::int64_t last_revision = 0;

  auto handle_line = [&](std::string_view line) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty()) return;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw_protocol(endpoint_, path, status, "watch message is not JSON: " + shorten(line));
    if (j.contains("error")) throw http_error(endpoint_, "POST", path, status, std::string(line));
    auto result = j.find("result");
    if (result == j.end() || !result->is_object()) throw_protocol(endpoint_, path, status, "watch message has no 'result': " + shorten(line));
    std::int64_t rev = 0;
    try {
      rev = header_revision(*result);
      if (boolean(*result, "canceled")) {
        std::string why = str(*result, "cancel_reason");
        if (auto compact = i64(*result, "compact_revision"); compact > 0)
          why = "start revision " + std::to_string(start_revision) + " was compacted (compact_revision " +
                std::to_string(compact) + ")" + (why.empty() ? "" : ": " + why);
        if (why.empty()) why = "canceled by etcd";
        throw EtcdError(endpoint_, path, status, -1, why, "etcd " + endpoint_ + " POST " + path + ": watch canceled: " + why);
      }
      if (rev > last_revision) last_revision = rev;
      auto events = result->find("events");
      if (events == result->end() || !events->is_array()) return;
      for (const auto& ev : *events) {
        WatchEvent w;
        w.type = str(ev, "type") == "DELETE" ? WatchEvent::Type::kDelete : WatchEvent::Type::kPut;
        if (auto kv = ev.find("kv"); kv != ev.end() && kv->is_object()) w.kv = parse_kv(*kv);
        if (auto pkv = ev.find("prev_kv"); pkv != ev.end() && pkv->is_object()) w.prev_kv = parse_kv(*pkv);
        w.header_revision = rev;
        callback(w);
      }
    } catch (const std::invalid_argument& e) {
      throw_protocol(endpoint_, path, status, e.what());
    }
  };

  // Called with each piece of the chunked body as it arrives; false stops the read.
  auto receive = [&](int reply_status, std::string_view piece) {
    status = reply_status;
    if (status != 200) {
      error_body.append(piece);
      return true;
    }
    buffer.append(piece);
    try {
      for (auto nl = buffer.find('\n'); nl != std::string::npos; nl = buffer.find('\n')) {
        std::string line = buffer.substr(0, nl);
        buffer.erase(0, nl + 1);
        handle_line(line);
        if (stop.stop_requested()) return false;
      }
    } catch (...) {
      failure = std::current_exception();
      return false;
    }
    return !stop.stop_requested();
  };

  // etcd sends a progress notification to an idle watcher every 10 minutes by default
  // (--experimental-watch-progress-notify-interval); a read timeout well above that only fires
  // when etcd is gone.
  http::Reply x = exchange(host_, port_, options_, "POST", path, request, std::chrono::minutes(30), stop, receive);
  if (failure) std::rethrow_exception(failure);
  if (stop.stop_requested()) return last_revision;
  // A non-2xx status is etcd's error reply, whether or not the connection broke after it.
  if (x.status != 0 && (x.status < 200 || x.status > 299)) throw http_error(endpoint_, "POST", path, x.status, error_body);
  if (!x.complete()) throw transport_error(endpoint_, "POST", path, x);
  handle_line(buffer);  // a last message without its newline
  return last_revision;
}

}  // namespace fencecheck
