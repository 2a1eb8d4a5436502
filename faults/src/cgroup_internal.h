// Internal: what the two cgroup faults (cpu_throttle.cpp, freeze.cpp), their ledger healers and
// sweep_leftovers() share: moving a target into a fencecheck cgroup and back, and removing it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/faults/cgroup.h"
#include "fencecheck/faults/process.h"

namespace fencecheck::faults::detail {

/// Where a target was before it was moved: the process's cgroup and (v1) each thread's.
struct Placement {
  std::string original;                  // relative to the hierarchy's root; "" = unknown
  std::map<pid_t, std::string> threads;  // v1 only: TID -> relative cgroup
};

/// How long heal waits for a cgroup to become removable.
inline constexpr std::chrono::milliseconds kRemoveTimeout{2000};

[[nodiscard]] bool on_cgroupfs(const std::filesystem::path& p);
[[nodiscard]] std::vector<pid_t> thread_ids(const CgroupFs& fs, pid_t pid);
[[nodiscard]] std::vector<pid_t> read_ids(const CgroupFs& fs, const std::filesystem::path& file);
/// nullopt when the process is gone.
[[nodiscard]] std::optional<Placement> read_placement(const CgroupFs& fs, const CgroupHierarchy& h, pid_t pid);
/// True when a component of the relative cgroup path starts with "fencecheck-".
[[nodiscard]] bool fencecheck_cgroup(const std::string& relative);
/// The nearest existing directory at or above <mount>/<relative>, never above the mount.
[[nodiscard]] std::filesystem::path existing_dir(const CgroupHierarchy& h, const std::string& relative);
/// The file a PID (v1 and v2: cgroup.procs) or a TID (v1: tasks) is written to.
[[nodiscard]] const char* member_file(const CgroupHierarchy& h);

/// Creates dir (EEXIST is fine). Throws FaultError(who + cause).
void create_cgroup(const CgroupFs& fs, const std::filesystem::path& dir, const std::string& who);
/// Moves the process into dir (cgroup.procs) and, on v1, each of its threads (tasks).
/// Re-checks the ProcessRef before every write. Throws FaultError(who + cause).
void enter(const CgroupFs& fs, const CgroupHierarchy& h, const std::filesystem::path& dir, const ProcessRef& ref,
           const std::string& who);
/// Moves the process (if it is still the same one) back to its original, threads whose original
/// differs to theirs (v1), and any other live task inside dir to the process's original.
/// Never throws. Returns a sentence fragment ("moved pid 12 back to /sys/fs/cgroup/cpu").
std::string leave(const CgroupFs& fs, const CgroupHierarchy& h, const std::filesystem::path& dir, const ProcessRef& ref,
                  const Placement& where) noexcept;
/// Removes dir, moving tasks that still show up in it to the original, until kRemoveTimeout.
/// Returns "" on success (or when already gone), else the cause.
std::string remove_cgroup(const CgroupFs& fs, const CgroupHierarchy& h, const std::filesystem::path& dir,
                          const Placement& where) noexcept;
/// v1: freezer.state = THAWED; v2: cgroup.freeze = 0. Returns 0 or errno.
int thaw(const CgroupFs& fs, const CgroupHierarchy& h, const std::filesystem::path& dir) noexcept;

/// The ledger fields both cgroup kinds share.
[[nodiscard]] nlohmann::json cgroup_record(const std::string& target, const ProcessRef& ref, const CgroupHierarchy& h,
                                           const std::filesystem::path& dir, const std::optional<Placement>& where);
/// Heals a "cpu-throttle" (thaw=false) or "freeze" (thaw=true) record from the record alone.
std::string heal_cgroup_record(const nlohmann::json& entry, bool thaw_first, const CgroupFs& fs);

}  // namespace fencecheck::faults::detail
