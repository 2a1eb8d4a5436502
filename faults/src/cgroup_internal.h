// Internal: what the two cgroup faults (cpu_throttle.cpp, freeze.cpp), their ledger healers and
// sweep_leftovers() share: moving a target's process tree into a fencecheck cgroup and back, and
// removing the cgroup.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/faults/cgroup.h"
#include "fencecheck/faults/process.h"
#include "fencecheck/faults/process_tree.h"

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

/// One process of the target's tree that a cgroup fault put in its cgroup, and where it goes back.
struct Member {
  ProcessRef ref;
  Placement where;
};

/// Creates dir (EEXIST is fine). Throws FaultError(who + cause).
void create_cgroup(const CgroupFs& fs, const std::filesystem::path& dir, const std::string& who);
/// Moves one process into dir (cgroup.procs) and, on v1, each of its threads (tasks).
/// Re-checks the ProcessRef (under fs.proc()) before every write. Returns false when the process
/// is gone or its PID was reused (nothing moved); throws FaultError(who + cause) when a write fails.
bool enter(const CgroupFs& fs, const CgroupHierarchy& h, const std::filesystem::path& dir, const ProcessRef& ref,
           const std::string& who);
/// Moves root's whole process tree into dir with converge_tree() (process_tree.h): each process
/// not yet inside is moved (enter()) before its children are read, so a child forked before the
/// move is listed and moved too, and one forked after it is born inside; settle() runs between
/// walks (freeze: freeze the cgroup and wait until frozen, so the next walk sees a tree that
/// cannot change). Appends to members, root first, each process moved with its placement read
/// just before, and each found born inside with its parent's placement (heal puts it where its
/// parent goes). Throws FaultError when the root is gone or reused, a process of the tree is in
/// another fencecheck cgroup, a write fails, or the tree still changes after 100 walks; members
/// then holds what was moved (the caller undoes it with leave()).
ConvergeResult enter_tree(const CgroupFs& fs, const CgroupHierarchy& h, const std::filesystem::path& dir,
                          const ProcessRef& root, const std::string& who, std::vector<Member>& members,
                          const std::function<void()>& settle);
/// Moves each member that is still the same process back to its original and, v1, threads whose
/// original differs to theirs; then any other live task inside dir (forked after the last walk)
/// to the first member's (the root's) original. Never throws. Returns a sentence fragment
/// ("moved pid 12 back to /sys/fs/cgroup/cpu; moved 2 descendant(s) back").
std::string leave(const CgroupFs& fs, const CgroupHierarchy& h, const std::filesystem::path& dir,
                  const std::vector<Member>& members) noexcept;
/// Removes dir, moving tasks that still show up in it to the original, until kRemoveTimeout.
/// Returns "" on success (or when already gone), else the cause.
std::string remove_cgroup(const CgroupFs& fs, const CgroupHierarchy& h, const std::filesystem::path& dir,
                          const Placement& where) noexcept;
/// v1: freezer.state = THAWED; v2: cgroup.freeze = 0. Returns 0 or errno.
int thaw(const CgroupFs& fs, const CgroupHierarchy& h, const std::filesystem::path& dir) noexcept;

/// The ledger fields both cgroup kinds share. members: the tree, root first (its placement is
/// "original"/"thread_originals"); the descendants placed elsewhere than the root are listed
/// under "descendant_originals" ([{"pid","start_ticks","original","thread_originals"}], absent
/// when there are none). Empty members: the root is gone (no placement in the record).
[[nodiscard]] nlohmann::json cgroup_record(const std::string& target, const ProcessRef& ref, const CgroupHierarchy& h,
                                           const std::filesystem::path& dir, const std::vector<Member>& members);
/// The tree as a record written before inject() describes it: the root and each descendant with
/// its placement read now; empty when the root is gone.
[[nodiscard]] std::vector<Member> current_tree(const CgroupFs& fs, const CgroupHierarchy& h, const ProcessRef& root);
/// Heals a "cpu-throttle" (thaw=false) or "freeze" (thaw=true) record from the record alone.
std::string heal_cgroup_record(const nlohmann::json& entry, bool thaw_first, const CgroupFs& fs);

}  // namespace fencecheck::faults::detail
