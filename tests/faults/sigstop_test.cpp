// SIGSTOP fault on a real child process: baseline -> inject -> observe (state T) -> heal -> observe.
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>

#include "child.h"
#include "fencecheck/faults/sigstop.h"
#include "undo_failure.h"

using namespace fencecheck::faults;

TEST(ProcessRef, IdentifiesALiveProcessByPidAndStartTime) {
  fctest::SleepChild child;
  auto ref = ProcessRef::of(child.pid());
  ASSERT_TRUE(ref.has_value());
  EXPECT_EQ(ref->pid, child.pid());
  EXPECT_GT(ref->start_ticks, 0u);
  EXPECT_TRUE(ref->same_process_alive());
  ProcessRef reused{ref->pid, ref->start_ticks + 1};  // same PID, another start time: a reused PID
  EXPECT_FALSE(reused.same_process_alive());
  child.reap();
  EXPECT_FALSE(ref->same_process_alive());
  EXPECT_FALSE(ProcessRef::of(-1).has_value());
}

TEST(SigstopFault, StopsAndContinuesTheTarget) {
  fctest::SleepChild child;
  auto ref = ProcessRef::of(child.pid());
  ASSERT_TRUE(ref);
  ASSERT_TRUE(fctest::wait_state(child.pid(), [](char s) { return s == 'S' || s == 'R'; }));
  SigstopFault fault(*ref, "w1");
  EXPECT_EQ(fault.kind(), "sigstop");
  EXPECT_EQ(fault.target(), "w1 (pid " + std::to_string(child.pid()) + ")");
  fault.inject();
  EXPECT_TRUE(fault.active());
  EXPECT_TRUE(fctest::wait_state(child.pid(), [](char s) { return s == 'T'; }));
  fault.inject();  // idempotent
  EXPECT_TRUE(fault.heal());
  EXPECT_FALSE(fault.active());
  EXPECT_TRUE(fctest::wait_state(child.pid(), [](char s) { return s != 'T'; }));
  EXPECT_TRUE(fault.heal());  // idempotent
  auto rec = fault.ledger_record();
  EXPECT_EQ(rec["pid"], child.pid());
  EXPECT_EQ(rec["start_ticks"], ref->start_ticks);
}

// An inject that fails part-way (the tree's second process cannot be stopped) continues what it
// had stopped through heal(); when that SIGCONT fails too, the root stays stopped, the fault stays
// active and outstanding in the ledger, the message says so, and a later heal continues it.
TEST(SigstopFault, AFailedInjectWhoseUndoFailsStaysActiveAndOutstanding) {
  fctest::TreeChild tree(fctest::TreeChild::sh("sleep 1000 & wait"));
  const auto root = ProcessRef::of(tree.pid());
  ASSERT_TRUE(root);
  ASSERT_TRUE(fctest::wait_until([&] { return !children_of(*root).empty(); }, std::chrono::seconds(10)));
  bool refuse_cont = true;
  SigstopFault fault(*root, "w1", [&](const ProcessRef& p, int sig) {
    if (sig == SIGSTOP && p.pid != root->pid) return EPERM;  // the descendant cannot be stopped
    if (sig == SIGCONT && refuse_cont) return EPERM;          // nor the root continued, for now
    return 0;
  });
  fctest::FailedUndo undo(fault, std::filesystem::path(::testing::TempDir()) /
                                     ("sigstop-undo-" + std::to_string(::getpid()) + ".ledger"));
  const std::string what = undo.inject_fails_and_stays_in_effect();
  EXPECT_NE(what.find("failed: Operation not permitted"), std::string::npos) << what;
  EXPECT_NE(what.find("; its undo failed too: sigstop w1 (pid " + std::to_string(root->pid) + "): pid " +
                      std::to_string(root->pid) + ": kill(SIGCONT) failed: Operation not permitted"),
            std::string::npos)
      << what;
  ASSERT_EQ(fault.stopped().size(), 1u);
  EXPECT_EQ(fault.stopped()[0].pid, root->pid);
  EXPECT_TRUE(fctest::wait_state(root->pid, [](char s) { return s == 'T'; })) << "really stopped, and kept";

  refuse_cont = false;
  undo.heal_takes_effect();
  EXPECT_TRUE(fctest::wait_state(root->pid, [](char s) { return s != 'T'; }));
}

// The same failure with an undo that works: nothing is left stopped and the fault is inactive.
TEST(SigstopFault, AFailedInjectIsUndone) {
  fctest::TreeChild tree(fctest::TreeChild::sh("sleep 1000 & wait"));
  const auto root = ProcessRef::of(tree.pid());
  ASSERT_TRUE(root);
  ASSERT_TRUE(fctest::wait_until([&] { return !children_of(*root).empty(); }, std::chrono::seconds(10)));
  SigstopFault fault(*root, "w1", [&](const ProcessRef& p, int sig) {
    return sig == SIGSTOP && p.pid != root->pid ? EPERM : 0;
  });
  try {
    fault.inject();
    FAIL() << "must throw";
  } catch (const FaultError& e) {
    EXPECT_NE(std::string(e.what()).find("Operation not permitted; undone"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fault.active());
  EXPECT_TRUE(fault.stopped().empty());
  EXPECT_TRUE(fctest::wait_state(root->pid, [](char s) { return s != 'T'; }));
}

TEST(SigstopFault, GuardContinuesOnScopeExitIncludingExceptions) {
  fctest::SleepChild child;
  auto ref = ProcessRef::of(child.pid());
  ASSERT_TRUE(ref);
  SigstopFault fault(*ref, "w1");
  try {
    FaultGuard guard(fault);
    fault.inject();
    ASSERT_TRUE(fctest::wait_state(child.pid(), [](char s) { return s == 'T'; }));
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(fault.active());
  EXPECT_TRUE(fctest::wait_state(child.pid(), [](char s) { return s != 'T'; }));
}

TEST(SigstopFault, RefusesAGoneOrReusedProcess) {
  fctest::SleepChild child;
  auto ref = ProcessRef::of(child.pid());
  ASSERT_TRUE(ref);
  SigstopFault reused(ProcessRef{ref->pid, ref->start_ticks + 7}, "w1");
  EXPECT_THROW(reused.inject(), FaultError);
  EXPECT_FALSE(reused.active());
  EXPECT_TRUE(fctest::wait_state(child.pid(), [](char s) { return s != 'T'; }));
  child.reap();
  SigstopFault gone(*ref, "w1");
  try {
    gone.inject();
    FAIL() << "inject on a gone process must throw";
  } catch (const FaultError& err) {
    EXPECT_NE(std::string(err.what()).find("gone"), std::string::npos);
  }
}

TEST(SigstopFault, HealOfAVanishedTargetIsQuiet) {
  fctest::SleepChild child;
  auto ref = ProcessRef::of(child.pid());
  ASSERT_TRUE(ref);
  SigstopFault fault(*ref, "w1");
  fault.inject();
  child.reap();  // SIGKILL works on a stopped process
  EXPECT_TRUE(fault.heal());
  EXPECT_FALSE(fault.active());
}

TEST(SigstopFault, EmergencyContinueReachesEveryStoppedTarget) {
  fctest::SleepChild a, b;
  SigstopFault fa(*ProcessRef::of(a.pid()), "a"), fb(*ProcessRef::of(b.pid()), "b");
  fa.inject();
  fb.inject();
  ASSERT_TRUE(fctest::wait_state(a.pid(), [](char s) { return s == 'T'; }));
  ASSERT_TRUE(fctest::wait_state(b.pid(), [](char s) { return s == 'T'; }));
  emergency_continue_all();
  EXPECT_TRUE(fctest::wait_state(a.pid(), [](char s) { return s != 'T'; }));
  EXPECT_TRUE(fctest::wait_state(b.pid(), [](char s) { return s != 'T'; }));
}
