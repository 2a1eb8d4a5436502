// fencecheck — metrics while the run goes (/metrics on loopback) and at the end of each scenario
// (a push to a Pushgateway).
//
//   --metrics-listen 127.0.0.1:PORT   LiveMetrics behind a prometheus-cpp Exposer (pull). During
//                                     a scenario its series move with the history's events as
//                                     they are recorded; when the scenario ends they are replaced
//                                     by build_registry(figures, kLive) — metrics.prom's series,
//                                     labelled source="live" — and stay until the process exits.
//   --metrics-linger DURATION         after the last scenario, the process waits (at most that
//                                     long) until /metrics has been served once with every
//                                     scenario's final results (MetricsObserver::linger).
//   --pushgateway URL                 at the end of each scenario, build_registry(figures) is
//                                     PUT to URL/metrics/job/fencecheck/instance/<i>/night/<n>/
//                                     scenario/<s> (source="push" on every series; the night is
//                                     the invocation's, night.h, so two runs never share a group)
//                                     (prometheus-cpp Gateway), then the groups that run
//                                     supersedes are deleted (prune_superseded_groups). A failed
//                                     push is logged and reported; it never changes a verdict or
//                                     the exit code.
//
// Units and names: metrics.h. Every address the harness *serves* on is loopback only.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include "fencecheck/harness/metrics.h"
#include "fencecheck/harness/orchestrator.h"

namespace prometheus {
class Exposer;
}

namespace fencecheck::harness {

/// A bad --metrics-listen or --pushgateway value (exit code 2). what() names the flag and why.
class MetricsConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// A loopback address to serve /metrics on.
struct ListenAddress {
  std::string host;  ///< dotted IPv4 in 127.0.0.0/8 ("localhost" is given as 127.0.0.1)
  int port = 0;      ///< 0: any free port (see MetricsObserver::listening_port())
  /// The civetweb listening_ports form: "127.0.0.1:9464".
  [[nodiscard]] std::string civetweb() const;
};

/// Parses HOST:PORT where HOST is an IPv4 loopback address (127.0.0.0/8) or localhost and PORT is
/// 0..65535. Throws MetricsConfigError for anything else: a non-loopback or wildcard address
/// (0.0.0.0, a LAN address, a host name), a bare port (civetweb would bind every interface), a
/// missing or bad port, and IPv6 (Debian's civetweb, under prometheus-cpp's Exposer, is built
/// without IPv6, so [::1] is refused with a message saying so). Pure.
[[nodiscard]] ListenAddress parse_listen_address(std::string_view text);

/// Where to push: http(s)://HOST[:PORT][/]. The host may be anything (a staging Pushgateway);
/// the tests use loopback only.
struct PushgatewayUrl {
  std::string scheme;  ///< "http" or "https"
  std::string host;    ///< as written; IPv6 literals keep their brackets
  std::string port;    ///< as written, or 80 / 443 from the scheme
  /// scheme://host:port, as shown in messages.
  [[nodiscard]] std::string base() const { return scheme + "://" + host + ":" + port; }
};

/// Parses the --pushgateway value. Throws MetricsConfigError naming what is wrong (no scheme, a
/// scheme other than http/https, no host, a bad port, a path, query or user info). Pure.
[[nodiscard]] PushgatewayUrl parse_pushgateway_url(std::string_view text);

/// The outcome of one push. Value type.
struct PushOutcome {
  std::string scenario;
  std::string url;    ///< the full grouping-key URL pushed to
  bool ok = false;
  int status = 0;     ///< HTTP status; negative: minus libcurl's error code (no HTTP answer)
  std::string error;  ///< empty when ok
};

/// The grouping key path for a push: /metrics/job/fencecheck/instance/<i>/night/<n>/scenario/<s>
/// (prometheus-cpp's order: its labels are a sorted map). The night is the `fencecheck run`
/// invocation's id (night.h; the run id when there is none), so that two runs of one scenario on
/// one host (a CI run and the nightly at once, or two nights) push to two groups and neither
/// overwrites the other's result (issue 34 item 3). A value outside [A-Za-z0-9_.-] (or empty) is
/// sent in the Pushgateway's base64url form (`<name>@base64/<value>`). Pure.
[[nodiscard]] std::string grouping_path(const std::string& scenario, const std::string& instance,
                                        const std::string& night);

/// PUTs the registry (build_registry(figures, kPush); the PUT replaces the group's previous metrics) to
/// the Pushgateway under job=fencecheck, instance, night, scenario. Blocks until the Pushgateway
/// answers or libcurl gives up (libcurl's own connect timeout; prometheus-cpp sets none). Never throws.
[[nodiscard]] PushOutcome push_metrics(const PushgatewayUrl& url, const std::shared_ptr<prometheus::Registry>& registry,
                                       const std::string& scenario, const std::string& instance,
                                       const std::string& night);

/// One group on a Pushgateway, as GET /api/v1/metrics lists it. Value type.
struct PushedGroup {
  std::map<std::string, std::string> labels;  ///< the grouping key: job, instance, night, scenario
  /// The run's end by the harness's own clock (its fencecheck_last_run_timestamp_seconds), Unix
  /// seconds; else the Pushgateway's push_time_seconds; 0 when neither is there.
  double ended_s = 0;
};

/// The groups of a GET /api/v1/metrics answer ({"status":"success","data":[{"labels":{...},
/// "push_time_seconds":{"metrics":[{"value":"..."}]}, "<metric>":{...}}, ...]}; Pushgateway
/// 1.x). Throws std::invalid_argument naming what is not of that shape. Pure.
[[nodiscard]] std::vector<PushedGroup> parse_pushed_groups(std::string_view api_metrics_body);

/// How long a superseded group is kept after its run ended: several scrape intervals, so that a
/// failure is scraped (and `min_over_time(fencecheck_scenario_passed[10m])` sees it) before a
/// later run deletes it.
inline constexpr std::chrono::minutes kSupersededGroupGrace{15};

/// The groups a run of `scenario` pushed from `instance` in night `night` supersedes: job
/// fencecheck, the same instance and scenario, another night (or no night: pushed before the
/// night was in the key), whose run ended before this run started (`run_started_s`) and more than
/// `grace` before `now_s` (Unix seconds). A run that overlapped this one is never superseded: both
/// results stay, each in its own group. Pure.
[[nodiscard]] std::vector<PushedGroup> superseded_groups(const std::vector<PushedGroup>& groups,
                                                         const std::string& scenario, const std::string& instance,
                                                         const std::string& night, double run_started_s, double now_s,
                                                         std::chrono::seconds grace);

/// What prune_superseded_groups() did. Value type.
struct PruneOutcome {
  std::vector<std::string> deleted;  ///< the grouping-key paths deleted
  std::string error;                 ///< empty when the listing and every delete succeeded
};

/// Lists the Pushgateway's groups (GET /api/v1/metrics) and DELETEs those superseded_groups()
/// names (now: the system clock), so that groups do not pile up night after night (the
/// Pushgateway keeps a group until it is deleted). Bounded: 5 s to connect, 30 s per request.
/// Never throws.
[[nodiscard]] PruneOutcome prune_superseded_groups(const PushgatewayUrl& url, const std::string& scenario,
                                                   const std::string& instance, const std::string& night,
                                                   double run_started_s, std::chrono::seconds grace = kSupersededGroupGrace);

/// This machine's host name (the default `instance`); "localhost" when it cannot be read.
[[nodiscard]] std::string default_instance();

/// The live registry: every finished scenario's final registry plus the running scenario's
/// event-driven one, exposed as one set of families (same-named families merged, so each name
/// has one HELP/TYPE). Thread-safety: start/event/finish are called from one thread (the
/// orchestrator's); Collect() may run concurrently on any thread (the Exposer's).
///
/// While a scenario runs, from its events (each as the history records it):
///   fault.inject -> faults_injected_total{kind}+1;  write.fail -> rejected_writes_total{key,
///   client=worker}+1 and high_water_token{key} (max of the reply's high_water);  write.ok ->
///   high_water_token{key};  lock.grant / acquire.ok -> issuer_token (max token);  write.invoke ->
///   token_staleness (highest token issued so far minus the token presented, >= 0);  pause ->
///   holder_pause_seconds{worker};  lock.delete of a holder's key with no release.ok for it and
///   no job.done before it, once that holder writes again with the deleted token ->
///   lease_expiries_during_work_total{lock,worker}+1.
/// An anomaly found while the run goes (anomaly(), from RunObserver::on_anomaly) ->
///   anomalies_total{anomaly}+1 at once, so an alert can fire during a long run; at finish the
///   checkers' count replaces it (never lower: every live anomaly is one of theirs, live_checker.h).
/// Lease TTL, whether the scenario expects safety and an empty token-staleness histogram appear at start. Passed, duration and the
/// timestamp appear at finish (the checkers run at the end).
class LiveMetrics : public prometheus::Collectable {
 public:
  LiveMetrics();
  ~LiveMetrics() override;
  LiveMetrics(const LiveMetrics&) = delete;
  LiveMetrics& operator=(const LiveMetrics&) = delete;

  /// A scenario starts: drops a previous final registry of the same name, starts a fresh one.
  void start(const Scenario& scenario);
  /// One history event of the running scenario (ignored when none is running).
  void event(const Event& event);
  /// An anomaly of the running scenario found while it runs, by name (ignored when none is running).
  void anomaly(const std::string& name);
  /// The scenario ended: its series become exactly `final_registry` (build_registry(figures,
  /// kLive)). Each call is a new generation (generation() + 1).
  void finish(const std::string& scenario, std::shared_ptr<prometheus::Registry> final_registry);

  /// How many scenarios have finished (the generation of the final results). Any thread.
  [[nodiscard]] std::uint64_t generation() const;
  /// Blocks until a Collect() (a scrape) has returned every series of `generation` (it started
  /// after that many finish() calls), `deadline` passes or *stop becomes true (checked every
  /// 100 ms; stop may be null). True when such a Collect happened. Any thread.
  [[nodiscard]] bool wait_for_collect(std::uint64_t generation, std::chrono::steady_clock::time_point deadline,
                                      const std::atomic<bool>* stop) const;

  [[nodiscard]] std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct Run;
  // Guards finished_, current_ (the pointers; registries lock themselves), generation_ and collected_.
  mutable std::mutex mu_;
  mutable std::condition_variable collected_cv_;  // notified after each Collect
  std::uint64_t generation_ = 0;                   // finish() calls so far
  mutable std::uint64_t collected_ = 0;            // the newest generation a Collect has returned
  std::map<std::string, std::shared_ptr<prometheus::Registry>> finished_;
  std::shared_ptr<prometheus::Registry> current_;
  std::unique_ptr<Run> run_;  // the running scenario's state; orchestrator thread only
};

/// Why /metrics cannot be served on `address`, found by binding a probe socket there (with
/// SO_REUSEADDR, as civetweb binds: a port in TIME_WAIT is free) and closing it again: "HOST:PORT
/// is already in use (another process listens there)...", "permission denied", ...; nullopt when
/// the bind succeeds or the port is 0. prometheus-cpp's Exposer (civetweb) reports every such
/// failure as "null context when constructing CivetServer", which names neither the address nor
/// the cause. Another process may still take the port between this probe and the Exposer's bind.
/// Thread-safe; never throws.
[[nodiscard]] std::optional<std::string> listen_address_problem(const ListenAddress& address);

/// What MetricsObserver::linger did. Value type.
struct LingerOutcome {
  bool scraped = false;                      ///< /metrics was served with the final results
  std::chrono::milliseconds waited{0};       ///< how long it waited
};

/// The default of --metrics-linger: twice Prometheus's default scrape interval (15 s), so a
/// Prometheus scraping every 15 s gets one scrape of the final results.
inline constexpr std::chrono::seconds kDefaultMetricsLinger{30};

/// The RunObserver behind --metrics-listen and --pushgateway.
class MetricsObserver : public RunObserver {
 public:
  struct Options {
    std::optional<ListenAddress> listen;          ///< serve /metrics here
    std::optional<PushgatewayUrl> pushgateway;    ///< push here at the end of each scenario
    std::string instance = default_instance();    ///< the push's instance label
    /// How long a run's superseded groups are kept after it ended (prune_superseded_groups).
    std::chrono::seconds superseded_grace = kSupersededGroupGrace;
  };

  /// Starts serving /metrics when options.listen is set. Throws std::runtime_error naming the
  /// address and the cause when it cannot be bound (listen_address_problem: in use, no permission).
  explicit MetricsObserver(Options options);
  ~MetricsObserver() override;
  MetricsObserver(const MetricsObserver&) = delete;
  MetricsObserver& operator=(const MetricsObserver&) = delete;

  /// The port /metrics is served on (the real one when the address asked for port 0).
  [[nodiscard]] std::optional<int> listening_port() const { return port_; }
  /// Every push so far, in order. Call from the orchestrator's thread.
  [[nodiscard]] const std::vector<PushOutcome>& pushes() const { return pushes_; }
  [[nodiscard]] const std::shared_ptr<LiveMetrics>& live() const { return live_; }

  /// After the run (--metrics-linger): keeps /metrics up until it has been scraped once with
  /// every finished scenario's final results, at most `bound`, or until *stop (may be null)
  /// becomes true. Returns at once without a live endpoint, with bound <= 0, or when no scenario
  /// finished. Logs what happened. Call from the orchestrator's thread, after the last on_finish.
  LingerOutcome linger(std::chrono::milliseconds bound, const std::atomic<bool>* stop);

  void on_start(const Scenario& scenario, const std::filesystem::path& run_dir) override;
  void on_event(const Scenario& scenario, const Event& event) override;
  void on_anomaly(const Scenario& scenario, const LiveAnomaly& anomaly) override;
  void on_finish(const Scenario& scenario, const ScenarioResult& result, const Analysis& analysis,
                 const RunFigures& figures) override;

 private:
  Options options_;
  std::shared_ptr<LiveMetrics> live_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::optional<int> port_;
  std::vector<PushOutcome> pushes_;
};

}  // namespace fencecheck::harness
