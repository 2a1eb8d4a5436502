#include "fencecheck/faults/worker_group.h"

#include <signal.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "healers.h"

namespace fencecheck::faults {
namespace {

struct GroupStat {
  pid_t pgrp = 0;
  std::uint64_t start_ticks = 0;
};

/// Fields 5 (pgrp) and 22 (starttime) of a /proc/<pid>/stat line (proc(5)); the command name
/// (field 2) may hold spaces and parentheses, so fields are counted after its last ')'.
std::optional<GroupStat> read_group_stat(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string text;
  if (!in || !std::getline(in, text)) return std::nullopt;
  const auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 1));
  std::string f;
  GroupStat s;
  for (int field = 3; fields >> f; ++field) {
    if (field == 5) std::from_chars(f.data(), f.data() + f.size(), s.pgrp);
    if (field == 22) {
      std::from_chars(f.data(), f.data() + f.size(), s.start_ticks);
      return s;
    }
  }
  return std::nullopt;
}

}  // namespace

std::vector<ProcessRef> group_members(const ProcessRef& leader, const std::string& proc) {
  std::vector<ProcessRef> out;
  if (leader.pid <= 0) return out;
  const std::filesystem::path root(proc);
  if (auto self = read_group_stat(root / std::to_string(leader.pid) / "stat"); self && self->start_ticks != leader.start_ticks)
    return out;  // the number is another process's now: not our group
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    pid_t pid = 0;
    if (std::from_chars(name.data(), name.data() + name.size(), pid).ec != std::errc() || pid <= 0) continue;
    const auto s = read_group_stat(entry.path() / "stat");
    if (s && s->pgrp == leader.pid && s->start_ticks >= leader.start_ticks) out.push_back({pid, s->start_ticks});
  }
  return out;
}

int end_group(const ProcessRef& leader) noexcept {
  try {
    int n = 0;
    for (const auto& member : group_members(leader)) {
      if (signal_process(member, SIGKILL) == 0) ++n;
    }
    return n;
  } catch (...) {
    return 0;
  }
}

WorkerGroup::WorkerGroup(ProcessRef leader, std::string worker) : leader_(leader), worker_(std::move(worker)) {}

std::string WorkerGroup::target() const { return worker_ + " (process group " + std::to_string(leader_.pid) + ")"; }

int WorkerGroup::end() noexcept {
  if (!active_) return 0;
  active_ = false;
  return end_group(leader_);
}

nlohmann::json WorkerGroup::ledger_record() const {
  return {{"pgid", leader_.pid}, {"start_ticks", leader_.start_ticks}, {"target", worker_}};
}

std::string detail::heal_worker_group_record(const nlohmann::json& entry) {
  const ProcessRef leader{entry.value("pgid", 0), entry.value("start_ticks", std::uint64_t{0})};
  const std::string who = entry.value("target", std::string("?"));
  if (leader.pid <= 0) return "worker-group entry without a pgid: nothing to do";
  const int n = end_group(leader);
  return "worker-group " + who + ": ended " + std::to_string(n) + " process(es) left in process group " +
         std::to_string(leader.pid);
}

}  // namespace fencecheck::faults
