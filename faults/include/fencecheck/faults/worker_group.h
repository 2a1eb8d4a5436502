// fencecheck — a command worker's process group, held in the run's fault ledger while the worker
// runs, so that nothing it forked outlives a kill -9'ed harness.
//
// The harness starts a command worker (docs/worker-protocol.md) as the leader of a process group
// of its own (setpgid(0, 0), credentials(7)); whatever the program forks stays in that group unless
// it leaves it. PR_SET_PDEATHSIG (prctl(2)) kills only the leader when the harness dies, so its
// children and grandchildren would be orphaned: running, or stopped by a sigstop that is never
// continued. This "fault" is the ledger's record of that group: recorded when the worker starts,
// healed (its members ended) when the worker is done, and healed by `fencecheck cleanup` when the
// harness never got there. It injects nothing.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "fencecheck/faults/fault.h"
#include "fencecheck/faults/process.h"

namespace fencecheck::faults {

/// The members of process group `pgid` that started no earlier than `leader.start_ticks`, read
/// from <proc>/*/stat (field 5, pgrp; field 22, starttime: proc(5)). Empty when the number now
/// names another group: a live process with PID pgid whose start time is not the leader's (Linux
/// does not hand a PID out again while a process group still uses it as its id, so a number whose
/// leader is gone still names the same group). With alive_only, a zombie (state Z or X: ended,
/// waiting for its parent's wait(2)) is left out. Thread-safe.
[[nodiscard]] std::vector<ProcessRef> group_members(const ProcessRef& leader, const std::string& proc = "/proc",
                                                    bool alive_only = false);

/// How long end_group() waits, by default, for the members it killed to be gone. SIGKILL is
/// delivered at once, but a task in uninterruptible sleep (state D) ends only when it wakes.
inline constexpr std::chrono::milliseconds kGroupEndWait{2000};

/// What end_group() did: how many members it sent SIGKILL to, and which were still alive (not
/// ended, not a zombie) when it stopped waiting. An empty `alive` is the proof the group is gone.
struct GroupEnd {
  int killed = 0;
  std::vector<ProcessRef> alive;
  /// "" when alive is empty, else "2 process(es) of process group 42 still alive 2000 ms after
  /// SIGKILL: pid 43, 44".
  std::string failure;
};

/// Ends every member of the group (group_members): SIGKILL, through signal_process (never a
/// reused PID); SIGKILL ends a stopped process too (signal(7)). Then waits up to `wait` until no
/// member is alive (group_members with alive_only; a zombie counts as ended), polling <proc>.
/// Never throws. Thread-safe.
GroupEnd end_group(const ProcessRef& leader, std::chrono::milliseconds wait = kGroupEndWait,
                   const std::string& proc = "/proc") noexcept;

/// The ledger's record of one command worker's process group. Not thread-safe (fault.h).
class WorkerGroup final : public Fault {
 public:
  /// leader: the worker's own process, the group's leader (its PID is the group's id). wait and
  /// proc: end_group()'s (a test points proc at a fake /proc).
  WorkerGroup(ProcessRef leader, std::string worker, std::chrono::milliseconds wait = kGroupEndWait,
              std::string proc = "/proc");
  ~WorkerGroup() override = default;

  /// "worker-group": the ledger's healer ends the group's members.
  [[nodiscard]] std::string_view kind() const override { return "worker-group"; }
  /// "w1 (process group 4242)".
  [[nodiscard]] std::string target() const override;
  /// Nothing to do: the group exists from the worker's start. Marks it active.
  void inject() override { active_ = true; }
  /// Ends what is left of the group (end_group) and returns true only once no member is alive:
  /// SIGKILL cannot be caught, blocked or ignored (signal(7)), but a member in uninterruptible
  /// sleep outlives it until it wakes, and a kill can fail (EPERM). When a member is still alive
  /// after the wait: false, active() stays true and heal_failure() names the PIDs. Never throws.
  [[nodiscard]] bool heal() noexcept override;
  /// Sends SIGKILL to what is left of the group now, without waiting, and returns how many (0 when
  /// inactive); active() is unchanged: heal() proves the group gone. Never throws.
  int end() noexcept;
  [[nodiscard]] bool active() const override { return active_; }
  /// {"pgid", "start_ticks" (the leader's), "target"}.
  [[nodiscard]] nlohmann::json ledger_record() const override;

 private:
  ProcessRef leader_;
  std::string worker_;
  std::chrono::milliseconds wait_;
  std::string proc_;
  bool active_ = false;
};

/// The ledger's record of a command worker's own directory (FENCECHECK_WORKER_DIR,
/// docs/worker-protocol.md): made under the system's temporary directory when the worker starts
/// (the run directory is the harness's evidence, which the worker's account must not touch), and
/// moved into the run directory (<run dir>/workers/<id>/) when the run ends. Recorded so that a
/// harness killed with -9 leaves no directory under /tmp: `fencecheck cleanup` moves it where the
/// run would have. Like WorkerGroup, it injects nothing. Not thread-safe (fault.h).
class WorkerDirectory final : public Fault {
 public:
  /// scratch: the worker's directory, "<temp dir>/fencecheck-<run_id>-<worker>"; kept: where its
  /// files go when it is healed (<run dir>/workers/<worker>).
  WorkerDirectory(std::filesystem::path scratch, std::filesystem::path kept, std::string worker, std::string run_id);
  ~WorkerDirectory() override = default;

  /// "worker-dir".
  [[nodiscard]] std::string_view kind() const override { return "worker-dir"; }
  /// "w1 (/tmp/fencecheck-<run>-w1)".
  [[nodiscard]] std::string target() const override;
  /// Nothing to do: the directory is made by the caller. Marks it active.
  void inject() override { active_ = true; }
  /// keep_worker_directory(): copies the directory into `kept` and removes it; true once it is
  /// gone (a copy that fails is logged by the caller through heal_failure(), and the directory is
  /// still removed: it is this run's, and /tmp must not keep it). Never throws.
  [[nodiscard]] bool heal() noexcept override;
  [[nodiscard]] bool active() const override { return active_; }
  /// {"scratch", "kept", "target"}.
  [[nodiscard]] nlohmann::json ledger_record() const override;
  /// What the copy could not keep ("" when it kept everything): heal() returns true even then.
  [[nodiscard]] const std::string& copy_failure() const { return copy_failure_; }

 private:
  std::filesystem::path scratch_;
  std::filesystem::path kept_;
  std::string worker_;
  std::string run_id_;
  bool active_ = false;
  std::string copy_failure_;
};

/// Copies `scratch` into `kept` (its files and symlinks as they are, never what a symlink points
/// to: the worker's account chose them and the harness runs as root) and removes `scratch`.
/// Returns "" or what could not be copied; throws std::runtime_error when `scratch` is still there
/// after the removal. Refuses (std::runtime_error) a `scratch` that is not a directory named
/// "fencecheck-<run_id>-..." directly in the system's temporary directory (a damaged ledger
/// entry must not make cleanup remove another path). A scratch already gone is done ("").
std::string keep_worker_directory(const std::filesystem::path& scratch, const std::filesystem::path& kept,
                                  const std::string& run_id);

}  // namespace fencecheck::faults
