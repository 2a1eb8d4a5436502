// fencecheck — the checkers' rules that can be decided while the run goes, one event at a time.
//
// The checkers (checkers.h) judge a finished run: the whole history and the resource's read-back.
// A nightly soak of an hour should not wait for its end to say it went wrong: LiveChecker takes
// the history's events in the order they are recorded and reports an anomaly the moment an event
// proves it, so `fencecheck run` can write it to the run directory (anomalies.live.jsonl), count
// it in /metrics (fencecheck_anomalies_total while the run goes) and show it in the progress
// line, and a Grafana alert can fire during the night.
//
// It applies these rules of the checkers, each exactly as checkers.h states it:
//   stale-write-accepted  (a) a write.ok whose own reply carries a high-water mark above its
//                             token (the resource accepted it, yet said its mark was higher);
//                         (b) a write.ok whose write.invoke happened after a write.ok for the
//                             same key with a higher token had completed (real-time order by
//                             detail::happened_ns, Herlihy & Wing; Jepsen's histories).
//   token-regression      (a) an acquire.ok whose token is not above the largest token of the
//                             same lock's acquire.oks recorded before its worker's acquire.invoke;
//                         (b) a lock.grant of the lock service (its own history) whose token is
//                             below the largest granted so far, or equal to it on another key.
// The other rules need the read-back (interleaved-segment, corrupt-chunk, duplicate-effect,
// counter-drift, lost-acknowledged-write, token-regression's high-water part) or judge a holding
// as a whole (cross-key-rejection, rejection-storm, foreign-release, fenced-out): they are
// reported by the checkers at the end only.
//
// Soundness: every anomaly reported here is also reported by the checkers on the finished run,
// with the same name and key, and the event that revealed it (LiveAnomaly::found_at) among that
// anomaly's evidence: a live anomaly is never a false alarm. The converse does not hold: (b) of
// stale-write-accepted sees only the write.oks recorded so far (an acknowledgement that arrives
// late on its channel is found at the end), and stale-write-accepted's accept-log part needs the
// read-back. One live anomaly stands for one of the checkers' anomalies: stale-write-accepted is
// reported once per (key, writer, stale token), as the checker groups it; token-regression once
// per acquire.ok or grant. So per anomaly name, live counts <= the final counts (tested on the
// checkers' golden record, tests/check/live_checker_test.cpp).
//
// Memory is bounded by what is live, not by the number of events: per worker its latest
// write.invoke and acquire.invoke; per key the write.oks that raised the key's highest token in
// real-time order; per lock the acquire.oks that raised its token; the latest grants' (token, lock
// key) pairs (each at most kFrontierLimit, the oldest dropped); the groups already reported.
// Dropping old state can only make it miss an anomaly whose evidence is older than what it keeps
// (the checkers find it at the end), never report one.
//
// Thread-safety: none; one instance per run, fed from one thread (the orchestrator's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fencecheck/harness/checker.h"
#include "fencecheck/harness/history.h"

namespace fencecheck::harness {

/// An anomaly found while the run goes. Value type.
struct LiveAnomaly {
  Anomaly anomaly;            ///< as the checkers spell it (normalize()d): name, key, tokens, clients, evidence
  std::size_t found_at = 0;   ///< the history index of the event that proved it
};

class LiveChecker {
 public:
  /// Most entries kept per key (write.oks), per lock (acquire.oks) and of the grants; beyond it
  /// the oldest are dropped (which can only hide an anomaly, never invent one).
  static constexpr std::size_t kFrontierLimit = 4096;

  /// `context.lock`: the lock whose grants and acquires count ("" = every lock), as for the
  /// checkers (CheckContext::of(scenario)). The other fields are not used.
  explicit LiveChecker(const CheckContext& context);
  ~LiveChecker();
  LiveChecker(LiveChecker&&) noexcept;
  LiveChecker& operator=(LiveChecker&&) noexcept;

  /// The history's event number `index` (0-based: its line in history.jsonl; call in that order). Returns the anomalies it proves (usually none). Never throws except
  /// std::bad_alloc.
  std::vector<LiveAnomaly> observe(std::size_t index, const Event& event);

  /// Anomalies reported so far, per name.
  [[nodiscard]] const std::map<std::string, std::int64_t>& counts() const;
  /// Anomalies reported so far, all names.
  [[nodiscard]] std::int64_t total() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

/// Feeds a whole history to a LiveChecker (as a run would, event by event) and returns every
/// anomaly it reported, in the order found. Pure.
[[nodiscard]] std::vector<LiveAnomaly> live_anomalies(const History& history, const CheckContext& context);

/// The JSON line of anomalies.live.jsonl for `a`: {"found_at", "t_ms", "anomaly", "key",
/// "segment"?, "tokens", "clients", "evidence", "description"}; t_ms = ms since the run began.
[[nodiscard]] std::string live_anomaly_json_line(const LiveAnomaly& a, std::int64_t t_ms);

/// The run directory's file of anomalies found while the run went (one JSON line each, appended
/// and flushed the moment each is found; docs/report-format.md).
inline constexpr const char* kLiveAnomaliesFile = "anomalies.live.jsonl";

}  // namespace fencecheck::harness
