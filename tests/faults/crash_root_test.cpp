// A harness killed with kill -9 in the middle of its faults: a forked child creates a ledger, a
// network lab with a partition, a cpu-throttle, a freeze and a SIGSTOP, then dies by SIGKILL.
// heal_outstanding(ledger) + sweep_leftovers() must leave nothing: no namespace, link, cgroup,
// frozen or stopped process. Needs root, cgroup cpu + freezer and netns; skips otherwise.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>

#include "child.h"
#include "fencecheck/faults/cpu_throttle.h"
#include "fencecheck/faults/freeze.h"
#include "fencecheck/faults/ledger.h"
#include "fencecheck/faults/netns.h"
#include "fencecheck/faults/partition.h"
#include "fencecheck/faults/sigstop.h"
#include "fencecheck/faults/sweep.h"
#include "root_util.h"

using namespace fencecheck::faults;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// The doomed harness: everything in effect and recorded, then it reports ready and waits to die.
// Runs in a forked child: never returns (exits through _exit or SIGKILL).
[[noreturn]] void doomed_harness(const fs::path& ledger_path, const std::string& run, pid_t busy, pid_t counter,
                                 pid_t sleeper, int ready_fd) {
  try {
    FaultLedger ledger(ledger_path, run);
    SystemCommandRunner runner;
    auto* lab = new NetworkLab({run, {"w1"}}, runner, &ledger);  // leaked on purpose: a crash frees nothing
    lab->setup();
    auto arm = [&](Fault* f) {
      ledger.record_inject(*f);  // BEFORE it takes effect
      f->inject();
    };
    arm(new PartitionFault(*lab, "w1", PartitionSpec::full()));
    arm(new CpuThrottleFault(*ProcessRef::of(busy), "busy", run));
    arm(new FreezeFault(*ProcessRef::of(counter), "counter", run));
    arm(new SigstopFault(*ProcessRef::of(sleeper), "sleeper"));
    (void)!::write(ready_fd, "R", 1);
  } catch (const std::exception& e) {
    std::string msg = std::string("E") + e.what();
    (void)!::write(ready_fd, msg.data(), msg.size());
    ::_exit(1);
  }
  for (;;) ::pause();
}

std::vector<std::string> fencecheck_cgroups(const std::string& run) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& h : fs::directory_iterator("/sys/fs/cgroup", ec)) {
    if (!h.is_directory(ec)) continue;
    std::error_code ec2;
    for (const auto& c : fs::directory_iterator(h.path(), ec2))
      if (c.path().filename().string().rfind("fencecheck-" + run, 0) == 0) out.push_back(c.path().string());
  }
  if (fs::exists("/sys/fs/cgroup/cgroup.controllers"))
    for (const auto& c : fs::directory_iterator("/sys/fs/cgroup", ec))
      if (c.path().filename().string().rfind("fencecheck-" + run, 0) == 0) out.push_back(c.path().string());
  return out;
}

std::vector<std::string> run_namespaces(CommandRunner& r, const std::string& run) {
  std::vector<std::string> out;
  std::istringstream in(r.run({"ip", "netns", "list"}));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("fc-" + run + "-", 0) == 0) out.push_back(line.substr(0, line.find(' ')));
  return out;
}

}  // namespace

TEST(CrashRecovery, KillMinusNineThenCleanupLeavesNothing) {
  if (!fctest::is_root()) GTEST_SKIP() << "needs root: cgroups and network namespaces";
  auto support = detect_cgroups();
  if (!support.cpu) GTEST_SKIP() << support.cpu_missing;
  if (!support.freezer) GTEST_SKIP() << support.freezer_missing;
  SystemCommandRunner r;
  const std::string run = "crash" + std::to_string(::getpid());
  {
    // Probe netns support up front so that a missing feature is a skip, not a failure.
    NetworkLab probe({run + "p", {"p"}}, r);
    try {
      probe.setup();
    } catch (const FaultUnavailable& e) {
      GTEST_SKIP() << e.what();
    }
  }

  const fs::path dir = fs::temp_directory_path() / ("fc-crash-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path ledger = dir / "faults.ledger";
  fs::remove(ledger);

  fctest::BusyChild busy(1);
  fctest::CounterChild counter;
  fctest::SleepChild sleeper;
  ASSERT_TRUE(counter.next(5s));
  const auto busy_cgroup = cgroup_of(CgroupFs{}, *support.cpu, busy.pid());
  const auto counter_cgroup = cgroup_of(CgroupFs{}, *support.freezer, counter.pid());

  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t harness = ::fork();
  ASSERT_GE(harness, 0);
  if (harness == 0) {
    ::close(ready[0]);
    doomed_harness(ledger, run, busy.pid(), counter.pid(), sleeper.pid(), ready[1]);
  }
  ::close(ready[1]);
  pollfd pfd{ready[0], POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 30000), 1) << "the doomed harness never got ready";
  char buf[512] = {};
  ASSERT_GT(::read(ready[0], buf, sizeof buf - 1), 0);
  ::close(ready[0]);
  ::kill(harness, SIGKILL);
  ::waitpid(harness, nullptr, 0);
  ASSERT_EQ(buf[0], 'R') << (buf + 1);

  // What the crash left behind.
  EXPECT_EQ(run_namespaces(r, run).size(), 2u);
  EXPECT_EQ(fencecheck_cgroups(run).size(), 2u);
  EXPECT_TRUE(fctest::wait_state(sleeper.pid(), [](char s) { return s == 'T'; }));
  counter.drain();
  EXPECT_FALSE(counter.next(200ms)) << "the counter should be frozen";
  EXPECT_EQ(FaultLedger::outstanding(ledger).size(), 5u);  // lab, partition, throttle, freeze, sigstop

  // `fencecheck cleanup`: heal from the ledger, then sweep.
  auto said = heal_outstanding(ledger);
  for (const auto& s : said) std::cout << "  cleanup: " << s << "\n";
  EXPECT_EQ(said.size(), 5u);
  EXPECT_TRUE(FaultLedger::outstanding(ledger).empty());
  SweepOptions o;
  o.ledgers = {ledger};
  auto swept = sweep_leftovers(run, o);
  for (const auto& s : swept) std::cout << "  sweep: " << s << "\n";
  EXPECT_TRUE(swept.empty());

  // Nothing is left.
  EXPECT_TRUE(run_namespaces(r, run).empty());
  EXPECT_TRUE(fencecheck_cgroups(run).empty());
  EXPECT_EQ(r.run({"ip", "-o", "link", "show"}).find("fc" + lab_tag(run)), std::string::npos);
  EXPECT_TRUE(fctest::wait_state(sleeper.pid(), [](char s) { return s != 'T'; }));
  EXPECT_TRUE(counter.next(5s)) << "the counter did not resume";
  EXPECT_EQ(cgroup_of(CgroupFs{}, *support.cpu, busy.pid()), busy_cgroup);
  EXPECT_EQ(cgroup_of(CgroupFs{}, *support.freezer, counter.pid()), counter_cgroup);
  // And a second cleanup has nothing to do.
  EXPECT_TRUE(heal_outstanding(ledger).empty());
  fs::remove_all(dir);
}
