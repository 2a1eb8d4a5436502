#include "fencecheck/resources/store_server.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>

#include "text.h"
#include "fencecheck/proto/readback.h"

namespace fencecheck {
namespace {

using detail::shown;

constexpr const char* kTokenHeader = "Fencing-Token";
constexpr const char* kClientHeader = "Fencecheck-Client";
constexpr std::string_view kCounterPrefix = "/v1/counters/";  // GET|PUT /v1/counters/{key}
constexpr std::string_view kEffectPrefix = "/v1/effects/";    // POST /v1/effects/{key}
// httplib hands every request of every method to Impl::route (which routes by plain string
// matching, the same code handle() runs in process): "[\s\S]*" matches any path, also one whose
// percent-decoding holds a newline (which "." would not match).
constexpr const char* kAnyPath = R"([\s\S]*)";

std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void reply_json(httplib::Response& res, int status, const nlohmann::json& j) {
  res.status = status;
  res.set_content(dump(j), "application/json");
}

void reply_error(httplib::Response& res, int status, const std::string& message) {
  reply_json(res, status, nlohmann::json{{"error", message}});
}

// A path index (segment, chunk): decimal digits only, 0..2^63-1. "" or what is wrong.
std::string parse_index(std::string_view what, std::string_view text, std::int64_t& out) {
  const std::string w(what);
  if (text.empty()) return w + " is empty: expected a non-negative integer";
  if (text.front() == '-') return w + " '" + shown(text) + "' is negative: expected a non-negative integer";
  for (char c : text)
    if (c < '0' || c > '9') return w + " '" + shown(text) + "' is not a non-negative integer";
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec == std::errc::result_out_of_range) return w + " '" + shown(text) + "' is past 2^63-1";
  if (ec != std::errc() || p != text.data() + text.size()) return w + " '" + shown(text) + "' is not a non-negative integer";
  return "";
}

// The parts of /v1/keys/{key}/segments/{segment}/chunks/{chunk}, with segment and chunk free of
// '/' (the key may hold anything: it is validated, with a precise message, by the PUT handler).
// The language of the regex /v1/keys/(.*)/segments/([^/]*)/chunks/([^/]*) matched greedily, so
// the last "/segments/" wins. nullopt when the path is not of that shape.
struct ChunkPath {
  std::string key, segment, chunk;
};
std::optional<ChunkPath> split_chunk_path(std::string_view path) {
  constexpr std::string_view kKeys = "/v1/keys/";
  constexpr std::string_view kSegments = "/segments/";
  constexpr std::string_view kChunks = "/chunks/";
  if (path.substr(0, kKeys.size()) != kKeys) return std::nullopt;
  const auto chunks = path.rfind(kChunks);
  if (chunks == std::string_view::npos || path.find('/', chunks + kChunks.size()) != std::string_view::npos)
    return std::nullopt;
  const auto segments = path.substr(0, chunks).rfind(kSegments);
  if (segments == std::string_view::npos || segments < kKeys.size()) return std::nullopt;
  const auto segment = path.substr(segments + kSegments.size(), chunks - segments - kSegments.size());
  if (segment.find('/') != std::string_view::npos) return std::nullopt;
  return ChunkPath{std::string(path.substr(kKeys.size(), segments - kKeys.size())), std::string(segment),
                   std::string(path.substr(chunks + kChunks.size()))};
}

bool is_chunk_path(std::string_view path) { return split_chunk_path(path).has_value(); }

bool has_prefix(std::string_view path, std::string_view prefix) { return path.substr(0, prefix.size()) == prefix; }

// Plain string matching, not std::regex: GCC 12's <regex> draws -Wmaybe-uninitialized under
// the sanitizers, and four fixed routes need no regex engine.
struct Route {
  bool (*matches)(std::string_view path);
  const char* allow;  // the methods the path answers, for 405's Allow header
  const char* shape;  // for 404 messages
};

const std::vector<Route>& routes() {
  static const std::vector<Route> r{
      {is_chunk_path, "PUT", "PUT /v1/keys/{key}/segments/{segment}/chunks/{chunk}"},
      {[](std::string_view p) { return has_prefix(p, kCounterPrefix); }, "GET, HEAD, PUT", "GET|PUT /v1/counters/{key}"},
      {[](std::string_view p) { return has_prefix(p, kEffectPrefix); }, "POST", "POST /v1/effects/{key}"},
      {[](std::string_view p) { return p == "/v1/readback"; }, "GET, HEAD", "GET /v1/readback"},
      {[](std::string_view p) { return p == "/healthz"; }, "GET, HEAD", "GET /healthz"},
      {[](std::string_view p) { return p == "/metrics"; }, "GET, HEAD", "GET /metrics"},
  };
  return r;
}

// httplib's Stream over one accepted connection, as its own SocketStream (poll-based timeouts, a
// 4 KiB read buffer, MSG_NOSIGNAL sends), that also records the bytes of each request's head as
// they are read (httplib reads a head one byte at a time, so the record ends exactly at its blank
// line). One per connection, so bytes read ahead are never dropped between keep-alive requests.
class RawHeadStream final : public httplib::Stream {
 public:
  RawHeadStream(int sock, std::chrono::microseconds read_timeout, std::chrono::microseconds write_timeout)
      : sock_(sock), read_timeout_(read_timeout), write_timeout_(write_timeout) {}

  /// Starts recording the next request's head.
  void begin_request() {
    head_.clear();
    head_done_ = false;
  }
  /// The recorded head, or nullptr when it ran past kMaxHead (httplib refuses such a request).
  [[nodiscard]] const std::string* head() const { return head_.size() > kMaxHead ? nullptr : &head_; }
  /// Bytes read from the socket and not yet consumed.
  [[nodiscard]] bool buffered() const { return off_ < len_; }

  bool is_readable() const override { return buffered() || wait_for(POLLIN, read_timeout_); }
  bool is_writable() const override { return wait_for(POLLOUT, write_timeout_) && alive(); }

  ssize_t read(char* ptr, size_t size) override {
    if (!buffered()) {
      if (!wait_for(POLLIN, read_timeout_)) return -1;
      ssize_t n;
      do {
        n = ::recv(sock_, buf_.data(), buf_.size(), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      off_ = 0;
      len_ = static_cast<std::size_t>(n);
    }
    const std::size_t take = std::min(size, len_ - off_);
    std::memcpy(ptr, buf_.data() + off_, take);
    record(std::string_view(buf_.data() + off_, take));
    off_ += take;
    return static_cast<ssize_t>(take);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do {
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(::getpeername, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(::getsockname, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  static constexpr std::size_t kMaxHead = 64 * 1024;

  void record(std::string_view bytes) {
    for (char c : bytes) {
      if (head_done_) return;
      if (head_.size() > kMaxHead) {
        head_done_ = true;
        return;
      }
      head_.push_back(c);
      const std::string_view h = head_;
      if (h.size() >= 2 && h.substr(h.size() - 2) == "\n\n") head_done_ = true;
      if (h.size() >= 4 && h.substr(h.size() - 4) == "\r\n\r\n") head_done_ = true;
    }
  }

  bool wait_for(short events, std::chrono::microseconds timeout) const {
    pollfd p{sock_, events, 0};
    const int ms = static_cast<int>((timeout.count() + 999) / 1000);
    int rc;
    do {
      rc = ::poll(&p, 1, ms);
    } while (rc < 0 && errno == EINTR);
    return rc > 0 && (p.revents & (events | POLLHUP | POLLERR)) != 0;
  }

  // httplib's is_socket_alive: nothing to read, or something to read (not EOF).
  bool alive() const {
    pollfd p{sock_, POLLIN, 0};
    if (::poll(&p, 1, 0) == 0) return true;
    char c;
    return ::recv(sock_, &c, 1, MSG_PEEK) > 0;
  }

  template <typename Get>
  void address_of(Get get, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (get(sock_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    char host[NI_MAXHOST];
    char serv[NI_MAXSERV];
    if (::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, serv, sizeof serv,
                      NI_NUMERICHOST | NI_NUMERICSERV) != 0)
      return;
    ip = host;
    port = std::atoi(serv);
  }

  int sock_;
  std::chrono::microseconds read_timeout_;
  std::chrono::microseconds write_timeout_;
  std::array<char, 4096> buf_{};
  std::size_t off_ = 0;
  std::size_t len_ = 0;
  std::string head_;
  bool head_done_ = true;
};

// The connection whose request this thread is handling (RawHeadStream records its head exactly as
// it came off the socket); nullptr outside a request.
// cpp-httplib 0.11.4's parser drops a header line whose value is empty and percent-decodes the
// values it keeps, so "Fencing-Token:" looks absent and "Fencing-Token: %31%32" looks like "12";
// the handlers judge the fencing headers from these bytes instead (raw_header_values).
thread_local const RawHeadStream* t_request_stream = nullptr;

bool is_ows(char c) { return c == ' ' || c == '\t'; }

// RFC 9110 §5.5: a field value excludes its leading and trailing whitespace (OWS: SP, HTAB).
std::string_view trim_ows(std::string_view v) {
  while (!v.empty() && is_ows(v.front())) v.remove_prefix(1);
  while (!v.empty() && is_ows(v.back())) v.remove_suffix(1);
  return v;
}

bool same_name(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

// Every value of header `name` (case-insensitive) in the current request's recorded head, as sent
// (untrimmed, not decoded), in order; nullopt when no head was recorded (then httplib's parse is
// all there is).
std::optional<std::vector<std::string>> raw_header_values(std::string_view name) {
  const std::string* recorded = t_request_stream == nullptr ? nullptr : t_request_stream->head();
  if (recorded == nullptr) return std::nullopt;
  std::vector<std::string> out;
  std::string_view head = *recorded;
  bool request_line = true;
  while (!head.empty()) {
    const auto eol = head.find('\n');
    std::string_view line = head.substr(0, eol);
    head = eol == std::string_view::npos ? std::string_view{} : head.substr(eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (request_line) {
      request_line = false;
      continue;
    }
    if (line.empty()) break;  // the blank line that ends the head
    const auto colon = line.find(':');
    if (colon != std::string_view::npos && same_name(line.substr(0, colon), name))
      out.emplace_back(line.substr(colon + 1));
  }
  return out;
}


// Reaches httplib's listening socket: to deepen its backlog and to release it when never run; and
// serves each connection through RawHeadStream.
class HttpServer : public httplib::Server {
 public:
  // cpp-httplib 0.11.4 listens with a backlog of 5: a burst of 64 workers connecting at once
  // overflows the accept queue and some of them see resets or stalls. listen() again on the
  // bound socket only raises the backlog (Linux caps it at net.core.somaxconn).
  bool deepen_backlog(int backlog) {
    auto sock = svr_sock_.load();
    return sock != INVALID_SOCKET && ::listen(sock, backlog) == 0;
  }
  void close_listener() {
    auto sock = svr_sock_.exchange(INVALID_SOCKET);
    if (sock != INVALID_SOCKET) ::close(sock);
  }

 private:
  // cpp-httplib 0.11.4's own connection loop (detail::process_server_socket), on RawHeadStream
  // instead of its SocketStream: up to keep_alive_max_count_ requests per connection, each waited
  // for up to keep_alive_timeout_sec_, the last answered with Connection: close; the request
  // itself is httplib's process_request. Its handlers find the head in t_request_stream.
  bool process_and_close_socket(socket_t sock) override {
    using std::chrono::microseconds;
    using std::chrono::seconds;
    RawHeadStream strm(sock, seconds(read_timeout_sec_) + microseconds(read_timeout_usec_),
                       seconds(write_timeout_sec_) + microseconds(write_timeout_usec_));
    bool ret = false;
    for (std::size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET && next_request(strm); --left) {
      bool connection_closed = false;
      strm.begin_request();
      t_request_stream = &strm;
      ret = process_request(strm, left == 1, connection_closed, nullptr);
      t_request_stream = nullptr;
      if (!ret || connection_closed) break;
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ret;
  }

  // httplib's keep_alive(): true once the connection has bytes to read; false after
  // keep_alive_timeout_sec_ without any, on an error, or once the server stops.
  bool next_request(const RawHeadStream& strm) const {
    if (strm.buffered()) return true;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
    for (;;) {
      pollfd p{strm.socket(), POLLIN, 0};
      const int rc = ::poll(&p, 1, 10);
      if (rc > 0) return true;
      if (rc < 0 && errno != EINTR) return false;
      if (svr_sock_ == INVALID_SOCKET || std::chrono::steady_clock::now() > deadline) return false;
    }
  }
};

}  // namespace

std::pair<std::string, int> parse_listen_address(const std::string& text) {
  std::string host;
  std::string port_text;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      throw std::invalid_argument("listen address '" + text + "' must be [ipv6]:port");
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos)
      throw std::invalid_argument("listen address '" + text + "' has no port: expected host:port, e.g. 127.0.0.1:0");
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (host.find(':') != std::string::npos)
      throw std::invalid_argument("listen address '" + text + "': put an IPv6 host in brackets, e.g. [::1]:0");
  }
  if (host.empty()) throw std::invalid_argument("listen address '" + text + "' has an empty host");
  int port = -1;
  auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || p != port_text.data() + port_text.size() || port < 0 || port > 65535)
    throw std::invalid_argument("listen address '" + text + "': port '" + port_text + "' is not 0..65535");
  return {host, port};
}

struct StoreServer::Impl {
  Impl(FencedStore& s, StoreServerOptions o)
      : store(s),
        options(std::move(o)),
        registry(std::make_shared<prometheus::Registry>()),
        writes(prometheus::BuildCounter()
                   .Name("fencecheck_store_writes_total")
                   .Help("Writes the store answered, by key, client and result (accepted or rejected by fencing)")
                   .Register(*registry)),
        high_water(prometheus::BuildGauge()
                       .Name("fencecheck_store_high_water_token")
                       .Help("The highest fencing token accepted per key (float64: exact up to 2^53)")
                       .Register(*registry)),
        effects(prometheus::BuildCounter()
                    .Name("fencecheck_store_effects_total")
                    .Help("Side effects the store answered, by key, client, mode (fenced, unfenced, idempotent) and "
                          "result (applied, duplicate, rejected)")
                    .Register(*registry)),
        fsyncs(prometheus::BuildCounter()
                   .Name("fencecheck_store_fsyncs_total")
                   .Help("fdatasync calls on the store's log; far below accepted writes when group commit works")
                   .Register(*registry)
                   .Add({})) {}

  void count_write(const std::string& key, const std::string& client, const char* result) {
    writes.Add({{"key", key}, {"client", client}, {"result", result}}).Increment();
  }

  /// Every request httplib parsed: routes it by method and path to the handlers below, or answers
  /// 405 (known path, wrong method; Allow set) or 404.
  void route(const httplib::Request& req, httplib::Response& res);
  /// The body of httplib's own refusals (413 body over the limit, 414, 400 malformed, CONNECT and
  /// TRACE), which reach the error handler with an empty body.
  void describe_refusal(const httplib::Request& req, httplib::Response& res) const;
  void handle_put(const httplib::Request& req, httplib::Response& res, const ChunkPath& path);
  /// Runs one fenced mutation (a chunk or a counter write) and replies: 200 accepted, 409 fenced
  /// (with the high-water mark), 400 for a request the store calls invalid, 500 on failure.
  template <typename Write>
  void reply_write(httplib::Response& res, const std::string& key, const std::string& client, Write&& write) {
    WriteResult r;
    try {
      r = write();
    } catch (const std::invalid_argument& e) {
      return reply_error(res, 400, e.what());
    }
    switch (r.status) {
      case WriteStatus::kAccepted:
        count_write(key, client, "accepted");
        return reply_json(res, 200, {{"accepted", true}, {"high_water", r.high_water}, {"seq", r.seq}});
      case WriteStatus::kRejected:
        count_write(key, client, "rejected");
        return reply_json(res, 409, {{"accepted", false}, {"high_water", r.high_water}, {"error", r.error}});
      case WriteStatus::kFailed:  // the log could not be made durable: the store has failed (store.h)
        return reply_error(res, 503, r.error);
    }
    reply_error(res, 500, "unknown write status");
  }
  void handle_counter_get(const std::string& key, httplib::Response& res);
  void handle_counter_put(const httplib::Request& req, httplib::Response& res, const std::string& key);
  void handle_effect(const httplib::Request& req, httplib::Response& res, const std::string& key);
  void handle_readback(httplib::Response& res);
  void count_effect(const std::string& key, const std::string& client, EffectMode mode, const char* result) {
    effects.Add({{"key", key}, {"client", client}, {"mode", std::string(effect_mode_name(mode))}, {"result", result}})
        .Increment();
  }
  void handle_metrics(httplib::Response& res);
  void setup();

  FencedStore& store;
  const StoreServerOptions options;
  HttpServer svr;
  int bound_port = 0;
  std::atomic<bool> stop_requested{false};
  std::atomic<bool> in_run{false};
  std::thread thread;

  std::shared_ptr<prometheus::Registry> registry;
  prometheus::Family<prometheus::Counter>& writes;
  prometheus::Family<prometheus::Gauge>& high_water;
  prometheus::Family<prometheus::Counter>& effects;
  prometheus::Counter& fsyncs;
  std::mutex metrics_mu;          // guards the scrape-time sync below
  std::int64_t fsyncs_seen = 0;   // store fsyncs already added to the counter
};

namespace {

// Every value of header `name`: as sent, from the recorded head (raw_header_values); httplib's
// parse only when there is no record.
std::vector<std::string> header_values(const httplib::Request& req, const char* name) {
  if (auto raw = raw_header_values(name)) return *std::move(raw);
  std::vector<std::string> out;
  const auto [first, last] = req.headers.equal_range(name);
  for (auto it = first; it != last; ++it) out.push_back(it->second);
  return out;
}

// The Fencing-Token and Fencecheck-Client headers every mutation carries, each exactly once, its
// value trimmed of optional whitespace (RFC 9110 §5.5) and nothing else. "" or the 400 message.
std::string parse_token_and_client(const httplib::Request& req, FencingToken& token_out, std::string& client_out) {
  const auto tokens = header_values(req, kTokenHeader);
  if (tokens.empty()) return std::string("missing header ") + kTokenHeader + ": every write must carry its fencing token";
  if (tokens.size() > 1)
    return std::string("header ") + kTokenHeader + " given " + std::to_string(tokens.size()) + " times: send exactly one";
  const TokenParse token = parse_token(trim_ows(tokens.front()));
  if (!token.ok) return std::string("bad header ") + kTokenHeader + ": " + token.error;
  token_out = token.token;

  const auto clients = header_values(req, kClientHeader);
  if (clients.empty()) return std::string("missing header ") + kClientHeader + ": every write must name its writer";
  if (clients.size() > 1)
    return std::string("header ") + kClientHeader + " given " + std::to_string(clients.size()) + " times: send exactly one";
  client_out = std::string(trim_ows(clients.front()));
  if (auto why = name_problem("client", client_out, kMaxClientBytes); !why.empty())
    return std::string("bad header ") + kClientHeader + ": " + why;
  return "";
}

// A handler that threw: 500 with what it said (the exception handler's answer).
void reply_exception(httplib::Response& res, std::exception_ptr ep) {
  std::string what = "unknown exception";
  try {
    std::rethrow_exception(std::move(ep));
  } catch (const StoreFailed& e) {
    // The store failed (an fdatasync or write error): 503 like a write after the failure, since
    // its state in memory may hold what the disk does not (store.h, StoreFailed).
    return reply_error(res, 503, e.what());
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "unknown exception (not a std::exception)";
  }
  spdlog::error("fencecheck-store: request handler threw: {}", what);
  reply_error(res, 500, "internal error: " + what);
}


}  // namespace

void StoreServer::Impl::handle_put(const httplib::Request& req, httplib::Response& res, const ChunkPath& path) {
  WriteRequest w;
  w.key = path.key;
  if (auto why = name_problem("key", w.key, kMaxKeyBytes); !why.empty()) return reply_error(res, 400, why);
  if (auto why = parse_index("segment", path.segment, w.segment); !why.empty()) return reply_error(res, 400, why);
  if (auto why = parse_index("chunk", path.chunk, w.chunk); !why.empty()) return reply_error(res, 400, why);
  if (auto why = parse_token_and_client(req, w.token, w.client); !why.empty()) return reply_error(res, 400, why);

  if (req.body.empty()) return reply_error(res, 400, "body is empty: a chunk must carry at least one byte");
  if (req.body.size() > options.max_body_bytes)
    return reply_error(res, 413, "body is " + std::to_string(req.body.size()) + " bytes, over the maximum of " +
                                     std::to_string(options.max_body_bytes) + " bytes");
  w.bytes = req.body;

  reply_write(res, w.key, w.client, [&] { return store.write(w); });
}

void StoreServer::Impl::handle_counter_get(const std::string& key, httplib::Response& res) {
  if (auto why = name_problem("key", key, kMaxKeyBytes); !why.empty()) return reply_error(res, 400, why);
  const CounterReading c = store.read_counter(key);
  reply_json(res, 200, {{"value", c.value}, {"high_water", c.high_water}});
}

void StoreServer::Impl::handle_counter_put(const httplib::Request& req, httplib::Response& res, const std::string& key) {
  CounterWriteRequest w;
  w.key = key;
  if (auto why = name_problem("key", w.key, kMaxKeyBytes); !why.empty()) return reply_error(res, 400, why);
  if (auto why = parse_token_and_client(req, w.token, w.client); !why.empty()) return reply_error(res, 400, why);
  std::string_view body = req.body;
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.remove_suffix(1);
  if (auto why = parse_index("counter value", body, w.value); !why.empty())
    return reply_error(res, 400, why + " (the body is the counter's new value)");

  reply_write(res, w.key, w.client, [&] { return store.write_counter(w); });
}

void StoreServer::Impl::handle_effect(const httplib::Request& req, httplib::Response& res, const std::string& key) {
  EffectRequest e;
  e.key = key;
  if (auto why = name_problem("key", e.key, kMaxKeyBytes); !why.empty()) return reply_error(res, 400, why);
  if (auto why = parse_token_and_client(req, e.token, e.client); !why.empty()) return reply_error(res, 400, why);
  // The guard is the store's configuration, never the request's: a Fencecheck-Effect header
  // (sent by clients before issue 14) is not read, so it can neither loosen nor tighten it.
  e.mode = options.effect_mode;
  e.id = req.body;
  if (auto why = effect_id_problem(e.id); !why.empty()) return reply_error(res, 400, why + " (the body is the effect id)");

  EffectResult r;
  try {
    r = store.post_effect(e);
  } catch (const std::invalid_argument& err) {
    return reply_error(res, 400, err.what());
  }
  const std::string mode(effect_mode_name(e.mode));
  switch (r.status) {
    case EffectStatus::kApplied:
      count_effect(e.key, e.client, e.mode, "applied");
      return reply_json(res, 200, {{"applied", true}, {"mode", mode}, {"high_water", r.high_water}, {"seq", r.seq}});
    case EffectStatus::kDuplicate:
      count_effect(e.key, e.client, e.mode, "duplicate");
      return reply_json(res, 200, {{"applied", false}, {"duplicate", true}, {"mode", mode},
                                   {"high_water", r.high_water}, {"seq", r.seq}, {"error", r.error}});
    case EffectStatus::kRejected:
      count_effect(e.key, e.client, e.mode, "rejected");
      return reply_json(res, 409, {{"applied", false}, {"mode", mode}, {"high_water", r.high_water}, {"seq", r.seq},
                                   {"error", r.error}});
    case EffectStatus::kFailed:
      return reply_error(res, 500, r.error);
  }
  reply_error(res, 500, "unknown effect status");
}

void StoreServer::Impl::handle_readback(httplib::Response& res) {
  StoreSnapshot snap = store.snapshot();
  ReadBack& rb = snap.readback;
  // docs/catalogue-plan.md: "effects":[{"key","id","token","client","seq","applied"}], "counters":{"key":N},
  // both always present. Written element by element: a soak's log has millions of entries, and a
  // DOM of it would cost several hundred bytes each (fencecheck/proto/readback.h).
  rb.effects.clear();
  rb.effects.reserve(snap.effects.size());
  for (const auto& e : snap.effects) rb.effects.push_back(EffectRecord{e.key, e.id, e.token, e.client, e.seq, e.applied, {}});
  rb.counters = std::move(snap.counters);
  std::ostringstream out;
  write_readback_json(out, rb, ReadBackJsonStyle{-1, /*always_effects_and_counters=*/true});
  res.status = 200;
  res.set_content(std::move(out).str(), "application/json");
}

void StoreServer::Impl::handle_metrics(httplib::Response& res) {
  {
    std::lock_guard lock(metrics_mu);
    // Derived from the store at scrape time, so concurrent writes can never leave a gauge behind.
    for (const auto& [key, token] : store.high_water())
      high_water.Add({{"key", key}}).Set(static_cast<double>(token));
    const std::int64_t now = store.stats().fsyncs;
    if (now > fsyncs_seen) fsyncs.Increment(static_cast<double>(now - fsyncs_seen));
    fsyncs_seen = now;
  }
  res.status = 200;
  res.set_content(prometheus::TextSerializer().Serialize(registry->Collect()), "text/plain; version=0.0.4");
}

void StoreServer::Impl::route(const httplib::Request& req, httplib::Response& res) {
  const std::string_view path = req.path;
  const std::string& method = req.method;
  const bool get = method == "GET" || method == "HEAD";  // httplib answers HEAD as GET without the body
  if (method == "PUT") {
    if (auto chunk = split_chunk_path(path)) return handle_put(req, res, *chunk);
  }
  if (has_prefix(path, kCounterPrefix)) {
    const std::string key(path.substr(kCounterPrefix.size()));
    if (get) return handle_counter_get(key, res);
    if (method == "PUT") return handle_counter_put(req, res, key);
  }
  if (method == "POST" && has_prefix(path, kEffectPrefix))
    return handle_effect(req, res, std::string(path.substr(kEffectPrefix.size())));
  if (get && path == "/v1/readback") return handle_readback(res);
  if (get && path == "/healthz") {
    auto st = store.stats();
    if (st.failed) return reply_error(res, 503, "store failed: " + st.failure);
    res.status = 200;
    return res.set_content("ok", "text/plain");
  }
  if (get && path == "/metrics") return handle_metrics(res);

  // Everything else: 405 on a known path with the wrong method, 404 otherwise.
  for (const auto& r : routes()) {
    if (r.matches(path)) {
      res.set_header("Allow", r.allow);
      return reply_error(res, 405, "method " + method + " is not allowed on " + shown(path) + "; allowed: " + r.allow);
    }
  }
  std::string known;
  for (const auto& r : routes()) known += (known.empty() ? "" : ", ") + std::string(r.shape);
  reply_error(res, 404, "no such path: " + method + " " + shown(path) + " (known: " + known + ")");
}

void StoreServer::Impl::describe_refusal(const httplib::Request& req, httplib::Response& res) const {
  std::string message;
  switch (res.status) {
    case 413: {
      auto length = req.get_header_value("Content-Length");
      message = (length.empty() ? std::string("body is") : "body is " + length + " bytes,") + " over the maximum of " +
                std::to_string(options.max_body_bytes) + " bytes";
      break;
    }
    case 414:
      message = "request URI is too long";
      break;
    case 400:
      if (req.method == "CONNECT" || req.method == "TRACE") {
        res.status = 405;
        message = "method " + req.method + " is not supported";
      } else if ((req.method == "PUT" || req.method == "POST" || req.method == "PATCH") &&
                 !req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
        message = "body is empty or unframed: a " + req.method +
                  " needs a Content-Length (or chunked transfer encoding) and, for a chunk, at least one byte";
      } else {
        message = "malformed HTTP request (bad request line, header, or body framing)";
      }
      break;
    default:
      message = "HTTP status " + std::to_string(res.status);
  }
  reply_error(res, res.status, message);
}

void StoreServer::Impl::setup() {
  svr.new_task_queue = [n = options.threads] { return new httplib::ThreadPool(n); };
  svr.set_payload_max_length(options.max_body_bytes);
  svr.set_read_timeout(options.read_timeout);
  svr.set_write_timeout(options.write_timeout);

  const auto route_all = [this](const httplib::Request& req, httplib::Response& res) { route(req, res); };
  svr.Get(kAnyPath, route_all);  // GET and HEAD
  svr.Post(kAnyPath, route_all);
  svr.Put(kAnyPath, route_all);
  svr.Patch(kAnyPath, route_all);
  svr.Delete(kAnyPath, route_all);
  svr.Options(kAnyPath, route_all);

  // httplib's own refusals (body over the limit, malformed request, CONNECT/TRACE) come here with
  // an empty body; handler replies already carry theirs.
  svr.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        describe_refusal(req, res);
        return httplib::Server::HandlerResponse::Handled;
      }));
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    reply_exception(res, std::move(ep));
  });
}

StoreServer::StoreServer(FencedStore& store, StoreServerOptions options)
    : impl_(std::make_unique<Impl>(store, std::move(options))) {
  const auto& o = impl_->options;
  if (o.max_body_bytes == 0 || o.max_body_bytes > kMaxChunkBytes)
    throw std::invalid_argument("max body bytes " + std::to_string(o.max_body_bytes) + " is not 1.." +
                                std::to_string(kMaxChunkBytes));
  if (o.threads == 0) throw std::invalid_argument("server threads must be at least 1");
  if (o.port < 0 || o.port > 65535) throw std::invalid_argument("port " + std::to_string(o.port) + " is not 0..65535");
  impl_->setup();
  if (!o.listen) return;  // in process only: handle() answers, nothing binds
  if (o.port == 0) {
    impl_->bound_port = impl_->svr.bind_to_any_port(o.host);
  } else {
    impl_->bound_port = impl_->svr.bind_to_port(o.host, o.port) ? o.port : -1;
  }
  if (impl_->bound_port <= 0)
    throw std::runtime_error("fencecheck-store: cannot listen on " + o.host + ":" + std::to_string(o.port) +
                             " (address in use, or not an address of this machine?)");
  if (!impl_->svr.deepen_backlog(SOMAXCONN))
    spdlog::warn("fencecheck-store: could not raise the listen backlog on {}; bursts of connections may stall",
                 address());
}

StoreServer::~StoreServer() {
  stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->svr.close_listener();
}

int StoreServer::port() const { return impl_->bound_port; }

std::string StoreServer::address() const {
  const auto& host = impl_->options.host;
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port());
}

std::string StoreServer::base_url() const { return "http://" + address(); }

StoreHttpResponse StoreServer::handle(const StoreHttpRequest& request) {
  httplib::Request req;
  req.method = request.method;
  req.path = request.path;
  for (const auto& [name, value] : request.headers) req.headers.emplace(name, value);
  req.body = request.body;
  httplib::Response res;
  if (req.body.size() > impl_->options.max_body_bytes) {
    res.status = 413;  // what httplib answers before routing (set_payload_max_length)
    impl_->describe_refusal(req, res);
  } else {
    try {
      impl_->route(req, res);
    } catch (...) {
      reply_exception(res, std::current_exception());
    }
  }
  StoreHttpResponse out;
  out.status = res.status;
  out.body = std::move(res.body);
  for (const auto& [name, value] : res.headers) out.headers.emplace_back(name, value);
  return out;
}

bool StoreServer::run() {
  if (!impl_->options.listen) return false;
  impl_->in_run = true;
  bool ok = true;
  if (!impl_->stop_requested) ok = impl_->svr.listen_after_bind();
  impl_->in_run = false;
  return ok || impl_->stop_requested;
}

void StoreServer::start() {
  impl_->thread = std::thread([this] {
    if (!run()) spdlog::error("fencecheck-store: the HTTP accept loop failed on {}", address());
  });
}

void StoreServer::stop() noexcept {
  impl_->stop_requested = true;
  // httplib's stop() is a no-op until its accept loop has started: wait for that moment when a
  // run() is on its way in, so a stop() racing a run() is never lost.
  while (impl_->in_run && !impl_->svr.is_running()) std::this_thread::yield();
  impl_->svr.stop();
}

prometheus::Registry& StoreServer::registry() { return *impl_->registry; }

}  // namespace fencecheck
