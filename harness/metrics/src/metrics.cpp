#include "fencecheck/harness/metrics.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <fstream>
#include <map>
#include <stdexcept>

#include <prometheus/text_serializer.h>

namespace fencecheck::harness {
namespace {
using prometheus::Labels;

/// 10^(k/per_decade) rounded to three significant digits, computed as an integer over a power of
/// ten so that the double is the nearest one to the decimal. prometheus-cpp prints 16 significant
/// digits, and a few such doubles do not print as their decimal (0.0642 is 0.06419999999999999):
/// those are moved up to the next three-digit value that does (0.0643), so every le reads as
/// written and is spelled as the Pushgateway (shortest form) spells it.
double three_digits(int k, int per_decade) {
  const double x = std::pow(10.0, static_cast<double>(k) / per_decade);
  const int exponent = static_cast<int>(std::floor(std::log10(x))) - 2;
  for (double mantissa = std::round(x / std::pow(10.0, exponent));; mantissa += 1) {
    const double v = exponent >= 0 ? mantissa * std::pow(10.0, exponent) : mantissa / std::pow(10.0, -exponent);
    std::array<char, 32> sixteen{};
    std::array<char, 32> three{};
    std::snprintf(sixteen.data(), sixteen.size(), "%.16g", v);
    std::snprintf(three.data(), three.size(), "%.3g", v);
    if (std::string_view(sixteen.data()) == std::string_view(three.data())) return v;
  }
}

std::vector<double> make_pause_buckets() {
  constexpr int kPerDecade = 26;  // ratio 10^(1/26) = 1.093; after rounding 1.09..1.10
  std::vector<double> out;
  for (int k = -34; k <= 55; ++k) out.push_back(three_digits(k, kPerDecade));  // 0.0492 .. 130
  return out;
}
}  // namespace

std::string_view to_string(MetricsSource source) {
  switch (source) {
    case MetricsSource::kFile: return "file";
    case MetricsSource::kPush: return "push";
    case MetricsSource::kLive: return "live";
  }
  return "file";
}

RunFigures run_figures(const Scenario& sc, const std::string& lock, const HistoryTally& tally, const ReadBack& rb,
                       const Analysis& a, bool passed, double duration_s, double timestamp_s) {
  RunFigures f;
  f.scenario = sc.name();
  f.resource = sc.resource().kind;
  f.lock = lock;
  f.lease_ttl_s = static_cast<double>(sc.lease_ttl().count()) / 1000.0;
  for (const auto& w : sc.workers()) f.workers.push_back(w.id);
  for (const auto& rw : a.figures.rejected_writes)
    f.rejected_writes[{rw.key, rw.client}] = std::max(rw.history, rw.readback);
  for (const auto& x : a.figures.expiries_during_work) ++f.expiries_during_work[{x.lock.empty() ? lock : x.lock, x.worker}];
  for (const auto& p : a.figures.pauses) f.pauses_s.emplace_back(p.worker, std::chrono::duration<double>(p.duration).count());
  for (const auto& w : sc.workers())
    if (w.command && !a.figures.longest_pause.count(w.id)) f.untimed.insert(w.id);
  for (const auto& w : a.figures.faults) ++f.faults_injected[w.fault];
  for (const auto& [worker, d] : longest_stops(a.figures.faults))
    f.fault_pauses_s[worker] = std::chrono::duration<double>(d).count();
  f.high_water = rb.high_water;
  f.token_staleness = tally.token_staleness();
  f.issuer_token = tally.issuer_token();
  f.duplicate_effects = a.figures.duplicate_effects_by_key;
  for (const auto& c : a.checkers)
    for (const auto& an : c.anomalies) ++f.anomalies[an.name];
  f.expects_safe = sc.expect().outcome == Outcome::kSafe;
  f.passed = passed;
  f.duration_s = duration_s;
  f.timestamp_s = timestamp_s;
  return f;
}

RunFigures run_figures(const Scenario& sc, const std::string& lock, const History& history, const ReadBack& rb,
                       const Analysis& a, bool passed, double duration_s, double timestamp_s) {
  HistoryTally tally;
  for (const Event& e : history) tally.observe(e);
  return run_figures(sc, lock, tally, rb, a, passed, duration_s, timestamp_s);
}

const std::vector<double>& pause_buckets() {
  static const std::vector<double> buckets = make_pause_buckets();
  return buckets;
}

const std::vector<double>& staleness_buckets() {
  static const std::vector<double> buckets{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 50, 100, 1000};
  return buckets;
}

MetricFamilies::MetricFamilies(prometheus::Registry& reg, MetricsSource source)
    : MetricFamilies(reg, Labels{{"source", std::string(to_string(source))}}) {}

MetricFamilies::MetricFamilies(prometheus::Registry& reg, const Labels& constant)
    : rejected_writes_(prometheus::BuildCounter()
                           .Name("fencecheck_rejected_writes_total")
                           .Help("Writes the fenced resource rejected because their token was below its high-water mark")
                           .Labels(constant).Register(reg)),
      expiries_(prometheus::BuildCounter()
                    .Name("fencecheck_lease_expiries_during_work_total")
                    .Help("Leases the lock service expired while their holder's job was still in progress")
                    .Labels(constant).Register(reg)),
      pause_(prometheus::BuildHistogram()
                 .Name("fencecheck_holder_pause_seconds")
                 .Help("Pauses measured by the holder itself (a monotonic ticker's gaps over 50 ms), seconds; "
                       "fixed buckets, 26 per decade from 0.0492 to 130 s")
                 .Labels(constant).Register(reg)),
      pause_max_(prometheus::BuildGauge()
                     .Name("fencecheck_holder_pause_max_seconds")
                     .Help("The longest pause the holder measured itself in the run, seconds (0: none; no series for "
                           "a worker that does not measure its pauses)")
                     .Labels(constant).Register(reg)),
      fault_pause_max_(prometheus::BuildGauge()
                           .Name("fencecheck_fault_pause_max_seconds")
                           .Help("The longest window, inject to heal, of a process-stopping fault (sigstop, freeze, "
                                 "self-stop) the harness applied to the worker, seconds: the harness's own measure of "
                                 "the pause")
                           .Labels(constant).Register(reg)),
      worker_info_(prometheus::BuildGauge()
                       .Name("fencecheck_worker_info")
                       .Help("1 for each worker of the scenario")
                       .Labels(constant).Register(reg)),
      ttl_(prometheus::BuildGauge().Name("fencecheck_lease_ttl_seconds").Help("The lease TTL the holders asked for, seconds").Labels(constant).Register(reg)),
      faults_(prometheus::BuildCounter().Name("fencecheck_faults_injected_total").Help("Faults injected, by kind").Labels(constant).Register(reg)),
      high_water_(prometheus::BuildGauge()
                      .Name("fencecheck_high_water_token")
                      .Help("The resource's high-water mark (highest accepted fencing token) per key")
                      .Labels(constant).Register(reg)),
      issuer_(prometheus::BuildGauge()
                  .Name("fencecheck_issuer_token")
                  .Help("The highest fencing token the lock service granted")
                  .Labels(constant).Register(reg)),
      staleness_(prometheus::BuildHistogram()
                     .Name("fencecheck_token_staleness")
                     .Help("Per write: the highest token issued so far minus the token the write presented")
                     .Labels(constant).Register(reg)),
      duplicates_(prometheus::BuildCounter()
                      .Name("fencecheck_duplicate_effects_total")
                      .Help("Effects applied more than once, per job (the resource key it writes)")
                      .Labels(constant).Register(reg)),
      anomalies_(prometheus::BuildCounter().Name("fencecheck_anomalies_total").Help("Anomalies the checkers found, by name").Labels(constant).Register(reg)),
      passed_(prometheus::BuildGauge().Name("fencecheck_scenario_passed").Help("1 when the scenario met its expectation, else 0").Labels(constant).Register(reg)),
      expects_safe_(prometheus::BuildGauge()
                        .Name("fencecheck_scenario_expects_safe")
                        .Help("1 when the scenario's expectation is safe (any anomaly fails it), 0 when it must show an anomaly")
                        .Labels(constant).Register(reg)),
      duration_(prometheus::BuildGauge().Name("fencecheck_scenario_duration_seconds").Help("Wall time of the scenario run, seconds").Labels(constant).Register(reg)),
      timestamp_(prometheus::BuildGauge()
                     .Name("fencecheck_last_run_timestamp_seconds")
                     .Help("Unix time the scenario run ended, seconds")
                     .Labels(constant).Register(reg)) {}

prometheus::Counter& MetricFamilies::rejected_writes(const std::string& scenario, const std::string& resource,
                                                     const std::string& key, const std::string& client) {
  return rejected_writes_.Add(Labels{{"scenario", scenario}, {"resource", resource}, {"key", key}, {"client", client}});
}
prometheus::Counter& MetricFamilies::expiries_during_work(const std::string& scenario, const std::string& lock,
                                                          const std::string& worker) {
  return expiries_.Add(Labels{{"scenario", scenario}, {"lock", lock}, {"worker", worker}});
}
prometheus::Histogram& MetricFamilies::holder_pause(const std::string& scenario, const std::string& worker) {
  return pause_.Add(Labels{{"scenario", scenario}, {"worker", worker}}, pause_buckets());
}
prometheus::Gauge& MetricFamilies::holder_pause_max(const std::string& scenario, const std::string& worker) {
  return pause_max_.Add(Labels{{"scenario", scenario}, {"worker", worker}});
}
prometheus::Gauge& MetricFamilies::fault_pause_max(const std::string& scenario, const std::string& worker) {
  return fault_pause_max_.Add(Labels{{"scenario", scenario}, {"worker", worker}});
}
prometheus::Gauge& MetricFamilies::worker_info(const std::string& scenario, const std::string& worker) {
  return worker_info_.Add(Labels{{"scenario", scenario}, {"worker", worker}});
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
prometheus::Gauge& MetricFamilies::scenario_expects_safe(const std::string& scenario) {
  return expects_safe_.Add(Labels{{"scenario", scenario}});
}
prometheus::Gauge& MetricFamilies::scenario_duration(const std::string& scenario) {
  return duration_.Add(Labels{{"scenario", scenario}});
}
prometheus::Gauge& MetricFamilies::last_run_timestamp(const std::string& scenario) {
  return timestamp_.Add(Labels{{"scenario", scenario}});
}

std::shared_ptr<prometheus::Registry> build_registry(const RunFigures& f, MetricsSource source) {
  auto reg = std::make_shared<prometheus::Registry>();
  MetricFamilies m(*reg, source);
  const std::string& sc = f.scenario;
  auto d = [](std::int64_t n) { return static_cast<double>(n); };

  for (const auto& [kc, n] : f.rejected_writes) m.rejected_writes(sc, f.resource, kc.first, kc.second).Increment(d(n));
  for (const auto& [lw, n] : f.expiries_during_work) m.expiries_during_work(sc, lw.first, lw.second).Increment(d(n));
  for (const auto& w : f.workers) {  // every worker, paused or not: the dashboard lists them all
    m.worker_info(sc, w).Set(1);
    if (f.untimed.count(w)) continue;  // measures nothing: no series, rather than a 0 that looks measured
    m.holder_pause(sc, w);
    m.holder_pause_max(sc, w);
  }
  for (const auto& [w, s] : f.fault_pauses_s) m.fault_pause_max(sc, w).Set(s);
  for (const auto& [w, s] : f.pauses_s) {
    m.holder_pause(sc, w).Observe(s);
    auto& longest = m.holder_pause_max(sc, w);
    longest.Set(std::max(longest.Value(), s));
  }
  m.lease_ttl(sc).Set(f.lease_ttl_s);
  for (const auto& [kind, n] : f.faults_injected) m.faults_injected(sc, kind).Increment(d(n));
  for (const auto& [key, t] : f.high_water) m.high_water(sc, f.resource, key).Set(d(t));
  m.issuer_token(sc, f.lock).Set(d(f.issuer_token));
  auto& stale = m.token_staleness(sc);
  for (const auto& [s, n] : f.token_staleness)
    for (std::uint64_t k = 0; k < n; ++k) stale.Observe(d(s));
  for (const auto& [key, t] : f.high_water) m.duplicate_effects(sc, f.resource, key);  // 0 until reported
  for (const auto& [key, n] : f.duplicate_effects) m.duplicate_effects(sc, f.resource, key).Increment(d(n));
  for (const auto& [name, n] : f.anomalies) m.anomalies(sc, name).Increment(d(n));
  m.scenario_passed(sc).Set(f.passed ? 1 : 0);
  m.scenario_expects_safe(sc).Set(f.expects_safe ? 1 : 0);
  m.scenario_duration(sc).Set(f.duration_s);
  m.last_run_timestamp(sc).Set(f.timestamp_s);
  return reg;
}

std::string render_metrics(const RunFigures& f, MetricsSource source) {
  return prometheus::TextSerializer().Serialize(build_registry(f, source)->Collect());
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
