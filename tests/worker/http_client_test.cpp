// Unit tests of fencecheck::http::exchange (Boost.Beast), the HTTP client under EtcdClient and
// StoreClient, against a raw loopback server writing exact bytes: chunked bodies with trailers,
// streamed pieces, silence, a reply cut short, refused and stalled connections, cancellation.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <stop_token>
#include <thread>

#include "../support/raw_http_server.h"
#include "fencecheck/http/client.h"
#include "fencecheck/locks/etcd/embedded_etcd.h"
#include "fencecheck/process/server_support.h"
#include "test_support.h"

namespace fencecheck {
namespace {

using namespace std::chrono_literals;
using testing::RawHttpServer;

http::Endpoint loopback(int port) { return http::Endpoint{"127.0.0.1", port}; }

http::Request post(std::string target, std::string body) {
  http::Request r;
  r.method = "POST";
  r.target = std::move(target);
  r.content_type = "application/json";
  r.body = std::move(body);
  return r;
}

// etcd's gateway answers a gRPC error with a chunked body and a trailer (cpp-httplib 0.11.4 failed
// on it with a read error after the whole body had arrived).
const std::string kChunkedErrorWithTrailer =
    "HTTP/1.1 404 Not Found\r\n"
    "Content-Type: application/json\r\n"
    "Trailer: Grpc-Trailer-Content-Type\r\n"
    "Transfer-Encoding: chunked\r\n\r\n"
    "10\r\n{\"error\":\"lease \r\n"
    "1a\r\nnot found\",\"code\":5,\"x\":1}\r\n"
    "0\r\n"
    "Grpc-Trailer-Content-Type: application/grpc\r\n\r\n";

TEST(HttpClientTest, ChunkedBodyEndingWithTrailersIsReadWhole) {
  RawHttpServer server(
      [](int fd, const std::string&, RawHttpServer&) { RawHttpServer::send_all(fd, kChunkedErrorWithTrailer); });
  http::Reply reply = http::exchange(loopback(server.port()), post("/v3/lease/revoke", R"({"ID":"7"})"), {});
  EXPECT_EQ(reply.failure, http::Failure::kNone) << reply.error_text();
  EXPECT_TRUE(reply.complete());
  EXPECT_EQ(reply.status, 404);
  EXPECT_EQ(reply.body, R"({"error":"lease not found","code":5,"x":1})");
  EXPECT_EQ(reply.error_text(), "");

  // What went on the wire: one request, closing its connection, with a Content-Length body.
  ASSERT_EQ(server.requests().size(), 1u);
  const std::string request = server.requests()[0];
  EXPECT_EQ(request.substr(0, request.find("\r\n")), "POST /v3/lease/revoke HTTP/1.1");
  EXPECT_NE(request.find("Host: 127.0.0.1:" + std::to_string(server.port()) + "\r\n"), std::string::npos) << request;
  EXPECT_NE(request.find("Connection: close\r\n"), std::string::npos) << request;
  EXPECT_NE(request.find("Content-Type: application/json\r\n"), std::string::npos) << request;
  EXPECT_NE(request.find("Content-Length: 10\r\n"), std::string::npos) << request;
  EXPECT_EQ(request.substr(request.size() - 10), R"({"ID":"7"})");
}

TEST(HttpClientTest, HeadersAreSentAndAGetHasNoBody) {
  RawHttpServer server([](int fd, const std::string&, RawHttpServer&) {
    RawHttpServer::send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  });
  http::Request get;
  get.target = "/v1/counters/a%2Fb";
  get.headers = {{"Fencing-Token", "12"}, {"Fencecheck-Client", "w1"}};
  http::Reply reply = http::exchange(loopback(server.port()), get, {});
  ASSERT_TRUE(reply.complete()) << reply.error_text();
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "ok");
  const std::string request = server.requests().at(0);
  EXPECT_EQ(request.substr(0, request.find("\r\n")), "GET /v1/counters/a%2Fb HTTP/1.1");
  EXPECT_NE(request.find("Fencing-Token: 12\r\n"), std::string::npos) << request;
  EXPECT_NE(request.find("Fencecheck-Client: w1\r\n"), std::string::npos) << request;
  EXPECT_EQ(request.find("Content-Length"), std::string::npos) << request;
  EXPECT_EQ(request.find("Content-Type"), std::string::npos) << request;
}

TEST(HttpClientTest, TheSinkGetsEachPieceAsItArrives) {
  // The second chunk is only sent once the sink has seen the first: a client that waited for the
  // whole body would never get it.
  test::Collected<std::string> pieces;
  RawHttpServer server([](int fd, const std::string&, RawHttpServer& self) {
    RawHttpServer::send_all(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nfirst\n\r\n");
    self.hold();
    RawHttpServer::send_all(fd, "7\r\nsecond\n\r\n0\r\nGrpc-Trailer-Content-Type: application/grpc\r\n\r\n");
  });
  std::thread releaser([&] {
    if (pieces.wait_until([](const auto& v) { return !v.empty(); })) server.release();
  });
  int seen_status = 0;
  http::Reply reply = http::exchange(loopback(server.port()), post("/v3/watch", "{}"), {}, {},
                                     [&](int status, std::string_view piece) {
                                       seen_status = status;
                                       pieces.push(std::string(piece));
                                       return true;
                                     });
  releaser.join();
  EXPECT_TRUE(reply.complete()) << reply.error_text();
  EXPECT_EQ(seen_status, 200);
  EXPECT_EQ(reply.body, "") << "with a sink the body is not kept";
  EXPECT_EQ(pieces.snapshot(), (std::vector<std::string>{"first\n", "second\n"}));
}

TEST(HttpClientTest, TheSinkReturningFalseEndsTheExchangeAsCanceled) {
  RawHttpServer server([](int fd, const std::string&, RawHttpServer&) {
    RawHttpServer::send_all(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab\n\r\n");
  });
  http::Reply reply = http::exchange(loopback(server.port()), post("/v3/watch", "{}"), http::Timeouts{1s, 60s, 1s},
                                     {}, [](int, std::string_view) { return false; });
  EXPECT_EQ(reply.failure, http::Failure::kCanceled);
  EXPECT_EQ(reply.status, 200);
}

TEST(HttpClientTest, ConnectionRefusedIsAConnectionFailure) {
  const int port = process::free_tcp_port("127.0.0.1");
  http::Reply reply = http::exchange(loopback(port), post("/v3/lease/grant", "{}"), {});
  EXPECT_EQ(reply.failure, http::Failure::kConnection);
  EXPECT_EQ(reply.status, 0);
  EXPECT_EQ(reply.detail, "Connection refused");
  EXPECT_EQ(reply.error_text(), "Connection (Connection refused)");
}

TEST(HttpClientTest, AStalledConnectIsAConnectionFailureAfterTheConnectBound) {
  // A listener with a full accept queue (backlog 0, one connection never accepted): Linux drops
  // further SYNs, so a connect neither succeeds nor is refused.
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(::listen(listener, 0), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  int filler = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(filler, reinterpret_cast<sockaddr*>(&addr), len), 0);

  http::Reply reply = http::exchange(loopback(ntohs(addr.sin_port)), post("/v3/lease/grant", "{}"),
                                     http::Timeouts{300ms, 5s, 5s});
  EXPECT_EQ(reply.failure, http::Failure::kConnection);
  EXPECT_EQ(reply.detail, "no connection within 300 ms");
  EXPECT_GE(reply.elapsed, 300ms);
  ::close(filler);
  ::close(listener);
}

TEST(HttpClientTest, SilenceIsAReadTimeoutAfterTheReadBound) {
  RawHttpServer silent([](int, const std::string&, RawHttpServer& self) { self.hold(); });
  http::Reply reply = http::exchange(loopback(silent.port()), post("/v3/kv/put", "{}"), http::Timeouts{1s, 250ms, 1s});
  EXPECT_EQ(reply.failure, http::Failure::kReadTimeout);
  EXPECT_EQ(reply.status, 0);
  EXPECT_EQ(reply.error_text(), "Read timeout (no reply within 250 ms)");
  EXPECT_GE(reply.elapsed, 250ms);
  EXPECT_EQ(silent.requests().size(), 1u) << "the request was sent whole before the wait";
}

TEST(HttpClientTest, AReplyCutShortIsAReadFailureKeepingItsStatus) {
  RawHttpServer server([](int fd, const std::string&, RawHttpServer&) {
    RawHttpServer::send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
  });
  http::Reply reply = http::exchange(loopback(server.port()), post("/v1/effects/k", "e1"), {});
  EXPECT_EQ(reply.failure, http::Failure::kRead);
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "0123456789");
  EXPECT_EQ(reply.error_text().substr(0, 6), "Read (") << reply.error_text();
}

TEST(HttpClientTest, AReplyThatArrivedWhileTheCallerWasStoppedIsReadNotTimedOut) {
  // The harness SIGSTOPs workers mid-call: a reply that came while the worker was stopped past
  // its read bound must still be read once it runs again (as a socket timeout would have let it),
  // not reported as a timeout. The caller is a child process; it exits 0 when the reply was whole.
  std::promise<pid_t> forked;
  std::shared_future<pid_t> child_pid = forked.get_future().share();
  RawHttpServer server([child_pid](int fd, const std::string&, RawHttpServer&) {
    const pid_t child = child_pid.get();
    ASSERT_GT(child, 0);  // never kill(-1, ...)
    ::kill(child, SIGSTOP);
    int status = 0;
    ::waitpid(child, &status, WUNTRACED);  // stopped now
    RawHttpServer::send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    std::this_thread::sleep_for(600ms);  // the fault: stopped for twice the 300 ms read bound
    ::kill(child, SIGCONT);
  });
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    http::Reply reply = http::exchange(loopback(server.port()), post("/v1/effects/k", "e1"), http::Timeouts{1s, 300ms, 1s});
    ::_exit(reply.complete() && reply.status == 200 && reply.body == "ok" ? 0 : 10 + static_cast<int>(reply.failure));
  }
  forked.set_value(child);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10 + Failure: 13 = kReadTimeout";
}

TEST(HttpClientTest, StopAbortsABlockedReadPromptly) {
  RawHttpServer server([](int, const std::string&, RawHttpServer& self) { self.hold(); });
  std::stop_source stop;
  http::Reply reply;
  std::chrono::steady_clock::time_point returned;
  std::thread caller([&] {
    reply = http::exchange(loopback(server.port()), post("/v3/lock/lock", "{}"), http::Timeouts{1s, 60s, 1s},
                           stop.get_token());
    returned = std::chrono::steady_clock::now();
  });
  ASSERT_TRUE(server.wait_for_requests(1));  // the caller is now waiting for a reply
  const auto requested = std::chrono::steady_clock::now();
  stop.request_stop();
  caller.join();
  EXPECT_EQ(reply.failure, http::Failure::kCanceled);
  EXPECT_EQ(reply.detail, "stop requested");
  EXPECT_LT(returned - requested, 1s) << "a stop must not wait for the 60 s read bound";
}

TEST(HttpClientTest, AnAlreadyStoppedTokenDoesNotConnect) {
  std::stop_source stop;
  stop.request_stop();
  // A closed port: had it connected, the failure would be kConnection.
  http::Reply reply = http::exchange(loopback(process::free_tcp_port("127.0.0.1")), post("/", ""), {}, stop.get_token());
  EXPECT_EQ(reply.failure, http::Failure::kCanceled);
  EXPECT_EQ(reply.error_text(), "Canceled (stop requested before the call)");
}

TEST(HttpClientTest, FailureNames) {
  EXPECT_EQ(http::failure_name(http::Failure::kNone), "");
  EXPECT_EQ(http::failure_name(http::Failure::kConnection), "Connection");
  EXPECT_EQ(http::failure_name(http::Failure::kWrite), "Write");
  EXPECT_EQ(http::failure_name(http::Failure::kReadTimeout), "Read timeout");
  EXPECT_EQ(http::failure_name(http::Failure::kRead), "Read");
  EXPECT_EQ(http::failure_name(http::Failure::kCanceled), "Canceled");
}

}  // namespace
}  // namespace fencecheck
