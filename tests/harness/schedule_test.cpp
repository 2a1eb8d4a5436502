// Unit tests for fault schedules: the `schedule:` block loads, round-trips through scenario.json and
// fails with file:line:col on bad input; the generator (schedule.h) is a pure, portable function of
// its seed: exact values for a small case, other seeds differ, weights, the at-once limit and the
// ranges hold over many draws; --duration's override keeps the timeout's margin.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fencecheck/harness/schedule.h"
#include "fencecheck/harness/scenario.h"

using namespace fencecheck;
using namespace fencecheck::harness;
using namespace std::chrono_literals;

namespace {

const std::string kBase =
    "name: soak\n"                                   // 1
    "lease_ttl: 2s\n"                                // 2
    "timeout: 120s\n"                                // 3
    "resource: {kind: store}\n"                      // 4
    "job: {key: ledger}\n"                           // 5
    "workers:\n"                                     // 6
    "  - id: w1\n"                                   // 7
    "  - id: w2\n"                                   // 8
    "expect: {outcome: safe}\n";                     // 9

const std::string kSchedule =
    "schedule:\n"                                    // 10
    "  seed: 7\n"                                    // 11
    "  duration: 60s\n"                              // 12
    "  interval: {min: 2s, max: 5s}\n"               // 13
    "  max_at_once: 2\n"                             // 14
    "  faults:\n"                                    // 15
    "    - kind: sigstop\n"                          // 16
    "      weight: 3\n"                              // 17
    "      duration: {min: 3s, max: 6s}\n"           // 18
    "      target: holders\n"                        // 19
    "    - kind: cpu-throttle\n"                     // 20
    "      duration: 2s\n"                           // 21
    "      target: workers\n"                        // 22
    "      quota: 5%\n";                             // 23

std::string error_of(const std::string& yaml) {
  try {
    (void)parse_scenario(yaml, "s.yaml");
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "(loaded)";
}

ScheduleSpec small_spec() {
  ScheduleSpec s;
  s.duration = 30s;
  s.min_interval = 1s;
  s.max_interval = 3s;
  s.max_at_once = 1;
  ScheduleKind stop;
  stop.fault.kind = "sigstop";
  stop.weight = 2;
  stop.min_duration = 1s;
  stop.max_duration = 4s;
  ScheduleKind throttle;
  throttle.fault.kind = "cpu-throttle";
  throttle.weight = 1;
  throttle.min_duration = 500ms;
  throttle.max_duration = 1s;
  throttle.target = ScheduleTarget::kWorkers;
  s.faults = {stop, throttle};
  return s;
}

TEST(Schedule, LoadsEveryField) {
  const Scenario s = parse_scenario(kBase + kSchedule, "s.yaml");
  ASSERT_TRUE(s.schedule().has_value());
  const ScheduleSpec& sc = *s.schedule();
  EXPECT_EQ(sc.seed, std::optional<std::uint64_t>(7));
  EXPECT_EQ(s.schedule_seed(), 7u);
  EXPECT_EQ(sc.duration, Duration(60s));
  EXPECT_EQ(sc.min_interval, Duration(2s));
  EXPECT_EQ(sc.max_interval, Duration(5s));
  EXPECT_EQ(sc.max_at_once, 2);
  ASSERT_EQ(sc.faults.size(), 2u);
  EXPECT_EQ(sc.faults[0].fault.kind, "sigstop");
  EXPECT_EQ(sc.faults[0].weight, 3);
  EXPECT_EQ(sc.faults[0].min_duration, Duration(3s));
  EXPECT_EQ(sc.faults[0].max_duration, Duration(6s));
  EXPECT_EQ(sc.faults[0].target, ScheduleTarget::kHolders);
  EXPECT_EQ(sc.faults[1].fault.kind, "cpu-throttle");
  EXPECT_EQ(sc.faults[1].weight, 1);
  EXPECT_EQ(sc.faults[1].min_duration, Duration(2s));
  EXPECT_EQ(sc.faults[1].max_duration, Duration(2s));
  EXPECT_EQ(sc.faults[1].target, ScheduleTarget::kWorkers);
  EXPECT_EQ(sc.faults[1].fault.params, (nlohmann::json{{"quota", "5%"}, {"period", "100ms"}}));
  // A schedule makes the job repeat.
  EXPECT_TRUE(s.job().repeat);
  // Without one, nothing changes.
  const Scenario plain = parse_scenario(kBase, "p.yaml");
  EXPECT_FALSE(plain.schedule().has_value());
  EXPECT_FALSE(plain.job().repeat);
  EXPECT_FALSE(to_json(plain)["job"].contains("repeat"));
  EXPECT_FALSE(to_json(plain).contains("schedule"));
}

TEST(Schedule, SeedDefaultsToTheScenarios) {
  std::string yaml = kBase + "seed: 99\n" + kSchedule;
  yaml.replace(yaml.find("  seed: 7\n"), 10, "");
  const Scenario s = parse_scenario(yaml, "s.yaml");
  EXPECT_FALSE(s.schedule()->seed.has_value());
  EXPECT_EQ(s.schedule_seed(), 99u);
}

TEST(Schedule, RoundTripsThroughScenarioJson) {
  const Scenario s = parse_scenario(kBase + kSchedule, "s.yaml");
  const nlohmann::json j = to_json(s);
  EXPECT_EQ(j["schedule"]["duration"], "60s");
  EXPECT_EQ(j["schedule"]["interval"], (nlohmann::json{{"min", "2s"}, {"max", "5s"}}));
  EXPECT_EQ(j["schedule"]["faults"][1]["quota"], "5%");
  EXPECT_EQ(j["schedule"]["faults"][1]["target"], "workers");
  EXPECT_EQ(j["job"]["repeat"], true);
  const Scenario back = scenario_from_json(j, "scenario.json");
  EXPECT_TRUE(back == s);
  EXPECT_EQ(to_json(back), j);

  // Every kind that can be scheduled, with its parameters, and a lock-service restart.
  const std::string all = std::string(
                              "name: all\nlease_ttl: 2s\ntimeout: 90s\nresource: {kind: store}\njob: {key: k}\n"
                              "network: namespaces\nworkers: [{id: w1}]\nexpect: {outcome: safe}\n") +
                          "schedule:\n  duration: 30s\n  interval: 1s\n  faults:\n"
                          "    - {kind: partition, duration: 2s, from: lock-service, direction: replies}\n"
                          "    - {kind: netem, duration: 2s, delay: 20ms, jitter: 5ms, loss: 1%}\n"
                          "    - {kind: freeze, duration: 2s}\n"
                          "    - {kind: lock-service-restart, duration: 2s, fresh_data: false}\n";
  const Scenario a = parse_scenario(all, "a.yaml");
  EXPECT_EQ(a.schedule()->faults[3].fault.target, "lock-service");
  EXPECT_EQ(a.schedule()->faults[0].fault.params.at("from"), "lock-service");
  EXPECT_TRUE(scenario_from_json(to_json(a), "scenario.json") == a);
}

TEST(Schedule, BadInputIsLocated) {
  auto with = [](std::string from, std::string to) {
    std::string yaml = kBase + kSchedule;
    yaml.replace(yaml.find(from), from.size(), to);
    return error_of(yaml);
  };
  EXPECT_EQ(with("  max_at_once: 2\n", "  max_at_onse: 2\n"),
            "s.yaml:14:3: schedule: unknown key \"max_at_onse\" (did you mean \"max_at_once\"?); allowed keys: seed, "
            "duration, interval, max_at_once, faults");
  EXPECT_EQ(with("  duration: 60s\n", "  duration: 120s\n"),
            "s.yaml:12:13: schedule.duration: the schedule lasts 120s, not less than the run timeout 120s: the timeout "
            "bounds the whole run, so leave room after the schedule for the last heals, stopping the workers and "
            "reading back (e.g. timeout: 180s)");
  EXPECT_EQ(with("{min: 2s, max: 5s}", "{min: 2s, max: 1s}"),
            "s.yaml:13:28: schedule.interval.max: max 1s is below min 2s");
  EXPECT_EQ(with("{min: 2s, max: 5s}", "{min: 2s, max: 1500us}"),
            "s.yaml:13:28: schedule.interval.max: \"1500us\" is not a whole number of milliseconds (a schedule draws "
            "whole milliseconds)");
  EXPECT_EQ(with("      target: holders\n", "      target: leader\n"),
            "s.yaml:19:15: schedule.faults[0].target: unknown schedule target \"leader\"; expected one of: holders, "
            "workers");
  EXPECT_EQ(with("      weight: 3\n", "      weight: 0\n"),
            "s.yaml:17:15: schedule.faults[0].weight: expected an integer between 1 and 1000000, got 0");
  EXPECT_EQ(with("    - kind: sigstop\n", "    - kind: self-stop\n"),
            "s.yaml:16:13: schedule.faults[0].kind: self-stop cannot be scheduled: a worker stops itself once, at its "
            "design's self_stop_at; schedule sigstop instead");
  EXPECT_EQ(with("      quota: 5%\n", "      quota: 5%\n      from: full\n"),
            "s.yaml:24:7: schedule.faults[1]: \"from\" is a field of fault kind partition, not of kind cpu-throttle; "
            "kind cpu-throttle takes: kind, weight, duration, target, quota, period");
  EXPECT_EQ(with("    - kind: sigstop\n", "    - kind: partition\n"),
            "s.yaml:16:13: schedule.faults[0].kind: partition needs `network: namespaces` (this scenario's network is "
            "host)");
  EXPECT_EQ(with("{min: 3s, max: 6s}", "{min: 3s, max: 60s}"),
            "s.yaml:18:17: schedule.faults[0].duration: a fault of up to 60s does not fit in the schedule's duration "
            "60s");
  EXPECT_EQ(with("  faults:\n", "  faults: []\n  x:\n"),
            "s.yaml:16:3: schedule: unknown key \"x\"; allowed keys: seed, duration, interval, max_at_once, faults");
  EXPECT_EQ(with("  max_at_once: 2\n", "  max_at_once: 65\n"),
            "s.yaml:14:16: schedule.max_at_once: expected an integer between 1 and 64, got 65");
  // repeat and a schedule go together.
  EXPECT_EQ(with("job: {key: ledger}", "job: {key: ledger, repeat: false}"),
            "s.yaml:5:28: job.repeat: a schedule needs workers that work for its whole duration: repeat must be true "
            "(its default with a schedule)");
  EXPECT_EQ(error_of(std::string(kBase).replace(kBase.find("job: {key: ledger}"), 18, "job: {key: ledger, repeat: true}")),
            "s.yaml:5:28: job.repeat: repeat runs the job until the schedule's duration ends, and this scenario has no "
            "schedule (add a schedule, or leave repeat out)");
  EXPECT_EQ(with("  - id: w2\n", "  - id: w2\n    design: {token_source: timestamp}\n"),
            "s.yaml:9:13: workers[1].design: token_source: timestamp cannot run a repeating job (a schedule's): each "
            "holding numbers its segments from its token, and a wall-clock token is too large for that; use the "
            "issuer's tokens here");
}

// Lock-service members as a scheduled fault's target (issue 35): `target: {lock_service: ...}`.
const std::string kCluster =
    "name: members\n"                                // 1
    "lease_ttl: 2s\n"                                // 2
    "timeout: 60s\n"                                 // 3
    "lock_service: {kind: etcd, members: 3}\n"       // 4
    "resource: {kind: store}\n"                      // 5
    "job: {key: ledger}\n"                           // 6
    "workers: [{id: w1}, {id: w2}]\n"                // 7
    "expect: {outcome: safe}\n"                      // 8
    "schedule:\n"                                    // 9
    "  seed: 11\n"                                   // 10
    "  duration: 20s\n"                              // 11
    "  interval: {min: 1s, max: 2s}\n"               // 12
    "  faults:\n"                                    // 13
    "    - kind: sigstop\n"                          // 14
    "      duration: {min: 1s, max: 3s}\n"           // 15
    "      target: {lock_service: leader}\n"         // 16
    "    - kind: sigstop\n"                          // 17
    "      weight: 2\n"                              // 18
    "      duration: 2s\n"                           // 19
    "      target: {lock_service: follower}\n"       // 20
    "    - kind: lock-service-restart\n"             // 21
    "      duration: 1s\n"                           // 22
    "      target: {lock_service: {member: 2}}\n";   // 23

TEST(ScheduleMembers, LoadAsFaultsItemsDoAndRoundTripThroughScenarioJson) {
  const Scenario s = parse_scenario(kCluster, "m.yaml");
  const auto& faults = s.schedule()->faults;
  ASSERT_EQ(faults.size(), 3u);
  const locks::MemberSelector leader{locks::MemberRole::kLeader, 0};
  const locks::MemberSelector follower{locks::MemberRole::kFollower, 0};
  const locks::MemberSelector two{locks::MemberRole::kMember, 2};
  EXPECT_EQ(faults[0].fault.member, std::optional(leader));
  EXPECT_EQ(faults[1].fault.member, std::optional(follower));
  EXPECT_EQ(faults[2].fault.member, std::optional(two));
  for (const auto& k : faults) EXPECT_EQ(k.fault.target, "lock-service");
  const nlohmann::json j = to_json(s);
  EXPECT_EQ(j["schedule"]["faults"][0]["target"], (nlohmann::json{{"lock_service", "leader"}}));
  EXPECT_EQ(j["schedule"]["faults"][2]["target"], (nlohmann::json{{"lock_service", {{"member", 2}}}}));
  const Scenario back = scenario_from_json(j, "scenario.json");
  EXPECT_TRUE(back == s);
  EXPECT_EQ(to_json(back), j);
  // A member target on a partition (from: members, both ways) loads too.
  std::string partition = kCluster;
  partition.replace(partition.find("lock_service: {kind"), 0, "network: namespaces\n");
  partition += "    - {kind: partition, duration: 1s, from: members, target: {lock_service: minority}}\n";
  const Scenario p = parse_scenario(partition, "p.yaml");
  EXPECT_EQ(p.schedule()->faults[3].fault.member, std::optional(locks::MemberSelector{locks::MemberRole::kMinority, 0}));
}

TEST(ScheduleMembers, ThePlanIsTheSeedsAndKeepsEachMemberSelector) {
  const Scenario s = parse_scenario(kCluster, "m.yaml");
  const auto plan = plan_schedule(*s.schedule(), s.schedule_seed());
  ASSERT_GE(plan.size(), 8u);
  EXPECT_EQ(plan, plan_schedule(*s.schedule(), s.schedule_seed()));
  EXPECT_NE(plan, plan_schedule(*s.schedule(), s.schedule_seed() + 1));
  std::set<std::size_t> kinds;
  for (const auto& p : plan) {
    kinds.insert(p.kind_index);
    EXPECT_EQ(p.fault.target, "lock-service") << p.index;  // resolved to members when it fires
    EXPECT_EQ(p.fault.member, s.schedule()->faults[p.kind_index].fault.member) << p.index;
  }
  EXPECT_EQ(kinds.size(), 3u);  // this seed draws each of the three
  // The draws do not depend on the targets: the same schedule aimed at holders plans the same
  // times, kinds and durations.
  std::string holders = kCluster;
  for (const char* role : {"{lock_service: leader}", "{lock_service: follower}"})
    holders.replace(holders.find(role), std::string(role).size(), "holders");
  holders.replace(holders.find("{lock_service: {member: 2}}"), 27, "lock-service");
  const Scenario h = parse_scenario(holders, "h.yaml");
  const auto same = plan_schedule(*h.schedule(), h.schedule_seed());
  ASSERT_EQ(same.size(), plan.size());
  for (std::size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(same[i].at, plan[i].at);
    EXPECT_EQ(same[i].kind_index, plan[i].kind_index);
    EXPECT_EQ(same[i].fault.duration, plan[i].fault.duration);
    EXPECT_EQ(same[i].fault.target, plan[i].kind_index == 2 ? "lock-service" : "");
  }
}

TEST(ScheduleMembers, RefusedAtTheirPlaceWhereTheyCannotApply) {
  auto with = [](const std::string& from, const std::string& to) {
    std::string yaml = kCluster;
    yaml.replace(yaml.find(from), from.size(), to);
    return error_of(yaml);
  };
  // Line 16 is "      target: {lock_service: leader}": the target's value at column 15, the role at 30.
  EXPECT_EQ(with("{kind: etcd, members: 3}", "{kind: etcd}"),
            "s.yaml:16:30: schedule.faults[0].target.lock_service: a lock-service member target needs a cluster, and "
            "this etcd runs as one process (set lock_service.members, e.g. members: 3)");
  EXPECT_EQ(with("{kind: etcd, members: 3}", "{kind: etcd, endpoints: [\"http://127.0.0.1:2379\"]}"),
            "s.yaml:16:30: schedule.faults[0].target.lock_service: a lock-service member target needs the embedded "
            "cluster; the harness cannot act on the members of the one at lock_service.endpoints");
  std::string redlock = kCluster;  // redlock's workers are commands: fencecheck-worker has no Redlock client
  redlock.replace(redlock.find("{kind: etcd, members: 3}"), 24, "{kind: redlock}");
  redlock.replace(redlock.find("[{id: w1}, {id: w2}]"), 20, "[{id: w1, command: [./w]}, {id: w2, command: [./w]}]");
  EXPECT_EQ(error_of(redlock),
            "s.yaml:16:30: schedule.faults[0].target.lock_service: redlock has no leader: its masters are independent "
            "(aim at member: N, minority or majority)");
  EXPECT_EQ(with("{lock_service: leader}", "{lock_service: {member: 4}}"),
            "s.yaml:16:30: schedule.faults[0].target.lock_service: member 4 is out of range: lock_service.members is 3 "
            "(members are numbered 1..3)");
  EXPECT_EQ(with("{lock_service: leader}", "{lock_service: boss}"),
            "s.yaml:16:30: schedule.faults[0].target.lock_service: expected leader, follower, {member: N}, minority or "
            "majority, got \"boss\"");
  // A kind that takes no member target, and a kind's own refusal of one, at the target.
  EXPECT_EQ(with("    - kind: sigstop\n      duration: {min: 1s", "    - kind: cpu-throttle\n      duration: {min: 1s"),
            "s.yaml:16:15: schedule.faults[0].target: cpu-throttle takes no lock-service member target (target: "
            "{lock_service: ...} is for sigstop, partition and lock-service-restart)");
  EXPECT_EQ(with("      duration: 1s\n", "      duration: 1s\n      fresh_data: true\n"),
            "s.yaml:24:15: schedule.faults[2].target: lock-service-restart of a member restarts it on its own data "
            "(kill -9, then start): fresh_data is for the whole lock service (target: lock-service)");
  // A worker kind aimed at workers still takes the rules only.
  EXPECT_EQ(with("{lock_service: leader}", "leader"),
            "s.yaml:16:15: schedule.faults[0].target: unknown schedule target \"leader\"; expected one of: holders, "
            "workers");
}

TEST(Schedule, SplitMix64IsTheReferenceGenerator) {
  // Vigna's splitmix64.c seeded with 0: the first three outputs.
  SplitMix64 r(0);
  EXPECT_EQ(r.next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(r.next(), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(r.next(), 0x06c45d188009454fULL);
  SplitMix64 b(1);
  for (int i = 0; i < 10000; ++i) {
    const auto x = b.between(-3, 3);
    ASSERT_GE(x, -3);
    ASSERT_LE(x, 3);
  }
  SplitMix64 c(2);
  EXPECT_EQ(c.between(5, 5), 5);
}

TEST(Schedule, SameSeedSamePlanExactly) {
  const ScheduleSpec spec = small_spec();
  const auto a = plan_schedule(spec, 42);
  EXPECT_EQ(a, plan_schedule(spec, 42));
  // The exact plan for seed 42: portable (SplitMix64 and rejection sampling, no std distributions),
  // so these numbers hold on every platform and standard library.
  std::vector<std::tuple<std::int64_t, std::string, std::int64_t>> got;
  for (const auto& p : a)
    got.emplace_back(std::chrono::duration_cast<std::chrono::milliseconds>(p.at).count(),
                     p.fault.kind,
                     std::chrono::duration_cast<std::chrono::milliseconds>(p.fault.duration).count());
  const std::vector<std::tuple<std::int64_t, std::string, std::int64_t>> want {
      {2312, "sigstop", 1128},      {3882, "sigstop", 1649},  {6779, "cpu-throttle", 645},
      {9638, "cpu-throttle", 777},  {10802, "sigstop", 2187}, {12989, "cpu-throttle", 656},
      {15795, "sigstop", 3261},     {19056, "sigstop", 3541}, {22597, "sigstop", 3154},
      {25751, "sigstop", 2405}};  // also computed by an independent Python transcription of the generator
  EXPECT_EQ(got, want);
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].index, i);
    EXPECT_EQ(a[i].fault.target, "");
    EXPECT_EQ(a[i].rule, a[i].kind_index == 0 ? ScheduleTarget::kHolders : ScheduleTarget::kWorkers);
  }
}

TEST(Schedule, DifferentSeedsDiffer) {
  const ScheduleSpec spec = small_spec();
  const auto a = plan_schedule(spec, 1);
  int differing = 0;
  for (std::uint64_t seed = 2; seed < 12; ++seed) differing += plan_schedule(spec, seed) != a ? 1 : 0;
  EXPECT_EQ(differing, 10);
}

TEST(Schedule, WeightsRangesAndTheAtOnceLimitHold) {
  ScheduleSpec spec = small_spec();
  spec.duration = std::chrono::hours(30);
  spec.max_at_once = 3;
  spec.faults[0].weight = 3;
  spec.faults[1].weight = 1;
  const auto plan = plan_schedule(spec, 2026);
  ASSERT_GT(plan.size(), 10000u);
  std::map<std::string, std::size_t> count;
  Duration previous{-1};
  for (const auto& p : plan) {
    ++count[p.fault.kind];
    const ScheduleKind& k = spec.faults[p.kind_index];
    EXPECT_EQ(p.fault.kind, k.fault.kind);
    ASSERT_GE(p.fault.duration, k.min_duration);
    ASSERT_LE(p.fault.duration, k.max_duration);
    ASSERT_EQ(p.fault.duration % std::chrono::milliseconds(1), Duration::zero());
    ASSERT_GE(p.at, previous);
    // The next start is at least one interval on (more when the limit held it back).
    if (previous >= Duration::zero()) ASSERT_GE(p.at - previous, spec.min_interval);
    previous = p.at;
    ASSERT_LE(p.at + p.fault.duration, spec.duration);
  }
  const double share = static_cast<double>(count["sigstop"]) / static_cast<double>(plan.size());
  EXPECT_NEAR(share, 0.75, 0.02);
  // At no start are more than max_at_once faults in effect (a fault ending exactly then is over).
  // (Only faults started within the longest duration before can still be in effect.)
  std::size_t worst = 0;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    std::size_t at_once = 0;
    for (std::size_t j = i + 1; j-- > 0 && plan[j].at + spec.faults[0].max_duration > plan[i].at;)
      if (plan[i].at < plan[j].at + plan[j].fault.duration) ++at_once;
    worst = std::max(worst, at_once);
  }
  EXPECT_EQ(worst, 3u);  // reached, never exceeded
  // Intervals never below the minimum nor (without a limit holding back) above the maximum.
  ScheduleSpec free = small_spec();
  free.duration = std::chrono::hours(10);
  free.max_at_once = 64;
  const auto fp = plan_schedule(free, 5);
  for (std::size_t i = 1; i < fp.size(); ++i) {
    ASSERT_GE(fp[i].at - fp[i - 1].at, free.min_interval);
    ASSERT_LE(fp[i].at - fp[i - 1].at, free.max_interval);
  }
}

TEST(Schedule, AtOnceOneMeansOneAfterAnother) {
  ScheduleSpec spec = small_spec();
  spec.duration = std::chrono::hours(2);
  const auto plan = plan_schedule(spec, 9);
  for (std::size_t i = 1; i < plan.size(); ++i)
    ASSERT_GE(plan[i].at, plan[i - 1].at + plan[i - 1].fault.duration) << i;
}

TEST(Schedule, PickTargetIsStableAndCoversTheCandidates) {
  EXPECT_EQ(pick_target(1, 0, 1), 0u);
  EXPECT_EQ(pick_target(1, 3, 5), pick_target(1, 3, 5));
  std::vector<int> seen(4, 0);
  for (std::size_t i = 0; i < 4000; ++i) ++seen[pick_target(77, i, 4)];
  for (int n : seen) EXPECT_NEAR(n, 1000, 120);
}

TEST(Schedule, DurationOverrideKeepsTheMargin) {
  const Scenario s = parse_scenario(kBase + kSchedule, "s.yaml");
  const Scenario hour = with_schedule_duration(s, std::chrono::hours(1));
  EXPECT_EQ(hour.schedule()->duration, Duration(std::chrono::hours(1)));
  EXPECT_EQ(hour.timeout(), Duration(std::chrono::hours(1) + 60s));
  EXPECT_TRUE(scenario_from_json(to_json(hour), "scenario.json") == hour);
  try {
    (void)with_schedule_duration(parse_scenario(kBase, "p.yaml"), 60s);
    ADD_FAILURE() << "no schedule: expected an error";
  } catch (const ScenarioError& e) {
    EXPECT_STREQ(e.what(), "p.yaml: --duration 60s cannot apply to scenario soak: it has no schedule (--duration sets how "
                           "long a schedule runs)");
  }
  try {
    (void)with_schedule_duration(s, 5s);
    ADD_FAILURE() << "too short: expected an error";
  } catch (const ScenarioError& e) {
    EXPECT_STREQ(e.what(), "s.yaml: --duration 5s cannot apply to scenario soak: its schedule draws sigstop faults of up "
                           "to 6s, which do not fit");
  }
}

}  // namespace
