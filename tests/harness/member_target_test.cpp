// Unit tests for the member seam (issue 35) in the scenario loader and the lock-service axis:
// lock_service.members, a fault's `target: {lock_service: leader | follower | member: N | minority
// | majority}`, each bad form refused at its file:line:col with its message, scenario.json's
// spelling of both, and resolve_members' choice of members at the moment a fault fires.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "fencecheck/harness/scenario.h"
#include "fencecheck/locks/lock_service_kind.h"

using namespace fencecheck;
using namespace fencecheck::harness;
namespace fs = std::filesystem;

namespace {

fs::path write_scenario(const std::string& text) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path dir = fs::path(::testing::TempDir()) / "fencecheck-member-target-test" / info->name();
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path file = dir / "s.yaml";
  std::ofstream(file) << text;
  return file;
}

/// A scenario with `lock_service` (one line) and one fault item (one line, line 7).
std::string with(const std::string& lock_service, const std::string& fault) {
  return "name: t\n"                         // 1
         "lease_ttl: 2s\n"                   // 2
         "lock_service: " + lock_service + "\n"  // 3
         "resource: {kind: store}\n"         // 4
         "job: {key: ledger}\n"              // 5
         "faults:\n"                         // 6
         "  - " + fault + "\n"               // 7
         "workers: [{id: w1}]\n"             // 8
         "expect: {outcome: safe}\n";        // 9
}

/// A test-only lock-service kind of independent masters, as redlock's: 5 members by default, no
/// leader and no follower.
class Masters final : public locks::LockServiceKind {
 public:
  std::string_view name() const override { return "test-masters"; }
  std::vector<std::string_view> fields() const override { return {}; }
  nlohmann::json parse(const KindFields&) const override { return nlohmann::json::object(); }
  std::string check_endpoint(std::string_view) const override { return ""; }
  std::string check_members(int count) const override {
    return count == 5 || count == 3 ? "" : "test-masters runs 3 or 5 masters";
  }
  int default_members() const override { return 5; }
  std::vector<locks::MemberRole> member_roles() const override {
    return {locks::MemberRole::kMember, locks::MemberRole::kMinority, locks::MemberRole::kMajority};
  }
  std::string no_role_reason(locks::MemberRole role) const override {
    return "test-masters has no " + std::string(locks::to_string(role)) + ": its masters are independent";
  }
  std::string token_description() const override { return "none"; }
  std::string restart_effect(const nlohmann::json&) const override { return ""; }
  std::unique_ptr<locks::LockServiceInstance> open(const std::vector<std::string>&, const nlohmann::json&,
                                                   const locks::LockServiceRunContext&) const override {
    return nullptr;
  }
};

const Masters& masters() {
  static const Masters kind;
  static const bool registered = [] {
    locks::register_lock_service_kind(kind);
    return true;
  }();
  (void)registered;
  return kind;
}

struct Bad {
  const char* name;
  std::string lock_service;
  std::string fault;
  int line, column;
  std::string message;
};

void PrintTo(const Bad& b, std::ostream* os) { *os << b.name; }

class MemberTargetBad : public ::testing::TestWithParam<Bad> {};

TEST_P(MemberTargetBad, IsRefusedAtItsPlace) {
  (void)masters();
  const Bad& b = GetParam();
  const fs::path file = write_scenario(with(b.lock_service, b.fault));
  try {
    (void)load_scenario(file);
    FAIL() << "loaded: " << b.fault;
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.message(), b.message);
    EXPECT_EQ(e.line(), b.line);
    EXPECT_EQ(e.column(), b.column);
  }
}

const std::string kSigstopAt = "{kind: sigstop, trigger: {at: 1s}, duration: 3s, target: ";
// Column of the target's value in line 7: "  - " (4) + the prefix above.
const int kTargetColumn = 5 + static_cast<int>(kSigstopAt.size());
// Column of the lock_service value inside "{lock_service: ": one more mapping.
const int kRoleColumn = kTargetColumn + static_cast<int>(std::string("{lock_service: ").size());

/// `yaml` with its worker a command (redlock's workers are: fencecheck-worker has no Redlock
/// client).
std::string commanded(std::string yaml) {
  return yaml.replace(yaml.find("workers: [{id: w1}]"), 19, "workers: [{id: w1, command: [./w]}]");
}

/// The 1-based column of `what` in line 7 ("  - " + fault).
int column_in(const std::string& fault, const std::string& what) { return 5 + static_cast<int>(fault.find(what)); }

// clock-jump on members whose clock the shim cannot move, and restarts of a whole cluster on
// fresh data (issue 35): refused at load, at the target or the fresh_data field.
const std::string kClockJumpOnMember2 =
    "{kind: clock-jump, trigger: {at: 1s}, duration: 3s, jump: +15s, target: {lock_service: {member: 2}}}";
const std::string kClockJumpOnAMajority =
    "{kind: clock-jump, trigger: {at: 1s}, duration: 3s, drift_ppm: 200000, target: {lock_service: majority}}";
const std::string kEtcdClockRefusal =
    "faults[0].target: clock-jump cannot act on members of lock service kind etcd: etcd's members are Go programs, "
    "and Go's runtime reads the wall clock through the vDSO with its own code, not through libc, so fencecheck's "
    "clock shim (an LD_PRELOAD library) cannot move it (docs/lock-service-etcd.md, \"Clock faults\"); it acts on "
    "the members of zookeeper and redlock only, which fencecheck starts with the shim";
const std::string kFreshWholeRestart =
    "{kind: lock-service-restart, trigger: {at: 1s}, duration: 3s, fresh_data: true, target: lock-service}";
std::string fresh_refusal(const std::string& kind, int members) {
  return "faults[0].fresh_data: lock-service-restart with fresh_data: true on target lock-service would restart the "
         "whole " + kind + " cluster on empty data: a restart of all " + std::to_string(members) + " " + kind +
         " members on empty data directories wipes every copy of the history at once (a majority's included), so "
         "nothing can bring it back: that is a new cluster, not a restart. Allowed: fresh_data: false (the cluster "
         "restarts on its own data), one member's restart (target: {lock_service: {member: N}}: kill -9, then a start "
         "on its own data), or fresh data on a single process (members: 1)";
}

const Bad kBad[] = {
    {"EtcdOfFourMembers", "{kind: etcd, members: 4}", kSigstopAt + "w1}", 3, 37,
     "lock_service.members: etcd runs 1 member or a cluster of 3 or 5, got 4"},
    {"MembersOutOfTheLoadersRange", "{kind: etcd, members: 10}", kSigstopAt + "w1}", 3, 37,
     "lock_service.members: expected an integer between 1 and 9, got 10"},
    {"RedisRunsOneProcess", "{kind: redis, members: 3}", kSigstopAt + "w1}", 3, 38,
     "lock_service.members: lock service kind redis runs as one process (members: 1)"},
    {"MembersWithEndpoints", "{kind: etcd, endpoints: [\"http://127.0.0.1:2379\"], members: 3}", kSigstopAt + "w1}", 3,
     75,
     "lock_service.members: members starts an embedded cluster of that many members; with lock_service.endpoints the "
     "cluster is your own (fencecheck talks to the endpoints you name)"},
    {"MembersWithIssuers", "{kind: etcd, issuers: 2, members: 3}", kSigstopAt + "w1}", 3, 49,
     "lock_service.members: members and issuers cannot be combined: each issuer would be a cluster of its own"},
    {"MemberTargetOnASingleProcess", "{kind: etcd}", kSigstopAt + "{lock_service: leader}}", 7, kRoleColumn,
     "faults[0].target.lock_service: a lock-service member target needs a cluster, and this etcd runs as one process "
     "(set lock_service.members, e.g. members: 3)"},
    {"UnknownRole", "{kind: etcd, members: 3}", kSigstopAt + "{lock_service: boss}}", 7, kRoleColumn,
     "faults[0].target.lock_service: expected leader, follower, {member: N}, minority or majority, got \"boss\""},
    {"MemberWithoutNumber", "{kind: etcd, members: 3}", kSigstopAt + "{lock_service: member}}", 7, kRoleColumn,
     "faults[0].target.lock_service: expected leader, follower, {member: N}, minority or majority, got \"member\""},
    {"MemberOutOfRange", "{kind: etcd, members: 3}", kSigstopAt + "{lock_service: {member: 4}}}", 7, kRoleColumn,
     "faults[0].target.lock_service: member 4 is out of range: lock_service.members is 3 (members are numbered 1..3)"},
    {"MemberZero", "{kind: etcd, members: 3}", kSigstopAt + "{lock_service: {member: 0}}}", 7, kRoleColumn + 9,
     "faults[0].target.lock_service.member: expected an integer between 1 and 9, got 0"},
    {"UnknownKeyInTarget", "{kind: etcd, members: 3}", kSigstopAt + "{lock_servce: leader}}", 7, kTargetColumn + 1,
     "faults[0].target: unknown key \"lock_servce\" (did you mean \"lock_service\"?); allowed keys: lock_service"},
    {"RoleTheKindLacks", "{kind: test-masters}", kSigstopAt + "{lock_service: leader}}", 7, kRoleColumn,
     "faults[0].target.lock_service: test-masters has no leader: its masters are independent"},
    {"FollowerTheKindLacks", "{kind: test-masters}", kSigstopAt + "{lock_service: follower}}", 7, kRoleColumn,
     "faults[0].target.lock_service: test-masters has no follower: its masters are independent"},
    {"AKindWithoutMemberTargets", "{kind: etcd, members: 3}",
     "{kind: freeze, trigger: {at: 1s}, duration: 3s, target: {lock_service: leader}}", 7, 61,
     "faults[0].target: freeze takes no lock-service member target (target: {lock_service: ...} is for sigstop, "
     "partition and lock-service-restart)"},
    {"RestartOfAMemberOnFreshData", "{kind: etcd, members: 3}",
     "{kind: lock-service-restart, trigger: {at: 1s}, duration: 3s, fresh_data: true, target: {lock_service: leader}}",
     7, 93,
     "faults[0].target: lock-service-restart of a member restarts it on its own data (kill -9, then start): fresh_data "
     "is for the whole lock service (target: lock-service)"},
    {"RestartOfAMajorityOnFreshData", "{kind: zookeeper, members: 5}",
     "{kind: lock-service-restart, trigger: {at: 1s}, duration: 3s, fresh_data: true, target: {lock_service: majority}}",
     7, 93,
     "faults[0].target: lock-service-restart of a member restarts it on its own data (kill -9, then start): fresh_data "
     "is for the whole lock service (target: lock-service)"},
    {"ClockJumpOnAnEtcdMember", "{kind: etcd, members: 3}", kClockJumpOnMember2, 7,
     column_in(kClockJumpOnMember2, "{lock_service"), kEtcdClockRefusal},
    {"ClockDriftOnAnEtcdMajority", "{kind: etcd, members: 5}", kClockJumpOnAMajority, 7,
     column_in(kClockJumpOnAMajority, "{lock_service"), kEtcdClockRefusal},
    {"FreshRestartOfAWholeEtcdCluster", "{kind: etcd, members: 3}", kFreshWholeRestart, 7,
     column_in(kFreshWholeRestart, "true"), fresh_refusal("etcd", 3)},
    {"FreshRestartOfAWholeZooKeeperEnsemble", "{kind: zookeeper, members: 5}", kFreshWholeRestart, 7,
     column_in(kFreshWholeRestart, "true"), fresh_refusal("zookeeper", 5)},
    // partition (network: namespaces, one line more: the item is on line 8)
    {"PartitionOfAMemberFromTheLockService", "{kind: etcd, members: 3}\nnetwork: namespaces",
     "{kind: partition, trigger: {at: 1s}, duration: 3s, from: lock-service, target: {lock_service: leader}}", 8, 84,
     "faults[0].target: partition of a lock-service member is from: members (the other members; its clients still "
     "reach it) or from: full (everything, its clients too), got from: lock-service"},
    {"PartitionOfAMemberOneWay", "{kind: etcd, members: 3}\nnetwork: namespaces",
     "{kind: partition, trigger: {at: 1s}, duration: 3s, from: members, direction: replies, target: {lock_service: leader}}",
     8, 99, "faults[0].target: partition of a lock-service member cuts both ways (direction: both)"},
    {"PartitionOfAWorkerFromMembers", "{kind: etcd, members: 3}\nnetwork: namespaces",
     "{kind: partition, trigger: {at: 1s}, duration: 3s, from: members, target: w1}", 8, 79,
     "faults[0].target: partition from: members cuts a lock-service member from the other members; give a member "
     "target (target: {lock_service: leader}) or from lock-service, resource or full"},
    {"SelfStopOfAMember", "{kind: etcd, members: 3}",
     "{kind: self-stop, duration: 3s, target: {lock_service: leader}}", 7, 45,
     "faults[0].target: self-stop is a worker stopping itself: its target is that worker, not lock-service members"},
};

INSTANTIATE_TEST_SUITE_P(EachForm, MemberTargetBad, ::testing::ValuesIn(kBad),
                         [](const ::testing::TestParamInfo<Bad>& p) { return p.param.name; });

TEST(MemberTarget, EachRoleLoadsAndScenarioJsonSpellsItAsWritten) {
  struct Case {
    std::string written;
    locks::MemberSelector want;
    nlohmann::json json;
  };
  const Case cases[] = {
      {"leader", {locks::MemberRole::kLeader, 0}, {{"lock_service", "leader"}}},
      {"follower", {locks::MemberRole::kFollower, 0}, {{"lock_service", "follower"}}},
      {"{member: 2}", {locks::MemberRole::kMember, 2}, {{"lock_service", {{"member", 2}}}}},
      {"minority", {locks::MemberRole::kMinority, 0}, {{"lock_service", "minority"}}},
      {"majority", {locks::MemberRole::kMajority, 0}, {{"lock_service", "majority"}}},
  };
  for (const auto& c : cases) {
    const Scenario s = load_scenario(write_scenario(
        with("{kind: etcd, members: 5}", kSigstopAt + "{lock_service: " + c.written + "}}")));
    ASSERT_EQ(s.faults().size(), 1u);
    const FaultSpec& f = s.faults()[0];
    ASSERT_TRUE(f.member.has_value()) << c.written;
    EXPECT_EQ(*f.member, c.want) << c.written;
    EXPECT_EQ(f.target, std::string(kLockServiceTarget));
    EXPECT_EQ(s.lock_service().members, 5);
    const nlohmann::json j = to_json(s);
    EXPECT_EQ(j["faults"][0]["target"], c.json) << c.written;
    EXPECT_EQ(j["lock_service"]["members"], 5);
  }
}

TEST(MemberTarget, ScenarioJsonsSpellingLoadsBackToTheSameTarget) {
  const Scenario s = load_scenario(write_scenario(
      with("{kind: etcd, members: 3}",
           "{kind: lock-service-restart, trigger: {at: 1s}, duration: 3s, target: {lock_service: {member: 3}}}")));
  const std::string target = to_json(s)["faults"][0]["target"].dump();
  EXPECT_EQ(target, R"({"lock_service":{"member":3}})");
  const Scenario t = load_scenario(write_scenario(
      with("{kind: etcd, members: 3}", "{kind: lock-service-restart, trigger: {at: 1s}, duration: 3s, target: " + target + "}")));
  ASSERT_TRUE(t.faults()[0].member.has_value());
  EXPECT_EQ(*t.faults()[0].member, (locks::MemberSelector{locks::MemberRole::kMember, 3}));
  EXPECT_EQ(t.faults()[0].params, s.faults()[0].params);
}

TEST(MemberTarget, ASingleProcessScenarioJsonHasNoMembersField) {
  const Scenario s = load_scenario(write_scenario(with("{kind: etcd}", kSigstopAt + "w1}")));
  EXPECT_EQ(s.lock_service().members, 1);
  EXPECT_FALSE(to_json(s)["lock_service"].contains("members"));
  EXPECT_FALSE(s.faults()[0].member.has_value());
}

TEST(MemberTarget, AKindsDefaultMembersApply) {
  (void)masters();
  const Scenario s = load_scenario(write_scenario(with("{kind: test-masters}", kSigstopAt + "{lock_service: majority}}")));
  EXPECT_EQ(s.lock_service().members, 5);
}

TEST(MemberTarget, WorkerIdsOfAMembersLabHostAreReserved) {
  const std::string text =
      "name: t\nlease_ttl: 2s\nresource: {kind: store}\njob: {key: ledger}\nworkers: [{id: lock-service-2}]\n"
      "expect: {outcome: safe}\n";
  try {
    (void)load_scenario(write_scenario(text));
    FAIL() << "loaded";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.message(), "workers[0].id: worker id \"lock-service-2\" is reserved: it names a lock-service member's "
                           "host in the network lab");
  }
  EXPECT_TRUE(is_member_host(member_host(3)));
  EXPECT_FALSE(is_member_host("lock-service-x"));
  EXPECT_FALSE(is_member_host("lock-service-"));
}

TEST(MemberTarget, ClockJumpLoadsOnTheMembersThatRunTheShim) {
  for (const std::string ls : {"{kind: zookeeper, members: 3}", "{kind: redlock}"}) {
    const std::string fault = "{kind: clock-jump, trigger: {at: 1s}, duration: 3s, jump: -30s, target: {lock_service: "
                              "{member: 2}}}";
    const std::string yaml = ls.find("redlock") == std::string::npos ? with(ls, fault) : commanded(with(ls, fault));
    const Scenario s = load_scenario(write_scenario(yaml));
    ASSERT_EQ(s.faults().size(), 1u) << ls;
    EXPECT_EQ(s.faults()[0].params, (nlohmann::json{{"jump", "-30s"}, {"drift_ppm", 0}})) << ls;
    EXPECT_FALSE(lock_service_refusal(s.faults()[0], s.lock_service()).has_value()) << ls;
  }
}

// Redlock's masters have no links between them: a partition from: members would cut nothing and
// read as a fault that took effect. Refused at `from`; from: full loads.
TEST(MemberTarget, RedlockRefusesAPartitionFromMembersAtFrom) {
  const std::string fault = "{kind: partition, trigger: {at: 1s}, duration: 3s, from: members, target: {lock_service: "
                            "minority}}";
  const fs::path file = write_scenario(commanded(with("{kind: redlock}\nnetwork: namespaces", fault)));
  try {
    (void)load_scenario(file);
    FAIL() << "loaded: " << fault;
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.message(),
              "faults[0].from: partition from: members cuts nothing on lock service kind redlock: its masters are "
              "independent Redis servers that never talk to each other (Redlock replicates nothing between them); use "
              "from: full (the members hit cut from their clients and the harness too)");
    EXPECT_EQ(e.line(), 8);
    EXPECT_EQ(e.column(), column_in(fault, "members,"));
  }
  std::string full = fault;
  full.replace(full.find("from: members"), 13, "from: full");
  const Scenario s = load_scenario(write_scenario(commanded(with("{kind: redlock}\nnetwork: namespaces", full))));
  EXPECT_FALSE(lock_service_refusal(s.faults()[0], s.lock_service()).has_value());
  // etcd's members are Raft peers: from: members loads there.
  const Scenario etcd = load_scenario(write_scenario(with("{kind: etcd, members: 3}\nnetwork: namespaces", fault)));
  EXPECT_FALSE(lock_service_refusal(etcd.faults()[0], etcd.lock_service()).has_value());
}

TEST(MemberTarget, FreshDataLoadsOnASingleProcessAndOnRedlock) {
  const Scenario one = load_scenario(write_scenario(with("{kind: etcd}", kFreshWholeRestart)));
  EXPECT_EQ(one.faults()[0].params, (nlohmann::json{{"fresh_data", true}}));
  // Redlock's masters keep nothing: every restart of theirs is on empty data.
  const Scenario masters = load_scenario(write_scenario(commanded(with("{kind: redlock}", kFreshWholeRestart))));
  EXPECT_EQ(masters.lock_service().members, 5);
  EXPECT_FALSE(lock_service_refusal(masters.faults()[0], masters.lock_service()).has_value());
}

TEST(MemberTarget, AScheduledFreshRestartOfAClusterIsRefused) {
  const std::string text =
      "name: t\nlease_ttl: 2s\ntimeout: 90s\nlock_service: {kind: zookeeper, members: 3}\n"  // 1-4
      "resource: {kind: store}\njob: {key: ledger}\nworkers: [{id: w1}]\nexpect: {outcome: safe}\n"  // 5-8
      "schedule:\n  duration: 30s\n  interval: 1s\n  faults:\n"                                 // 9-12
      "    - {kind: lock-service-restart, duration: 2s, fresh_data: true}\n";                      // 13
  try {
    (void)load_scenario(write_scenario(text));
    FAIL() << "loaded";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.line(), 13);
    EXPECT_EQ(e.column(), 62);
    EXPECT_EQ(e.message(), "schedule.faults[0].fresh_data: lock-service-restart with fresh_data: true on target "
                           "lock-service would restart the whole zookeeper cluster on empty data: a restart of all 3 "
                           "zookeeper members on empty data directories wipes every copy of the history at once (a "
                           "majority's included), so nothing can bring it back: that is a new cluster, not a restart. "
                           "Allowed: fresh_data: false (the cluster restarts on its own data), one member's restart "
                           "(target: {lock_service: {member: N}}: kill -9, then a start on its own data), or fresh "
                           "data on a single process (members: 1)");
  }
}

// --lock-service moves a scenario to a kind that cannot take its faults: not a load error (the
// scenario was fine for its own kind) but lock_service_refusal(), which `fencecheck run` reports
// as a missing prerequisite (harness::missing_prerequisites: the scenario is unavailable there).
TEST(MemberTarget, AScenarioMovedToEtcdCannotJumpItsMembersClocks) {
  const Scenario s = load_scenario(write_scenario(commanded(with("{kind: redlock}", kClockJumpOnMember2))));
  EXPECT_FALSE(lock_service_refusal(s.faults()[0], s.lock_service()).has_value());
  const Scenario on_etcd = with_lock_service_kind(s, "etcd");
  const auto no = lock_service_refusal(on_etcd.faults()[0], on_etcd.lock_service());
  ASSERT_TRUE(no.has_value());
  EXPECT_EQ(no->field, "target");
  EXPECT_EQ("faults[0].target: " + no->why, kEtcdClockRefusal);
  const Scenario on_zookeeper = with_lock_service_kind(s, "zookeeper");
  EXPECT_FALSE(lock_service_refusal(on_zookeeper.faults()[0], on_zookeeper.lock_service()).has_value());

  const Scenario f =
      with_lock_service_kind(load_scenario(write_scenario(commanded(with("{kind: redlock}", kFreshWholeRestart)))), "etcd");
  const auto wipe = lock_service_refusal(f.faults()[0], f.lock_service());
  ASSERT_TRUE(wipe.has_value());
  EXPECT_EQ(wipe->field, "fresh_data");
  EXPECT_EQ("faults[0].fresh_data: " + wipe->why, fresh_refusal("etcd", 5));
}

// ---- resolve_members: which members a selector hits, at the moment a fault fires

TEST(ResolveMembers, LeaderIsTheServicesAnswer) {
  const auto r = locks::resolve_members({locks::MemberRole::kLeader, 0}, 3, 2, "member 1's status: leader 2");
  EXPECT_EQ(r.indices, std::vector<int>{2});
  EXPECT_EQ(r.why, "member 2: the leader at the fault's moment (member 1's status: leader 2)");
}

TEST(ResolveMembers, FollowerIsTheLowestNumberedNonLeader) {
  EXPECT_EQ(locks::resolve_members({locks::MemberRole::kFollower, 0}, 3, 1, "").indices, std::vector<int>{2});
  EXPECT_EQ(locks::resolve_members({locks::MemberRole::kFollower, 0}, 3, 2, "").indices, std::vector<int>{1});
}

TEST(ResolveMembers, MinorityAndMajorityTakeTheLeaderFirst) {
  EXPECT_EQ(locks::resolve_members({locks::MemberRole::kMinority, 0}, 3, 3, "").indices, std::vector<int>{3});
  EXPECT_EQ(locks::resolve_members({locks::MemberRole::kMinority, 0}, 5, 4, "").indices, (std::vector<int>{4, 1}));
  EXPECT_EQ(locks::resolve_members({locks::MemberRole::kMajority, 0}, 5, 4, "").indices, (std::vector<int>{4, 1, 2}));
  EXPECT_EQ(locks::resolve_members({locks::MemberRole::kMajority, 0}, 3, 2, "").indices, (std::vector<int>{2, 1}));
}

TEST(ResolveMembers, WithoutALeaderMinorityIsTheLowestNumbered) {
  const auto r = locks::resolve_members({locks::MemberRole::kMinority, 0}, 5, std::nullopt, "independent masters");
  EXPECT_EQ(r.indices, (std::vector<int>{1, 2}));
  EXPECT_EQ(r.why, "members 1, 2: a minority of 5, lowest-numbered first (no leader: independent masters)");
  EXPECT_EQ(locks::resolve_members({locks::MemberRole::kMajority, 0}, 5, std::nullopt, "").indices,
            (std::vector<int>{1, 2, 3}));
}

TEST(ResolveMembers, NoLeaderNowRefusesLeaderAndFollower) {
  try {
    (void)locks::resolve_members({locks::MemberRole::kLeader, 0}, 3, std::nullopt, "no member reported a leader");
    FAIL() << "resolved a leader that is not there";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "no leader to aim at: the lock service has no leader now (no member reported a leader)");
  }
  EXPECT_THROW((void)locks::resolve_members({locks::MemberRole::kFollower, 0}, 3, std::nullopt, ""), std::runtime_error);
}

TEST(ResolveMembers, AMemberOutOfRangeIsRefused) {
  EXPECT_THROW((void)locks::resolve_members({locks::MemberRole::kMember, 4}, 3, 1, ""), std::out_of_range);
  EXPECT_EQ(locks::resolve_members({locks::MemberRole::kMember, 3}, 3, 1, "").indices, std::vector<int>{3});
}

TEST(ResolveMembers, ALeaderNumberOutsideTheClusterIsNoLeader) {
  EXPECT_THROW((void)locks::resolve_members({locks::MemberRole::kLeader, 0}, 3, 7, "odd answer"), std::runtime_error);
}

TEST(MemberRoleNames, RoundTrip) {
  for (auto r : {locks::MemberRole::kLeader, locks::MemberRole::kFollower, locks::MemberRole::kMember,
                 locks::MemberRole::kMinority, locks::MemberRole::kMajority})
    EXPECT_EQ(locks::member_role(locks::to_string(r)), r);
  EXPECT_FALSE(locks::member_role("boss").has_value());
  EXPECT_EQ((locks::MemberSelector{locks::MemberRole::kMember, 2}).text(), "member 2");
}

}  // namespace
