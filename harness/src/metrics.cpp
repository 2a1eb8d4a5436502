#include "fencecheck/harness/metrics.h"

#include <fstream>
#include <stdexcept>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace fencecheck::harness {

std::vector<double> pause_buckets(double ttl) {
  if (ttl <= 0) ttl = 1;
  return {0.1 * ttl, 0.25 * ttl, 0.5 * ttl, ttl, 1.5 * ttl, 2 * ttl, 3 * ttl, 5 * ttl, 10 * ttl};
}

std::string render_metrics(const RunFigures& f) {
  using namespace prometheus;
  Registry reg;
  const Labels sc{{"scenario", f.scenario}};
  auto with = [&](Labels extra) {
    extra.insert(sc.begin(), sc.end());
    return extra;
  };

  auto& rejected = BuildCounter().Name("fencecheck_rejected_writes_total")
                       .Help("Writes the fenced resource rejected because their token was below its high-water mark")
                       .Register(reg);
  for (const auto& [kc, n] : f.rejected_writes)
    rejected.Add(with({{"resource", f.resource}, {"key", kc.first}, {"client", kc.second}})).Increment(static_cast<double>(n));

  auto& expiries = BuildCounter().Name("fencecheck_lease_expiries_during_work_total")
                       .Help("Leases the lock service expired while their holder's job was still in progress")
                       .Register(reg);
  for (const auto& [lw, n] : f.expiries_during_work)
    expiries.Add(with({{"lock", lw.first}, {"worker", lw.second}})).Increment(static_cast<double>(n));

  auto& pauses = BuildHistogram().Name("fencecheck_holder_pause_seconds")
                     .Help("Pauses measured by the holder itself (a monotonic ticker's gaps)")
                     .Register(reg);
  std::map<std::string, Histogram*> per_worker;
  for (const auto& [w, s] : f.pauses_s) {
    auto it = per_worker.find(w);
    if (it == per_worker.end()) it = per_worker.emplace(w, &pauses.Add(with({{"worker", w}}), pause_buckets(f.lease_ttl_s))).first;
    it->second->Observe(s);
  }

  BuildGauge().Name("fencecheck_lease_ttl_seconds").Help("The lease TTL the holders asked for").Register(reg)
      .Add(sc).Set(f.lease_ttl_s);

  auto& faults = BuildCounter().Name("fencecheck_faults_injected_total").Help("Faults injected, by kind").Register(reg);
  for (const auto& [kind, n] : f.faults_injected) faults.Add(with({{"kind", kind}})).Increment(static_cast<double>(n));

  auto& hw = BuildGauge().Name("fencecheck_high_water_token")
                 .Help("The resource's high-water mark (highest accepted fencing token) per key").Register(reg);
  for (const auto& [key, t] : f.high_water) hw.Add(with({{"resource", f.resource}, {"key", key}})).Set(static_cast<double>(t));

  BuildGauge().Name("fencecheck_issuer_token").Help("The highest fencing token the lock service granted")
      .Register(reg).Add(with({{"lock", f.lock}})).Set(static_cast<double>(f.issuer_token));

  auto& stale = BuildHistogram().Name("fencecheck_token_staleness")
                    .Help("Per write: the highest token issued so far minus the token the write presented")
                    .Register(reg).Add(sc, Histogram::BucketBoundaries{0, 1, 2, 5, 10, 100, 1000});
  for (auto s : f.token_staleness) stale.Observe(static_cast<double>(s));

  auto& anomalies = BuildCounter().Name("fencecheck_anomalies_total").Help("Anomalies the checkers found, by name").Register(reg);
  for (const auto& [name, n] : f.anomalies) anomalies.Add(with({{"anomaly", name}})).Increment(static_cast<double>(n));

  BuildGauge().Name("fencecheck_scenario_passed").Help("1 when the scenario met its expectation, else 0")
      .Register(reg).Add(sc).Set(f.passed ? 1 : 0);
  BuildGauge().Name("fencecheck_scenario_duration_seconds").Help("Wall time of the scenario run")
      .Register(reg).Add(sc).Set(f.duration_s);
  BuildGauge().Name("fencecheck_last_run_timestamp_seconds").Help("Unix time the scenario run ended")
      .Register(reg).Add(sc).Set(f.timestamp_s);

  return TextSerializer().Serialize(reg.Collect());
}

void write_metrics_file(const std::filesystem::path& path, const RunFigures& figures) {
  const auto tmp = path.parent_path() / ("." + path.filename().string() + ".tmp");
  {
    std::ofstream out(tmp);
    out << render_metrics(figures);
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace fencecheck::harness
