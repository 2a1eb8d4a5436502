// cpu-throttle and freeze on real processes (one, and a worker's whole tree) through the host's
// real cgroup filesystem: baseline -> inject -> observe -> heal -> observe healed. Needs root;
// skips otherwise.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "fencecheck/faults/cpu_throttle.h"
#include "fencecheck/faults/freeze.h"
#include "fencecheck/faults/process.h"
#include "fencecheck/faults/process_tree.h"
#include "root_util.h"

using namespace fencecheck::faults;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {
std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
// A "key value" line of a flat-keyed cgroup file (cpu.stat, cgroup.events).
std::int64_t keyed(const fs::path& file, const std::string& key) {
  std::istringstream in(slurp(file));
  std::string k;
  std::int64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return -1;
}
// utime + stime of a process, in clock ticks (proc(5) fields 14 and 15).
std::int64_t cpu_ticks(pid_t pid) {
  auto stat = read_proc_stat(pid).value_or("");
  std::istringstream in(stat.substr(stat.rfind(')') + 2));
  std::string f;
  std::int64_t ut = 0, st = 0;
  for (int i = 3; i <= 15 && in >> f; ++i) {
    if (i == 14) ut = std::stoll(f);
    if (i == 15) st = std::stoll(f);
  }
  return ut + st;
}
std::string run_id(const char* what) { return std::string(what) + std::to_string(::getpid()); }
// ThrottleSpec's default, 2 ms per 100 ms, as the kernel reads it back.
void expect_default_quota(const CgroupHierarchy& h, const fs::path& dir) {
  if (h.version == CgroupVersion::kV2) {
    EXPECT_EQ(slurp(dir / "cpu.max"), "2000 100000\n");
  } else {
    EXPECT_EQ(slurp(dir / "cpu.cfs_quota_us"), "2000\n");
    EXPECT_EQ(slurp(dir / "cpu.cfs_period_us"), "100000\n");
  }
}
}  // namespace

TEST(CpuThrottleReal, ABusyProcessIsThrottledThenReleased) {
  if (!fctest::is_root()) GTEST_SKIP() << "needs root: it moves processes between cgroups";
  auto support = detect_cgroups();
  if (!support.cpu) GTEST_SKIP() << support.cpu_missing;
  const CgroupHierarchy h = *support.cpu;
  const CgroupFs cfs;

  fctest::BusyChild child(2);  // three spinning threads
  ASSERT_TRUE(fctest::wait_until([&] { return fctest::task_ids(child.pid()).size() == 3; }, 5s));
  auto ref = ProcessRef::of(child.pid());
  ASSERT_TRUE(ref);
  // Baseline.
  const auto original = cgroup_of(cfs, h, child.pid());
  ASSERT_TRUE(original);
  CpuThrottleFault fault(*ref, "busy", run_id("ct"));
  ASSERT_FALSE(fs::exists(fault.cgroup_dir()));
  const std::string mine = "/" + fault.cgroup_dir().filename().string();

  fault.inject();
  ASSERT_TRUE(fault.active());
  ASSERT_TRUE(fs::is_directory(fault.cgroup_dir()));
  expect_default_quota(h, fault.cgroup_dir());
  for (pid_t tid : fctest::task_ids(child.pid())) EXPECT_EQ(cgroup_of(cfs, h, child.pid(), tid), mine) << "thread " << tid;
  // Observe: the kernel throttles it, period after period (cpu.stat nr_throttled grows).
  const auto stat = fault.cgroup_dir() / "cpu.stat";
  ASSERT_TRUE(fctest::wait_until([&] { return keyed(stat, "nr_throttled") >= 2; }, 5s)) << slurp(stat);
  const auto n1 = keyed(stat, "nr_throttled");
  ASSERT_TRUE(fctest::wait_until([&] { return keyed(stat, "nr_throttled") > n1; }, 5s)) << slurp(stat);
  // And it gets about 2 % of a CPU: over a 500 ms window far less than the 200 % it would use.
  const auto t0 = cpu_ticks(child.pid());
  std::this_thread::sleep_for(500ms);
  const auto used = cpu_ticks(child.pid()) - t0;
  const double cpus = static_cast<double>(used) / static_cast<double>(::sysconf(_SC_CLK_TCK)) / 0.5;
  EXPECT_LT(cpus, 0.25) << "used " << used << " ticks in 500 ms while throttled";

  EXPECT_TRUE(fault.heal());
  EXPECT_FALSE(fault.active());
  EXPECT_FALSE(fs::exists(fault.cgroup_dir()));
  for (pid_t tid : fctest::task_ids(child.pid())) EXPECT_EQ(cgroup_of(cfs, h, child.pid(), tid), original);
  EXPECT_TRUE(ref->same_process_alive());
  // Runs unthrottled again: it accumulates CPU time quickly.
  const auto t1 = cpu_ticks(child.pid());
  EXPECT_TRUE(fctest::wait_until([&] { return cpu_ticks(child.pid()) - t1 >= 20; }, 5s));
}

TEST(CpuThrottleReal, HealAfterTheTargetDiedRemovesTheCgroup) {
  if (!fctest::is_root()) GTEST_SKIP() << "needs root: it moves processes between cgroups";
  auto support = detect_cgroups();
  if (!support.cpu) GTEST_SKIP() << support.cpu_missing;
  fctest::BusyChild child(0);
  CpuThrottleFault fault(*ProcessRef::of(child.pid()), "dying", run_id("cd"));
  fault.inject();
  child.reap();
  EXPECT_TRUE(fault.heal());
  EXPECT_FALSE(fault.active());
  EXPECT_FALSE(fs::exists(fault.cgroup_dir()));
}

TEST(FreezeReal, TheCounterStopsWhileFrozenAndResumesAfterHeal) {
  if (!fctest::is_root()) GTEST_SKIP() << "needs root: it moves processes between cgroups";
  auto support = detect_cgroups();
  if (!support.freezer) GTEST_SKIP() << support.freezer_missing;
  const CgroupHierarchy h = *support.freezer;
  const CgroupFs cfs;

  fctest::CounterChild child;
  auto ref = ProcessRef::of(child.pid());
  ASSERT_TRUE(ref);
  // Baseline: it makes progress.
  auto v0 = child.next(5s);
  ASSERT_TRUE(v0);
  auto v1 = child.next(5s);
  ASSERT_TRUE(v1);
  EXPECT_GT(*v1, *v0);
  const auto original = cgroup_of(cfs, h, child.pid());

  FreezeFault fault(*ref, "counter", run_id("fz"));
  fault.inject();
  ASSERT_TRUE(fault.active());
  if (h.version == CgroupVersion::kV1) EXPECT_EQ(slurp(fault.cgroup_dir() / "freezer.state"), "FROZEN\n");
  else EXPECT_EQ(keyed(fault.cgroup_dir() / "cgroup.events", "frozen"), 1);
  // Observe: after what was written before the freeze is drained, nothing more arrives.
  auto before = child.drain();
  EXPECT_FALSE(child.next(300ms)) << "the counter moved while frozen";

  EXPECT_TRUE(fault.heal());
  EXPECT_FALSE(fault.active());
  auto after = child.next(5s);
  ASSERT_TRUE(after) << "no progress after thaw";
  EXPECT_GT(*after, before.value_or(*v1));
  EXPECT_FALSE(fs::exists(fault.cgroup_dir()));
  EXPECT_EQ(cgroup_of(cfs, h, child.pid()), original);
}

TEST(FreezeReal, GuardThawsOnScopeExit) {
  if (!fctest::is_root()) GTEST_SKIP() << "needs root: it moves processes between cgroups";
  auto support = detect_cgroups();
  if (!support.freezer) GTEST_SKIP() << support.freezer_missing;
  fctest::CounterChild child;
  ASSERT_TRUE(child.next(5s));
  FreezeFault fault(*ProcessRef::of(child.pid()), "counter", run_id("fg"));
  {
    FaultGuard guard(fault);
    fault.inject();
    child.drain();
    EXPECT_FALSE(child.next(100ms));
  }
  EXPECT_TRUE(child.next(5s));
  EXPECT_FALSE(fs::exists(fault.cgroup_dir()));
}

// ---------------------------------------------------------------- the worker's process tree
namespace {
// sh -> {sleep, sh (spins after forking) -> sleep}: three levels; the spinner shows whether the
// tree gets CPU.
const char* kSpinningTree = "sleep 1000 & sh -c 'sleep 1000 & while :; do :; done' & wait";

struct Tree {
  std::vector<TreeMember> members;
  pid_t spinner = 0;  // the depth-1 sh, parent of the depth-2 sleep
};
Tree grown_tree(pid_t root) {
  Tree t;
  fctest::wait_until(
      [&] {
        t.members = walk_tree(ProcessRef::of(root).value_or(ProcessRef{}));
        return t.members.size() >= 4;
      },
      5s);
  if (!t.members.empty() && t.members.back().depth == 2) t.spinner = t.members.back().parent.pid;
  return t;
}
// The cgroup of each process of the tree; with threads, each thread's too ("pid/tid").
std::map<std::string, std::string> cgroups_of(const CgroupFs& cfs, const CgroupHierarchy& h, const Tree& t) {
  std::map<std::string, std::string> out;
  for (const auto& m : t.members) {
    const pid_t pid = m.ref.pid;
    out[std::to_string(pid)] = cgroup_of(cfs, h, pid).value_or("?");
    for (pid_t tid : fctest::task_ids(pid))
      out[std::to_string(pid) + "/" + std::to_string(tid)] = cgroup_of(cfs, h, pid, tid).value_or("?");
  }
  return out;
}
// Injects and prints how long it took and how many walks it made.
template <typename F>
void timed_inject(F& fault, const char* what) {
  const auto t0 = std::chrono::steady_clock::now();
  fault.inject();
  std::cout << "[ measured ] " << what << " inject on a 3-level tree of 4 processes: "
            << std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count()
            << " us, " << fault.last_walk().walks << " walks\n";
}
// Every process and thread of the tree is in the fault's cgroup.
template <typename F>
void expect_tree_inside(const CgroupFs& cfs, const CgroupHierarchy& h, const Tree& t, const F& fault) {
  const std::string mine = "/" + fault.cgroup_dir().filename().string();
  for (const auto& [who, cgroup] : cgroups_of(cfs, h, t)) EXPECT_EQ(cgroup, mine) << "pid/tid " << who;
}

// freeze on the tree of a spinning shell, on the freezer detect_cgroups(cfs) finds.
void freeze_tree_round_trip(const CgroupFs& cfs, const CgroupHierarchy& h) {
  fctest::TreeChild worker(fctest::TreeChild::sh(kSpinningTree));
  fctest::BusyChild control(0);  // never frozen: the clock the spinner is compared with
  const auto tree = grown_tree(worker.pid());
  ASSERT_EQ(tree.members.size(), 4u);
  ASSERT_GT(tree.spinner, 0);
  const auto original = cgroups_of(cfs, h, tree);

  FreezeFault fault(tree.members.front().ref, "tree", run_id("ft"), {}, cfs);
  ASSERT_EQ(fault.hierarchy(), h);
  timed_inject(fault, h.version == CgroupVersion::kV1 ? "freeze (v1)" : "freeze (v2)");
  expect_tree_inside(cfs, h, tree, fault);
  if (h.version == CgroupVersion::kV1) EXPECT_EQ(slurp(fault.cgroup_dir() / "freezer.state"), "FROZEN\n");
  else EXPECT_EQ(keyed(fault.cgroup_dir() / "cgroup.events", "frozen"), 1);
  // Frozen: while the control spins for 20 ticks of CPU, the spinner gets none.
  const auto spin0 = cpu_ticks(tree.spinner), control0 = cpu_ticks(control.pid());
  ASSERT_TRUE(fctest::wait_until([&] { return cpu_ticks(control.pid()) - control0 >= 20; }, 10s));
  EXPECT_LE(cpu_ticks(tree.spinner) - spin0, 1) << "the spinner ran while frozen";

  EXPECT_TRUE(fault.heal());
  EXPECT_FALSE(fault.active());
  EXPECT_FALSE(fs::exists(fault.cgroup_dir()));
  EXPECT_EQ(cgroups_of(cfs, h, tree), original);
  const auto spin1 = cpu_ticks(tree.spinner);
  EXPECT_TRUE(fctest::wait_until([&] { return cpu_ticks(tree.spinner) - spin1 >= 5; }, 10s)) << "not running again";
}
}  // namespace

TEST(FreezeReal, EveryProcessOfTheTreeIsFrozenAndHealPutsEachBack) {
  if (!fctest::is_root()) GTEST_SKIP() << "needs root: it moves processes between cgroups";
  auto support = detect_cgroups();
  if (!support.freezer) GTEST_SKIP() << support.freezer_missing;
  freeze_tree_round_trip(CgroupFs{}, *support.freezer);
}

// A hybrid host (v1 controllers, cgroup2 at /sys/fs/cgroup/unified) serves the v1 freezer above;
// its unified mount has the v2 freezer (cgroup.freeze) too: the same round trip on it.
TEST(FreezeReal, OnTheUnifiedV2MountOfAHybridHostToo) {
  if (!fctest::is_root()) GTEST_SKIP() << "needs root: it moves processes between cgroups";
  const CgroupFs unified("/sys/fs/cgroup/unified");
  if (!fs::exists(unified.root() / "cgroup.controllers"))
    GTEST_SKIP() << "no cgroup2 mount at " << unified.root() << " (not a hybrid host)";
  auto support = detect_cgroups(unified);
  if (!support.freezer) GTEST_SKIP() << support.freezer_missing;
  freeze_tree_round_trip(unified, *support.freezer);
}

TEST(CpuThrottleReal, EveryProcessOfTheTreeIsThrottledAndHealPutsEachBack) {
  if (!fctest::is_root()) GTEST_SKIP() << "needs root: it moves processes between cgroups";
  auto support = detect_cgroups();
  if (!support.cpu) GTEST_SKIP() << support.cpu_missing;
  const CgroupHierarchy h = *support.cpu;
  const CgroupFs cfs;
  fctest::TreeChild worker(fctest::TreeChild::sh(kSpinningTree));
  const auto tree = grown_tree(worker.pid());
  ASSERT_EQ(tree.members.size(), 4u);
  const auto original = cgroups_of(cfs, h, tree);

  CpuThrottleFault fault(tree.members.front().ref, "tree", run_id("ctt"));
  timed_inject(fault, "cpu-throttle");
  expect_tree_inside(cfs, h, tree, fault);
  expect_default_quota(h, fault.cgroup_dir());
  // The spinner (depth 1) is what uses the quota up: the kernel throttles the cgroup.
  const auto stat = fault.cgroup_dir() / "cpu.stat";
  EXPECT_TRUE(fctest::wait_until([&] { return keyed(stat, "nr_throttled") >= 2; }, 5s)) << slurp(stat);

  EXPECT_TRUE(fault.heal());
  EXPECT_FALSE(fault.active());
  EXPECT_FALSE(fs::exists(fault.cgroup_dir()));
  EXPECT_EQ(cgroups_of(cfs, h, tree), original);
}
