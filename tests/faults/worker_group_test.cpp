// A command worker's process group in the ledger (faults/worker_group.h): what the worker forked
// is ended when the worker is done, and by `fencecheck cleanup` (the ledger's healer) when the
// harness was kill -9'ed and the group's leader died with it, leaving its children orphaned.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "fencecheck/faults/ledger.h"
#include "fencecheck/faults/worker_group.h"

namespace {

using namespace fencecheck::faults;
namespace fs = std::filesystem;

/// Starts `sh -c script` as the leader of a process group of its own, as the harness starts a
/// command worker.
pid_t start_group_leader(const char* script) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::execl("/bin/sh", "sh", "-c", script, static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

/// Polls until the group has n members (an observable event, not a fixed sleep); false after 10 s.
bool wait_for_members(const ProcessRef& leader, std::size_t n) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    if (group_members(leader).size() == n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

TEST(WorkerGroup, ItsMembersAreTheLeaderAndWhatItForked) {
  const pid_t pid = start_group_leader("sleep 1000 & sleep 1000 & wait");
  const auto leader = ProcessRef::of(pid);
  ASSERT_TRUE(leader);
  ASSERT_TRUE(wait_for_members(*leader, 3u)) << group_members(*leader).size();
  WorkerGroup group(*leader, "w1");
  group.inject();
  EXPECT_EQ(group.target(), "w1 (process group " + std::to_string(pid) + ")");
  EXPECT_TRUE(group.heal());  // the worker is done: nothing it forked outlives it
  EXPECT_FALSE(group.active());
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_TRUE(wait_for_members(*leader, 0u));
}

TEST(WorkerGroup, CleanupEndsTheOrphansOfADeadLeaderFromTheLedger) {
  // The leader forks two sleepers, one of them stopped (a sigstop nobody will continue), and dies
  // as PR_SET_PDEATHSIG kills it when the harness is kill -9'ed.
  // SIGHUP ignored (and inherited): when the leader dies, the kernel sends SIGHUP and SIGCONT to an
  // orphaned process group with a stopped member (POSIX, "orphaned process group"), which would
  // end the children before cleanup could.
  const pid_t pid = start_group_leader("trap '' HUP; sleep 1000 & kill -STOP $!; sleep 1000 & wait");
  const auto leader = ProcessRef::of(pid);
  ASSERT_TRUE(leader);
  ASSERT_TRUE(wait_for_members(*leader, 3u));
  const fs::path ledger_path = fs::path(::testing::TempDir()) / ("worker-group-" + std::to_string(::getpid()) + ".ledger");
  fs::remove(ledger_path);
  {
    FaultLedger ledger(ledger_path, "run-worker-group");
    WorkerGroup group(*leader, "w1");
    group.inject();
    (void)ledger.record_inject(group);
    ::kill(pid, SIGKILL);
    ASSERT_EQ(::waitpid(pid, nullptr, 0), pid);
    const auto orphans = group_members(*leader);
    ASSERT_EQ(orphans.size(), 2u) << "the leader is gone, its children are not";
  }  // the harness "dies" here without healing: the group object is gone, the ledger entry stays
  const auto said = heal_outstanding(ledger_path, /*force=*/true);  // this test is the ledger's writer, alive
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0].rfind("worker-group w1: ended 2 process(es) left in process group " + std::to_string(pid), 0), 0u)
      << said[0];
  EXPECT_TRUE(wait_for_members(*leader, 0u));
  EXPECT_TRUE(heal_outstanding(ledger_path, true).empty()) << "healed once, then nothing is outstanding";
  fs::remove(ledger_path);
}

// A /proc/<pid>/stat line (proc(5)) with the given state, pgrp (field 5) and starttime (field 22).
std::string stat_line(pid_t pid, char state, pid_t pgrp, std::uint64_t start_ticks) {
  std::string s = std::to_string(pid) + " (sleep) " + state + " 1 " + std::to_string(pgrp);
  for (int field = 6; field < 22; ++field) s += " 0";
  return s + " " + std::to_string(start_ticks) + " 0 0\n";
}

// A member still alive after SIGKILL (as a task in uninterruptible sleep would be, shown here by a
// /proc that still lists it): the group is not healed, says which PID, and stays active; once the
// member is gone (a zombie counts as ended) the heal takes effect.
TEST(WorkerGroup, AMemberAliveAfterSigkillIsNotHealed) {
  // sleep itself as the leader, not under sh -c: a shell that forks it would leave it running
  // once the fake /proc below names only the shell.
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(pid, 0);
  const auto leader = ProcessRef::of(pid);
  ASSERT_TRUE(leader);
  const fs::path proc = fs::path(::testing::TempDir()) / ("fake-proc-" + std::to_string(::getpid()));
  fs::remove_all(proc);
  fs::create_directories(proc / std::to_string(pid));
  std::ofstream(proc / std::to_string(pid) / "stat") << stat_line(pid, 'D', pid, leader->start_ticks);
  WorkerGroup group(*leader, "w1", std::chrono::milliseconds(50), proc.string());
  group.inject();
  EXPECT_FALSE(group.heal());
  EXPECT_TRUE(group.active());
  EXPECT_EQ(group.heal_failure(), "worker-group w1 (process group " + std::to_string(pid) + "): 1 process(es) of process group " +
                                      std::to_string(pid) + " still alive 50 ms after SIGKILL: pid " + std::to_string(pid));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid) << "the SIGKILL itself was sent";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

  std::ofstream(proc / std::to_string(pid) / "stat", std::ios::trunc) << stat_line(pid, 'Z', pid, leader->start_ticks);
  EXPECT_TRUE(group.heal());
  EXPECT_FALSE(group.active());
  fs::remove_all(proc);
  ::kill(-pid, SIGKILL);  // nothing of the group outlives the test, whatever happened above
}

TEST(WorkerGroup, ANumberNowNamingAnotherProcessIsNotOurGroup) {
  // A live process with the group's PID but another start time: the group is not ours any more.
  const auto self = ProcessRef::of(::getpid());
  ASSERT_TRUE(self);
  EXPECT_TRUE(group_members({self->pid, self->start_ticks + 1}).empty());
}

}  // namespace
