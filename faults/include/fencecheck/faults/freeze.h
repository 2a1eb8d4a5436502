// fencecheck — the freeze fault: every thread of the holder stops at once, through the cgroup
// freezer, as when a container or VM is paused. Unlike SIGSTOP (sigstop.h) the target cannot
// observe it (no SIGCHLD to its parent, no job-control state change) and it also stops threads
// that are sleeping in the kernel.
//
// How: the target is moved into a new cgroup "fencecheck-<run>-<target>" which is then frozen.
//  - cgroup v2 (Documentation/admin-guide/cgroup-v2.rst, "cgroup.freeze" and "cgroup.events"):
//    write "1" to cgroup.freeze; the cgroup is frozen once cgroup.events reads "frozen 1".
//    Heal writes "0" ("a process moved out of a frozen cgroup becomes running").
//  - cgroup v1 (Documentation/admin-guide/cgroup-v1/freezer-subsystem.rst): write "FROZEN" to
//    freezer.state; FREEZING is transitional (a task in uninterruptible sleep can hold it there),
//    so inject waits until the state reads FROZEN. Heal writes "THAWED".
// Inject waits, bounded by FreezeSpec::timeout, until frozen; heal thaws, moves the process (and,
// v1, each thread) back to where it was, and removes the cgroup.
//
// Safety: as cpu_throttle.h: only the given ProcessRef, re-checked before every move.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "fencecheck/faults/cgroup.h"
#include "fencecheck/faults/fault.h"
#include "fencecheck/faults/process.h"

namespace fencecheck::faults {

struct FreezeSpec {
  /// How long inject() waits for the freezer to report frozen before giving up (and undoing).
  std::chrono::milliseconds timeout{5000};
};

/// Not thread-safe (fault.h): one thread drives it.
class FreezeFault final : public Fault {
 public:
  /// Detects the freezer under fs.root(): throws FaultUnavailable naming what is missing.
  FreezeFault(ProcessRef target, std::string target_name, std::string run_id, FreezeSpec spec = {},
              CgroupFs fs = CgroupFs{});
  ~FreezeFault() override;

  [[nodiscard]] std::string_view kind() const override { return "freeze"; }
  [[nodiscard]] std::string target() const override;
  /// Creates the cgroup (reusing this run's leftover of the same name), moves the target in,
  /// freezes it and waits until the freezer reports it frozen. Throws FaultError when the process
  /// is gone or reused, is already in a fencecheck cgroup of this hierarchy, a write fails, or it
  /// is not frozen within the timeout; FaultUnavailable when the kernel has no cgroup.freeze (v2,
  /// Linux < 5.2). On throw nothing is left in effect.
  void inject() override;
  /// Thaws, moves everything back, removes the cgroup. Never throws; a vanished target is healed.
  /// When the cgroup cannot be removed within 2 s the cause goes to stderr and active() stays
  /// true (the process is thawed and moved back regardless).
  void heal() noexcept override;
  [[nodiscard]] bool active() const override { return active_; }
  /// {"target","pid","start_ticks","cgroup_version","mount","cgroup_dir","original",
  ///  "thread_originals"} as in CpuThrottleFault::ledger_record().
  [[nodiscard]] nlohmann::json ledger_record() const override;

  [[nodiscard]] const CgroupHierarchy& hierarchy() const { return hierarchy_; }
  [[nodiscard]] const std::filesystem::path& cgroup_dir() const { return dir_; }

 private:
  ProcessRef ref_;
  std::string name_;
  FreezeSpec spec_;
  CgroupFs fs_;
  CgroupHierarchy hierarchy_;
  std::filesystem::path dir_;
  bool active_ = false;
  std::string original_;
  std::map<pid_t, std::string> threads_;
};

}  // namespace fencecheck::faults
