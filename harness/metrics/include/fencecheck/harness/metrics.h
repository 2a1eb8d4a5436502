// fencecheck — the evidence of one run as Prometheus metrics (docs/architecture.md, "Metrics": names in base units; the table is docs/observability.md).
//
// One definition of each metric (MetricFamilies: name, help, type, label names, buckets) and one
// function that turns a run's figures into a prometheus::Registry (build_registry). That registry
// feeds all three ways out:
//   - metrics.prom in the run directory (write_metrics_file), for node_exporter's textfile collector;
//   - the push to a Pushgateway at the end of each scenario (live_metrics.h, MetricsObserver);
//   - the final state of the live /metrics endpoint (live_metrics.h, LiveMetrics).
// Every series carries a `scenario` label so one Prometheus can hold many scenarios' runs, and a
// `source` label naming the way out it came by (MetricsSource: file, push, live), so a Prometheus
// that scrapes two ways out (the Pushgateway and the live endpoint) never adds one run to itself:
// the dashboard's panels select one source, the alerts read push/file and take the larger of
// them (docs/observability.md, "One source of truth").
//
//   fencecheck_rejected_writes_total{scenario,resource,key,client}      counter
//   fencecheck_lease_expiries_during_work_total{scenario,lock,worker}  counter
//   fencecheck_holder_pause_seconds{scenario,worker}                   histogram, fixed fine buckets (pause_buckets)
//   fencecheck_holder_pause_max_seconds{scenario,worker}               gauge, the longest pause (exact)
//   fencecheck_worker_info{scenario,worker}                            gauge 1, one per worker of the scenario
//   fencecheck_lease_ttl_seconds{scenario}                             gauge, seconds
//   fencecheck_faults_injected_total{scenario,kind}                    counter
//   fencecheck_high_water_token{scenario,resource,key}                 gauge (highest token accepted)
//   fencecheck_issuer_token{scenario,lock}                             gauge (highest token granted)
//   fencecheck_token_staleness{scenario}                               histogram: issued minus presented, whole tokens
//   fencecheck_duplicate_effects_total{scenario,resource,key}          counter (per job: the key it writes)
//   fencecheck_anomalies_total{scenario,anomaly}                       counter
//   fencecheck_scenario_passed{scenario}                               gauge 1/0
//   fencecheck_scenario_expects_safe{scenario}                         gauge 1/0: the expectation is `safe`
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
#include <set>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/harness/history_tally.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/proto/readback.h"

namespace fencecheck::harness {

/// The way out a series is exported by; every series carries it as its `source` label.
///   kFile: metrics.prom in the run directory (node_exporter's textfile collector);
///   kPush: the push to a Pushgateway at the end of each scenario;
///   kLive: the live /metrics endpoint (--metrics-listen), during and after the run.
enum class MetricsSource { kFile, kPush, kLive };

/// "file", "push" or "live": the `source` label's value. Pure.
[[nodiscard]] std::string_view to_string(MetricsSource source);

/// The figures of one run, as plain values (filled by the orchestrator from the analysis).
/// Value type. Counts are event counts; every time is in seconds.
struct RunFigures {
  std::string scenario;
  std::string resource = "store";
  std::string lock;
  double lease_ttl_s = 0;
  std::vector<std::string> workers;  ///< every worker of the scenario, in its order (fencecheck_worker_info)
  std::map<std::pair<std::string, std::string>, std::int64_t> rejected_writes;      ///< (key, client) -> n
  std::map<std::pair<std::string, std::string>, std::int64_t> expiries_during_work; ///< (lock, worker) -> n
  std::vector<std::pair<std::string, double>> pauses_s;                            ///< (worker, seconds)
  /// Workers known not to measure their own pauses (a command worker that sent no `pause` event):
  /// they get no fencecheck_holder_pause_* series unless they report one, so no 0 reads as a
  /// measured "no pause" (issue 31 item 6). Empty: every worker measures (the reference worker).
  std::set<std::string> untimed;
  /// worker -> the longest window, inject to heal, of a process-stopping fault (sigstop, freeze,
  /// self-stop) the harness applied to it, seconds: the harness's own measure of that pause.
  std::map<std::string, double> fault_pauses_s;
  std::map<std::string, std::int64_t> faults_injected;                              ///< kind -> n
  std::map<std::string, std::int64_t> high_water;                                   ///< key -> token
  std::int64_t issuer_token = 0;
  /// Per write.invoke: highest token issued so far minus the token presented (whole tokens), as
  /// value -> how many writes had it (bounded by distinct values, not by writes).
  std::map<std::int64_t, std::uint64_t> token_staleness;
  /// job (the resource key it writes) -> duplicate effects found (the duplicate-effect rule's
  /// count). Every key in high_water is exported too, with 0 when it has none.
  std::map<std::string, std::int64_t> duplicate_effects;
  std::map<std::string, std::int64_t> anomalies;  ///< name -> n
  /// The scenario's expectation is `safe` (any anomaly fails it), not `anomaly` (a control
  /// scenario that must show one): an alert on anomalies found while a run goes reads it.
  bool expects_safe = true;
  bool passed = false;
  double duration_s = 0;
  double timestamp_s = 0;  ///< Unix time the run ended
};

/// The metrics' view of a finished run: the scenario's name, resource kind, workers and lease TTL; the
/// analysis's rejected writes (per key and client, the larger of the history's and the
/// resource's count), expiries during work (an expiry without a lock name counts under `lock`),
/// pauses, faults, duplicate effects per key and anomalies; the read-back's high-water marks; the
/// issuer's highest token and each write.invoke's staleness, from the history's lock.grant /
/// acquire.ok events in order. `duration_s` is the run's wall time in seconds, `timestamp_s` the
/// Unix time it ended. Pure; thread-safe.
[[nodiscard]] RunFigures run_figures(const Scenario& scenario, const std::string& lock, const History& history,
                                     const ReadBack& readback, const Analysis& analysis, bool passed,
                                     double duration_s, double timestamp_s);
/// The same from a HistoryTally of the run's events (history_tally.h: the issuer's token and the
/// staleness), so the caller need not hold the history. run_figures(…, history, …) is this with
/// a tally of `history`. Pure; thread-safe.
[[nodiscard]] RunFigures run_figures(const Scenario& scenario, const std::string& lock, const HistoryTally& tally,
                                     const ReadBack& readback, const Analysis& analysis, bool passed,
                                     double duration_s, double timestamp_s);

/// The histogram buckets for pause lengths, in seconds: one fixed set for every series (so the
/// dashboard may add any two pause histograms), 26 boundaries per decade (10^(k/26) rounded to
/// three significant digits; 0.0643 and 8.4 instead of 0.0642 and 8.38, which print as
/// 0.06419999999999999 / 8.380000000000001 in 16 digits) from 0.0492 s (just under the 50 ms a
/// worker's ticker reports) to 130 s, each 1.089..1.10 x the one below. histogram_quantile() interpolates linearly inside a
/// bucket, so a lone pause reads within 5 % (p50) and 10 % (p99) of its length: 6.0 s lies in
/// (5.88, 6.42] and reads 6.15 / 6.41, 20 s lies in (18.6, 20.3] and reads 19.45 / 20.28. (The
/// first version's TTL multiples put 6 s in (6, 10] for a 2 s TTL: p50 8 s, p99 9.96 s.) The
/// exact longest pause is fencecheck_holder_pause_max_seconds. Pure.
[[nodiscard]] const std::vector<double>& pause_buckets();

/// The histogram buckets for token staleness (issued minus presented, in tokens): every whole
/// number 0..10, then 20, 50, 100, 1000. le="0" counts the writes that carried the newest token;
/// up to 10 tokens behind, ceil(histogram_quantile(...)) is the exact whole number of tokens
/// (an observation k lies in (k-1, k]). Pure.
[[nodiscard]] const std::vector<double>& staleness_buckets();

/// Every fencecheck metric family, registered once in a registry: the one place where each
/// metric's name, help text, type, label names and buckets are defined. Accessors add (or return
/// the existing) series for the given label values; every series also carries the constant label
/// source=to_string(source). Thread-safety: as prometheus-cpp's Family (adding series and
/// updating them are safe from any thread). The registry must outlive it.
class MetricFamilies {
 public:
  MetricFamilies(prometheus::Registry& registry, MetricsSource source);

  prometheus::Counter& rejected_writes(const std::string& scenario, const std::string& resource,
                                       const std::string& key, const std::string& client);
  prometheus::Counter& expiries_during_work(const std::string& scenario, const std::string& lock,
                                            const std::string& worker);
  /// Buckets from pause_buckets().
  prometheus::Histogram& holder_pause(const std::string& scenario, const std::string& worker);
  /// The longest pause the worker measured, seconds (0 when it measured none; absent for a worker
  /// that does not measure its pauses).
  prometheus::Gauge& holder_pause_max(const std::string& scenario, const std::string& worker);
  /// The longest window of a process-stopping fault the harness applied to the worker, seconds
  /// (fencecheck_fault_pause_max_seconds; absent when none).
  prometheus::Gauge& fault_pause_max(const std::string& scenario, const std::string& worker);
  /// 1 for each worker of the scenario (so the dashboard's worker list has every worker).
  prometheus::Gauge& worker_info(const std::string& scenario, const std::string& worker);
  prometheus::Gauge& lease_ttl(const std::string& scenario);
  prometheus::Counter& faults_injected(const std::string& scenario, const std::string& kind);
  prometheus::Gauge& high_water(const std::string& scenario, const std::string& resource, const std::string& key);
  prometheus::Gauge& issuer_token(const std::string& scenario, const std::string& lock);
  prometheus::Histogram& token_staleness(const std::string& scenario);
  prometheus::Counter& duplicate_effects(const std::string& scenario, const std::string& resource,
                                         const std::string& key);
  prometheus::Counter& anomalies(const std::string& scenario, const std::string& anomaly);
  prometheus::Gauge& scenario_passed(const std::string& scenario);
  prometheus::Gauge& scenario_expects_safe(const std::string& scenario);
  prometheus::Gauge& scenario_duration(const std::string& scenario);
  prometheus::Gauge& last_run_timestamp(const std::string& scenario);

 private:
  MetricFamilies(prometheus::Registry& registry, const prometheus::Labels& constant);

  prometheus::Family<prometheus::Counter>& rejected_writes_;
  prometheus::Family<prometheus::Counter>& expiries_;
  prometheus::Family<prometheus::Histogram>& pause_;
  prometheus::Family<prometheus::Gauge>& pause_max_;
  prometheus::Family<prometheus::Gauge>& fault_pause_max_;
  prometheus::Family<prometheus::Gauge>& worker_info_;
  prometheus::Family<prometheus::Gauge>& ttl_;
  prometheus::Family<prometheus::Counter>& faults_;
  prometheus::Family<prometheus::Gauge>& high_water_;
  prometheus::Family<prometheus::Gauge>& issuer_;
  prometheus::Family<prometheus::Histogram>& staleness_;
  prometheus::Family<prometheus::Counter>& duplicates_;
  prometheus::Family<prometheus::Counter>& anomalies_;
  prometheus::Family<prometheus::Gauge>& passed_;
  prometheus::Family<prometheus::Gauge>& expects_safe_;
  prometheus::Family<prometheus::Gauge>& duration_;
  prometheus::Family<prometheus::Gauge>& timestamp_;
};

/// The whole run as a fresh registry: every figure as its metric, each series labelled
/// source=to_string(source). Pure (a new registry each call); thread-safe. Series that always
/// exist: lease TTL, issuer token, token staleness (possibly with count 0), duplicate effects per
/// key (0 until reported), scenario passed, duration, timestamp; per worker of the scenario:
/// worker info, pause histogram (count 0 when it never paused) and longest pause. The others
/// exist for the label values the figures name.
[[nodiscard]] std::shared_ptr<prometheus::Registry> build_registry(const RunFigures& figures,
                                                                   MetricsSource source = MetricsSource::kFile);

/// The Prometheus text exposition format of build_registry(figures, source). Pure; thread-safe.
[[nodiscard]] std::string render_metrics(const RunFigures& figures, MetricsSource source = MetricsSource::kFile);

/// Writes render_metrics(figures, kFile) to path atomically (temporary file + rename, as the
/// textfile collector requires). Throws std::runtime_error naming the path.
void write_metrics_file(const std::filesystem::path& path, const RunFigures& figures);

}  // namespace fencecheck::harness
