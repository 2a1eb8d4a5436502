// Unit: HttpResourceClient (kind http's writer) against in-process fakes: a cpp-httplib server
// standing in for the user's service, and a raw socket server for the replies a library would
// not produce (none at all, a connection closed mid-reply). Every outcome of the contract's
// table (docs/resource-http.md) and the request exactly as sent.
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "../support/raw_http_server.h"
#include "fencecheck/http/client.h"
#include "fencecheck/resources/http_resource.h"
#include "fencecheck/resources/writer.h"
#include "support.h"

namespace fencecheck {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::RawHttpServer;

/// What the fake saw of one request.
struct Seen {
  std::string method, path, token, writer, content_type, body;
};

/// A cpp-httplib server on 127.0.0.1:<any> answering every request with `respond`, recording
/// each request. Thread-safe.
class FakeService {
 public:
  using Respond = std::function<void(const httplib::Request&, httplib::Response&)>;
  explicit FakeService(Respond respond, std::string token_header = "Fencing-Token",
                       std::string writer_header = "Fencecheck-Client")
      : respond_(std::move(respond)), token_header_(std::move(token_header)), writer_header_(std::move(writer_header)) {
    auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard lock(mu_);
        seen_.push_back({req.method, req.target, req.get_header_value(token_header_),
                         req.get_header_value(writer_header_), req.get_header_value("Content-Type"), req.body});
      }
      respond_(req, res);
    };
    const std::string any = R"(/.*)";
    server_.Put(any, handler);
    server_.Post(any, handler);
    server_.Patch(any, handler);
    server_.Get(any, handler);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    testing::wait_until_running(server_);
  }
  ~FakeService() {
    server_.stop();
    thread_.join();
  }
  FakeService(const FakeService&) = delete;
  FakeService& operator=(const FakeService&) = delete;

  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] std::vector<Seen> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  Respond respond_;
  std::string token_header_, writer_header_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<Seen> seen_;
};

HttpContract contract_for(const std::string& url) {
  HttpContract c;
  c.url = parse_http_url(url);
  return c;
}

FakeService::Respond reply(int status, std::string body, std::vector<std::pair<std::string, std::string>> headers = {}) {
  return [=](const httplib::Request&, httplib::Response& res) {
    res.status = status;
    for (const auto& [n, v] : headers) res.set_header(n, v);
    res.set_content(body, "application/json");
  };
}

TEST(HttpResourceClient, AcceptedWithHighWaterAndSeqFromTheJsonBodyAndTheRequestAsTheContractSays) {
  FakeService svc(reply(200, R"({"accepted":true,"high_water":7,"seq":3})"));
  HttpResourceClient c(contract_for(svc.url()));
  EXPECT_EQ(c.kind(), "http");
  const WriteReply r = c.write("ledger", 1, 2, FencingToken(5), "w1", std::string("bytes\0\xff", 7));
  EXPECT_EQ(r.outcome, WriteOutcome::kAccepted) << r.error;
  EXPECT_EQ(r.high_water, 7);
  EXPECT_EQ(r.seq, 3);
  EXPECT_EQ(r.http_status, 200);
  EXPECT_EQ(r.error, "");
  const auto seen = svc.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "PUT");
  EXPECT_EQ(seen[0].path, "/v1/keys/ledger/segments/1/chunks/2");
  EXPECT_EQ(seen[0].token, "5");
  EXPECT_EQ(seen[0].writer, "w1");
  EXPECT_EQ(seen[0].content_type, "application/octet-stream");
  EXPECT_EQ(seen[0].body, std::string("bytes\0\xff", 7));
}

TEST(HttpResourceClient, AnyTwoHundredIsAcceptedEvenWithoutABody) {
  FakeService svc([](const httplib::Request&, httplib::Response& res) { res.status = 204; });
  HttpResourceClient c(contract_for(svc.url()));
  const WriteReply r = c.write("k", 0, 0, FencingToken(9), "w1", "x");
  EXPECT_EQ(r.outcome, WriteOutcome::kAccepted) << r.error;
  EXPECT_EQ(r.http_status, 204);
  EXPECT_EQ(r.high_water, 0) << "the reply did not say";
  EXPECT_EQ(r.seq, 0);
}

TEST(HttpResourceClient, ATwoHundredSayingNotAcceptedBreaksTheContractAndIsOutcomeUnknown) {
  FakeService svc(reply(200, R"({"accepted":false,"high_water":9})"));
  HttpResourceClient c(contract_for(svc.url()));
  const WriteReply r = c.write("k", 0, 0, FencingToken(4), "w1", "x");
  EXPECT_EQ(r.outcome, WriteOutcome::kUnknown);
  EXPECT_EQ(r.http_status, 200);
  EXPECT_EQ(r.error, "PUT " + svc.url() +
                         "/v1/keys/k/segments/0/chunks/0: HTTP 200 with \"accepted\":false breaks the contract (a "
                         "rejection is HTTP 409): outcome unknown");
}

TEST(HttpResourceClient, HighWaterFromAHeaderNamedCaseInsensitivelyAndTheBodyIgnored) {
  FakeService svc(reply(201, R"({"high_water":1})", {{"x-fence-mark", "  42 "}}));
  HttpContract ct = contract_for(svc.url());
  ct.high_water = {HighWaterSource::In::kHeader, "X-Fence-Mark"};
  HttpResourceClient c(ct);
  const WriteReply r = c.write("k", 0, 0, FencingToken(42), "w1", "x");
  EXPECT_EQ(r.outcome, WriteOutcome::kAccepted);
  EXPECT_EQ(r.high_water, 42);
}

TEST(HttpResourceClient, HighWaterAsAProtobufStyleJsonStringAndFromAFieldOfTheUsersNaming) {
  FakeService svc(reply(409, R"({"fence":"9000000000000000000","error":"stale token"})"));
  HttpContract ct = contract_for(svc.url());
  ct.high_water = {HighWaterSource::In::kJsonField, "fence"};
  HttpResourceClient c(ct);
  const WriteReply r = c.write("k", 0, 0, FencingToken(3), "w1", "x");
  EXPECT_EQ(r.outcome, WriteOutcome::kRejected);
  EXPECT_EQ(r.high_water, 9000000000000000000);
  EXPECT_EQ(r.error, "stale token");
}

TEST(HttpResourceClient, AMalformedMarkIsNotSaidAndTheReplyNotesWhy) {
  FakeService svc(reply(409, "{}", {{"X-Mark", "5, 6"}}));
  HttpContract ct = contract_for(svc.url());
  ct.high_water = {HighWaterSource::In::kHeader, "X-Mark"};
  HttpResourceClient c(ct);
  const WriteReply r = c.write("k", 0, 0, FencingToken(3), "w1", "x");
  EXPECT_EQ(r.outcome, WriteOutcome::kRejected);
  EXPECT_EQ(r.high_water, 0);
  EXPECT_EQ(r.error, "rejected (HTTP 409); header X-Mark: '5, 6' is not one decimal int64");
}

TEST(HttpResourceClient, RejectedIs409ByDefaultWithTheServicesMarkAndMessage) {
  FakeService svc(reply(409, R"({"accepted":false,"high_water":8,"error":"token 4 below high-water 8"})"));
  HttpResourceClient c(contract_for(svc.url()));
  const WriteReply r = c.write("k", 0, 0, FencingToken(4), "w1", "x");
  EXPECT_EQ(r.outcome, WriteOutcome::kRejected);
  EXPECT_EQ(r.high_water, 8);
  EXPECT_EQ(r.http_status, 409);
  EXPECT_EQ(r.error, "token 4 below high-water 8");
}

TEST(HttpResourceClient, With412ConfiguredA412IsRejectedAndA409IsAnInvalidRequest) {
  int status = 412;
  FakeService svc([&](const httplib::Request&, httplib::Response& res) {
    res.status = status;
    res.set_content("precondition", "text/plain");
  });
  HttpContract ct = contract_for(svc.url());
  ct.rejected_status = 412;
  HttpResourceClient c(ct);
  WriteReply r = c.write("k", 0, 0, FencingToken(4), "w1", "x");
  EXPECT_EQ(r.outcome, WriteOutcome::kRejected);
  EXPECT_EQ(r.error, "rejected (HTTP 412)") << "the worker's detail must not say 409";
  status = 409;
  r = c.write("k", 0, 0, FencingToken(4), "w1", "x");
  EXPECT_EQ(r.outcome, WriteOutcome::kInvalid);
  EXPECT_EQ(r.http_status, 409);
  EXPECT_EQ(r.error, "PUT " + svc.url() + "/v1/keys/k/segments/0/chunks/0: HTTP 409: precondition");
}

TEST(HttpResourceClient, OtherClientErrorsAreInvalidRequestsNamingTheUrlAndTheServicesWords) {
  for (int status : {400, 404, 405, 413, 422, 429}) {
    SCOPED_TRACE(status);
    FakeService svc(reply(status, R"({"error":"no such key space"})"));
    HttpResourceClient c(contract_for(svc.url()));
    const WriteReply r = c.write("k", 3, 4, FencingToken(4), "w1", "x");
    EXPECT_EQ(r.outcome, WriteOutcome::kInvalid);
    EXPECT_EQ(r.http_status, status);
    EXPECT_EQ(r.error, "PUT " + svc.url() + "/v1/keys/k/segments/3/chunks/4: no such key space (HTTP " +
                           std::to_string(status) + ")");
  }
}

TEST(HttpResourceClient, ServerErrorsAndRedirectsAreOutcomeUnknownNeverRejected) {
  for (int status : {500, 502, 503, 504, 303, 307}) {
    SCOPED_TRACE(status);
    FakeService svc(reply(status, "{}", {{"Location", "/elsewhere"}}));
    HttpResourceClient c(contract_for(svc.url()));
    const WriteReply r = c.write("k", 0, 0, FencingToken(4), "w1", "x");
    EXPECT_EQ(r.outcome, WriteOutcome::kUnknown);
    EXPECT_EQ(r.http_status, status);
    const std::string head = "PUT " + svc.url() + "/v1/keys/k/segments/0/chunks/0: HTTP " + std::to_string(status) + ": {}";
    if (status < 400)
      EXPECT_EQ(r.error, head + "; a redirect is not followed, and it does not prove the write was not performed");
    else
      EXPECT_EQ(r.error, head);
  }
}

TEST(HttpResourceClient, ConnectionRefusedIsOutcomeUnknownWithoutAStatus) {
  const int port = testing::closed_port();
  HttpResourceClient c(contract_for("http://127.0.0.1:" + std::to_string(port)), 2000ms);
  const WriteReply r = c.write("k", 0, 0, FencingToken(4), "w1", "x");
  EXPECT_EQ(r.outcome, WriteOutcome::kUnknown);
  EXPECT_EQ(r.http_status, 0);
  EXPECT_EQ(r.error, "PUT http://127.0.0.1:" + std::to_string(port) +
                         "/v1/keys/k/segments/0/chunks/0: Connection (Connection refused)");
}

TEST(HttpResourceClient, NoReplyWithinTheTimeoutIsOutcomeUnknown) {
  RawHttpServer raw([](int, const std::string&, RawHttpServer& server) { server.hold(); });
  HttpResourceClient c(contract_for(raw.url()), 200ms);
  const WriteReply r = c.write("k", 0, 0, FencingToken(4), "w1", "x");
  raw.release();
  EXPECT_EQ(r.outcome, WriteOutcome::kUnknown);
  EXPECT_EQ(r.http_status, 0);
  EXPECT_EQ(r.error, "PUT " + raw.url() + "/v1/keys/k/segments/0/chunks/0: Read timeout (no reply within 200 ms)");
  ASSERT_TRUE(raw.wait_for_requests(1));
  EXPECT_NE(raw.requests()[0].find("Fencing-Token: 4\r\n"), std::string::npos) << raw.requests()[0];
}

TEST(HttpResourceClient, AReplyCutOffMidBodyIsOutcomeUnknownEvenWithATwoHundredHead) {
  RawHttpServer raw([](int fd, const std::string&, RawHttpServer&) {
    RawHttpServer::send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"accepted\":");
  });
  HttpResourceClient c(contract_for(raw.url()), 2000ms);
  const WriteReply r = c.write("k", 0, 0, FencingToken(4), "w1", "x");
  EXPECT_EQ(r.outcome, WriteOutcome::kUnknown);
  EXPECT_EQ(r.error.rfind("PUT " + raw.url() + "/v1/keys/k/segments/0/chunks/0: Read (", 0), 0u) << r.error;
}

TEST(HttpResourceClient, EveryValueIsPercentEncodedAndTheTemplateBasePathMethodAndHeadersAreTheUsers) {
  FakeService svc(reply(200, "{}"), "X-Fence", "X-Writer");
  HttpContract ct = contract_for(svc.url() + "/api/v2/");
  ct.method = "POST";
  ct.path = "/write/{key}?segment={segment}&chunk={chunk}&again={key}";
  ct.token_header = "X-Fence";
  ct.writer_header = "X-Writer";
  HttpResourceClient c(ct);
  EXPECT_EQ(c.contract().url.str(), svc.url() + "/api/v2");
  const WriteReply r = c.write("a b/c%?&=\xc3\xa9~._-", -1, 7, FencingToken(12), "w 2", "x");
  EXPECT_EQ(r.outcome, WriteOutcome::kAccepted) << r.error;
  const auto seen = svc.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].path,
            "/api/v2/write/a%20b%2Fc%25%3F%26%3D%C3%A9~._-?segment=-1&chunk=7&again=a%20b%2Fc%25%3F%26%3D%C3%A9~._-");
  EXPECT_EQ(seen[0].token, "12");
  EXPECT_EQ(seen[0].writer, "w 2");
}

TEST(HttpResourceClient, AWriterIdThatWouldBreakTheHeaderIsRefusedUnsent) {
  FakeService svc(reply(200, "{}"));
  HttpResourceClient c(contract_for(svc.url()));
  const WriteReply r = c.write("k", 0, 0, FencingToken(4), "w1\r\nX-Evil: 1", "x");
  EXPECT_EQ(r.outcome, WriteOutcome::kInvalid);
  EXPECT_TRUE(svc.seen().empty());
}

TEST(HttpResourceClient, MadeFromTheEndpointJsonWithDefaultsAndRefusedNamingTheMember) {
  FakeService svc(reply(200, R"({"high_water":5,"seq":1})"));
  auto w = make_resource_writer(json{{"kind", "http"}, {"url", svc.url()}}, 2000ms);
  EXPECT_EQ(w->kind(), "http");
  EXPECT_EQ(w->write("k", 0, 0, FencingToken(5), "w1", "x").high_water, 5);

  const json full = {{"kind", "http"},          {"url", svc.url()},         {"method", "PATCH"},
                     {"path", "/c/{key}/{segment}/{chunk}"}, {"token_header", "T"}, {"writer_header", "W"},
                     {"rejected_status", 412},  {"high_water", {{"header", "X-HW"}}}};
  const HttpContract parsed = http_contract_from_endpoint(full);
  EXPECT_EQ(parsed.method, "PATCH");
  EXPECT_EQ(parsed.rejected_status, 412);
  EXPECT_EQ(parsed.high_water, (HighWaterSource{HighWaterSource::In::kHeader, "X-HW"}));
  EXPECT_EQ(to_endpoint(parsed), full) << "to_endpoint is the inverse";
  EXPECT_EQ(http_contract_from_endpoint(json{{"url", svc.url()}, {"high_water", nullptr}}).high_water.in,
            HighWaterSource::In::kNone);

  auto refused = [](const json& endpoint) {
    try {
      (void)make_resource_writer(endpoint, 1000ms);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(refused(json{{"kind", "http"}}), "http endpoint \"url\": is missing");
  EXPECT_EQ(refused(json{{"kind", "http"}, {"url", svc.url()}, {"rejected_status", 404}}),
            "http endpoint \"rejected_status\": 404 cannot mean 'rejected by the fence': 404 Not Found is what a wrong "
            "url or path gives for every write (RFC 9110 §15.5.5) (409 Conflict is the default; 412 Precondition "
            "Failed for conditional requests)");
  EXPECT_EQ(refused(json{{"kind", "http"}, {"url", svc.url()}, {"high_water", "high_water"}}),
            "http endpoint \"high_water\": must be {\"json\":FIELD}, {\"header\":NAME} or null");
  EXPECT_EQ(refused(json{{"kind", "http"}, {"url", svc.url()}, {"path", "/k/{key}"}}),
            "http endpoint \"path\": has no {segment}: every chunk slot (key, segment, chunk) needs a request target "
            "of its own");
}

// fencecheck/http/client.h: the reply's header fields (added for the high-water header).
TEST(HttpReplyHeaders, KeptTrimmedFoundCaseInsensitivelyAndRepeatsJoinedInOrder) {
  RawHttpServer raw([](int fd, const std::string&, RawHttpServer&) {
    RawHttpServer::send_all(fd,
                            "HTTP/1.1 409 Conflict\r\nX-Mark:   7  \r\nContent-Length: 2\r\nx-mark: 8\r\n"
                            "Trailer-Free: yes\r\n\r\nno");
  });
  const http::Reply r = http::exchange(http::Endpoint{"127.0.0.1", raw.port()}, http::Request{}, http::Timeouts{});
  ASSERT_TRUE(r.complete()) << r.error_text();
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(r.body, "no");
  ASSERT_EQ(r.headers.size(), 4u);
  EXPECT_EQ(r.headers[0], (std::pair<std::string, std::string>{"X-Mark", "7"}));
  EXPECT_EQ(r.headers[1], (std::pair<std::string, std::string>{"x-mark", "8"})) << "a name's fields kept together";
  EXPECT_EQ(r.headers[2], (std::pair<std::string, std::string>{"Content-Length", "2"}));
  EXPECT_EQ(r.header("X-MARK"), "7, 8");
  EXPECT_EQ(r.header("content-length"), "2");
  EXPECT_EQ(r.header("Absent"), std::nullopt);
}

TEST(HttpReplyHeaders, PresentWhenTheBodyThenFails) {
  RawHttpServer raw([](int fd, const std::string&, RawHttpServer&) {
    RawHttpServer::send_all(fd, "HTTP/1.1 200 OK\r\nX-Mark: 3\r\nContent-Length: 10\r\n\r\nabc");
  });
  const http::Reply r = http::exchange(http::Endpoint{"127.0.0.1", raw.port()}, http::Request{}, http::Timeouts{});
  EXPECT_FALSE(r.complete());
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("X-Mark"), "3");
}

}  // namespace
}  // namespace fencecheck
