// fencecheck — the evidence of one run as Prometheus metrics (docs/architecture.md, "Metrics": names in base units; the table is docs/observability.md).
//
// One definition of each metric (MetricFamilies: name, help, type, label names, buckets) and one
// function that turns a run's figures into a prometheus::Registry (build_registry). That registry
// feeds all three ways out:
//   - metrics.prom in the run directory (write_metrics_file), for node_exporter's textfile collector;
//   - the push to a Pushgateway at the end of each scenario (live_metrics.h, MetricsObserver);
//   - the final state of the live /metrics endpoint (live_metrics.h, LiveMetrics).
// Every series carries a `scenario` label so one Prometheus can hold many scenarios' runs.
//
//   fencecheck_rejected_writes_total{scenario,resource,key,client}      counter
//   fencecheck_lease_expiries_during_work_total{scenario,lock,worker}  counter
//   fencecheck_holder_pause_seconds{scenario,worker}                   histogram, buckets around the TTL
//   fencecheck_lease_ttl_seconds{scenario}                             gauge, seconds
//   fencecheck_faults_injected_total{scenario,kind}                    counter
//   fencecheck_high_water_token{scenario,resource,key}                 gauge (highest token accepted)
//   fencecheck_issuer_token{scenario,lock}                             gauge (highest token granted)
//   fencecheck_token_staleness{scenario}                               histogram: issued minus presented
//   fencecheck_duplicate_effects_total{scenario,resource,key}          counter (per job: the key it writes)
//   fencecheck_anomalies_total{scenario,anomaly}                       counter
//   fencecheck_scenario_passed{scenario}                               gauge 1/0
//   fencecheck_scenario_duration_seconds{scenario}                     gauge, seconds
//   fencecheck_last_run_timestamp_seconds{scenario}                    gauge, Unix time in seconds
//
// Label note: the project's first sketch named it `fencecheck_duplicate_effects_total{job}`. `job` is the label
// Prometheus attaches to every scraped target (and the Pushgateway's grouping key job=fencecheck),
// so a metric label of that name would be renamed to exported_job or clash with the grouping key;
// a job is identified by the resource key it writes, so the label is `key` (beside `resource`).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/proto/readback.h"

namespace fencecheck::harness {

/// The figures of one run, as plain values (filled by the orchestrator from the analysis).
/// Value type. Counts are event counts; every time is in seconds.
struct RunFigures {
  std::string scenario;
  std::string resource = "store";
  std::string lock;
  double lease_ttl_s = 0;
  std::map<std::pair<std::string, std::string>, std::int64_t> rejected_writes;      ///< (key, client) -> n
  std::map<std::pair<std::string, std::string>, std::int64_t> expiries_during_work; ///< (lock, worker) -> n
  std::vector<std::pair<std::string, double>> pauses_s;                            ///< (worker, seconds)
  std::map<std::string, std::int64_t> faults_injected;                              ///< kind -> n
  std::map<std::string, std::int64_t> high_water;                                   ///< key -> token
  std::int64_t issuer_token = 0;
  std::vector<std::int64_t> token_staleness;  ///< per write: highest token issued so far minus the token presented
  /// job (the resource key it writes) -> duplicate effects found (the duplicate-effect rule's
  /// count). Every key in high_water is exported too, with 0 when it has none.
  std::map<std::string, std::int64_t> duplicate_effects;
  std::map<std::string, std::int64_t> anomalies;  ///< name -> n
  bool passed = false;
  double duration_s = 0;
  double timestamp_s = 0;  ///< Unix time the run ended
};

/// The metrics' view of a finished run: the scenario's name, resource kind and lease TTL; the
/// analysis's rejected writes (per key and client, the larger of the history's and the
/// resource's count), expiries during work (an expiry without a lock name counts under `lock`),
/// pauses, faults, duplicate effects per key and anomalies; the read-back's high-water marks; the
/// issuer's highest token and each write.invoke's staleness, from the history's lock.grant /
/// acquire.ok events in order. `duration_s` is the run's wall time in seconds, `timestamp_s` the
/// Unix time it ended. Pure; thread-safe.
[[nodiscard]] RunFigures run_figures(const Scenario& scenario, const std::string& lock, const History& history,
                                     const ReadBack& readback, const Analysis& analysis, bool passed,
                                     double duration_s, double timestamp_s);

/// The histogram buckets for pause lengths, in seconds: fractions and multiples of the lease TTL
/// (0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10 x TTL; a TTL <= 0 counts as 1 s), so "paused past its
/// lease" is one bucket boundary (le = TTL). Pure.
[[nodiscard]] std::vector<double> pause_buckets(double lease_ttl_s);

/// The histogram buckets for token staleness (issued minus presented, in tokens):
/// 0, 1, 2, 5, 10, 100, 1000. le="0" counts the writes that carried the newest token. Pure.
[[nodiscard]] std::vector<double> staleness_buckets();

/// Every fencecheck metric family, registered once in a registry: the one place where each
/// metric's name, help text, type, label names and buckets are defined. Accessors add (or return
/// the existing) series for the given label values. Thread-safety: as prometheus-cpp's Family
/// (adding series and updating them are safe from any thread). The registry must outlive it.
class MetricFamilies {
 public:
  explicit MetricFamilies(prometheus::Registry& registry);

  prometheus::Counter& rejected_writes(const std::string& scenario, const std::string& resource,
                                       const std::string& key, const std::string& client);
  prometheus::Counter& expiries_during_work(const std::string& scenario, const std::string& lock,
                                            const std::string& worker);
  /// Buckets from pause_buckets(lease_ttl_s) (used only when the series is new).
  prometheus::Histogram& holder_pause(const std::string& scenario, const std::string& worker, double lease_ttl_s);
  prometheus::Gauge& lease_ttl(const std::string& scenario);
  prometheus::Counter& faults_injected(const std::string& scenario, const std::string& kind);
  prometheus::Gauge& high_water(const std::string& scenario, const std::string& resource, const std::string& key);
  prometheus::Gauge& issuer_token(const std::string& scenario, const std::string& lock);
  prometheus::Histogram& token_staleness(const std::string& scenario);
  prometheus::Counter& duplicate_effects(const std::string& scenario, const std::string& resource,
                                         const std::string& key);
  prometheus::Counter& anomalies(const std::string& scenario, const std::string& anomaly);
  prometheus::Gauge& scenario_passed(const std::string& scenario);
  prometheus::Gauge& scenario_duration(const std::string& scenario);
  prometheus::Gauge& last_run_timestamp(const std::string& scenario);

 private:
  prometheus::Family<prometheus::Counter>& rejected_writes_;
  prometheus::Family<prometheus::Counter>& expiries_;
  prometheus::Family<prometheus::Histogram>& pause_;
  prometheus::Family<prometheus::Gauge>& ttl_;
  prometheus::Family<prometheus::Counter>& faults_;
  prometheus::Family<prometheus::Gauge>& high_water_;
  prometheus::Family<prometheus::Gauge>& issuer_;
  prometheus::Family<prometheus::Histogram>& staleness_;
  prometheus::Family<prometheus::Counter>& duplicates_;
  prometheus::Family<prometheus::Counter>& anomalies_;
  prometheus::Family<prometheus::Gauge>& passed_;
  prometheus::Family<prometheus::Gauge>& duration_;
  prometheus::Family<prometheus::Gauge>& timestamp_;
};

/// The whole run as a fresh registry: every figure as its metric. Pure (a new registry each call);
/// thread-safe. Series that always exist: lease TTL, issuer token, token staleness (possibly with
/// count 0), duplicate effects per key (0 until reported), scenario passed, duration, timestamp.
/// The others exist for the label values the figures name.
[[nodiscard]] std::shared_ptr<prometheus::Registry> build_registry(const RunFigures& figures);

/// The Prometheus text exposition format of build_registry(figures). Pure; thread-safe.
[[nodiscard]] std::string render_metrics(const RunFigures& figures);

/// Writes render_metrics() to path atomically (temporary file + rename, as the textfile
/// collector requires). Throws std::runtime_error naming the path.
void write_metrics_file(const std::filesystem::path& path, const RunFigures& figures);

}  // namespace fencecheck::harness
