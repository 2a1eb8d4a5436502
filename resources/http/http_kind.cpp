// Kind http, the harness's side (resource_kind.h): the user's HTTP service speaking the contract of
// docs/resource-http.md. The service under test is the user's: either already listening at `url`
// (the kind never starts, stops or restarts it), or a program the scenario names in `start`, which
// the kind starts for the run, waits for until it answers, and stops at the end.
//
// Scenario fields (documentation order; every default filled in by parse()):
//   url              required without start  "http://host[:port][/base]"; with start it defaults to
//                    "http://{host}:{port}" and may hold those placeholders
//   start            [argv...]: the service's program and arguments; the program is found as a
//                    command worker's is (a path relative to start_cwd, else PATH). Placeholders in
//                    its arguments, start_env's values and url: {host} (127.0.0.1, or the network
//                    lab's resource address), {port} (a free port, or the lab's; url's own port
//                    when url names one), {run_dir}, {bin_dir} (where fencecheck-store is)
//   start_env        {NAME: value}: added to the harness's environment, after
//                    FENCECHECK_HTTP_HOST, FENCECHECK_HTTP_PORT and FENCECHECK_RUN_DIR
//   start_cwd        its working directory, relative to the scenario file (default: the file's)
//   start_timeout    how long it may take to answer (health, else a TCP connect); default 10s
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
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

#include "fencecheck/process/child_process.h"
#include "fencecheck/process/server_support.h"
#include "fencecheck/http/client.h"
#include "fencecheck/resources/http_resource.h"
#include "../kinds.h"

namespace fencecheck::resources::detail {
namespace {

constexpr std::string_view kNoneWord = "none";
constexpr std::string_view kStartedUrl = "http://{host}:{port}";
constexpr std::chrono::milliseconds kDefaultStartTimeout{10000};
constexpr std::chrono::milliseconds kStartPoll{50};

/// `text` with each placeholder of `values` ({"{port}", "8080"}...) replaced, every occurrence.
std::string substitute(std::string text, const std::vector<std::pair<std::string, std::string>>& values) {
  for (const auto& [from, to] : values)
    for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to);
  return text;
}

/// The url with placeholder values that make any template parse (parse()'s and evidence()'s
/// checks; open() substitutes the real ones).
std::string url_for_checks(const std::string& url) {
  return substitute(url, {{"{host}", "127.0.0.1"}, {"{port}", "1"}});
}
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
    endpoint["url"] = url_for_checks(j.at("url").get<std::string>());  // open() substitutes first
    for (const char* f : {"start", "start_env", "start_cwd", "start_timeout"}) endpoint.erase(f);
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

/// The read-back path's query for a scoped read-back (docs/resource-http.md, "Only the run's
/// keys"): "?keys=" and the keys, each percent-encoded (RFC 3986 2.3: every byte but the
/// unreserved ones, so a ',' in a key is %2C), joined by ','; "" when not scoped. A service may
/// answer with only those keys' rows; one that ignores the query answers with every row, and the
/// harness drops the others (drop_foreign_rows) either way.
std::string keys_query(const std::optional<std::set<std::string>>& keys) {
  if (!keys) return {};
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string q = "?keys=";
  bool first = true;
  for (const std::string& k : *keys) {
    if (!first) q += ',';
    first = false;
    for (const unsigned char c : k) {
      if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
          c == '_' || c == '~') {
        q += static_cast<char>(c);
      } else {
        q += '%';
        q += kHex[c >> 4];
        q += kHex[c & 15];
      }
    }
  }
  return q;
}

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

/// A service the scenario's `start` runs: its process group (held in the run's ledger), its
/// stdout copied to a log on the reader thread, stopped by stop().
class StartedService {
 public:
  StartedService(process::ChildSpec spec, const std::filesystem::path& stdout_log, const ResourceRunContext& ctx)
      : out_(stdout_log, std::ios::trunc), stderr_log_(spec.stderr_log) {
    argv0_ = spec.exe.string();
    proc_ = std::make_unique<process::ChildProcess>(std::move(spec), [this](std::string_view line, std::int64_t, bool eof) {
      if (!eof) out_ << line << '\n' << std::flush;
    });
    if (ctx.hold_process_group) release_ = ctx.hold_process_group(proc_->pid(), "http service");
  }
  ~StartedService() { stop(); }
  StartedService(const StartedService&) = delete;
  StartedService& operator=(const StartedService&) = delete;

  [[nodiscard]] pid_t pid() const { return proc_ ? proc_->pid() : 0; }
  [[nodiscard]] bool running() { return proc_ && proc_->running(); }
  /// Whether it has exited within `timeout` (a service just killed may not be reaped yet).
  [[nodiscard]] bool exits_within(std::chrono::milliseconds timeout) { return !proc_ || proc_->wait_for(timeout).has_value(); }
  [[nodiscard]] std::optional<int> exit_code() const { return proc_ ? proc_->exit_code() : std::nullopt; }
  [[nodiscard]] const std::string& program() const { return argv0_; }
  [[nodiscard]] const std::filesystem::path& stderr_log() const { return stderr_log_; }

  /// SIGTERM to its group, SIGKILL after 3 s (ChildProcess::terminate), then whatever is left of
  /// the group is ended and the ledger told. Idempotent.
  void stop() {
    if (proc_) {
      proc_->terminate();
      proc_.reset();  // joins the reader before out_ goes
    }
    if (release_) {
      release_();
      release_ = nullptr;
    }
  }

 private:
  std::ofstream out_;
  std::filesystem::path stderr_log_;
  std::string argv0_;
  std::unique_ptr<process::ChildProcess> proc_;
  std::function<void()> release_;
};

/// The last lines of a log (at most 10, 2 KiB: process::tail_text), on one line ('|' between
/// them: the results table's reasons are lines), for why a started service did not answer.
std::string log_tail(const std::filesystem::path& log) {
  std::string text = process::tail_text(process::read_text(log), 10, 2048);
  std::replace(text.begin(), text.end(), '\n', '|');
  return text;
}
class Instance final : public ResourceInstance {
 public:
  explicit Instance(Config config, std::unique_ptr<StartedService> started = nullptr)
      : c_(std::move(config)), started_(std::move(started)) {}
  ~Instance() override { stop(); }

  nlohmann::json endpoint() const override { return to_endpoint(c_.contract); }

  std::string describe() const override {
    const std::string whose = started_ ? "started by the scenario: " + started_->program() + ", pid " +
                                             std::to_string(started_->pid())
                                       : std::string("the user's service");
    return "http " + c_.contract.url.str() + " (" + whose + "; read-back " + c_.read_back.value_or("none") +
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
    ReadBackResult r = fetch_readback(c_.contract, *c_.read_back + keys_query(read_scope_));
    // A service that matches its path with the query string attached (Python's
    // BaseHTTPRequestHandler.path holds it) answers 404: ask again without it; the harness drops
    // the other keys' entries itself.
    if (read_scope_ && r.problem == ReadBackResult::Problem::kNoSuchPath) r = fetch_readback(c_.contract, *c_.read_back);
    if (r.problem != ReadBackResult::Problem::kNone) {
      // A service the kind started that died during the run: say so, with its exit and stderr
      // (given a moment to be reaped: its connection may close before its exit is seen).
      if (started_) (void)started_->exits_within(kStartPoll * 10);
      if (std::string died = exit_diagnosis(); !died.empty())
        throw std::runtime_error(r.message + "; the http service that resource.start ran is gone: " + died);
      throw std::runtime_error(r.message);
    }
    return std::move(r.readback);
  }

  /// Stops the service `start` ran (nothing for a service the kind did not start).
  void stop() override {
    if (started_) started_->stop();
  }

  /// Why the started service is not running ("<program> exited with code 3; its stderr ends:
  /// ..."), or "" while it runs (or when the kind started none).
  std::string exit_diagnosis(const std::string& when = "") {
    if (!started_ || started_->running()) return "";
    const auto code = started_->exit_code();
    std::string why = started_->program() + " exited" + (code ? " with code " + std::to_string(*code) : "") + when;
    if (std::string tail = log_tail(started_->stderr_log()); !tail.empty()) why += "; its stderr ends: " + tail;
    return why + " (" + started_->stderr_log().string() + ")";
  }

  /// Waits until the started service answers (health_problem() empty), it exits, or `timeout`
  /// passes; "" when it answers, else why not. Throws ResourceConfigError at `health` when the
  /// service answers the health path with 404 or 405: the path is wrong, waiting will not help.
  std::string wait_until_answers(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string last;
    while (true) {
      int status = 0;
      last = health_problem(&status);
      if (last.empty()) return "";
      if (status == 404 || status == 405)
        throw ResourceConfigError("health", last + ": the service has no such path; set health to its health path, "
                                                   "or none (a TCP connect is then the check)");
      if (std::string died = exit_diagnosis(" before it answered"); !died.empty()) return died;
      if (std::chrono::steady_clock::now() >= deadline)
        return started_->program() + " did not answer within " + std::to_string(timeout.count()) + " ms: " + last +
               " (its output: " + started_->stderr_log().string() + ")";
      std::this_thread::sleep_for(kStartPoll);
    }
  }

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
  std::unique_ptr<StartedService> started_;
};

class Kind final : public ResourceKind {
 public:
  std::string_view name() const override { return "http"; }

  std::vector<std::string_view> fields() const override {
    return {"url",      "method",    "path",      "token_header",  "writer_header", "rejected_status",
            "high_water_header", "high_water_field", "read_back", "health", "start", "start_env", "start_cwd",
            "start_timeout"};
  }

  nlohmann::json parse(const KindFields& f) const override {
    const bool start = f.has("start");
    if (!f.has("url") && !start)
      f.fail("", "kind http needs url, the service's address (http://host:port), or start, the program that runs "
                 "the service for the run ([argv...], url then defaults to http://{host}:{port})");
    if (!start)
      for (const char* field : {"start_env", "start_cwd", "start_timeout"})
        if (f.has(field)) f.fail(field, std::string(field) + " is for a service the kind starts: it needs start: [argv...]");
    auto text = [&](std::string_view name, std::string_view fallback) {
      return f.has(name) ? f.string(name) : std::string(fallback);
    };
    nlohmann::json out;
    try {
      if (start) {
        const std::vector<std::string> argv = f.string_list("start");
        for (std::size_t i = 0; i < argv.size(); ++i)
          if (argv[i].find('\0') != std::string::npos) f.fail("start[" + std::to_string(i) + "]", "an argument cannot hold a NUL byte");
        if (argv.front().empty()) f.fail("start[0]", "expected the service's program (a name on PATH or a path), got an empty string");
        out["start"] = argv;
        std::filesystem::path cwd = f.base_dir();
        if (f.has("start_cwd")) {
          const std::string d = f.string("start_cwd");
          if (d.empty()) f.fail("start_cwd", "expected a directory, got an empty string");
          cwd = (cwd / d).lexically_normal();
        }
        out["start_cwd"] = cwd.string();
        nlohmann::json env = nlohmann::json::object();
        if (f.has("start_env"))
          for (const auto& [k, v] : f.env_map("start_env")) env[k] = v;
        for (const auto& [k, v] : env.items())
          if (v.get<std::string>().find('\0') != std::string::npos)
            f.fail("start_env", "start_env." + k + ": a value cannot hold a NUL byte");
        out["start_env"] = env;
        // A placeholder the kind does not know is a typo ({prot}), never passed on as it is.
        auto unknown_placeholder = [](const std::string& value) -> std::string {
          for (std::size_t at = value.find('{'); at != std::string::npos; at = value.find('{', at + 1)) {
            const std::size_t end = value.find('}', at);
            if (end == std::string::npos) break;
            const std::string name = value.substr(at, end - at + 1);
            const bool word = end > at + 1 && std::all_of(value.begin() + static_cast<std::ptrdiff_t>(at) + 1,
                                                          value.begin() + static_cast<std::ptrdiff_t>(end),
                                                          [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
            if (word && name != "{host}" && name != "{port}" && name != "{run_dir}" && name != "{bin_dir}") return name;
          }
          return "";
        };
        const std::string known = "; expected {host}, {port}, {run_dir} or {bin_dir}";
        for (std::size_t i = 0; i < argv.size(); ++i)
          if (std::string p = unknown_placeholder(argv[i]); !p.empty())
            f.fail("start[" + std::to_string(i) + "]", "unknown placeholder " + p + known);
        for (const auto& [k, v] : env.items())
          if (std::string p = unknown_placeholder(v.get<std::string>()); !p.empty())
            f.fail("start_env", "start_env." + k + ": unknown placeholder " + p + known);
        if (f.has("url"))
          if (std::string p = unknown_placeholder(f.string("url")); !p.empty()) f.fail("url", "unknown placeholder " + p + known);
        auto timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(kDefaultStartTimeout);
        if (f.has("start_timeout")) {
          timeout = f.duration("start_timeout");
          if (timeout < std::chrono::milliseconds(1) || timeout % std::chrono::milliseconds(1) != std::chrono::nanoseconds(0))
            f.fail("start_timeout", "expected a positive whole number of milliseconds, e.g. 10s, got \"" +
                                        f.string("start_timeout") + "\"");
        }
        out["start_timeout"] = std::to_string(timeout.count() / 1'000'000) + "ms";
      }
      const std::string url = start && !f.has("url") ? std::string(kStartedUrl) : f.string("url");
      if (!start && (url.find("{host}") != std::string::npos || url.find("{port}") != std::string::npos))
        f.fail("url", "holds {host} or {port}, which only a service the kind starts has (start: [argv...])");
      const std::string normal = parse_http_url(url_for_checks(url)).str();
      out["url"] = url == url_for_checks(url) ? normal : url;  // a template stays as written
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

  bool embedded(const nlohmann::json& config) const override { return config.contains("start"); }

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

  std::vector<std::pair<std::string, std::string>> worker_env(const nlohmann::json& endpoint) const override {
    return {{"FENCECHECK_RESOURCE_URL", endpoint.value("url", "")}};
  }

  std::optional<NetAddress> endpoint_address(const nlohmann::json& endpoint, std::string* why) const override {
    try {
      const HttpUrl u = parse_http_url(endpoint.value("url", ""));
      return NetAddress{u.host, static_cast<std::uint16_t>(u.port)};
    } catch (const std::exception& err) {
      *why = err.what();
      return std::nullopt;
    }
  }
  nlohmann::json endpoint_at(const nlohmann::json& endpoint, const NetAddress& at) const override {
    HttpUrl u = parse_http_url(endpoint.value("url", ""));
    u.host = at.host;
    u.port = at.port;
    nlohmann::json e = endpoint;
    e["url"] = u.str();
    return e;
  }
  std::optional<std::pair<std::string, std::string>> relay_problem(const nlohmann::json& config) const override {
    return std::nullopt;  // the user's service at url (parse() checked it) is relayed; a started one runs in the lab
  }

  std::unique_ptr<ResourceWriter> make_writer(const nlohmann::json& endpoint, std::chrono::milliseconds timeout) const override {
    return fencecheck::detail::make_http_writer(endpoint, timeout);
  }

  std::unique_ptr<ResourceInstance> open(const nlohmann::json& config, const ResourceRunContext& ctx) const override {
    std::unique_ptr<Instance> instance;
    if (config.contains("start")) {
      instance = start_service(config, ctx);
    } else {
      instance = std::make_unique<Instance>(config_of(config));
      // Reachable at all: a refused or silent port is the environment (exit 3), named.
      const auto& u = instance->config().contract.url;
      if (std::string err = tcp_connect_error(u.host, u.port, kConnectTimeout); !err.empty())
        throw ResourceUnavailable("the http service at " + u.str() + " does not answer: connect to " + u.host + ":" +
                                  std::to_string(u.port) + ": " + err +
                                  " (kind http starts no service unless the scenario says how: start it first, or "
                                  "give resource.start: [argv...])");
    }
    const Config& c = instance->config();
    const std::string url = c.contract.url.str();
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

 private:
  /// Starts `start` (placeholders substituted), holds its group in the ledger, and waits until it
  /// answers. Throws ResourceConfigError at start when the program cannot be found or run, and
  /// ResourceUnavailable when it exits or stays silent past start_timeout (stopped by then).
  static std::unique_ptr<Instance> start_service(const nlohmann::json& config, const ResourceRunContext& ctx) {
    const std::string url_template = config.at("url").get<std::string>();
    // The port: the url's own when it names one; else the network lab's; else a free one.
    int port = ctx.port;
    if (url_template.find("{port}") == std::string::npos) {
      port = parse_http_url(url_for_checks(url_template)).port;
    } else if (port == 0) {
      try {
        port = process::free_tcp_port(ctx.host);
      } catch (const std::runtime_error& e) {
        throw ResourceUnavailable("no free TCP port on " + ctx.host + " for the http service resource.start runs: " +
                                  e.what());
      }
    }
    const std::vector<std::pair<std::string, std::string>> values = {{"{host}", ctx.host},
                                                                     {"{port}", std::to_string(port)},
                                                                     {"{run_dir}", ctx.run_dir.string()},
                                                                     {"{bin_dir}", ctx.bin_dir.string()}};
    nlohmann::json resolved = config;
    resolved["url"] = substitute(url_template, values);
    const std::filesystem::path cwd = config.at("start_cwd").get<std::string>();
    std::vector<std::string> argv;
    for (const auto& a : config.at("start")) argv.push_back(substitute(a.get<std::string>(), values));
    std::error_code ec;
    if (!std::filesystem::is_directory(cwd, ec))
      throw ResourceConfigError("start_cwd", "the http service's working directory " + cwd.string() + " is not a directory");
    const auto program = process::find_program(argv.front(), cwd);
    if (!program)
      throw ResourceConfigError("start", "the http service's program " + argv.front() + " " +
                                             process::program_not_found(argv.front(), cwd));
    process::ChildSpec spec;
    spec.name = "http service";
    spec.exe = *program;
    spec.args.assign(argv.begin() + 1, argv.end());
    spec.cwd = cwd;
    spec.own_process_group = true;  // a shell script's children end with it
    spec.stderr_log = ctx.log_path ? ctx.log_path("http-service") : std::filesystem::path("/dev/null");
    const std::filesystem::path stdout_log =
        ctx.log_path ? ctx.log_path("http-service.stdout") : std::filesystem::path("/dev/null");
    spec.env = {{"FENCECHECK_HTTP_HOST", ctx.host},
                {"FENCECHECK_HTTP_PORT", std::to_string(port)},
                {"FENCECHECK_RUN_DIR", ctx.run_dir.string()}};
    for (const auto& [k, v] : config.at("start_env").items()) spec.env.emplace_back(k, substitute(v.get<std::string>(), values));
    std::unique_ptr<StartedService> service;
    try {
      service = std::make_unique<StartedService>(std::move(spec), stdout_log, ctx);
    } catch (const std::runtime_error& e) {
      throw ResourceConfigError("start", std::string("the http service could not be started: ") + e.what());
    }
    auto instance = std::make_unique<Instance>(config_of(resolved), std::move(service));
    const std::chrono::milliseconds timeout{std::stoll(config.at("start_timeout").get<std::string>())};
    std::string why;
    try {
      why = instance->wait_until_answers(timeout);
    } catch (...) {
      instance->stop();
      throw;
    }
    if (!why.empty()) {
      instance->stop();
      throw ResourceUnavailable("the http service that resource.start runs did not come up: " + why);
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
