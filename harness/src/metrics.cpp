#include "fencecheck/harness/metrics.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <stdexcept>

#include <prometheus/text_serializer.h>

namespace fencecheck::harness {
namespace {
using prometheus::Labels;
}  // namespace

RunFigures run_figures(const Scenario& sc, const std::string& lock, const History& history, const ReadBack& rb,
                       const Analysis& a, bool passed, double duration_s, double timestamp_s) {
  RunFigures f;
  f.scenario = sc.name();
  f.resource = sc.resource().kind;
  f.lock = lock;
  f.lease_ttl_s = static_cast<double>(sc.lease_ttl().count()) / 1000.0;
  for (const auto& rw : a.figures.rejected_writes)
    f.rejected_writes[{rw.key, rw.client}] = std::max(rw.history, rw.readback);
  for (const auto& x : a.figures.expiries_during_work) ++f.expiries_during_work[{x.lock.empty() ? lock : x.lock, x.worker}];
  for (const auto& p : a.figures.pauses) f.pauses_s.emplace_back(p.worker, std::chrono::duration<double>(p.duration).count());
  for (const auto& w : a.figures.faults) ++f.faults_injected[w.fault];
  f.high_water = rb.high_water;
  std::int64_t issued = 0;
  for (const auto& e : history) {
    if ((e.kind == EventKind::kLockGrant || e.kind == EventKind::kAcquireOk) && e.token) issued = std::max(issued, *e.token);
    if (e.kind == EventKind::kWriteInvoke && e.token) f.token_staleness.push_back(std::max<std::int64_t>(0, issued - *e.token));
  }
  f.issuer_token = issued;
  f.duplicate_effects = a.figures.duplicate_effects_by_key;
  for (const auto& c : a.checkers)
    for (const auto& an : c.anomalies) ++f.anomalies[an.name];
  f.passed = passed;
  f.duration_s = duration_s;
  f.timestamp_s = timestamp_s;
  return f;
}

std::vector<double> pause_buckets(double ttl) {
  if (ttl <= 0) ttl = 1;
  return {0.1 * ttl, 0.25 * ttl, 0.5 * ttl, ttl, 1.5 * ttl, 2 * ttl, 3 * ttl, 5 * ttl, 10 * ttl};
}

std::vector<double> staleness_buckets() { return {0, 1, 2, 5, 10, 100, 1000}; }

MetricFamilies::MetricFamilies(prometheus::Registry& reg)
    : rejected_writes_(prometheus::BuildCounter()
                           .Name("fencecheck_rejected_writes_total")
                           .Help("Writes the fenced resource rejected because their token was below its high-water mark")
                           .Register(reg)),
      expiries_(prometheus::BuildCounter()
                    .Name("fencecheck_lease_expiries_during_work_total")
                    .Help("Leases the lock service expired while their holder's job was still in progress")
                    .Register(reg)),
      pause_(prometheus::BuildHistogram()
                 .Name("fencecheck_holder_pause_seconds")
                 .Help("Pauses measured by the holder itself (a monotonic ticker's gaps), seconds; buckets are "
                       "fractions and multiples of the lease TTL")
                 .Register(reg)),
      ttl_(prometheus::BuildGauge().Name("fencecheck_lease_ttl_seconds").Help("The lease TTL the holders asked for, seconds").Register(reg)),
      faults_(prometheus::BuildCounter().Name("fencecheck_faults_injected_total").Help("Faults injected, by kind").Register(reg)),
      high_water_(prometheus::BuildGauge()
                      .Name("fencecheck_high_water_token")
                      .Help("The resource's high-water mark (highest accepted fencing token) per key")
                      .Register(reg)),
      issuer_(prometheus::BuildGauge()
                  .Name("fencecheck_issuer_token")
                  .Help("The highest fencing token the lock service granted")
                  .Register(reg)),
      staleness_(prometheus::BuildHistogram()
                     .Name("fencecheck_token_staleness")
                     .Help("Per write: the highest token issued so far minus the token the write presented")
                     .Register(reg)),
      duplicates_(prometheus::BuildCounter()
                      .Name("fencecheck_duplicate_effects_total")
                      .Help("Effects applied more than once, per job (the resource key it writes)")
                      .Register(reg)),
      anomalies_(prometheus::BuildCounter().Name("fencecheck_anomalies_total").Help("Anomalies the checkers found, by name").Register(reg)),
      passed_(prometheus::BuildGauge().Name("fencecheck_scenario_passed").Help("1 when the scenario met its expectation, else 0").Register(reg)),
      duration_(prometheus::BuildGauge().Name("fencecheck_scenario_duration_seconds").Help("Wall time of the scenario run, seconds").Register(reg)),
      timestamp_(prometheus::BuildGauge()
                     .Name("fencecheck_last_run_timestamp_seconds")
                     .Help("Unix time the scenario run ended, seconds")
                     .Register(reg)) {}

prometheus::Counter& MetricFamilies::rejected_writes(const std::string& scenario, const std::string& resource,
                                                     const std::string& key, const std::string& client) {
  return rejected_writes_.Add(Labels{{"scenario", scenario}, {"resource", resource}, {"key", key}, {"client", client}});
}
prometheus::Counter& MetricFamilies::expiries_during_work(const std::string& scenario, const std::string& lock,
                                                          const std::string& worker) {
  return expiries_.Add(Labels{{"scenario", scenario}, {"lock", lock}, {"worker", worker}});
}
prometheus::Histogram& MetricFamilies::holder_pause(const std::string& scenario, const std::string& worker,
                                                    double lease_ttl_s) {
  return pause_.Add(Labels{{"scenario", scenario}, {"worker", worker}}, pause_buckets(lease_ttl_s));
}
prometheus::Gauge& MetricFamilies::lease_ttl(const std::string& scenario) { return ttl_.Add(Labels{{"scenario", scenario}}); }
prometheus::Counter& MetricFamilies::faults_injected(const std::string& scenario, const std::string& kind) {
  return faults_.Add(Labels{{"scenario", scenario}, {"kind", kind}});
}
prometheus::Gauge& MetricFamilies::high_water(const std::string& scenario, const std::string& resource,
                                              const std::string& key) {
  return high_water_.Add(Labels{{"scenario", scenario}, {"resource", resource}, {"key", key}});
}
prometheus::Gauge& MetricFamilies::issuer_token(const std::string& scenario, const std::string& lock) {
  return issuer_.Add(Labels{{"scenario", scenario}, {"lock", lock}});
}
prometheus::Histogram& MetricFamilies::token_staleness(const std::string& scenario) {
  return staleness_.Add(Labels{{"scenario", scenario}}, staleness_buckets());
}
prometheus::Counter& MetricFamilies::duplicate_effects(const std::string& scenario, const std::string& resource,
                                                       const std::string& key) {
  return duplicates_.Add(Labels{{"scenario", scenario}, {"resource", resource}, {"key", key}});
}
prometheus::Counter& MetricFamilies::anomalies(const std::string& scenario, const std::string& anomaly) {
  return anomalies_.Add(Labels{{"scenario", scenario}, {"anomaly", anomaly}});
}
prometheus::Gauge& MetricFamilies::scenario_passed(const std::string& scenario) {
  return passed_.Add(Labels{{"scenario", scenario}});
}
prometheus::Gauge& MetricFamilies::scenario_duration(const std::string& scenario) {
  return duration_.Add(Labels{{"scenario", scenario}});
}
prometheus::Gauge& MetricFamilies::last_run_timestamp(const std::string& scenario) {
  return timestamp_.Add(Labels{{"scenario", scenario}});
}

std::shared_ptr<prometheus::Registry> build_registry(const RunFigures& f) {
  auto reg = std::make_shared<prometheus::Registry>();
  MetricFamilies m(*reg);
  const std::string& sc = f.scenario;
  auto d = [](std::int64_t n) { return static_cast<double>(n); };

  for (const auto& [kc, n] : f.rejected_writes) m.rejected_writes(sc, f.resource, kc.first, kc.second).Increment(d(n));
  for (const auto& [lw, n] : f.expiries_during_work) m.expiries_during_work(sc, lw.first, lw.second).Increment(d(n));
  for (const auto& [w, s] : f.pauses_s) m.holder_pause(sc, w, f.lease_ttl_s).Observe(s);
  m.lease_ttl(sc).Set(f.lease_ttl_s);
  for (const auto& [kind, n] : f.faults_injected) m.faults_injected(sc, kind).Increment(d(n));
  for (const auto& [key, t] : f.high_water) m.high_water(sc, f.resource, key).Set(d(t));
  m.issuer_token(sc, f.lock).Set(d(f.issuer_token));
  auto& stale = m.token_staleness(sc);
  for (auto s : f.token_staleness) stale.Observe(d(s));
  for (const auto& [key, t] : f.high_water) m.duplicate_effects(sc, f.resource, key);  // 0 until reported
  for (const auto& [key, n] : f.duplicate_effects) m.duplicate_effects(sc, f.resource, key).Increment(d(n));
  for (const auto& [name, n] : f.anomalies) m.anomalies(sc, name).Increment(d(n));
  m.scenario_passed(sc).Set(f.passed ? 1 : 0);
  m.scenario_duration(sc).Set(f.duration_s);
  m.last_run_timestamp(sc).Set(f.timestamp_s);
  return reg;
}

std::string render_metrics(const RunFigures& f) {
  return prometheus::TextSerializer().Serialize(build_registry(f)->Collect());
}

void write_metrics_file(const std::filesystem::path& path, const RunFigures& figures) {
  const auto tmp = path.parent_path() / ("." + path.filename().string() + ".tmp");
  {
    std::ofstream out(tmp);
    out << render_metrics(figures);
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw std::runtime_error("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
}

}  // namespace fencecheck::harness
