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
/// - protocol errors (Analysis::protocol_errors): each is a reason of its own, whatever the
///   outcome expected (an expected anomaly found does not make up for it): "w1's event line 7
///   broke the worker protocol: <problem> — the run cannot be judged safe" (protocol_error_reason);
/// - outcome safe: the combined verdict must be valid (an unknown verdict never counts as safe;
///   one reason per distinct cause, naming every checker it left undecided), except that an
///   unknown from a checker listed in expect.accept_unknown is no reason (the verdict stays
///   unknown; the user accepted that checker's limit for this system under test);
/// - outcome anomaly: every listed anomaly must have been reported (others may be reported too);
/// - min_rejected_writes: Figures::rejected_writes_total() >= it;
/// - min_expiries_during_work: Figures::expiries_during_work.size() >= it (the reason says when
///   black-box workers' expiries could not be counted);
/// - pause_tolerance: for every worker a process-stopping fault (sigstop, freeze, self-stop)
///   targets, |longest pause - injected| / injected <= tolerance, where injected is the longest
///   actual window of those kinds on that worker from the history (fault.inject/heal), or the
///   planned duration when it was never healed;
/// - progress_after_heal: Figures::progress_after_heal exists (a fault was healed) and
///   made_progress(): nothing was pending after the heal, or a write was accepted within lease
///   TTL + acquire allowance of it. The window comes from the context the analysis was made with.
///   With black-box workers only an accepted write within the window meets it ("nothing pending"
///   cannot be known of a worker that reports nothing).
/// Pure.
[[nodiscard]] ExpectationResult evaluate_expectation(const Scenario& scenario, const Analysis& analysis);

/// The same for an explicit expectation (e.g. an override); the scenario supplies the sigstop
/// faults pause_tolerance compares against. evaluate_expectation(s, a) == evaluate(s.expect(), a, s).
[[nodiscard]] ExpectationResult evaluate(const Expectation& expect, const Analysis& analysis, const Scenario& scenario);

}  // namespace fencecheck::harness
