// fencecheck — the cpu-throttle fault: the holder keeps running, but only for a sliver of each
// scheduling period, as on an overcommitted VM or a container at its CPU limit. Its keepalives
// and its own timers fall behind while it still believes it holds the lock.
//
// How (CFS bandwidth control, kernel Documentation/scheduler/sched-bwc.rst): the target's whole
// process tree (process_tree.h) is moved into a new cgroup "fencecheck-<run>-<target>" whose
// quota is `quota` microseconds of CPU time per `period` (across all its threads); once spent,
// its threads wait for the next period.
//  - cgroup v2 (cgroup-v2.rst, "cpu.max"): write "<quota> <period>" to cpu.max, each PID to
//    cgroup.procs (moves the whole process).
//  - cgroup v1 (sched-bwc.rst): cpu.cfs_period_us, then cpu.cfs_quota_us; each PID to
//    cgroup.procs, then every TID of /proc/<pid>/task to `tasks`.
// The tree is moved with the converging walk of converge_tree(): each process is moved before
// its children are read, so a child forked before the move is listed (the kernel serialises fork
// against the move: cgroup_threadgroup_rwsem) and moved too, and one forked after it is born
// inside; the walks end with one that moves nothing. Heal moves each process (and, v1, each
// thread) back to the cgroup it came from (a process born inside to its parent's), then any task
// still inside (forked after the last walk, or a thread created meanwhile) to the root's
// original, and removes the cgroup, retrying while it still has tasks (rmdir fails with EBUSY).
//
// Safety: acts only on the tree of the ProcessRef it was given (PID + start time; each
// descendant checked as process_tree.h says), re-checked before every move; never writes outside
// its own cgroup and the tree's original cgroup(s).
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

/// CFS bandwidth: the target may run `quota` per `period`, summed over its threads.
struct ThrottleSpec {
  /// 1 ms .. 1 s (the kernel's bounds for cfs_period_us / cpu.max's period).
  std::chrono::microseconds period{100'000};
  /// >= 1 ms (the kernel's minimum quota). Default: 2 ms per 100 ms = 2 % of one CPU.
  std::chrono::microseconds quota{2'000};

  /// fraction_of_one_cpu (e.g. 0.02) of one CPU per period; quota rounded to whole microseconds.
  [[nodiscard]] static ThrottleSpec cpu_fraction(double fraction_of_one_cpu,
                                                 std::chrono::microseconds period = std::chrono::microseconds(100'000));
  /// Throws std::invalid_argument naming the bound it breaks.
  void validate() const;
};

/// Not thread-safe (fault.h): one thread drives it.
class CpuThrottleFault final : public Fault {
 public:
  /// Detects the cpu hierarchy under fs.root(): throws FaultUnavailable naming what is missing,
  /// std::invalid_argument for a bad spec. run_id and target_name name the cgroup.
  CpuThrottleFault(ProcessRef target, std::string target_name, std::string run_id, ThrottleSpec spec = {},
                   CgroupFs fs = CgroupFs{});
  ~CpuThrottleFault() override;

  [[nodiscard]] std::string_view kind() const override { return "cpu-throttle"; }
  [[nodiscard]] std::string target() const override;
  /// Creates the cgroup (an existing one of the same name, this run's leftover, is reused), sets
  /// the quota, moves the target's tree in. Throws FaultError when the root is gone or reused, a
  /// process of the tree is already in a fencecheck cgroup of this hierarchy (cgroup faults on
  /// one target must not overlap: on v2 a process is in exactly one cgroup), a write fails, or
  /// the tree still changes after 100 walks; then nothing is left.
  void inject() override;
  /// Moves every process back and removes the cgroup. Never throws; a process that exited
  /// meanwhile counts as healed (a vanished tree: only the cgroup is removed). When the cgroup cannot be removed within 2 s the cause goes to
  /// stderr, active() stays true and heal() returns false (heal_failure() says why), so that a
  /// later heal() retries.
  [[nodiscard]] bool heal() noexcept override;
  [[nodiscard]] bool active() const override { return active_; }
  /// {"target","pid","start_ticks","cgroup_version","mount","cgroup_dir","original",
  ///  "thread_originals" (v1: TID -> cgroup, only those not in "original"),"period_us","quota_us"}
  /// and, when a descendant is placed elsewhere than the root, "descendant_originals":
  /// [{"pid","start_ticks","original","thread_originals"}] (cleanup moves every other process
  /// still inside to the root's original). Before inject() the tree and its placements are read
  /// from /proc now ("original" absent if the root is gone).
  [[nodiscard]] nlohmann::json ledger_record() const override;

  [[nodiscard]] const CgroupHierarchy& hierarchy() const { return hierarchy_; }
  /// The cgroup this fault creates: <mount>/fencecheck-<run>-<target>.
  [[nodiscard]] const std::filesystem::path& cgroup_dir() const { return dir_; }
  /// The last inject()'s walks of the tree (process_tree.h).
  [[nodiscard]] const ConvergeResult& last_walk() const { return walk_; }

 private:
  ProcessRef ref_;
  std::string name_;
  ThrottleSpec spec_;
  CgroupFs fs_;
  CgroupHierarchy hierarchy_;
  std::filesystem::path dir_;
  bool active_ = false;
  std::vector<detail::Member> members_;  // the tree, root first, with where each goes back
  ConvergeResult walk_;
};

}  // namespace fencecheck::faults
