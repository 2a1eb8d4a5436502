// Unit tests for the metrics (harness/metrics/src/metrics.cpp, live_metrics.cpp): build_registry's exact
// samples and bucket boundaries, the text format, the live registry driven by events, the
// loopback-only address parsing, the push (to an in-process HTTP server on 127.0.0.1:0) and the
// CLI's refusals. Every socket is on 127.0.0.1.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <prometheus/text_serializer.h>

#include "../support/busy_port.h"
#include "../support/temp_dir.h"
#include "fencecheck/process/server_support.h"
#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/live_metrics.h"
#include "fencecheck/harness/metrics.h"
#include "fencecheck/harness/night.h"
#include "fencecheck/harness/orchestrator.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/proto/event.h"

namespace fencecheck::harness {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// ---------------------------------------------------------------------------------------------
// Helpers

using LabelMap = std::map<std::string, std::string>;

/// A sample's labels, without `source` (the way out; checked on its own by SeriesCarryTheirSource).
LabelMap labels_of(const prometheus::ClientMetric& m) {
  LabelMap out;
  for (const auto& l : m.label)
    if (l.name != "source") out[l.name] = l.value;
  return out;
}

std::string source_of(const prometheus::ClientMetric& m) {
  for (const auto& l : m.label)
    if (l.name == "source") return l.value;
  return "";
}

const prometheus::MetricFamily* family(const std::vector<prometheus::MetricFamily>& all, const std::string& name) {
  for (const auto& f : all)
    if (f.name == name) return &f;
  return nullptr;
}

/// The one sample of `name` with exactly these labels; fails the test when absent.
std::optional<prometheus::ClientMetric> sample(const std::vector<prometheus::MetricFamily>& all, const std::string& name,
                                               const LabelMap& labels) {
  const auto* f = family(all, name);
  if (!f) {
    ADD_FAILURE() << "no family " << name;
    return std::nullopt;
  }
  std::optional<prometheus::ClientMetric> found;
  for (const auto& m : f->metric) {
    if (labels_of(m) != labels) continue;
    EXPECT_FALSE(found) << "two samples of " << name << " with the same labels";
    found = m;
  }
  if (!found) ADD_FAILURE() << "no sample of " << name << " with the given labels";
  return found;
}

/// Whether `name` has a sample with exactly these labels (no failure when it has none).
bool has_sample(const std::vector<prometheus::MetricFamily>& all, const std::string& name, const LabelMap& labels) {
  const auto* f = family(all, name);
  if (!f) return false;
  for (const auto& m : f->metric)
    if (labels_of(m) == labels) return true;
  return false;
}

double counter(const std::vector<prometheus::MetricFamily>& all, const std::string& name, const LabelMap& labels) {
  auto m = sample(all, name, labels);
  return m ? m->counter.value : -1;
}
double gauge(const std::vector<prometheus::MetricFamily>& all, const std::string& name, const LabelMap& labels) {
  auto m = sample(all, name, labels);
  return m ? m->gauge.value : -1;
}

/// The cumulative count of the bucket whose upper bound is `le`; fails the test when there is none.
std::uint64_t cumulative_at(const prometheus::ClientMetric& m, double le) {
  for (const auto& b : m.histogram.bucket)
    if (b.upper_bound == le) return b.cumulative_count;
  ADD_FAILURE() << "no bucket le=" << le;
  return 0;
}

/// Prometheus's histogram_quantile() (promql/quantile.go, bucketQuantile) over (upper bound,
/// cumulative count) pairs with +Inf last: the rank's bucket, linear inside it, the first
/// bucket's lower bound 0, the highest finite bound when the rank is in +Inf.
double histogram_quantile(double q, const std::vector<std::pair<double, std::uint64_t>>& b) {
  const double rank = q * static_cast<double>(b.back().second);
  std::size_t i = 0;
  while (static_cast<double>(b[i].second) < rank) ++i;
  if (i == b.size() - 1) return b[b.size() - 2].first;
  if (i == 0 && b[0].first <= 0) return b[0].first;
  const double lower = i == 0 ? 0 : b[i - 1].first;
  const double below = i == 0 ? 0 : static_cast<double>(b[i - 1].second);
  return lower + (b[i].first - lower) * (rank - below) / (static_cast<double>(b[i].second) - below);
}

/// (upper bound, cumulative count) pairs, +Inf last.
std::vector<std::pair<double, std::uint64_t>> buckets(const prometheus::ClientMetric& m) {
  std::vector<std::pair<double, std::uint64_t>> out;
  for (const auto& b : m.histogram.bucket) out.emplace_back(b.upper_bound, b.cumulative_count);
  return out;
}

constexpr double kInf = std::numeric_limits<double>::infinity();

/// A figure set with every field set to a value that shows up distinctly.
RunFigures known_figures() {
  RunFigures f;
  f.scenario = "s";
  f.resource = "store";
  f.lock = "fencecheck/s";
  f.lease_ttl_s = 2;
  f.workers = {"w1", "w2", "w3"};  // w3 never paused
  f.rejected_writes[{"ledger", "w1"}] = 3;
  f.rejected_writes[{"ledger", "w2"}] = 1;
  f.expiries_during_work[{"fencecheck/s", "w1"}] = 2;
  f.pauses_s = {{"w1", 0.3}, {"w1", 6.0}, {"w2", 25.0}};
  f.faults_injected["sigstop"] = 1;
  f.fault_pauses_s = {{"w1", 6.002}};  // the sigstop's window, as the harness measured it
  f.high_water["ledger"] = 41;
  f.issuer_token = 42;
  f.token_staleness = {{0, 2}, {1, 1}, {3, 1}, {150, 1}};  // value -> writes: 0, 0, 1, 3, 150
  f.anomalies["interleaved-segment"] = 2;
  f.expects_safe = false;  // a control scenario: it must show its anomaly
  f.passed = true;
  f.duration_s = 9.5;
  f.timestamp_s = 1700000000;
  return f;
}

std::string serialize(const std::vector<prometheus::MetricFamily>& families) {
  return prometheus::TextSerializer().Serialize(families);
}

/// The sample lines of a text exposition (no comments, no blank lines).
std::vector<std::string> sample_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') out.push_back(line);
  return out;
}

Scenario test_scenario(const std::string& name) {
  return parse_scenario("name: " + name + R"(
seed: 1
lease_ttl: 2s
timeout: 60s
lock_service: {kind: etcd}
resource: {kind: store, fencing: per-key}
network: host
job: {key: ledger, segments: 1, chunks: 2, chunk_bytes: 16, chunk_interval: 100ms}
workers:
  - id: w1
  - id: w2
faults:
  - kind: sigstop
    target: w1
    trigger: {worker: w1, event: write.ok, count: 1}
    duration: 6s
expect: {outcome: safe}
)");
}

/// The fields the metrics read from an event, all optional (designated initializers in this order).
struct Fields {
  std::optional<std::int64_t> token{};
  std::string key{};       ///< resource key (writes)
  std::string lock_key{};  ///< lock key (acquire, release, lock.grant / lock.delete)
  std::optional<std::int64_t> high_water{};  ///< the resource's reply (write.ok / write.fail)
  std::optional<std::int64_t> revision{};    ///< a delete's revision (lock.delete, release.ok)
  std::int64_t ns = 0;                      ///< t_ns = src_ns (0: unset)
};

Event ev(const std::string& source, EventKind kind, const Fields& f = {}) {
  Event e;
  e.source = source;
  e.kind = kind;
  e.token = f.token;
  e.key = f.key;
  e.lock_key = f.lock_key;
  e.high_water = f.high_water;
  e.revision = f.revision;
  e.t_ns = e.src_ns = f.ns;
  return e;
}

// ---------------------------------------------------------------------------------------------
// build_registry

TEST(PauseBuckets, AreOneFineSetFrom50MsTo130Seconds) {
  const auto& b = pause_buckets();
  ASSERT_EQ(b.size(), 90u);
  EXPECT_EQ(b.front(), 0.0492);
  EXPECT_EQ(b.back(), 130);
  for (double exact : {0.0643, 0.1, 1.0, 5.88, 6.42, 8.4, 10.0, 18.6, 20.3, 100.0}) EXPECT_THAT(b, ::testing::Contains(exact));
  // Each bound prints (prometheus-cpp: 16 significant digits) as its three digits.
  const std::string text = render_metrics(known_figures());
  for (double bound : b) {
    std::array<char, 32> three{};
    std::snprintf(three.data(), three.size(), "%.3g", bound);
    EXPECT_THAT(text, HasSubstr("worker=\"w3\",le=\"" + std::string(three.data()) + "\"} 0\n")) << bound;
  }
  for (std::size_t i = 1; i < b.size(); ++i) {
    EXPECT_GE(b[i] / b[i - 1], 1.089) << b[i];
    EXPECT_LE(b[i] / b[i - 1], 1.1 + 1e-12) << b[i];
  }
  EXPECT_THAT(staleness_buckets(), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 50, 100, 1000));
}

// A lone pause of any length from 55 ms to 119 s reads within 10 % of itself at p50 and p99, the
// quantiles the dashboard draws (a 6 s pause read 8 s / 9.96 s with the first, TTL-based buckets).
TEST(PauseBuckets, ALonePauseReadsWithinTenPercent) {
  for (double pause = 0.055; pause < 119; pause *= 1.013) {
    RunFigures f;
    f.scenario = "s";
    f.pauses_s = {{"w1", pause}};
    const auto all = build_registry(f)->Collect();
    auto h = sample(all, "fencecheck_holder_pause_seconds", {{"scenario", "s"}, {"worker", "w1"}});
    ASSERT_TRUE(h);
    for (double q : {0.5, 0.99}) {
      const double read = histogram_quantile(q, buckets(*h));
      EXPECT_LE(std::abs(read - pause) / pause, 0.10) << "a " << pause << " s pause reads " << read << " at " << q;
    }
  }
  const std::vector<std::pair<double, std::uint64_t>> six{{5.88, 0}, {6.42, 1}, {kInf, 1}};
  EXPECT_NEAR(histogram_quantile(0.5, six), 6.15, 1e-9);
  EXPECT_NEAR(histogram_quantile(0.99, six), 6.4146, 1e-9);
}

TEST(BuildRegistry, SeriesCarryTheirSource) {
  for (auto [source, name] : {std::pair{MetricsSource::kFile, "file"}, std::pair{MetricsSource::kPush, "push"},
                              std::pair{MetricsSource::kLive, "live"}}) {
    EXPECT_EQ(to_string(source), name);
    for (const auto& f : build_registry(known_figures(), source)->Collect())
      for (const auto& m : f.metric) EXPECT_EQ(source_of(m), name) << f.name;
  }
  EXPECT_THAT(render_metrics(known_figures(), MetricsSource::kPush),
              HasSubstr("fencecheck_faults_injected_total{source=\"push\",kind=\"sigstop\",scenario=\"s\"} 1\n"));
}

TEST(BuildRegistry, ExportsEveryFigureWithItsExactValue) {
  const auto all = build_registry(known_figures())->Collect();
  const LabelMap s{{"scenario", "s"}};
  auto with = [&](LabelMap extra) {
    extra.insert(s.begin(), s.end());
    return extra;
  };

  EXPECT_EQ(counter(all, "fencecheck_rejected_writes_total", with({{"resource", "store"}, {"key", "ledger"}, {"client", "w1"}})), 3);
  EXPECT_EQ(counter(all, "fencecheck_rejected_writes_total", with({{"resource", "store"}, {"key", "ledger"}, {"client", "w2"}})), 1);
  EXPECT_EQ(family(all, "fencecheck_rejected_writes_total")->metric.size(), 2u);
  EXPECT_EQ(counter(all, "fencecheck_lease_expiries_during_work_total", with({{"lock", "fencecheck/s"}, {"worker", "w1"}})), 2);
  EXPECT_EQ(gauge(all, "fencecheck_lease_ttl_seconds", s), 2);
  EXPECT_EQ(counter(all, "fencecheck_faults_injected_total", with({{"kind", "sigstop"}})), 1);
  EXPECT_EQ(gauge(all, "fencecheck_high_water_token", with({{"resource", "store"}, {"key", "ledger"}})), 41);
  EXPECT_EQ(gauge(all, "fencecheck_issuer_token", with({{"lock", "fencecheck/s"}})), 42);
  EXPECT_EQ(counter(all, "fencecheck_duplicate_effects_total", with({{"resource", "store"}, {"key", "ledger"}})), 0);
  EXPECT_EQ(counter(all, "fencecheck_anomalies_total", with({{"anomaly", "interleaved-segment"}})), 2);
  EXPECT_EQ(gauge(all, "fencecheck_scenario_passed", s), 1);
  EXPECT_EQ(gauge(all, "fencecheck_scenario_expects_safe", s), 0);
  EXPECT_EQ(gauge(all, "fencecheck_scenario_duration_seconds", s), 9.5);
  EXPECT_EQ(gauge(all, "fencecheck_last_run_timestamp_seconds", s), 1700000000);

  // Pauses: fixed buckets; a pause equal to a bound counts in that bucket (le).
  auto w1 = sample(all, "fencecheck_holder_pause_seconds", with({{"worker", "w1"}}));
  ASSERT_TRUE(w1);
  EXPECT_EQ(w1->histogram.bucket.size(), pause_buckets().size() + 1);
  EXPECT_EQ(cumulative_at(*w1, 0.289), 0u);
  EXPECT_EQ(cumulative_at(*w1, 0.316), 1u);  // 0.3 s
  EXPECT_EQ(cumulative_at(*w1, 5.88), 1u);
  EXPECT_EQ(cumulative_at(*w1, 6.42), 2u);   // 6.0 s
  EXPECT_EQ(cumulative_at(*w1, kInf), 2u);
  EXPECT_EQ(w1->histogram.sample_count, 2u);
  EXPECT_DOUBLE_EQ(w1->histogram.sample_sum, 6.3);
  auto w2 = sample(all, "fencecheck_holder_pause_seconds", with({{"worker", "w2"}}));
  ASSERT_TRUE(w2);
  EXPECT_EQ(cumulative_at(*w2, 24.2), 0u);
  EXPECT_EQ(cumulative_at(*w2, 26.5), 1u);  // 25 s
  EXPECT_EQ(w2->histogram.sample_sum, 25.0);
  // The exact longest pause, and every worker of the scenario, paused or not.
  EXPECT_EQ(gauge(all, "fencecheck_holder_pause_max_seconds", with({{"worker", "w1"}})), 6.0);
  EXPECT_EQ(gauge(all, "fencecheck_holder_pause_max_seconds", with({{"worker", "w2"}})), 25.0);
  EXPECT_EQ(gauge(all, "fencecheck_holder_pause_max_seconds", with({{"worker", "w3"}})), 0);
  EXPECT_EQ(gauge(all, "fencecheck_fault_pause_max_seconds", with({{"worker", "w1"}})), 6.002);
  EXPECT_FALSE(has_sample(all, "fencecheck_fault_pause_max_seconds", with({{"worker", "w2"}})));
  auto w3 = sample(all, "fencecheck_holder_pause_seconds", with({{"worker", "w3"}}));
  ASSERT_TRUE(w3);
  EXPECT_EQ(w3->histogram.sample_count, 0u);
  for (const char* w : {"w1", "w2", "w3"}) EXPECT_EQ(gauge(all, "fencecheck_worker_info", with({{"worker", w}})), 1) << w;
  EXPECT_EQ(family(all, "fencecheck_worker_info")->metric.size(), 3u);

  auto stale = sample(all, "fencecheck_token_staleness", s);
  ASSERT_TRUE(stale);
  // 0, 0, 1, 3, 150 tokens behind.
  EXPECT_THAT(buckets(*stale), ElementsAre(std::pair{0.0, 2u}, std::pair{1.0, 3u}, std::pair{2.0, 3u}, std::pair{3.0, 4u},
                                           std::pair{4.0, 4u}, std::pair{5.0, 4u}, std::pair{6.0, 4u}, std::pair{7.0, 4u},
                                           std::pair{8.0, 4u}, std::pair{9.0, 4u}, std::pair{10.0, 4u},
                                           std::pair{20.0, 4u}, std::pair{50.0, 4u}, std::pair{100.0, 4u},
                                           std::pair{1000.0, 5u}, std::pair{kInf, 5u}));
  // ceil(histogram_quantile()) is the whole number of tokens: the 4th of 5 writes was 3 behind.
  EXPECT_EQ(std::ceil(histogram_quantile(0.7, buckets(*stale))), 3);
  EXPECT_EQ(stale->histogram.sample_sum, 154.0);
}

TEST(BuildRegistry, AWorkerThatMeasuresNothingGetsNoZeroPauseAndTheHarnessWindowIsItsOwnSeries) {
  // Issue 31 item 6: a command worker that sent no pause event measured nothing; a 0 for it would
  // read as "never paused" on the dashboard while the harness stopped it for 6 s.
  RunFigures f = known_figures();
  f.untimed = {"w3"};
  f.fault_pauses_s = {{"w1", 6.0}, {"w3", 6.004}};
  const auto all = build_registry(f)->Collect();
  auto with = [](LabelMap extra) {
    extra.emplace("scenario", "s");
    return extra;
  };
  EXPECT_FALSE(has_sample(all, "fencecheck_holder_pause_max_seconds", with({{"worker", "w3"}})));
  EXPECT_FALSE(has_sample(all, "fencecheck_holder_pause_seconds", with({{"worker", "w3"}})));
  EXPECT_EQ(gauge(all, "fencecheck_holder_pause_max_seconds", with({{"worker", "w1"}})), 6.0);
  EXPECT_EQ(gauge(all, "fencecheck_fault_pause_max_seconds", with({{"worker", "w3"}})), 6.004);
  EXPECT_FALSE(has_sample(all, "fencecheck_fault_pause_max_seconds", with({{"worker", "w2"}})));
  EXPECT_EQ(gauge(all, "fencecheck_worker_info", with({{"worker", "w3"}})), 1);  // still listed
}

TEST(BuildRegistry, NamesFollowPrometheusConventions) {
  const auto all = build_registry(known_figures())->Collect();
  std::vector<std::string> names;
  for (const auto& f : all) {
    names.push_back(f.name);
    EXPECT_THAT(f.name, ::testing::StartsWith("fencecheck_"));
    const bool total = f.name.size() > 6 && f.name.compare(f.name.size() - 6, 6, "_total") == 0;
    EXPECT_EQ(f.type == prometheus::MetricType::Counter, total) << f.name << ": counters, and only they, end in _total";
    EXPECT_FALSE(f.help.empty()) << f.name;
    for (const auto& m : f.metric) EXPECT_EQ(labels_of(m).at("scenario"), "s") << f.name;
  }
  EXPECT_THAT(names, ::testing::UnorderedElementsAre(
                         "fencecheck_rejected_writes_total", "fencecheck_lease_expiries_during_work_total",
                         "fencecheck_holder_pause_seconds", "fencecheck_holder_pause_max_seconds",
                         "fencecheck_fault_pause_max_seconds", "fencecheck_worker_info",
                         "fencecheck_lease_ttl_seconds", "fencecheck_faults_injected_total",
                         "fencecheck_high_water_token", "fencecheck_issuer_token", "fencecheck_token_staleness",
                         "fencecheck_duplicate_effects_total", "fencecheck_anomalies_total", "fencecheck_scenario_passed",
                         "fencecheck_scenario_expects_safe", "fencecheck_scenario_duration_seconds", "fencecheck_last_run_timestamp_seconds"));
}

TEST(BuildRegistry, AnEmptyRunStillExportsItsAlwaysPresentSeries) {
  RunFigures f;
  f.scenario = "quiet";
  f.lock = "fencecheck/quiet";
  f.lease_ttl_s = 5;
  const auto all = build_registry(f)->Collect();
  EXPECT_EQ(family(all, "fencecheck_rejected_writes_total"), nullptr);
  EXPECT_EQ(family(all, "fencecheck_anomalies_total"), nullptr);
  EXPECT_EQ(family(all, "fencecheck_duplicate_effects_total"), nullptr);  // no key written
  EXPECT_EQ(gauge(all, "fencecheck_scenario_passed", {{"scenario", "quiet"}}), 0);
  EXPECT_EQ(gauge(all, "fencecheck_lease_ttl_seconds", {{"scenario", "quiet"}}), 5);
  auto stale = sample(all, "fencecheck_token_staleness", {{"scenario", "quiet"}});
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->histogram.sample_count, 0u);
}

TEST(BuildRegistry, ReportedDuplicateEffectsAddToTheZeroSeries) {
  RunFigures f = known_figures();
  f.duplicate_effects["ledger"] = 2;
  f.duplicate_effects["audit"] = 1;
  const auto all = build_registry(f)->Collect();
  EXPECT_EQ(counter(all, "fencecheck_duplicate_effects_total", {{"scenario", "s"}, {"resource", "store"}, {"key", "ledger"}}), 2);
  EXPECT_EQ(counter(all, "fencecheck_duplicate_effects_total", {{"scenario", "s"}, {"resource", "store"}, {"key", "audit"}}), 1);
}

// ---------------------------------------------------------------------------------------------
// run_figures: a run's evidence (history, read-back, analysis) -> its figures

TEST(RunFigures, TakesEachFigureFromTheRunsEvidence) {
  const Scenario sc = test_scenario("s");
  History h;
  h.push_back(ev("w1", EventKind::kAcquireOk, {.token = 5, .lock_key = "fencecheck/s/a"}));
  h.push_back(ev("w1", EventKind::kWriteInvoke, {.token = 5, .key = "ledger"}));
  h.push_back(ev("lock", EventKind::kLockGrant, {.token = 7, .lock_key = "fencecheck/s/b"}));
  h.push_back(ev("w2", EventKind::kAcquireOk, {.token = 7, .lock_key = "fencecheck/s/b"}));
  h.push_back(ev("w2", EventKind::kWriteInvoke, {.token = 7, .key = "ledger"}));
  h.push_back(ev("w1", EventKind::kWriteInvoke, {.token = 5, .key = "ledger"}));  // two tokens behind
  h.push_back(ev("w1", EventKind::kWriteFail, {.token = 5, .key = "ledger", .high_water = 7}));
  ReadBack rb;
  rb.resource = "store";
  rb.high_water = {{"ledger", 7}, {"other", 3}};
  // The payout for seg0: w2 (token 7), then stale w1 (token 5) again: one duplicate effect.
  rb.effects = {EffectRecord{"ledger", "w2:seg0", 7, "w2", 1, true, "unfenced"},
                EffectRecord{"ledger", "w1:seg0", 5, "w1", 2, true, "unfenced"}};
  const Analysis a = analyze(h, rb);

  const RunFigures f = run_figures(sc, "fencecheck/s", h, rb, a, false, 3.5, 1.8e9);
  EXPECT_EQ(f.scenario, "s");
  EXPECT_EQ(f.resource, "store");
  EXPECT_EQ(f.lease_ttl_s, 2);
  EXPECT_EQ(f.issuer_token, 7);
  EXPECT_THAT(f.token_staleness, ElementsAre(Pair(0, 2u), Pair(2, 1u)));  // three writes: staleness 0, 0, 2
  EXPECT_EQ(f.rejected_writes, (std::map<std::pair<std::string, std::string>, std::int64_t>{{{"ledger", "w1"}, 1}}));
  EXPECT_EQ(f.high_water, rb.high_water);
  EXPECT_EQ(f.duplicate_effects, (std::map<std::string, std::int64_t>{{"ledger", 1}}));
  EXPECT_EQ(f.anomalies.at("duplicate-effect"), 1);
  EXPECT_FALSE(f.passed);
  EXPECT_EQ(f.duration_s, 3.5);
  EXPECT_EQ(f.timestamp_s, 1.8e9);

  // Exported: the duplicate on its key, 0 on every other key the resource holds.
  const auto all = build_registry(f)->Collect();
  const LabelMap store{{"scenario", "s"}, {"resource", "store"}};
  auto at = [&](const std::string& key) {
    LabelMap l = store;
    l["key"] = key;
    return l;
  };
  EXPECT_EQ(counter(all, "fencecheck_duplicate_effects_total", at("ledger")), 1);
  EXPECT_EQ(counter(all, "fencecheck_duplicate_effects_total", at("other")), 0);
  EXPECT_EQ(counter(all, "fencecheck_anomalies_total", {{"scenario", "s"}, {"anomaly", "duplicate-effect"}}), 1);
}

TEST(RenderMetrics, IsTheTextFormatOfBuildRegistry) {
  const auto text = render_metrics(known_figures());
  EXPECT_EQ(text, serialize(build_registry(known_figures())->Collect()));
  EXPECT_THAT(text, HasSubstr("# TYPE fencecheck_rejected_writes_total counter\n"));
  EXPECT_THAT(text, HasSubstr("fencecheck_rejected_writes_total{source=\"file\",client=\"w1\",key=\"ledger\",resource=\"store\",scenario=\"s\"} 3\n"));
  // The bounds print as their three digits (le="5.88", never 5.8799999999999999).
  EXPECT_THAT(text, HasSubstr("fencecheck_holder_pause_seconds_bucket{source=\"file\",scenario=\"s\",worker=\"w1\",le=\"5.88\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("fencecheck_holder_pause_seconds_bucket{source=\"file\",scenario=\"s\",worker=\"w1\",le=\"0.0492\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("fencecheck_holder_pause_seconds_bucket{source=\"file\",scenario=\"s\",worker=\"w1\",le=\"+Inf\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("fencecheck_token_staleness_bucket{source=\"file\",scenario=\"s\",le=\"0\"} 2\n"));  // the dashboard's le="0"
  EXPECT_THAT(text, HasSubstr("fencecheck_last_run_timestamp_seconds{source=\"file\",scenario=\"s\"} 1700000000\n"));
  EXPECT_THAT(text, HasSubstr("fencecheck_worker_info{source=\"file\",scenario=\"s\",worker=\"w3\"} 1\n"));
}

TEST(WriteMetricsFile, WritesAtomicallyAndNamesTheFailingPath) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("fencecheck-metrics-test-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "metrics.prom";
  write_metrics_file(path, known_figures());
  std::ifstream in(path);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(), render_metrics(known_figures()));
  EXPECT_FALSE(std::filesystem::exists(dir / ".metrics.prom.tmp"));
  std::filesystem::remove_all(dir);
  try {
    write_metrics_file(dir / "missing" / "metrics.prom", known_figures());
    ADD_FAILURE() << "expected a throw";
  } catch (const std::runtime_error& err) {
    EXPECT_THAT(err.what(), HasSubstr("missing"));
  }
}

// ---------------------------------------------------------------------------------------------
// Addresses

TEST(ListenAddress, AcceptsLoopbackOnly) {
  auto a = parse_listen_address("127.0.0.1:9464");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 9464);
  EXPECT_EQ(a.civetweb(), "127.0.0.1:9464");
  EXPECT_EQ(parse_listen_address("127.1.2.3:0").civetweb(), "127.1.2.3:0");
  EXPECT_EQ(parse_listen_address("localhost:80").civetweb(), "127.0.0.1:80");
  EXPECT_EQ(parse_listen_address("127.0.0.1:65535").port, 65535);
}

TEST(ListenAddress, RefusesEverythingElseSayingWhy) {
  struct Case {
    const char* text;
    const char* why;
  };
  for (const auto& c : std::vector<Case>{{"0.0.0.0:9464", "not a loopback"},
                                          {"192.168.1.10:9464", "not a loopback"},
                                          {"10.0.0.1:9464", "not a loopback"},
                                          {"128.0.0.1:9464", "not a loopback"},
                                          {"example.com:9464", "not an IPv4 address"},
                                          {":9464", "every interface"},
                                          {"9464", "every interface"},
                                          {"127.0.0.1:", "port"},
                                          {"127.0.0.1:65536", "port"},
                                          {"127.0.0.1:-1", "port"},
                                          {"127.0.0.1:94x", "port"},
                                          {"[::1]:9464", "IPv6"},
                                          {"[::]:9464", "IPv6"},
                                          {"::1:9464", "IPv6"}}) {
    try {
      (void)parse_listen_address(c.text);
      ADD_FAILURE() << c.text << " was accepted";
    } catch (const MetricsConfigError& err) {
      EXPECT_THAT(err.what(), HasSubstr("--metrics-listen " + std::string(c.text))) << c.text;
      EXPECT_THAT(err.what(), HasSubstr(c.why)) << c.text;
    }
  }
}

TEST(PushgatewayUrl, ParsesSchemeHostAndPort) {
  auto u = parse_pushgateway_url("http://127.0.0.1:9091");
  EXPECT_EQ(u.scheme, "http");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, "9091");
  EXPECT_EQ(u.base(), "http://127.0.0.1:9091");
  EXPECT_EQ(parse_pushgateway_url("http://127.0.0.1:9091/").base(), "http://127.0.0.1:9091");
  EXPECT_EQ(parse_pushgateway_url("HTTPS://pushgateway.staging").base(), "https://pushgateway.staging:443");
  EXPECT_EQ(parse_pushgateway_url("http://localhost").base(), "http://localhost:80");
  EXPECT_EQ(parse_pushgateway_url("http://[::1]:9091").base(), "http://[::1]:9091");
}

TEST(PushgatewayUrl, RefusesWhatItCannotPushTo) {
  for (const char* bad : {"127.0.0.1:9091", "ftp://h:21", "http://", "http://:9091", "http://h:0", "http://h:99999",
                          "http://h:", "http://h:9091/prefix", "http://u:p@h:9091", "http://h:9091?x=1", "http://[::1"}) {
    EXPECT_THROW((void)parse_pushgateway_url(bad), MetricsConfigError) << bad;
  }
}

TEST(GroupingPath, IsJobInstanceNightScenarioWithBase64ForUnsafeValues) {
  EXPECT_EQ(grouping_path("sigstop-past-lease", "ci-1.example", "20261206T023000Z-4242"),
            "/metrics/job/fencecheck/instance/ci-1.example/night/20261206T023000Z-4242/scenario/sigstop-past-lease");
  EXPECT_EQ(grouping_path("s", "a/b", "n"), "/metrics/job/fencecheck/instance@base64/YS9i/night/n/scenario/s");
  EXPECT_EQ(grouping_path("s", "ab", "n"), "/metrics/job/fencecheck/instance/ab/night/n/scenario/s");
  EXPECT_EQ(grouping_path("s", "a b", "n"), "/metrics/job/fencecheck/instance@base64/YSBi/night/n/scenario/s");
  EXPECT_EQ(grouping_path("s", "a b?", "n"), "/metrics/job/fencecheck/instance@base64/YSBiPw==/night/n/scenario/s");
  EXPECT_EQ(grouping_path("s", "", "n"), "/metrics/job/fencecheck/instance@base64/=/night/n/scenario/s");
  EXPECT_EQ(grouping_path("s", "ci", "a b"), "/metrics/job/fencecheck/instance/ci/night@base64/YSBi/scenario/s");
}

TEST(GroupingPath, TwoNightsOfOneScenarioOnOneHostAreTwoGroups) {
  // A CI run and the nightly on one host at once (issue 34 item 3): before, both pushed to one
  // group and the second overwrote the first's failure.
  EXPECT_NE(grouping_path("orders", "ci-7", "20261206T030000Z-100"), grouping_path("orders", "ci-7", "20261206T030000Z-101"));
}

/// A /api/v1/metrics answer of Pushgateway 1.5 with the groups given as (labels, last run end,
/// push time); a negative time leaves that family out.
std::string api_metrics(const std::vector<std::tuple<nlohmann::json, double, double>>& groups) {
  nlohmann::json data = nlohmann::json::array();
  for (const auto& [labels, ended, pushed] : groups) {
    nlohmann::json g{{"labels", labels}, {"last_push_successful", true}};
    const auto family = [](double v) {
      std::ostringstream text;
      text << std::setprecision(17) << v;
      return nlohmann::json{{"type", "GAUGE"}, {"metrics", {{{"labels", nlohmann::json::object()}, {"value", text.str()}}}}};
    };
    if (ended >= 0) g["fencecheck_last_run_timestamp_seconds"] = family(ended);
    if (pushed >= 0) g["push_time_seconds"] = family(pushed);
    data.push_back(g);
  }
  return nlohmann::json{{"status", "success"}, {"data", data}}.dump();
}

nlohmann::json group_labels(const std::string& instance, const std::string& night, const std::string& scenario) {
  nlohmann::json l{{"job", "fencecheck"}, {"instance", instance}, {"scenario", scenario}};
  if (!night.empty()) l["night"] = night;
  return l;
}

TEST(PushedGroups, ParseTheApiAnswerWithTheRunsOwnEndElseThePushTime) {
  const auto groups = parse_pushed_groups(api_metrics({{group_labels("ci", "n1", "s"), 1000.5, 1002},
                                                       {group_labels("ci", "n2", "s"), -1, 2002},
                                                       {group_labels("ci", "n3", "s"), -1, -1}}));
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].labels.at("night"), "n1");
  EXPECT_EQ(groups[0].labels.at("job"), "fencecheck");
  EXPECT_EQ(groups[0].ended_s, 1000.5);
  EXPECT_EQ(groups[1].ended_s, 2002);
  EXPECT_EQ(groups[2].ended_s, 0);
  EXPECT_THROW((void)parse_pushed_groups("<html>"), std::invalid_argument);
  EXPECT_THROW((void)parse_pushed_groups(R"({"status":"error"})"), std::invalid_argument);
}

TEST(PushedGroups, ARunSupersedesOnlyEarlierNightsOfItsScenarioOnItsInstanceOnceScraped) {
  using namespace std::chrono_literals;
  // This run: night "now", scenario s on instance ci, started at 10000, pushing at 10100.
  const auto groups = parse_pushed_groups(api_metrics({
      {group_labels("ci", "old", "s"), 5000, 5001},         // yesterday's: superseded
      {group_labels("ci", "", "s"), 4000, 4001},            // pushed before nights were in the key: superseded
      {group_labels("ci", "overlap", "s"), 10050, 10051},   // ended after this run began: both stay
      {group_labels("ci", "recent", "s"), 9950, 9951},      // ended before it began, but only 150 s ago: kept (grace 200 s)
      {group_labels("ci", "now", "s"), 10100, 10100},       // this run's own group
      {group_labels("ci-2", "old", "s"), 5000, 5001},       // another host's
      {group_labels("ci", "old", "t"), 5000, 5001},         // another scenario's
      {group_labels("ci", "unknown", "s"), -1, -1},         // no time: never deleted blindly
  }));
  const auto gone = superseded_groups(groups, "s", "ci", "now", 10000, 10100, 200s);
  std::vector<std::string> nights;
  for (const auto& g : gone) nights.push_back(g.labels.count("night") ? g.labels.at("night") : "(none)");
  EXPECT_THAT(nights, ::testing::ElementsAre("old", "(none)"));
  // The default grace (15 min) keeps the one that ended 150 s ago too; with none it goes.
  EXPECT_EQ(superseded_groups(groups, "s", "ci", "now", 10000, 10100, kSupersededGroupGrace).size(), 2u);
  EXPECT_EQ(superseded_groups(groups, "s", "ci", "now", 10000, 10100, 0s).size(), 3u);  // + "recent"
}

// ---------------------------------------------------------------------------------------------
// Push (to an in-process HTTP server on 127.0.0.1 that records what it was sent)

class FakePushgateway {
 public:
  /// What the last push sent.
  struct Received {
    std::string method, path, body, content_type;
  };

  explicit FakePushgateway(int status) {
    auto record = [this, status](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu_);
      last_ = {req.method, req.path, req.body, req.get_header_value("Content-Type")};
      res.status = status;
    };
    server_.Put(R"(/metrics/job/.*)", record);
    server_.Post(R"(/metrics/job/.*)", record);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakePushgateway() {
    server_.stop();
    thread_.join();
  }
  [[nodiscard]] int port() const { return port_; }
  Received last() {
    std::lock_guard lock(mu_);
    return last_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  Received last_;
};

TEST(PushMetrics, PutsBuildRegistryUnderTheGroupingKey) {
  FakePushgateway pg(200);
  const auto url = parse_pushgateway_url("http://127.0.0.1:" + std::to_string(pg.port()));
  const auto out = push_metrics(url, build_registry(known_figures()), "s", "ci-1", "n1");
  EXPECT_TRUE(out.ok) << out.error;
  EXPECT_EQ(out.status, 200);
  EXPECT_EQ(out.url, "http://127.0.0.1:" + std::to_string(pg.port()) + "/metrics/job/fencecheck/instance/ci-1/night/n1/scenario/s");
  const auto got = pg.last();
  EXPECT_EQ(got.method, "PUT");  // replaces the whole group: a vanished anomaly does not linger
  EXPECT_EQ(got.path, "/metrics/job/fencecheck/instance/ci-1/night/n1/scenario/s");
  EXPECT_EQ(got.body, render_metrics(known_figures()));
  EXPECT_THAT(got.content_type, HasSubstr("text/plain"));
}

TEST(PushMetrics, ReportsARefusalWithItsStatus) {
  FakePushgateway pg(400);
  const auto out = push_metrics(parse_pushgateway_url("http://127.0.0.1:" + std::to_string(pg.port())),
                                build_registry(known_figures()), "s", "ci-1", "n1");
  EXPECT_FALSE(out.ok);
  EXPECT_EQ(out.status, 400);
  EXPECT_EQ(out.error, "HTTP 400 from the Pushgateway");
}

TEST(PushMetrics, ReportsNoAnswerWithoutThrowing) {
  const int port = process::free_tcp_port("127.0.0.1");
  const auto out = push_metrics(parse_pushgateway_url("http://127.0.0.1:" + std::to_string(port)),
                                build_registry(known_figures()), "s", "ci-1", "n1");
  EXPECT_FALSE(out.ok);
  EXPECT_EQ(out.status, -7);  // CURLE_COULDNT_CONNECT
  EXPECT_THAT(out.error, HasSubstr("libcurl error 7"));
}

// ---------------------------------------------------------------------------------------------
// LiveMetrics

TEST(LiveMetrics, FollowsTheEventsOfTheRunningScenario) {
  const Scenario sc = test_scenario("live");
  LiveMetrics live;
  live.start(sc);
  const LabelMap s{{"scenario", "live"}};
  auto with = [&](LabelMap extra) {
    extra.insert(s.begin(), s.end());
    return extra;
  };
  EXPECT_EQ(gauge(live.Collect(), "fencecheck_lease_ttl_seconds", s), 2);
  EXPECT_EQ(gauge(live.Collect(), "fencecheck_scenario_expects_safe", s), 1);  // test_scenario expects safety
  // An anomaly found while the run goes (the live checker) counts at once, per name.
  const auto before = live.Collect();
  EXPECT_EQ(family(before, "fencecheck_anomalies_total"), nullptr) << "no anomaly yet";
  live.anomaly("stale-write-accepted");
  live.anomaly("stale-write-accepted");
  live.anomaly("token-regression");
  EXPECT_EQ(counter(live.Collect(), "fencecheck_anomalies_total", with({{"anomaly", "stale-write-accepted"}})), 2);
  EXPECT_EQ(counter(live.Collect(), "fencecheck_anomalies_total", with({{"anomaly", "token-regression"}})), 1);

  auto feed = [&](const Event& e) { live.event(e); };
  Event start = ev("harness", EventKind::kRunStart);
  start.lock = "fencecheck/live";
  feed(start);
  Event acq = ev("w1", EventKind::kAcquireOk, {.token = 10, .lock_key = "fencecheck/live/k1"});
  acq.lock = "fencecheck/live";
  feed(acq);
  feed(ev("lock", EventKind::kLockGrant, {.token = 12, .lock_key = "fencecheck/live/k2"}));  // w2 queues behind w1
  feed(ev("w1", EventKind::kWriteInvoke, {.token = 10, .key = "ledger", .ns = 100}));
  feed(ev("w1", EventKind::kWriteOk, {.token = 10, .key = "ledger", .high_water = 10}));
  Event inject = ev("harness", EventKind::kFaultInject);
  inject.fault = "sigstop";
  inject.target = "w1";
  feed(inject);

  auto now = live.Collect();
  EXPECT_EQ(counter(now, "fencecheck_faults_injected_total", with({{"kind", "sigstop"}})), 1);
  EXPECT_EQ(gauge(now, "fencecheck_issuer_token", with({{"lock", "fencecheck/live"}})), 12);
  EXPECT_EQ(gauge(now, "fencecheck_high_water_token", with({{"resource", "store"}, {"key", "ledger"}})), 10);
  auto stale = sample(now, "fencecheck_token_staleness", s);
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->histogram.sample_count, 1u);
  EXPECT_EQ(stale->histogram.sample_sum, 2.0);  // issued 12, presented 10
  EXPECT_EQ(family(now, "fencecheck_scenario_passed"), nullptr);  // only at the end
  EXPECT_EQ(family(now, "fencecheck_lease_expiries_during_work_total"), nullptr);

  // The lock service deletes w1's key while w1 is stopped; w2 takes over.
  feed(ev("lock", EventKind::kLockDelete, {.token = 10, .lock_key = "fencecheck/live/k1", .revision = 20, .ns = 1000}));
  EXPECT_EQ(family(live.Collect(), "fencecheck_lease_expiries_during_work_total"), nullptr);  // not yet known
  feed(ev("w2", EventKind::kAcquireOk, {.token = 12, .lock_key = "fencecheck/live/k2"}));
  feed(ev("w2", EventKind::kWriteOk, {.token = 12, .key = "ledger", .high_water = 12}));
  // w1 resumes: its ticker reports the pause, then it writes with its old token.
  Event pause = ev("w1", EventKind::kPause);
  pause.duration_ns = 6'000'000'000;
  pause.token = 10;
  feed(pause);
  feed(ev("w1", EventKind::kWriteInvoke, {.token = 10, .key = "ledger", .ns = 2000}));
  feed(ev("w1", EventKind::kWriteFail, {.token = 10, .key = "ledger", .high_water = 12, .ns = 2001}));

  now = live.Collect();
  EXPECT_EQ(counter(now, "fencecheck_lease_expiries_during_work_total", with({{"lock", "fencecheck/live"}, {"worker", "w1"}})), 1);
  EXPECT_EQ(counter(now, "fencecheck_rejected_writes_total", with({{"resource", "store"}, {"key", "ledger"}, {"client", "w1"}})), 1);
  EXPECT_EQ(gauge(now, "fencecheck_high_water_token", with({{"resource", "store"}, {"key", "ledger"}})), 12);
  auto w1 = sample(now, "fencecheck_holder_pause_seconds", with({{"worker", "w1"}}));
  ASSERT_TRUE(w1);
  EXPECT_EQ(w1->histogram.sample_sum, 6.0);
  EXPECT_EQ(cumulative_at(*w1, 5.88), 0u);
  EXPECT_EQ(cumulative_at(*w1, 6.42), 1u);
  EXPECT_EQ(gauge(now, "fencecheck_holder_pause_max_seconds", with({{"worker", "w1"}})), 6.0);
  EXPECT_EQ(gauge(now, "fencecheck_holder_pause_max_seconds", with({{"worker", "w2"}})), 0);
  for (const auto& f : now)
    for (const auto& m : f.metric) EXPECT_EQ(source_of(m), "live") << f.name;

  // w2 finishes and releases: a delete explained by a release is not an expiry, whichever of
  // the two the harness receives first.
  feed(ev("lock", EventKind::kLockDelete, {.token = 12, .lock_key = "fencecheck/live/k2", .revision = 30, .ns = 3000}));
  feed(ev("w2", EventKind::kReleaseOk, {.token = 12, .lock_key = "fencecheck/live/k2", .revision = 30}));
  // Even a later write with that token is not counted once released.
  feed(ev("w2", EventKind::kWriteInvoke, {.token = 12, .key = "ledger", .ns = 4000}));
  EXPECT_EQ(family(live.Collect(), "fencecheck_lease_expiries_during_work_total")->metric.size(), 1u);
}

TEST(LiveMetrics, ADeleteAfterJobDoneIsNotAnExpiryDuringWork) {
  LiveMetrics live;
  live.start(test_scenario("done"));
  live.event(ev("w1", EventKind::kAcquireOk, {.token = 5, .lock_key = "k"}));
  live.event(ev("w1", EventKind::kJobDone, {.token = 5}));
  live.event(ev("lock", EventKind::kLockDelete, {.token = 5, .lock_key = "k", .ns = 10}));
  live.event(ev("w1", EventKind::kWriteInvoke, {.token = 5, .ns = 20}));
  EXPECT_EQ(family(live.Collect(), "fencecheck_lease_expiries_during_work_total"), nullptr);
}

TEST(LiveMetrics, AStoppingFaultsHealSetsTheHarnessWindowAndAThrottleDoesNot) {
  // Issue 31 item 6: the pause panel shows the harness's own measure of each stop as it heals,
  // whether or not the worker measures its pauses itself.
  LiveMetrics live;
  live.start(test_scenario("stops"));
  auto heal = [](const std::string& fault, const std::string& target, std::int64_t ns) {
    Event e = ev("harness", EventKind::kFaultHeal);
    e.fault = fault;
    e.target = target;
    e.duration_ns = ns;
    return e;
  };
  live.event(heal("sigstop", "w1", 3'500'000'000));
  live.event(heal("freeze", "w1", 6'000'000'000));
  live.event(heal("sigstop", "w1", 4'000'000'000));    // shorter: the longest stays
  live.event(heal("cpu-throttle", "w2", 9'000'000'000));  // the worker kept running: not a stop
  const auto now = live.Collect();
  EXPECT_EQ(gauge(now, "fencecheck_fault_pause_max_seconds", {{"scenario", "stops"}, {"worker", "w1"}}), 6.0);
  EXPECT_FALSE(has_sample(now, "fencecheck_fault_pause_max_seconds", {{"scenario", "stops"}, {"worker", "w2"}}));
}

TEST(LiveMetrics, FinishReplacesTheLiveSeriesWithBuildRegistry) {
  LiveMetrics live;
  live.start(test_scenario("s"));
  Event inject = ev("harness", EventKind::kFaultInject);
  inject.fault = "sigstop";
  live.event(inject);
  live.event(inject);  // the live count says 2; the figures say 1: the figures win
  live.finish("s", build_registry(known_figures()));
  EXPECT_EQ(serialize(live.Collect()), render_metrics(known_figures()));
  live.event(inject);  // after the end: ignored
  EXPECT_EQ(serialize(live.Collect()), render_metrics(known_figures()));
}

TEST(LiveMetrics, MergesScenariosIntoOneFamilyPerName) {
  LiveMetrics live;
  live.start(test_scenario("s"));
  live.finish("s", build_registry(known_figures()));
  live.start(test_scenario("other"));
  const auto all = live.Collect();
  std::map<std::string, int> seen;
  for (const auto& f : all) ++seen[f.name];
  for (const auto& [name, n] : seen) EXPECT_EQ(n, 1) << name;
  const auto* ttl = family(all, "fencecheck_lease_ttl_seconds");
  ASSERT_NE(ttl, nullptr);
  EXPECT_EQ(ttl->metric.size(), 2u);
  EXPECT_EQ(gauge(all, "fencecheck_lease_ttl_seconds", {{"scenario", "other"}}), 2);
  EXPECT_EQ(gauge(all, "fencecheck_scenario_passed", {{"scenario", "s"}}), 1);

  // The same scenario again: its old final series go, so no series appears twice.
  live.start(test_scenario("s"));
  EXPECT_EQ(family(live.Collect(), "fencecheck_scenario_passed"), nullptr);
}

TEST(LiveMetrics, CollectIsSafeWhileEventsArrive) {
  LiveMetrics live;
  live.start(test_scenario("s"));
  std::atomic<bool> stop{false};
  std::atomic<int> collected{0};
  std::thread scraper([&] {
    while (!stop) {
      auto all = live.Collect();
      collected += all.empty() ? 0 : 1;
    }
  });
  // At least 2000 events, and on until the scraper has collected 20 times meanwhile (so the two
  // really overlap, however the threads are scheduled).
  for (int i = 0; i < 2000 || collected < 20; ++i) {
    live.event(ev("w" + std::to_string(i % 7), EventKind::kWriteFail,
                  {.token = i, .key = "k" + std::to_string(i % 13), .high_water = i}));
  }
  live.finish("s", build_registry(known_figures()));
  stop = true;
  scraper.join();
  EXPECT_EQ(serialize(live.Collect()), render_metrics(known_figures()));
}

// ---------------------------------------------------------------------------------------------
// MetricsObserver: /metrics over HTTP on 127.0.0.1 (port 0: any free one)

TEST(MetricsObserver, ServesLiveThenFinalMetricsOnLoopback) {
  MetricsObserver::Options o;
  o.listen = parse_listen_address("127.0.0.1:0");
  MetricsObserver obs(o);
  ASSERT_TRUE(obs.listening_port());
  ASSERT_GT(*obs.listening_port(), 0);
  httplib::Client client("127.0.0.1", *obs.listening_port());

  const Scenario sc = test_scenario("s");
  obs.on_start(sc, "/nonexistent");
  Event inject = ev("harness", EventKind::kFaultInject);
  inject.fault = "sigstop";
  obs.on_event(sc, inject);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_THAT(res->body, HasSubstr("fencecheck_faults_injected_total{source=\"live\",kind=\"sigstop\",scenario=\"s\"} 1\n"));
  EXPECT_THAT(res->body, HasSubstr("fencecheck_lease_ttl_seconds{source=\"live\",scenario=\"s\"} 2\n"));
  // Every worker of the scenario from the start (the dashboard's worker list), none paused yet.
  EXPECT_THAT(res->body, HasSubstr("fencecheck_worker_info{source=\"live\",scenario=\"s\",worker=\"w2\"} 1\n"));
  EXPECT_THAT(res->body, HasSubstr("fencecheck_holder_pause_seconds_count{source=\"live\",scenario=\"s\",worker=\"w2\"} 0\n"));
  EXPECT_THAT(res->body, ::testing::Not(HasSubstr("fencecheck_scenario_passed")));

  ScenarioResult result;
  Analysis analysis;
  obs.on_finish(sc, result, analysis, known_figures());
  res = client.Get("/metrics");
  ASSERT_TRUE(res);
  for (const auto& line : sample_lines(render_metrics(known_figures(), MetricsSource::kLive)))
    EXPECT_THAT(res->body, HasSubstr(line + "\n"));
  EXPECT_TRUE(obs.pushes().empty());
}

// --metrics-linger: the wait ends with the first scrape that returned the final results; a scrape
// from before the last scenario ended does not count; without a scrape it ends at the bound.
TEST(MetricsObserver, LingersUntilTheFinalResultsAreScraped) {
  MetricsObserver::Options o;
  o.listen = parse_listen_address("127.0.0.1:0");
  MetricsObserver obs(o);
  ASSERT_TRUE(obs.listening_port());
  httplib::Client client("127.0.0.1", *obs.listening_port());
  const Scenario sc = test_scenario("s");
  ScenarioResult result;
  Analysis analysis;

  EXPECT_FALSE(obs.linger(std::chrono::seconds(60), nullptr).scraped);  // nothing finished: at once
  obs.on_start(sc, "/nonexistent");
  ASSERT_TRUE(client.Get("/metrics"));  // during the run
  obs.on_finish(sc, result, analysis, known_figures());
  const auto unscraped = obs.linger(std::chrono::milliseconds(300), nullptr);
  EXPECT_FALSE(unscraped.scraped);
  EXPECT_GE(unscraped.waited, std::chrono::milliseconds(300));
  EXPECT_FALSE(obs.linger(std::chrono::milliseconds(0), nullptr).scraped);  // 0: disabled

  std::atomic<bool> stop{true};
  EXPECT_FALSE(obs.linger(std::chrono::seconds(60), &stop).scraped);  // Ctrl-C: returns at once

  std::string body;
  std::thread scraper([&] {
    // Scrape until the observer is waiting (one scrape after finish would do; repeat so the
    // test does not depend on which of the two threads runs first).
    for (int i = 0; i < 600 && body.find("fencecheck_scenario_passed") == std::string::npos; ++i) {
      if (auto res = client.Get("/metrics")) body = res->body;
    }
  });
  const auto scraped = obs.linger(std::chrono::seconds(60), nullptr);
  scraper.join();
  EXPECT_TRUE(scraped.scraped);
  EXPECT_LT(scraped.waited, std::chrono::seconds(60));
  EXPECT_THAT(body, HasSubstr("fencecheck_scenario_passed{source=\"live\",scenario=\"s\"} 1\n"));
}

TEST(MetricsObserver, RecordsAFailedPushAndCarriesOn) {
  MetricsObserver::Options o;
  o.pushgateway = parse_pushgateway_url("http://127.0.0.1:" + std::to_string(process::free_tcp_port("127.0.0.1")));
  o.instance = "ci";
  MetricsObserver obs(o);
  const Scenario sc = test_scenario("s");
  obs.on_start(sc, "/nonexistent");
  ScenarioResult result;
  result.run_dir = "/nonexistent/20261206T030000Z-s";  // no night file: the run id is its night
  Analysis analysis;
  obs.on_finish(sc, result, analysis, known_figures());
  ASSERT_EQ(obs.pushes().size(), 1u);
  EXPECT_FALSE(obs.pushes()[0].ok);
  EXPECT_EQ(obs.pushes()[0].scenario, "s");
  EXPECT_THAT(obs.pushes()[0].url, HasSubstr("/metrics/job/fencecheck/instance/ci/night/20261206T030000Z-s/scenario/s"));
}

TEST(MetricsObserver, PushesUnderTheNightTheRunDirectoryRecords) {
  FakePushgateway pg(200);
  MetricsObserver::Options o;
  o.pushgateway = parse_pushgateway_url("http://127.0.0.1:" + std::to_string(pg.port()));
  o.instance = "ci";
  MetricsObserver obs(o);
  const Scenario sc = test_scenario("s");
  fencecheck::testing::TempDir dir("night");
  const auto run_dir = dir.path() / "20261206T030001Z-s";
  std::filesystem::create_directories(run_dir);
  record_night(run_dir, "20261206T030000Z-4242");
  ScenarioResult result;
  result.run_dir = run_dir;
  Analysis analysis;
  obs.on_finish(sc, result, analysis, known_figures());
  ASSERT_EQ(obs.pushes().size(), 1u);
  EXPECT_TRUE(obs.pushes()[0].ok) << obs.pushes()[0].error;
  EXPECT_EQ(pg.last().path, "/metrics/job/fencecheck/instance/ci/night/20261206T030000Z-4242/scenario/s");
}

TEST(MetricsObserver, NamesAnAddressItCannotBind) {
  // Hold a loopback port, then ask the observer for it.
  const fencecheck::testing::BusyPort busy;
  const int port = busy.port();
  MetricsObserver::Options o;
  o.listen = parse_listen_address("127.0.0.1:" + std::to_string(port));
  try {
    MetricsObserver obs(o);
    ADD_FAILURE() << "bound a port already in use";
  } catch (const std::runtime_error& err) {
    EXPECT_EQ(std::string(err.what()), "--metrics-listen 127.0.0.1:" + std::to_string(port) +
                                           " is already in use (another process listens there): choose another "
                                           "port, or port 0 for any free one");
  }
}

// ---------------------------------------------------------------------------------------------
// The CLI refuses bad metrics flags before anything starts.

struct Ran {
  int code = -1;
  std::string output;
};

Ran run_cli(const std::string& args) {
  const std::string cmd = std::string("'") + FENCECHECK_BIN + "' " + args + " 2>&1";
  Ran r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) r.output += buf;
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(Cli, RefusesANonLoopbackListenAddressWithExitCode2) {
  const std::string smoke = std::string(FENCECHECK_SOURCE_DIR) + "/scenarios/smoke";
  for (const char* addr : {"0.0.0.0:9464", "192.168.1.10:9464", ":9464"}) {
    const auto r = run_cli("run '" + smoke + "' --run-root /nonexistent/fencecheck-should-not-run --metrics-listen " + addr);
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr("--metrics-listen " + std::string(addr))) << r.output;
  }
  const auto r = run_cli("run '" + smoke + "' --run-root /nonexistent/x --pushgateway 127.0.0.1:9091");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--pushgateway 127.0.0.1:9091")) << r.output;
  EXPECT_FALSE(std::filesystem::exists("/nonexistent/x"));
}

}  // namespace
}  // namespace fencecheck::harness
