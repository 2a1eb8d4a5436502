#include "fencecheck/harness/checker.h"

#include <algorithm>
#include <exception>

namespace fencecheck::harness {

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kValid:
      return "valid";
    case Verdict::kInvalid:
      return "invalid";
    case Verdict::kUnknown:
      return "unknown";
  }
  return "unknown";
}

std::optional<Verdict> verdict_from_name(std::string_view name) {
  for (Verdict v : {Verdict::kValid, Verdict::kInvalid, Verdict::kUnknown})
    if (verdict_name(v) == name) return v;
  return std::nullopt;
}

int severity(Verdict v) {
  switch (v) {
    case Verdict::kValid:
      return 0;
    case Verdict::kUnknown:
      return 1;
    case Verdict::kInvalid:
      return 2;
  }
  return 1;
}

Verdict combine(Verdict a, Verdict b) { return severity(a) >= severity(b) ? a : b; }

namespace {
template <typename T>
void sort_unique(std::vector<T>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}
}  // namespace

void normalize(Anomaly& a) {
  sort_unique(a.tokens);
  sort_unique(a.clients);
  sort_unique(a.evidence);
  sort_unique(a.readback_seqs);
}

CheckContext CheckContext::of(const Scenario& scenario) {
  CheckContext c;
  c.lease_ttl = scenario.lease_ttl();
  c.lock = scenario.lock_service().lock;
  c.job_kind = scenario.job().kind;
  return c;
}

CheckRun run_checkers(const Checkers& checkers, const History& history, const ReadBack& readback) {
  return run_checkers(checkers, history, readback, CheckContext{});
}

CheckRun run_checkers(const Checkers& checkers, const History& history, const ReadBack& readback,
                      const CheckContext& context) {
  CheckRun run;
  for (const auto& checker : checkers) {
    if (!checker) continue;
    CheckerResult r;
    try {
      r.name = std::string(checker->name());
      r = checker->check_with(history, readback, context);
      if (r.name.empty()) r.name = std::string(checker->name());
    } catch (const std::exception& e) {
      r.verdict = Verdict::kUnknown;
      r.anomalies.clear();
      r.error = e.what();
      if (r.error.empty()) r.error = "the checker threw an exception without a message";
    } catch (...) {
      r.verdict = Verdict::kUnknown;
      r.anomalies.clear();
      r.error = "the checker threw a non-standard exception";
    }
    for (auto& a : r.anomalies) normalize(a);
    run.results.push_back(std::move(r));
  }
  std::stable_sort(run.results.begin(), run.results.end(), [](const CheckerResult& a, const CheckerResult& b) {
    return severity(a.verdict) > severity(b.verdict);
  });
  if (run.results.empty()) {
    run.verdict = Verdict::kUnknown;
  } else {
    run.verdict = Verdict::kValid;
    for (const auto& r : run.results) run.verdict = combine(run.verdict, r.verdict);
  }
  return run;
}

}  // namespace fencecheck::harness
