#include "fencecheck/faults/ledger.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <set>

#include "fencecheck/faults/fault_kind.h"
#include "fencecheck/faults/process.h"
#include "fencecheck/process/write_all.h"
#include "healers.h"

namespace fencecheck::faults {
namespace {

/// The healer of an entry's kind: a fault kind's (fault_kind.h: every Fault's records), or one of
/// the entries that are no fault: a command worker's process group and directory, the network lab.
std::function<std::string(const nlohmann::json&)> healer_of(const std::string& kind) {
  if (const FaultKind* k = find_fault_kind(kind)) return [k](const nlohmann::json& e) { return k->heal_record(e); };
  if (kind == "worker-group") return detail::heal_worker_group_record;
  if (kind == "worker-dir") return detail::heal_worker_dir_record;
  if (kind == "netns-lab")
    return [](const nlohmann::json& e) { return detail::heal_netns_lab_record(e, detail::healer_runner()); };
  return nullptr;
}

// How entries are written (record_inject, record_heal: process::write_all): one write(2) per entry,
// no fsync. The ledger exists for one crash: the harness's (kill -9, an
// abort), after which `fencecheck cleanup` heals what it left. Once write() returns, the line is
// in the kernel's page cache and outlives the harness. What the ledger records (stopped processes,
// cgroups, network namespaces, tc filters and qdiscs) is kernel state that dies with the machine,
// so a power loss leaves nothing to heal and there is nothing an fsync would protect. The fsync
// cost 0.4-4 ms (up to 10+ under neighbours' I/O) between the decision and every fault's effect
// (docs/performance.md, fault timing).

std::vector<nlohmann::json> read_entries(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read fault ledger " + path.string());
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) continue;  // a torn last line from a crash mid-append
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace


FaultLedger::FaultLedger(std::filesystem::path path, std::string run_id) : path_(std::move(path)), run_id_(std::move(run_id)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot open fault ledger " + path_.string() + ": " + std::strerror(errno));
  // Continue numbering after entries already there (a resumed or re-opened ledger).
  for (const auto& e : read_entries(path_)) next_id_ = std::max(next_id_, e.value("id", std::int64_t{0}) + 1);
}

FaultLedger::~FaultLedger() {
  if (fd_ >= 0) ::close(fd_);
}

std::int64_t FaultLedger::record_inject(const Fault& fault) {
  std::lock_guard lock(mu_);
  nlohmann::json e = fault.ledger_record();
  const std::int64_t id = next_id_++;
  e["op"] = "inject";
  e["id"] = id;
  e["kind"] = std::string(fault.kind());
  e["run_id"] = run_id_;
  e["harness_pid"] = ::getpid();
  if (auto self = ProcessRef::of(::getpid())) e["harness_start_ticks"] = self->start_ticks;
  if (!fencecheck::process::write_all(fd_, e.dump() + "\n"))
    throw std::runtime_error("cannot write fault ledger " + path_.string() + ": " + std::strerror(errno) +
                             "; not injecting " + std::string(fault.kind()));
  return id;
}

void FaultLedger::record_heal(std::int64_t id) noexcept {
  std::lock_guard lock(mu_);
  try {
    nlohmann::json e{{"op", "heal"}, {"id", id}};
    if (!fencecheck::process::write_all(fd_, e.dump() + "\n"))
      std::cerr << "fencecheck: cannot record heal " << id << " in " << path_ << ": " << std::strerror(errno) << "\n";
  } catch (const std::exception& err) {  // std::bad_alloc building the line: the entry stays outstanding
    std::cerr << "fencecheck: cannot record heal " << id << " in " << path_ << ": " << err.what()
              << "; `fencecheck cleanup` will find it outstanding and heal it again (a no-op)\n";
  }
}

bool FaultLedger::heal(Fault& fault, std::int64_t id) noexcept {
  if (!fault.heal()) return false;  // still in effect: no heal entry, cleanup sees it outstanding
  record_heal(id);
  return true;
}

std::vector<nlohmann::json> FaultLedger::outstanding(const std::filesystem::path& path) {
  auto entries = read_entries(path);
  std::set<std::int64_t> healed;
  for (const auto& e : entries)
    if (e.value("op", "") == "heal") healed.insert(e.value("id", std::int64_t{-1}));
  std::vector<nlohmann::json> out;
  for (const auto& e : entries)
    if (e.value("op", "") == "inject" && !healed.count(e.value("id", std::int64_t{-1}))) out.push_back(e);
  return out;
}

std::optional<int> FaultLedger::writer_pid(const nlohmann::json& entry) {
  const auto pid = entry.find("harness_pid");
  if (pid == entry.end() || !pid->is_number_integer()) return std::nullopt;
  return pid->get<int>();
}

bool FaultLedger::writer_alive(const nlohmann::json& entry) {
  const auto pid = writer_pid(entry);
  if (!pid) return false;  // absent or damaged: no live writer to protect
  const auto ticks = entry.find("harness_start_ticks");
  ProcessRef writer{*pid, ticks != entry.end() && ticks->is_number_unsigned() ? ticks->get<std::uint64_t>() : 0};
  return writer.pid > 0 && writer.same_process_alive();
}

std::vector<std::string> heal_outstanding(const std::filesystem::path& path, bool force) {
  std::vector<std::string> said;
  std::vector<nlohmann::json> entries;
  try {
    entries = FaultLedger::outstanding(path);
  } catch (const std::exception& err) {
    said.emplace_back(err.what());
    return said;
  }
  if (entries.empty()) return said;
  std::unique_ptr<FaultLedger> ledger;
  for (const auto& e : entries) {
    std::string kind = "?";
    try {  // a field of the wrong type (a damaged ledger) throws: say so, and go on with the rest
      kind = e.value("kind", "");
      if (!force && FaultLedger::writer_alive(e)) {
        said.push_back(kind + " entry " + std::to_string(e.value("id", 0)) + ": its harness (pid " +
                       std::to_string(FaultLedger::writer_pid(e).value_or(0)) + ") is still running; left alone");
        continue;
      }
    } catch (const std::exception& err) {
      said.push_back("a damaged entry in " + path.string() + " (" + e.dump() + "): " + err.what() + "; cannot heal it");
      continue;
    }
    const auto heal = healer_of(kind);
    if (!heal) {
      said.push_back("unknown fault kind '" + kind + "' in " + path.string() + "; cannot heal it");
      continue;
    }
    try {
      said.push_back(heal(e));
      if (!ledger) ledger = std::make_unique<FaultLedger>(path, e.value("run_id", ""));
      ledger->record_heal(e.value("id", std::int64_t{0}));
    } catch (const std::exception& err) {
      said.push_back(kind + ": heal failed: " + err.what());
    }
  }
  return said;
}

}  // namespace fencecheck::faults
