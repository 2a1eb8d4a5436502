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

#include <string>
#include <vector>

#include "fencecheck/faults/fault.h"
#include "fencecheck/faults/process.h"

namespace fencecheck::faults {

/// The members of process group `pgid` that started no earlier than `leader.start_ticks`, read
/// from <proc>/*/stat (field 5, pgrp; field 22, starttime: proc(5)). Empty when the number now
/// names another group: a live process with PID pgid whose start time is not the leader's (Linux
/// does not hand a PID out again while a process group still uses it as its id, so a number whose
/// leader is gone still names the same group). Thread-safe.
[[nodiscard]] std::vector<ProcessRef> group_members(const ProcessRef& leader, const std::string& proc = "/proc");

/// Ends every member of the group (group_members): SIGKILL, through signal_process (never a
/// reused PID); SIGKILL ends a stopped process too (signal(7)). Returns how many it killed. Never
/// throws. Thread-safe.
int end_group(const ProcessRef& leader) noexcept;

/// The ledger's record of one command worker's process group. Not thread-safe (fault.h).
class WorkerGroup final : public Fault {
 public:
  /// leader: the worker's own process, the group's leader (its PID is the group's id).
  WorkerGroup(ProcessRef leader, std::string worker);
  ~WorkerGroup() override = default;

  /// "worker-group": the ledger's healer ends the group's members.
  [[nodiscard]] std::string_view kind() const override { return "worker-group"; }
  /// "w1 (process group 4242)".
  [[nodiscard]] std::string target() const override;
  /// Nothing to do: the group exists from the worker's start. Marks it active.
  void inject() override { active_ = true; }
  /// Ends what is left of the group (end_group). Never throws. Always true: SIGKILL cannot be
  /// caught, blocked or ignored (signal(7)), so a member that is not ended was gone already.
  bool heal() noexcept override {
    (void)end();
    return healed();
  }
  /// heal(), saying how many processes it killed (0 when inactive). Never throws.
  int end() noexcept;
  [[nodiscard]] bool active() const override { return active_; }
  /// {"pgid", "start_ticks" (the leader's), "target"}.
  [[nodiscard]] nlohmann::json ledger_record() const override;

 private:
  ProcessRef leader_;
  std::string worker_;
  bool active_ = false;
};

}  // namespace fencecheck::faults
