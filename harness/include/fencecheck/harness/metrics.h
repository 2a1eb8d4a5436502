// fencecheck — the evidence of one run as Prometheus metrics (design.md's names, base units).
//
// Rendered with prometheus-cpp (a prometheus::Registry serialised by TextSerializer) into the
// run directory's metrics.prom, the format node_exporter's textfile collector reads. Every series
// carries a `scenario` label so one Prometheus can hold many scenarios' runs.
//
//   fencecheck_rejected_writes_total{scenario,resource,key,client}      counter
//   fencecheck_lease_expiries_during_work_total{scenario,lock,worker}  counter
//   fencecheck_holder_pause_seconds{scenario,worker}                   histogram, buckets around the TTL
//   fencecheck_lease_ttl_seconds{scenario}                             gauge
//   fencecheck_faults_injected_total{scenario,kind}                    counter
//   fencecheck_high_water_token{scenario,resource,key}                 gauge
//   fencecheck_issuer_token{scenario,lock}                             gauge (highest token granted)
//   fencecheck_token_staleness{scenario}                               histogram: issued minus presented
//   fencecheck_anomalies_total{scenario,anomaly}                       counter
//   fencecheck_scenario_passed{scenario}                               gauge 1/0
//   fencecheck_scenario_duration_seconds{scenario}                     gauge
//   fencecheck_last_run_timestamp_seconds{scenario}                    gauge, Unix time
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace fencecheck::harness {

/// The figures of one run, as plain values (filled by the orchestrator from the analysis).
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
  std::map<std::string, std::int64_t> anomalies;  ///< name -> n
  bool passed = false;
  double duration_s = 0;
  double timestamp_s = 0;  ///< Unix time the run ended
};

/// The histogram buckets for pause lengths: fractions and multiples of the lease TTL
/// (0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10 x TTL), so "paused past its lease" is one bucket boundary.
[[nodiscard]] std::vector<double> pause_buckets(double lease_ttl_s);

/// Renders the Prometheus text exposition format. Pure; thread-safe.
[[nodiscard]] std::string render_metrics(const RunFigures& figures);

/// Writes render_metrics() to path atomically (temporary file + rename, as the textfile
/// collector requires). Throws std::runtime_error naming the path.
void write_metrics_file(const std::filesystem::path& path, const RunFigures& figures);

}  // namespace fencecheck::harness
