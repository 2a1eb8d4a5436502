// Unit: the http ResourceKind (harness side). parse() through a fake KindFields: every default,
// the round trip, and each refusal's field, words and offset; evidence(); open(), healthy() and
// readback() against an in-process cpp-httplib service.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "fencecheck/resources/http_resource.h"
#include "fencecheck/resources/resource_kind.h"
#include "support.h"

namespace fencecheck {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using resources::ResourceConfigError;
using resources::ResourceUnavailable;
using testing::FakeFields;
using testing::FieldError;

const resources::ResourceKind& kind() {
  const auto* k = resources::find_resource_kind("http");
  if (k == nullptr) throw std::logic_error("kind http is not registered");
  return *k;
}

/// The refusal parse() throws for `fields` (FieldError), or a failed test.
FieldError refusal(const FakeFields& fields) {
  try {
    (void)kind().parse(fields);
  } catch (const FieldError& e) {
    return e;
  }
  ADD_FAILURE() << "parse() accepted it";
  return FieldError("", "", std::nullopt);
}

TEST(HttpKind, RegisteredWithItsFieldsAndEmbeddedOnlyWhenItStartsTheService) {
  EXPECT_EQ(kind().name(), "http");
  EXPECT_EQ(kind().fields(), (std::vector<std::string_view>{"url", "method", "path", "token_header", "writer_header",
                                                            "rejected_status", "high_water_header", "high_water_field",
                                                            "read_back", "health", "start", "start_env", "start_cwd",
                                                            "start_timeout"}));
  EXPECT_FALSE(kind().embedded(kind().parse(FakeFields{{"url", std::string("http://127.0.0.1:1")}})));
  EXPECT_TRUE(kind().embedded(kind().parse(FakeFields{{"start", json::array({"./svc"})}})));
}

TEST(HttpKind, StartFillsItsDefaultsAndKeepsTheUrlTemplate) {
  FakeFields f{{"start", json::array({"./svc", "--port", "{port}"})}};
  f.set_base_dir("/srv/scenarios");
  const json got = kind().parse(f);
  EXPECT_EQ(got.at("url"), "http://{host}:{port}");
  EXPECT_EQ(got.at("start"), json::array({"./svc", "--port", "{port}"}));
  EXPECT_EQ(got.at("start_cwd"), "/srv/scenarios");  // relative paths: the scenario file's directory
  EXPECT_EQ(got.at("start_env"), json::object());
  EXPECT_EQ(got.at("start_timeout"), "10000ms");
  EXPECT_EQ(got.at("read_back"), "/v1/readback");

  FakeFields g{{"start", json::array({"svc"})},
               {"start_cwd", "../services"},
               {"start_env", json{{"PORT", "{port}"}, {"MODE", "fenced"}}},
               {"start_timeout", "2s"},
               {"url", "http://{host}:{port}/api"}};
  g.set_base_dir("/srv/scenarios");
  const json more = kind().parse(g);
  EXPECT_EQ(more.at("start_cwd"), "/srv/services");
  EXPECT_EQ(more.at("start_env"), (json{{"MODE", "fenced"}, {"PORT", "{port}"}}));
  EXPECT_EQ(more.at("start_timeout"), "2000ms");
  EXPECT_EQ(more.at("url"), "http://{host}:{port}/api");
  // Its own output parses to itself wherever it is read from (start_cwd is absolute now).
  EXPECT_EQ(kind().parse(FakeFields::from_json(more)), more);
  // A fixed url with start: the service listens where the url says; the url is normalized.
  EXPECT_EQ(kind().parse(FakeFields{{"start", json::array({"svc"})}, {"url", "HTTP://127.0.0.1:8080/"}}).at("url"),
            "http://127.0.0.1:8080");
}

TEST(HttpKind, StartsFieldsAreRefusedWhereTheyMeanNothing) {
  const auto says = [](const FakeFields& f, const std::string& field, const std::string& words) {
    const FieldError e = refusal(f);
    EXPECT_EQ(e.field, field);
    EXPECT_NE(e.message.find(words), std::string::npos) << e.message;
  };
  says(FakeFields{{"url", "http://svc:1"}, {"start_env", json{{"A", "b"}}}}, "start_env",
       "start_env is for a service the kind starts: it needs start: [argv...]");
  says(FakeFields{{"url", "http://svc:1"}, {"start_timeout", "1s"}}, "start_timeout", "it needs start");
  says(FakeFields{{"url", "http://svc:{port}"}}, "url",
       "holds {host} or {port}, which only a service the kind starts has (start: [argv...])");
  says(FakeFields{{"start", json::array({""})}}, "start[0]", "expected the service's program");
  says(FakeFields{{"start", json::array({"svc"})}, {"start_cwd", ""}}, "start_cwd", "expected a directory");
  says(FakeFields{{"start", json::array({"svc"})}, {"start_timeout", "1500us"}}, "start_timeout",
       "expected a positive whole number of milliseconds");
  says(FakeFields{{"start", json::array({"svc"})}, {"url", "https://{host}:{port}"}}, "url", "uses https");
  // A placeholder the kind does not know is a typo, never passed on as written.
  says(FakeFields{{"start", json::array({"svc", "--port", "{prot}"})}}, "start[2]",
       "unknown placeholder {prot}; expected {host}, {port}, {run_dir} or {bin_dir}");
  says(FakeFields{{"start", json::array({"svc"})}, {"start_env", json{{"P", "{nope}"}}}}, "start_env",
       "start_env.P: unknown placeholder {nope}");
  says(FakeFields{{"start", json::array({"svc"})}, {"url", "http://{host}:{prt}"}}, "url", "unknown placeholder {prt}");
  says(FakeFields{{"start", json::array({"svc"})}, {"start_env", json{{"B", std::string("a\0b", 3)}}}}, "start_env",
       "start_env.B: a value cannot hold a NUL byte");
  // Braces that are no placeholder (a JSON argument) pass.
  EXPECT_NO_THROW((void)kind().parse(FakeFields{{"start", json::array({"svc", "{\"a\": 1}"})}}));
}

TEST(HttpKind, ParseFillsEveryDefaultFromTheStoresContract) {
  const json got = kind().parse(FakeFields{{"url", std::string("HTTP://localhost")}});
  EXPECT_EQ(got, (json{{"url", "http://localhost:80"},
                       {"method", "PUT"},
                       {"path", "/v1/keys/{key}/segments/{segment}/chunks/{chunk}"},
                       {"token_header", "Fencing-Token"},
                       {"writer_header", "Fencecheck-Client"},
                       {"rejected_status", 409},
                       {"high_water_field", "high_water"},
                       {"read_back", "/v1/readback"},
                       {"health", "none"}}));
}

TEST(HttpKind, ParseOfItsOwnOutputIsTheSame) {
  const std::vector<FakeFields> inputs{
      FakeFields{{"url", std::string("http://127.0.0.1:8080/")}},
      FakeFields{{"url", std::string("http://[::1]:9000/api/")},
                 {"method", std::string("POST")},
                 {"path", std::string("/w/{key}?s={segment}&c={chunk}")},
                 {"token_header", std::string("X-Fence")},
                 {"writer_header", std::string("X-Writer")},
                 {"rejected_status", std::int64_t{412}},
                 {"high_water_header", std::string("X-High-Water")},
                 {"read_back", std::string("none")},
                 {"health", std::string("/health")}},
      FakeFields{{"url", std::string("http://svc:1")}, {"high_water_field", std::string("none")}},
      FakeFields{{"url", std::string("http://svc:1")}, {"high_water_header", std::string("none")}},
  };
  for (const auto& in : inputs) {
    const json once = kind().parse(in);
    EXPECT_EQ(kind().parse(FakeFields::from_json(once)), once) << once.dump();
  }
  const json v6 = kind().parse(inputs[1]);
  EXPECT_EQ(v6.at("url"), "http://[::1]:9000/api");
  EXPECT_EQ(v6.at("high_water_header"), "X-High-Water");
  EXPECT_FALSE(v6.contains("high_water_field"));
  EXPECT_EQ(kind().parse(inputs[3]).at("high_water_field"), "none") << "no mark: one spelling";
}

TEST(HttpKind, ParseRefusesEachFieldPreciselyAtTheOffendingCharacter) {
  struct Case {
    FakeFields fields;
    std::string field;
    std::string message;
    std::optional<std::size_t> offset;
  };
  const std::string url = "http://127.0.0.1:8080";
  auto with = [&](const std::string& name, FakeFields::Value v) {
    return FakeFields{{"url", url}, {name, std::move(v)}};
  };
  const std::vector<Case> cases{
      {FakeFields{}, "",
       "kind http needs url, the service's address (http://host:port), or start, the program that runs the service "
       "for the run ([argv...], url then defaults to http://{host}:{port})",
       std::nullopt},
      {FakeFields{{"url", std::string("https://svc:443")}}, "url",
       "uses https, which fencecheck does not speak: it sends plain HTTP/1.1 (give the service a plain-HTTP listener "
       "on loopback or in the lab)",
       0},
      {FakeFields{{"url", std::string("http://me:secret@svc:80")}}, "url",
       "has user information ('...@'): a password never goes in a scenario; the service must accept the writes without "
       "credentials in the URL",
       7},
      {FakeFields{{"url", std::string("http://svc:80x/")}}, "url", "has port '80x': expected 1..65535", 11},
      {FakeFields{{"url", std::string("http://svc:8080/a b")}}, "url",
       "base path has a space, which a request target cannot carry unencoded; percent-encode it (RFC 3986 §2.1)", 17},
      {FakeFields{{"url", std::string("http://svc:8080/v1?x=1")}}, "url",
       "base path has a query ('?'); put the base path alone in url", 18},
      {FakeFields{{"url", std::string("svc:8080")}}, "url", "is not a URL: expected http://host:port", 0},
      {with("method", std::string("GET")), "method",
       "GET cannot carry the chunk: its content has no defined meaning or is not allowed (RFC 9110 §9.3); the write "
       "is PUT, POST, PATCH or the service's own method",
       std::nullopt},
      {with("method", std::string("put")), "method", "'put' is not PUT: methods are case-sensitive (RFC 9110 §9.1)", 0},
      {with("method", std::string("PU T")), "method",
       "has a space, which a method cannot have (a token, RFC 9110 §9.1)", 2},
      {with("path", std::string("/v1/{key}/{sgment}/{chunk}")), "path",
       "unknown placeholder {sgment}: expected {key}, {segment} or {chunk}", 10},
      {with("path", std::string("/v1/{key}/{segment}/{chunk")), "path", "has a '{' without its '}'", 20},
      {with("path", std::string("/v1/{key}/{segment}")), "path",
       "has no {chunk}: every chunk slot (key, segment, chunk) needs a request target of its own", std::nullopt},
      {with("path", std::string("v1/{key}/{segment}/{chunk}")), "path",
       "must start with '/' (a path below the service's url)", 0},
      {with("path", std::string("/v1/{key}/{segment}/{chunk}#top")), "path",
       "has a fragment ('#'), which is never sent to the server (RFC 9110 §7.1)", 27},
      {with("path", std::string("/v1/{key}/%zz/{segment}/{chunk}")), "path",
       "has a '%' that does not start a %XX escape (RFC 3986 §2.1)", 10},
      {with("token_header", std::string("Content-Length")), "token_header",
       "'Content-Length' is a header the HTTP client sets itself (RFC 9110 §7.2, §8.3, §8.6; RFC 9112 §6, §9.6); give "
       "the token a header of its own",
       std::nullopt},
      {with("token_header", std::string("Fencing Token")), "token_header",
       "has a space, which a header name cannot have (a token, RFC 9110 §5.1)", 7},
      {with("writer_header", std::string("fencing-token")), "writer_header",
       "is the token's header too ('Fencing-Token'): the token and the writer id need a header each", std::nullopt},
      {with("rejected_status", std::int64_t{404}), "rejected_status",
       "404 cannot mean 'rejected by the fence': 404 Not Found is what a wrong url or path gives for every write (RFC "
       "9110 §15.5.5) (409 Conflict is the default; 412 Precondition Failed for conditional requests)",
       std::nullopt},
      {with("rejected_status", std::int64_t{500}), "rejected_status",
       "500 cannot mean 'rejected by the fence': must be a 4xx status (RFC 9110 §15.5): 2xx is accepted, 5xx and no "
       "reply are outcome unknown (409 Conflict is the default; 412 Precondition Failed for conditional requests)",
       std::nullopt},
      {with("rejected_status", std::int64_t{429}), "rejected_status",
       "429 cannot mean 'rejected by the fence': 429 Too Many Requests is rate limiting (RFC 6585 §4) (409 Conflict is "
       "the default; 412 Precondition Failed for conditional requests)",
       std::nullopt},
      {FakeFields{{"url", url}, {"high_water_header", std::string("X-HW")}, {"high_water_field", std::string("hw")}},
       "high_water_field",
       "and high_water_header are exclusive: the mark comes in a header or in the JSON body, not both (none: replies "
       "never say it)",
       std::nullopt},
      {with("high_water_header", std::string("X:HW")), "high_water_header",
       "has ':', which a header name cannot have (a token, RFC 9110 §5.1)", 1},
      {with("high_water_field", std::string("")), "high_water_field",
       "is empty: name a top-level JSON field of the reply, or none", std::nullopt},
      {with("read_back", std::string("/v1/readback/{key}")), "read_back",
       "takes no placeholders ('{'): only the write path has {key} {segment} {chunk}", 13},
      {with("read_back", std::string("v1/readback")), "read_back", "must start with '/' (a path below the service's url)", 0},
      {with("health", std::string("/health z")), "health",
       "has a space, which a request target cannot carry unencoded; percent-encode it (RFC 3986 §2.1)", 7},
  };
  for (const auto& c : cases) {
    const FieldError e = refusal(c.fields);
    SCOPED_TRACE(c.message);
    EXPECT_EQ(e.field, c.field);
    EXPECT_EQ(std::string(e.what()), c.message);
    EXPECT_EQ(e.offset, c.offset);
  }
  // The statuses a conditional-request or a 409 service uses are allowed.
  for (std::int64_t ok : {400, 403, 409, 412, 422, 423})
    EXPECT_EQ(kind().parse(with("rejected_status", ok)).at("rejected_status"), ok);
}

TEST(HttpKind, EvidenceIsEverythingButEffectsWithAReadBackAndNothingWithout) {
  const json with_rb = kind().parse(FakeFields{{"url", std::string("http://svc:1")}});
  const auto e = kind().evidence(with_rb);
  EXPECT_TRUE(e.chunks);
  EXPECT_TRUE(e.accept_log);
  EXPECT_TRUE(e.rejections);
  EXPECT_TRUE(e.high_water);
  EXPECT_FALSE(e.effects);
  const auto none = kind().evidence(
      kind().parse(FakeFields{{"url", std::string("http://svc:1")}, {"read_back", std::string("none")}}));
  EXPECT_FALSE(none.chunks);
  EXPECT_FALSE(none.accept_log);
  EXPECT_FALSE(none.rejections);
  EXPECT_FALSE(none.high_water);
  EXPECT_FALSE(none.effects);
  EXPECT_EQ(kind().design(with_rb), "service's own rule, rejected = HTTP 409");
}

/// A service in process: /ok-health answers 200, /readback answers `readback` (a JSON text).
class Service {
 public:
  Service() {
    server_.Get("/ok-health", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok", "text/plain"); });
    server_.Get("/sick", [](const httplib::Request&, httplib::Response& res) {
      res.status = 503;
      res.set_content("draining", "text/plain");
    });
    server_.Get("/readback", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu_);
      targets_.push_back(req.target);
      if (refuse_queries_ && !req.params.empty()) {  // a handler comparing the whole target with its path
        res.status = 404;
        return;
      }
      res.set_content(readback_, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    testing::wait_until_running(server_);
  }
  ~Service() { stop(); }
  void stop() {
    if (thread_.joinable()) {
      server_.stop();
      thread_.join();
    }
  }
  void set_readback(std::string text) {
    std::lock_guard lock(mu_);
    readback_ = std::move(text);
  }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  /// Every /readback request's target as sent (path and query, still percent-encoded).
  [[nodiscard]] std::vector<std::string> targets() {
    std::lock_guard lock(mu_);
    return targets_;
  }
  void refuse_queries() {
    std::lock_guard lock(mu_);
    refuse_queries_ = true;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::string readback_ = R"({"chunks":[],"log":[],"rejections":[],"high_water":{}})";
  std::vector<std::string> targets_;
  bool refuse_queries_ = false;
};

json config(const std::string& url, const std::string& read_back, const std::string& health) {
  return kind().parse(FakeFields{{"url", url}, {"read_back", read_back}, {"health", health}});
}

using testing::thrown_by_open;

TEST(HttpKind, OpenChecksTheServiceAndNamesTheUrlWhenItDoesNotAnswer) {
  const int port = testing::closed_port();
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  EXPECT_EQ(thrown_by_open<ResourceUnavailable>(config(url, "none", "none")),
            "the http service at " + url + " does not answer: connect to 127.0.0.1:" + std::to_string(port) +
                ": Connection refused (kind http starts no service unless the scenario says how: start it first, or give "
                "resource.start: [argv...])");

  Service svc;
  EXPECT_EQ(thrown_by_open<ResourceUnavailable>(config(svc.url(), "none", "/sick")),
            "the http service at " + svc.url() + " is not healthy: GET " + svc.url() + "/sick: HTTP 503: draining");
  std::string field;
  EXPECT_EQ(thrown_by_open<ResourceConfigError>(config(svc.url(), "none", "/healthz"), &field),
            "GET " + svc.url() + "/healthz: HTTP 404: the service has no such path; set health to its health path, or "
            "none (a TCP connect is then the check)");
  EXPECT_EQ(field, "health");
  EXPECT_EQ(thrown_by_open<ResourceConfigError>(config(svc.url(), "/v1/readback", "none"), &field),
            "GET " + svc.url() + "/v1/readback: HTTP 404: the service has no such path; set read_back to its "
            "read-back path, or none");
  EXPECT_EQ(field, "read_back");
  svc.set_readback(R"({"chunks":[],"rejections":[],"high_water":{}})");
  EXPECT_EQ(thrown_by_open<ResourceConfigError>(config(svc.url(), "/readback", "none"), &field),
            "GET " + svc.url() +
                "/readback: the read-back lacks \"log\" (docs/resource-http.md: every member is required; an empty one "
                "says there were none; a service that cannot tell sets read_back: none)");
  EXPECT_EQ(field, "read_back");
}

TEST(HttpKind, AnOpenInstanceGivesItsEndpointHealthAndReadBack) {
  Service svc;
  svc.set_readback(R"({"resource":"mine","fencing":"per-key",
    "chunks":[{"key":"b","segment":0,"chunk":0,"token":3,"client":"w2","seq":2,"data_b64":"eQ=="},
              {"key":"a","segment":0,"chunk":1,"token":3,"client":"w2","seq":1,"data_b64":"eA=="}],
    "log":[{"seq":1,"key":"a","segment":0,"chunk":1,"token":3,"client":"w2"},
           {"seq":2,"key":"b","segment":0,"chunk":0,"token":3,"client":"w2"}],
    "rejections":[{"key":"a","segment":0,"chunk":1,"token":2,"client":"w1","high_water":3}],
    "high_water":{"a":3,"b":3}})");
  const json cfg = config(svc.url(), "/readback", "/ok-health");
  auto inst = kind().open(cfg, resources::ResourceRunContext{});
  EXPECT_TRUE(inst->healthy());
  EXPECT_EQ(inst->describe(), "http " + svc.url() + " (the user's service; read-back /readback, health GET /ok-health)");
  EXPECT_EQ(inst->endpoint(), (json{{"kind", "http"},
                                    {"url", svc.url()},
                                    {"method", "PUT"},
                                    {"path", "/v1/keys/{key}/segments/{segment}/chunks/{chunk}"},
                                    {"token_header", "Fencing-Token"},
                                    {"writer_header", "Fencecheck-Client"},
                                    {"rejected_status", 409},
                                    {"high_water", {{"json", "high_water"}}}}));
  const ReadBack rb = inst->readback();
  EXPECT_EQ(rb.resource, "mine");
  ASSERT_EQ(rb.chunks.size(), 2u);
  EXPECT_EQ(rb.chunks[0].key, "a") << "sorted by key, segment, chunk as readback.h promises";
  EXPECT_EQ(rb.chunks[0].data, "x");
  ASSERT_EQ(rb.log.size(), 2u);
  ASSERT_EQ(rb.rejections.size(), 1u);
  EXPECT_EQ(rb.rejections[0].high_water, 3);
  EXPECT_EQ(rb.high_water.at("b"), 3);

  // A log out of acceptance order, and a service gone: runtime_error naming the URL.
  svc.set_readback(R"({"chunks":[],"rejections":[],"high_water":{},
    "log":[{"seq":2,"key":"a","segment":0,"chunk":0,"token":3,"client":"w2"},
           {"seq":1,"key":"a","segment":0,"chunk":1,"token":3,"client":"w2"}]})");
  try {
    (void)inst->readback();
    ADD_FAILURE() << "accepted a log out of order";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "GET " + svc.url() +
                                         "/readback: the log is not in acceptance order: entry 1 has seq 1 after seq 2 "
                                         "(seq must increase strictly in the order accepted)");
  }
  svc.stop();
  EXPECT_FALSE(inst->healthy());
  try {
    (void)inst->readback();
    ADD_FAILURE() << "a read-back from a stopped service";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "GET " + svc.url() + "/readback: Connection (Connection refused)");
  }
}

TEST(HttpKind, AScopedReadBackAsksForTheRunsKeysAndAServiceThatRefusesTheQueryIsAskedAgain) {
  Service svc;
  auto inst = kind().open(config(svc.url(), "/readback", "none"), resources::ResourceRunContext{});
  EXPECT_EQ(svc.targets(), (std::vector<std::string>{"/readback"})) << "open()'s check reads unscoped";
  inst->set_read_scope({"ledger", "a,b", "us 1"});
  (void)inst->readback();
  ASSERT_EQ(svc.targets().size(), 2u);
  EXPECT_EQ(svc.targets()[1], "/readback?keys=a%2Cb,ledger,us%201") << "each key percent-encoded, joined by ','";
  svc.refuse_queries();
  svc.set_readback(R"({"chunks":[],"log":[],"rejections":[],"high_water":{"ledger":4,"us-2":900}})");
  const ReadBack rb = inst->readback();
  EXPECT_EQ(rb.high_water.size(), 2u) << "the service's whole answer: the harness drops the other keys";
  const auto t = svc.targets();
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[2], "/readback?keys=a%2Cb,ledger,us%201");
  EXPECT_EQ(t[3], "/readback") << "asked again without the query after its 404";
}

TEST(HttpKind, WithoutAReadBackTheReadBackIsEmptyAndSaysHttp) {
  Service svc;
  auto inst = kind().open(config(svc.url(), "none", "none"), resources::ResourceRunContext{});
  EXPECT_TRUE(inst->healthy()) << "a TCP connect is the check";
  const ReadBack rb = inst->readback();
  EXPECT_EQ(rb.resource, "http");
  EXPECT_EQ(rb.fencing, "unknown (no read-back)");
  EXPECT_TRUE(rb.chunks.empty());
  EXPECT_TRUE(rb.log.empty());
  EXPECT_TRUE(rb.rejections.empty());
  EXPECT_TRUE(rb.high_water.empty());
  EXPECT_EQ(inst->describe(), "http " + svc.url() + " (the user's service; read-back none, health by TCP connect)");
  EXPECT_FALSE(inst->restart()) << "the service is the user's";
  inst->stop();
  EXPECT_TRUE(inst->healthy()) << "stop() leaves the user's service alone";
}

}  // namespace
}  // namespace fencecheck
