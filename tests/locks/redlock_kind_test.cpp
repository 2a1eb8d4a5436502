// The redlock kind against real servers: five embedded redis-server masters with the clock shim
// preloaded, the majority watch over them, the etcd token counter, and Kleppmann's clock-jump
// story played by hand on the masters (client 1 holds A, B, C; C's clock jumps past the TTL; client
// 2 takes C, D, E): the watch reports grant, expiry, grant, while two masters still hold client 1's
// key. Label integration.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "../support/fake_resource_fields.h"
#include "../support/temp_dir.h"
#include "fencecheck/faults/clock_offset.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "redis_test_util.h"
#include "watch_sink.h"

namespace {

using namespace std::chrono_literals;
using fencecheck::Event;
using fencecheck::EventKind;
using fencecheck::testing::FakeFields;
using fencecheck::testing::Raw;
using fencecheck::testing::Sink;
using fencecheck::testing::TempDir;

struct Redlock {
  explicit Redlock(nlohmann::json fields) : dir("redlock-kind") {
    kind = fencecheck::locks::find_lock_service_kind("redlock");
    if (kind == nullptr) throw std::logic_error("the redlock kind is not registered");
    ctx.run_dir = dir.path();
    ctx.log_path = [this](const std::string& name) { return dir.path() / "logs" / (name + ".log"); };
    ctx.run_id = "test";
    ctx.lock = "fc-redlock";
    ctx.members = kind->default_members();  // as the orchestrator passes lock_service.members (5)
    instance = kind->open({}, kind->parse(FakeFields(std::move(fields))), ctx);
  }
  std::vector<int> ports() const {
    std::vector<int> out;
    const nlohmann::json ep = instance->endpoint();  // kept: a range over a temporary's member dangles
    for (const auto& url : ep["endpoints"]) {
      const std::string u = url.get<std::string>();
      out.push_back(std::stoi(u.substr(u.rfind(':') + 1)));
    }
    return out;
  }
  TempDir dir;
  const fencecheck::locks::LockServiceKind* kind = nullptr;
  fencecheck::locks::LockServiceRunContext ctx;
  std::unique_ptr<fencecheck::locks::LockServiceInstance> instance;
};

std::size_t count(const std::vector<Event>& events, EventKind kind) {
  std::size_t n = 0;
  for (const auto& e : events) n += e.kind == kind ? 1 : 0;
  return n;
}

TEST(RedlockKind, FiveMastersAndAnEtcdCounter) {
  Redlock r(nlohmann::json::object());
  const auto ep = r.instance->endpoint();
  EXPECT_EQ(ep["kind"], "redlock");
  ASSERT_EQ(ep["endpoints"].size(), 5u);
  ASSERT_TRUE(ep.contains("counter"));
  EXPECT_EQ(ep["counter"].get<std::string>().rfind("http://127.0.0.1:", 0), 0u);
  // One etcd: lock_service.members counts the masters, never the counter's members.
  EXPECT_EQ(ep["counter"].get<std::string>().find(','), std::string::npos) << ep["counter"];
  EXPECT_TRUE(r.instance->healthy());
  const auto env = r.instance->worker_env();
  EXPECT_EQ(env.at("REDIS_URLS"), r.instance->endpoints_text());
  EXPECT_EQ(env.at("FENCECHECK_TOKEN_COUNTER"), ep["counter"]);
  EXPECT_EQ(env.at("REDLOCK_DRIFT_FACTOR"), "0.01");
  std::set<int> distinct;
  for (int port : r.ports()) {
    Raw raw(port);
    EXPECT_EQ(raw.cmd({"PING"}), "PONG");
    EXPECT_EQ(raw.config("notify-keyspace-events").find('K') != std::string::npos, true);
    distinct.insert(port);
  }
  EXPECT_EQ(distinct.size(), 5u) << "independent masters: five servers";
  EXPECT_NE(r.instance->describe().find("clock shim preloaded"), std::string::npos) << r.instance->describe();
}

TEST(RedlockKind, AClockJumpOnOneMasterLetsASecondClientTakeAMajority) {
  Redlock r(nlohmann::json{{"counter", "none"}});
  EXPECT_EQ(r.instance->endpoint().contains("counter"), false);
  const auto ports = r.ports();
  ASSERT_EQ(ports.size(), 5u);
  Sink sink;
  auto watch = r.instance->watch("fc-redlock", sink.fn());

  // Client 1: A, B, C (members 1..3) grant it, D and E are out of its reach.
  for (int i : {0, 1, 2}) ASSERT_EQ(Raw(ports[i]).cmd({"SET", "fc-redlock", "client-1", "NX", "PX", "10000"}), "OK");
  ASSERT_TRUE(sink.wait([](const auto& e) { return count(e, EventKind::kLockGrant) == 1; }));
  EXPECT_EQ(sink.events().back().detail, "granted by a majority: members 1, 2, 3 of 5");

  // Member 3's wall clock jumps 11 s forward: the clock-jump fault's file, in its data directory.
  fencecheck::faults::ClockOffsetFile clock(r.dir.path() / "redlock-data-3" / "clock-offset");
  clock.set(11s, 0);
  EXPECT_EQ(Raw(ports[2]).cmd({"GET", "fc-redlock"}), "(nil)") << "expired on member 3 by its own clock";
  ASSERT_TRUE(sink.wait([](const auto& e) { return count(e, EventKind::kLockDelete) == 1; }));
  EXPECT_EQ(sink.events().back().detail, "expired");

  // Client 2: C, D, E.
  for (int i : {2, 3, 4}) ASSERT_EQ(Raw(ports[i]).cmd({"SET", "fc-redlock", "client-2", "NX", "PX", "10000"}), "OK");
  ASSERT_TRUE(sink.wait([](const auto& e) { return count(e, EventKind::kLockGrant) == 2; }));
  EXPECT_EQ(sink.events().back().detail, "granted by a majority: members 3, 4, 5 of 5");
  // Two holders at once: A and B still hold client 1's key, by the machine's clock.
  for (int i : {0, 1}) {
    EXPECT_EQ(Raw(ports[i]).cmd({"GET", "fc-redlock"}), "client-1");
    EXPECT_GT(std::stoll(Raw(ports[i]).cmd({"PTTL", "fc-redlock"})), 5000);
  }
  clock.reset();
  watch->stop();
  EXPECT_EQ(sink.events().size(), 3u);
}

TEST(RedlockKind, AllMastersStopAndStartAtTheirAddresses) {
  Redlock r(nlohmann::json{{"counter", "none"}});
  const auto before = r.instance->endpoints_text();
  const int pid = r.instance->pid();
  EXPECT_GT(pid, 0);
  r.instance->stop_server();
  EXPECT_FALSE(r.instance->healthy());
  r.instance->start_server(false);
  EXPECT_TRUE(r.instance->healthy());
  EXPECT_EQ(r.instance->endpoints_text(), before);
  EXPECT_NE(r.instance->pid(), pid);
}

TEST(RedlockKind, MembersAreTheMastersAndOneCanBeKilledAndRestarted) {
  Redlock r(nlohmann::json{{"counter", "none"}});
  std::string why;
  EXPECT_FALSE(r.instance->leader_member(why));
  EXPECT_EQ(why, "redlock has no leader: its masters are independent");
  auto members = r.instance->members();
  ASSERT_EQ(members.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(members[i].index, i + 1);
    EXPECT_GT(members[i].pid, 0);
    EXPECT_EQ(members[i].endpoint, r.instance->endpoint()["endpoints"][i]);
    EXPECT_TRUE(std::filesystem::exists(members[i].data_dir / "clock-offset")) << "the shim's file, for clock-jump";
  }
  const int pid2 = members[1].pid;
  ASSERT_EQ(Raw(r.ports()[1]).cmd({"SET", "k", "v"}), "OK");
  r.instance->stop_member(2, true);
  EXPECT_EQ(::kill(pid2, 0), -1) << "killed and reaped";
  EXPECT_EQ(r.instance->members()[1].pid, 0);
  EXPECT_TRUE(r.instance->healthy()) << "four of five answer: still a majority";
  r.instance->start_member(2);
  members = r.instance->members();
  EXPECT_GT(members[1].pid, 0);
  EXPECT_NE(members[1].pid, pid2);
  EXPECT_EQ(Raw(r.ports()[1]).cmd({"GET", "k"}), "(nil)") << "no persistence: a master comes back empty";
  EXPECT_THROW(r.instance->stop_member(6, true), std::out_of_range);
}

TEST(RedlockKind, TheUsersMastersAreWatchedButNeverStoppedOrStarted) {
  Redlock embedded(nlohmann::json{{"counter", "none"}});  // stands in for the user's five servers
  std::vector<std::string> urls;
  const nlohmann::json ep = embedded.instance->endpoint();  // kept: a range over a temporary's member dangles
  for (const auto& u : ep["endpoints"]) urls.push_back(u.get<std::string>());
  ASSERT_EQ(urls.size(), 5u);
  fencecheck::testing::TempDir dir("redlock-user");
  fencecheck::locks::LockServiceRunContext ctx;
  ctx.run_dir = dir.path();
  ctx.run_id = "test";
  const auto* kind = fencecheck::locks::find_lock_service_kind("redlock");
  auto users = kind->open(urls, kind->parse(FakeFields(nlohmann::json{{"counter", "none"}})), ctx);
  EXPECT_EQ(users->endpoints_text(), embedded.instance->endpoints_text());
  EXPECT_NE(users->describe().find("masters of the user's"), std::string::npos) << users->describe();
  EXPECT_EQ(users->pid(), 0);
  const auto members = users->members();
  ASSERT_EQ(members.size(), 5u);
  EXPECT_EQ(members[0].pid, 0);
  EXPECT_TRUE(members[0].data_dir.empty()) << "no clock file: clock-jump is unavailable on the user's masters";
  EXPECT_THROW(users->stop_member(1, true), std::logic_error);
  EXPECT_THROW(users->stop_server(), std::logic_error);

  Sink sink;
  auto watch = users->watch("fc-redlock", sink.fn());
  const auto ports = embedded.ports();
  for (int i : {0, 1, 2}) ASSERT_EQ(Raw(ports[i]).cmd({"SET", "fc-redlock", "client-1", "NX", "PX", "10000"}), "OK");
  ASSERT_TRUE(sink.wait([](const auto& e) { return count(e, EventKind::kLockGrant) == 1; }));
  watch->stop();

  // A master that does not answer refuses the start, naming it.
  try {
    (void)kind->open({urls[0], "redis://127.0.0.1:1"}, kind->parse(FakeFields(nlohmann::json{{"counter", "none"}})), ctx);
    ADD_FAILURE() << "opened with a master that does not answer";
  } catch (const fencecheck::locks::LockServiceUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("redis://127.0.0.1:1"), std::string::npos) << e.what();
  }
}

TEST(RedlockKind, RunsThreeFiveOrSevenMasters) {
  const auto* kind = fencecheck::locks::find_lock_service_kind("redlock");
  EXPECT_EQ(kind->default_members(), 5);
  EXPECT_EQ(kind->check_members(3), "");
  EXPECT_EQ(kind->check_members(7), "");
  EXPECT_NE(kind->check_members(4), "");
  EXPECT_NE(kind->check_members(1), "");
  EXPECT_NE(kind->no_role_reason(fencecheck::locks::MemberRole::kLeader).find("independent"), std::string::npos);
}

}  // namespace
