// fencecheck — live progress at the terminal while `fencecheck run` goes.
//
// One status line, redrawn in place (carriage return + "erase line") a few times a second:
//   [1/2] sigstop-past-lease  workers  4.2s / ~8.4s  w1 stopped (sigstop)  rejected 0  | w2 acquired token 3
// i.e. scenario i of N, the orchestrator's phase, elapsed against the expected duration
// (expected_duration(); "timeout in" once the run is past it), active faults, rejected writes so
// far, "ANOMALIES n" once anomalies were found while the run goes (RunObserver::on_anomaly), and
// the latest notable event. When a scenario ends the line is replaced by a permanent one:
//   [1/2] sigstop-past-lease: met (valid) 8.3s  runs/20261130T113319Z-sigstop-past-lease/report.html
// Only for a terminal: `ProgressObserver::for_terminal()` is disabled unless stderr is a TTY, and a
// disabled observer writes nothing at all (CI logs stay clean; stdout carries only results).
//
// Log lines written to the same terminal while the status line is up would tear it: wrap_sink()
// returns a spdlog sink that erases the status line, writes the log line, and redraws it.
//
// Thread-safety: the RunObserver hooks are called on the orchestrator's thread; the observer also
// runs its own refresh thread; set_position(), status_line() and the wrapped sink may be called
// from any thread. Everything shares one mutex.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>

#include "fencecheck/harness/orchestrator.h"
#include "fencecheck/harness/scenario.h"

namespace spdlog::sinks {
class sink;
}

namespace fencecheck::harness {

/// A rough expectation of a scenario's wall time, for the progress line only: ~1 s for starting
/// etcd and the store, plus the longer of (a) every worker doing its job one after another
/// (workers x segments x chunks x chunk_interval) and (b) the latest fault window's end (its `at`,
/// or for an event trigger count x chunk_interval) plus one more job (the resumed holder starts
/// over). Never more than the scenario's timeout. Pure.
[[nodiscard]] Duration expected_duration(const Scenario& scenario);

class ProgressObserver final : public RunObserver {
 public:
  struct Options {
    int fd = 2;             ///< where to draw (stderr)
    bool enabled = true;    ///< false: write nothing, ever
    int width = 0;          ///< line width; 0: the terminal's (TIOCGWINSZ), else 100
    std::chrono::milliseconds refresh{250};  ///< redraw period while a scenario runs (elapsed time)
  };

  explicit ProgressObserver(Options options);
  /// Enabled exactly when stderr is a terminal.
  [[nodiscard]] static std::unique_ptr<ProgressObserver> for_terminal();
  /// Stops the refresh thread and erases a status line still shown.
  ~ProgressObserver() override;
  ProgressObserver(const ProgressObserver&) = delete;
  ProgressObserver& operator=(const ProgressObserver&) = delete;

  [[nodiscard]] bool enabled() const;
  /// The next scenario is number `index` (1-based) of `total`.
  void set_position(std::size_t index, std::size_t total);

  void on_start(const Scenario& scenario, const std::filesystem::path& run_dir) override;
  void on_phase(const Scenario& scenario, std::string_view phase) override;
  void on_event(const Scenario& scenario, const Event& event) override;
  void on_anomaly(const Scenario& scenario, const LiveAnomaly& anomaly) override;
  void on_finish(const Scenario& scenario, const ScenarioResult& result, const Analysis& analysis,
                 const RunFigures& figures) override;

  /// Call with every result run_scenario returns: a scenario that ended without on_finish (the
  /// harness failed before judging it) gets its permanent line with the reason. Idempotent.
  void scenario_done(const ScenarioResult& result);

  /// The status line as it would be drawn now (without control characters; "" when no scenario
  /// is running).
  [[nodiscard]] std::string status_line() const;

  /// A sink that forwards to `inner` and keeps the status line intact around each log line. Safe
  /// to keep after this observer is destroyed (it then only forwards).
  [[nodiscard]] std::shared_ptr<spdlog::sinks::sink> wrap_sink(std::shared_ptr<spdlog::sinks::sink> inner);

  struct State;  ///< shared with wrapped sinks (implementation detail)

 private:
  std::shared_ptr<State> state_;
  std::jthread ticker_;
};

}  // namespace fencecheck::harness
