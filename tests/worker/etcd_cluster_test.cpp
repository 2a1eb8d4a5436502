// The embedded etcd cluster (lock_service.members: 3; issue 35) against real etcd-server
// processes this test starts through the kind: its members and leader, a member killed and
// restarted on its data, and the issuer watch moving to another member when the one it watches
// is stopped (SIGSTOP) or killed, missing no grant and no delete: the watched history is compared
// with a read of the lock's key revisions at the end (a fresh watch from the start revision:
// etcd keeps every revision, and nothing compacts the embedded cluster).
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/locks/etcd/etcd_client.h"
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
