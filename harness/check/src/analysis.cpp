#include "fencecheck/harness/analysis.h"

#include <algorithm>
#include <map>

#include "fencecheck/harness/checkers.h"
#include "internal.h"

namespace fencecheck::harness {

bool delete_is_expiry(const Event& d, bool explained_by_release) {
  // The issuer's own word first, where it tells (zookeeper: its server's "Expiring session" line).
  // An expiry stays one whatever release the holder reported later: a release that found its key
  // already gone still reports release.ok with that key and token, and a delete without a
  // revision is matched to releases by (lock_key, token) alone.
  if (d.detail == "expired") return true;
  if (d.detail == "released") return false;
  return !explained_by_release;
}

Figures compute_figures(const History& history, const ReadBack& readback) {
  return compute_figures(history, readback, CheckContext{});
}

Figures compute_figures(const History& history, const ReadBack& readback, const CheckContext& context) {
  // As a history read from its file is judged (stream/figures.cpp): a second pass only for the
  // lease expiries' candidates.
  const PackedLog log(readback.log);
  FigureStream figures(readback, log, context);
  for (std::size_t i = 0; i < history.size(); ++i) figures.observe(i, history[i]);
  if (figures.wants_second_pass()) {
    figures.begin_second_pass();
    for (std::size_t i = 0; i < history.size(); ++i) figures.observe(i, history[i]);
  }
  return figures.finish();
}

std::map<std::string, std::chrono::nanoseconds> longest_stops(const std::vector<FaultWindow>& faults) {
  std::map<std::string, std::chrono::nanoseconds> out;
  for (const auto& f : faults) {
    const auto d = f.actual ? f.actual : f.planned;
    // A lock-service member's stop (issue 35: target "lock-service") pauses no worker.
    if (!stops_process(f.fault) || !d || f.target == kLockServiceTarget) continue;
    auto [it, fresh] = out.try_emplace(f.target, *d);
    if (!fresh) it->second = std::max(it->second, *d);
  }
  return out;
}

std::string_view resolution_name(UnknownOutcome::Resolution r) {
  switch (r) {
    case UnknownOutcome::Resolution::kApplied: return "applied";
    case UnknownOutcome::Resolution::kRejected: return "rejected";
    case UnknownOutcome::Resolution::kNotApplied: return "not-applied";
    case UnknownOutcome::Resolution::kUnresolved: return "unresolved";
  }
  return "unresolved";
}

std::vector<const Anomaly*> Analysis::anomalies_named(std::string_view name) const {
  std::vector<const Anomaly*> out;
  for (const auto& r : checkers)
    for (const auto& a : r.anomalies)
      if (a.name == name) out.push_back(&a);
  return out;
}

std::size_t Analysis::anomaly_count() const {
  std::size_t n = 0;
  for (const auto& r : checkers) n += r.anomalies.size();
  return n;
}

Analysis analyze(const History& history, const ReadBack& readback, const Checkers& checkers) {
  return analyze(history, readback, checkers, CheckContext{});
}

Analysis analyze(const History& history, const ReadBack& readback, const CheckContext& context) {
  return analyze(history, readback, default_checkers(), context);
}

Analysis analyze(const History& history, const ReadBack& readback, const Checkers& checkers,
                 const CheckContext& context) {
  Analysis a;
  // One index of the history for every checker and the figures (history_index.h).
  CheckContext shared = context;
  if (!shared.index || !shared.index->matches(history)) shared.index = std::make_shared<const HistoryIndex>(history);
  CheckRun run = run_checkers(checkers, history, readback, shared);
  a.verdict = run.verdict;
  a.checkers = std::move(run.results);
  a.black_box_workers = std::move(run.black_box_workers);
  shared.black_box = a.black_box_workers;
  a.figures = compute_figures(history, readback, shared);
  // A line that broke the worker protocol: what the worker did there is unknown, so the run can
  // never be judged valid (an anomaly proven from the rest stays invalid).
  a.protocol_errors = protocol_errors(history);
  if (!a.protocol_errors.empty()) a.verdict = combine(a.verdict, Verdict::kUnknown);
  a.ignored = readback.ignored;

  for (std::size_t i : detail::evidence_indices(a))
    if (i < history.size()) a.evidence_events.emplace(i, history[i]);
  return a;
}

namespace detail {

std::vector<std::size_t> evidence_indices(const Analysis& a) {
  std::vector<std::size_t> out;
  for (const auto& r : a.checkers)
    for (const auto& an : r.anomalies) out.insert(out.end(), an.evidence.begin(), an.evidence.end());
  for (const auto& x : a.figures.expiries_during_work) out.insert(out.end(), x.evidence.begin(), x.evidence.end());
  for (const auto& p : a.figures.pauses) out.push_back(p.index);
  for (const auto& u : a.figures.unknown_outcomes) out.push_back(u.index);
  for (const auto& w : a.figures.faults) {
    out.push_back(w.inject_index);
    if (w.heal_index) out.push_back(*w.heal_index);
  }
  if (const auto& p = a.figures.progress_after_heal) {
    out.push_back(p->heal_index);
    if (p->first_write_ok) out.push_back(*p->first_write_ok);
  }
  for (const auto& pe : a.protocol_errors) out.push_back(pe.index);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace detail

std::vector<ProtocolError> protocol_errors(const History& history) {
  std::vector<ProtocolError> out;
  for (std::size_t i = 0; i < history.size(); ++i) {
    const Event& e = history[i];
    if (e.kind != EventKind::kProtocolError) continue;
    out.push_back(ProtocolError{e.target, e.line_no, e.detail, e.line, i});
  }
  return out;
}

std::string protocol_error_reason(const ProtocolError& pe) {
  const std::string who = pe.worker.empty() ? std::string("a worker") : pe.worker;
  std::string s = who + "'s event" + (pe.line_no ? " line " + std::to_string(*pe.line_no) : std::string()) +
                  " broke the worker protocol";
  // The detail names the worker and the line as well ("w1 line 7: write.ok has no field
  // 'token'"): keep only the problem when its first "<...>: " part says no more than that.
  std::string problem = pe.detail;
  if (const auto colon = problem.find(": "); colon != std::string::npos) {
    const std::string head = problem.substr(0, colon);
    const bool names_worker = !pe.worker.empty() && head.find(pe.worker) != std::string::npos;
    const bool names_line = pe.line_no && head.find(std::to_string(*pe.line_no)) != std::string::npos;
    if (names_worker && names_line && head.size() <= pe.worker.size() + 32) problem = problem.substr(colon + 2);
  }
  if (!problem.empty()) s += ": " + problem;
  return s + " \xE2\x80\x94 the run cannot be judged safe";
}

Analysis analyze(const History& history, const ReadBack& readback) {
  return analyze(history, readback, default_checkers());
}

}  // namespace fencecheck::harness
