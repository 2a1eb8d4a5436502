// fencecheck — the freeze fault: every thread of the holder stops at once, through the cgroup
// freezer, as when a container or VM is paused. Unlike SIGSTOP (sigstop.h) the target cannot
// observe it (no SIGCHLD to its parent, no job-control state change) and it also stops threads
// that are sleeping in the kernel.
//
// It acts on the worker's whole process tree (process_tree.h). How: every process of the tree
// (all of its threads) is moved into a new cgroup "fencecheck-<run>-<target>", which is then
// frozen, with the converging walk of converge_tree(): each process is moved before its children
// are read; once the cgroup is frozen (no process in it can fork) the tree is walked again, and
// a process found outside (forked before its parent moved, missed by a read of a running tree) is
// moved in and frozen on entry, until a walk finds none. A process forked by one already inside
// is born inside.
//  - cgroup v2 (Documentation/admin-guide/cgroup-v2.rst, "cgroup.freeze" and "cgroup.events"):
//    write "1" to cgroup.freeze; the cgroup is frozen once cgroup.events reads "frozen 1".
//    Heal writes "0" ("a process moved out of a frozen cgroup becomes running").
//  - cgroup v1 (Documentation/admin-guide/cgroup-v1/freezer-subsystem.rst): write "FROZEN" to
//    freezer.state; FREEZING is transitional (a task in uninterruptible sleep can hold it there),
//    so inject waits until the state reads FROZEN. Heal writes "THAWED".
// Inject waits, bounded by FreezeSpec::timeout, until frozen; heal thaws, moves each process (and,
// v1, each thread) back to where it was before inject (a process born inside goes where its
// parent goes; one forked after the last walk where the root goes), and removes the cgroup.
//
// Safety: as cpu_throttle.h: only the tree of the given ProcessRef, each process re-checked
// before every move.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "fencecheck/faults/cgroup.h"
#include "fencecheck/faults/fault.h"
#include "fencecheck/faults/process.h"
#include "fencecheck/faults/process_tree.h"

namespace fencecheck::faults {
namespace detail {
struct Member;  // cgroup_internal.h
}

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
  /// Creates the cgroup (reusing this run's leftover of the same name), moves the target's tree
  /// in, freezes it and waits until the freezer reports it frozen. Throws FaultError when the
  /// root is gone or reused, a process of the tree is already in a fencecheck cgroup of this
  /// hierarchy, a write fails, the tree is not frozen within the timeout, or it still changes
  /// after 100 walks; FaultUnavailable when the kernel has no cgroup.freeze (v2, Linux < 5.2).
  /// On throw nothing is left in effect.
  void inject() override;
  /// Thaws, moves every process back, removes the cgroup. Never throws; a process that exited
  /// meanwhile counts as healed.
  /// When the cgroup cannot be removed within 2 s the cause goes to stderr, active() stays true
  /// and heal() returns false (heal_failure() says why; the process is thawed and moved back
  /// regardless).
  [[nodiscard]] bool heal() noexcept override;
  [[nodiscard]] bool active() const override { return active_; }
  /// {"target","pid","start_ticks","cgroup_version","mount","cgroup_dir","original",
  ///  "thread_originals","descendant_originals"} as in CpuThrottleFault::ledger_record().
  [[nodiscard]] nlohmann::json ledger_record() const override;

  [[nodiscard]] const CgroupHierarchy& hierarchy() const { return hierarchy_; }
  [[nodiscard]] const std::filesystem::path& cgroup_dir() const { return dir_; }
  /// The last inject()'s walks of the tree (process_tree.h).
  [[nodiscard]] const ConvergeResult& last_walk() const { return walk_; }

 private:
  ProcessRef ref_;
  std::string name_;
  FreezeSpec spec_;
  CgroupFs fs_;
  CgroupHierarchy hierarchy_;
  std::filesystem::path dir_;
  bool active_ = false;
  std::vector<detail::Member> members_;  // the tree, root first, with where each goes back
  ConvergeResult walk_;
};

}  // namespace fencecheck::faults
