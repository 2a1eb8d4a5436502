// cgroup detection, cpu-throttle and freeze against a fake cgroup tree (v2 and v1): the exact files
// written and their contents, for inject, heal, a vanished target, idempotence and the ledger.
#include <gtest/gtest.h>

#include <algorithm>

#include "child.h"
#include "fake_cgroup.h"
#include "undo_failure.h"
#include "fencecheck/faults/cpu_throttle.h"
#include "fencecheck/faults/freeze.h"
#include "fencecheck/faults/ledger.h"
#include "healers.h"

using namespace fencecheck::faults;
using fctest::FakeCgroupTree;
using W = FakeCgroupTree::Write;
using Writes = std::vector<W>;

namespace {
const std::string kV2Proc = "0::/system.slice/w.scope\n";
const std::string kV1Proc = "9:name=systemd:/\n6:freezer:/\n2:cpuacct:/\n1:cpu:/\n0::/\n";
const std::string P(pid_t p) { return std::to_string(p); }

// Two extra (fake) thread ids next to the real main thread, sorted like thread_ids() returns them.
std::vector<pid_t> tids_of(pid_t pid) {
  std::vector<pid_t> t{pid, 4190001, 4190002};
  std::sort(t.begin(), t.end());
  return t;
}
}  // namespace

// ---------------------------------------------------------------- detection
TEST(CgroupDetect, PureV2WithCpuEnabled) {
  FakeCgroupTree t("detect-v2");
  t.make_v2();
  auto s = detect_cgroups(t.fs());
  ASSERT_TRUE(s.cpu);
  EXPECT_EQ(s.cpu->version, CgroupVersion::kV2);
  EXPECT_EQ(s.cpu->mount, t.root());
  ASSERT_TRUE(s.freezer);
  EXPECT_EQ(s.freezer->version, CgroupVersion::kV2);
  EXPECT_EQ(s.freezer->mount, t.root());
}

TEST(CgroupDetect, V2WithoutCpuNamesWhatIsMissing) {
  FakeCgroupTree t("detect-v2-nocpu");
  t.make_v2(/*cpu_listed=*/false);
  auto s = detect_cgroups(t.fs());
  EXPECT_FALSE(s.cpu);
  EXPECT_EQ(s.cpu_missing, "cgroup cpu controller not found: neither cgroup v2 cpu.max nor v1 cpu.cfs_quota_us under " +
                               t.root().string() + " (" + (t.root() / "cgroup.controllers").string() +
                               " does not list cpu)");
  EXPECT_TRUE(s.freezer);  // cgroup.freeze is core v2, not a controller
  try {
    (void)require_cpu_hierarchy(t.fs());
    FAIL() << "must throw FaultUnavailable";
  } catch (const FaultUnavailable& e) {
    EXPECT_EQ(std::string(e.what()), s.cpu_missing);
  }
}

TEST(CgroupDetect, V2CpuNotEnabledForChildrenSaysHowToEnableIt) {
  FakeCgroupTree t("detect-v2-notenabled");
  t.make_v2(/*cpu_listed=*/true, /*cpu_enabled=*/false);
  auto s = detect_cgroups(t.fs());
  EXPECT_FALSE(s.cpu);
  EXPECT_NE(s.cpu_missing.find("does not enable it for child cgroups"), std::string::npos) << s.cpu_missing;
  EXPECT_NE(s.cpu_missing.find("echo +cpu > " + (t.root() / "cgroup.subtree_control").string()), std::string::npos);
}

TEST(CgroupDetect, V1MountsLikeThisMachine) {
  FakeCgroupTree t("detect-v1");
  t.make_v1();
  auto s = detect_cgroups(t.fs());
  ASSERT_TRUE(s.cpu);
  EXPECT_EQ(s.cpu->version, CgroupVersion::kV1);
  EXPECT_EQ(s.cpu->mount, t.root() / "cpu");
  EXPECT_EQ(s.cpu->controller, "cpu");
  ASSERT_TRUE(s.freezer);
  EXPECT_EQ(s.freezer->version, CgroupVersion::kV1);
  EXPECT_EQ(s.freezer->mount, t.root() / "freezer");
  EXPECT_EQ(s.freezer->controller, "freezer");
}

TEST(CgroupDetect, V1CoMountedCpuCpuacct) {
  FakeCgroupTree t("detect-v1-comount");
  t.make_v1("cpu,cpuacct");
  auto s = detect_cgroups(t.fs());
  ASSERT_TRUE(s.cpu);
  EXPECT_EQ(s.cpu->mount, t.root() / "cpu,cpuacct");
}

TEST(CgroupDetect, HybridFallsBackToTheUnifiedMount) {
  FakeCgroupTree t("detect-hybrid");
  t.file("cgroup/unified/cgroup.controllers", "cpu io\n");
  t.file("cgroup/unified/cgroup.subtree_control", "cpu\n");
  auto s = detect_cgroups(t.fs());
  ASSERT_TRUE(s.cpu);
  EXPECT_EQ(s.cpu->version, CgroupVersion::kV2);
  EXPECT_EQ(s.cpu->mount, t.root() / "unified");
  ASSERT_TRUE(s.freezer);
  EXPECT_EQ(s.freezer->mount, t.root() / "unified");
}

TEST(CgroupDetect, NothingThereNamesBothMissingPieces) {
  FakeCgroupTree t("detect-none");
  auto s = detect_cgroups(t.fs());
  EXPECT_FALSE(s.cpu);
  EXPECT_FALSE(s.freezer);
  EXPECT_EQ(s.cpu_missing, "cgroup cpu controller not found: neither cgroup v2 cpu.max nor v1 cpu.cfs_quota_us under " +
                               t.root().string());
  EXPECT_EQ(s.freezer_missing,
            "cgroup freezer not found: neither cgroup v2 cgroup.freeze nor v1 freezer.state under " + t.root().string());
  fctest::SleepChild c;
  EXPECT_THROW(CpuThrottleFault(*ProcessRef::of(c.pid()), "w1", "r1", {}, t.fs()), FaultUnavailable);
  EXPECT_THROW(FreezeFault(*ProcessRef::of(c.pid()), "w1", "r1", {}, t.fs()), FaultUnavailable);
}

TEST(CgroupOf, PicksTheRightV1LineAndTheV2Line) {
  FakeCgroupTree t("cgroup-of");
  t.file("proc/7/cgroup", "3:cpuset:/x\n2:cpuacct:/a\n1:cpu:/b\n6:freezer:/f\n0::/u\n");
  t.file("proc/8/cgroup", "4:cpu,cpuacct:/c\n");
  t.file("proc/7/task/9/cgroup", "1:cpu:/thread\n");
  auto f = t.fs();
  CgroupHierarchy cpu{CgroupVersion::kV1, t.root() / "cpu", "cpu"}, frz{CgroupVersion::kV1, t.root() / "freezer", "freezer"},
      v2{CgroupVersion::kV2, t.root(), ""};
  EXPECT_EQ(cgroup_of(f, cpu, 7), "/b");
  EXPECT_EQ(cgroup_of(f, frz, 7), "/f");
  EXPECT_EQ(cgroup_of(f, v2, 7), "/u");
  EXPECT_EQ(cgroup_of(f, cpu, 8), "/c");
  EXPECT_EQ(cgroup_of(f, cpu, 7, 9), "/thread");
  EXPECT_FALSE(cgroup_of(f, cpu, 12345));
}

TEST(CgroupName, ContainsFencecheckAndOnlySafeCharacters) {
  EXPECT_EQ(cgroup_name("20240101T000000Z-smoke", "w1"), "fencecheck-20240101T000000Z-smoke-w1");
  EXPECT_EQ(cgroup_name("r 1", "w/1"), "fencecheck-r_1-w_1");
  EXPECT_EQ(cgroup_name(std::string(300, 'x'), "w").size(), 200u);
}

TEST(ThrottleSpec, ValidatesKernelBoundsAndComputesFractions) {
  auto s = ThrottleSpec::cpu_fraction(0.02);
  EXPECT_EQ(s.quota.count(), 2000);
  EXPECT_EQ(s.period.count(), 100000);
  EXPECT_NO_THROW(s.validate());
  EXPECT_THROW((ThrottleSpec{std::chrono::microseconds(500), std::chrono::microseconds(2000)}.validate()),
               std::invalid_argument);
  EXPECT_THROW((ThrottleSpec{std::chrono::microseconds(100000), std::chrono::microseconds(999)}.validate()),
               std::invalid_argument);
  EXPECT_THROW((ThrottleSpec{std::chrono::seconds(2), std::chrono::microseconds(2000)}.validate()), std::invalid_argument);
}

// ---------------------------------------------------------------- cpu-throttle, v2
TEST(CpuThrottleV2, InjectAndHealWriteExactlyTheseFiles) {
  FakeCgroupTree t("throttle-v2");
  t.make_v2();
  fctest::SleepChild c;
  auto ref = *ProcessRef::of(c.pid());
  t.add_process(c.pid(), {c.pid()}, kV2Proc);
  CpuThrottleFault f(ref, "w1", "r1", {}, t.fs());
  EXPECT_EQ(f.kind(), "cpu-throttle");
  EXPECT_EQ(f.cgroup_dir(), t.root() / "fencecheck-r1-w1");

  f.inject();
  EXPECT_TRUE(f.active());
  EXPECT_EQ(t.writes(), (Writes{{"cgroup/fencecheck-r1-w1/cpu.max", "2000 100000"},
                                {"cgroup/fencecheck-r1-w1/cgroup.procs", P(c.pid())}}));
  t.clear_writes();
  f.inject();  // idempotent
  EXPECT_TRUE(t.writes().empty());

  EXPECT_TRUE(f.heal());
  EXPECT_FALSE(f.active());
  EXPECT_EQ(t.writes(), (Writes{{"cgroup/system.slice/w.scope/cgroup.procs", P(c.pid())}}));
  EXPECT_FALSE(t.exists("cgroup/fencecheck-r1-w1"));
  t.clear_writes();
  EXPECT_TRUE(f.heal());  // idempotent
  EXPECT_TRUE(t.writes().empty());
}

TEST(CpuThrottleV2, QuotaFromSpec) {
  FakeCgroupTree t("throttle-v2-spec");
  t.make_v2();
  fctest::SleepChild c;
  t.add_process(c.pid(), {c.pid()}, kV2Proc);
  CpuThrottleFault f(*ProcessRef::of(c.pid()), "w2", "r1", ThrottleSpec::cpu_fraction(0.5, std::chrono::milliseconds(20)),
                     t.fs());
  f.inject();
  EXPECT_EQ(t.writes().front(), (W{"cgroup/fencecheck-r1-w2/cpu.max", "10000 20000"}));
  EXPECT_TRUE(f.heal());
}

TEST(CpuThrottleV2, HealOfAVanishedTargetOnlyRemovesTheCgroup) {
  FakeCgroupTree t("throttle-v2-vanished");
  t.make_v2();
  fctest::SleepChild c;
  t.add_process(c.pid(), {c.pid()}, kV2Proc);
  CpuThrottleFault f(*ProcessRef::of(c.pid()), "w1", "r1", {}, t.fs());
  f.inject();
  const pid_t pid = c.pid();
  c.reap();
  t.remove_process(pid);
  t.clear_writes();
  EXPECT_TRUE(f.heal());
  EXPECT_FALSE(f.active());
  EXPECT_TRUE(t.writes().empty());
  EXPECT_FALSE(t.exists("cgroup/fencecheck-r1-w1"));
}

TEST(CpuThrottleV2, ProcessesStartedInsideAreMovedOutToo) {
  FakeCgroupTree t("throttle-v2-children");
  t.make_v2();
  fctest::SleepChild c;
  t.add_process(c.pid(), {c.pid()}, kV2Proc);
  CpuThrottleFault f(*ProcessRef::of(c.pid()), "w1", "r1", {}, t.fs());
  f.inject();
  // The target forked a child while throttled: it shows up in the cgroup (and in /proc).
  t.file("cgroup/fencecheck-r1-w1/cgroup.procs", P(c.pid()) + "\n4190077\n");
  t.file("proc/4190077/cgroup", "0::/fencecheck-r1-w1\n");
  t.clear_writes();
  EXPECT_TRUE(f.heal());
  EXPECT_EQ(t.writes(), (Writes{{"cgroup/system.slice/w.scope/cgroup.procs", P(c.pid())},
                                {"cgroup/system.slice/w.scope/cgroup.procs", "4190077"}}));
}

TEST(CpuThrottleV2, RefusesAGoneOrReusedProcessAndWritesNothing) {
  FakeCgroupTree t("throttle-v2-gone");
  t.make_v2();
  fctest::SleepChild c;
  auto ref = *ProcessRef::of(c.pid());
  t.add_process(c.pid(), {c.pid()}, kV2Proc);
  CpuThrottleFault reused(ProcessRef{ref.pid, ref.start_ticks + 3}, "w1", "r1", {}, t.fs());
  try {
    reused.inject();
    FAIL() << "must throw";
  } catch (const FaultError& e) {
    EXPECT_NE(std::string(e.what()).find("gone or its PID was reused"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(reused.active());
  EXPECT_TRUE(t.writes().empty());
  EXPECT_FALSE(t.exists("cgroup/fencecheck-r1-w1"));
}

TEST(CpuThrottleV2, RefusesToOverlapAnotherFencecheckCgroup) {
  FakeCgroupTree t("throttle-v2-overlap");
  t.make_v2();
  fctest::SleepChild c;
  t.add_process(c.pid(), {c.pid()}, "0::/fencecheck-r1-w1\n");  // e.g. frozen by a freeze fault
  CpuThrottleFault f(*ProcessRef::of(c.pid()), "w1", "r1", {}, t.fs());
  try {
    f.inject();
    FAIL() << "must throw";
  } catch (const FaultError& e) {
    EXPECT_NE(std::string(e.what()).find("already in a fencecheck cgroup"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(t.writes().empty());
}

TEST(CpuThrottleV2, LedgerRecordHoldsWhatCleanupNeeds) {
  FakeCgroupTree t("throttle-v2-record");
  t.make_v2();
  fctest::SleepChild c;
  auto ref = *ProcessRef::of(c.pid());
  t.add_process(c.pid(), {c.pid()}, kV2Proc);
  CpuThrottleFault f(ref, "w1", "r1", {}, t.fs());
  auto before = f.ledger_record();  // what the ledger gets, BEFORE inject
  EXPECT_EQ(before["target"], "w1");
  EXPECT_EQ(before["pid"], c.pid());
  EXPECT_EQ(before["start_ticks"], ref.start_ticks);
  EXPECT_EQ(before["cgroup_version"], 2);
  EXPECT_EQ(before["mount"], t.root().string());
  EXPECT_EQ(before["cgroup_dir"], (t.root() / "fencecheck-r1-w1").string());
  EXPECT_EQ(before["original"], "/system.slice/w.scope");
  EXPECT_EQ(before["thread_originals"], nlohmann::json::object());
  EXPECT_EQ(before["period_us"], 100000);
  EXPECT_EQ(before["quota_us"], 2000);
  f.inject();
  EXPECT_EQ(f.ledger_record(), before);
  EXPECT_TRUE(f.heal());
}

TEST(CpuThrottleV2, HealerUndoesItFromTheRecordAlone) {
  FakeCgroupTree t("throttle-v2-healer");
  t.make_v2();
  fctest::SleepChild c;
  t.add_process(c.pid(), {c.pid()}, kV2Proc);
  nlohmann::json rec;
  {
    CpuThrottleFault f(*ProcessRef::of(c.pid()), "w1", "r1", {}, t.fs());
    rec = f.ledger_record();
    f.inject();
    // Cleanup from another process (after a kill -9) sees only the record.
    rec["kind"] = "cpu-throttle";
    t.clear_writes();
    auto said = detail::heal_cpu_throttle_record(rec, t.fs());
    EXPECT_EQ(said, "cpu-throttle w1: moved pid " + P(c.pid()) + " back to " +
                        (t.root() / "system.slice/w.scope").string() + "; removed cgroup " +
                        (t.root() / "fencecheck-r1-w1").string());
    EXPECT_EQ(t.writes(), (Writes{{"cgroup/system.slice/w.scope/cgroup.procs", P(c.pid())}}));
    EXPECT_FALSE(t.exists("cgroup/fencecheck-r1-w1"));
    t.clear_writes();
    EXPECT_TRUE(f.heal());  // the live object's heal after the healer: nothing left to do but no harm
    EXPECT_FALSE(f.active());
  }
  // Idempotent: a second cleanup finds nothing.
  EXPECT_EQ(detail::heal_cpu_throttle_record(rec, t.fs()),
            "cpu-throttle w1: cgroup " + (t.root() / "fencecheck-r1-w1").string() + " already removed");
}

TEST(CpuThrottleV2, HealOutstandingUsesTheTable) {
  FakeCgroupTree t("throttle-v2-ledger");
  t.make_v2();
  fctest::SleepChild c;
  t.add_process(c.pid(), {c.pid()}, kV2Proc);
  auto ledger_path = t.dir() / "faults.ledger";
  CpuThrottleFault f(*ProcessRef::of(c.pid()), "w1", "r1", {}, t.fs());
  {
    auto e = f.ledger_record();
    e.update({{"op", "inject"}, {"id", 1}, {"kind", "cpu-throttle"}, {"run_id", "r1"}, {"harness_pid", 999999999},
              {"harness_start_ticks", 1}});
    std::ofstream(ledger_path) << e.dump() << "\n";
  }
  f.inject();
  auto said = heal_outstanding(ledger_path);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("removed cgroup"), std::string::npos) << said[0];
  EXPECT_EQ(t.read("cgroup/system.slice/w.scope/cgroup.procs"), P(c.pid()));
  EXPECT_FALSE(t.exists("cgroup/fencecheck-r1-w1"));
  EXPECT_TRUE(FaultLedger::outstanding(ledger_path).empty());
}

// A cgroup that cannot be removed (a child cgroup inside it: rmdir fails, ENOTEMPTY here, EBUSY
// on a cgroup fs) is not healed: heal() says so and keeps the fault active, the ledger gets no
// heal entry, and cleanup still finds it (and fails the same way) until it can be removed.
TEST(CpuThrottleV2, AHealThatCannotRemoveTheCgroupStaysOutstanding) {
  FakeCgroupTree t("throttle-v2-stuck");
  t.make_v2();
  fctest::SleepChild c;
  t.add_process(c.pid(), {c.pid()}, kV2Proc);
  const auto ledger_path = t.dir() / "faults.ledger";
  CpuThrottleFault f(*ProcessRef::of(c.pid()), "w1", "r1", {}, t.fs());
  FaultLedger ledger(ledger_path, "r1");
  const auto id = ledger.record_inject(f);
  f.inject();
  std::filesystem::create_directories(t.root() / "fencecheck-r1-w1" / "child");

  EXPECT_FALSE(ledger.heal(f, id));
  EXPECT_TRUE(f.active());
  EXPECT_EQ(f.heal_failure().rfind("cpu-throttle w1 (pid " + P(c.pid()) + "): cannot remove cgroup " +
                                       (t.root() / "fencecheck-r1-w1").string() + ": Directory not empty for 2000 ms",
                                   0),
            0u)
      << f.heal_failure();
  ASSERT_EQ(FaultLedger::outstanding(ledger_path).size(), 1u);

  auto said = heal_outstanding(ledger_path, /*force=*/true);  // this process wrote it: force
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("cpu-throttle: heal failed: "), std::string::npos) << said[0];
  EXPECT_NE(said[0].find("Directory not empty"), std::string::npos) << said[0];
  EXPECT_EQ(FaultLedger::outstanding(ledger_path).size(), 1u);

  std::filesystem::remove(t.root() / "fencecheck-r1-w1" / "child");
  said = heal_outstanding(ledger_path, /*force=*/true);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("removed cgroup"), std::string::npos) << said[0];
  EXPECT_TRUE(FaultLedger::outstanding(ledger_path).empty());
  EXPECT_TRUE(f.heal());  // what the healer did is what the live object finds done
  EXPECT_FALSE(f.active());
}

// ---------------------------------------------------------------- cpu-throttle, v1
TEST(CpuThrottleV1, InjectWritesPeriodQuotaProcsAndEveryThread) {
  FakeCgroupTree t("throttle-v1");
  t.make_v1();
  fctest::SleepChild c;
  auto tids = tids_of(c.pid());
  t.add_process(c.pid(), tids, kV1Proc);
  CpuThrottleFault f(*ProcessRef::of(c.pid()), "w1", "r1", {}, t.fs());
  EXPECT_EQ(f.hierarchy().version, CgroupVersion::kV1);
  f.inject();
  Writes want{{"cgroup/cpu/fencecheck-r1-w1/cpu.cfs_period_us", "100000"},
              {"cgroup/cpu/fencecheck-r1-w1/cpu.cfs_quota_us", "2000"},
              {"cgroup/cpu/fencecheck-r1-w1/cgroup.procs", P(c.pid())}};
  for (pid_t tid : tids) want.push_back({"cgroup/cpu/fencecheck-r1-w1/tasks", P(tid)});
  EXPECT_EQ(t.writes(), want);
  t.clear_writes();
  EXPECT_TRUE(f.heal());
  EXPECT_EQ(t.writes(), (Writes{{"cgroup/cpu/cgroup.procs", P(c.pid())}}));
  EXPECT_FALSE(t.exists("cgroup/cpu/fencecheck-r1-w1"));
}

TEST(CpuThrottleV1, EachThreadGoesBackToItsOwnCgroup) {
  FakeCgroupTree t("throttle-v1-threads");
  t.make_v1();
  fctest::SleepChild c;
  auto tids = tids_of(c.pid());
  t.add_process(c.pid(), tids, kV1Proc, {{4190002, "1:cpu:/other\n"}});
  CpuThrottleFault f(*ProcessRef::of(c.pid()), "w1", "r1", {}, t.fs());
  auto rec = f.ledger_record();
  EXPECT_EQ(rec["original"], "/");
  EXPECT_EQ(rec["thread_originals"], (nlohmann::json{{"4190002", "/other"}}));
  EXPECT_EQ(rec["controller"], "cpu");
  f.inject();
  t.clear_writes();
  EXPECT_TRUE(f.heal());
  EXPECT_EQ(t.writes(), (Writes{{"cgroup/cpu/cgroup.procs", P(c.pid())}, {"cgroup/cpu/other/tasks", "4190002"}}));
}

TEST(CpuThrottleV1, ThreadsCreatedWhileThrottledAreMovedBack) {
  FakeCgroupTree t("throttle-v1-newthread");
  t.make_v1();
  fctest::SleepChild c;
  t.add_process(c.pid(), {c.pid()}, kV1Proc);
  CpuThrottleFault f(*ProcessRef::of(c.pid()), "w1", "r1", {}, t.fs());
  f.inject();
  t.file("cgroup/cpu/fencecheck-r1-w1/tasks", P(c.pid()) + "\n4190055\n");
  t.file("proc/4190055/cgroup", "1:cpu:/fencecheck-r1-w1\n");
  t.clear_writes();
  EXPECT_TRUE(f.heal());
  EXPECT_EQ(t.writes(), (Writes{{"cgroup/cpu/cgroup.procs", P(c.pid())}, {"cgroup/cpu/tasks", "4190055"}}));
}

TEST(CpuThrottleV1, GuardHealsOnScopeExit) {
  FakeCgroupTree t("throttle-v1-guard");
  t.make_v1();
  fctest::SleepChild c;
  t.add_process(c.pid(), {c.pid()}, kV1Proc);
  CpuThrottleFault f(*ProcessRef::of(c.pid()), "w1", "r1", {}, t.fs());
  try {
    FaultGuard g(f);
    f.inject();
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(f.active());
  EXPECT_FALSE(t.exists("cgroup/cpu/fencecheck-r1-w1"));
}

// ---------------------------------------------------------------- freeze, v1
TEST(FreezeV1, InjectFreezesAndWaitsForFrozenHealThawsMovesBackRemoves) {
  FakeCgroupTree t("freeze-v1");
  t.make_v1();
  fctest::SleepChild c;
  auto tids = tids_of(c.pid());
  t.add_process(c.pid(), tids, kV1Proc);
  FreezeFault f(*ProcessRef::of(c.pid()), "w1", "r1", {}, t.fs());
  EXPECT_EQ(f.kind(), "freeze");
  EXPECT_EQ(f.cgroup_dir(), t.root() / "freezer" / "fencecheck-r1-w1");
  f.inject();
  Writes want{{"cgroup/freezer/fencecheck-r1-w1/cgroup.procs", P(c.pid())}};
  for (pid_t tid : tids) want.push_back({"cgroup/freezer/fencecheck-r1-w1/tasks", P(tid)});
  want.push_back({"cgroup/freezer/fencecheck-r1-w1/freezer.state", "FROZEN"});
  EXPECT_EQ(t.writes(), want);
  t.clear_writes();
  f.inject();
  EXPECT_TRUE(t.writes().empty());
  EXPECT_TRUE(f.heal());
  EXPECT_EQ(t.writes(), (Writes{{"cgroup/freezer/fencecheck-r1-w1/freezer.state", "THAWED"},
                                {"cgroup/freezer/cgroup.procs", P(c.pid())}}));
  EXPECT_FALSE(t.exists("cgroup/freezer/fencecheck-r1-w1"));
  EXPECT_FALSE(f.active());
}

TEST(FreezeV1, HealOfAVanishedTargetThawsAndRemoves) {
  FakeCgroupTree t("freeze-v1-vanished");
  t.make_v1();
  fctest::SleepChild c;
  t.add_process(c.pid(), {c.pid()}, kV1Proc);
  FreezeFault f(*ProcessRef::of(c.pid()), "w1", "r1", {}, t.fs());
  f.inject();
  const pid_t pid = c.pid();
  c.reap();
  t.remove_process(pid);
  t.clear_writes();
  EXPECT_TRUE(f.heal());
  EXPECT_EQ(t.writes(), (Writes{{"cgroup/freezer/fencecheck-r1-w1/freezer.state", "THAWED"}}));
  EXPECT_FALSE(t.exists("cgroup/freezer/fencecheck-r1-w1"));
  EXPECT_FALSE(f.active());
}

TEST(FreezeV1, HealerThawsFromTheRecord) {
  FakeCgroupTree t("freeze-v1-healer");
  t.make_v1();
  fctest::SleepChild c;
  t.add_process(c.pid(), {c.pid()}, kV1Proc);
  FreezeFault f(*ProcessRef::of(c.pid()), "w1", "r1", {}, t.fs());
  auto rec = f.ledger_record();
  rec["kind"] = "freeze";
  EXPECT_EQ(rec["cgroup_version"], 1);
  EXPECT_EQ(rec["controller"], "freezer");
  f.inject();
  t.clear_writes();
  auto said = detail::heal_freeze_record(rec, t.fs());
  EXPECT_EQ(said, "freeze w1: thawed; moved pid " + P(c.pid()) + " back to " + (t.root() / "freezer").string() +
                      "; removed cgroup " + (t.root() / "freezer/fencecheck-r1-w1").string());
  EXPECT_EQ(t.writes(), (Writes{{"cgroup/freezer/fencecheck-r1-w1/freezer.state", "THAWED"},
                                {"cgroup/freezer/cgroup.procs", P(c.pid())}}));
  EXPECT_TRUE(f.heal());
}

TEST(Healers, RefuseARecordThatNamesNoFencecheckCgroup) {
  FakeCgroupTree t("healer-refuse");
  t.make_v1();
  nlohmann::json rec{{"kind", "freeze"}, {"target", "w1"}, {"cgroup_dir", (t.root() / "freezer").string()},
                     {"cgroup_version", 1}, {"mount", (t.root() / "freezer").string()}};
  auto said = detail::heal_freeze_record(rec, t.fs());
  EXPECT_NE(said.find("names no fencecheck cgroup"), std::string::npos);
  EXPECT_TRUE(t.writes().empty());
  EXPECT_TRUE(t.exists("cgroup/freezer"));
}

// ---------------------------------------------------------------- freeze, v2
TEST(FreezeV2, InjectWaitsForCgroupEventsFrozen) {
  FakeCgroupTree t("freeze-v2");
  t.make_v2();
  fctest::SleepChild c;
  t.add_process(c.pid(), {c.pid()}, kV2Proc);
  // The kernel maintains cgroup.events; the fake tree says "frozen 1" as the kernel would.
  t.file("cgroup/fencecheck-r1-w1/cgroup.events", "populated 1\nfrozen 1\n");
  FreezeFault f(*ProcessRef::of(c.pid()), "w1", "r1", {}, t.fs());
  f.inject();
  EXPECT_EQ(t.writes(), (Writes{{"cgroup/fencecheck-r1-w1/cgroup.procs", P(c.pid())},
                                {"cgroup/fencecheck-r1-w1/cgroup.freeze", "1"}}));
  t.clear_writes();
  EXPECT_TRUE(f.heal());
  EXPECT_EQ(t.writes(), (Writes{{"cgroup/fencecheck-r1-w1/cgroup.freeze", "0"},
                                {"cgroup/system.slice/w.scope/cgroup.procs", P(c.pid())}}));
  EXPECT_FALSE(t.exists("cgroup/fencecheck-r1-w1"));
}

TEST(FreezeV2, NotFrozenInTimeIsUndoneAndReported) {
  FakeCgroupTree t("freeze-v2-timeout");
  t.make_v2();
  fctest::SleepChild c;
  t.add_process(c.pid(), {c.pid()}, kV2Proc);
  t.file("cgroup/fencecheck-r1-w1/cgroup.events", "populated 1\nfrozen 0\n");
  FreezeFault f(*ProcessRef::of(c.pid()), "w1", "r1", FreezeSpec{std::chrono::milliseconds(30)}, t.fs());
  try {
    f.inject();
    FAIL() << "must throw";
  } catch (const FaultError& e) {
    EXPECT_NE(std::string(e.what()).find("not frozen within 30 ms"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(f.active());
  EXPECT_EQ(t.writes(), (Writes{{"cgroup/fencecheck-r1-w1/cgroup.procs", P(c.pid())},
                                {"cgroup/fencecheck-r1-w1/cgroup.freeze", "1"},
                                {"cgroup/fencecheck-r1-w1/cgroup.freeze", "0"},
                                {"cgroup/system.slice/w.scope/cgroup.procs", P(c.pid())}}));
  EXPECT_FALSE(t.exists("cgroup/fencecheck-r1-w1"));
}

// The freeze that does not settle in time, and whose undo cannot remove the cgroup either.
TEST(FreezeV2, NotFrozenInTimeWithAnUndoThatFailsStaysActiveAndOutstanding) {
  FakeCgroupTree t("freeze-v2-undo-fails");
  t.make_v2();
  fctest::SleepChild c;
  t.add_process(c.pid(), {c.pid()}, kV2Proc);
  t.file("cgroup/fencecheck-r1-w1/cgroup.events", "populated 1\nfrozen 0\n");
  t.on_write([&](const std::string& rel, const std::string& value) {
    if (rel == "cgroup/fencecheck-r1-w1/cgroup.freeze" && value == "1")
      std::filesystem::create_directories(t.root() / "fencecheck-r1-w1" / "child");
  });
  FreezeFault f(*ProcessRef::of(c.pid()), "w1", "r1", FreezeSpec{std::chrono::milliseconds(30)}, t.fs());
  fctest::FailedUndo undo(f, t.dir() / "faults.ledger");
  const std::string what = undo.inject_fails_and_stays_in_effect();
  EXPECT_NE(what.find("not frozen within 30 ms"), std::string::npos) << what;
  EXPECT_NE(what.find("; its undo failed too: freeze w1 (pid " + P(c.pid()) + "): cannot remove cgroup "),
            std::string::npos)
      << what;
  // The undo thawed and moved the process back (then kept moving what the fake's cgroup.procs
  // still lists while it tried to remove the cgroup); only the cgroup is left.
  ASSERT_GE(t.writes().size(), 4u);
  EXPECT_EQ(Writes(t.writes().begin(), t.writes().begin() + 4),
            (Writes{{"cgroup/fencecheck-r1-w1/cgroup.procs", P(c.pid())},
                    {"cgroup/fencecheck-r1-w1/cgroup.freeze", "1"},
                    {"cgroup/fencecheck-r1-w1/cgroup.freeze", "0"},
                    {"cgroup/system.slice/w.scope/cgroup.procs", P(c.pid())}}));
  std::filesystem::remove(t.root() / "fencecheck-r1-w1" / "child");
  undo.heal_takes_effect();
  EXPECT_FALSE(t.exists("cgroup/fencecheck-r1-w1"));
}

TEST(FreezeV2, HealFallsBackToTheNearestAncestorWhenTheOriginalIsGone) {
  FakeCgroupTree t("freeze-v2-origgone");
  t.make_v2();
  fctest::SleepChild c;
  t.add_process(c.pid(), {c.pid()}, kV2Proc);
  t.file("cgroup/fencecheck-r1-w1/cgroup.events", "frozen 1\n");
  FreezeFault f(*ProcessRef::of(c.pid()), "w1", "r1", {}, t.fs());
  f.inject();
  std::filesystem::remove_all(t.root() / "system.slice/w.scope");  // e.g. systemd removed the scope
  t.clear_writes();
  EXPECT_TRUE(f.heal());
  EXPECT_EQ(t.writes(), (Writes{{"cgroup/fencecheck-r1-w1/cgroup.freeze", "0"},
                                {"cgroup/system.slice/cgroup.procs", P(c.pid())}}));
}

// ---------------------------------------------------------------- the worker's process tree
namespace {
// The root (a real child, so that its identity checks hold) with a child and a grandchild in the
// fake /proc; the grandchild starts in another cgroup. The fake /proc has no `children` files, so
// the walk finds them by their ppid.
constexpr pid_t kChild = 4190101, kGrandchild = 4190102;
void add_tree_v2(FakeCgroupTree& t, const ProcessRef& root, const std::string& grandchild_cgroup = "0::/other.scope\n") {
  t.add_process(root.pid, {root.pid}, kV2Proc);
  t.add_process(kChild, {kChild}, kV2Proc, {}, root.pid, root.start_ticks + 1);
  t.add_process(kGrandchild, {kGrandchild}, grandchild_cgroup, {}, kChild, root.start_ticks + 2);
  t.file("cgroup/other.scope/cgroup.procs", "");
}
}  // namespace

TEST(CpuThrottleV2, MovesTheWholeTreeInAndEachProcessBackToItsOwnCgroup) {
  FakeCgroupTree t("throttle-v2-tree");
  t.make_v2();
  fctest::SleepChild c;
  const auto ref = *ProcessRef::of(c.pid());
  add_tree_v2(t, ref);
  CpuThrottleFault f(ref, "w1", "r1", {}, t.fs());
  auto before = f.ledger_record();
  EXPECT_EQ(before["original"], "/system.slice/w.scope");
  ASSERT_EQ(before["descendant_originals"].size(), 1u) << "only the one placed elsewhere than the root";
  EXPECT_EQ(before["descendant_originals"][0]["pid"], kGrandchild);
  EXPECT_EQ(before["descendant_originals"][0]["start_ticks"], ref.start_ticks + 2);
  EXPECT_EQ(before["descendant_originals"][0]["original"], "/other.scope");

  f.inject();
  EXPECT_EQ(t.writes(), (Writes{{"cgroup/fencecheck-r1-w1/cpu.max", "2000 100000"},
                                {"cgroup/fencecheck-r1-w1/cgroup.procs", P(c.pid())},
                                {"cgroup/fencecheck-r1-w1/cgroup.procs", P(kChild)},
                                {"cgroup/fencecheck-r1-w1/cgroup.procs", P(kGrandchild)}}));
  EXPECT_EQ(f.last_walk().walks, 2);
  EXPECT_EQ(f.last_walk().acted, 3u);
  EXPECT_EQ(f.ledger_record(), before);
  t.clear_writes();
  EXPECT_TRUE(f.heal());
  EXPECT_EQ(t.writes(), (Writes{{"cgroup/system.slice/w.scope/cgroup.procs", P(c.pid())},
                                {"cgroup/system.slice/w.scope/cgroup.procs", P(kChild)},
                                {"cgroup/other.scope/cgroup.procs", P(kGrandchild)}}));
  EXPECT_FALSE(t.exists("cgroup/fencecheck-r1-w1"));
}

TEST(CpuThrottleV2, AProcessBornInsideGoesBackWhereItsParentGoes) {
  FakeCgroupTree t("throttle-v2-born");
  t.make_v2();
  fctest::SleepChild c;
  const auto ref = *ProcessRef::of(c.pid());
  add_tree_v2(t, ref);
  // The grandchild forks a process after it entered: it is born inside (never written).
  constexpr pid_t kBorn = 4190103;
  t.add_process(kBorn, {kBorn}, "0::/fencecheck-r1-w1\n", {}, kGrandchild, ref.start_ticks + 3);
  CpuThrottleFault f(ref, "w1", "r1", {}, t.fs());
  f.inject();
  for (const auto& [file, value] : t.writes()) EXPECT_NE(value, P(kBorn)) << file;
  t.clear_writes();
  EXPECT_TRUE(f.heal());
  EXPECT_EQ(t.writes().back(), (W{"cgroup/other.scope/cgroup.procs", P(kBorn)}));
}

TEST(CpuThrottleV2, ATreeWithAProcessInAnotherFencecheckCgroupIsRefusedAndUndone) {
  FakeCgroupTree t("throttle-v2-tree-overlap");
  t.make_v2();
  fctest::SleepChild c;
  const auto ref = *ProcessRef::of(c.pid());
  add_tree_v2(t, ref, "0::/fencecheck-r1-w2\n");
  CpuThrottleFault f(ref, "w1", "r1", {}, t.fs());
  try {
    f.inject();
    FAIL() << "must throw";
  } catch (const FaultError& e) {
    EXPECT_NE(std::string(e.what()).find("pid " + P(kGrandchild) + " of its tree is already in a fencecheck cgroup"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(f.active());
  // What it had moved went back, and the cgroup is gone.
  EXPECT_EQ(t.writes().back(), (W{"cgroup/system.slice/w.scope/cgroup.procs", P(kChild)}));
  EXPECT_FALSE(t.exists("cgroup/fencecheck-r1-w1"));
}

// An inject that fails part-way undoes what it did through heal(), and that undo's result counts:
// when the cgroup cannot be removed (a child cgroup appeared in it), the fault stays active, the
// message says the undo failed, the ledger keeps it outstanding, and a later heal finishes it.
TEST(CpuThrottleV2, AFailedInjectWhoseUndoFailsStaysActiveAndOutstanding) {
  FakeCgroupTree t("throttle-v2-undo-fails");
  t.make_v2();
  fctest::SleepChild c;
  const auto ref = *ProcessRef::of(c.pid());
  add_tree_v2(t, ref, "0::/fencecheck-r1-w2\n");  // the grandchild makes inject() fail
  t.on_write([&](const std::string& rel, const std::string&) {
    if (rel == "cgroup/fencecheck-r1-w1/cgroup.procs")
      std::filesystem::create_directories(t.root() / "fencecheck-r1-w1" / "child");
  });
  CpuThrottleFault f(ref, "w1", "r1", {}, t.fs());
  fctest::FailedUndo undo(f, t.dir() / "faults.ledger");
  const std::string what = undo.inject_fails_and_stays_in_effect();
  EXPECT_NE(what.find("pid " + P(kGrandchild) + " of its tree is already in a fencecheck cgroup"), std::string::npos)
      << what;
  EXPECT_NE(what.find("; its undo failed too: cpu-throttle w1 (pid " + P(c.pid()) + "): cannot remove cgroup "),
            std::string::npos)
      << what;
  EXPECT_NE(f.heal_failure().find("Directory not empty"), std::string::npos) << f.heal_failure();
  EXPECT_TRUE(t.exists("cgroup/fencecheck-r1-w1"));

  std::filesystem::remove(t.root() / "fencecheck-r1-w1" / "child");
  undo.heal_takes_effect();
  EXPECT_FALSE(t.exists("cgroup/fencecheck-r1-w1"));
}

TEST(CpuThrottleV2, TheHealerPutsEachDescendantBackFromTheRecord) {
  FakeCgroupTree t("throttle-v2-tree-healer");
  t.make_v2();
  fctest::SleepChild c;
  const auto ref = *ProcessRef::of(c.pid());
  add_tree_v2(t, ref);
  CpuThrottleFault f(ref, "w1", "r1", {}, t.fs());
  auto rec = f.ledger_record();
  rec["kind"] = "cpu-throttle";
  f.inject();
  t.clear_writes();
  const auto said = detail::heal_cpu_throttle_record(rec, t.fs());
  EXPECT_EQ(t.writes(), (Writes{{"cgroup/system.slice/w.scope/cgroup.procs", P(c.pid())},
                                {"cgroup/other.scope/cgroup.procs", P(kGrandchild)}}));
  EXPECT_NE(said.find("moved 1 descendant(s) back"), std::string::npos) << said;
  EXPECT_FALSE(t.exists("cgroup/fencecheck-r1-w1"));
  EXPECT_TRUE(f.heal());
}

TEST(FreezeV1, TheWholeTreeGoesInBeforeTheFreezeAndBackAfterTheThaw) {
  FakeCgroupTree t("freeze-v1-tree");
  t.make_v1();
  fctest::SleepChild c;
  const auto ref = *ProcessRef::of(c.pid());
  t.add_process(c.pid(), {c.pid()}, kV1Proc);
  t.add_process(kChild, {kChild, kChild + 10}, kV1Proc, {}, c.pid(), ref.start_ticks + 1);
  FreezeFault f(ref, "w1", "r1", {}, t.fs());
  f.inject();
  const std::string dir = "cgroup/freezer/fencecheck-r1-w1/";
  EXPECT_EQ(t.writes(), (Writes{{dir + "cgroup.procs", P(c.pid())},
                                {dir + "tasks", P(c.pid())},
                                {dir + "cgroup.procs", P(kChild)},
                                {dir + "tasks", P(kChild)},
                                {dir + "tasks", P(kChild + 10)},
                                {dir + "freezer.state", "FROZEN"}}));
  t.clear_writes();
  EXPECT_TRUE(f.heal());
  EXPECT_EQ(t.writes(), (Writes{{dir + "freezer.state", "THAWED"},
                                {"cgroup/freezer/cgroup.procs", P(c.pid())},
                                {"cgroup/freezer/cgroup.procs", P(kChild)}}));
  EXPECT_FALSE(t.exists("cgroup/freezer/fencecheck-r1-w1"));
}
