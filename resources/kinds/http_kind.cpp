// Kind http, the harness's side (resource_kind.h): the user's HTTP service speaking the contract of
// docs/resource-http.md. Nothing is embedded: the service under test is the user's, and the kind
// never starts, stops or restarts it.
//
// Scenario fields (documentation order; every default filled in by parse()):
//   url              required  "http://host[:port][/base]"
//   method           PUT
//   path             /v1/keys/{key}/segments/{segment}/chunks/{chunk}
//   token_header     Fencing-Token
//   writer_header    Fencecheck-Client
//   rejected_status  409
//   high_water_header | high_water_field   at most one; default high_water_field: high_water;
//                                          "none": replies never say the mark
//   read_back        /v1/readback, or none
//   health           none (a TCP connect is the check), or a path answering 2xx
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <tuple>

#include <nlohmann/json.hpp>

#include "fencecheck/http/client.h"
#include "fencecheck/resources/http_resource.h"
#include "kinds.h"

namespace fencecheck::resources::detail {
namespace {

constexpr std::string_view kNoneWord = "none";
constexpr std::chrono::milliseconds kConnectTimeout{3000};
constexpr std::chrono::milliseconds kReadTimeout{30000};  // per receive: a large read-back streams

/// The normalized configuration (parse()'s output) as values.
struct Config {
  HttpContract contract;
  std::optional<std::string> read_back;  ///< nullopt: none
  std::optional<std::string> health;     ///< nullopt: a TCP connect is the health check
};

Config config_of(const nlohmann::json& j) {
  try {
    Config c;
    nlohmann::json endpoint = j;
    endpoint.erase("read_back");
    endpoint.erase("health");
    endpoint.erase("high_water_field");
    endpoint.erase("high_water_header");
    if (auto f = j.find("high_water_header"); f != j.end())
      endpoint["high_water"] = {{"header", f->get<std::string>()}};
    else if (auto g = j.find("high_water_field"); g != j.end() && g->get<std::string>() != kNoneWord)
      endpoint["high_water"] = {{"json", g->get<std::string>()}};
    else
      endpoint["high_water"] = nullptr;
    c.contract = http_contract_from_endpoint(endpoint);
    if (const std::string rb = j.at("read_back").get<std::string>(); rb != kNoneWord) c.read_back = rb;
    if (const std::string h = j.at("health").get<std::string>(); h != kNoneWord) c.health = h;
    return c;
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("kind http: a configuration parse() did not produce: ") + e.what());
  }
}

/// Connects to host:port (every address the name resolves to, in turn) within `timeout` and
/// closes at once. "" on success, else why not.
std::string tcp_connect_error(const std::string& host, int port, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0)
    return "cannot resolve " + host + ": " + ::gai_strerror(rc);
  std::string error = "no address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    int err = 0;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        int n;
        while ((n = ::poll(&p, 1, static_cast<int>(timeout.count()))) < 0 && errno == EINTR) {
        }
        if (n == 0) {
          err = ETIMEDOUT;
        } else {
          socklen_t len = sizeof err;
          if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
      }
    }
    ::close(fd);
    if (err == 0) {
      ::freeaddrinfo(res);
      return "";
    }
    error = err == ETIMEDOUT ? "no connection within " + std::to_string(timeout.count()) + " ms" : std::strerror(err);
  }
  ::freeaddrinfo(res);
  return error;
}

http::Reply get(const HttpContract& c, const std::string& path) {
  http::Request req;
  req.method = "GET";
  req.target = c.url.base_path + path;
  return http::exchange(http::Endpoint{c.url.host, c.url.port}, req, http::Timeouts{kConnectTimeout, kReadTimeout, kConnectTimeout});
}

bool iequals(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [&](char x, char y) { return lower(x) == lower(y); });
}

/// "HTTP 503: <the body's first 200 bytes>" (control bytes as spaces), or "HTTP 404" without a body.
std::string status_text(const http::Reply& res) {
  std::string out = "HTTP " + std::to_string(res.status);
  if (res.body.empty()) return out;
  out += ": ";
  for (char ch : res.body.substr(0, 200)) out += static_cast<unsigned char>(ch) < 0x20 ? ' ' : ch;
  return res.body.size() > 200 ? out + "..." : out;
}

/// A read-back, or what was wrong with it: the service could not be asked (no reply, a status
/// other than 2xx and 404/405), the path is not the service's (404/405), or the reply is not a
/// read-back of the contract's shape.
struct ReadBackResult {
  enum class Problem { kNone, kUnavailable, kNoSuchPath, kShape };
  Problem problem = Problem::kNone;
  std::string message;  ///< "GET <url>: ..." when problem != kNone
  ReadBack readback;
};

ReadBackResult fetch_readback(const HttpContract& c, const std::string& path) {
  using P = ReadBackResult::Problem;
  ReadBackResult out;
  const std::string url = c.url.str() + path;
  auto problem = [&](P p, const std::string& why) {
    out.problem = p;
    out.message = "GET " + url + ": " + why;
    return out;
  };
  const http::Reply res = get(c, path);
  if (!res.complete()) return problem(P::kUnavailable, res.error_text());
  if (res.status < 200 || res.status > 299) {
    const P p = res.status == 404 || res.status == 405 ? P::kNoSuchPath : P::kUnavailable;
    return problem(p, status_text(res));
  }
  const std::string not_object = "the reply is not a JSON object: " + status_text(res);
  try {
    // Element by element (no DOM of a long run's log); the members are checked on the document
    // the parser keeps (its arrays emptied) before the read-back's own checks, as before.
    out.readback = readback_from_json_text(res.body, [&](const nlohmann::json& body) {
      if (!body.is_object()) throw std::invalid_argument(not_object);
      // Every member is required: an empty array claims there were none, and the checkers take the
      // claim (Evidence says this kind has them). A member left out would read as "none".
      for (const char* member : {"chunks", "log", "rejections", "high_water"}) {
        if (!body.contains(member))
          throw std::invalid_argument(std::string("the read-back lacks \"") + member +
                                      "\" (docs/resource-http.md: every member is required; an empty one says "
                                      "there were none; a service that cannot tell sets read_back: none)");
      }
    });
  } catch (const ReadBackSyntaxError&) {
    return problem(P::kShape, not_object);
  } catch (const std::invalid_argument& e) {
    return problem(P::kShape, e.what());
  }
  ReadBack& rb = out.readback;
  for (std::size_t i = 1; i < rb.log.size(); ++i) {
    if (rb.log[i].seq <= rb.log[i - 1].seq)
      return problem(P::kShape, "the log is not in acceptance order: entry " + std::to_string(i) + " has seq " +
                                    std::to_string(rb.log[i].seq) + " after seq " + std::to_string(rb.log[i - 1].seq) +
                                    " (seq must increase strictly in the order accepted)");
  }
  auto slot = [](const StoredChunk& s) { return std::tie(s.key, s.segment, s.chunk); };
  std::stable_sort(rb.chunks.begin(), rb.chunks.end(), [&](const auto& a, const auto& b) { return slot(a) < slot(b); });
  for (std::size_t i = 1; i < rb.chunks.size(); ++i) {
    if (slot(rb.chunks[i]) == slot(rb.chunks[i - 1]))
      return problem(P::kShape, "two contents for one chunk slot: key '" + rb.chunks[i].key + "' segment " +
                                    std::to_string(rb.chunks[i].segment) + " chunk " + std::to_string(rb.chunks[i].chunk));
  }
  if (rb.resource.empty()) rb.resource = "http";
  out.problem = P::kNone;
  return out;
}

class Instance final : public ResourceInstance {
 public:
  explicit Instance(Config config) : c_(std::move(config)) {}

  nlohmann::json endpoint() const override { return to_endpoint(c_.contract); }

  std::string describe() const override {
    return "http " + c_.contract.url.str() + " (the user's service; read-back " + c_.read_back.value_or("none") +
           ", health " + (c_.health ? "GET " + *c_.health : "by TCP connect") + ")";
  }

  bool healthy() override { return health_problem().empty(); }

  ReadBack readback() override {
    if (!c_.read_back) {
      ReadBack rb;
      rb.resource = "http";
      rb.fencing = "unknown (no read-back)";
      return rb;
    }
    ReadBackResult r = fetch_readback(c_.contract, *c_.read_back);
    if (r.problem != ReadBackResult::Problem::kNone) throw std::runtime_error(r.message);
    return std::move(r.readback);
  }

  void stop() override {}

  /// "" when healthy, else why not; `status` gets the health path's HTTP status (0 without one).
  std::string health_problem(int* status = nullptr) const {
    if (status) *status = 0;
    const auto& u = c_.contract.url;
    if (!c_.health) {
      std::string err = tcp_connect_error(u.host, u.port, kConnectTimeout);
      return err.empty() ? "" : "connect to " + u.host + ":" + std::to_string(u.port) + ": " + err;
    }
    const http::Reply res = get(c_.contract, *c_.health);
    const std::string what = "GET " + u.str() + *c_.health + ": ";
    if (!res.complete()) return what + res.error_text();
    if (status) *status = res.status;
    if (res.status >= 200 && res.status <= 299) return "";
    return what + status_text(res);
  }

  const Config& config() const { return c_; }

 private:
  Config c_;
};

class Kind final : public ResourceKind {
 public:
  std::string_view name() const override { return "http"; }

  std::vector<std::string_view> fields() const override {
    return {"url",    "method", "path", "token_header", "writer_header", "rejected_status", "high_water_header",
            "high_water_field", "read_back", "health"};
  }

  nlohmann::json parse(const ResourceFields& f) const override {
    if (!f.has("url"))
      f.fail("", "kind http needs url, the service's address (http://host:port): the service under test is yours, "
                 "and fencecheck never starts one");
    auto text = [&](std::string_view name, std::string_view fallback) {
      return f.has(name) ? f.string(name) : std::string(fallback);
    };
    nlohmann::json out;
    try {
      out["url"] = parse_http_url(f.string("url")).str();
      const std::string method = text("method", kHttpDefaultMethod);
      check_method(method);
      out["method"] = method;
      const std::string path = text("path", kHttpDefaultPath);
      check_write_path(path);
      out["path"] = path;
      const std::string token_header = text("token_header", kHttpDefaultTokenHeader);
      check_request_header("token_header", token_header);
      out["token_header"] = token_header;
      const std::string writer_header = text("writer_header", kHttpDefaultWriterHeader);
      check_request_header("writer_header", writer_header);
      if (iequals(token_header, writer_header))
        f.fail("writer_header", "is the token's header too ('" + token_header +
                                    "'): the token and the writer id need a header each");
      out["writer_header"] = writer_header;
      std::int64_t rejected = kHttpDefaultRejectedStatus;
      if (f.has("rejected_status")) {
        rejected = f.integer("rejected_status", 0, 999);
        check_rejected_status(rejected);
      }
      out["rejected_status"] = rejected;
      if (f.has("high_water_header") && f.has("high_water_field"))
        f.fail("high_water_field", "and high_water_header are exclusive: the mark comes in a header or in the JSON "
                                   "body, not both (none: replies never say it)");
      if (f.has("high_water_header")) {
        const std::string h = f.string("high_water_header");
        if (h == kNoneWord) {
          out["high_water_field"] = kNoneWord;
        } else {
          check_response_header("high_water_header", h);
          out["high_water_header"] = h;
        }
      } else {
        const std::string field = text("high_water_field", kHttpDefaultHighWaterField);
        if (field.empty()) f.fail("high_water_field", "is empty: name a top-level JSON field of the reply, or none");
        out["high_water_field"] = field;
      }
      const std::string read_back = text("read_back", kHttpDefaultReadBack);
      if (read_back != kNoneWord) check_plain_path("read_back", read_back);
      out["read_back"] = read_back;
      const std::string health = text("health", kNoneWord);
      if (health != kNoneWord) check_plain_path("health", health);
      out["health"] = health;
    } catch (const HttpContractError& e) {
      f.fail(e.field(), e.what(), e.offset());
    }
    return out;
  }

  bool embedded(const nlohmann::json&) const override { return false; }

  Evidence evidence(const nlohmann::json& config) const override {
    const bool rb = config_of(config).read_back.has_value();
    Evidence e;
    e.chunks = rb;
    e.accept_log = rb;
    e.rejections = rb;
    e.high_water = rb;
    e.effects = false;  // the contract has no side effects or counters
    return e;
  }

  std::string design(const nlohmann::json& config) const override {
    return "service's own rule, rejected = HTTP " + std::to_string(config_of(config).contract.rejected_status);
  }

  std::unique_ptr<ResourceInstance> open(const nlohmann::json& config, const ResourceRunContext&) const override {
    auto instance = std::make_unique<Instance>(config_of(config));
    const Config& c = instance->config();
    const std::string url = c.contract.url.str();
    // Reachable at all: a refused or silent port is the environment (exit 3), named.
    const auto& u = c.contract.url;
    if (std::string err = tcp_connect_error(u.host, u.port, kConnectTimeout); !err.empty())
      throw ResourceUnavailable("the http service at " + url + " does not answer: connect to " + u.host + ":" +
                                std::to_string(u.port) + ": " + err +
                                " (kind http never starts the service: start it first)");
    if (c.health) {
      int status = 0;
      if (std::string why = instance->health_problem(&status); !why.empty()) {
        if (status == 404 || status == 405)
          throw ResourceConfigError("health", why + ": the service has no such path; set health to its health path, "
                                                    "or none (a TCP connect is then the check)");
        throw ResourceUnavailable("the http service at " + url + " is not healthy: " + why);
      }
    }
    // A wrong read-back path is found now, before any worker writes, not after the run.
    if (c.read_back) {
      ReadBackResult r = fetch_readback(c.contract, *c.read_back);
      switch (r.problem) {
        case ReadBackResult::Problem::kNone: break;
        case ReadBackResult::Problem::kUnavailable:
          throw ResourceUnavailable("the http service at " + url + " does not answer its read-back: " + r.message);
        case ReadBackResult::Problem::kNoSuchPath:
          throw ResourceConfigError("read_back", r.message + ": the service has no such path; set read_back to its "
                                                             "read-back path, or none");
        case ReadBackResult::Problem::kShape:
          throw ResourceConfigError("read_back", r.message);
      }
    }
    return instance;
  }
};

}  // namespace

const ResourceKind& http_kind() {
  static const Kind kind;
  return kind;
}

}  // namespace fencecheck::resources::detail
