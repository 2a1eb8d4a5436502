#include "fencecheck/harness/checker.h"

#include "fencecheck/harness/stream_check.h"

#include <algorithm>
#include <exception>
#include <string>
#include <string_view>

#include "internal.h"

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
  c.lock_service_kind = scenario.lock_service().kind;
  c.payload = scenario.job().payload;
  for (const auto& w : scenario.workers()) c.workers.push_back(w.id);
  if (const auto* kind = resources::find_resource_kind(scenario.resource().kind))
    c.evidence = kind->evidence(scenario.resource().config);
  return c;
}

bool is_worker_protocol_event(const Event& e) {
  // Compared as views: a length test settles most (a worker's "w12" is no service's name).
  using namespace std::string_view_literals;
  const std::string_view source = e.source;
  return is_worker_event(e.kind) && source != "harness"sv && source != "lock"sv && source != "resource"sv;
}

BlackBoxTracker::BlackBoxTracker(const std::vector<std::string>& workers) : silent_(workers) {
  std::sort(silent_.begin(), silent_.end());
  silent_.erase(std::unique(silent_.begin(), silent_.end()), silent_.end());
}

void BlackBoxTracker::observe(const Event& e) {
  auto drop = [&](const std::string& id) {
    const auto it = std::lower_bound(silent_.begin(), silent_.end(), id);
    if (it != silent_.end() && *it == id) silent_.erase(it);
  };
  if (is_worker_event(e.kind)) {
    // Each event that speaks for a worker removes it (in a run where everyone speaks, within the
    // first few events).
    if (is_worker_protocol_event(e)) {
      worker_events_ = true;
      drop(e.source);
    }
  } else if (e.kind == EventKind::kLog && e.source == "harness" && e.detail.rfind(e.target + " never started", 0) == 0) {
    // A worker that never ran (its start_after trigger never came: the harness logs "<id> never
    // started: ...") did nothing to judge: not a black box.
    drop(e.target);
  }
}

std::vector<std::string> black_box_workers(const History& history, const std::vector<std::string>& workers,
                                           const HistoryIndex* index) {
  BlackBoxTracker tracker(workers);
  // Visits only the kinds the rule reads (through the kind column when the index fits the
  // history), while someone is still silent.
  const bool indexed = index != nullptr && index->matches(history);
  for (std::size_t i = 0; i < history.size() && !tracker.settled(); ++i) {
    const EventKind k = indexed ? index->kind(i) : history[i].kind;
    if (is_worker_event(k) || k == EventKind::kLog) tracker.observe(history[i]);
  }
  return tracker.silent();
}

std::vector<std::string> black_box_workers(const History& history, const CheckContext& context) {
  if (context.black_box) return *context.black_box;
  return black_box_workers(history, context.workers, context.index.get());
}

std::string detail::and_list(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? " and " : ", ";
    out += items[i];
  }
  return out;
}

EvidenceUse Checker::evidence_use() const { return detail::evidence_use_of(name()); }

EvidenceUse detail::evidence_use_of(std::string_view name) {
  // What each checker reads (checkers.h says how); `required`: what it cannot decide without;
  // `black_box_from`: what judges a worker that sent no events (docs/architecture.md, "Black-box
  // workers and protocol errors"; empty: it needs the workers' own events).
  // stale-write-accepted needs no accept log: without one it judges from the workers' events alone
  // (a write.ok invoked after a higher token's write.ok completed, or acknowledged with a mark
  // above its own token), which proves every anomaly it reports but cannot see a stale write
  // whose acknowledgement was lost, nor any write of a black-box worker.
  struct Row {
    std::string_view name;
    EvidenceUse use;
  };
  static const std::vector<Row> kTable{
      {"interleaved-segment", {{kEvidenceChunks, kEvidenceLog, kEvidenceWorkerEvents}, {kEvidenceChunks}, {kEvidenceChunks}}},
      {"corrupt-chunk", {{kEvidenceChunks, kEvidenceWorkerEvents}, {kEvidenceChunks}, {kEvidenceChunks}, true}},
      {"stale-write-accepted", {{kEvidenceLog, kEvidenceWorkerEvents}, {}, {kEvidenceLog}}},
      {"cross-key-rejection",
       {{kEvidenceWorkerEvents, kEvidenceRejections, kEvidenceLog}, {}, {kEvidenceRejections, kEvidenceLog}}},
      {"rejection-storm", {{kEvidenceWorkerEvents, kEvidenceRejections}, {}, {kEvidenceRejections}}},
      {"foreign-release", {{kEvidenceWorkerEvents, kEvidenceLockService}, {}, {}}},
      {"token-regression",
       {{kEvidenceWorkerEvents, kEvidenceLockService, kEvidenceHighWater}, {}, {kEvidenceLockService}}},
      {"fenced-out", {{kEvidenceWorkerEvents, kEvidenceHistory}, {}, {}}},
      {"duplicate-effect", {{kEvidenceEffects, kEvidenceWorkerEvents}, {}, {kEvidenceEffects}}},
      {"counter-drift", {{kEvidenceEffects, kEvidenceWorkerEvents}, {}, {}}},
      {"lost-acknowledged-write", {{kEvidenceChunks, kEvidenceLog, kEvidenceWorkerEvents}, {kEvidenceChunks}, {}}},
      // unaccounted-write judges a black-box worker's writes through the lock service's grants
      // itself (unknown when they cannot tie them), and says unknown itself without log and chunks.
      {"unaccounted-write",
       {{kEvidenceLog, kEvidenceChunks, kEvidenceWorkerEvents, kEvidenceLockService}, {}, {kEvidenceLockService}}},
      {"unjustified-rejection",
       {{kEvidenceWorkerEvents, kEvidenceRejections, kEvidenceLog}, {}, {kEvidenceRejections}}},
      {"ungranted-holding", {{kEvidenceWorkerEvents, kEvidenceLockService}, {kEvidenceLockService}, {}}},
  };
  for (const auto& row : kTable)
    if (row.name == name) return row.use;
  return {{kEvidenceWorkerEvents, kEvidenceHistory}, {}, {}};
}

namespace {

/// Whether the resource gives `source`; worker-events when `worker_events` (some worker event is
/// in the history); lock-service unless the lock service is kind none; history always counts.
bool available(std::string_view source, const CheckContext& context, bool worker_events = true) {
  if (source == kEvidenceWorkerEvents) return worker_events;
  if (source == kEvidenceLockService) return context.lock_service_kind != kNoLockService;
  if (!context.evidence) return true;
  const resources::Evidence& e = *context.evidence;
  if (source == kEvidenceChunks) return e.chunks;
  if (source == kEvidenceLog) return e.accept_log;
  if (source == kEvidenceRejections) return e.rejections;
  if (source == kEvidenceHighWater) return e.high_water;
  if (source == kEvidenceEffects) return e.effects;
  return true;
}

/// Why a checker that cannot judge the black-box workers `silent` is not valid. `missing`: the
/// sources of its black_box_from the resource does not give ("" when it needs worker events).
std::string black_box_error(const std::vector<std::string>& silent, const std::string& missing,
                            const CheckContext& context) {
  const std::string who = detail::and_list(silent);
  const bool one = silent.size() == 1;
  std::string why = who + (one ? " sent" : " each sent") + " no worker-protocol events (" +
                    (one ? "a black box" : "black boxes") + ")";
  if (missing.empty())
    why += ", and this checker judges from the workers' own events (worker-events), so " + who +
           (one ? " was" : " were") + " not judged";
  else
    why += ", and resource kind " + (context.resource_kind.empty() ? std::string("?") : context.resource_kind) +
           " does not give " + missing + ", from which this checker would judge " + (one ? "it" : "them");
  return why + ": unknown, never valid";
}

}  // namespace

std::optional<CheckerResult> detail::unavailable_required(std::string_view name, const EvidenceUse& use,
                                                         const CheckContext& context) {
  // The bytes are the system's own (job.payload: opaque): a rule about fencecheck's chunk format
  // has nothing to judge, which must read neither as a violation nor as a pass.
  if (use.needs_chunk_bytes && context.payload == PayloadMode::kOpaque) {
    CheckerResult r;
    r.name = std::string(name);
    r.verdict = Verdict::kUnknown;
    r.error = std::string(kOpaquePayloadReason);
    return r;
  }
  std::string missing;
  for (auto source : use.required)
    if (!available(source, context)) missing += (missing.empty() ? "" : ", ") + std::string(source);
  if (missing.empty()) return std::nullopt;
  CheckerResult r;
  r.name = std::string(name);
  r.verdict = Verdict::kUnknown;
  r.error = "needs " + missing + ", which resource kind " +
            (context.resource_kind.empty() ? std::string("?") : context.resource_kind) +
            " does not give as configured: not checked";
  return r;
}

void detail::settle_result(CheckerResult& r, const EvidenceUse& use, const CheckContext& context, bool worker_events) {
  for (auto& a : r.anomalies) normalize(a);
  // No issuer history (lock-service kind none): a checker that reads it saw only the silence of a
  // lock service that was not there, which is no evidence of anything.
  // Its own reason for an unknown (no grant seen) is this, too: the root cause is named instead.
  if (r.verdict != Verdict::kInvalid && !available(kEvidenceLockService, context) &&
      std::find(use.reads.begin(), use.reads.end(), kEvidenceLockService) != use.reads.end()) {
    r.verdict = Verdict::kUnknown;
    r.error = std::string(kNoIssuerHistory);
  }
  // Black-box workers: valid only when the checker judges them from sources that are there.
  if (r.verdict == Verdict::kValid && context.black_box && !context.black_box->empty()) {
    std::string lacking;
    for (auto source : use.black_box_from)
      if (!available(source, context, worker_events)) lacking += (lacking.empty() ? "" : ", ") + std::string(source);
    if (use.black_box_from.empty() || !lacking.empty()) {
      r.verdict = Verdict::kUnknown;
      r.error = black_box_error(*context.black_box, lacking, context);
    }
  }
  for (auto source : use.reads)
    if (available(source, context, worker_events)) r.evidence.emplace_back(source);
}

void detail::order_results(CheckRun& run) {
  std::stable_sort(run.results.begin(), run.results.end(), [](const CheckerResult& a, const CheckerResult& b) {
    return severity(a.verdict) > severity(b.verdict);
  });
  if (run.results.empty()) {
    run.verdict = Verdict::kUnknown;
  } else {
    run.verdict = Verdict::kValid;
    for (const auto& r : run.results) run.verdict = combine(run.verdict, r.verdict);
  }
}

CheckRun run_checkers(const Checkers& checkers, const History& history, const ReadBack& readback) {
  return run_checkers(checkers, history, readback, CheckContext{});
}

CheckRun run_checkers(const Checkers& checkers, const History& history, const ReadBack& readback,
                      const CheckContext& context) {
  CheckRun run;
  // Who sent nothing, decided once for every checker (and for analyze()).
  CheckContext ctx = context;
  if (!ctx.black_box) ctx.black_box = black_box_workers(history, ctx.workers, ctx.index.get());
  run.black_box_workers = *ctx.black_box;
  // Whether the workers' own events are there at all: the kind column when the index fits, else a
  // scan that stops at the first one.
  bool worker_events = false;
  if (ctx.index && ctx.index->matches(history)) {
    for (std::size_t i = 0; i < ctx.index->size() && !worker_events; ++i)
      worker_events = is_worker_event(ctx.index->kind(i)) && is_worker_protocol_event(history[i]);
  } else {
    worker_events = std::any_of(history.begin(), history.end(), is_worker_protocol_event);
  }
  for (const auto& checker : checkers) {
    if (!checker) continue;
    const EvidenceUse use = checker->evidence_use();
    CheckerResult r;
    if (auto not_run = detail::unavailable_required(checker->name(), use, ctx)) {
      run.results.push_back(std::move(*not_run));
      continue;
    }
    try {
      r.name = std::string(checker->name());
      r = checker->check_with(history, readback, ctx);
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
    detail::settle_result(r, use, ctx, worker_events);
    run.results.push_back(std::move(r));
  }
  detail::order_results(run);
  return run;
}

}  // namespace fencecheck::harness
