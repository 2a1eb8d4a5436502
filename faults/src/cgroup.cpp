#include "fencecheck/faults/cgroup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "cgroup_internal.h"
#include "healers.h"
#include "fencecheck/faults/fault.h"

namespace fencecheck::faults {
namespace fs = std::filesystem;

namespace {

constexpr long kCgroupSuperMagic = 0x27e0eb;    // linux/magic.h CGROUP_SUPER_MAGIC
constexpr long kCgroup2SuperMagic = 0x63677270;  // linux/magic.h CGROUP2_SUPER_MAGIC

std::vector<std::string> words(const std::string& s, char sep = ' ') {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep || c == '\n' || c == ' ' || c == '\t') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool lists(const CgroupFs& cfs, const fs::path& file, const std::string& word) {
  auto text = cfs.read(file);
  if (!text) return false;
  auto w = words(*text);
  return std::find(w.begin(), w.end(), word) != w.end();
}

bool path_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

// The reason a hierarchy we found is still unusable, or "".
std::string unwritable(const fs::path& mount) {
  if (::access(mount.c_str(), W_OK) == 0) return "";
  return "cannot create cgroups in " + mount.string() + ": " + std::strerror(errno) + " (cgroup faults need root)";
}

}  // namespace

int CgroupFs::write(const fs::path& file, const std::string& value) const noexcept {
  try {
    if (observer_) observer_(file, value);
  } catch (...) {  // a test's observer threw: its business; the write itself still happens (noexcept)
  }
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  int err = 0;
  ssize_t n;
  do {
    n = ::write(fd, value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) err = errno;
  else if (static_cast<std::size_t>(n) != value.size()) err = EIO;
  ::close(fd);
  return err;
}

std::optional<std::string> CgroupFs::read(const fs::path& file) const {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

int CgroupFs::make_dir(const fs::path& dir) const noexcept {
  if (::mkdir(dir.c_str(), 0755) == 0) return 0;
  return errno;
}

int CgroupFs::remove_dir(const fs::path& dir) const noexcept {
  if (!detail::on_cgroupfs(dir)) {
    // A fake tree: the "control files" are plain files we (or the test) wrote.
    std::error_code ec;
    if (!fs::exists(dir, ec)) return 0;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_regular_file(ec)) fs::remove(e.path(), ec);
  }
  if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return 0;
  return errno;
}

CgroupSupport detect_cgroups(const CgroupFs& cfs) {
  CgroupSupport s;
  const fs::path root = cfs.root();
  const bool pure_v2 = path_exists(root / "cgroup.controllers");
  const fs::path unified = root / "unified";
  const bool hybrid_v2 = !pure_v2 && path_exists(unified / "cgroup.controllers");

  // cpu
  auto v2_cpu = [&](const fs::path& mount) -> std::optional<std::string> {  // nullopt = usable
    if (!lists(cfs, mount / "cgroup.controllers", "cpu"))
      return "cgroup cpu controller not found: neither cgroup v2 cpu.max nor v1 cpu.cfs_quota_us under " +
             root.string() + " (" + (mount / "cgroup.controllers").string() + " does not list cpu)";
    if (!lists(cfs, mount / "cgroup.subtree_control", "cpu"))
      return "cgroup cpu controller not usable: " + (mount / "cgroup.controllers").string() + " lists cpu but " +
             (mount / "cgroup.subtree_control").string() +
             " does not enable it for child cgroups (no cpu.max in them); enable it with: echo +cpu > " +
             (mount / "cgroup.subtree_control").string();
    return std::nullopt;
  };
  const std::string cpu_none = "cgroup cpu controller not found: neither cgroup v2 cpu.max nor v1 cpu.cfs_quota_us under " +
                               root.string();
  if (pure_v2) {
    if (auto why = v2_cpu(root)) s.cpu_missing = *why;
    else s.cpu = CgroupHierarchy{CgroupVersion::kV2, root, ""};
  } else {
    for (const char* dir : {"cpu", "cpu,cpuacct", "cpuacct,cpu"}) {
      if (path_exists(root / dir / "cpu.cfs_quota_us")) {
        s.cpu = CgroupHierarchy{CgroupVersion::kV1, root / dir, "cpu"};
        break;
      }
    }
    if (!s.cpu && hybrid_v2 && !v2_cpu(unified)) s.cpu = CgroupHierarchy{CgroupVersion::kV2, unified, ""};
    if (!s.cpu) s.cpu_missing = cpu_none;
  }
  if (s.cpu) {
    if (auto why = unwritable(s.cpu->mount); !why.empty()) {
      s.cpu_missing = "cgroup cpu controller not usable: " + why;
      s.cpu.reset();
    }
  }

  // freezer
  if (pure_v2) {
    s.freezer = CgroupHierarchy{CgroupVersion::kV2, root, ""};
  } else if (path_exists(root / "freezer" / "cgroup.procs") && !path_exists(root / "freezer" / "cgroup.controllers")) {
    s.freezer = CgroupHierarchy{CgroupVersion::kV1, root / "freezer", "freezer"};
  } else if (hybrid_v2) {
    s.freezer = CgroupHierarchy{CgroupVersion::kV2, unified, ""};
  } else {
    s.freezer_missing = "cgroup freezer not found: neither cgroup v2 cgroup.freeze nor v1 freezer.state under " +
                        root.string();
  }
  if (s.freezer) {
    if (auto why = unwritable(s.freezer->mount); !why.empty()) {
      s.freezer_missing = "cgroup freezer not usable: " + why;
      s.freezer.reset();
    }
  }
  return s;
}

CgroupHierarchy require_cpu_hierarchy(const CgroupFs& cfs) {
  auto s = detect_cgroups(cfs);
  if (!s.cpu) throw FaultUnavailable(s.cpu_missing);
  return *s.cpu;
}

CgroupHierarchy require_freezer_hierarchy(const CgroupFs& cfs) {
  auto s = detect_cgroups(cfs);
  if (!s.freezer) throw FaultUnavailable(s.freezer_missing);
  return *s.freezer;
}

std::optional<std::string> cgroup_of(const CgroupFs& cfs, const CgroupHierarchy& h, pid_t pid, pid_t tid) {
  fs::path file = cfs.proc() / std::to_string(pid);
  if (tid > 0) file = file / "task" / std::to_string(tid);
  auto text = cfs.read(file / "cgroup");
  if (!text) return std::nullopt;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    auto c1 = line.find(':');
    if (c1 == std::string::npos) continue;
    auto c2 = line.find(':', c1 + 1);
    if (c2 == std::string::npos) continue;
    std::string id = line.substr(0, c1), ctrls = line.substr(c1 + 1, c2 - c1 - 1), path = line.substr(c2 + 1);
    if (h.version == CgroupVersion::kV2) {
      if (id == "0" && ctrls.empty()) return path;
    } else {
      auto names = words(ctrls, ',');
      if (std::find(names.begin(), names.end(), h.controller) != names.end()) return path;
    }
  }
  return std::nullopt;
}

std::string cgroup_name(std::string_view run_id, std::string_view target) {
  std::string name = "fencecheck-";
  name += run_id;
  name += '-';
  name += target;
  for (std::size_t i = 11; i < name.size(); ++i) {
    char& c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok) c = '_';
  }
  if (name.size() > 200) name.resize(200);
  return name;
}

// ---------------------------------------------------------------------------------------------
namespace detail {

bool on_cgroupfs(const fs::path& p) {
  struct statfs st {};
  if (::statfs(p.c_str(), &st) != 0) {
    // A path that does not exist yet: judge by its parent.
    if (p.has_parent_path() && p.parent_path() != p) return on_cgroupfs(p.parent_path());
    return false;
  }
  const auto type = static_cast<long>(st.f_type);
  return type == kCgroupSuperMagic || type == kCgroup2SuperMagic;
}

std::vector<pid_t> read_ids(const CgroupFs& cfs, const fs::path& file) {
  std::vector<pid_t> out;
  auto text = cfs.read(file);
  if (!text) return out;
  for (const auto& w : words(*text)) {
    pid_t v = 0;
    auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
    if (ec == std::errc() && p == w.data() + w.size() && v > 0) out.push_back(v);
  }
  return out;
}

std::vector<pid_t> thread_ids(const CgroupFs& cfs, pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cfs.proc() / std::to_string(pid) / "task", ec)) {
    const std::string n = e.path().filename().string();
    pid_t v = 0;
    auto [p, err] = std::from_chars(n.data(), n.data() + n.size(), v);
    if (err == std::errc() && p == n.data() + n.size() && v > 0) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<Placement> read_placement(const CgroupFs& cfs, const CgroupHierarchy& h, pid_t pid) {
  auto orig = cgroup_of(cfs, h, pid);
  if (!orig) return std::nullopt;
  Placement p;
  p.original = *orig;
  if (h.version == CgroupVersion::kV1)
    for (pid_t tid : thread_ids(cfs, pid))
      if (auto t = cgroup_of(cfs, h, pid, tid)) p.threads[tid] = *t;
  return p;
}

bool fencecheck_cgroup(const std::string& relative) {
  for (const auto& part : fs::path(relative))
    if (part.string().rfind("fencecheck-", 0) == 0) return true;
  return false;
}

fs::path existing_dir(const CgroupHierarchy& h, const std::string& relative) {
  fs::path rel = fs::path(relative).relative_path().lexically_normal();
  if (rel.empty() || rel == "." || rel.string().rfind("..", 0) == 0) return h.mount;
  fs::path p = h.mount / rel;
  while (p != h.mount && p.has_parent_path() && !path_exists(p)) p = p.parent_path();
  return p;
}

const char* member_file(const CgroupHierarchy& h) { return h.version == CgroupVersion::kV1 ? "tasks" : "cgroup.procs"; }

void create_cgroup(const CgroupFs& cfs, const fs::path& dir, const std::string& who) {
  int e = cfs.make_dir(dir);
  if (e != 0 && e != EEXIST)
    throw FaultError(who + ": cannot create cgroup " + dir.string() + ": " + std::strerror(e));
}

bool enter(const CgroupFs& cfs, const CgroupHierarchy& h, const fs::path& dir, const ProcessRef& ref,
           const std::string& who) {
  if (!ref.same_process_alive(cfs.proc())) return false;
  const fs::path procs = dir / "cgroup.procs";
  if (int e = cfs.write(procs, std::to_string(ref.pid)); e != 0) {
    if (e == ESRCH) return false;
    throw FaultError(who + ": cannot move pid " + std::to_string(ref.pid) + " into " + procs.string() + ": " +
                     std::strerror(e));
  }
  if (h.version != CgroupVersion::kV1) return true;
  // v1 membership is per thread: cgroup.procs moved the whole thread group; write each TID too so
  // that every thread is checked (cgroup-v1/cgroups.rst, "tasks").
  const fs::path tasks = dir / "tasks";
  for (pid_t tid : thread_ids(cfs, ref.pid)) {
    if (!ref.same_process_alive(cfs.proc())) return false;
    int e = cfs.write(tasks, std::to_string(tid));
    if (e != 0 && e != ESRCH)  // ESRCH: that thread exited meanwhile
      throw FaultError(who + ": cannot move thread " + std::to_string(tid) + " into " + tasks.string() + ": " +
                       std::strerror(e));
  }
  return true;
}

ConvergeResult enter_tree(const CgroupFs& cfs, const CgroupHierarchy& h, const fs::path& dir, const ProcessRef& root,
                          const std::string& who, std::vector<Member>& members, const std::function<void()>& settle) {
  const std::string mine = "/" + dir.filename().string();
  auto placement_of = [&](const ProcessRef& ref) -> const Placement* {
    for (const auto& m : members)
      if (m.ref == ref) return &m.where;
    return nullptr;
  };
  auto act = [&](const TreeMember& m) -> bool {
    if (placement_of(m.ref)) return false;  // moved (or found inside) in an earlier walk
    const bool is_root = m.depth == 0;
    const auto gone = [&] { return FaultError(who + ": the process is gone or its PID was reused; not moving it"); };
    auto where = read_placement(cfs, h, m.ref.pid);
    if (!where || !m.ref.same_process_alive(cfs.proc())) {
      if (is_root) throw gone();
      return false;  // exited meanwhile
    }
    if (where->original == mine) {  // forked after its parent entered: born inside
      const Placement* parent = placement_of(m.parent);
      members.push_back({m.ref, Placement{parent ? parent->original : members.front().where.original, {}}});
      return false;
    }
    bool elsewhere = fencecheck_cgroup(where->original);
    for (const auto& [tid, path] : where->threads) elsewhere = elsewhere || (path != mine && fencecheck_cgroup(path));
    if (elsewhere)
      throw FaultError(who + ": " + (is_root ? std::string("it") : "pid " + std::to_string(m.ref.pid) + " of its tree") +
                       " is already in a fencecheck cgroup (" + where->original + " under " + h.mount.string() +
                       "): another cgroup fault on it is active, and they must not overlap");
    if (!enter(cfs, h, dir, m.ref, who)) {
      if (is_root) throw gone();
      return false;
    }
    members.push_back({m.ref, *where});
    return true;
  };
  try {
    return converge_tree(root, act, settle, 100, cfs.proc());
  } catch (const FaultError&) {
    throw;
  } catch (const std::exception& err) {
    throw FaultError(who + ": " + err.what());
  }
}

std::vector<Member> current_tree(const CgroupFs& cfs, const CgroupHierarchy& h, const ProcessRef& root) {
  std::vector<Member> out;
  for (const auto& m : walk_tree(root, cfs.proc()))
    if (auto where = read_placement(cfs, h, m.ref.pid)) out.push_back({m.ref, *where});
    else if (m.depth == 0) break;  // the root is gone: no record of it
  return out;
}

namespace {
// Moves every live task listed in dir (other than those in skip) to dest. Returns how many.
int move_stragglers(const CgroupFs& cfs, const CgroupHierarchy& h, const fs::path& dir, const fs::path& dest,
                    const std::set<pid_t>& skip) {
  int n = 0;
  for (pid_t id : read_ids(cfs, dir / member_file(h))) {
    if (skip.count(id) || !path_exists(cfs.proc() / std::to_string(id))) continue;
    if (cfs.write(dest / member_file(h), std::to_string(id)) == 0) ++n;
  }
  return n;
}
}  // namespace

std::string leave(const CgroupFs& cfs, const CgroupHierarchy& h, const fs::path& dir,
                  const std::vector<Member>& members) noexcept {
  try {
    const Placement root_where = members.empty() ? Placement{} : members.front().where;
    const fs::path dest = existing_dir(h, root_where.original);
    std::string said;
    std::set<pid_t> moved;
    int descendants_back = 0, descendants_failed = 0;
    for (std::size_t i = 0; i < members.size(); ++i) {
      const auto& [ref, where] = members[i];
      const bool is_root = i == 0;
      const fs::path back = existing_dir(h, where.original);
      int e = ESRCH;
      if (ref.pid > 0 && ref.same_process_alive(cfs.proc())) e = cfs.write(back / "cgroup.procs", std::to_string(ref.pid));
      if (e == 0) {
        moved.insert(ref.pid);
        for (const auto& [tid, _] : where.threads) moved.insert(tid);
        if (h.version == CgroupVersion::kV1) {
          for (const auto& [tid, orig] : where.threads) {
            if (orig == where.original) continue;
            if (!path_exists(cfs.proc() / std::to_string(ref.pid) / "task" / std::to_string(tid))) continue;
            (void)cfs.write(existing_dir(h, orig) / "tasks", std::to_string(tid));
          }
        }
      }
      if (!is_root) {
        if (e == 0) ++descendants_back;
        else if (e != ESRCH) ++descendants_failed;
        continue;
      }
      if (e == 0) {
        said = "moved pid " + std::to_string(ref.pid) + " back to " + back.string();
        if (where.original.empty()) said += " (its original cgroup was not recorded)";
        else if (!path_exists(h.mount / fs::path(where.original).relative_path()))
          said += " (its original " + where.original + " is gone)";
      } else if (e == ESRCH) {
        said = "pid " + std::to_string(ref.pid) + " already gone";
      } else {
        said = "cannot move pid " + std::to_string(ref.pid) + " back to " + back.string() + ": " + std::strerror(e);
      }
    }
    if (members.empty()) said = "no process recorded";
    if (descendants_back > 0) said += "; moved " + std::to_string(descendants_back) + " descendant(s) back";
    if (descendants_failed > 0) said += "; could not move " + std::to_string(descendants_failed) + " descendant(s) back";
    if (int n = move_stragglers(cfs, h, dir, dest, moved); n > 0)
      said += "; moved " + std::to_string(n) + " other task(s) started inside it to " + dest.string();
    return said;
  } catch (const std::exception& err) {
    return std::string("cannot move tasks out of ") + dir.string() + ": " + err.what();
  } catch (...) {
    return "cannot move tasks out of " + dir.string();
  }
}

std::string remove_cgroup(const CgroupFs& cfs, const CgroupHierarchy& h, const fs::path& dir,
                          const Placement& where) noexcept {
  try {
    const auto deadline = std::chrono::steady_clock::now() + kRemoveTimeout;
    const fs::path dest = existing_dir(h, where.original);
    auto pause = std::chrono::milliseconds(1);
    for (;;) {
      int e = cfs.remove_dir(dir);
      if (e == 0) return "";
      if (e != EBUSY && e != ENOTEMPTY) return "cannot remove cgroup " + dir.string() + ": " + std::strerror(e);
      if (std::chrono::steady_clock::now() >= deadline)
        return "cannot remove cgroup " + dir.string() + ": " + std::strerror(e) + " for " +
               std::to_string(kRemoveTimeout.count()) + " ms (it still has tasks or child cgroups)";
      // Something is still inside (a task that raced with the move, or an exiting one): move again.
      move_stragglers(cfs, h, dir, dest, {});
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(20));
    }
  } catch (...) {
    return "cannot remove cgroup " + dir.string();
  }
}

int thaw(const CgroupFs& cfs, const CgroupHierarchy& h, const fs::path& dir) noexcept {
  if (h.version == CgroupVersion::kV1) return cfs.write(dir / "freezer.state", "THAWED");
  return cfs.write(dir / "cgroup.freeze", "0");
}

namespace {
nlohmann::json thread_record(const Placement& where) {
  nlohmann::json threads = nlohmann::json::object();
  for (const auto& [tid, orig] : where.threads)
    if (orig != where.original) threads[std::to_string(tid)] = orig;
  return threads;
}
Placement placement_from(const nlohmann::json& j) {
  Placement where;
  where.original = j.value("original", std::string());
  if (auto t = j.find("thread_originals"); t != j.end() && t->is_object())
    for (const auto& [tid, orig] : t->items())
      if (orig.is_string()) where.threads[static_cast<pid_t>(std::stol(tid))] = orig.get<std::string>();
  return where;
}
}  // namespace

nlohmann::json cgroup_record(const std::string& target, const ProcessRef& ref, const CgroupHierarchy& h,
                             const fs::path& dir, const std::vector<Member>& members) {
  nlohmann::json j{{"target", target},
                   {"pid", ref.pid},
                   {"start_ticks", ref.start_ticks},
                   {"cgroup_version", static_cast<int>(h.version)},
                   {"mount", h.mount.string()},
                   {"cgroup_dir", dir.string()}};
  if (!h.controller.empty()) j["controller"] = h.controller;
  if (members.empty()) return j;
  const Placement& root = members.front().where;
  j["original"] = root.original;
  j["thread_originals"] = thread_record(root);
  nlohmann::json others = nlohmann::json::array();
  for (std::size_t i = 1; i < members.size(); ++i) {
    const auto& [r, where] = members[i];
    auto threads = thread_record(where);
    if (where.original == root.original && threads.empty()) continue;
    others.push_back({{"pid", r.pid}, {"start_ticks", r.start_ticks}, {"original", where.original},
                      {"thread_originals", threads}});
  }
  if (!others.empty()) j["descendant_originals"] = others;
  return j;
}

std::string heal_cgroup_record(const nlohmann::json& entry, bool thaw_first, const CgroupFs& cfs) {
  const std::string kind = entry.value("kind", thaw_first ? "freeze" : "cpu-throttle");
  const std::string who = kind + " " + entry.value("target", std::string("?"));
  const fs::path dir = entry.value("cgroup_dir", std::string());
  if (dir.empty() || dir.filename().string().rfind("fencecheck-", 0) != 0)
    return who + ": the record names no fencecheck cgroup (" + dir.string() + "); nothing touched";
  if (!path_exists(dir)) return who + ": cgroup " + dir.string() + " already removed";
  CgroupHierarchy h;
  h.version = entry.value("cgroup_version", 2) == 1 ? CgroupVersion::kV1 : CgroupVersion::kV2;
  h.mount = entry.value("mount", dir.parent_path().string());
  h.controller = entry.value("controller", std::string());
  // The root with its placement, then the descendants the record places elsewhere; any other
  // process still inside (forked after the record was written) goes where the root goes.
  std::vector<Member> members{{ProcessRef{entry.value("pid", 0), entry.value("start_ticks", std::uint64_t{0})},
                               placement_from(entry)}};
  if (auto d = entry.find("descendant_originals"); d != entry.end() && d->is_array())
    for (const auto& m : *d)
      if (m.is_object())
        members.push_back({ProcessRef{m.value("pid", 0), m.value("start_ticks", std::uint64_t{0})}, placement_from(m)});
  std::string said = who + ": ";
  if (thaw_first) {
    int e = thaw(cfs, h, dir);
    said += e == 0 ? "thawed; " : std::string("thaw failed (") + std::strerror(e) + "); ";
  }
  said += leave(cfs, h, dir, members);
  std::string err = remove_cgroup(cfs, h, dir, members.front().where);
  if (err.empty()) said += "; removed cgroup " + dir.string();
  else throw std::runtime_error(said + "; " + err);
  return said;
}

}  // namespace detail
}  // namespace fencecheck::faults

namespace fencecheck::faults::detail {
std::string heal_cpu_throttle_record(const nlohmann::json& entry, const CgroupFs& fs) {
  return heal_cgroup_record(entry, /*thaw_first=*/false, fs);
}
std::string heal_freeze_record(const nlohmann::json& entry, const CgroupFs& fs) {
  return heal_cgroup_record(entry, /*thaw_first=*/true, fs);
}
}  // namespace fencecheck::faults::detail
