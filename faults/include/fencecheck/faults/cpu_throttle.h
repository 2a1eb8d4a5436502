// fencecheck — the cpu-throttle fault: the holder keeps running, but only for a sliver of each
// scheduling period, as on an overcommitted VM or a container at its CPU limit. Its keepalives
// and its own timers fall behind while it still believes it holds the lock.
//
// How (CFS bandwidth control, kernel Documentation/scheduler/sched-bwc.rst): the target is moved
// into a new cgroup "fencecheck-<run>-<target>" whose quota is `quota` microseconds of CPU time
// per `period` (across all its threads); once spent, its threads wait for the next period.
//  - cgroup v2 (cgroup-v2.rst, "cpu.max"): write "<quota> <period>" to cpu.max, the PID to
//    cgroup.procs (moves the whole process).
//  - cgroup v1 (sched-bwc.rst): cpu.cfs_period_us, then cpu.cfs_quota_us; the PID to
//    cgroup.procs, then every TID of /proc/<pid>/task to `tasks`.
// Heal moves the process (and, v1, each thread) back to the cgroup it came from, then any task
// still inside (a child it forked or a thread it created meanwhile) to the process's original,
// and removes the cgroup, retrying while it still has tasks (rmdir fails with EBUSY).
//
// Safety: acts only on the ProcessRef it was given (PID + start time), re-checked before every
// move; never writes outside its own cgroup and the target's original cgroup(s).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "fencecheck/faults/cgroup.h"
#include "fencecheck/faults/fault.h"
#include "fencecheck/faults/process.h"

namespace fencecheck::faults {

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
  /// the quota, moves the target in. Throws FaultError when the process is gone or reused, is
  /// already in a fencecheck cgroup of this hierarchy (cgroup faults on one target must not
  /// overlap: on v2 a process is in exactly one cgroup), or a write fails; then nothing is left.
  void inject() override;
  /// Moves everything back and removes the cgroup. Never throws; a vanished target is healed
  /// (only the cgroup is removed). When the cgroup cannot be removed within 2 s the cause goes to
  /// stderr and active() stays true, so that a later heal() retries.
  void heal() noexcept override;
  [[nodiscard]] bool active() const override { return active_; }
  /// {"target","pid","start_ticks","cgroup_version","mount","cgroup_dir","original",
  ///  "thread_originals" (v1: TID -> cgroup, only those not in "original"),"period_us","quota_us"}.
  /// Before inject() the original is read from /proc now (absent if the process is gone).
  [[nodiscard]] nlohmann::json ledger_record() const override;

  [[nodiscard]] const CgroupHierarchy& hierarchy() const { return hierarchy_; }
  /// The cgroup this fault creates: <mount>/fencecheck-<run>-<target>.
  [[nodiscard]] const std::filesystem::path& cgroup_dir() const { return dir_; }

 private:
  ProcessRef ref_;
  std::string name_;
  ThrottleSpec spec_;
  CgroupFs fs_;
  CgroupHierarchy hierarchy_;
  std::filesystem::path dir_;
  bool active_ = false;
  std::string original_;                   // the process's cgroup before inject (relative)
  std::map<pid_t, std::string> threads_;   // v1: every thread's cgroup before inject
};

}  // namespace fencecheck::faults
