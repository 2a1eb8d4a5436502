#include "fencecheck/harness/analysis.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "fencecheck/harness/checkers.h"
#include "internal.h"

namespace fencecheck::harness {

namespace {

using IndexList = std::vector<std::size_t>;
using detail::ViewMap;
using detail::ViewTokenHash;

}  // namespace

bool delete_is_expiry(const Event& d, bool explained_by_release) {
  // The issuer's own word first, where it tells (zookeeper: its server's "Expiring session" line).
  // An expiry stays one whatever release the holder reported later: a release that found its key
  // already gone still reports release.ok with that key and token, and a delete without a
  // revision is matched to releases by (lock_key, token) alone.
  if (d.detail == "expired") return true;
  if (d.detail == "released") return false;
  return !explained_by_release;
}

namespace {

std::vector<LeaseExpiry> find_expiries(const History& h, const HistoryIndex& index) {
  boost::unordered_flat_set<std::int64_t> release_revisions;
  // (lock_key, token), for deletes without a revision
  boost::unordered_flat_set<std::pair<std::string_view, std::int64_t>, ViewTokenHash> released_keys;
  for (std::size_t i : index.of({EventKind::kReleaseOk})) {
    const Event& e = h[i];
    if (e.revision) release_revisions.insert(*e.revision);
    if (!e.lock_key.empty() && e.token) released_keys.insert({e.lock_key, *e.token});
  }
  // (lock_key, token) -> the earliest release.invoke. Without revisions (redis) a release.ok
  // cannot say whether it deleted anything: a holder that comes back after its key expired
  // releases "nothing" with the same lock key and token. A release explains a delete only when it
  // was asked for before the delete was seen.
  boost::unordered_flat_map<std::pair<std::string_view, std::int64_t>, std::size_t, ViewTokenHash> release_invoked;
  for (std::size_t i : index.of({EventKind::kReleaseInvoke})) {
    const Event& e = h[i];
    if (!e.lock_key.empty() && e.token) release_invoked.try_emplace({e.lock_key, *e.token}, i);
  }
  auto released_before = [&](const Event& d, std::size_t at) {
    const std::pair<std::string_view, std::int64_t> k{d.lock_key, *d.token};
    if (released_keys.count(k) == 0) return false;
    const auto r = release_invoked.find(k);
    if (r == release_invoked.end()) return true;  // a worker that reports no release.invoke
    const Event& asked = h[r->second];
    // The sender's own stamp (the same CLOCK_MONOTONIC as the watch's t_ns): the two come over
    // different channels. History order when it has none.
    return asked.src_ns > 0 ? asked.src_ns <= d.t_ns : r->second < at;
  };
  // The same map for the expiry test below: an unlock whose reply was lost (no release.ok, a
  // one-way partition) still ended its holder's work with that token.
  const auto& release_asked = release_invoked;

  // Indexes built in one pass, so that each delete looks only at its own lock key's and its
  // holder's events (a scan of the whole history per delete made long histories quadratic).
  // job.done events per (worker, token), and per worker those without a token, ascending.
  ViewMap<IndexList> acquires_by_key, grants_by_key, untokened_done_by_source;
  boost::unordered_flat_map<std::pair<std::string_view, std::int64_t>, std::size_t, ViewTokenHash> first_done;
  for (std::size_t j : index.of({EventKind::kAcquireOk, EventKind::kLockGrant, EventKind::kJobDone})) {
    const Event& e = h[j];
    if (e.kind == EventKind::kAcquireOk) acquires_by_key[e.lock_key].push_back(j);
    else if (e.kind == EventKind::kLockGrant) grants_by_key[e.lock_key].push_back(j);
    else if (e.kind == EventKind::kJobDone && e.token) first_done.try_emplace({e.source, *e.token}, j);
    else if (e.kind == EventKind::kJobDone) untokened_done_by_source[e.source].push_back(j);
  }
  const IndexList none;
  auto of = [&](const ViewMap<IndexList>& map, std::string_view name) -> const IndexList& {
    const auto it = map.find(name);
    return it == map.end() ? none : it->second;
  };

  std::vector<LeaseExpiry> out;
  for (std::size_t i : index.of({EventKind::kLockDelete})) {
    const Event& d = h[i];
    if (d.lock_key.empty()) continue;
    const bool released = d.revision ? release_revisions.count(*d.revision) > 0 : (d.token && released_before(d, i));
    if (!delete_is_expiry(d, released)) continue;

    // The holder: the acquire.ok for this lock key (and token, when the delete has one); the
    // latest before the delete, else any.
    std::optional<std::size_t> acquire;
    for (std::size_t j : of(acquires_by_key, d.lock_key)) {
      const Event& a = h[j];
      if (d.token && a.token != d.token) continue;
      if (!acquire || j < i) acquire = j;
    }
    if (!acquire) continue;  // nobody we know held it: cannot be attributed to a worker's work
    const Event& a = h[*acquire];
    const std::int64_t token = d.token ? *d.token : a.token.value_or(0);

    // Done when the holder emitted job.done before the delete: for that token, or (a job.done
    // without a token) after its acquire.
    bool done = false;
    if (auto f = first_done.find(std::pair<std::string_view, std::int64_t>{a.source, token}); f != first_done.end())
      done = f->second < i;
    if (!done) {
      const IndexList& untokened = of(untokened_done_by_source, a.source);
      const auto after = std::upper_bound(untokened.begin(), untokened.end(), *acquire);
      done = after != untokened.end() && *after < i;
    }
    // Or it had asked for the release: its release.invoke was sent before the lock service's
    // delete was seen (the sender's own stamp, on the same CLOCK_MONOTONIC, since the two come
    // over different channels; history order when it has none).
    if (auto r = release_asked.find(std::pair<std::string_view, std::int64_t>{d.lock_key, token}); r != release_asked.end()) {
      const Event& asked = h[r->second];
      done = done || (asked.src_ns > 0 ? asked.src_ns <= d.t_ns : r->second < i);
    }
    if (done) continue;

    LeaseExpiry x;
    x.worker = a.source;
    x.lock = !a.lock.empty() ? a.lock : d.lock;
    x.lock_key = d.lock_key;
    x.token = token;
    x.lease_id = a.lease_id ? a.lease_id : d.lease_id;
    x.revision = d.revision;
    x.t_ns = d.t_ns;
    x.evidence.push_back(*acquire);
    for (std::size_t j : of(grants_by_key, d.lock_key)) {
      const Event& g = h[j];
      if (!g.token || g.token == token) {
        x.evidence.push_back(j);
        break;
      }
    }
    x.evidence.push_back(i);
    std::sort(x.evidence.begin(), x.evidence.end());
    out.push_back(std::move(x));
  }
  return out;
}

std::vector<UnknownOutcome> find_unknown_outcomes(const History& h, const HistoryIndex& index, const ReadBack& rb,
                                                  const CheckContext& context) {
  using R = UnknownOutcome::Resolution;
  const resources::Evidence ev = context.evidence.value_or(resources::Evidence{});
  const bool has_log = ev.accept_log && (context.evidence || !rb.log.empty());
  std::vector<UnknownOutcome> out;
  for (std::size_t i : index.of({EventKind::kWriteInfo})) {
    const Event& e = h[i];
    UnknownOutcome u{i, e.source, e.key, e.segment, e.chunk, e.token, R::kUnresolved, std::nullopt, {}};
    const std::string tok = e.token ? std::to_string(*e.token) : std::string("?");
    const std::string effect_suffix = ".effect";
    const bool effect = e.key.size() > effect_suffix.size() &&
                        e.key.compare(e.key.size() - effect_suffix.size(), effect_suffix.size(), effect_suffix) == 0;
    if (effect && e.segment) {
      // The worker's effect id is "seg<N>"; a client may prefix its name ("w1:seg2").
      const std::string base = e.key.substr(0, e.key.size() - effect_suffix.size());
      const std::string id = "seg" + std::to_string(*e.segment);
      const EffectRecord* found = nullptr;
      for (const auto& r : rb.effects)
        if (r.key == base && r.client == e.source && e.token && r.token == *e.token &&
            (r.id == id || r.id == e.source + ":" + id))
          found = &r;
      if (found && found->applied) {
        u.resolution = R::kApplied;
        u.seq = found->seq;
        u.note = "the resource applied effect " + id + " (seq " + std::to_string(found->seq) + ") although " + e.source +
                 " never learned it did";
      } else if (found) {
        u.resolution = R::kNotApplied;
        u.note = "the resource recorded effect " + id + " but did not apply it (refused by the fence, or a duplicate)";
      } else if (ev.effects && !rb.effects.empty()) {
        u.resolution = R::kNotApplied;
        u.note = "the resource has no record of effect " + id + " with token " + tok + ": the request never reached it";
      } else {
        u.note = "the read-back lists no side effects: cannot tell";
      }
    } else if (e.segment && e.chunk && *e.chunk >= 0 && e.token) {
      auto same = [&](const auto& w) {
        return w.client == e.source && w.key == e.key && w.segment == *e.segment && w.chunk == *e.chunk && w.token == *e.token;
      };
      const std::string what = "segment " + std::to_string(*e.segment) + " chunk " + std::to_string(*e.chunk) + " with token " + tok;
      const AcceptedWrite* logged = nullptr;
      for (const auto& w : rb.log)
        if (same(w)) {
          logged = &w;
          break;
        }
      const StoredChunk* slot = nullptr;
      for (const auto& c : rb.chunks)
        if (same(c)) slot = &c;
      const RejectedWrite* refused = nullptr;
      for (const auto& r : rb.rejections)
        if (same(r)) refused = &r;
      if (logged || slot) {
        u.resolution = R::kApplied;
        u.seq = logged ? logged->seq : slot->seq;
        u.note = "the resource accepted " + what + " (seq " + std::to_string(*u.seq) + ") although " + e.source +
                 " never learned it did";
      } else if (refused) {
        u.resolution = R::kRejected;
        u.note = "the resource refused " + what + " (high-water mark " + std::to_string(refused->high_water) + ")";
      } else if (has_log && ev.rejections) {
        u.resolution = R::kNotApplied;
        u.note = "the resource neither accepted nor refused " + what + ": the request never reached it";
      } else {
        u.note = "the resource keeps no accept log and the slot holds another write: cannot tell whether " + what +
                 " was applied";
      }
    } else {
      u.note = e.key.empty() ? std::string("not a resource write: cannot tell")
                             : "a counter increment: the counter's figure counts it as unknown";
    }
    out.push_back(std::move(u));
  }
  return out;
}

std::vector<FaultWindow> find_faults(const History& h, const HistoryIndex& index) {
  std::vector<FaultWindow> out;
  std::set<std::size_t> used_heals;
  for (std::size_t i : index.of({EventKind::kFaultInject})) {
    const Event& in = h[i];
    FaultWindow w;
    w.fault = in.fault;
    w.target = in.target;
    if (in.duration_ns) w.planned = std::chrono::nanoseconds(*in.duration_ns);
    w.inject_index = i;
    w.inject_t_ns = in.t_ns;
    for (std::size_t j = i + 1; j < h.size(); ++j) {
      const Event& he = h[j];
      if (he.kind != EventKind::kFaultHeal || he.fault != in.fault || he.target != in.target || used_heals.count(j))
        continue;
      used_heals.insert(j);
      w.heal_index = j;
      w.heal_t_ns = he.t_ns;
      w.actual = std::chrono::nanoseconds(he.duration_ns ? *he.duration_ns : he.t_ns - in.t_ns);
      break;
    }
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace

namespace {

std::optional<ProgressAfterHeal> find_progress(const History& h, const HistoryIndex& index, const CheckContext& context) {
  const auto heal = detail::last_heal(index);
  if (!heal) return std::nullopt;
  ProgressAfterHeal p;
  p.heal_index = *heal;
  p.heal_t_ns = h[*heal].t_ns;
  p.window = detail::lease_ttl_of(h, index, context).value_or(std::chrono::nanoseconds(0)) + context.acquire_allowance;
  for (std::size_t i = *heal + 1; i < h.size(); ++i) {
    const EventKind kind = index.kind(i);  // the column: only a write.ok's time is read
    if (kind == EventKind::kWriteInvoke || kind == EventKind::kAcquireInvoke || kind == EventKind::kAcquireFail)
      p.pending = true;
    if (kind == EventKind::kWriteOk && !p.first_write_ok) {
      p.first_write_ok = i;
      p.delay = std::chrono::nanoseconds(h[i].t_ns - p.heal_t_ns);
    }
  }
  return p;
}

}  // namespace

Figures compute_figures(const History& history, const ReadBack& readback) {
  return compute_figures(history, readback, CheckContext{});
}

Figures compute_figures(const History& history, const ReadBack& readback, const CheckContext& context) {
  Figures f;
  const detail::IndexRef index(history, context);
  f.expiries_during_work = find_expiries(history, *index);

  for (std::size_t i : index->of({EventKind::kPause})) {
    const Event& e = history[i];
    if (!e.duration_ns) continue;
    PauseObservation p{e.source, std::chrono::nanoseconds(*e.duration_ns), e.token, i, e.t_ns};
    auto it = f.longest_pause.find(e.source);
    if (it == f.longest_pause.end() || p.duration > it->second.duration) f.longest_pause[e.source] = p;
    f.pauses.push_back(std::move(p));
  }

  std::map<std::pair<std::string, std::string>, RejectedWriteCount> rejected;
  auto slot = [&](const std::string& key, const std::string& client) -> RejectedWriteCount& {
    RejectedWriteCount& r = rejected[{key, client}];
    r.key = key;
    r.client = client;
    return r;
  };
  for (std::size_t i : index->of({EventKind::kWriteFail})) {
    const Event& e = history[i];
    ++slot(e.key, e.source).history;
    ++f.rejected_writes_history;
  }
  for (const RejectedWrite& r : readback.rejections) {
    ++slot(r.key, r.client).readback;
    ++f.rejected_writes_readback;
  }
  for (auto& [id, r] : rejected) f.rejected_writes.push_back(std::move(r));

  f.faults = find_faults(history, *index);

  f.rejections_per_token = detail::rejections_per_token(history, *index, readback);
  for (const auto& r : f.rejections_per_token) f.max_rejections_per_token = std::max(f.max_rejections_per_token, r.count());
  for (const auto& e : readback.effects)
    if (e.applied) ++f.effects_applied;
  for (const auto& d : detail::effect_duplicates(readback)) {
    f.duplicate_effects += static_cast<std::int64_t>(d.duplicates.size());
    f.duplicate_effects_by_key[d.key] += static_cast<std::int64_t>(d.duplicates.size());
  }
  f.counters = detail::counter_figures(history, *index, readback);
  // Chunk-less write.oks are counter increments only when the resource keeps counters (or the job
  // is a counter job); otherwise they are not counters at all.
  if (readback.counters.empty() && context.job_kind != JobKind::kCounter) f.counters.clear();
  f.progress_after_heal = find_progress(history, *index, context);
  f.unknown_outcomes = find_unknown_outcomes(history, *index, readback, context);
  return f;
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

  auto keep = [&](std::size_t i) {
    if (i < history.size()) a.evidence_events.emplace(i, history[i]);
  };
  for (const auto& r : a.checkers)
    for (const auto& an : r.anomalies)
      for (std::size_t i : an.evidence) keep(i);
  for (const auto& x : a.figures.expiries_during_work)
    for (std::size_t i : x.evidence) keep(i);
  for (const auto& p : a.figures.pauses) keep(p.index);
  for (const auto& u : a.figures.unknown_outcomes) keep(u.index);
  for (const auto& w : a.figures.faults) {
    keep(w.inject_index);
    if (w.heal_index) keep(*w.heal_index);
  }
  if (const auto& p = a.figures.progress_after_heal) {
    keep(p->heal_index);
    if (p->first_write_ok) keep(*p->first_write_ok);
  }
  for (const auto& pe : a.protocol_errors) keep(pe.index);
  return a;
}

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
