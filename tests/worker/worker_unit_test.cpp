// Unit tests (no real services): the etcd client's wire handling against in-test fake gateways,
// errors, cancellation, the pause detector, the event writer and the worker's command line.
#include <gtest/gtest.h>

#include <sstream>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "../support/raw_http_server.h"
#include "fencecheck/proto/base64.h"
#include "fencecheck/proto/event.h"
#include "fencecheck/locks/etcd/embedded_etcd.h"
#include "fencecheck/process/server_support.h"
#include "fencecheck/locks/etcd/etcd_client.h"
#include "fencecheck/workers/worker.h"
#include "fencecheck/workers/worker_cli.h"
#include "test_support.h"

namespace fencecheck {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

/// An httplib server on 127.0.0.1 standing in for etcd's gateway.
class FakeGateway {
 public:
  FakeGateway() = default;
  ~FakeGateway() { stop(); }
  httplib::Server& server() { return server_; }
  void start() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  void stop() {
    if (thread_.joinable()) {
      server_.stop();
      thread_.join();
    }
  }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

/// A gate a fake handler waits at until the test opens it.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void release() {
    {
      std::lock_guard lock(mu);
      open = true;
    }
    cv.notify_all();
  }
  void wait() {
    std::unique_lock lock(mu);
    cv.wait_for(lock, 30s, [this] { return open; });
  }
  /// Opens the gate when it goes out of scope. Declared after the FakeGateway (and the Gate before
  /// it), so the handlers waiting here are let go first, even when an ASSERT ends the test early,
  /// and the gateway's destructor joins them before the Gate itself is destroyed (a handler still
  /// inside wait() on a destroyed Gate aborted a CI run under ASan).
  struct OpenAtExit {
    Gate& gate;
    ~OpenAtExit() { gate.release(); }
  };
};

std::string header(std::int64_t revision) {
  return R"({"cluster_id":"1","member_id":"2","revision":")" + std::to_string(revision) + R"(","raft_term":"2"})";
}

TEST(EtcdClientTest, RejectsEndpointsThatAreNotHttpHostPort) {
  EXPECT_THROW(EtcdClient("127.0.0.1:2379"), std::invalid_argument);
  EXPECT_THROW(EtcdClient("https://127.0.0.1:2379"), std::invalid_argument);
  EXPECT_THROW(EtcdClient("http://127.0.0.1"), std::invalid_argument);
  EXPECT_THROW(EtcdClient("http://127.0.0.1:0"), std::invalid_argument);
  EXPECT_THROW(EtcdClient("http://127.0.0.1:2379/v3"), std::invalid_argument);
  EXPECT_EQ(EtcdClient("http://127.0.0.1:2379/").endpoint(), "http://127.0.0.1:2379");
}

TEST(EtcdClientTest, PrefixRangeEndIncrementsTheLastByte) {
  EXPECT_EQ(prefix_range_end("lock/"), "lock0");
  EXPECT_EQ(prefix_range_end("a"), "b");
  EXPECT_EQ(prefix_range_end(std::string("a\xff", 2)), "b");
  EXPECT_EQ(prefix_range_end(std::string("\xff\xff", 2)), std::string(1, '\0'));
}

TEST(EtcdClientTest, UnreachableEndpointErrorNamesTheEndpoint) {
  const std::string endpoint = "http://127.0.0.1:" + std::to_string(process::free_tcp_port("127.0.0.1"));
  EtcdClient etcd(endpoint, EtcdClient::Options{500ms, 1000ms});
  try {
    (void)etcd.lease_grant(5s);
    FAIL() << "lease_grant against a closed port returned";
  } catch (const EtcdError& e) {
    EXPECT_TRUE(e.transport());
    EXPECT_EQ(e.http_status(), 0);
    EXPECT_EQ(e.endpoint(), endpoint);
    EXPECT_EQ(e.path(), "/v3/lease/grant");
    const std::string what = e.what();
    EXPECT_NE(what.find(endpoint), std::string::npos) << what;
    EXPECT_NE(what.find("unreachable"), std::string::npos) << what;
    EXPECT_NE(what.find("/v3/lease/grant"), std::string::npos) << what;
    EXPECT_EQ(e.etcd_message(), "Connection (Connection refused)");
  }
  EXPECT_FALSE(etcd.health());
}

TEST(EtcdClientTest, HttpErrorCarriesStatusGrpcCodeAndEtcdMessage) {
  FakeGateway gw;
  gw.server().Post("/v3/lease/revoke", [](const httplib::Request&, httplib::Response& res) {
    res.status = 500;
    res.set_content(R"({"error":"etcdserver: too many requests","message":"etcdserver: too many requests","code":8})",
                    "application/json");
  });
  gw.server().Post("/v3/lease/timetolive", [](const httplib::Request&, httplib::Response& res) {
    res.status = 404;
    res.set_content(R"({"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5})",
                    "application/json");
  });
  gw.start();
  EtcdClient etcd(gw.url());
  try {
    (void)etcd.lease_revoke(42);
    FAIL() << "no error";
  } catch (const EtcdError& e) {
    EXPECT_EQ(e.http_status(), 500);
    EXPECT_EQ(e.grpc_code(), 8);
    EXPECT_EQ(e.etcd_message(), "etcdserver: too many requests");
    const std::string what = e.what();
    EXPECT_NE(what.find(gw.url()), std::string::npos) << what;
    EXPECT_NE(what.find("/v3/lease/revoke"), std::string::npos) << what;
    EXPECT_NE(what.find("HTTP 500"), std::string::npos) << what;
    EXPECT_NE(what.find("too many requests"), std::string::npos) << what;
  }
  EXPECT_THROW((void)etcd.lease_time_to_live(42), EtcdError);
}

TEST(EtcdClientTest, KeepaliveWithoutTtlMeansTheLeaseIsGone) {
  FakeGateway gw;
  gw.server().Post("/v3/lease/keepalive", [](const httplib::Request& req, httplib::Response& res) {
    auto body = json::parse(req.body);
    const std::string id = body.at("ID").get<std::string>();
    // etcd 3.4's gateway: one stream message, newline-terminated; TTL omitted when 0 (proto3).
    std::string result = R"({"result":{"header":)" + header(7) + R"(,"ID":")" + id + "\"";
    if (id == "1") result += R"(,"TTL":"2")";
    result += "}}\n";
    res.set_content(result, "application/json");
  });
  gw.start();
  EtcdClient etcd(gw.url());
  EXPECT_EQ(etcd.lease_keepalive(1), std::optional<std::chrono::seconds>(2s));
  EXPECT_EQ(etcd.lease_keepalive(2), std::nullopt);
}

TEST(EtcdClientTest, ParsesInt64sSentAsStringsAndMissingFieldsAsZero) {
  FakeGateway gw;
  gw.server().Post("/v3/kv/range", [](const httplib::Request&, httplib::Response& res) {
    // No "value" (empty), no "lease" (none): proto3 defaults.
    res.set_content(R"({"header":)" + header(9) + R"(,"kvs":[{"key":")" + base64_encode("k") +
                        R"(","create_revision":"8","mod_revision":"9","version":"2"}],"count":"1"})",
                    "application/json");
  });
  gw.start();
  EtcdClient etcd(gw.url());
  auto kv = etcd.range("k");
  ASSERT_TRUE(kv);
  EXPECT_EQ(*kv, (KeyValue{"k", "", 8, 9, 2, 0}));
}

TEST(EtcdClientTest, WatchReassemblesMessagesSplitAcrossChunks) {
  FakeGateway gw;
  const std::string key = base64_encode("lk/a");
  const std::vector<std::string> writes = {
      R"({"result":{"header":)" + header(8) + R"(,"created":true}})" "\n" R"({"result":{"header":)",
      header(9) + R"(,"events":[{"kv":{"key":")" + key + R"(","create_revision":"9","mod_revision":"9","version":"1","lease":"77"}}]}})" "\n",
      R"({"result":{"header":)" + header(12) + R"(,"events":[{"type":"DELETE","kv":{"key":")" + key +
          R"(","mod_revision":"12"},"prev_kv":{"key":")" + key + R"(","create_revision":"9","mod_revision":"9","version":"1","lease":"77"}}]}})",
      "\n"};
  std::string seen_request;
  gw.server().Post("/v3/watch", [&](const httplib::Request& req, httplib::Response& res) {
    seen_request = req.body;
    res.set_chunked_content_provider("application/json", [&writes](std::size_t, httplib::DataSink& sink) {
      for (const auto& w : writes) sink.write(w.data(), w.size());
      sink.done();
      return true;
    });
  });
  gw.start();
  EtcdClient etcd(gw.url());
  std::vector<WatchEvent> events;
  std::stop_source stop;
  const std::int64_t last = etcd.watch("lk/", 5, [&](const WatchEvent& e) { events.push_back(e); }, stop.get_token());
  EXPECT_EQ(last, 12);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, WatchEvent::Type::kPut);
  EXPECT_EQ(events[0].kv.key, "lk/a");
  EXPECT_EQ(events[0].kv.lease, 77);
  EXPECT_EQ(events[0].revision(), 9);
  EXPECT_FALSE(events[0].prev_kv);
  EXPECT_EQ(events[1].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(events[1].revision(), 12);
  EXPECT_EQ(events[1].header_revision, 12);
  ASSERT_TRUE(events[1].prev_kv);
  EXPECT_EQ(events[1].prev_kv->create_revision, 9);

  auto req = json::parse(seen_request).at("create_request");
  EXPECT_EQ(base64_decode(req.at("key").get<std::string>()), "lk/");
  EXPECT_EQ(base64_decode(req.at("range_end").get<std::string>()), "lk0");
  EXPECT_EQ(req.at("start_revision"), "5");
  EXPECT_EQ(req.at("prev_kv"), true);
}

TEST(EtcdClientTest, WatchCanceledForCompactionThrowsNamingTheRevision) {
  FakeGateway gw;
  gw.server().Post("/v3/watch", [](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [](std::size_t, httplib::DataSink& sink) {
      const std::string m = R"({"result":{"header":{"raft_term":"2"},"created":true}})" "\n"
                            R"({"result":{"header":{"raft_term":"2"},"canceled":true,"compact_revision":"5"}})" "\n";
      sink.write(m.data(), m.size());
      sink.done();
      return true;
    });
  });
  gw.start();
  EtcdClient etcd(gw.url());
  try {
    etcd.watch("x/", 2, [](const WatchEvent&) {}, std::stop_token{});
    FAIL() << "no error";
  } catch (const EtcdError& e) {
    EXPECT_NE(std::string(e.what()).find("compact_revision 5"), std::string::npos) << e.what();
  }
}

TEST(EtcdClientTest, StopEndsAnIdleWatch) {
  Gate gate;
  FakeGateway gw;
  Gate::OpenAtExit open_at_exit{gate};
  gw.server().Post("/v3/watch", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [&](std::size_t offset, httplib::DataSink& sink) {
      if (offset == 0) {
        const std::string m = R"({"result":{"header":)" + header(3) + R"(,"events":[{"kv":{"key":")" +
                              base64_encode("w/1") + R"(","create_revision":"3","mod_revision":"3","version":"1"}}]}})" "\n";
        sink.write(m.data(), m.size());
        return true;
      }
      gate.wait();  // then stay silent, as an idle etcd watch does
      sink.done();
      return true;
    });
  });
  gw.start();
  EtcdClient etcd(gw.url());
  test::Collected<WatchEvent> events;
  std::int64_t last = 0;
  std::chrono::steady_clock::time_point returned;
  // A jthread: an ASSERT that ends the test early still stops and joins it.
  std::jthread watcher([&](std::stop_token stop) {
    last = etcd.watch("w/", 0, [&](const WatchEvent& e) { events.push(e); }, stop);
    returned = std::chrono::steady_clock::now();
  });
  ASSERT_TRUE(events.wait_until([](const auto& v) { return v.size() == 1; }));
  const auto requested = std::chrono::steady_clock::now();
  watcher.request_stop();
  watcher.join();  // returns although the server sends nothing more
  EXPECT_EQ(last, 3);
  EXPECT_LT(returned - requested, 1s) << "the stop closes the connection: no wait for the 30 min read bound";
}

// etcd's gateway ends every reply, errors included, with the trailer Grpc-Trailer-Content-Type
// (cpp-httplib 0.11.4 reported a read error there, after the whole body had arrived).
TEST(EtcdClientTest, AnErrorReplyEndingWithAGrpcTrailerIsReadWhole) {
  using testing::RawHttpServer;
  RawHttpServer server([](int fd, const std::string&, RawHttpServer&) {
    RawHttpServer::send_all(fd, RawHttpServer::chunked_reply("404 Not Found",
                                                             {R"({"error":"etcdserver: requested lease not found",)",
                                                              R"("code":5,"message":"etcdserver: requested lease not found"})"}));
  });
  EtcdClient etcd(server.url());
  EXPECT_FALSE(etcd.lease_revoke(99));  // HTTP 404, grpc code 5: not found, not a transport error
  try {
    (void)etcd.lease_time_to_live(99);
    FAIL() << "a 404 reply returned";
  } catch (const EtcdError& e) {
    EXPECT_EQ(e.http_status(), 404);
    EXPECT_EQ(e.grpc_code(), 5);
    EXPECT_EQ(e.etcd_message(), "etcdserver: requested lease not found");
  }
}

TEST(EtcdClientTest, AWatchBodyEndingWithTrailersIsReadWhole) {
  using testing::RawHttpServer;
  const std::string key = base64_encode("t/1");
  RawHttpServer server([&](int fd, const std::string&, RawHttpServer&) {
    RawHttpServer::send_all(fd, RawHttpServer::chunked_reply("200 OK", {
        R"({"result":{"header":)" + header(4) + R"(,"created":true}})" "\n",
        R"({"result":{"header":)" + header(5) + R"(,"events":[{"kv":{"key":")" + key +
            R"(","create_revision":"5","mod_revision":"5","version":"1"}}]}})" "\n",
        // the last message without its newline, right before the trailer
        R"({"result":{"header":)" + header(6) + R"(,"events":[{"type":"DELETE","kv":{"key":")" + key +
            R"(","mod_revision":"6"}}]}})"}));
  });
  EtcdClient etcd(server.url());
  std::vector<WatchEvent> events;
  EXPECT_EQ(etcd.watch("t/", 0, [&](const WatchEvent& e) { events.push_back(e); }, std::stop_token{}), 6);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, WatchEvent::Type::kPut);
  EXPECT_EQ(events[0].revision(), 5);
  EXPECT_EQ(events[1].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(events[1].kv.key, "t/1");
  EXPECT_EQ(events[1].revision(), 6);
}

TEST(EtcdClientTest, ASilentEtcdIsAReadTimeoutTransportError) {
  using testing::RawHttpServer;
  RawHttpServer server([](int, const std::string&, RawHttpServer& self) { self.hold(); });
  EtcdClient etcd(server.url(), EtcdClient::Options{1000ms, 250ms});
  try {
    (void)etcd.put("k", "v");
    FAIL() << "put against a silent server returned";
  } catch (const EtcdError& e) {
    EXPECT_TRUE(e.transport());
    EXPECT_EQ(e.etcd_message(), "Read timeout (no reply within 250 ms)");
    EXPECT_EQ(std::string(e.what()), "etcd " + server.url() + " POST /v3/kv/put: Read timeout (no reply within 250 ms)");
  }
}

TEST(EtcdClientTest, LockReturnsNulloptWhenStoppedOrTimedOut) {
  Gate gate;
  FakeGateway gw;
  Gate::OpenAtExit open_at_exit{gate};
  test::Collected<int> entered;
  gw.server().Post("/v3/lock/lock", [&](const httplib::Request&, httplib::Response& res) {
    entered.push(1);
    gate.wait();  // a contended lock: no reply until the holder lets go
    res.set_content(R"({"header":)" + header(4) + R"(,"key":")" + base64_encode("l/1") + "\"}", "application/json");
  });
  gw.start();
  EtcdClient etcd(gw.url());

  std::optional<std::optional<LockResult>> stopped_result;
  std::jthread waiter([&](std::stop_token stop) { stopped_result = etcd.lock("l", 1, 60s, stop); });
  ASSERT_TRUE(entered.wait_until([](const auto& v) { return v.size() == 1; }));
  waiter.request_stop();
  waiter.join();
  ASSERT_TRUE(stopped_result.has_value());
  EXPECT_FALSE(stopped_result->has_value());

  EXPECT_EQ(etcd.lock("l", 1, 200ms), std::nullopt);  // its own deadline

  std::stop_source already;
  already.request_stop();
  EXPECT_EQ(etcd.lock("l", 1, 60s, already.get_token()), std::nullopt);
}

TEST(EmbeddedEtcdTest, MissingBinaryHasAnInstallHint) {
  test::TempDir dir("etcd-missing");
  EmbeddedEtcd::Options options;
  options.binary = dir.path() / "no-such-etcd";
  EmbeddedEtcd etcd(options);
  try {
    etcd.start(dir.path() / "data", dir.path() / "etcd.log");
    FAIL() << "started a missing binary";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "etcd not found: install Debian's etcd-server (apt-get install etcd-server)");
  }
  EXPECT_FALSE(etcd.running());
  EXPECT_TRUE(etcd.client_url().empty());
}

TEST(PauseDetectorTest, ReportsOnlyGapsAboveTheThreshold) {
  PauseDetector d(50ms);
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  EXPECT_EQ(d.observe(t0), std::nullopt);  // baseline
  EXPECT_EQ(d.observe(t0 + 5ms), std::nullopt);
  EXPECT_EQ(d.observe(t0 + 55ms), std::nullopt);  // exactly 50 ms: not above
  auto gap = d.observe(t0 + 55ms + 6s);
  ASSERT_TRUE(gap);
  EXPECT_EQ(*gap, 6s);
  EXPECT_EQ(d.observe(t0 + 55ms + 6s + 5ms), std::nullopt);
}

TEST(EventWriterTest, WritesOneStampedJsonLinePerEventFromManyThreads) {
  std::ostringstream out;
  EventWriter writer(out, "w7");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&writer, t] {
      for (int i = 0; i < 100; ++i) {
        Event e;
        e.kind = EventKind::kWriteOk;
        e.token = t;
        e.chunk = i;
        e.key = "k";
        writer.emit(e);
      }
    });
  for (auto& t : threads) t.join();
  std::istringstream in(out.str());
  std::string line;
  int n = 0;
  std::int64_t last_src = 0;
  while (std::getline(in, line)) {
    Event e = event_from_json_line(line);
    EXPECT_EQ(e.source, "w7");
    EXPECT_EQ(e.kind, EventKind::kWriteOk);
    EXPECT_GE(e.src_ns, last_src);
    last_src = e.src_ns;
    ++n;
  }
  EXPECT_EQ(n, 400);
}

/// argv for parse_worker_cli; points into `args`, which must outlive it.
std::vector<const char*> argv_of(const std::vector<std::string>& args) {
  std::vector<const char*> v{"fencecheck-worker"};
  for (const auto& a : args) v.push_back(a.c_str());
  return v;
}

const std::vector<std::string> kRequired = {"--id", "w1", "--etcd", "http://127.0.0.1:2379", "--store",
                                            "http://127.0.0.1:8080", "--lock", "jobs", "--key", "ledger"};

TEST(WorkerCliTest, DefaultsMatchTheDocumentedOnes) {
  auto argv = argv_of(kRequired);
  WorkerCli cli = parse_worker_cli(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(cli.options) << cli.output;
  const WorkerOptions& o = *cli.options;
  EXPECT_EQ(o.id, "w1");
  EXPECT_EQ(o.ttl, 2s);
  EXPECT_EQ(o.segments, 3);
  EXPECT_EQ(o.chunks, 4);
  EXPECT_EQ(o.chunk_bytes, 256u);
  EXPECT_EQ(o.chunk_interval, 50ms);
  EXPECT_EQ(o.tick, 5ms);
  EXPECT_EQ(o.pause_threshold, 50ms);
  EXPECT_FALSE(o.keepalive_interval);
  EXPECT_EQ(o.effective_keepalive_interval(), 666ms);
  EXPECT_EQ(o.max_acquires, 20);
  EXPECT_EQ(o.job, JobKind::kSegments);
  EXPECT_EQ(o.increments, 10);
  EXPECT_FALSE(o.retry_same_token);
  EXPECT_FALSE(o.release_by_name);
  EXPECT_FALSE(o.check_lease_before_write);
  EXPECT_FALSE(o.abort_on_pause);
  EXPECT_EQ(o.token_source, TokenSource::kIssuer);
  EXPECT_EQ(o.self_stop_at, SelfStopAt::kNever);
  EXPECT_EQ(o.keepalive, KeepaliveMode::kThread);
  EXPECT_EQ(o.cpu_per_write, 0ms);
}

TEST(WorkerCliTest, ParsesEveryFlag) {
  auto args = kRequired;
  for (const char* a : {"--ttl-s", "5", "--segments", "2", "--chunks", "7", "--chunk-bytes", "64", "--chunk-interval-ms",
                        "0", "--tick-ms", "2", "--pause-threshold-ms", "30", "--keepalive-interval-ms", "400",
                        "--max-acquires", "3", "--seed", "99", "--lock-timeout-ms", "1500", "--log-level", "debug"})
    args.emplace_back(a);
  auto argv = argv_of(args);
  WorkerCli cli = parse_worker_cli(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(cli.options) << cli.output;
  const WorkerOptions& o = *cli.options;
  EXPECT_EQ(o.ttl, 5s);
  EXPECT_EQ(o.segments, 2);
  EXPECT_EQ(o.chunks, 7);
  EXPECT_EQ(o.chunk_bytes, 64u);
  EXPECT_EQ(o.chunk_interval, 0ms);
  EXPECT_EQ(o.tick, 2ms);
  EXPECT_EQ(o.pause_threshold, 30ms);
  EXPECT_EQ(o.effective_keepalive_interval(), 400ms);
  EXPECT_EQ(o.max_acquires, 3);
  EXPECT_EQ(o.seed, 99u);
  EXPECT_EQ(o.lock_timeout, 1500ms);
  EXPECT_EQ(cli.log_level, "debug");
}

TEST(WorkerCliTest, ParsesEveryDesignAndJobFlag) {
  auto args = kRequired;
  for (const char* a : {"--job", "side-effect", "--increments", "7", "--retry-same-token",
                        "--release-by-name", "--check-lease-before-write", "--abort-on-pause-ms", "120",
                        "--token-source", "timestamp", "--self-stop-at", "check", "--keepalive", "inline",
                        "--cpu-per-write-ms", "5"})
    args.emplace_back(a);
  auto argv = argv_of(args);
  WorkerCli cli = parse_worker_cli(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(cli.options) << cli.output;
  const WorkerOptions& o = *cli.options;
  EXPECT_EQ(o.job, JobKind::kSideEffect);
  EXPECT_EQ(o.increments, 7);
  EXPECT_TRUE(o.retry_same_token);
  EXPECT_TRUE(o.release_by_name);
  EXPECT_TRUE(o.check_lease_before_write);
  EXPECT_EQ(o.abort_on_pause, 120ms);
  EXPECT_EQ(o.token_source, TokenSource::kTimestamp);
  EXPECT_EQ(o.self_stop_at, SelfStopAt::kCheck);
  EXPECT_EQ(o.keepalive, KeepaliveMode::kInline);
  EXPECT_EQ(o.cpu_per_write, 5ms);

  for (const auto& [flag, kind] : std::vector<std::pair<std::string, JobKind>>{
           {"segments", JobKind::kSegments}, {"counter", JobKind::kCounter}, {"side-effect", JobKind::kSideEffect}}) {
    auto a = kRequired;
    a.insert(a.end(), {"--job", flag});
    auto v = argv_of(a);
    WorkerCli c = parse_worker_cli(static_cast<int>(v.size()), v.data());
    ASSERT_TRUE(c.options) << c.output;
    EXPECT_EQ(c.options->job, kind);
  }
}

TEST(WorkerCliTest, TheLockServiceIsAnEndpointJsonOrEtcdsShorthand) {
  // --etcd URL is short for the etcd endpoint JSON.
  auto argv = argv_of(kRequired);
  WorkerCli cli = parse_worker_cli(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(cli.options) << cli.output;
  EXPECT_EQ(cli.options->lock_service_endpoint(),
            nlohmann::json::parse(R"({"kind":"etcd","endpoints":["http://127.0.0.1:2379"]})"));

  const std::vector<std::string> base{"--id", "w1", "--store", "http://127.0.0.1:8080", "--lock", "jobs", "--key", "ledger"};
  auto with = [&](std::vector<std::string> extra) {
    auto a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    auto v = argv_of(a);
    return parse_worker_cli(static_cast<int>(v.size()), v.data());
  };
  const std::string etcd_json = R"({"kind":"etcd","endpoints":["http://10.0.0.1:2379"]})";
  cli = with({"--lock-service", etcd_json, "--ttl-ms", "1500", "--token-source", "issuer",
              "--lock-service-timeout-ms", "700"});
  ASSERT_TRUE(cli.options) << cli.output;
  EXPECT_EQ(cli.options->lock_service_endpoint(), nlohmann::json::parse(etcd_json));
  EXPECT_EQ(cli.options->ttl, 1500ms);
  EXPECT_EQ(cli.options->token_source, TokenSource::kIssuer);
  EXPECT_EQ(cli.options->lock_service_timeout, 700ms);
  // The old names stay: --etcd-timeout-ms, --token-source etcd.
  cli = with({"--lock-service", etcd_json, "--etcd-timeout-ms", "900", "--token-source", "etcd"});
  ASSERT_TRUE(cli.options) << cli.output;
  EXPECT_EQ(cli.options->lock_service_timeout, 900ms);
  EXPECT_EQ(cli.options->token_source, TokenSource::kIssuer);

  struct Case {
    std::vector<std::string> extra;
    std::string expect;
  };
  for (const Case& c : std::vector<Case>{
           {{}, "exactly one of --etcd and --lock-service is required"},
           {{"--lock-service", etcd_json, "--etcd", "http://127.0.0.1:2379"}, "excludes"},
           {{"--lock-service", R"({"kind":"consul"})"}, "--lock-service: unknown lock service kind \"consul\"; expected one of: etcd, zookeeper, redis, redlock, none"},
           {{"--lock-service", R"({"kind":"etcd"})"}, "--lock-service: etcd endpoint: expected \"endpoints\""},
           {{"--lock-service", "etcd"}, "--lock-service must be a JSON object"},
           {{"--lock-service", etcd_json, "--ttl-s", "2", "--ttl-ms", "2000"}, "excludes"},
           {{"--lock-service", etcd_json, "--ttl-ms", "0"}, "--ttl-s / --ttl-ms must be >= 1 ms, got 0 ms"}}) {
    cli = with(c.extra);
    EXPECT_FALSE(cli.options) << c.expect;
    EXPECT_EQ(cli.exit_code, kWorkerBadArgs) << c.expect;
    EXPECT_NE(cli.output.find(c.expect), std::string::npos) << cli.output;
  }
}

TEST(WorkerNamesTest, RoundTripAndUnknownNames) {
  for (auto k : {JobKind::kSegments, JobKind::kCounter, JobKind::kSideEffect})
    EXPECT_EQ(job_kind_from_name(job_kind_name(k)), k);
  for (auto t : {TokenSource::kIssuer, TokenSource::kTimestamp}) EXPECT_EQ(token_source_from_name(token_source_name(t)), t);
  EXPECT_EQ(token_source_name(TokenSource::kIssuer), "issuer");
  EXPECT_EQ(token_source_from_name("etcd"), TokenSource::kIssuer);  // the old name
  EXPECT_EQ(self_stop_at_from_name("check"), SelfStopAt::kCheck);
  for (auto m : {KeepaliveMode::kThread, KeepaliveMode::kInline})
    EXPECT_EQ(keepalive_mode_from_name(keepalive_mode_name(m)), m);
  EXPECT_EQ(keepalive_mode_name(KeepaliveMode::kInline), "inline");
  EXPECT_FALSE(keepalive_mode_from_name("Inline"));
  EXPECT_EQ(self_stop_at_from_name("effect"), SelfStopAt::kEffect);
  EXPECT_EQ(self_stop_at_name(SelfStopAt::kEffect), "effect");
  EXPECT_FALSE(self_stop_at_from_name("never"));
  EXPECT_FALSE(job_kind_from_name("Segments"));
  EXPECT_FALSE(token_source_from_name(""));
  EXPECT_EQ(job_kind_name(JobKind::kSideEffect), "side-effect");
  for (auto m : {EffectMode::kFenced, EffectMode::kUnfenced, EffectMode::kIdempotent})
    EXPECT_EQ(effect_mode_from_name(effect_mode_name(m)), m);
  EXPECT_EQ(effect_mode_names(), (std::vector<std::string_view>{"fenced", "unfenced", "idempotent"}));
}

TEST(WorkerCliTest, BadValuesExitTwoNamingTheFlag) {
  struct Case {
    std::vector<std::string> extra;
    std::string expect;
  };
  for (const Case& c : std::vector<Case>{{{"--chunks", "0"}, "--chunks"},
                                         {{"--id", "bad id"}, "--id"},
                                         {{"--tick-ms", "60"}, "--pause-threshold-ms"},
                                         {{"--job", "batch"}, "--job"},
                                         // the store's configuration guards effects, not the worker (issue 14)
                                         {{"--effect", "unfenced"}, "--effect"},
                                         {{"--token-source", "ntp"}, "--token-source"},
                                         {{"--self-stop-at", "write"}, "--self-stop-at"},
                                         {{"--self-stop-at", "check"}, "--self-stop-at check needs --check-lease-before-write"},
                                         {{"--self-stop-at", "effect"}, "--self-stop-at effect needs --job side-effect"},
                                         {{"--abort-on-pause-ms", "5"}, "--abort-on-pause-ms must be greater than --tick-ms"},
                                         {{"--increments", "0"}, "--increments must be >= 1"},
                                         {{"--keepalive", "lazy"}, "--keepalive"},
                                         {{"--cpu-per-write-ms", "60001"}, "--cpu-per-write-ms must be 0..60000, got 60001"},
                                         {{"--cpu-per-write-ms", "-1"}, "--cpu-per-write-ms must be 0..60000, got -1"},
                                         {{"--segments", "x"}, "--segments"}}) {
    auto args = kRequired;
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    auto argv = argv_of(args);
    WorkerCli cli = parse_worker_cli(static_cast<int>(argv.size()), argv.data());
    EXPECT_FALSE(cli.options) << c.expect;
    EXPECT_EQ(cli.exit_code, kWorkerBadArgs) << c.expect;
    EXPECT_NE(cli.output.find(c.expect), std::string::npos) << cli.output;
  }
  const std::vector<std::string> missing_args{"--id", "w1"};
  auto missing = argv_of(missing_args);
  WorkerCli cli = parse_worker_cli(static_cast<int>(missing.size()), missing.data());
  EXPECT_EQ(cli.exit_code, kWorkerBadArgs);
  EXPECT_NE(cli.output.find("--lock is required"), std::string::npos) << cli.output;

  // The lock service: exactly one of --etcd and --lock-service.
  const std::vector<std::string> no_service_args{"--id", "w1", "--store", "http://127.0.0.1:8080", "--lock", "jobs",
                                                 "--key", "ledger"};
  auto no_service = argv_of(no_service_args);
  cli = parse_worker_cli(static_cast<int>(no_service.size()), no_service.data());
  EXPECT_EQ(cli.exit_code, kWorkerBadArgs);
  EXPECT_NE(cli.output.find("exactly one of --etcd and --lock-service is required"), std::string::npos) << cli.output;

  const std::vector<std::string> help_args{"--help"};
  auto help = argv_of(help_args);
  cli = parse_worker_cli(static_cast<int>(help.size()), help.data());
  EXPECT_EQ(cli.exit_code, 0);
  EXPECT_NE(cli.output.find("--pause-threshold-ms"), std::string::npos);
}

}  // namespace
}  // namespace fencecheck
