#include "fencecheck/harness/expectation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "internal.h"

namespace fencecheck::harness {

namespace {

std::string seconds(std::chrono::nanoseconds d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f s", static_cast<double>(d.count()) / 1e9);
  return buf;
}

/// "9.8%": one decimal, for a measured offset.
std::string percent_1(double fraction) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f%%", fraction * 100.0);
  return buf;
}
/// "10%", "12.5%": as short as exact, for a configured tolerance.
std::string percent_g(double fraction) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g%%", fraction * 100.0);
  return buf;
}

std::string plural(std::int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

const CheckerResult* checker_named(const Analysis& a, const std::string& name) {
  for (const auto& r : a.checkers)
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace

ExpectationResult evaluate_expectation(const Scenario& scenario, const Analysis& analysis) {
  return evaluate(scenario.expect(), analysis, scenario);
}

ExpectationResult evaluate(const Expectation& ex, const Analysis& analysis, const Scenario& scenario) {
  std::vector<std::string> reasons;
  const std::vector<std::string>& silent = analysis.black_box_workers;
  auto is_silent = [&](const std::string& w) { return std::binary_search(silent.begin(), silent.end(), w); };

  // A line that broke the worker protocol: whatever else the run showed (an expected anomaly too),
  // what that worker did there is unknown, so the run cannot count as meeting its expectation.
  for (const auto& pe : analysis.protocol_errors) reasons.push_back(protocol_error_reason(pe));

  if (ex.outcome == Outcome::kSafe) {
    if (analysis.verdict == Verdict::kInvalid) {
      const std::size_t before = reasons.size();
      for (const auto& r : analysis.checkers)
        for (const auto& an : r.anomalies)
          reasons.push_back("expected a safe run, but checker " + r.name + " found " + an.name + ": " +
                            an.description);
      if (reasons.size() == before) reasons.push_back("expected a safe run, but the combined verdict is invalid");
    } else if (analysis.verdict == Verdict::kUnknown) {
      // One reason per distinct cause, naming every checker it stopped (several checkers that
      // could not judge the same black-box workers say so once), in the checkers' order.
      std::vector<std::pair<std::string, std::vector<std::string>>> causes;  // error -> checkers
      for (const auto& r : analysis.checkers) {
        if (r.verdict != Verdict::kUnknown) continue;
        // The user accepted this checker's unknown as a known limit (expect.accept_unknown): the
        // verdict stays unknown, the expectation does not fail on it.
        if (std::find(ex.accept_unknown.begin(), ex.accept_unknown.end(), r.name) != ex.accept_unknown.end()) continue;
        const std::string why = r.error.empty() ? "no reason given" : r.error;
        auto it = std::find_if(causes.begin(), causes.end(), [&](const auto& c) { return c.first == why; });
        if (it == causes.end()) causes.push_back({why, {r.name}});
        else it->second.push_back(r.name);
      }
      for (const auto& [why, names] : causes) {
        const std::string who = (names.size() == 1 ? "checker " : "checkers ") + detail::and_list(names);
        reasons.push_back("expected a safe run, but the verdict is unknown: " + who + " could not decide (" + why +
                          "), and an unknown verdict never counts as safe");
      }
      const bool any_unknown = std::any_of(analysis.checkers.begin(), analysis.checkers.end(),
                                           [](const CheckerResult& r) { return r.verdict == Verdict::kUnknown; });
      if (causes.empty() && analysis.protocol_errors.empty() && !any_unknown)
        reasons.push_back("expected a safe run, but the verdict is unknown (no checker ran), and an unknown "
                          "verdict never counts as safe");
    }
  } else {
    for (const auto& name : ex.anomalies) {
      if (!analysis.anomalies_named(name).empty()) continue;
      std::string why = "expected anomaly " + name + ", but no checker reported it";
      if (const CheckerResult* r = checker_named(analysis, name)) {
        if (r->verdict == Verdict::kUnknown)
          why += " (checker " + name + " could not decide: " + (r->error.empty() ? "no reason given" : r->error) + ")";
      } else {
        why += " (no checker named " + name + " ran)";
      }
      reasons.push_back(why);
    }
  }

  const Figures& f = analysis.figures;
  if (ex.min_rejected_writes) {
    const std::int64_t saw = f.rejected_writes_total();
    if (saw < *ex.min_rejected_writes) {
      // A rejection at or above its mark is left out (Figures::rejected_writes_total): say so when
      // there were some, or the raw counts would read as enough.
      auto counted = [](std::int64_t all, std::int64_t unjustified) {
        std::string out = std::to_string(all);
        if (unjustified > 0)
          out += " (" + std::to_string(unjustified) + " at or above the mark: not counted)";
        return out;
      };
      std::string why = "expected at least " + plural(*ex.min_rejected_writes, "rejected write", "rejected writes") +
                        ", saw " + std::to_string(saw) + " (write.fail events: " +
                        counted(f.rejected_writes_history, f.rejected_writes_unjustified_history) +
                        ", the resource's rejections: " +
                        counted(f.rejected_writes_readback, f.rejected_writes_unjustified_readback) + ")";
      if (f.invalid_requests_history > 0)
        why += "; " + plural(f.invalid_requests_history, "write.fail", "write.fails") +
               " without a high_water (invalid requests, not rejections by the fence) not counted";
      if (f.rejected_writes_unjustified_history > 0 || f.rejected_writes_unjustified_readback > 0)
        why += ": a rejection whose token was at or above the key's high-water mark is a broken fence refusing a "
               "write it had to accept (unjustified-rejection), not evidence that fencing works";
      reasons.push_back(why);
    }
  }
  if (ex.min_expiries_during_work) {
    const auto saw = static_cast<std::int64_t>(f.expiries_during_work.size());
    if (saw < *ex.min_expiries_during_work) {
      std::string why = "expected at least " +
                        plural(*ex.min_expiries_during_work, "lease expiry during work", "lease expiries during work") +
                        ", saw " + std::to_string(saw);
      // An expiry is a delete no release.ok explains, of a key an acquire.ok shows held: a black
      // box reports neither, so its expiries cannot be told from its releases.
      if (!silent.empty())
        why += " (" + detail::and_list(silent) + (silent.size() == 1 ? " is a black box" : " are black boxes") +
               ": without their acquire.ok and release.ok events, their leases' expiries cannot be told from "
               "their releases" +
               (f.expiries_undecided > 0
                    ? "; the lock service gave no word for " +
                          plural(f.expiries_undecided, "delete of a holding", "deletes of holdings") +
                          " while one ran, so the figure is not measured"
                    : std::string()) +
               ")";
      reasons.push_back(why);
    }
  }
  if (ex.pause_tolerance) {
    const double tol = *ex.pause_tolerance;
    // Every worker a process-stopping fault targets, in plan order, with the kinds that stop it
    // and its longest planned window.
    std::vector<std::string> targets;
    std::map<std::string, std::chrono::nanoseconds> planned;
    std::map<std::string, std::vector<std::string>> kinds;
    for (const auto& fault : scenario.faults()) {
      if (!stops_process(fault.kind) || fault.member) continue;  // a lock-service member is no worker
      if (!planned.count(fault.target)) targets.push_back(fault.target);
      auto& p = planned[fault.target];
      p = std::max(p, fault.duration);
      auto& k = kinds[fault.target];
      const std::string& name = fault.kind;
      if (std::find(k.begin(), k.end(), name) == k.end()) k.push_back(name);
    }
    for (const auto& w : targets) {
      const auto& k = kinds[w];
      std::string kind_text;
      for (std::size_t i = 0; i < k.size(); ++i) kind_text += (i ? "/" : "") + k[i];
      std::optional<std::chrono::nanoseconds> injected;
      bool seen = false;
      for (const auto& win : f.faults) {
        if (win.target != w || std::find(k.begin(), k.end(), win.fault) == k.end()) continue;
        seen = true;
        auto d = win.actual ? win.actual : win.planned;
        if (d && (!injected || *d > *injected)) injected = d;
      }
      if (!seen) {
        reasons.push_back("the " + kind_text + " fault on " + w + " was planned but never injected, so its pause cannot be " +
                          "compared with the injected duration");
        continue;
      }
      if (!injected) injected = planned[w];
      auto it = f.longest_pause.find(w);
      if (it == f.longest_pause.end()) {
        reasons.push_back(w + " was stopped (" + kind_text + ") for " + seconds(*injected) + " but reported no pause" +
                          (is_silent(w) ? " (it is a black box: it sends no events, so its own measure of the pause "
                                          "is missing)"
                                        : ""));
        continue;
      }
      const auto measured = it->second.duration;
      const double off = injected->count() > 0
                             ? std::fabs(static_cast<double>(measured.count() - injected->count())) /
                                   static_cast<double>(injected->count())
                             : 1.0;
      if (off > tol)
        reasons.push_back(w + "'s longest measured pause " + seconds(measured) + " is " + percent_1(off) +
                          " off the injected " + seconds(*injected) + " (tolerance " + percent_g(tol) + ")");
    }
  }
  if (ex.progress_after_heal) {
    const auto& p = f.progress_after_heal;
    const bool proven = p && p->delay && *p->delay <= p->window;  // a write.ok in the window
    if (!p) {
      reasons.push_back("expected progress after the last heal, but no fault was healed");
    } else if (!proven && !silent.empty()) {
      // Progress is a write.ok (and "pending" a worker's invoke): a black box shows neither.
      reasons.push_back("expected a write accepted within " + seconds(p->window) +
                        " of the last heal, but progress cannot be judged: " + detail::and_list(silent) +
                        (silent.size() == 1 ? " is a black box" : " are black boxes") +
                        " (no write.ok or write.invoke events to show it)");
    } else if (!p->made_progress()) {
      std::string why = "expected a write accepted within " + seconds(p->window) +
                        " of the last heal (lease TTL + one acquire), ";
      if (p->delay)
        why += "but the first one came " + seconds(*p->delay) + " after it";
      else
        why += "but none was accepted after it while workers were still trying";
      reasons.push_back(why);
    }
  }

  ExpectationResult r;
  r.met = reasons.empty();
  r.reasons = std::move(reasons);
  return r;
}

}  // namespace fencecheck::harness
