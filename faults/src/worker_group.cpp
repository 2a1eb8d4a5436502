#include "fencecheck/faults/worker_group.h"

#include <signal.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "healers.h"

namespace fencecheck::faults {
namespace {

struct GroupStat {
  char state = '?';
  pid_t pgrp = 0;
  std::uint64_t start_ticks = 0;
};

/// Fields 3 (state), 5 (pgrp) and 22 (starttime) of a /proc/<pid>/stat line (proc(5)); the command
/// name (field 2) may hold spaces and parentheses, so fields are counted after its last ')'.
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
    if (field == 3 && !f.empty()) s.state = f[0];
    if (field == 5) std::from_chars(f.data(), f.data() + f.size(), s.pgrp);
    if (field == 22) {
      std::from_chars(f.data(), f.data() + f.size(), s.start_ticks);
      return s;
    }
  }
  return std::nullopt;
}

}  // namespace

std::vector<ProcessRef> group_members(const ProcessRef& leader, const std::string& proc, bool alive_only) {
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
    if (!s || s->pgrp != leader.pid || s->start_ticks < leader.start_ticks) continue;
    if (alive_only && (s->state == 'Z' || s->state == 'X')) continue;
    out.push_back({pid, s->start_ticks});
  }
  return out;
}

GroupEnd end_group(const ProcessRef& leader, std::chrono::milliseconds wait, const std::string& proc) noexcept {
  GroupEnd r;
  try {
    for (const auto& member : group_members(leader, proc, /*alive_only=*/true))
      if (signal_process(member, SIGKILL) == 0) ++r.killed;
    const auto deadline = std::chrono::steady_clock::now() + wait;
    auto pause = std::chrono::microseconds(500);
    for (;;) {
      r.alive = group_members(leader, proc, /*alive_only=*/true);
      if (r.alive.empty() || std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(20'000));
    }
    if (!r.alive.empty()) {
      r.failure = std::to_string(r.alive.size()) + " process(es) of process group " + std::to_string(leader.pid) +
                  " still alive " + std::to_string(wait.count()) + " ms after SIGKILL: pid";
      for (std::size_t i = 0; i < r.alive.size(); ++i)
        r.failure += (i == 0 ? " " : ", ") + std::to_string(r.alive[i].pid);
    }
  } catch (...) {  // std::bad_alloc, a /proc that cannot be listed: nothing proven
    r.failure = "process group " + std::to_string(leader.pid) + ": its members could not be read";
    if (r.alive.empty()) r.alive.push_back(leader);
  }
  return r;
}

WorkerGroup::WorkerGroup(ProcessRef leader, std::string worker, std::chrono::milliseconds wait, std::string proc)
    : leader_(leader), worker_(std::move(worker)), wait_(wait), proc_(std::move(proc)) {}

std::string WorkerGroup::target() const { return worker_ + " (process group " + std::to_string(leader_.pid) + ")"; }

int WorkerGroup::end() noexcept {
  if (!active_) return 0;
  return end_group(leader_, std::chrono::milliseconds(0), proc_).killed;
}

bool WorkerGroup::heal() noexcept {
  if (!active_) return healed();
  const GroupEnd r = end_group(leader_, wait_, proc_);
  if (!r.alive.empty()) return not_healed("worker-group " + target() + ": " + r.failure);
  active_ = false;
  return healed();
}

nlohmann::json WorkerGroup::ledger_record() const {
  return {{"pgid", leader_.pid}, {"start_ticks", leader_.start_ticks}, {"target", worker_}};
}

std::string detail::heal_worker_group_record(const nlohmann::json& entry) {
  const ProcessRef leader{entry.value("pgid", 0), entry.value("start_ticks", std::uint64_t{0})};
  const std::string who = entry.value("target", std::string("?"));
  if (leader.pid <= 0) return "worker-group entry without a pgid: nothing to do";
  const GroupEnd r = end_group(leader);
  if (!r.alive.empty()) throw std::runtime_error("worker-group " + who + ": " + r.failure);
  return "worker-group " + who + ": ended " + std::to_string(r.killed) + " process(es) left in process group " +
         std::to_string(leader.pid);
}

WorkerDirectory::WorkerDirectory(std::filesystem::path scratch, std::filesystem::path kept, std::string worker,
                                 std::string run_id)
    : scratch_(std::move(scratch)), kept_(std::move(kept)), worker_(std::move(worker)), run_id_(std::move(run_id)) {}

std::string WorkerDirectory::target() const { return worker_ + " (" + scratch_.string() + ")"; }

nlohmann::json WorkerDirectory::ledger_record() const {
  return {{"scratch", scratch_.string()}, {"kept", kept_.string()}, {"target", worker_}};
}

bool WorkerDirectory::heal() noexcept {
  if (!active_) return healed();
  try {
    copy_failure_ = keep_worker_directory(scratch_, kept_, run_id_);
  } catch (const std::exception& err) {
    return not_healed("worker-dir " + target() + ": " + err.what());
  }
  active_ = false;
  return healed();
}

std::string keep_worker_directory(const std::filesystem::path& scratch, const std::filesystem::path& kept,
                                  const std::string& run_id) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);
  const std::string prefix = "fencecheck-" + run_id + "-";
  const std::string name = scratch.filename().string();
  if (ec || run_id.empty() || scratch.parent_path() != tmp || name.rfind(prefix, 0) != 0 || name.size() == prefix.size())
    throw std::runtime_error("not a worker directory of run " + (run_id.empty() ? std::string("?") : run_id) + ": " +
                             scratch.string() + " (expected " + (tmp / (prefix + "<worker>")).string() +
                             "); left as it is");
  const fs::file_status st = fs::symlink_status(scratch, ec);
  if (ec || !fs::exists(st)) return "";  // gone already
  if (!fs::is_directory(st)) throw std::runtime_error(scratch.string() + " is not a directory; left as it is");
  std::string failure;
  fs::create_directories(kept, ec);
  if (!ec) fs::copy(scratch, kept, fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);
  if (ec) failure = "not kept in " + kept.string() + ": " + ec.message();
  fs::remove_all(scratch, ec);
  if (fs::exists(fs::symlink_status(scratch)))
    throw std::runtime_error("cannot remove " + scratch.string() + (ec ? ": " + ec.message() : std::string()));
  return failure;
}

std::string detail::heal_worker_dir_record(const nlohmann::json& entry) {
  const std::string scratch = entry.value("scratch", std::string());
  const std::string kept = entry.value("kept", std::string());
  const std::string who = entry.value("target", std::string("?"));
  if (scratch.empty() || kept.empty()) return "worker-dir entry without its paths: nothing to do";
  const std::string failure = keep_worker_directory(scratch, kept, entry.value("run_id", std::string()));
  return "worker-dir " + who + ": " + scratch + (failure.empty() ? " moved into " + kept : " removed; " + failure);
}

}  // namespace fencecheck::faults
