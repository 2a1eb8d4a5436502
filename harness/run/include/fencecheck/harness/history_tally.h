// fencecheck — what a run's judgement needs from its history besides the checkers and figures,
// gathered one event at a time: the run's start, end and lock name, the issuer's highest token
// and each write's token staleness (metrics.h), and the inputs of the run's shortfalls (faults
// that never took effect, failed or crashed workers, unhealed faults, workers that never acquired: report.h,
// run_shortfalls). The orchestrator feeds it every event as it records it; `fencecheck report`
// feeds it from the checkers' first pass over history.jsonl (analyze_history_file's `also`). So
// neither holds the history: the tally's memory grows with workers, fault targets and distinct
// staleness values, never with events (docs/architecture.md, "Streamed rules").
//
// Thread-safety: a value type; one instance is used from one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fencecheck/harness/history.h"
#include "fencecheck/harness/scenario.h"

namespace fencecheck::harness {

class HistoryTally {
 public:
  /// Takes one event, in history order. Never throws except std::bad_alloc.
  void observe(const Event& e);

  /// Events observed.
  [[nodiscard]] std::size_t events() const { return events_; }
  /// t_ns of the first run.start (nanoseconds on the history's monotonic clock), if any.
  [[nodiscard]] std::optional<std::int64_t> run_start_ns() const { return run_start_; }
  /// t_ns of the first event, 0 when none: where run_start_ns() is absent, the run's start.
  [[nodiscard]] std::int64_t first_event_ns() const { return first_ns_; }
  /// t_ns and detail ("timeout", "interrupted", ...) of the last run.end, if any.
  [[nodiscard]] std::optional<std::int64_t> run_end_ns() const { return run_end_; }
  [[nodiscard]] const std::string& run_end_detail() const { return run_end_detail_; }
  /// The lock name of the first run.start that names one (the lock the run actually used), or "".
  [[nodiscard]] const std::string& lock() const { return lock_; }

  /// The highest token of any lock.grant or acquire.ok so far (the issuer's), 0 when none.
  [[nodiscard]] std::int64_t issuer_token() const { return issued_; }
  /// Per write.invoke with a token: the issuer's highest token so far minus the token presented
  /// (at least 0), in whole tokens, as value -> how many writes had it.
  [[nodiscard]] const std::map<std::int64_t, std::uint64_t>& token_staleness() const { return staleness_; }

  /// Whether worker `worker`'s own exit with status `code` (worker.exit "exit <code>") is what its
  /// events so far said (docs/worker-protocol.md, "How a worker ends"): exit 1 after its
  /// job.gave_up; exit 0 after its job.done or job.gave_up, or once the harness asked the workers
  /// to stop (a schedule's end). Otherwise the exit is a crash (exit 0 or 1) or a failure (any
  /// other status), and its worker.exit should carry its stderr tail. Pure.
  [[nodiscard]] bool exit_accounted(const std::string& worker, std::string_view code) const;

  /// run_shortfalls() (report.h) of the events observed, given the black-box workers (analysis's
  /// black_box_workers: workers that sent no worker-protocol event). The same reasons, in the same
  /// order, as run_shortfalls(sc, history). Pure.
  [[nodiscard]] std::vector<std::string> shortfalls(const Scenario& sc, const std::vector<std::string>& black_box) const;

 private:
  using FaultTarget = std::pair<std::string, std::string>;  // (fault kind, target)

  std::size_t events_ = 0;
  std::optional<std::int64_t> run_start_, run_end_;
  std::int64_t first_ns_ = 0;
  std::string run_end_detail_, lock_;
  std::int64_t issued_ = 0;
  std::map<std::int64_t, std::uint64_t> staleness_;
  // Shortfalls' inputs.
  std::map<FaultTarget, std::int64_t> injected_;                  // fault.inject per (kind, target)
  std::map<FaultTarget, std::vector<std::string>> not_injected_;  // "<kind> on <target> not injected: <why>"
  struct Exit {
    std::string worker, code, stderr_tail;  // worker.exit's target, "<N>" of "exit <N>", line
    bool accounted = false;                 // exit_accounted() when it exited
  };
  std::vector<Exit> exits_;                       // each worker's own exit, in history order
  std::set<std::string> done_, gave_up_;          // workers that sent job.done / job.gave_up
  bool stop_asked_ = false;                       // the harness's "schedule over after ..."
  std::map<FaultTarget, std::string> unhealed_;                   // "not healed" with no later fault.heal
  std::vector<std::string> cut_short_;                            // "still held its event channel" logs
  bool timed_out_ = false;
  std::set<std::string> started_, acquired_;
};

}  // namespace fencecheck::harness
