// fencecheck — the orchestrator: runs one scenario for real and judges it.
//
// For a scenario it: creates the run directory; starts (or connects to) the lock service and
// the fenced store; watches the lock prefix for the lock service's own history (grants, deletes);
// launches the workers (children of the main thread, see child_process.h); reads their JSON-line
// events into one history stamped with the orchestrator's monotonic clock; fires faults and
// delayed starts when their trigger event or time comes; heals every fault on every path; reads
// the resource back; runs the checkers; and writes history.jsonl, readback.json, verdict.json,
// metrics.prom, scenario.json and every process's log into the run directory. While the run goes,
// the checkers' rules that one event can decide (LiveChecker, live_checker.h) are applied to each
// event as it is recorded: an anomaly they find is written to anomalies.live.jsonl at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/live_checker.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/proto/event.h"

namespace fencecheck::harness {

/// The exit codes (docs/architecture.md, "Exit codes"; README, "Exit codes").
enum ExitCode : int {
  kExitMet = 0,          ///< every scenario met its expectation
  kExitNotMet = 1,       ///< at least one did not
  kExitBadInput = 2,     ///< bad scenario or arguments
  kExitEnvironment = 3,  ///< the environment lacks what a scenario needs (etcd, root, a controller)
  kExitInternal = 4,     ///< internal error
};

struct Analysis;
struct RunFigures;
struct ScenarioResult;

/// Watches a run as it happens: live metrics, terminal progress, reports. Every method is called
/// on the orchestrator's main thread, in order; an observer must not block for long (the fault
/// schedule waits on it) and must not throw (exceptions are caught, logged and ignored).
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  /// The run directory exists and the services are about to start.
  virtual void on_start(const Scenario& /*scenario*/, const std::filesystem::path& /*run_dir*/) {}
  /// A phase begins: "services", "workers", "reading back", "checking", "done".
  virtual void on_phase(const Scenario& /*scenario*/, std::string_view /*phase*/) {}
  /// One history entry, as recorded (t_ns set).
  virtual void on_event(const Scenario& /*scenario*/, const Event& /*event*/) {}
  /// An anomaly found while the run goes (LiveChecker, live_checker.h), right after on_event for
  /// the event that proves it. The checkers report it again at the end (on_finish's analysis).
  virtual void on_anomaly(const Scenario& /*scenario*/, const LiveAnomaly& /*anomaly*/) {}
  /// The run is judged; every file of the run directory is written.
  virtual void on_finish(const Scenario& /*scenario*/, const ScenarioResult& /*result*/, const Analysis& /*analysis*/,
                         const RunFigures& /*figures*/) {}
};

struct RunOptions {
  std::filesystem::path run_root = "runs";  ///< run directories are created below it
  std::filesystem::path bin_dir;            ///< where fencecheck-worker and -store are; empty = self_bin_dir()
  bool skip_unavailable = false;            ///< a fault the environment cannot do: skip the scenario, never pass it
  /// Set asynchronously (e.g. by a SIGINT handler) to abort the run; faults are healed first.
  const std::atomic<bool>* interrupted = nullptr;
  /// Observers, called in order (not owned; must outlive the run).
  std::vector<RunObserver*> observers;
  /// `fencecheck run --repeat N`: this run is repetition `repetition` (1-based) of `repetitions`;
  /// copied into the ScenarioResult (its label, JSON and JUnit case name show it).
  int repetition = 1;
  int repetitions = 1;
  /// The id of the `fencecheck run` invocation ("night", night.h) this run belongs to: written to
  /// <run_dir>/night right after the directory is made, so `--keep-nights` keeps or removes a
  /// night's run directories together. Empty: not written.
  std::string night;
  /// What happens to history.jsonl once the run is judged and every observer has seen it
  /// (compress_history(), history.h): kAuto replaces it by history.jsonl.zst when it has at least
  /// kCompressHistoryFromBytes (a long run's; short scenarios keep the plain file people open),
  /// kAlways whatever its size, kNever never. A failure to compress is logged and leaves the plain
  /// file. Every reader of a run directory (fencecheck report, the report page) reads either.
  enum class CompressHistory { kAuto, kAlways, kNever };
  CompressHistory compress_history = CompressHistory::kAuto;
  /// `fencecheck run --keep-data`: keep the embedded services' data directories (remove_service_data())
  /// in the run directory once the run has ended. False (the default): a judged run's (exit 0 or 1)
  /// are removed, since a re-judge (`fencecheck report`, the checkers) reads only history,
  /// read-back, verdict and logs; a run that ended in an error keeps them to look at.
  bool keep_data = false;
};

/// The embedded services' data directories directly under `run_dir`, as the kinds name them:
/// `<service>-data`, `<service>-data-<n>` or `<service>-data.<n>` (etcd-data, etcd-data-2 after a
/// restart on fresh data, redis-data, zookeeper-data, zookeeper-data.1, postgres-data, store-data).
/// Sorted. Never throws (an unreadable directory lists nothing).
[[nodiscard]] std::vector<std::filesystem::path> service_data_dirs(const std::filesystem::path& run_dir);

/// Removes service_data_dirs(run_dir) once a run has ended (every embedded service stopped), and
/// returns how many bytes they held; what could not be removed is logged, not thrown. A smoke run's
/// 62 MB of etcd WAL preallocation is most of its directory (docs/performance.md).
std::uintmax_t remove_service_data(const std::filesystem::path& run_dir);

/// kAuto's threshold: 16 MiB, about 100,000 events at the ~160 bytes an event takes
/// (docs/performance.md); zstd level 1 makes it about 8x smaller.
inline constexpr std::uintmax_t kCompressHistoryFromBytes = 16u * 1024 * 1024;

/// What one scenario run came to. Value type.
struct ScenarioResult {
  std::string scenario;
  std::filesystem::path run_dir;
  std::string expectation;             ///< "safe" or "anomaly: interleaved-segment"
  std::string verdict = "unknown";     ///< combined checker verdict: valid / invalid / unknown
  bool met = false;                    ///< the expectation was met
  bool skipped = false;                ///< not run: the environment lacks something (skip_unavailable)
  int exit_code = kExitInternal;       ///< this scenario's own exit code
  std::vector<std::string> reasons;    ///< why not met / skipped / failed
  std::vector<std::string> anomalies;  ///< names of anomalies found
  std::int64_t rejected_writes = 0;
  std::int64_t expiries_during_work = 0;
  /// False when nothing could count the lease expiries: lock-service kind none has no issuer
  /// history (no lock.delete). The reports then say "not measured", never 0.
  bool expiries_measured = true;
  /// Deletes of a black box's holding the lock service gave no word for (Figures::
  /// expiries_undecided): > 0 makes expiries_measured false, expiries_during_work a lower bound.
  std::int64_t expiries_undecided = 0;
  /// The run's longest pause, seconds, and who measured it (longest_pause_source); nullopt when
  /// nothing measured one: no worker that measures its own pauses ran and no process-stopping fault
  /// hit a worker (shown as "not measured", never as 0). See summarize_analysis().
  std::optional<double> longest_pause_s;
  /// "holder" (a worker's own ticker: its pause events; the reference worker always measures, so
  /// its 0 is a measured 0) or "harness" (the window, inject to heal, of a sigstop / freeze /
  /// self-stop the harness applied to a worker that measured nothing itself); "" when not measured.
  std::string longest_pause_source;
  double duration_s = 0;
  /// Workers that sent no worker-protocol event (Analysis::black_box_workers), sorted: the
  /// reports say each was judged from the lock service and the resource (kBlackBoxNote).
  std::vector<std::string> black_box_workers;
  /// IgnoredRows::summary() of the read-back's rows of keys the run did not write (dropped before
  /// the checkers, issue 34): "ignored 3 rows of 1 key the run did not write: us-2"; "" when none.
  std::string ignored;
  /// Lines that broke the worker protocol (Analysis::protocol_errors): the reports show each with
  /// the offending line; each is also one of `reasons`.
  std::vector<ProtocolError> protocol_errors;
  int repetition = 1;   ///< which run of `--repeat N` this was (1-based)
  int repetitions = 1;  ///< N of `--repeat N` (1 without it)
  /// The scenario's name, and " #i/N" when it ran more than once (--repeat): the table's and
  /// the JUnit case's name.
  [[nodiscard]] std::string label() const;
  nlohmann::json to_json() const;
};

/// Runs one scenario. Never throws: failures of the harness itself come back with exit_code 4
/// (internal) or 3 (environment) and a reason. Not thread-safe: one run at a time per process
/// (it owns child processes and signal-driven healing).
[[nodiscard]] ScenarioResult run_scenario(const Scenario& scenario, const RunOptions& options);

/// Fills the judged part of a result from its analysis: verdict, the anomalies' names (sorted,
/// each once), rejected writes, lease expiries during work (measured only when the scenario's lock
/// service has an issuer history: not under kind none), the longest pause and its source, the
/// black-box workers and the protocol errors.
/// The longest pause (issue 31 item 6: never a zero that looks measured) is, per worker of the
/// scenario: its own longest `pause` event when it sent any, or 0 when it is the reference worker
/// (no `command`: its ticker always runs), both "holder"; otherwise the longest window of a
/// process-stopping fault (stops_process: sigstop, freeze, self-stop) the harness applied to it,
/// "harness"; otherwise nothing. The result is the largest of those (a holder's figure wins a
/// tie), or nullopt when there is none.
/// The one definition shared by the live run and `fencecheck report`. Pure.
void summarize_analysis(ScenarioResult& result, const Analysis& analysis, const Scenario& scenario);

/// The longest pause as the reports print it: "6.00 s (holder)", "6.00 s (harness: fault window)",
/// or "not measured". Pure.
[[nodiscard]] std::string longest_pause_text(const ScenarioResult& result);

/// The lease-expiries-during-work figure for people: "3"; "not measured (no issuer history)" for
/// lock-service kind none; "not measured: at least 1, 2 undecided (...)" when the lock service gave
/// no word for a black box's deletes. Pure.
[[nodiscard]] std::string expiries_text(const ScenarioResult& result);

/// "safe" or "anomaly: interleaved-segment" (the table's and ScenarioResult's spelling). Pure.
[[nodiscard]] std::string expectation_text(const Expectation& expect);

/// The exit code for a suite: the worst of its scenarios' (4 > 3 > 2 > 1 > 0, skipped counts 0
/// only with --skip-unavailable).
[[nodiscard]] int suite_exit_code(const std::vector<ScenarioResult>& results);

}  // namespace fencecheck::harness
