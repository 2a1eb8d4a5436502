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

// --- a command worker's own directory (WorkerDirectory) -------------------------------------

namespace {

/// A worker directory as the harness makes it: <temp dir>/fencecheck-<run id>-w1, with a file and
/// a symlink to a file outside it (the worker's account chose it; it must stay a symlink).
fs::path make_worker_dir(const std::string& run_id, const fs::path& outside) {
  const fs::path scratch = fs::temp_directory_path() / ("fencecheck-" + run_id + "-w1");
  fs::remove_all(scratch);
  fs::create_directories(scratch / "sub");
  std::ofstream(scratch / "sub" / "log.txt") << "worker log\n";
  std::ofstream(outside) << "not the worker's\n";
  fs::create_symlink(outside, scratch / "link");
  return scratch;
}

TEST(WorkerDirectory, CleanupMovesADeadRunsDirectoryIntoItsRunDirectoryFromTheLedger) {
  const std::string run_id = "wdir-" + std::to_string(::getpid());
  const fs::path root = fs::path(::testing::TempDir()) / run_id;
  fs::remove_all(root);
  fs::create_directories(root);
  const fs::path scratch = make_worker_dir(run_id, root / "outside.txt");
  const fs::path ledger_path = root / "faults.ledger";
  {
    FaultLedger ledger(ledger_path, run_id);
    WorkerDirectory dir(scratch, root / "workers" / "w1", "w1", run_id);
    dir.inject();
    (void)ledger.record_inject(dir);
  }  // the harness "dies" here: the directory stays under /tmp, its ledger entry outstanding
  ASSERT_TRUE(fs::is_directory(scratch));
  const auto said = heal_outstanding(ledger_path, /*force=*/true);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0], "worker-dir w1: " + scratch.string() + " moved into " + (root / "workers" / "w1").string());
  EXPECT_FALSE(fs::exists(scratch));
  std::ifstream log(root / "workers" / "w1" / "sub" / "log.txt");
  std::string line;
  EXPECT_TRUE(std::getline(log, line));
  EXPECT_EQ(line, "worker log");
  EXPECT_TRUE(fs::is_symlink(root / "workers" / "w1" / "link")) << "a symlink is kept as one, never followed";
  EXPECT_TRUE(heal_outstanding(ledger_path, true).empty());
  fs::remove_all(root);
}

TEST(WorkerDirectory, ADamagedEntryNeverRemovesAnotherPath) {
  const fs::path root = fs::path(::testing::TempDir()) / ("wdir-damaged-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "precious");
  // Not under the temporary directory; another run's; the temporary directory itself.
  EXPECT_THROW((void)keep_worker_directory(root / "precious", root / "kept", "r1"), std::runtime_error);
  const fs::path other = fs::temp_directory_path() / ("fencecheck-other-run-" + std::to_string(::getpid()) + "-w1");
  fs::create_directories(other);
  try {
    (void)keep_worker_directory(other, root / "kept", "r1");
    ADD_FAILURE() << "another run's directory was taken";
  } catch (const std::runtime_error& err) {
    EXPECT_EQ(std::string(err.what()), "not a worker directory of run r1: " + other.string() + " (expected " +
                                           (fs::temp_directory_path() / "fencecheck-r1-<worker>").string() +
                                           "); left as it is");
  }
  EXPECT_THROW((void)keep_worker_directory(fs::temp_directory_path() / "fencecheck-r1-", root / "kept", "r1"),
               std::runtime_error);
  EXPECT_TRUE(fs::is_directory(root / "precious"));
  EXPECT_TRUE(fs::is_directory(other));
  EXPECT_FALSE(fs::exists(root / "kept"));
  // A directory already gone is done.
  EXPECT_EQ(keep_worker_directory(fs::temp_directory_path() / "fencecheck-r1-gone", root / "kept", "r1"), "");
  fs::remove_all(other);
  fs::remove_all(root);
}

}  // namespace
