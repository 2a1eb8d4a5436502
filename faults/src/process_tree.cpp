#include "fencecheck/faults/process_tree.h"

#include <algorithm>
#include <charconv>
#include <deque>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

namespace fencecheck::faults {
namespace fs = std::filesystem;

namespace {

std::optional<pid_t> as_pid(std::string_view s) {
  pid_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

// The numeric entries of a /proc-like directory (PIDs, or TIDs under task/).
std::vector<pid_t> numeric_entries(const fs::path& dir) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (auto v = as_pid(it->path().filename().string())) out.push_back(*v);
  return out;
}

// One walk's view of the children lists: the per-thread `children` files, or (when the kernel has
// none) one scan of every stat file, made on first need and kept for the rest of the walk.
class ChildLister {
 public:
  explicit ChildLister(fs::path proc) : proc_(std::move(proc)) {}

  std::vector<ProcessRef> children(const ProcessRef& parent) {
    std::vector<pid_t> listed;
    if (!use_scan_) {
      const fs::path task = proc_ / std::to_string(parent.pid) / "task";
      const auto tids = numeric_entries(task);
      bool any_file = false;
      for (pid_t tid : tids) {
        std::ifstream in(task / std::to_string(tid) / "children");
        if (!in) continue;  // that thread exited meanwhile, or no such file on this kernel
        any_file = true;
        std::string w;
        while (in >> w)
          if (auto v = as_pid(w)) listed.push_back(*v);
      }
      if (!tids.empty() && !any_file && parent.same_process_alive(proc_)) use_scan_ = true;
    }
    if (use_scan_) {
      scan();
      auto [lo, hi] = by_parent_.equal_range(parent.pid);
      for (auto it = lo; it != hi; ++it) listed.push_back(it->second);
    }
    // Listed while the parent was alive only if it is still the same process now.
    if (listed.empty() || !parent.same_process_alive(proc_)) return {};
    std::vector<ProcessRef> out;
    std::set<pid_t> dup;
    for (pid_t pid : listed) {
      if (!dup.insert(pid).second) continue;
      auto st = read_stat(pid, proc_);
      if (!st || st->ppid != parent.pid || st->start_ticks < parent.start_ticks) continue;  // gone, or a reused PID
      out.push_back(st->ref());
    }
    // Oldest first (fork order; a directory scan has none of its own).
    std::sort(out.begin(), out.end(), [](const ProcessRef& a, const ProcessRef& b) {
      return a.start_ticks != b.start_ticks ? a.start_ticks < b.start_ticks : a.pid < b.pid;
    });
    return out;
  }

 private:
  void scan() {
    if (scanned_) return;
    scanned_ = true;
    for (pid_t pid : numeric_entries(proc_))
      if (auto st = read_stat(pid, proc_)) by_parent_.emplace(st->ppid, pid);
  }

  fs::path proc_;
  bool use_scan_ = false;
  bool scanned_ = false;
  std::multimap<pid_t, pid_t> by_parent_;  // ppid -> pid
};

// Breadth first from root; visit(member) runs before the member's children are read.
template <typename Visit>
void walk(const ProcessRef& root, const fs::path& proc, Visit&& visit) {
  ChildLister lister(proc);
  std::deque<TreeMember> queue{TreeMember{root, {}, 0}};
  std::set<pid_t> seen{root.pid};
  while (!queue.empty()) {
    TreeMember m = queue.front();
    queue.pop_front();
    visit(m);
    for (const auto& c : lister.children(m.ref))
      if (seen.insert(c.pid).second) queue.push_back(TreeMember{c, m.ref, m.depth + 1});
  }
}

}  // namespace

std::vector<ProcessRef> children_of(const ProcessRef& parent, const fs::path& proc) {
  return ChildLister(proc).children(parent);
}

std::vector<TreeMember> walk_tree(const ProcessRef& root, const fs::path& proc) {
  std::vector<TreeMember> out;
  if (!root.same_process_alive(proc)) return out;
  walk(root, proc, [&](const TreeMember& m) { out.push_back(m); });
  return out;
}

std::vector<ProcessRef> descendants(const ProcessRef& root, const fs::path& proc) {
  std::vector<ProcessRef> out;
  for (const auto& m : walk_tree(root, proc))
    if (m.depth > 0) out.push_back(m.ref);
  return out;
}

ConvergeResult converge_tree(const ProcessRef& root, const std::function<bool(const TreeMember&)>& act,
                             const std::function<void()>& settle, int max_walks, const fs::path& proc) {
  ConvergeResult r;
  while (r.walks < max_walks) {
    ++r.walks;
    std::size_t acted = 0;
    walk(root, proc, [&](const TreeMember& m) {
      if (act(m)) ++acted;
    });
    r.acted += acted;
    if (acted == 0) return r;
    if (settle) settle();
  }
  throw std::runtime_error("the process tree of pid " + std::to_string(root.pid) + " still changed after " +
                           std::to_string(max_walks) + " walks");
}

}  // namespace fencecheck::faults
