// fencecheck — the cgroup filesystem as the cgroup faults (cpu_throttle.h, freeze.h) see it:
// where it is (a seam for tests), which version serves each controller, and which cgroup a
// process is in.
//
// Two layouts exist in the field (kernel Documentation/admin-guide/cgroup-v2.rst and
// Documentation/admin-guide/cgroup-v1/cgroups.rst):
//  - cgroup v2 ("unified"): one hierarchy; /sys/fs/cgroup/cgroup.controllers lists the controllers
//    the root offers; a child cgroup has cpu.max only when the parent's cgroup.subtree_control
//    enables "cpu"; every non-root cgroup has cgroup.freeze (Linux >= 5.2). Membership is per
//    process: writing a PID to cgroup.procs moves all of its threads.
//  - cgroup v1: one hierarchy per mounted controller (/sys/fs/cgroup/cpu with cpu.cfs_quota_us,
//    /sys/fs/cgroup/freezer with freezer.state). Membership is per thread: `tasks` takes a TID,
//    cgroup.procs takes a TGID and moves every thread of it.
// Hybrid hosts (v1 controllers plus a cgroup2 mount at /sys/fs/cgroup/unified) are detected per
// controller: v1 first, then the unified mount.
//
// Every cgroup fencecheck creates is named cgroup_name(run_id, target) ("fencecheck-<run>-<target>")
// directly under the hierarchy's root, and nothing else is ever created, written or removed.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace fencecheck::faults {

/// Where the cgroup filesystem and procfs are: /sys/fs/cgroup and /proc on a real host, a fake
/// tree in a temporary directory in unit tests. Holds the I/O primitives the cgroup faults use,
/// so a test can also observe every write. Copyable; a copy shares the observer. Thread-safe for
/// concurrent use as long as the observer is (set it before sharing).
class CgroupFs {
 public:
  /// Called before every write with the file's full path and the exact value written.
  using WriteObserver = std::function<void(const std::filesystem::path& file, const std::string& value)>;

  explicit CgroupFs(std::filesystem::path root = "/sys/fs/cgroup", std::filesystem::path proc = "/proc")
      : root_(std::move(root)), proc_(std::move(proc)) {}

  [[nodiscard]] const std::filesystem::path& root() const { return root_; }
  [[nodiscard]] const std::filesystem::path& proc() const { return proc_; }
  void observe_writes(WriteObserver observer) { observer_ = std::move(observer); }

  /// Writes value to a control file with ONE write(2) call, without a trailing newline (the
  /// kernel parses each write on its own). Creates the file if missing (only a fake tree lacks
  /// it; a real cgroup fs refuses). Returns 0 or the errno (e.g. ESRCH: no such PID).
  [[nodiscard]] int write(const std::filesystem::path& file, const std::string& value) const noexcept;
  /// The whole file; nullopt when it cannot be read (e.g. the cgroup is gone).
  [[nodiscard]] std::optional<std::string> read(const std::filesystem::path& file) const;
  /// Creates a directory (mkdir(2), mode 0755). 0, EEXIST or another errno.
  [[nodiscard]] int make_dir(const std::filesystem::path& dir) const noexcept;
  /// Removes a cgroup directory: rmdir(2) when it is on a cgroup filesystem (its control files
  /// go with it; EBUSY while it still has tasks or children, cgroup-v2.rst "Creating cgroups");
  /// on any other filesystem (a test's fake tree) the directory and the plain files in it.
  /// Returns 0 (also when it did not exist) or the errno.
  [[nodiscard]] int remove_dir(const std::filesystem::path& dir) const noexcept;

 private:
  std::filesystem::path root_;
  std::filesystem::path proc_;
  WriteObserver observer_;
};

enum class CgroupVersion { kV1 = 1, kV2 = 2 };

/// One hierarchy that serves a controller.
struct CgroupHierarchy {
  CgroupVersion version = CgroupVersion::kV2;
  /// The hierarchy's root directory: e.g. /sys/fs/cgroup (v2), /sys/fs/cgroup/cpu (v1),
  /// /sys/fs/cgroup/unified (v2 on a hybrid host).
  std::filesystem::path mount;
  /// v1: the controller as /proc/<pid>/cgroup names it ("cpu", "freezer"); v2: empty.
  std::string controller;
  bool operator==(const CgroupHierarchy&) const = default;
};

/// What this host offers the cgroup faults. When a controller is absent, *_missing says exactly
/// what is missing, e.g. "cgroup cpu controller not found: neither cgroup v2 cpu.max nor v1
/// cpu.cfs_quota_us under /sys/fs/cgroup".
struct CgroupSupport {
  std::optional<CgroupHierarchy> cpu;
  std::string cpu_missing;
  std::optional<CgroupHierarchy> freezer;
  std::string freezer_missing;
};

/// Detects, per controller, which hierarchy to use under fs.root():
///  cpu:     v2 root whose cgroup.controllers lists cpu and whose cgroup.subtree_control enables it;
///           else a v1 mount (cpu, cpu,cpuacct or cpuacct,cpu) with cpu.cfs_quota_us;
///           else <root>/unified as v2 with cpu listed and enabled.
///  freezer: v2 root (cgroup.freeze); else v1 <root>/freezer; else <root>/unified (v2).
/// A hierarchy whose root directory the caller cannot write to (not root) is reported missing
/// with the reason. Reads only; never throws for a missing or unreadable tree.
[[nodiscard]] CgroupSupport detect_cgroups(const CgroupFs& fs = CgroupFs{});
/// The cpu hierarchy, or throws FaultUnavailable with CgroupSupport::cpu_missing.
[[nodiscard]] CgroupHierarchy require_cpu_hierarchy(const CgroupFs& fs = CgroupFs{});
/// The freezer hierarchy, or throws FaultUnavailable with CgroupSupport::freezer_missing.
[[nodiscard]] CgroupHierarchy require_freezer_hierarchy(const CgroupFs& fs = CgroupFs{});

/// The cgroup (path relative to the hierarchy's root, "/" for the root) that a process, or with
/// tid > 0 one of its threads, is in, from <proc>/<pid>[/task/<tid>]/cgroup (cgroups(7): lines
/// "hierarchy-ID:controller-list:path"; v2 is the line "0::path"). nullopt when it is gone.
[[nodiscard]] std::optional<std::string> cgroup_of(const CgroupFs& fs, const CgroupHierarchy& h, pid_t pid, pid_t tid = 0);

/// "fencecheck-<run_id>-<target>", characters other than [A-Za-z0-9_.-] replaced by '_',
/// at most 200 characters (NAME_MAX is 255). Pure.
[[nodiscard]] std::string cgroup_name(std::string_view run_id, std::string_view target);

}  // namespace fencecheck::faults
