// fencecheck — everything the harness concludes from one run: the checkers' verdicts and the
// figures read off the history (lease expiries during work, pauses, rejected writes, faults).
// Pure functions of (history, read-back); no I/O.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fencecheck/harness/checker.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/proto/readback.h"

namespace fencecheck::harness {

/// A lock key deleted by the lock service while its holder was still working: the lease expired
/// (or someone else deleted the key) and no release explains it.
///
/// Found from `lock.delete` events (source "lock": lock_key, token = the key's create_revision,
/// revision = the delete's revision). A delete is explained by a release when some `release.ok`
/// carries the same revision (a worker reports its unlock's header revision, which is the
/// delete's). When the delete has no revision, a `release.ok` for the same lock_key and token
/// explains it instead. The holder is the worker whose `acquire.ok` has that lock_key and token;
/// a delete nobody held is not counted. A holder that emitted `job.done` for that token before
/// the delete had finished its work, so it is not counted either.
struct LeaseExpiry {
  std::string worker;                    ///< the holder
  std::string lock;                      ///< lock name (prefix), from the acquire.ok
  std::string lock_key;                  ///< the holder's key under the prefix
  std::int64_t token = 0;                ///< the key's create_revision = the holder's fencing token
  std::optional<std::int64_t> lease_id;  ///< from the acquire.ok (or the delete)
  std::optional<std::int64_t> revision;  ///< the delete's revision
  std::int64_t t_ns = 0;                 ///< when the delete was received
  std::vector<std::size_t> evidence;     ///< acquire.ok, lock.grant (if seen), lock.delete indices
};

/// One `pause` event: the worker's own monotonic ticker saw a gap.
struct PauseObservation {
  std::string worker;
  std::chrono::nanoseconds duration{};
  std::optional<std::int64_t> token;  ///< the token held while paused, when holding
  std::size_t index = 0;              ///< history index
  std::int64_t t_ns = 0;
};

/// Rejected writes for one (key, client): the workers' write.fail events and the resource's own
/// list of rejections (they should agree; both are kept so a disagreement shows).
struct RejectedWriteCount {
  std::string key;
  std::string client;
  std::int64_t history = 0;   ///< write.fail events from this client for this key
  std::int64_t readback = 0;  ///< the resource's rejections for this client and key
};

/// One injected fault, paired with its heal.
struct FaultWindow {
  std::string fault;   ///< "sigstop", ...
  std::string target;  ///< worker id
  std::optional<std::chrono::nanoseconds> planned;  ///< duration_ns of the fault.inject
  std::optional<std::chrono::nanoseconds> actual;   ///< duration_ns of the fault.heal, else heal t_ns - inject t_ns
  std::size_t inject_index = 0;
  std::optional<std::size_t> heal_index;  ///< nullopt: never healed in the history
  std::int64_t inject_t_ns = 0;
  std::optional<std::int64_t> heal_t_ns;
};

struct Figures {
  std::vector<LeaseExpiry> expiries_during_work;  ///< in history order of the deletes
  std::vector<PauseObservation> pauses;           ///< every pause event, in history order
  std::map<std::string, PauseObservation> longest_pause;  ///< per worker
  std::vector<RejectedWriteCount> rejected_writes;  ///< sorted by key, then client
  std::int64_t rejected_writes_history = 0;         ///< all write.fail events
  std::int64_t rejected_writes_readback = 0;        ///< all of the resource's rejections
  std::vector<FaultWindow> faults;                  ///< in injection order

  /// The number of rejected writes the run shows: the larger of the two sources (a worker killed
  /// before reporting its write.fail does not hide a rejection the resource recorded).
  [[nodiscard]] std::int64_t rejected_writes_total() const {
    return rejected_writes_history > rejected_writes_readback ? rejected_writes_history : rejected_writes_readback;
  }
};

/// Reads the figures off a history and read-back. Pure; never throws for odd input (events with
/// missing fields are skipped where they cannot be attributed).
[[nodiscard]] Figures compute_figures(const History& history, const ReadBack& readback);

/// A run's conclusion. Self-contained: `evidence_events` holds a copy of every history event an
/// anomaly or figure cites, so the verdict document stands alone.
struct Analysis {
  Verdict verdict = Verdict::kUnknown;    ///< the worst of the checkers' verdicts
  std::vector<CheckerResult> checkers;    ///< worst first
  Figures figures;
  std::map<std::size_t, Event> evidence_events;

  /// Every anomaly with this name across the checkers.
  [[nodiscard]] std::vector<const Anomaly*> anomalies_named(std::string_view name) const;
  /// Number of anomalies across all checkers.
  [[nodiscard]] std::size_t anomaly_count() const;
};

/// Runs the checkers and computes the figures.
[[nodiscard]] Analysis analyze(const History& history, const ReadBack& readback, const Checkers& checkers);
/// The same with default_checkers().
[[nodiscard]] Analysis analyze(const History& history, const ReadBack& readback);

}  // namespace fencecheck::harness
