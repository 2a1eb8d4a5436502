// The etcd kind on the lock-service axis against a real etcd (Debian's etcd-server) it starts
// itself: EtcdLockClient (what fencecheck-worker does with the lock) and the kind's instance (what
// the harness does: endpoint JSON, worker env, the issuer watch, prior revisions, restarts).
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/locks/etcd/etcd_client.h"
#include "fencecheck/locks/lock_client.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "../support/fake_resource_fields.h"
#include "test_support.h"

namespace fencecheck::locks {
namespace {

using namespace std::chrono_literals;

/// Collects the issuer watch's events; waits for them (bounded) by condition, not by sleeping.
struct Sink {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Event> events;
  std::function<void(Event)> fn() {
    return [this](Event e) {
      std::lock_guard lock(mu);
      events.push_back(std::move(e));
      cv.notify_all();
    };
  }
  bool wait_for(std::size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 20s, [&] { return events.size() >= n; });
  }
};

class EtcdKindTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kind_ = find_lock_service_kind("etcd");
    ASSERT_NE(kind_, nullptr);
    ctx_.run_dir = dir_.path();
    ctx_.log_path = [this](const std::string& name) { return dir_.path() / (name + ".log"); };
    ctx_.run_id = "t";
    instance_ = kind_->open({}, kind_->parse(fields_), ctx_);
  }
  /// No fields: etcd has none of its own.
  testing::FakeFields fields_;

  test::TempDir dir_{"etcd-kind"};
  const LockServiceKind* kind_ = nullptr;
  LockServiceRunContext ctx_;
  std::unique_ptr<LockServiceInstance> instance_;
};

TEST_F(EtcdKindTest, TheKindChecksItsEndpointsAndLeases) {
  EXPECT_EQ(kind_->name(), "etcd");
  EXPECT_TRUE(kind_->fields().empty());
  EXPECT_EQ(kind_->check_endpoint("http://127.0.0.1:2379"), "");
  EXPECT_EQ(kind_->check_endpoint("https://etcd.staging:2379/"), "");
  EXPECT_EQ(kind_->check_endpoint("127.0.0.1:2379"),
            "expected an endpoint URL like \"http://127.0.0.1:2379\", got \"127.0.0.1:2379\"");
  EXPECT_NE(kind_->check_endpoint("http://127.0.0.1:70000"), "");
  EXPECT_EQ(kind_->check_lease_ttl(2000ms, "2s"), "");
  EXPECT_EQ(kind_->check_lease_ttl(1500ms, "1500ms"),
            "etcd leases are whole seconds: expected a whole number of seconds like \"2s\", got \"1500ms\"");
}

TEST_F(EtcdKindTest, TheInstanceTellsWorkersWhereItIs) {
  const nlohmann::json ep = instance_->endpoint();
  EXPECT_EQ(ep["kind"], "etcd");
  ASSERT_EQ(ep["endpoints"].size(), 1u);
  const std::string url = ep["endpoints"][0];
  EXPECT_EQ(url.rfind("http://127.0.0.1:", 0), 0u) << url;
  EXPECT_EQ(instance_->endpoints_text(), url);
  EXPECT_EQ(instance_->worker_env(), (std::map<std::string, std::string>{{"ETCDCTL_ENDPOINTS", url}, {"ETCDCTL_API", "3"}}));
  EXPECT_TRUE(instance_->healthy());
  EXPECT_GT(instance_->pid(), 0);
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "etcd-data"));
}

TEST_F(EtcdKindTest, ALockClientGrantsTheKeysCreateRevisionAndTheWatchSeesTheSame) {
  Sink sink;
  auto watch = instance_->watch("jobs", sink.fn());
  instance_->advance(5);  // outside the lock prefix: the watch sees nothing of it
  auto client = make_lock_client(instance_->endpoint());
  EXPECT_EQ(client->kind(), "etcd");
  const Session s = client->open_session(2000ms);
  EXPECT_NE(s.id, 0);
  EXPECT_EQ(s.ttl, 2000ms);
  auto held = client->acquire("jobs", s, 5s, {});
  ASSERT_TRUE(held);
  const EtcdClient etcd(instance_->endpoints_text());
  const auto kv = etcd.range(held->lock_key);
  ASSERT_TRUE(kv);
  EXPECT_EQ(held->token, kv->create_revision);
  EXPECT_GE(held->token, 7) << "5 prior revisions came first";
  EXPECT_EQ(held->revision, held->token) << "uncontended: the Lock reply's header is the key's own revision";
  EXPECT_TRUE(client->keepalive(s));
  const auto left = client->remaining(s);
  ASSERT_TRUE(left);
  EXPECT_GT(*left, 0ms);
  EXPECT_LE(*left, 2000ms);

  const Released r = client->release("jobs", *held, s);
  EXPECT_TRUE(r.existed);
  ASSERT_TRUE(r.revision);
  EXPECT_GT(*r.revision, held->token);
  const Released again = client->release("jobs", *held, s);
  EXPECT_FALSE(again.existed) << "already gone: no delete, no revision";
  EXPECT_FALSE(again.revision);
  EXPECT_TRUE(client->close_session(s));
  EXPECT_FALSE(client->close_session(s)) << "a revoked lease is gone";
  EXPECT_FALSE(client->remaining(s));
  EXPECT_FALSE(client->keepalive(s));
  EXPECT_EQ(client->session_lost_detail(), "keepalive reply has no TTL: etcd says the lease is gone");

  ASSERT_TRUE(sink.wait_for(2));
  watch->stop();
  std::lock_guard lock(sink.mu);
  ASSERT_EQ(sink.events.size(), 2u) << "the end marker and the prior revisions are not lock events";
  EXPECT_EQ(sink.events[0].kind, EventKind::kLockGrant);
  EXPECT_EQ(sink.events[0].token, held->token);
  EXPECT_EQ(sink.events[0].lease_id, s.id);
  EXPECT_EQ(sink.events[0].lock_key, held->lock_key);
  EXPECT_EQ(sink.events[1].kind, EventKind::kLockDelete);
  EXPECT_EQ(sink.events[1].token, held->token);
  EXPECT_EQ(sink.events[1].revision, r.revision) << "the release's revision is the delete the issuer saw";
}

TEST_F(EtcdKindTest, TheWatchSeesTheLockNameItselfAndItsKeysButNotAnotherLockSharingThePrefix) {
  // python-etcd3 keeps its lock named N at the key "/locks/N" itself; v3lock at "<lock>/<lease>".
  // "/locks/orders/leaderx" and "/locks/orders/leader-2" are other locks' keys.
  Sink sink, slashed;
  auto watch = instance_->watch("/locks/orders/leader", sink.fn());
  auto slashed_watch = instance_->watch("/locks/orders/leader/", slashed.fn());  // the same lock
  const EtcdClient etcd(instance_->endpoints_text());
  const std::int64_t own = etcd.put("/locks/orders/leader", "python-etcd3 holder");
  etcd.put("/locks/orders/leaderx", "another lock");
  etcd.put("/locks/orders/leader-2", "another lock");
  const std::int64_t v3 = etcd.put("/locks/orders/leader/694d8c2f", "v3lock holder");
  const std::int64_t gone = etcd.delete_key("/locks/orders/leader").revision;
  etcd.delete_key("/locks/orders/leaderx");
  ASSERT_TRUE(sink.wait_for(3));
  ASSERT_TRUE(slashed.wait_for(3));
  watch->stop();
  slashed_watch->stop();
  std::lock_guard lock(sink.mu);
  ASSERT_EQ(sink.events.size(), 3u) << "the two sibling locks' puts and delete are not this lock's";
  std::lock_guard lock2(slashed.mu);
  ASSERT_EQ(slashed.events.size(), 3u) << "a trailing '/' names the same lock";
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(slashed.events[i].lock_key, sink.events[i].lock_key);
  EXPECT_EQ(sink.events[0].kind, EventKind::kLockGrant);
  EXPECT_EQ(sink.events[0].lock_key, "/locks/orders/leader");
  EXPECT_EQ(sink.events[0].token, own) << "the key's create_revision";
  EXPECT_EQ(sink.events[0].revision, own);
  EXPECT_EQ(sink.events[1].kind, EventKind::kLockGrant);
  EXPECT_EQ(sink.events[1].lock_key, "/locks/orders/leader/694d8c2f");
  EXPECT_EQ(sink.events[1].token, v3);
  EXPECT_EQ(sink.events[2].kind, EventKind::kLockDelete);
  EXPECT_EQ(sink.events[2].lock_key, "/locks/orders/leader");
  EXPECT_EQ(sink.events[2].token, own) << "the deleted key's create_revision, from prev_kv";
  EXPECT_EQ(sink.events[2].revision, gone);
}

TEST_F(EtcdKindTest, ReleaseByNameDeletesEveryHoldersKeyAndSaysWhose) {
  auto client = make_lock_client(instance_->endpoint());
  const Session a = client->open_session(5000ms), b = client->open_session(5000ms);
  auto held = client->acquire("q", a, 5s, {});
  ASSERT_TRUE(held);
  // b waits behind a; its key exists, so release-by-name deletes both.
  std::string b_result;
  std::thread waiter([&] {
    try {
      b_result = client->acquire("q", b, 10s, {}) ? "held" : "not held";
    } catch (const LockServiceError& e) {
      b_result = e.what();
    }
  });
  const EtcdClient etcd(instance_->endpoints_text());
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (etcd.range_prefix("q/").size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);  // polling a condition, bounded
  ASSERT_EQ(etcd.range_prefix("q/").size(), 2u);
  const auto deleted = client->release_by_name("q", a);
  waiter.join();
  ASSERT_EQ(deleted.size(), 2u);
  EXPECT_EQ(deleted[0].revision, deleted[1].revision) << "one DeleteRange, one revision";
  int own = 0;
  for (const auto& r : deleted) {
    EXPECT_TRUE(r.token);
    own += r.own ? 1 : 0;
    if (r.own) EXPECT_EQ(r.lease_id, a.id);
    else EXPECT_EQ(r.lease_id, b.id);
  }
  EXPECT_EQ(own, 1);
  // The waiter's Lock returns once a's key is gone, but its own key went with it: not acquired,
  // said as etcd's pitfall (etcd_lock_client.h), never a holding whose key is gone.
  EXPECT_NE(b_result.find("no longer exists with lease " + std::to_string(b.id)), std::string::npos) << b_result;
  client->close_session(a);
  client->close_session(b);
}

TEST_F(EtcdKindTest, ARestartOnFreshDataStartsTheRevisionsOverAtTheSameUrl) {
  const std::string url = instance_->endpoints_text();
  instance_->advance(20);
  const EtcdClient etcd(url);
  const std::int64_t before = etcd.put("probe", "x");
  EXPECT_GE(before, 22);
  instance_->stop_server();
  EXPECT_EQ(instance_->pid(), 0);
  EXPECT_FALSE(instance_->healthy());
  instance_->start_server(false);  // same data: the counter goes on
  EXPECT_EQ(instance_->endpoints_text(), url);
  EXPECT_GT(etcd.put("probe", "y"), before);
  instance_->stop_server();
  instance_->start_server(true);  // fresh data: it starts over
  EXPECT_EQ(instance_->endpoints_text(), url);
  EXPECT_LT(etcd.put("probe", "z"), before);
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "etcd-data-2"));
  EXPECT_NE(kind_->restart_effect({}).find("fresh data"), std::string::npos);
}

/// The on_failover sentences a client said (LockClientOptions::on_failover), thread-safe.
struct Failovers {
  std::mutex mu;
  std::vector<std::string> said;
  LockClientOptions options(std::chrono::milliseconds connect, std::chrono::milliseconds request) {
    LockClientOptions o{connect, request, {}};
    o.on_failover = [this](const std::string& what) {
      std::lock_guard lock(mu);
      said.push_back(what);
    };
    return o;
  }
};

TEST_F(EtcdKindTest, AClientGivenSeveralEndpointsMovesPastOneThatRefusesAndSaysSo) {
  const std::string url = instance_->endpoints_text();
  Failovers moves;
  auto client = make_lock_client(nlohmann::json{{"kind", "etcd"}, {"endpoints", {"http://127.0.0.1:9", url}}},
                                 moves.options(500ms, 2000ms));
  EXPECT_EQ(client->describe(), "etcd http://127.0.0.1:9");
  // Refused: the grant never left the client, so it is sent to the next endpoint in the same call.
  const Session s = client->open_session(2000ms);
  EXPECT_NE(s.id, 0);
  EXPECT_EQ(client->describe(), "etcd " + url);
  ASSERT_EQ(moves.said.size(), 1u);
  EXPECT_EQ(moves.said[0].rfind("etcd member http://127.0.0.1:9 did not answer (etcd endpoint http://127.0.0.1:9 unreachable: "
                                "POST /v3/lease/grant: Connection (", 0),
            0u)
      << moves.said[0];
  EXPECT_NE(moves.said[0].find("); the client moves to " + url), std::string::npos) << moves.said[0];
  // The calls after it stay on the member that answered.
  auto held = client->acquire("moves", s, 5s, {});
  ASSERT_TRUE(held);
  EXPECT_TRUE(client->keepalive(s));
  EXPECT_TRUE(client->release("moves", *held, s).existed);
  EXPECT_TRUE(client->close_session(s));
  EXPECT_EQ(moves.said.size(), 1u);
}

TEST(EtcdLockClient, NoMemberAnsweringIsOneErrorNamingEach) {
  Failovers moves;
  auto client = make_lock_client(
      nlohmann::json{{"kind", "etcd"}, {"endpoints", {"http://127.0.0.1:9", "http://127.0.0.1:10"}}},
      moves.options(500ms, 500ms));
  try {
    (void)client->open_session(2000ms);
    FAIL() << "granted a lease from nowhere";
  } catch (const LockServiceError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("etcd: no member answered (2 tried): etcd endpoint http://127.0.0.1:9 unreachable: ", 0), 0u)
        << what;
    EXPECT_NE(what.find("; etcd endpoint http://127.0.0.1:10 unreachable: "), std::string::npos) << what;
  }
  // Each member that did not answer moved the client once: back to the first.
  EXPECT_EQ(moves.said.size(), 2u);
  EXPECT_EQ(client->describe(), "etcd http://127.0.0.1:9");
}

TEST(EtcdLockClient, AnEndpointWithoutEndpointsOrOfAnUnknownKindIsRefused) {
  EXPECT_THROW((void)make_lock_client(nlohmann::json{{"kind", "etcd"}}), std::invalid_argument);
  EXPECT_THROW((void)make_lock_client(nlohmann::json{{"kind", "etcd"}, {"endpoints", {"127.0.0.1:2379"}}}),
               std::invalid_argument);
  // Every endpoint is checked, not only the first.
  EXPECT_THROW((void)make_lock_client(nlohmann::json{{"kind", "etcd"}, {"endpoints", {"http://127.0.0.1:2379", 7}}}),
               std::invalid_argument);
  EXPECT_THROW(
      (void)make_lock_client(nlohmann::json{{"kind", "etcd"}, {"endpoints", {"http://127.0.0.1:2379", "127.0.0.1:2380"}}}),
      std::invalid_argument);
  try {
    (void)make_lock_client(nlohmann::json{{"kind", "consul"}});
    FAIL() << "an unknown kind made a client";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "unknown lock service kind \"consul\"; expected one of: etcd, zookeeper, redis, redlock, none");
  }
}

TEST(EtcdLockClient, AnUnreachableEtcdIsALockServiceErrorNamingIt) {
  auto client = make_lock_client(nlohmann::json{{"kind", "etcd"}, {"endpoints", {"http://127.0.0.1:9"}}},
                                 LockClientOptions{500ms, 500ms, {}});
  try {
    (void)client->open_session(2000ms);
    FAIL() << "granted a lease from nowhere";
  } catch (const LockServiceError& e) {
    EXPECT_NE(std::string(e.what()).find("http://127.0.0.1:9"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fencecheck::locks
