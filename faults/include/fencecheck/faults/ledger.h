// fencecheck — the fault ledger: a record of every injection, for healing after the harness crashes.
//
// A JSON-lines file in the run directory (`faults.ledger`). Before a fault takes effect the
// harness appends {"op":"inject","id":N,"kind":...,<the fault's ledger_record()>,"harness_pid":P,
// "harness_start_ticks":T,"run_id":R} (one write(2), in the page cache before the fault exists: it
// survives a killed harness; no fsync, since every recorded fault is kernel state that a machine
// crash removes too); once a heal has taken effect it appends {"op":"heal","id":N} (heal(): a
// fault whose heal failed keeps no heal entry).
// Outstanding entries (inject without heal) are what `fencecheck cleanup` heals; the harness
// identity lets cleanup refuse to touch a run whose harness is still alive.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/faults/fault.h"

namespace fencecheck::faults {

class FaultLedger {
 public:
  /// Opens (creating) the ledger at path for appending. Throws std::runtime_error naming the path.
  FaultLedger(std::filesystem::path path, std::string run_id);
  ~FaultLedger();
  FaultLedger(const FaultLedger&) = delete;
  FaultLedger& operator=(const FaultLedger&) = delete;

  /// Appends (one write(2)) an inject entry for the fault; returns its id. Call BEFORE inject().
  /// Throws std::runtime_error when the write fails (then do not inject). Thread-safe.
  std::int64_t record_inject(const Fault& fault);
  /// Appends a heal entry. Never throws (a failed write is logged to stderr). Thread-safe.
  void record_heal(std::int64_t id) noexcept;
  /// Heals the fault recorded as `id` (Fault::heal()) and appends its heal entry only when the
  /// heal took effect: a fault that could not be undone stays outstanding here, so that
  /// `fencecheck cleanup` still sees it. Returns what heal() returned (Fault::heal_failure() says
  /// why on false). Never throws. Thread-safe for the ledger; the fault is driven as fault.h says.
  bool heal(Fault& fault, std::int64_t id) noexcept;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

  /// Reads a ledger and returns the inject entries that have no heal entry, in file order.
  /// A torn last line (crash mid-append) is ignored. Throws std::runtime_error if unreadable.
  [[nodiscard]] static std::vector<nlohmann::json> outstanding(const std::filesystem::path& path);

  /// The PID of the harness that wrote the entry; nullopt when the entry names none or a damaged
  /// one (harness_pid absent or not an integer). Never throws.
  [[nodiscard]] static std::optional<int> writer_pid(const nlohmann::json& entry);
  /// True when the harness that wrote the entry is still running (same PID and start time); false
  /// when the entry names none or a damaged one (writer_pid). Never throws.
  [[nodiscard]] static bool writer_alive(const nlohmann::json& entry);

 private:
  std::filesystem::path path_;
  std::string run_id_;
  int fd_ = -1;
  std::int64_t next_id_ = 1;
  std::mutex mu_;
};

/// Heals every outstanding entry of the ledger at path, appending a heal entry for each, and
/// returns one sentence per entry. Each entry is healed by its kind's healer: the fault kind's
/// (FaultKind::heal_record, fault_kind.h, registered ones included), or the network lab's or a
/// worker group's. A healer that throws leaves the entry outstanding and says why. Entries whose harness is alive are skipped (never touch a live
/// run) unless force is true. Never throws for a single entry's failure.
std::vector<std::string> heal_outstanding(const std::filesystem::path& path, bool force = false);

}  // namespace fencecheck::faults
