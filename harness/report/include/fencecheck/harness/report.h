// fencecheck — reports of runs: the results table, junit.xml and report.html in each run
// directory (written live by ReportObserver, or again later by `fencecheck report RUN_DIR`), and
// retention of old run directories (`--keep N`). docs/report-format.md describes every file.
//
//   fencecheck run ...            ReportObserver: at the end of every scenario, report.html and
//                                 junit.xml in its run directory; the suite's JUnit file (--junit)
//   fencecheck report RUN_DIR...  reads scenario.json, history.jsonl and readback.json back,
//                                 re-runs the checkers, rewrites verdict.json, junit.xml and
//                                 report.html, prints the table; exit code as `run` would give
//
// Errors: a run directory's missing or bad file is a RunFileError naming it (exit code 2 in the
// CLI). Thread-safety: the free functions are reentrant (they share no state; two of them writing
// the same run directory at once is the caller's problem); ReportObserver is used from the
// orchestrator's thread only.
#pragma once

#include <cstddef>
#include <ctime>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/expectation.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/harness/junit.h"
#include "fencecheck/harness/orchestrator.h"
#include "fencecheck/harness/report_html.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/proto/readback.h"

namespace fencecheck::harness {

/// A run directory's file that is missing or cannot be used. what() is "<file>: <message>".
class RunFileError : public std::runtime_error {
 public:
  RunFileError(std::filesystem::path file, std::string message);
  [[nodiscard]] const std::filesystem::path& file() const noexcept { return file_; }
  [[nodiscard]] const std::string& message() const noexcept { return message_; }

 private:
  std::filesystem::path file_;
  std::string message_;
};

/// What a finished run directory holds, read back.
struct StoredRun {
  std::filesystem::path dir;
  std::optional<Scenario> scenario;  ///< always set by load_run_directory
  std::string source;                ///< the scenario file the run was planned from (scenario.json "source")
  /// The history's first kReportHistoryEvents events (report_html.h; every event of a run of
  /// normal length): what report.html draws. The judgement reads history.jsonl itself, as a
  /// stream, so a long run is never held whole.
  History history;
  std::size_t history_events = 0;  ///< every event of history.jsonl (history.size() unless a long run)
  RunOverview overview;            ///< the whole history at a glance (report_html.h)
  /// readback.json without its accept log, which is in `log`: read straight into a PackedLog
  /// (packed_log.h), never held as AcceptedWrites (112 bytes each; a long run has tens of millions).
  ReadBack readback;
  PackedLog log;  ///< readback.json's accept log
};

/// Reads scenario.json (through parse_scenario: the plan is validated again), history.jsonl and
/// readback.json. Throws RunFileError naming the first file that is missing or bad (not JSON, a
/// bad event line with its line number, a field of the wrong type, an invalid plan).
[[nodiscard]] StoredRun load_run_directory(const std::filesystem::path& dir);

/// A stored run judged again with today's checkers.
struct Judgement {
  Analysis analysis;
  ExpectationResult expectation;
  ScenarioResult result;  ///< as run_scenario would report it; duration_s = run.start .. run.end
  std::string lock;       ///< the lock name the run used (its first run.start naming one), or ""
};

/// Runs the default checkers with the scenario's context (CheckContext::of) and its expectation
/// over the stored history (read from the run directory's history file as a stream:
/// analyze_history_file, so in memory bounded by what is live, not by events) and read-back. A history whose run.end says "timeout" or
/// "interrupted", or that has no run.end, does not meet its expectation (with that reason), as in
/// the live run. Throws RunFileError when the history file cannot be read again (changed since
/// load_run_directory).
[[nodiscard]] Judgement judge_stored_run(const StoredRun& run);

/// The results table printed at the end of `run` and `report`: one row per scenario (scenario,
/// expectation, verdict, met, anomalies, rejected writes, lease expiries during work, longest
/// pause, duration), then per scenario its reasons, each protocol error's offending line
/// (protocol_error_line_text), "<worker>: black box: judged from the lock service and the
/// resource" for each black-box worker (kBlackBoxNote), and its run directory. Columns fit
/// their content. Pure.
[[nodiscard]] std::string format_results_table(const std::vector<ScenarioResult>& results);

/// One protocol error's offending line for the text reports: "w1's line 7 as received: <line>",
/// the line cut at `max_bytes` (at a UTF-8 boundary, with "…") so that a table stays readable.
/// Pure.
[[nodiscard]] std::string protocol_error_line_text(const ProtocolError& error, std::size_t max_bytes = 200);

/// For `run --repeat N`: one line per repeated scenario, in first-run order, with how many of its
/// runs met the expectation ("3/3") and the count of each verdict. Empty when nothing repeated.
[[nodiscard]] std::string format_repeat_summary(const std::vector<ScenarioResult>& results);

/// The same results as the JSON array `--json` prints (ScenarioResult::to_json() each).
[[nodiscard]] std::string format_results_json(const std::vector<ScenarioResult>& results);

/// Writes report.html and junit.xml (and, when `rewrite_verdict`, verdict.json) for one judged
/// run into its directory. Throws RunFileError naming a file that cannot be written.
void write_run_reports(const StoredRun& run, const Judgement& judgement, bool rewrite_verdict, const std::string& generator);

/// Writes each scenario's report.html and junit.xml into its run directory as the run ends, and
/// collects the suite's JUnit cases for --junit. Use: add it to RunOptions::observers, and call
/// add_result() with every result run_scenario returns (also for runs that never reached
/// on_finish: environment or internal errors). Single-threaded, like the orchestrator's calls.
/// Never throws from the observer hooks: problems are logged and kept in problems().
class ReportObserver final : public RunObserver {
 public:
  ReportObserver();
  void on_start(const Scenario& scenario, const std::filesystem::path& run_dir) override;
  void on_finish(const Scenario& scenario, const ScenarioResult& result, const Analysis& analysis,
                 const RunFigures& figures) override;
  /// Adds the scenario's JUnit case to the suite. When on_finish did not run for this result (the
  /// run failed before it was judged) and its run directory exists, writes junit.xml there and a
  /// report.html from whatever history it has.
  void add_result(const Scenario& scenario, const ScenarioResult& result);
  /// Every case so far; the suite is named after the scenarios' directory when they share one.
  [[nodiscard]] JUnitSuite suite() const;
  /// Report files that could not be written (each names the file).
  [[nodiscard]] const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::map<std::filesystem::path, JUnitCase> finished_;  ///< by run directory, from on_finish
  std::vector<JUnitCase> cases_;
  std::vector<std::string> suite_names_;
  std::vector<std::string> problems_;
  std::time_t started_ = 0;
  std::time_t scenario_started_ = 0;
};

struct ReportCommandOptions {
  std::vector<std::filesystem::path> run_dirs;
  std::filesystem::path junit;  ///< also write the suite's JUnit file here (empty: no)
  bool json = false;            ///< print JSON instead of the table
  /// A window page instead (`--from S --to S`, seconds since the run's first event): one run
  /// directory; its events in [from, to] drawn in full on report-<from>s-<to>s.html in the run
  /// directory, nothing else rewritten. Both or neither; from < to.
  std::optional<double> from_s, to_s;
};

/// `fencecheck report RUN_DIR...`: loads every directory first (a missing or bad file: the error
/// naming it goes to `err`, exit 2, nothing written), then judges each again, rewrites its
/// verdict.json, junit.xml and report.html, prints the table (or JSON) to `out`, and returns the
/// suite's exit code (0 every expectation met, 1 not). A verdict that differs from the stored
/// verdict.json is pointed out on `err`.
[[nodiscard]] int report_command(const ReportCommandOptions& options, std::ostream& out, std::ostream& err);

/// Retention of a run root (`--keep N`, `--keep-nights N`, `--keep-days D`; docs/report-format.md,
/// "Retention"). Its run directories are the directories directly under it (never symlinks such
/// as `latest`) whose name starts with a run's UTC stamp (yyyymmddTHHMMSSZ-) and which contain
/// scenario.json; anything else under the root is never touched.
///  - kRuns: keeps the newest `count` run directories (by stamp, then scenario.json's time, then name).
///  - kNights: keeps the run directories of the newest `count` nights. A night is one invocation
///    of `fencecheck run`: the run directories whose `night` file (night.h) holds the same id; a
///    run directory without one is a night of its own. Newest by the night's newest run.
///  - kDays: keeps every night that began (its oldest run's stamp) less than `count` x 24 h before
///    `now`; older nights are removed.
/// In every mode it also keeps every directory in `protect`, every run still going (another
/// harness holds it: RunDirectory::in_use) and every run whose faults.ledger lists a fault not yet
/// healed (`fencecheck cleanup` needs it); with kNights and kDays such a run keeps its whole night.
/// A night's summary (night-<id>.json) is removed with the last of its run directories.
struct RetentionPolicy {
  enum class Unit { kRuns, kNights, kDays };
  Unit unit = Unit::kRuns;
  std::size_t count = 0;  ///< >= 1
  std::time_t now = 0;    ///< kDays: ages are measured from this UTC time (0: the current time)
};
struct PruneResult {
  std::vector<std::filesystem::path> kept;     ///< newest first
  std::vector<std::filesystem::path> removed;  ///< run directories, oldest first
  std::vector<std::filesystem::path> removed_summaries;  ///< night-<id>.json files removed with their nights
  std::vector<std::string> errors;             ///< directories that could not be removed, why
};
[[nodiscard]] PruneResult prune_run_root(const std::filesystem::path& run_root, const RetentionPolicy& policy,
                                         const std::vector<std::filesystem::path>& protect);
/// prune_run_root with {kRuns, keep}: `--keep N`.
[[nodiscard]] PruneResult prune_run_root(const std::filesystem::path& run_root, std::size_t keep,
                                         const std::vector<std::filesystem::path>& protect);

/// What makes a run prove less than it claims, read from its history alone, so that `fencecheck
/// run` and `fencecheck report` judge alike: one reason per planned fault that never took effect
/// ("faults[0] (sigstop on w1) never fired: its trigger did not happen before the run ended", or
/// "... could not be injected: <why>", from the harness's "not injected" log events), and one per
/// worker that failed (a worker.exit "exit N" with N other than 0 and 1: bad arguments, a signal)
/// or crashed (an exit its own events do not account for: exit 1 without job.gave_up, exit 0
/// without job.done or job.gave_up before the harness asked it to stop; a black box's exit 1:
/// HistoryTally::exit_accounted, docs/worker-protocol.md "How a worker ends"), each with its
/// stderr tail when the worker.exit carries one, and one per fault whose heal did not take
/// effect ("fault not healed, still in effect when the run ended: cpu-throttle on w1: <why>", from
/// the harness's "<kind> on <target> not healed: <why>" log event with no later fault.heal of that
/// kind and target). Empty when none; any makes the expectation not met. Pure; thread-safe.
[[nodiscard]] std::vector<std::string> run_shortfalls(const Scenario& sc, const History& h);

}  // namespace fencecheck::harness
