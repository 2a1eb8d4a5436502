#include "fencecheck/harness/verdict_json.h"

namespace fencecheck::harness {

namespace {

template <typename T>
nlohmann::json opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json opt_ns(const std::optional<std::chrono::nanoseconds>& v) {
  return v ? nlohmann::json(v->count()) : nlohmann::json(nullptr);
}

nlohmann::json indexed_event(std::size_t index, const Event& e) {
  nlohmann::json j = nlohmann::json::object();
  j["index"] = index;
  j.update(fencecheck::to_json(e));
  return j;
}

}  // namespace

nlohmann::json to_json(const Anomaly& a, const std::map<std::size_t, Event>& events) {
  nlohmann::json j;
  j["name"] = a.name;
  j["description"] = a.description;
  j["key"] = a.key;
  j["segment"] = opt(a.segment);
  j["tokens"] = a.tokens;
  j["clients"] = a.clients;
  j["evidence"] = a.evidence;
  j["readback_seqs"] = a.readback_seqs;
  auto& copies = j["evidence_events"] = nlohmann::json::array();
  for (std::size_t i : a.evidence)
    if (auto it = events.find(i); it != events.end()) copies.push_back(indexed_event(i, it->second));
  return j;
}

nlohmann::json to_json(const Figures& f) {
  nlohmann::json j;
  j["lease_expiries_during_work"] = f.expiries_during_work.size();
  j["lease_expiries_undecided"] = f.expiries_undecided;
  auto& ex = j["expiries_during_work"] = nlohmann::json::array();
  for (const auto& x : f.expiries_during_work)
    ex.push_back({{"worker", x.worker},
                  {"lock", x.lock},
                  {"lock_key", x.lock_key},
                  {"token", x.token},
                  {"lease_id", opt(x.lease_id)},
                  {"revision", opt(x.revision)},
                  {"t_ns", x.t_ns},
                  {"evidence", x.evidence}});
  auto& pauses = j["pauses"] = nlohmann::json::array();
  for (const auto& p : f.pauses)
    pauses.push_back({{"worker", p.worker},
                      {"duration_ns", p.duration.count()},
                      {"token", opt(p.token)},
                      {"index", p.index},
                      {"t_ns", p.t_ns}});
  auto& longest = j["longest_pause_ns"] = nlohmann::json::object();
  for (const auto& [w, p] : f.longest_pause) longest[w] = p.duration.count();
  j["rejected_writes_total"] = f.rejected_writes_total();
  j["rejected_writes_history"] = f.rejected_writes_history;
  j["invalid_requests_history"] = f.invalid_requests_history;
  j["rejected_writes_readback"] = f.rejected_writes_readback;
  j["rejected_writes_unjustified_history"] = f.rejected_writes_unjustified_history;
  j["rejected_writes_unjustified_readback"] = f.rejected_writes_unjustified_readback;
  auto& rej = j["rejected_writes"] = nlohmann::json::array();
  for (const auto& r : f.rejected_writes)
    rej.push_back({{"key", r.key}, {"client", r.client}, {"history", r.history}, {"readback", r.readback}});
  auto& faults = j["faults"] = nlohmann::json::array();
  for (const auto& w : f.faults)
    faults.push_back({{"fault", w.fault},
                      {"target", w.target},
                      {"planned_ns", opt_ns(w.planned)},
                      {"actual_ns", opt_ns(w.actual)},
                      {"inject_index", w.inject_index},
                      {"heal_index", opt(w.heal_index)},
                      {"inject_t_ns", w.inject_t_ns},
                      {"heal_t_ns", opt(w.heal_t_ns)}});
  auto& per_token = j["rejections_per_token"] = nlohmann::json::array();
  for (const auto& r : f.rejections_per_token)
    per_token.push_back(
        {{"client", r.client}, {"token", r.token}, {"history", r.history}, {"readback", r.readback}, {"count", r.count()}});
  j["max_rejections_per_token"] = f.max_rejections_per_token;
  j["effects_applied"] = f.effects_applied;
  j["duplicate_effects"] = f.duplicate_effects;
  auto& counters = j["counters"] = nlohmann::json::array();
  for (const auto& c : f.counters)
    counters.push_back({{"key", c.key},
                        {"expected", c.acknowledged},
                        {"unknown", c.unknown},
                        {"actual", opt(c.actual)}});
  auto& unknown = j["unknown_outcomes"] = nlohmann::json::array();
  for (const auto& u : f.unknown_outcomes)
    unknown.push_back({{"index", u.index},
                       {"worker", u.worker},
                       {"key", u.key},
                       {"segment", opt(u.segment)},
                       {"chunk", opt(u.chunk)},
                       {"token", opt(u.token)},
                       {"resolution", std::string(resolution_name(u.resolution))},
                       {"seq", opt(u.seq)},
                       {"note", u.note}});
  if (const auto& p = f.progress_after_heal)
    j["progress_after_heal"] = {{"heal_index", p->heal_index},
                                {"heal_t_ns", p->heal_t_ns},
                                {"window_ns", p->window.count()},
                                {"pending", p->pending},
                                {"first_write_ok", opt(p->first_write_ok)},
                                {"delay_ns", opt_ns(p->delay)},
                                {"made_progress", p->made_progress()}};
  else
    j["progress_after_heal"] = nullptr;
  return j;
}

nlohmann::json verdict_to_json(const Analysis& analysis, const ExpectationResult& expectation,
                               const History& history) {
  Analysis copy = analysis;
  auto keep = [&](std::size_t i) {
    if (i < history.size()) copy.evidence_events.emplace(i, history[i]);
  };
  for (const auto& r : copy.checkers)
    for (const auto& an : r.anomalies)
      for (std::size_t i : an.evidence) keep(i);
  for (const auto& x : copy.figures.expiries_during_work)
    for (std::size_t i : x.evidence) keep(i);
  for (const auto& p : copy.figures.pauses) keep(p.index);
  for (const auto& u : copy.figures.unknown_outcomes) keep(u.index);
  for (const auto& w : copy.figures.faults) {
    keep(w.inject_index);
    if (w.heal_index) keep(*w.heal_index);
  }
  if (const auto& p = copy.figures.progress_after_heal) {
    keep(p->heal_index);
    if (p->first_write_ok) keep(*p->first_write_ok);
  }
  for (const auto& pe : copy.protocol_errors) keep(pe.index);
  nlohmann::json j = to_json(copy, expectation);
  // The lock name the run actually used (the orchestrator's run.start carries it).
  for (const Event& e : history)
    if (e.kind == EventKind::kRunStart && !e.lock.empty()) {
      j["lock"] = e.lock;
      break;
    }
  return j;
}

nlohmann::json verdict_to_json(const Analysis& analysis, const ExpectationResult& expectation, std::string_view lock) {
  nlohmann::json j = to_json(analysis, expectation);
  if (!lock.empty()) j["lock"] = std::string(lock);
  return j;
}

nlohmann::json to_json(const Analysis& a, const ExpectationResult& e) {
  nlohmann::json j;
  j["schema_version"] = kVerdictSchemaVersion;
  j["verdict"] = std::string(verdict_name(a.verdict));
  j["expectation"] = {{"met", e.met}, {"reasons", e.reasons}};
  j["black_box_workers"] = a.black_box_workers;
  auto& protocol = j["protocol_errors"] = nlohmann::json::array();
  for (const auto& pe : a.protocol_errors)
    protocol.push_back({{"worker", pe.worker},
                        {"line_no", opt(pe.line_no)},
                        {"detail", pe.detail},
                        {"line", pe.line},
                        {"index", pe.index},
                        {"reason", protocol_error_reason(pe)}});
  auto& checkers = j["checkers"] = nlohmann::json::array();
  for (const auto& r : a.checkers) {
    nlohmann::json c{{"name", r.name}, {"verdict", std::string(verdict_name(r.verdict))}, {"error", r.error},
                     {"evidence", r.evidence}};
    auto& anomalies = c["anomalies"] = nlohmann::json::array();
    for (const auto& an : r.anomalies) anomalies.push_back(to_json(an, a.evidence_events));
    checkers.push_back(std::move(c));
  }
  j["figures"] = to_json(a.figures);
  // Rows of keys the run did not write: dropped before the checkers, counted here (issue 34).
  if (!a.ignored.empty()) {
    nlohmann::json ignored = to_json(a.ignored);
    ignored["rows"] = a.ignored.rows();
    ignored["summary"] = a.ignored.summary();
    j["ignored"] = std::move(ignored);
  }
  auto& events = j["evidence_events"] = nlohmann::json::array();
  for (const auto& [i, ev] : a.evidence_events) events.push_back(indexed_event(i, ev));
  return j;
}

}  // namespace fencecheck::harness
