// fencecheck — did the run show what the scenario expected? (exit code 0 vs 1)
#pragma once

#include <string>
#include <vector>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/scenario.h"

namespace fencecheck::harness {

struct ExpectationResult {
  bool met = false;
  /// One specific sentence per unmet part, e.g. "expected at least 1 rejected write, saw 0".
  /// Empty exactly when met.
  std::vector<std::string> reasons;
};

/// Evaluates scenario.expect() against the analysis:
/// - outcome safe: the combined verdict must be valid (an unknown verdict never counts as safe);
/// - outcome anomaly: every listed anomaly must have been reported (others may be reported too);
/// - min_rejected_writes: Figures::rejected_writes_total() >= it;
/// - min_expiries_during_work: Figures::expiries_during_work.size() >= it;
/// - pause_tolerance: for every worker a process-stopping fault (sigstop, freeze, self-stop)
///   targets, |longest pause - injected| / injected <= tolerance, where injected is the longest
///   actual window of those kinds on that worker from the history (fault.inject/heal), or the
///   planned duration when it was never healed;
/// - progress_after_heal: Figures::progress_after_heal exists (a fault was healed) and
///   made_progress(): nothing was pending after the heal, or a write was accepted within lease
///   TTL + acquire allowance of it. The window comes from the context the analysis was made with.
/// Pure.
[[nodiscard]] ExpectationResult evaluate_expectation(const Scenario& scenario, const Analysis& analysis);

/// The same for an explicit expectation (e.g. an override); the scenario supplies the sigstop
/// faults pause_tolerance compares against. evaluate_expectation(s, a) == evaluate(s.expect(), a, s).
[[nodiscard]] ExpectationResult evaluate(const Expectation& expect, const Analysis& analysis, const Scenario& scenario);

}  // namespace fencecheck::harness
