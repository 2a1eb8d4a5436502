// The embedded etcd cluster (lock_service.members: 3; issue 35) against real etcd-server
// processes this test starts through the kind: its members and leader, a member killed and
// restarted on its data, and the issuer watch moving to another member when the one it watches
// is stopped (SIGSTOP) or killed, missing no grant and no delete: the watched history is compared
// with a read of the lock's key revisions at the end (a fresh watch from the start revision:
// etcd keeps every revision, and nothing compacts the embedded cluster).
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/locks/etcd/etcd_client.h"
#include "fencecheck/locks/lock_client.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "../locks/watch_sink.h"
#include "../support/fake_resource_fields.h"
#include "test_support.h"

namespace fencecheck::locks {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class EtcdClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kind_ = find_lock_service_kind("etcd");
    ASSERT_NE(kind_, nullptr);
    const fs::path dir = dir_.path();
    LockServiceRunContext ctx{dir, [dir](const std::string& name) { return dir / (name + ".log"); }, "cluster-test"};
    ctx.members = 3;  // on loopback: no member_places
    const auto started = std::chrono::steady_clock::now();
    instance_ = kind_->open({}, kind_->parse(fields_), ctx);
    startup_ = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  }
  void TearDown() override {
    // A member a test stopped must not stay stopped: SIGCONT before the instance ends them.
    for (const auto& m : instance_->members())
      if (m.pid > 0) ::kill(m.pid, SIGCONT);
  }

  /// `op` against member `index`, retried (every 20 ms, at most 15 s) while the cluster has no
  /// quorum or elects a leader: a put or delete fails then and is not applied.
  template <typename Op>
  auto on_member(int index, Op&& op) {
    const EtcdClient c(instance_->members().at(static_cast<std::size_t>(index - 1)).endpoint,
                       EtcdClient::Options{200ms, 1000ms});
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while (true) {
      try {
        return op(c);
      } catch (const EtcdError&) {
        if (std::chrono::steady_clock::now() > deadline) throw;
        std::this_thread::sleep_for(20ms);
      }
    }
  }

  testing::FakeFields fields_;
  test::TempDir dir_{"etcd-cluster"};
  const LockServiceKind* kind_ = nullptr;
  std::unique_ptr<LockServiceInstance> instance_;
  std::chrono::milliseconds startup_{0};
};

TEST_F(EtcdClusterTest, ThreeMembersEachItsOwnProcessAndDataMemberOneLeading) {
  const auto members = instance_->members();
  ASSERT_EQ(members.size(), 3u);
  std::set<int> pids;
  for (std::size_t i = 0; i < members.size(); ++i) {
    EXPECT_EQ(members[i].index, static_cast<int>(i + 1));
    EXPECT_GT(members[i].pid, 0);
    pids.insert(members[i].pid);
    EXPECT_TRUE(std::filesystem::exists(members[i].data_dir / "member")) << members[i].data_dir;
    EXPECT_EQ(members[i].address, "127.0.0.1");
    EXPECT_TRUE(EtcdClient(members[i].endpoint).health());
  }
  EXPECT_EQ(pids.size(), 3u);
  const nlohmann::json e = instance_->endpoint();
  ASSERT_EQ(e["endpoints"].size(), 3u);
  EXPECT_EQ(e["endpoints"][1], members[1].endpoint);
  EXPECT_EQ(instance_->worker_env().at("ETCDCTL_ENDPOINTS"),
            members[0].endpoint + "," + members[1].endpoint + "," + members[2].endpoint);
  std::string why;
  EXPECT_EQ(instance_->leader_member(why), 1) << why;
  EXPECT_NE(why.find("member 2's status: leader member 1"), std::string::npos) << why;
  // What the issue asks of the start-up (3 s or less on 2 cores) is a timing goal: measured and
  // recorded here, asserted only as a generous bound so that a loaded CI machine does not fail it.
  RecordProperty("startup_ms", static_cast<int>(startup_.count()));
  std::cout << "3-member etcd cluster ready in " << startup_.count() << " ms\n";
  EXPECT_LT(startup_, 10s);
}

TEST_F(EtcdClusterTest, ALeaderKilledLosesTheLeadershipAndRestartsOnItsDataKeepingTheRevisions) {
  const std::int64_t before = on_member(1, [](const EtcdClient& c) { return c.put("k", "v1"); });
  instance_->stop_member(1, /*kill9=*/true);
  EXPECT_EQ(instance_->members()[0].pid, 0);
  std::string why;
  std::optional<int> leader;
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  while (!(leader = instance_->leader_member(why)) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(leader.has_value()) << why;
  EXPECT_NE(*leader, 1);
  EXPECT_NE(why.find("member 1 is down"), std::string::npos) << why;
  const std::int64_t during = on_member(2, [](const EtcdClient& c) { return c.put("k", "v2"); });
  EXPECT_GT(during, before);
  instance_->start_member(1);
  EXPECT_GT(instance_->members()[0].pid, 0);
  // Member 1 replayed its WAL and caught up: it serves the value written while it was down.
  const auto kv = on_member(1, [](const EtcdClient& c) { return c.range("k"); });
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->value, "v2");
  EXPECT_EQ(kv->mod_revision, during);
}

/// The on_failover sentences a lock client said, thread-safe.
struct ClusterFailovers {
  std::mutex mu;
  std::vector<std::string> said;
  LockClientOptions options(std::chrono::milliseconds request) {
    LockClientOptions o{500ms, request, {}};
    o.on_failover = [this](const std::string& what) {
      std::lock_guard lock(mu);
      said.push_back(what);
    };
    return o;
  }
  std::vector<std::string> all() {
    std::lock_guard lock(mu);
    return said;
  }
};

// What fencecheck-worker does with a 3-member cluster (its endpoint JSON lists every member, its
// own first): the holder's member, the leader, is killed; its keepalives go to the next member,
// which forwards them to the new leader, and its lease, key and lock outlive the member.
TEST_F(EtcdClusterTest, AHolderWhoseMemberIsKilledKeepsItsLeaseAndLockThroughTheNext) {
  const auto members = instance_->members();
  ClusterFailovers moves;
  auto client = make_lock_client(instance_->endpoint(), moves.options(3000ms));
  EXPECT_EQ(client->describe(), "etcd " + members[0].endpoint);
  const Session s = client->open_session(2000ms);
  ASSERT_EQ(s.ttl, 2000ms);
  const auto held = client->acquire("cluster-test/lock", s, 5s, {});
  ASSERT_TRUE(held);
  std::string why;
  ASSERT_EQ(instance_->leader_member(why), 1) << why;

  // Renewals every TTL/3 on a thread of their own, as the worker's keepalive thread does; each
  // result kept ("" renewed, else why not).
  std::mutex results_mu;
  std::vector<std::string> results;
  std::jthread renewer([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      std::string r;
      try {
        r = client->keepalive(s) ? "" : "etcd says the lease is gone";
      } catch (const LockServiceError& e) {
        r = e.what();
      }
      {
        std::lock_guard lock(results_mu);
        results.push_back(r);
      }
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock lock(m);
      cv.wait_for(lock, stop, s.ttl / 3, [] { return false; });
    }
  });
  instance_->stop_member(1, /*kill9=*/true);
  // Three TTLs: the lease outlives its member only by being renewed through another (the first
  // renewal after the kill goes to member 2, which waits there for the election).
  std::this_thread::sleep_for(3 * s.ttl);

  // The holding stands: its key, with its lease and token, as member 3 sees it; another client
  // waits for the lock in vain.
  const auto kv = on_member(3, [&](const EtcdClient& c) { return c.range(held->lock_key); });
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->lease, s.id);
  EXPECT_EQ(kv->create_revision, held->token);
  auto other = make_lock_client(nlohmann::json{{"kind", "etcd"}, {"endpoints", {members[2].endpoint}}});
  const Session o = other->open_session(2000ms);
  EXPECT_FALSE(other->acquire("cluster-test/lock", o, 1500ms, {}).has_value());
  other->close_session(o);
  const auto remaining = client->remaining(s);
  renewer.request_stop();
  renewer.join();
  ASSERT_TRUE(remaining.has_value());
  EXPECT_GT(*remaining, 0ms);
  ASSERT_GE(results.size(), 8u);
  for (std::size_t i = 0; i < results.size(); ++i) EXPECT_EQ(results[i], "") << "renewal " << i;
  const auto said = moves.all();
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0].rfind("etcd member " + members[0].endpoint + " did not answer (", 0), 0u) << said[0];
  EXPECT_NE(said[0].find("the client moves to " + members[1].endpoint), std::string::npos) << said[0];
  EXPECT_EQ(client->describe(), "etcd " + members[1].endpoint);
  EXPECT_TRUE(client->release("cluster-test/lock", *held, s).existed);
  EXPECT_TRUE(client->close_session(s));
}

// A member that takes the request and never answers (SIGSTOP): a renewal is sent again to the
// next member in the same call; a write (the release's DeleteRange) is not, since what it did is
// unknown: the call fails as with one member, and only the transport moves.
TEST_F(EtcdClusterTest, AStoppedMemberMovesTheClientButAWriteOfUnknownOutcomeIsNotSentAgain) {
  const auto members = instance_->members();
  // Followers first (member 1 leads): stopping them leaves the leader and a quorum.
  ClusterFailovers moves;
  auto client = make_lock_client(
      nlohmann::json{{"kind", "etcd"}, {"endpoints", {members[1].endpoint, members[2].endpoint, members[0].endpoint}}},
      moves.options(1000ms));
  const Session s = client->open_session(5000ms);
  const auto held = client->acquire("cluster-test/lock", s, 5s, {});
  ASSERT_TRUE(held);

  ASSERT_EQ(::kill(members[1].pid, SIGSTOP), 0);
  const bool renewed = client->keepalive(s);
  ::kill(members[1].pid, SIGCONT);
  EXPECT_TRUE(renewed);
  EXPECT_EQ(client->describe(), "etcd " + members[2].endpoint);
  ASSERT_EQ(moves.all().size(), 1u);
  EXPECT_NE(moves.all()[0].find("Read timeout"), std::string::npos) << moves.all()[0];

  ASSERT_EQ(::kill(members[2].pid, SIGSTOP), 0);
  std::string failure;
  try {
    (void)client->release("cluster-test/lock", *held, s);
  } catch (const LockServiceError& e) {
    failure = e.what();
  }
  ::kill(members[2].pid, SIGCONT);
  EXPECT_EQ(failure.rfind("etcd " + members[2].endpoint + " POST /v3/kv/deleterange: Read timeout", 0), 0u)
      << "the release was not a failure of its own member: " << failure;
  EXPECT_EQ(client->describe(), "etcd " + members[0].endpoint);
  EXPECT_EQ(moves.all().size(), 2u);
  // The lease is the cluster's: renewed and revoked through the member the client moved to.
  EXPECT_TRUE(client->keepalive(s));
  EXPECT_TRUE(client->close_session(s));
}

/// (put?, key, revision, token) of each lock event, in order.
using Step = std::tuple<bool, std::string, std::int64_t, std::int64_t>;

TEST_F(EtcdClusterTest, TheWatchMovesToAnotherMemberAndMissesNoGrantAndNoDelete) {
  const std::string lock = "cluster-test/lock";
  testing::Sink sink;
  auto watch = instance_->watch(lock, sink.fn());
  const std::int64_t start = on_member(2, [](const EtcdClient& c) { return c.status().revision; });
  int n = 0;
  std::size_t changes = 0;  // puts and deletes made: each is one lock event
  const auto grant_and_delete = [&](int member, int count) {
    for (int i = 0; i < count; ++i, ++n) {
      const std::string key = lock + "/k" + std::to_string(n);
      on_member(member, [&](const EtcdClient& c) { return c.put(key, "x"); });
      ++changes;
      if (i % 2 == 0) {
        on_member(member, [&](const EtcdClient& c) { return c.delete_key(key).revision; });
        ++changes;
      }
    }
  };
  grant_and_delete(2, 4);
  ASSERT_TRUE(sink.wait_count(6));

  // The watched member (member 1, the first) stops: the watch must go on through another while it
  // is still stopped.
  const int pid1 = instance_->members()[0].pid;
  ASSERT_EQ(::kill(pid1, SIGSTOP), 0);
  grant_and_delete(2, 4);
  const bool moved = sink.wait_count(12, 20s);
  ::kill(pid1, SIGCONT);
  ASSERT_TRUE(moved) << "the watch delivered nothing while its member was stopped";

  // Then the member it moved to is killed: it moves again.
  instance_->stop_member(2, /*kill9=*/true);
  grant_and_delete(3, 4);
  EXPECT_TRUE(sink.wait_count(18, 20s));
  instance_->start_member(2);
  grant_and_delete(1, 2);
  watch->stop();

  // The lock's key revisions as etcd keeps them: every change from the start revision on, read
  // with a fresh watch (on member 3) up to the last revision written.
  const std::int64_t end = on_member(3, [](const EtcdClient& c) { return c.status().revision; });
  std::vector<Step> kept;
  std::stop_source done;
  std::jthread reader([&] {
    EtcdClient(instance_->members()[2].endpoint)
        .watch(lock, start + 1,
               [&](const WatchEvent& w) {
                 if (w.kv.key.find("~fencecheck-end") == std::string::npos)
                   kept.emplace_back(w.type == WatchEvent::Type::kPut, w.kv.key, w.revision(),
                                     w.type == WatchEvent::Type::kPut ? w.kv.create_revision
                                                                      : (w.prev_kv ? w.prev_kv->create_revision : 0));
                 if (w.revision() >= end) done.request_stop();
               },
               done.get_token());
  });
  reader.join();
  std::vector<Step> watched;
  for (const Event& e : sink.events())
    watched.emplace_back(e.kind == EventKind::kLockGrant, e.lock_key, e.revision.value_or(0), e.token.value_or(0));
  // At least every change made (a retried put whose first try was applied after all adds one: both
  // histories then hold it); and exactly what etcd kept, in its order.
  EXPECT_GE(watched.size(), changes);
  EXPECT_EQ(watched, kept);
}

}  // namespace
}  // namespace fencecheck::locks
