// The zookeeper kind's embedded ensemble (lock_service: {kind: zookeeper, members: 3}; issue 35)
// against real ZooKeeper 3.8 servers (Debian's zookeeper package) on loopback ports of their own:
// the member seam (members(), leader_member() from `srvr`, stop_member / start_member on the
// member's own data), and the issuer watch riding out each member's kill -9 and SIGSTOP without
// missing a grant or a delete (compared with what the holders were granted and with the lock
// znode's children, their czxids, its cversion and pzxid read at the end).
#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "fencecheck/locks/lock_client.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "fencecheck/process/server_support.h"
#include "watch_sink.h"
#include "zookeeper_server.h"
#include "zookeeper/zk_handle.h"
#include "zookeeper/zookeeper_watch.h"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
namespace locks = fencecheck::locks;
using fencecheck::Event;
using fencecheck::EventKind;
using fencecheck::locks::zk::Clock;
using fencecheck::testing::zookeeper_kind;

/// An ensemble of `members` started through the kind, as the orchestrator starts it.
struct Ensemble : fencecheck::testing::ZooKeeperServer {
  explicit Ensemble(int members) : ZooKeeperServer(members) {}

  /// The leader once one member says so (bounded: an election after a leader's loss takes
  /// syncLimit ticks and a round of votes).
  std::optional<int> wait_leader(std::string& why, std::chrono::milliseconds bound = 15s,
                                 std::optional<int> other_than = std::nullopt) {
    const auto deadline = Clock::now() + bound;
    for (;;) {
      const auto l = inst->leader_member(why);
      if (l && l != other_than) return l;
      if (Clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(50ms);
    }
  }

  /// Every member serving: one says leader, the others follower (bounded). A member resumed
  /// after SIGSTOP, or restarted, rejoins the quorum first.
  bool wait_all_serving(std::string& why, std::chrono::milliseconds bound = 20s) {
    const auto deadline = Clock::now() + bound;
    for (;;) {
      const auto l = inst->leader_member(why);
      std::size_t followers = 0;
      for (std::size_t at = why.find(": follower"); at != std::string::npos; at = why.find(": follower", at + 1))
        ++followers;
      if (l && followers + 1 == inst->members().size() && why.find(": leader") == why.rfind(": leader")) return true;
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(50ms);
    }
  }
};

std::string dump(const std::vector<Event>& events) {
  std::string out = "the history:\n";
  for (const auto& e : events) out += "  " + fencecheck::to_json_line(e) + "\n";
  return out;
}

TEST(ZooKeeperEnsemble, MembersLeaderAndAnswers) {
  Ensemble e(3);
  const auto ms = e.inst->members();
  ASSERT_EQ(ms.size(), 3u);
  std::set<int> pids;
  std::set<std::string> endpoints;
  for (int i = 1; i <= 3; ++i) {
    const auto& m = ms[static_cast<std::size_t>(i - 1)];
    EXPECT_EQ(m.index, i);
    EXPECT_GT(m.pid, 0);
    pids.insert(m.pid);
    endpoints.insert(m.endpoint);
    EXPECT_EQ(m.address, "127.0.0.1");
    EXPECT_EQ(m.netns, "");
    EXPECT_EQ(m.data_dir.filename().string(), "zookeeper-data-" + std::to_string(i));
    EXPECT_EQ(fencecheck::process::read_text(m.data_dir / "myid"), std::to_string(i) + "\n");
    // No clock fault in the plan (LockServiceRunContext::member_clock_faults): no clock shim.
    EXPECT_FALSE(std::filesystem::exists(m.data_dir / "clock-offset")) << m.data_dir;
    // Each member names every server of the ensemble.
    const std::string cfg = fencecheck::process::read_text(e.dir.path() / ("zookeeper-" + std::to_string(i) + ".cfg"));
    for (int j = 1; j <= 3; ++j) EXPECT_NE(cfg.find("server." + std::to_string(j) + "=127.0.0.1:"), std::string::npos) << cfg;
    EXPECT_NE(cfg.find("syncLimit=20"), std::string::npos) << cfg;
  }
  EXPECT_EQ(pids.size(), 3u);
  EXPECT_EQ(endpoints.size(), 3u);
  // Workers get every server in their connection string.
  EXPECT_EQ(e.inst->endpoint()["endpoints"].size(), 3u);
  const std::string text = e.inst->endpoints_text();
  EXPECT_EQ(std::count(text.begin(), text.end(), ','), 2) << text;

  std::string why;
  const auto lead = e.inst->leader_member(why);
  ASSERT_TRUE(lead) << why;
  EXPECT_EQ(*lead, 3) << "member 3 (the highest myid, started first) leads a fresh ensemble: " << why;
  EXPECT_NE(why.find("member 1: follower"), std::string::npos) << why;
  EXPECT_NE(why.find("member 3: leader"), std::string::npos) << why;
  EXPECT_TRUE(e.inst->healthy());

  // A lock through the whole connection string works, and its token is a czxid of epoch 1.
  auto c = locks::make_lock_client(e.inst->endpoint());
  const locks::Session s = c->open_session(4000ms);
  const auto held = c->acquire("fencecheck/ensemble", s, 10s, {});
  ASSERT_TRUE(held);
  EXPECT_EQ(held->token >> 32, 1) << "the first leader's epoch is 1: token " << held->token;
  EXPECT_TRUE(c->release("fencecheck/ensemble", *held, s).existed);
  c->close_session(s);
}

TEST(ZooKeeperEnsemble, KillTheLeaderThenRestartItOnItsData) {
  Ensemble e(3);
  std::string why;
  const auto first = e.wait_leader(why);
  ASSERT_TRUE(first) << why;
  const fs::path data = e.inst->members()[static_cast<std::size_t>(*first - 1)].data_dir;

  e.inst->stop_member(*first, /*kill9=*/true);
  EXPECT_EQ(e.inst->members()[static_cast<std::size_t>(*first - 1)].pid, 0);
  e.inst->stop_member(*first, true);  // idempotent
  const auto second = e.wait_leader(why, 15s, first);
  ASSERT_TRUE(second) << "the two others elect a new leader: " << why;
  EXPECT_NE(why.find("member " + std::to_string(*first) + " is down"), std::string::npos) << why;

  // A token after the election carries the new epoch.
  auto c = locks::make_lock_client(e.inst->endpoint());
  const locks::Session s = c->open_session(4000ms);
  const auto held = c->acquire("fencecheck/after-election", s, 10s, {});
  ASSERT_TRUE(held);
  EXPECT_GE(held->token >> 32, 2) << "a new leader raises the epoch: token " << std::hex << held->token;
  EXPECT_TRUE(c->release("fencecheck/after-election", *held, s).existed);
  c->close_session(s);

  e.inst->start_member(*first);
  const auto back = e.inst->members()[static_cast<std::size_t>(*first - 1)];
  EXPECT_GT(back.pid, 0);
  EXPECT_EQ(back.data_dir, data);
  EXPECT_TRUE(fs::exists(data / "version-2")) << "restarted on its own data";
  const auto now = e.inst->leader_member(why);
  ASSERT_TRUE(now) << why;
  EXPECT_EQ(*now, *second) << "the restarted member rejoins as a follower: " << why;
  EXPECT_NE(why.find("member " + std::to_string(*first) + ": follower"), std::string::npos) << why;
  EXPECT_THROW(e.inst->stop_member(4, true), std::out_of_range);
}

TEST(ZooKeeperEnsemble, WatchAccountsForEveryChangeWhileEachMemberIsKilled) {
  Ensemble e(3);
  const std::string lock = "fencecheck/ensemble-watch";
  fencecheck::testing::Sink sink;
  auto watch = e.inst->watch(lock, sink.fn());

  // Two holders take and release the lock in turn while each member in turn is killed and
  // restarted; every grant's token and every release is recorded.
  std::mutex mu;
  std::set<std::int64_t> granted, released;
  std::vector<std::string> errors;
  std::atomic<bool> done{false};
  std::atomic<int> rounds{0};
  auto holder = [&] {
    try {
      auto c = locks::make_lock_client(e.inst->endpoint());
      locks::Session s = c->open_session(8000ms);
      // A call that meets a member's loss (connection loss) is tried again: the session lives on
      // (8 s) while the client moves to another member.
      auto retried = [](auto&& call) {
        const auto deadline = Clock::now() + 15s;
        for (;;) {
          try {
            return call();
          } catch (const std::runtime_error&) {
            if (Clock::now() >= deadline) throw;
            std::this_thread::sleep_for(50ms);
          }
        }
      };
      while (!done) {
        const auto held = retried([&] { return c->acquire(lock, s, 20s, {}); });
        if (!held) continue;
        {
          std::lock_guard l(mu);
          granted.insert(held->token);
        }
        std::this_thread::sleep_for(20ms);
        const locks::Released rel = retried([&] { return c->release(lock, *held, s); });
        if (rel.existed) {
          std::lock_guard l(mu);
          released.insert(held->token);
        }
        ++rounds;
      }
      c->close_session(s);
    } catch (const std::exception& ex) {
      std::lock_guard l(mu);
      errors.emplace_back(ex.what());
    }
  };
  std::thread a(holder), b(holder);
  auto wait_rounds = [&](int more) {
    const int target = rounds.load() + more;
    const auto deadline = Clock::now() + 30s;
    while (rounds.load() < target && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
    return rounds.load() >= target;
  };
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
  };
  bool progressed = wait_rounds(5);
  for (int i = 1; i <= 3 && progressed; ++i) {
    auto t = Clock::now();
    e.inst->stop_member(i, /*kill9=*/true);
    progressed = wait_rounds(5);
    std::cout << "[ zookeeper ] member " << i << " killed: 5 rounds in " << ms_since(t) << " ms" << std::endl;
    t = Clock::now();
    e.inst->start_member(i);
    std::cout << "[ zookeeper ] member " << i << " restarted in " << ms_since(t) << " ms" << std::endl;
    t = Clock::now();
    progressed = progressed && wait_rounds(3);
    std::cout << "[ zookeeper ] member " << i << " back: 3 rounds in " << ms_since(t) << " ms" << std::endl;
  }
  done = true;
  a.join();
  b.join();
  ASSERT_TRUE(progressed) << "the holders stopped taking the lock after a member's kill";
  ASSERT_TRUE(errors.empty()) << errors.front();
  watch->stop();

  // The lock znode's children at the end, with their czxids, read from the ensemble itself.
  fencecheck::locks::zk::Handle h(e.inst->endpoints_text(), 10s, 5s, "test");
  ASSERT_EQ(h.sync("/" + lock, 5s), ZOK) << "the server read is up to date with the leader";
  const auto list = h.children("/" + lock, false, 5s);
  ASSERT_EQ(list.rc, ZOK);
  std::set<std::int64_t> present;
  for (const auto& child : list.children) {
    const auto st = h.exists("/" + lock + "/" + child, false, 5s);
    ASSERT_EQ(st.rc, ZOK);
    present.insert(st.stat.czxid);
  }

  const auto events = sink.events();
  std::set<std::int64_t> watched_grants, watched_deletes;
  std::int64_t unseen = 0;  // what the watch said it did not see
  for (const auto& ev : events) {
    if (ev.kind == EventKind::kLockGrant) watched_grants.insert(*ev.token);
    if (ev.kind == EventKind::kLockDelete) watched_deletes.insert(*ev.token);
    if (ev.kind == EventKind::kLog && ev.source == "lock") {
      const auto at = ev.detail.find("did not see ");
      ASSERT_NE(at, std::string::npos) << ev.detail;
      unseen += std::stoll(ev.detail.substr(at + 12));
    }
  }
  std::size_t missed = 0;
  for (const auto t : granted) missed += watched_grants.count(t) ? 0 : 1;
  std::cout << "[ zookeeper ] " << granted.size() << " grants, " << released.size() << " releases, "
            << present.size() << " children left; the watch saw " << watched_grants.size() << " grants and "
            << watched_deletes.size() << " deletes, and said it did not see " << unseen << " changes\n";
  // Every change to the lock znode's children (its cversion counts creates and deletes: 0 when
  // the watch made it) is a grant or a delete in the history, or counted as not seen: nothing is
  // lost silently.
  EXPECT_EQ(static_cast<std::int64_t>(list.stat.cversion),
            static_cast<std::int64_t>(watched_grants.size() + watched_deletes.size()) + unseen)
      << dump(events);
  // A grant the holders got and the history lacks is one the watch said it missed: created and
  // deleted while its connection moved (2 changes each, or 1 when it vanished while being read).
  EXPECT_GE(unseen, static_cast<std::int64_t>(missed)) << dump(events);
  // Every grant the watch reported is one a holder got (a contender's znode that was never the
  // lowest would be a grant in the issuer's sense too; here every contender gets the lock).
  for (const auto t : watched_grants) EXPECT_TRUE(granted.count(t) || present.count(t)) << "grant " << t << " invented";
  // Every znode gone by the end has its delete; every znode still there has none.
  for (const auto t : watched_grants) {
    if (present.count(t)) EXPECT_FALSE(watched_deletes.count(t)) << "a delete of " << t << " that still exists";
    else EXPECT_TRUE(watched_deletes.count(t)) << "the delete of " << t << " missed\n" << dump(events);
  }
  for (const auto t : released)
    if (watched_grants.count(t)) EXPECT_TRUE(watched_deletes.count(t)) << "release of " << t << " missed";
  for (const auto t : present) EXPECT_TRUE(watched_grants.count(t)) << "child with czxid " << t << " never granted";
}

// A server that stops answering (SIGSTOP) keeps its clients' TCP connections open and says
// nothing: the C client alone would wait two thirds of the watch's 30 s session before it tried
// another server. The watch notices (a sync does not complete within its patience, 1 s on a quiet
// machine) and moves to a server that serves. Three outages, each aimed from where the watch is
// (zk::watch_place):
//   1. the leader, while the watch is on a follower: the follower loses its leader after
//      syncLimit and drops its clients to elect, and the watch must not land on the stopped leader;
//   2. the watch's own server;
//   3. the watch's own server again (the leader or a follower: the output says which).
// During each, a contender on a serving member creates a lock znode and, once the history has its
// grant, deletes it; the delete must reach the history too, still during the outage. At the end
// the history is compared with what was made and with the lock znode's own counters: every grant
// with the created znode's czxid (token and revision, and its mzxid: never modified), every
// delete, the cversion (2 changes per outage, none unseen) and the pzxid (the last delete's zxid).
TEST(ZooKeeperEnsemble, WatchMovesOffAStoppedServer) {
  Ensemble e(3);
  const std::string lock = "fencecheck/ensemble-stopped";
  const std::string path = "/" + lock;
  fencecheck::testing::Sink sink;
  auto watch = e.inst->watch(lock, sink.fn());
  const auto ms = e.inst->members();
  auto member_on = [&](const std::string& endpoint) {
    for (const auto& m : ms)
      if (m.endpoint == endpoint) return m.index;
    return 0;
  };
  auto has = [&](EventKind kind, std::int64_t token) {
    return [kind, token](const std::vector<Event>& evs) {
      return std::any_of(evs.begin(), evs.end(),
                         [&](const Event& ev) { return ev.kind == kind && ev.token == token; });
    };
  };

  std::string why;
  ASSERT_TRUE(e.wait_all_serving(why)) << why;
  std::map<std::int64_t, std::int64_t> made;  // czxid -> mzxid of each znode created
  std::set<std::int64_t> sessions;           // the contenders'
  std::int64_t last_delete = 0;
  for (int outage = 1; outage <= 3; ++outage) {
    const auto leader = e.wait_leader(why);
    ASSERT_TRUE(leader) << why;
    const auto place = fencecheck::locks::zk::watch_place(*watch);
    const int on = member_on(place.server);
    ASSERT_NE(on, 0) << "the watch is on no member: \"" << place.server << "\"";
    if (outage == 1) ASSERT_NE(on, *leader) << "a fresh watch starts on member 1, a follower: " << why;
    const int stopped = outage == 1 ? *leader : on;
    const int pid = ms[static_cast<std::size_t>(stopped - 1)].pid;
    // A contender on a member that keeps serving (after a new election when the leader stops).
    int other = 1;
    while (other == stopped) ++other;
    std::cout << "[ zookeeper ] outage " << outage << ": member " << stopped << " (the "
              << (stopped == *leader ? "leader" : "follower") << ") stopped; the watch on member " << on
              << " after " << place.moves << " moves; a contender on member " << other << "\n";
    const auto t0 = Clock::now();
    ASSERT_EQ(::kill(pid, SIGSTOP), 0);

    fencecheck::locks::zk::Handle h(ms[static_cast<std::size_t>(other - 1)].endpoint, 8s, 15s, "contender");
    sessions.insert(h.session_id());
    // The create waits for a quorum (a new leader when the leader is stopped); a reply lost with
    // the connection is recovered as the lock recipe does: this session's own child is the one.
    const auto deadline = Clock::now() + 20s;
    std::string child;
    std::int64_t czxid = 0, mzxid = 0;
    while (child.empty() && Clock::now() < deadline) {
      const auto c = h.create(path + "/c-", "", ZOO_EPHEMERAL | ZOO_SEQUENCE, 5s);
      if (c.rc == ZOK) {
        child = c.path;
        czxid = c.stat.czxid;
        mzxid = c.stat.mzxid;
        break;
      }
      h.wait_connected(deadline);  // a lost connection: the next try once it is back
      const auto list = h.children(path, false, 5s);
      for (const auto& name : list.children) {
        const auto st = h.exists(path + "/" + name, false, 5s);
        if (st.rc == ZOK && st.stat.ephemeral_owner == h.session_id()) {
          child = path + "/" + name;
          czxid = st.stat.czxid;
          mzxid = st.stat.mzxid;
        }
      }
    }
    ASSERT_FALSE(child.empty()) << "no quorum without member " << stopped;
    made[czxid] = mzxid;
    EXPECT_TRUE(sink.wait(has(EventKind::kLockGrant, czxid), 10s))
        << "member " << stopped << " stopped: the grant of " << child << " not in the history within 10 s\n"
        << dump(sink.events());
    const auto granted_after = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    const auto del = h.remove_at_zxid(child, -1, path, 5s);
    ASSERT_EQ(del.rc, ZOK) << h.error("delete", child, del.rc);
    last_delete = del.zxid;
    EXPECT_TRUE(sink.wait(has(EventKind::kLockDelete, czxid), 10s))
        << "member " << stopped << " stopped: the delete of " << child << " not in the history within 10 s\n"
        << dump(sink.events());
    const auto after = fencecheck::locks::zk::watch_place(*watch);
    std::cout << "[ zookeeper ]   grant in the history " << granted_after.count() << " ms after the stop; the watch on member "
              << member_on(after.server) << " after " << after.moves << " moves\n";
    EXPECT_NE(member_on(after.server), stopped) << "the watch is still on the stopped member";
    EXPECT_GT(after.moves, place.moves) << "a watch on the stopped member's ensemble moved: its server (outage 2, 3) "
                                           "or its follower dropped it to elect (outage 1)";
    ASSERT_EQ(::kill(pid, SIGCONT), 0);
    ASSERT_TRUE(e.wait_all_serving(why)) << "member " << stopped << " rejoins: " << why;
  }
  const auto t_stop = Clock::now();
  watch->stop();
  const auto stop_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t_stop).count();
  std::cout << "[ zookeeper ] stop() took " << stop_ms << " ms\n";

  // The history against the lock znode's own counters, read from the ensemble at the end.
  fencecheck::locks::zk::Handle h(e.inst->endpoints_text(), 10s, 5s, "test");
  ASSERT_EQ(h.sync(path, 5s), ZOK);
  const auto list = h.children(path, false, 5s);
  ASSERT_EQ(list.rc, ZOK);
  EXPECT_TRUE(list.children.empty()) << "every contender deleted its znode";
  EXPECT_EQ(list.stat.cversion, 6) << "3 creates and 3 deletes of children";
  EXPECT_EQ(list.stat.pzxid, last_delete) << "the last change to the children was the last delete";
  std::map<std::int64_t, std::int64_t> grants;  // token -> revision
  std::set<std::int64_t> deletes;
  for (const auto& ev : sink.events()) {
    EXPECT_NE(ev.kind, EventKind::kLog) << "nothing unseen: " << ev.detail;
    if (ev.kind == EventKind::kLockGrant) {
      grants[*ev.token] = ev.revision.value_or(0);
      EXPECT_TRUE(ev.lease_id && sessions.count(*ev.lease_id)) << "the grant's lease is a contender's session";
    }
    if (ev.kind == EventKind::kLockDelete) EXPECT_TRUE(deletes.insert(*ev.token).second) << "one delete each";
  }
  EXPECT_EQ(grants.size(), made.size()) << dump(sink.events());
  EXPECT_EQ(deletes.size(), made.size()) << dump(sink.events());
  for (const auto& [czxid, mzxid] : made) {
    ASSERT_TRUE(grants.count(czxid)) << "the grant of czxid " << czxid << " missed\n" << dump(sink.events());
    EXPECT_EQ(grants[czxid], czxid) << "a grant's revision is its znode's czxid";
    EXPECT_EQ(mzxid, czxid) << "a lock znode is never modified";
    EXPECT_TRUE(deletes.count(czxid)) << "the delete of czxid " << czxid << " missed\n" << dump(sink.events());
  }
}

TEST(ZooKeeperEnsemble, CleanupStopsAnOrphanedMember) {
  Ensemble e(3);
  // A record as a killed harness leaves it: the member runs, its harness pid is not ours.
  const auto m = e.inst->members()[1];
  const fs::path record = e.dir.path() / "zookeeper-2.pid";
  ASSERT_TRUE(fs::exists(record));
  const std::string text = fencecheck::process::read_text(record);
  EXPECT_NE(text.find("pid " + std::to_string(m.pid)), std::string::npos) << text;
  const locks::OrphanReport left = zookeeper_kind().stop_orphans(e.dir.path(), /*force=*/false);
  EXPECT_EQ(left.not_stopped, 0);
  ASSERT_FALSE(left.said.empty());
  EXPECT_NE(left.said.front().find("belongs to a live harness"), std::string::npos) << left.said.front();
  const locks::OrphanReport forced = zookeeper_kind().stop_orphans(e.dir.path(), /*force=*/true);
  EXPECT_EQ(forced.not_stopped, 0);
  EXPECT_EQ(forced.said.size(), 3u);
  EXPECT_TRUE(fencecheck::process::wait_process_gone(m.pid, 5s));
  EXPECT_FALSE(fs::exists(record));
}

}  // namespace
