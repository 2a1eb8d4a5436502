#include "fencecheck/faults/cpu_throttle.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <iostream>

#include "cgroup_internal.h"

namespace fencecheck::faults {

ThrottleSpec ThrottleSpec::cpu_fraction(double fraction_of_one_cpu, std::chrono::microseconds period) {
  ThrottleSpec s;
  s.period = period;
  s.quota = std::chrono::microseconds(
      static_cast<std::int64_t>(std::llround(fraction_of_one_cpu * static_cast<double>(period.count()))));
  return s;
}

void ThrottleSpec::validate() const {
  // Documentation/scheduler/sched-bwc.rst: the period is 1 ms .. 1 s, the quota at least 1 ms.
  if (period < std::chrono::milliseconds(1) || period > std::chrono::seconds(1))
    throw std::invalid_argument("cpu-throttle period " + std::to_string(period.count()) +
                                " us is outside the kernel's bounds 1000 .. 1000000 us");
  if (quota < std::chrono::milliseconds(1))
    throw std::invalid_argument("cpu-throttle quota " + std::to_string(quota.count()) +
                                " us is below the kernel's minimum of 1000 us");
}

CpuThrottleFault::CpuThrottleFault(ProcessRef target, std::string target_name, std::string run_id, ThrottleSpec spec,
                                   CgroupFs fs)
    : ref_(target), name_(std::move(target_name)), spec_(spec), fs_(std::move(fs)) {
  spec_.validate();
  hierarchy_ = require_cpu_hierarchy(fs_);
  dir_ = hierarchy_.mount / cgroup_name(run_id, name_);
}

CpuThrottleFault::~CpuThrottleFault() { (void)heal(); }  // a last try; the ledger keeps it outstanding

std::string CpuThrottleFault::target() const { return name_ + " (pid " + std::to_string(ref_.pid) + ")"; }

void CpuThrottleFault::inject() {
  if (active_) return;
  const std::string who = "cpu-throttle " + target();
  auto where = detail::read_placement(fs_, hierarchy_, ref_.pid);
  if (!where || !ref_.same_process_alive(fs_.proc()))
    throw FaultError(who + ": the process is gone or its PID was reused; not moving it");
  bool inside = detail::fencecheck_cgroup(where->original);
  for (const auto& [tid, path] : where->threads) inside = inside || detail::fencecheck_cgroup(path);
  if (inside)
    throw FaultError(who + ": it is already in a fencecheck cgroup (" + where->original + " under " +
                     hierarchy_.mount.string() + "): another cgroup fault on it is active, and they must not overlap");
  detail::create_cgroup(fs_, dir_, who);
  std::vector<detail::Member> members;
  std::string failure;
  try {
    auto set = [&](const char* file, const std::string& value) {
      if (int e = fs_.write(dir_ / file, value); e != 0)
        throw FaultError(who + ": cannot write \"" + value + "\" to " + (dir_ / file).string() + ": " + std::strerror(e));
    };
    const std::string quota = std::to_string(spec_.quota.count()), period = std::to_string(spec_.period.count());
    if (hierarchy_.version == CgroupVersion::kV2) {
      set("cpu.max", quota + " " + period);  // cgroup-v2.rst: "$MAX $PERIOD"
    } else {
      set("cpu.cfs_period_us", period);  // period first: a new cgroup's quota is -1 (unlimited)
      set("cpu.cfs_quota_us", quota);
    }
    // Nothing to settle: a throttled process still forks, but its children are born inside, so a
    // walk that moves nothing ends it (process_tree.h, converge_tree()).
    walk_ = detail::enter_tree(fs_, hierarchy_, dir_, ref_, who, members, nullptr);
  } catch (const FaultError& err) {
    failure = err.what();
  } catch (const std::exception& err) {
    failure = who + ": " + err.what();
  }
  if (members.empty()) members.push_back({ref_, *where});  // heal() needs the root's placement
  members_ = std::move(members);
  active_ = true;  // heal() moves back what went in and removes the cgroup
  if (!failure.empty()) throw FaultError(undo_failed_inject(failure));
}

bool CpuThrottleFault::heal() noexcept {
  if (!active_) return healed();
  (void)detail::leave(fs_, hierarchy_, dir_, members_);
  std::string err = detail::remove_cgroup(fs_, hierarchy_, dir_, members_.front().where);
  if (!err.empty()) {
    std::cerr << "fencecheck: cpu-throttle " << target() << ": " << err << "\n";
    return not_healed("cpu-throttle " + target() + ": " + err);  // still active: a later heal() retries
  }
  members_.clear();
  active_ = false;
  return healed();
}

nlohmann::json CpuThrottleFault::ledger_record() const {
  auto j = detail::cgroup_record(name_, ref_, hierarchy_, dir_,
                                 active_ ? members_ : detail::current_tree(fs_, hierarchy_, ref_));
  j["period_us"] = spec_.period.count();
  j["quota_us"] = spec_.quota.count();
  return j;
}

}  // namespace fencecheck::faults
