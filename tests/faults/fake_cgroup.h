// Test helper: a fake cgroup filesystem and /proc in a temporary directory, recording every write
// the cgroup faults make (path relative to the temporary directory, exact value).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "fencecheck/faults/cgroup.h"
#include "fencecheck/faults/process.h"

namespace fctest {

class FakeCgroupTree {
 public:
  using Write = std::pair<std::string, std::string>;

  explicit FakeCgroupTree(const std::string& name) {
    static int n = 0;
    dir_ = std::filesystem::temp_directory_path() /
           ("fc-fake-cgroup-" + std::to_string(::getpid()) + "-" + name + "-" + std::to_string(++n));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "cgroup");
    std::filesystem::create_directories(dir_ / "proc");
  }
  ~FakeCgroupTree() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  FakeCgroupTree(const FakeCgroupTree&) = delete;
  FakeCgroupTree& operator=(const FakeCgroupTree&) = delete;

  /// A pure cgroup v2 host: cpu offered and enabled for children, the target in /system.slice/w.scope.
  void make_v2(bool cpu_listed = true, bool cpu_enabled = true) {
    file("cgroup/cgroup.controllers", cpu_listed ? "cpuset cpu io memory pids\n" : "cpuset io memory pids\n");
    file("cgroup/cgroup.subtree_control", cpu_enabled ? "cpu io memory pids\n" : "io memory pids\n");
    file("cgroup/cgroup.procs", "");
    file("cgroup/system.slice/w.scope/cgroup.procs", "");
  }
  /// A cgroup v1 host like the test machine: /cpu and /freezer mounts, plus a cgroup2 "unified"
  /// mount without cpu.
  void make_v1(const std::string& cpu_dir = "cpu") {
    file("cgroup/" + cpu_dir + "/cpu.cfs_quota_us", "-1\n");
    file("cgroup/" + cpu_dir + "/cpu.cfs_period_us", "100000\n");
    file("cgroup/" + cpu_dir + "/cgroup.procs", "");
    file("cgroup/" + cpu_dir + "/tasks", "");
    file("cgroup/" + cpu_dir + "/other/tasks", "");
    file("cgroup/freezer/cgroup.procs", "");
    file("cgroup/freezer/tasks", "");
    file("cgroup/unified/cgroup.controllers", "hugetlb\n");
  }
  /// /proc/<pid>/cgroup and /proc/<pid>/task/<tid>/cgroup with the same content for every thread
  /// unless thread_cgroup overrides one, and /proc/<pid>/stat (the identity the faults check).
  /// ppid and start_ticks: by default those of the real process with that PID (a test's child),
  /// else 1 and 1000.
  void add_process(pid_t pid, const std::vector<pid_t>& tids, const std::string& cgroup_text,
                   const std::vector<std::pair<pid_t, std::string>>& thread_cgroup = {}, pid_t ppid = 0,
                   std::uint64_t start_ticks = 0) {
    const std::string base = "proc/" + std::to_string(pid);
    file(base + "/cgroup", cgroup_text);
    for (pid_t tid : tids) {
      std::string text = cgroup_text;
      for (const auto& [t, txt] : thread_cgroup)
        if (t == tid) text = txt;
      file(base + "/task/" + std::to_string(tid) + "/cgroup", text);
    }
    const auto real = fencecheck::faults::read_stat(pid);
    if (ppid == 0) ppid = real ? real->ppid : 1;
    if (start_ticks == 0) start_ticks = real ? real->start_ticks : 1000;
    file(base + "/stat", stat_line(pid, ppid, start_ticks));
  }
  /// A /proc/<pid>/stat line (proc(5)): state 'S', the given ppid (field 4) and starttime (22).
  static std::string stat_line(pid_t pid, pid_t ppid, std::uint64_t start_ticks, char state = 'S') {
    std::string s = std::to_string(pid) + " (fake) " + state + " " + std::to_string(ppid);
    for (int field = 5; field < 22; ++field) s += " 0";
    return s + " " + std::to_string(start_ticks) + " 0 0\n";
  }
  void remove_process(pid_t pid) { std::filesystem::remove_all(dir_ / "proc" / std::to_string(pid)); }

  void file(const std::string& rel, const std::string& content) {
    auto p = dir_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << content;
  }
  [[nodiscard]] std::string read(const std::string& rel) const {
    std::ifstream in(dir_ / rel);
    std::string s;
    char buf[4096];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) s.append(buf, static_cast<std::size_t>(in.gcount()));
    return s;
  }
  [[nodiscard]] bool exists(const std::string& rel) const { return std::filesystem::exists(dir_ / rel); }

  /// A CgroupFs on this tree that records every write into writes().
  [[nodiscard]] fencecheck::faults::CgroupFs fs() {
    fencecheck::faults::CgroupFs f(dir_ / "cgroup", dir_ / "proc");
    f.observe_writes([this](const std::filesystem::path& p, const std::string& v) {
      writes_.emplace_back(p.lexically_relative(dir_).string(), v);
      if (on_write_) on_write_(writes_.back().first, v);
    });
    return f;
  }
  /// Called before each write (path relative to the tree's directory, exact value): a test's way to
  /// change the tree at a given step, e.g. to make a cgroup impossible to remove.
  void on_write(std::function<void(const std::string& rel, const std::string& value)> f) { on_write_ = std::move(f); }
  [[nodiscard]] const std::vector<Write>& writes() const { return writes_; }
  void clear_writes() { writes_.clear(); }
  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }
  [[nodiscard]] std::filesystem::path root() const { return dir_ / "cgroup"; }

 private:
  std::filesystem::path dir_;
  std::vector<Write> writes_;
  std::function<void(const std::string&, const std::string&)> on_write_;
};

}  // namespace fctest
