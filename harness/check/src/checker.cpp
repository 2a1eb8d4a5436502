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
  c.resource_kind = scenario.resource().kind;
  if (const auto* kind = resources::find_resource_kind(scenario.resource().kind))
    c.evidence = kind->evidence(scenario.resource().config);
  return c;
}

EvidenceUse Checker::evidence_use() const {
  // What each checker reads (checkers.h says how); `required`: what it cannot decide without.
  // stale-write-accepted needs no accept log: without one it judges from the history alone (a
  // write.ok invoked after a higher token's write.ok completed, or acknowledged with a mark above
  // its own token), which proves every anomaly it reports but cannot see a stale write whose
  // acknowledgement was lost.
  struct Row {
    std::string_view name;
    EvidenceUse use;
  };
  static const std::vector<Row> kTable{
      {"interleaved-segment", {{kEvidenceChunks, kEvidenceHistory}, {kEvidenceChunks}}},
      {"corrupt-chunk", {{kEvidenceChunks}, {kEvidenceChunks}}},
      {"stale-write-accepted", {{kEvidenceLog, kEvidenceHistory}, {}}},
      {"cross-key-rejection", {{kEvidenceHistory, kEvidenceRejections, kEvidenceLog}, {}}},
      {"rejection-storm", {{kEvidenceHistory, kEvidenceRejections}, {}}},
      {"foreign-release", {{kEvidenceHistory, kEvidenceLockService}, {}}},
      {"token-regression", {{kEvidenceHistory, kEvidenceLockService, kEvidenceHighWater}, {}}},
      {"fenced-out", {{kEvidenceHistory}, {}}},
      {"duplicate-effect", {{kEvidenceEffects, kEvidenceHistory}, {}}},
      {"counter-drift", {{kEvidenceEffects, kEvidenceHistory}, {}}},
      {"lost-acknowledged-write", {{kEvidenceChunks, kEvidenceLog, kEvidenceHistory}, {kEvidenceChunks}}},
  };
  for (const auto& row : kTable)
    if (row.name == name()) return row.use;
  return {{kEvidenceHistory}, {}};
}

namespace {

/// Whether the resource gives `source` (history and lock-service sources always count).
bool available(std::string_view source, const CheckContext& context) {
  if (!context.evidence) return true;
  const resources::Evidence& e = *context.evidence;
  if (source == kEvidenceChunks) return e.chunks;
  if (source == kEvidenceLog) return e.accept_log;
  if (source == kEvidenceRejections) return e.rejections;
  if (source == kEvidenceHighWater) return e.high_water;
  if (source == kEvidenceEffects) return e.effects;
  return true;
}

}  // namespace

CheckRun run_checkers(const Checkers& checkers, const History& history, const ReadBack& readback) {
  return run_checkers(checkers, history, readback, CheckContext{});
}

CheckRun run_checkers(const Checkers& checkers, const History& history, const ReadBack& readback,
                      const CheckContext& context) {
  CheckRun run;
  for (const auto& checker : checkers) {
    if (!checker) continue;
    CheckerResult r;
    const EvidenceUse use = checker->evidence_use();
    std::string missing;
    for (auto source : use.required)
      if (!available(source, context)) missing += (missing.empty() ? "" : ", ") + std::string(source);
    if (!missing.empty()) {
      r.name = std::string(checker->name());
      r.verdict = Verdict::kUnknown;
      r.error = "needs " + missing + ", which resource kind " +
                (context.resource_kind.empty() ? std::string("?") : context.resource_kind) +
                " does not give as configured: not checked";
      run.results.push_back(std::move(r));
      continue;
    }
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
    for (auto source : use.reads)
      if (available(source, context)) r.evidence.emplace_back(source);
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
