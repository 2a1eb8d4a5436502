// SIGSTOP fault on a real child process: baseline -> inject -> observe (state T) -> heal -> observe.
#include <gtest/gtest.h>

#include "child.h"
#include "fencecheck/faults/sigstop.h"

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
  fault.heal();
  EXPECT_FALSE(fault.active());
  EXPECT_TRUE(fctest::wait_state(child.pid(), [](char s) { return s != 'T'; }));
  fault.heal();  // idempotent
  auto rec = fault.ledger_record();
  EXPECT_EQ(rec["pid"], child.pid());
  EXPECT_EQ(rec["start_ticks"], ref->start_ticks);
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
  fault.heal();
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
