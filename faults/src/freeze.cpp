#include "fencecheck/faults/freeze.h"

#include <cerrno>
#include <cstring>
#include <iostream>
#include <thread>

#include "cgroup_internal.h"

namespace fencecheck::faults {
namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// v1: freezer.state reads FROZEN; v2: cgroup.events has the line "frozen 1".
bool frozen(const CgroupFs& fs, const CgroupHierarchy& h, const std::filesystem::path& dir, std::string& seen) {
  if (h.version == CgroupVersion::kV1) {
    seen = trim(fs.read(dir / "freezer.state").value_or("(unreadable)"));
    return seen == "FROZEN";
  }
  auto events = fs.read(dir / "cgroup.events");
  if (!events) {
    seen = "cgroup.events unreadable";
    return false;
  }
  seen = "cgroup.events says frozen 0";
  std::size_t pos = 0;
  while (pos < events->size()) {
    auto nl = events->find('\n', pos);
    std::string line = events->substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (line == "frozen 1") return true;
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return false;
}

}  // namespace

FreezeFault::FreezeFault(ProcessRef target, std::string target_name, std::string run_id, FreezeSpec spec, CgroupFs fs)
    : ref_(target), name_(std::move(target_name)), spec_(spec), fs_(std::move(fs)) {
  if (spec_.timeout.count() <= 0) throw std::invalid_argument("freeze timeout must be positive");
  hierarchy_ = require_freezer_hierarchy(fs_);
  dir_ = hierarchy_.mount / cgroup_name(run_id, name_);
}

FreezeFault::~FreezeFault() { (void)heal(); }  // a last try; the ledger keeps it outstanding

std::string FreezeFault::target() const { return name_ + " (pid " + std::to_string(ref_.pid) + ")"; }

void FreezeFault::inject() {
  if (active_) return;
  const std::string who = "freeze " + target();
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
  if (hierarchy_.version == CgroupVersion::kV2 && detail::on_cgroupfs(dir_) &&
      !std::filesystem::exists(dir_ / "cgroup.freeze")) {
    members_ = {{ref_, *where}};  // nothing moved yet: heal() removes the empty cgroup
    active_ = true;
    throw FaultUnavailable(undo_failed_inject(who + ": the kernel has no cgroup v2 freezer (" +
                                              (dir_ / "cgroup.freeze").string() + " is missing; it needs Linux >= 5.2)"));
  }
  const bool v1 = hierarchy_.version == CgroupVersion::kV1;
  std::optional<std::chrono::steady_clock::time_point> deadline;  // set when the freeze is written
  // Between walks: freeze the cgroup (once) and wait until the freezer reports every task in it
  // frozen (v1: FREEZING is transitional). A frozen process cannot fork, so the next walk sees
  // the final tree; a process moved in later is frozen on entry (cgroup-v2.rst "cgroup.freeze";
  // v1: freezer_attach freezes a task joining a freezing cgroup).
  auto settle = [&] {
    if (!deadline) {
      const std::filesystem::path file = dir_ / (v1 ? "freezer.state" : "cgroup.freeze");
      const std::string value = v1 ? "FROZEN" : "1";
      if (int e = fs_.write(file, value); e != 0)
        throw FaultError(who + ": cannot write \"" + value + "\" to " + file.string() + ": " + std::strerror(e));
      deadline = std::chrono::steady_clock::now() + spec_.timeout;
    }
    auto pause = std::chrono::microseconds(200);
    std::string seen;
    while (!frozen(fs_, hierarchy_, dir_, seen)) {
      if (std::chrono::steady_clock::now() >= *deadline)
        throw FaultError(who + ": not frozen within " + std::to_string(spec_.timeout.count()) + " ms (" +
                         (v1 ? "freezer.state reads " + seen : seen) +
                         "; a task in uninterruptible sleep can delay it)");
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(10'000));
    }
  };
  std::string failure;
  try {
    walk_ = detail::enter_tree(fs_, hierarchy_, dir_, ref_, who, members, settle);
    if (!deadline) settle();
  } catch (const FaultError& err) {
    failure = err.what();
  } catch (const std::exception& err) {
    failure = who + ": " + err.what();
  }
  if (members.empty()) members.push_back({ref_, *where});  // heal() needs the root's placement
  members_ = std::move(members);
  active_ = true;  // heal() thaws, moves back what went in and removes the cgroup
  if (!failure.empty()) throw FaultError(undo_failed_inject(failure));
}

bool FreezeFault::heal() noexcept {
  if (!active_) return healed();
  // Thaw first; moving out also thaws (cgroup-v2.rst: "If a process is moved out of a frozen
  // cgroup, it becomes running"; v1 freezer_attach thaws a task entering a thawed cgroup).
  if (int e = detail::thaw(fs_, hierarchy_, dir_); e != 0 && e != ENOENT)
    std::cerr << "fencecheck: freeze " << target() << ": thaw failed: " << std::strerror(e) << "\n";
  (void)detail::leave(fs_, hierarchy_, dir_, members_);
  std::string err = detail::remove_cgroup(fs_, hierarchy_, dir_, members_.front().where);
  if (!err.empty()) {
    std::cerr << "fencecheck: freeze " << target() << ": " << err << "\n";
    return not_healed("freeze " + target() + ": " + err);  // still active: a later heal() retries
  }
  members_.clear();
  active_ = false;
  return healed();
}

nlohmann::json FreezeFault::ledger_record() const {
  return detail::cgroup_record(name_, ref_, hierarchy_, dir_,
                               active_ ? members_ : detail::current_tree(fs_, hierarchy_, ref_));
}

}  // namespace fencecheck::faults
