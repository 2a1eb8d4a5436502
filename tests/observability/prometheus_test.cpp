// Integration: the metrics, dashboard and alert rules against a real Prometheus and Pushgateway
// (Debian's prometheus and prometheus-pushgateway), and the live /metrics endpoint of a real run.
// Everything listens on 127.0.0.1 (free ports) with temporary directories; every wait polls for
// a condition with a bound; nothing asserts on timing.
//
//   Prometheus.*   starts a Pushgateway and a Prometheus (scraping it with honor_labels every
//                  second, with dashboards/alerts.yml loaded), runs `fencecheck run` with
//                  --pushgateway on scenarios/smoke (both pass) and on tests/observability/scenarios
//                  (one never exercises fencing, one fails), waits until Prometheus has scraped all
//                  four, then evaluates every dashboard panel's and variable's query and every
//                  alert rule's expression through the HTTP API and checks the values.
//   PushFailure.*  a push to a closed port: reported in the summary, logged, verdict unchanged.
//   LiveEndpoint.* a run with --metrics-listen, scraped while w1 is SIGSTOPped, and after the run
//                  (--metrics-linger keeps it up until then); an anomaly counted the moment it is
//                  found, before the run ends; a bad --metrics-linger is refused.
//   TwoWaysOut.*   a Prometheus scraping the Pushgateway and the live endpoint of one run: each
//                  panel, selecting one source, counts the run once; the last result is scraped.
//                  And a 6 s / 20 s pause read through the pause panel within 10 %.
//   TwoRuns.*      two runs of one scenario at once (one fails, one passes), both pushed: two
//                  groups, the failure seen by Prometheus and the alert; superseded groups pruned.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "../support/temp_dir.h"
#include "fencecheck/process/child_process.h"
#include "fencecheck/process/server_support.h"
#include "fencecheck/harness/live_metrics.h"
#include "fencecheck/harness/metrics.h"

namespace fencecheck::harness {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using ::testing::HasSubstr;

const fs::path kSource = FENCECHECK_SOURCE_DIR;
const fs::path kFencecheck = FENCECHECK_BIN;

constexpr const char* kFenced = "sigstop-past-lease";
constexpr const char* kUnfenced = "sigstop-past-lease-unfenced";
constexpr const char* kNotExercised = "obs-fencing-not-exercised";
constexpr const char* kFails = "obs-unfenced-expected-safe";

// ---------------------------------------------------------------------------------------------
// Helpers

/// tests/support/temp_dir.h, under the tag "obs-<tag>".
class TempDir : public ::fencecheck::testing::TempDir {
 public:
  explicit TempDir(const std::string& tag) : ::fencecheck::testing::TempDir("obs-" + tag) {}
};


/// Polls `ready` every 50 ms until it holds or `bound` passes; true when it held.
bool poll_until(std::chrono::milliseconds bound, const std::function<bool()>& ready) {
  const auto deadline = Clock::now() + bound;
  while (true) {
    if (ready()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

/// A Prometheus server (Prometheus, Pushgateway) on 127.0.0.1:port answers /-/ready within `bound`.
bool ready(int port, std::chrono::milliseconds bound) {
  httplib::Client client("127.0.0.1", port);
  return poll_until(bound, [&] {
    auto r = client.Get("/-/ready");
    return r && r->status == 200;
  });
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A program started by the test; killed (SIGCONT, SIGTERM, SIGKILL) at scope exit.
struct Program {
  std::unique_ptr<process::ChildProcess> proc;
  std::mutex mu;
  std::string out;  // stdout
  fs::path log;     // stderr

  Program(const std::string& name, const fs::path& exe, std::vector<std::string> args, const fs::path& log_path)
      : log(log_path) {
    process::ChildSpec spec;
    spec.name = name;
    spec.exe = exe;
    spec.args = std::move(args);
    spec.stderr_log = log_path;
    proc = std::make_unique<process::ChildProcess>(spec, [this](std::string_view line, std::int64_t, bool eof) {
      if (eof) return;
      std::lock_guard lock(mu);
      out.append(line).push_back('\n');
    });
  }
  std::string stdout_text() {
    std::lock_guard lock(mu);
    return out;
  }
};

/// Waits (bounded) for a started fencecheck to end; returns (exit code, stdout).
std::pair<int, std::string> finish(Program& p) {
  auto code = p.proc->wait_for(std::chrono::minutes(4));
  if (!code) code = p.proc->terminate();
  p.proc.reset();  // joins the reader: stdout is complete
  return {*code, p.out};
}

/// Runs fencecheck to completion (bounded); returns (exit code, stdout); stderr goes to `log`.
std::pair<int, std::string> run_fencecheck(std::vector<std::string> args, const fs::path& log) {
  Program p("fencecheck", kFencecheck, std::move(args), log);
  return finish(p);
}

/// One sample of an instant vector.
struct Sample {
  std::map<std::string, std::string> labels;
  double value = 0;
};

class PrometheusApi {
 public:
  explicit PrometheusApi(int port) : client_("127.0.0.1", port) { client_.set_read_timeout(10, 0); }

  /// Instant query; fails the test on an API error (bad expression, ...).
  std::vector<Sample> query(const std::string& expr) { return query_params({{"query", expr}}); }
  /// Instant query evaluated at `time` (Unix seconds).
  std::vector<Sample> query_at(const std::string& expr, const std::string& time) {
    return query_params({{"query", expr}, {"time", time}});
  }

 private:
  std::vector<Sample> query_params(const httplib::Params& params) {
    const json data = get_data("/api/v1/query", params);
    std::vector<Sample> out;
    if (data.is_null()) return out;
    if (data["resultType"] == "scalar") {
      out.push_back({{}, std::stod(data["result"][1].get<std::string>())});
      return out;
    }
    for (const auto& r : data["result"]) {
      Sample s;
      for (const auto& [k, v] : r["metric"].items()) s.labels[k] = v.get<std::string>();
      s.value = std::stod(r["value"][1].get<std::string>());
      out.push_back(std::move(s));
    }
    return out;
  }

 public:

  /// /api/v1/label/<label>/values?match[]=<selector>
  std::set<std::string> label_values(const std::string& label, const std::string& selector) {
    std::set<std::string> out;
    const json data = get_data("/api/v1/label/" + label + "/values", {{"match[]", selector}});
    for (const auto& v : data) out.insert(v.get<std::string>());
    return out;
  }

  /// The firing alerts as "Alertname scenario[ worker]" strings.
  std::set<std::string> firing() {
    std::set<std::string> out;
    const json data = get_data("/api/v1/alerts");
    if (data.is_null()) return out;
    for (const auto& a : data["alerts"]) {
      if (a.value("state", "") != "firing") continue;
      std::string s = a["labels"].value("alertname", "") + " " + a["labels"].value("scenario", "");
      if (a["labels"].contains("worker")) s += " " + a["labels"]["worker"].get<std::string>();
      out.insert(s);
    }
    return out;
  }

  /// Every rule of every loaded group has been evaluated at least once (its lastEvaluation is
  /// after Go's zero time), and at least one rule is loaded.
  bool rules_evaluated() {
    const json data = get_data("/api/v1/rules");
    if (data.is_null()) return false;
    std::size_t rules = 0;
    for (const auto& g : data["groups"])
      for (const auto& r : g["rules"]) {
        ++rules;
        if (r.value("lastEvaluation", "").rfind("0001-", 0) == 0) return false;
      }
    return rules > 0;
  }

 private:
  /// GET path?params; the answer's `data` member, or null (and a test failure) when Prometheus
  /// gives no answer or an error. Callers keep the result in a local before iterating it:
  /// `for (x : get_data(...)["k"])` (or `json::parse(...)["k"]`) iterates a reference into a
  /// temporary that is already destroyed (before C++23), which is how this test once saw empty
  /// label values and no alerts from a Prometheus that had them.
  json get_data(const std::string& path, const httplib::Params& params = {}) {
    auto res = client_.Get(path, params, httplib::Headers{});
    if (!res) {
      ADD_FAILURE() << "no answer from Prometheus for " << path << " " << shown(params);
      return nullptr;
    }
    json j = json::parse(res->body, nullptr, false);
    if (res->status != 200 || j.is_discarded() || j.value("status", "") != "success") {
      ADD_FAILURE() << path << " " << shown(params) << ": HTTP " << res->status << " " << res->body;
      return nullptr;
    }
    return std::move(j["data"]);
  }

  static std::string shown(const httplib::Params& params) {
    std::string out;
    for (const auto& [k, v] : params) out += k + "=" + v + " ";
    return out;
  }

 private:
  httplib::Client client_;
};

/// scenario -> value, from samples that carry a `scenario` label (plus an optional second label).
std::map<std::string, double> by_scenario(const std::vector<Sample>& samples, const std::string& also = "") {
  std::map<std::string, double> out;
  for (const auto& s : samples) {
    std::string k = s.labels.count("scenario") ? s.labels.at("scenario") : "";
    if (!also.empty()) k += "/" + (s.labels.count(also) ? s.labels.at(also) : "");
    out[k] = s.value;
  }
  return out;
}

/// Expects `m` to hold exactly want's value for each of want's keys (other keys are not looked at).
void expect_values(const std::map<std::string, double>& m, const std::map<std::string, double>& want) {
  for (const auto& [key, value] : want) {
    const auto it = m.find(key);
    if (it == m.end()) {
      ADD_FAILURE() << "no series for " << key;
    } else {
      EXPECT_EQ(it->second, value) << key;
    }
  }
}

/// Expects `m` to hold a value above 0 for each of `keys`.
void expect_positive(const std::map<std::string, double>& m, const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    const auto it = m.find(key);
    EXPECT_TRUE(it != m.end() && it->second > 0) << key << ": " << (it == m.end() ? "no series" : std::to_string(it->second));
  }
}

/// Replaces the dashboard's variables in an expression: $scenario / ${scenario}, $worker /
/// ${worker}, $source / ${source} (a single value: the dashboard never selects two sources),
/// $night / ${night} (All: ".*", which also matches the file and live series that have none).
std::string substitute(std::string expr, const std::string& scenario, const std::string& worker,
                       const std::string& source = "push", const std::string& night = ".*") {
  for (const auto& [var, value] : std::vector<std::pair<std::string, std::string>>{
           {"${scenario}", scenario}, {"$scenario", scenario}, {"${worker}", worker}, {"$worker", worker},
           {"${source}", source}, {"$source", source}, {"${night}", night}, {"$night", night}}) {
    for (auto pos = expr.find(var); pos != std::string::npos; pos = expr.find(var, pos + value.size()))
      expr.replace(pos, var.size(), value);
  }
  return expr;
}

// ---------------------------------------------------------------------------------------------
// Prometheus + Pushgateway, shared by the Prometheus.* tests (started once)

class Prometheus : public ::testing::Test {
 protected:
  struct Stack {
    std::unique_ptr<TempDir> dir;
    std::unique_ptr<Program> pushgateway;
    std::unique_ptr<Program> prometheus;
    int pg_port = 0;
    int prom_port = 0;
    int smoke_exit = -1;
    int extra_exit = -1;
    std::string smoke_out;
    std::string extra_out;
    std::string failure;  // why the setup failed; empty when ready
    std::time_t started_unix = std::time(nullptr);  // before any run pushed its metrics
  };
  static Stack* stack_;

  static void SetUpTestSuite() {
    stack_ = new Stack;
    Stack& s = *stack_;
    auto fail = [&](std::string why) { s.failure = std::move(why); };
    const auto prom_bin = process::find_on_path("prometheus");
    const auto pg_bin = process::find_on_path("prometheus-pushgateway");
    if (!prom_bin || !pg_bin) return fail("prometheus / prometheus-pushgateway not installed (scripts/install-deps.sh)");
    s.dir = std::make_unique<TempDir>("prom");
    const fs::path d = s.dir->path();

    s.pg_port = process::free_tcp_port("127.0.0.1");
    s.pushgateway = std::make_unique<Program>(
        "pushgateway", *pg_bin,
        // In memory only: Debian's build persists to /var/lib/prometheus/pushgateway.data by
        // default, which would carry groups from earlier (or concurrent) runs into this one.
        std::vector<std::string>{"--web.listen-address=127.0.0.1:" + std::to_string(s.pg_port), "--persistence.file="},
        d / "pushgateway.log");
    s.prom_port = process::free_tcp_port("127.0.0.1");
    std::ofstream(d / "prometheus.yml") << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                                        << "rule_files:\n  - '" << (kSource / "dashboards" / "alerts.yml").string() << "'\n"
                                        << "scrape_configs:\n  - job_name: pushgateway\n    honor_labels: true\n"
                                        << "    static_configs:\n      - targets: ['127.0.0.1:" << s.pg_port << "']\n";
    s.prometheus = std::make_unique<Program>(
        "prometheus", *prom_bin,
        std::vector<std::string>{"--config.file=" + (d / "prometheus.yml").string(),
                                 "--storage.tsdb.path=" + (d / "tsdb").string(),
                                 "--web.listen-address=127.0.0.1:" + std::to_string(s.prom_port)},
        d / "prometheus.log");
    if (!ready(s.pg_port, std::chrono::seconds(30)))
      return fail("the Pushgateway did not become ready: " + read_file(d / "pushgateway.log"));

    // The two suites run at once (separate processes, run roots and lock services) while
    // Prometheus starts, to keep the wall time to one suite's.
    const std::string push = "--pushgateway=http://127.0.0.1:" + std::to_string(s.pg_port);
    Program smoke("fencecheck", kFencecheck,
                  {"run", (kSource / "scenarios" / "smoke").string(), "--run-root", (d / "runs-smoke").string(), push},
                  d / "fencecheck-smoke.log");
    Program extra("fencecheck", kFencecheck,
                  {"run", (kSource / "tests" / "observability" / "scenarios").string(), "--run-root",
                   (d / "runs-extra").string(), push},
                  d / "fencecheck-extra.log");
    if (!ready(s.prom_port, std::chrono::seconds(60)))
      return fail("Prometheus did not become ready: " + read_file(d / "prometheus.log"));
    std::tie(s.smoke_exit, s.smoke_out) = finish(smoke);
    std::tie(s.extra_exit, s.extra_out) = finish(extra);

    // Bounded wait for the scrape that carries all four scenarios' pushes.
    PrometheusApi api(s.prom_port);
    const std::set<std::string> all{kFenced, kUnfenced, kNotExercised, kFails};
    if (!poll_until(std::chrono::seconds(60), [&] {
          std::set<std::string> seen;
          for (auto& sample : api.query("fencecheck_scenario_passed")) seen.insert(sample.labels["scenario"]);
          return seen == all;
        }))
      return fail("Prometheus never scraped the four scenarios' metrics from the Pushgateway; fencecheck smoke exit " +
                  std::to_string(s.smoke_exit) + ":\n" + s.smoke_out + read_file(d / "fencecheck-smoke.log") +
                  "\nextra exit " + std::to_string(s.extra_exit) + ":\n" + s.extra_out);
  }

  static void TearDownTestSuite() {
    delete stack_;  // stops Prometheus, then the Pushgateway; removes the temp dir
    stack_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(stack_, nullptr);
    ASSERT_TRUE(stack_->failure.empty()) << stack_->failure;
  }

  static PrometheusApi api() { return PrometheusApi(stack_->prom_port); }
};
Prometheus::Stack* Prometheus::stack_ = nullptr;

TEST_F(Prometheus, TheRunsPassedOrFailedAsTheyShouldAndPushedEveryScenario) {
  EXPECT_EQ(stack_->smoke_exit, 0) << stack_->smoke_out;
  EXPECT_THAT(stack_->smoke_out, HasSubstr("metrics pushed to http://127.0.0.1:" + std::to_string(stack_->pg_port) +
                                           ": 2 of 2 scenario(s)"));
  EXPECT_EQ(stack_->extra_exit, 1) << stack_->extra_out;  // obs-unfenced-expected-safe fails, by design
  EXPECT_THAT(stack_->extra_out, HasSubstr(": 2 of 2 scenario(s)"));
  // honor_labels keeps the Pushgateway's grouping key.
  auto up = api().query("fencecheck_scenario_passed");
  ASSERT_FALSE(up.empty());
  for (const auto& s : up) {
    EXPECT_EQ(s.labels.at("job"), "fencecheck");
    EXPECT_FALSE(s.labels.at("instance").empty());
  }
}

TEST_F(Prometheus, EveryDashboardPanelQueryReturnsTheExpectedSeries) {
  const json dash = json::parse(read_file(kSource / "dashboards" / "fencecheck.json"));
  auto prom = api();

  // What each panel must show for the four runs (keyed by title and refId). A panel or target
  // without a check here fails the test, so a new panel cannot go untested.
  using Check = std::function<void(const std::vector<Sample>&)>;
  const auto scen = [](const std::vector<Sample>& v) { return by_scenario(v); };
  std::map<std::string, Check> checks{
      {"Scenario pass/fail over time/A",
       [&](const auto& v) { expect_values(scen(v), {{kFenced, 1}, {kUnfenced, 1}, {kNotExercised, 1}, {kFails, 0}}); }},
      {"Rejected stale writes by client/A",
       [&](const auto& v) {
         const auto m = by_scenario(v, "client");
         EXPECT_GE(m.at(std::string(kFenced) + "/w1"), 1);  // the stale holder was fenced off
         EXPECT_EQ(m.count(std::string(kUnfenced) + "/w1"), 0u);  // nothing fences in the unfenced store
         EXPECT_EQ(m.count(std::string(kNotExercised) + "/w1"), 0u);
       }},
      {"Lease expiries during work/A",
       [&](const auto& v) {
         const auto m = by_scenario(v, "worker");
         EXPECT_GE(m.at(std::string(kFenced) + "/w1"), 1);
         EXPECT_GE(m.at(std::string(kUnfenced) + "/w1"), 1);
         EXPECT_EQ(m.count(std::string(kNotExercised) + "/w1"), 0u);  // the lease outlived the pause
       }},
      // Pauses: w1 was stopped for 6 s in three runs (1 s in obs-fencing-not-exercised). The
      // workers also report small scheduling hiccups (> 50 ms), so p50 over all workers is checked
      // for presence; the longest pause and p99 read the 6 s within 10 % (the exact reading for
      // one worker is PausePanelReadsTheInjectedPause).
      {"Holder pauses vs lease TTL/E",
       [&](const auto& v) {
         const auto m = scen(v);
         for (const auto& s : {kFenced, kUnfenced, kFails}) EXPECT_NEAR(m.at(s), 6.0, 0.6) << s;
         EXPECT_NEAR(m.at(kNotExercised), 1.0, 0.5);  // stopped for 1 s, well inside its 5 s lease
       }},
      // The harness's own measure, the sigstop's window (inject to heal): it never waits on the
      // worker's ticker, so it reads the planned stop closely, and is there for a worker that
      // measures nothing itself (issue 31 item 6).
      {"Holder pauses vs lease TTL/F",
       [&](const auto& v) {
         const auto m = scen(v);
         for (const auto& s : {kFenced, kUnfenced, kFails}) {
           EXPECT_GE(m.at(s), 6.0) << s;
           EXPECT_LT(m.at(s), 6.5) << s;
         }
         EXPECT_GE(m.at(kNotExercised), 1.0);
         EXPECT_LT(m.at(kNotExercised), 1.5);
       }},
      {"Holder pauses vs lease TTL/A", [&](const auto& v) { expect_positive(scen(v), {kFenced, kUnfenced, kNotExercised}); }},
      {"Holder pauses vs lease TTL/B",
       [&](const auto& v) {
         const auto m = scen(v);
         for (const auto& s : {kFenced, kUnfenced, kFails}) EXPECT_NEAR(m.at(s), 6.0, 0.6) << s;
         EXPECT_LE(m.at(kNotExercised), 5);  // nothing in that run paused past its 5 s lease
       }},
      {"Holder pauses vs lease TTL/C",
       [&](const auto& v) {
         expect_positive(scen(v), {kFenced, kUnfenced, kNotExercised});
         EXPECT_LT(scen(v)[kNotExercised], 5);
       }},
      {"Holder pauses vs lease TTL/D",
       [&](const auto& v) { expect_values(scen(v), {{kFenced, 2}, {kUnfenced, 2}, {kNotExercised, 5}, {kFails, 2}}); }},
      {"Pause-length distribution/A",
       [&](const auto& v) {
         const auto m = by_scenario(v, "le");  // no scenario label here: "/<le>"
         // One set of boundaries for the four runs (2 s and 5 s TTLs alike): w1's three 6 s
         // stops lie in (5.38, 6.42] ... (up to 10 % over); nothing else lasted 5.38 s.
         EXPECT_EQ(v.size(), 91u);
         EXPECT_GE(m.at("/+Inf"), 4);
         EXPECT_EQ(m.at("/+Inf") - m.at("/5.38"), 3);
         EXPECT_EQ(m.at("/+Inf") - m.at("/7.02"), 0);
       }},
      {"High-water mark vs issuer token/A",
       [&](const auto& v) {
         const auto m = by_scenario(v, "key");
         EXPECT_GT(m.at(std::string(kFenced) + "/ledger"), 0);
         EXPECT_GT(m.at(std::string(kUnfenced) + "/ledger"), 0);
       }},
      {"High-water mark vs issuer token/B",
       [&](const auto& v) { expect_positive(scen(v), {kFenced, kUnfenced, kNotExercised, kFails}); }},
      {"High-water mark vs issuer token/C",
       [&](const auto& v) {  // the resource is never ahead of the issuer
         EXPECT_EQ(v.size(), 4u);
         for (const auto& s : v) EXPECT_LE(s.value, 0) << s.labels.at("scenario");
       }},
      {"Token staleness/A",
       [&](const auto& v) {
         const auto m = scen(v);
         EXPECT_GE(m.at(kFenced), 1);  // w1 wrote with a token older than w2's
         EXPECT_GE(m.at(kUnfenced), 1);
       }},
      // w1's stale write is one of some 16 writes (more than 1 %), so the 99th percentile lies in
      // a bucket above 0: it is w1's staleness, at least 1 token behind w2's, in whole tokens.
      {"Token staleness/B",
       [&](const auto& v) {
         EXPECT_GE(scen(v).at(kFenced), 1);
         for (const auto& s : v) EXPECT_EQ(s.value, std::floor(s.value)) << s.labels.at("scenario") << ": whole tokens";
       }},
      {"Duplicate effects/A",
       [&](const auto& v) {
         EXPECT_EQ(v.size(), 4u);  // one zero series per job key, per scenario
         for (const auto& s : v) EXPECT_EQ(s.value, 0) << s.labels.at("scenario");
       }},
      {"Faults injected/A",
       [&](const auto& v) {
         const auto m = by_scenario(v, "kind");
         for (const auto& s : {kFenced, kUnfenced, kNotExercised, kFails}) EXPECT_EQ(m.at(std::string(s) + "/sigstop"), 1) << s;
       }},
      {"Anomalies found/A",
       [&](const auto& v) {
         const auto m = by_scenario(v, "anomaly");
         EXPECT_GE(m.at(std::string(kUnfenced) + "/interleaved-segment"), 1);
         EXPECT_GE(m.at(std::string(kFails) + "/interleaved-segment"), 1);
         for (const auto& [k, n] : m) {
           EXPECT_EQ(k.rfind(kFenced + std::string("/"), 0), std::string::npos) << "the fenced run found " << k;
           EXPECT_EQ(k.rfind(kNotExercised + std::string("/"), 0), std::string::npos) << k;
         }
       }},
      {"Last run per scenario/A", [&](const auto& v) { EXPECT_EQ(scen(v).at(kFails), 0); }},
      {"Last run per scenario/B",
       [&](const auto& v) {
         for (const auto& s : v) EXPECT_GT(s.value, 0) << s.labels.at("scenario");
       }},
      {"Last run per scenario/C",
       [&](const auto& v) {  // the age of this suite's own runs: no older than the suite
         const double suite_age = static_cast<double>(std::time(nullptr) - stack_->started_unix) + 2;  // +2: whole seconds
         EXPECT_EQ(v.size(), 4u);
         for (const auto& s : v) {
           EXPECT_GE(s.value, 0) << s.labels.at("scenario");
           EXPECT_LE(s.value, suite_age) << s.labels.at("scenario");
         }
       }},
  };

  std::set<std::string> checked;
  for (const auto& panel : dash.at("panels")) {
    const std::string title = panel.at("title");
    for (const auto& target : panel.at("targets")) {
      const std::string key = title + "/" + target.at("refId").get<std::string>();
      const std::string expr = substitute(target.at("expr"), ".*", ".*");
      SCOPED_TRACE(key + ": " + expr);
      EXPECT_EQ(expr.find('$'), std::string::npos) << "an unsubstituted variable";
      const auto all = prom.query(expr);
      EXPECT_FALSE(all.empty()) << "the panel's query returns nothing";
      auto it = checks.find(key);
      if (it == checks.end()) {
        ADD_FAILURE() << "no expected values for " << key;
        continue;
      }
      it->second(all);
      checked.insert(key);

      // The same query for one concrete scenario and worker returns that scenario only (the
      // fenced run has no anomaly, so that panel is checked on the unfenced run).
      const std::string concrete = title == "Anomalies found" ? kUnfenced : kFenced;
      const auto one = prom.query(substitute(target.at("expr"), concrete, "w1"));
      EXPECT_FALSE(one.empty()) << "nothing for scenario=" << concrete << " worker=w1";
      for (const auto& s : one)
        EXPECT_EQ(s.labels.count("scenario") ? s.labels.at("scenario") : concrete, concrete);
    }
  }
  for (const auto& [key, check] : checks) EXPECT_TRUE(checked.count(key)) << key << " is not in the dashboard";
}

TEST_F(Prometheus, EveryDashboardVariableHasValues) {
  const json dash = json::parse(read_file(kSource / "dashboards" / "fencecheck.json"));
  auto prom = api();
  const std::regex label_values(R"(^label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\)$)");
  std::map<std::string, std::set<std::string>> values;
  for (const auto& v : dash.at("templating").at("list")) {
    if (v.at("type") != "query") continue;
    const std::string def = v.at("definition");
    std::smatch m;
    ASSERT_TRUE(std::regex_match(def, m, label_values)) << def;
    values[v.at("name")] = prom.label_values(m[2], substitute(m[1], ".*", ".*"));
  }
  EXPECT_THAT(values["source"], ::testing::ElementsAre("push"));
  EXPECT_THAT(values["scenario"], ::testing::IsSupersetOf({kFenced, kUnfenced, kNotExercised, kFails}));
  // Every worker, not only those that paused: w2 never paused for long, w3.. do not exist here.
  EXPECT_THAT(values["worker"], ::testing::ElementsAre("w1", "w2"));
  // Two invocations pushed (the smoke suite and the extra one): two nights, one per group.
  EXPECT_EQ(values["night"].size(), 2u) << ::testing::PrintToString(values["night"]);
  EXPECT_THAT(prom.label_values("worker", R"(fencecheck_worker_info{scenario="obs-fencing-not-exercised"})"),
              ::testing::ElementsAre("w1", "w2"));
  for (const auto& v : dash.at("templating").at("list")) {
    if (v.at("name") != "source") continue;
    EXPECT_FALSE(v.at("multi").get<bool>()) << "two sources at once would count a run twice";
    EXPECT_FALSE(v.at("includeAll").get<bool>());
    EXPECT_EQ(v.at("current").at("value"), "push");
  }
}

// The "All" view adds pause histograms of every scenario and worker: they must share one set of
// bucket boundaries (the four runs have 2 s and 5 s TTLs).
TEST_F(Prometheus, EveryPauseHistogramHasTheSameBuckets) {
  auto prom = api();
  const auto per_le = prom.query("count by (le) (fencecheck_holder_pause_seconds_bucket)");
  const auto series = prom.query("count(fencecheck_holder_pause_seconds_count)");
  ASSERT_EQ(series.size(), 1u);
  EXPECT_EQ(series[0].value, 8);  // 4 scenarios x 2 workers, each worker's histogram from the start
  EXPECT_EQ(per_le.size(), 91u);  // 90 bounds and +Inf
  for (const auto& s : per_le) EXPECT_EQ(s.value, series[0].value) << "le=" << s.labels.at("le");
}

TEST_F(Prometheus, EveryAlertRuleEvaluatesToTheExpectedSeries) {
  const YAML::Node rules = YAML::LoadFile((kSource / "dashboards" / "alerts.yml").string());
  auto prom = api();
  // alert -> the scenario[/worker] keys it must return (value checks below).
  const std::map<std::string, std::set<std::string>> expected{
      {"FencecheckScenarioFailed", {kFails}},
      {"FencecheckFencedOut", {}},  // no checker reports fenced-out yet (promtool tests cover it firing)
      // Live series only, and these runs are pushed (promtool tests cover it firing; the live
      // series itself: LiveEndpoint.CountsAnAnomalyTheMomentItIsFound).
      {"FencecheckAnomalyWhileRunning", {}},
      {"FencecheckFencingNeverExercised", {kNotExercised}},
      {"FencecheckLeaseExpiredWithoutFault", {}},  // every run here injected its fault
      {"FencecheckLeaseExpiredDuringWork",
       {std::string(kFenced) + "/w1", std::string(kUnfenced) + "/w1", std::string(kFails) + "/w1"}},
  };
  std::set<std::string> seen;
  for (const auto& group : rules["groups"]) {
    for (const auto& rule : group["rules"]) {
      const std::string name = rule["alert"].as<std::string>();
      const std::string expr = rule["expr"].as<std::string>();
      SCOPED_TRACE(name + ": " + expr);
      seen.insert(name);
      ASSERT_TRUE(expected.count(name)) << "no expectation for alert " << name;
      const auto got = prom.query(expr);
      std::set<std::string> keys;
      for (const auto& s : got) {
        std::string k = s.labels.at("scenario");
        if (s.labels.count("worker")) k += "/" + s.labels.at("worker");
        keys.insert(k);
        if (name == "FencecheckScenarioFailed") {
          EXPECT_EQ(s.value, 0);
        } else if (name == "FencecheckFencingNeverExercised") {
          EXPECT_EQ(s.value, 1);  // one sigstop injected
        } else if (name == "FencecheckLeaseExpiredDuringWork") {
          EXPECT_GE(s.value, 1);
        }
      }
      EXPECT_EQ(keys, expected.at(name));
    }
  }
  EXPECT_EQ(seen.size(), expected.size());

  // Prometheus itself loaded the rules and fires exactly these alerts.
  const std::set<std::string> want{std::string("FencecheckScenarioFailed ") + kFails,
                                   std::string("FencecheckFencingNeverExercised ") + kNotExercised,
                                   std::string("FencecheckLeaseExpiredDuringWork ") + kFenced + " w1",
                                   std::string("FencecheckLeaseExpiredDuringWork ") + kUnfenced + " w1",
                                   std::string("FencecheckLeaseExpiredDuringWork ") + kFails + " w1"};
  std::set<std::string> firing;
  EXPECT_TRUE(poll_until(std::chrono::seconds(30), [&] {
    firing = prom.firing();
    return firing == want && prom.rules_evaluated();
  })) << "firing: " << ::testing::PrintToString(firing);
}

// ---------------------------------------------------------------------------------------------
// One source of truth: a Prometheus that scrapes the Pushgateway *and* the live endpoint of the
// same `fencecheck run` (as dashboards/prometheus.example.yml does) holds every series twice, once
// per source. The panels select one source, so a run's one fault reads 1, not 2.

/// Values of a query's samples keyed by their labels (without job, instance and source).
std::map<std::string, double> keyed(const std::vector<Sample>& samples) {
  std::map<std::string, double> out;
  for (const auto& s : samples) {
    std::string k;
    for (const auto& [name, value] : s.labels)
      if (name != "job" && name != "instance" && name != "source") k += name + "=" + value + ",";
    out[k] = s.value;
  }
  return out;
}

/// A Pushgateway (in memory) and a Prometheus that scrapes it every second with honor_labels,
/// plus the scrape configurations in `more_scrape_configs` (YAML list items), on free loopback
/// ports with their files under `dir`. `failure` says why they did not become ready (empty: ready).
struct LoopbackPrometheus {
  std::unique_ptr<Program> pushgateway;
  std::unique_ptr<Program> prometheus;
  int pg_port = 0;
  int prom_port = 0;
  std::string failure;

  LoopbackPrometheus(const fs::path& dir, const std::string& more_scrape_configs) {
    const auto prom_bin = process::find_on_path("prometheus");
    const auto pg_bin = process::find_on_path("prometheus-pushgateway");
    if (!prom_bin || !pg_bin) {
      failure = "prometheus / prometheus-pushgateway not installed (scripts/install-deps.sh)";
      return;
    }
    pg_port = process::free_tcp_port("127.0.0.1");
    pushgateway = std::make_unique<Program>(
        "pushgateway", *pg_bin,
        std::vector<std::string>{"--web.listen-address=127.0.0.1:" + std::to_string(pg_port), "--persistence.file="},
        dir / "pushgateway.log");
    prom_port = process::free_tcp_port("127.0.0.1");
    std::ofstream(dir / "prometheus.yml") << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                                          << "scrape_configs:\n  - job_name: pushgateway\n    honor_labels: true\n"
                                          << "    static_configs:\n      - targets: ['127.0.0.1:" << pg_port << "']\n"
                                          << more_scrape_configs;
    prometheus = std::make_unique<Program>(
        "prometheus", *prom_bin,
        std::vector<std::string>{"--config.file=" + (dir / "prometheus.yml").string(),
                                 "--storage.tsdb.path=" + (dir / "tsdb").string(),
                                 "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
        dir / "prometheus.log");
    if (!ready(pg_port, std::chrono::seconds(30)))
      failure = "the Pushgateway did not become ready: " + read_file(dir / "pushgateway.log");
    else if (!ready(prom_port, std::chrono::seconds(60)))
      failure = "Prometheus did not become ready: " + read_file(dir / "prometheus.log");
  }
};

TEST(TwoWaysOut, ThePanelsCountEveryFaultOnceAndTheLastResultIsScraped) {
  TempDir dir("twoways");
  const fs::path d = dir.path();
  const int live_port = process::free_tcp_port("127.0.0.1");
  LoopbackPrometheus stack(d, "  - job_name: fencecheck-live\n    static_configs:\n      - targets: ['127.0.0.1:" +
                                  std::to_string(live_port) + "']\n");
  ASSERT_TRUE(stack.failure.empty()) << stack.failure;
  const int pg_port = stack.pg_port;
  PrometheusApi prom(stack.prom_port);

  // Two scenarios in one process: while the second runs, the first one's final results are both
  // on the live endpoint and in the Pushgateway.
  Program run("fencecheck", kFencecheck,
              {"run", (kSource / "scenarios" / "smoke").string(), "--run-root", (d / "runs").string(),
               "--pushgateway=http://127.0.0.1:" + std::to_string(pg_port),
               "--metrics-listen=127.0.0.1:" + std::to_string(live_port), "--metrics-linger=120s"},
              d / "fencecheck.log");

  // 1. The moment Prometheus holds a finished scenario from both sources.
  std::string first;
  std::string at;  // the evaluation time (Unix seconds) every query below uses
  ASSERT_TRUE(poll_until(std::chrono::seconds(150), [&] {
    at = std::to_string(std::time(nullptr));
    std::map<std::string, std::set<std::string>> sources;
    for (auto& s : prom.query_at("fencecheck_scenario_passed", at)) sources[s.labels["scenario"]].insert(s.labels["source"]);
    for (const auto& [scenario, from] : sources)
      if (from == std::set<std::string>{"live", "push"}) first = scenario;
    return !first.empty();
  })) << read_file(d / "fencecheck.log");
  SCOPED_TRACE("scenario " + first + " at " + at);

  // Both ways really are scraped: without a source selection the fault counts twice.
  const auto raw = prom.query_at("sum(fencecheck_faults_injected_total{scenario=\"" + first + "\"})", at);
  ASSERT_EQ(raw.size(), 1u);
  EXPECT_EQ(raw[0].value, 2);

  // Every panel: each source alone gives the same series, and the faults panel reads 1.
  const json dash = json::parse(read_file(kSource / "dashboards" / "fencecheck.json"));
  for (const auto& panel : dash.at("panels")) {
    for (const auto& target : panel.at("targets")) {
      const std::string title = panel.at("title");
      SCOPED_TRACE(title + "/" + target.at("refId").get<std::string>());
      const auto push = prom.query_at(substitute(target.at("expr"), first, ".*", "push"), at);
      const auto live = prom.query_at(substitute(target.at("expr"), first, ".*", "live"), at);
      if (title == "Last run per scenario" && target.at("refId") == "C") continue;  // time() - ...: same value
      EXPECT_EQ(keyed(push), keyed(live));
      if (title == "Faults injected") {
        ASSERT_EQ(push.size(), 1u);
        EXPECT_EQ(push[0].labels.at("kind"), "sigstop");
        EXPECT_EQ(push[0].value, 1);
      }
    }
  }
  // The alert rules read push (and file), never the sum of two ways out.
  const YAML::Node rules = YAML::LoadFile((kSource / "dashboards" / "alerts.yml").string());
  for (const auto& rule : rules["groups"][0]["rules"]) {
    if (rule["alert"].as<std::string>() != "FencecheckLeaseExpiredDuringWork") continue;
    const auto alert = keyed(prom.query_at(rule["expr"].as<std::string>(), at));
    const auto once = keyed(prom.query_at(
        "sum by (scenario, lock, worker) (fencecheck_lease_expiries_during_work_total{source=\"push\"})", at));
    const std::string w1 = "lock=fencecheck/" + first + ",scenario=" + first + ",worker=w1,";
    ASSERT_TRUE(alert.count(w1)) << ::testing::PrintToString(alert);
    EXPECT_EQ(alert.at(w1), once.at(w1));
    EXPECT_GE(alert.at(w1), 1);
  }

  // 2. The run ends after one scrape of its last results (well inside --metrics-linger=120s)...
  auto code = run.proc->wait_for(std::chrono::minutes(4));
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0) << run.stdout_text();
  EXPECT_THAT(read_file(d / "fencecheck.log"), HasSubstr("live metrics: final results scraped"));
  // ... and Prometheus has them: the last scenario's verdict exists on the live endpoint only
  // after that scenario ended, that is after the run's last event.
  std::vector<Sample> last;
  EXPECT_TRUE(poll_until(std::chrono::seconds(30), [&] {
    last = prom.query("last_over_time(fencecheck_scenario_passed{source=\"live\", scenario!=\"" + first + "\"}[10m])");
    return !last.empty();
  }));
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].value, 1);
}

// A pause reads as itself (within 10 %) in the "Holder pauses vs lease TTL" panel: 6 s and 20 s,
// pushed as build_registry exports them, evaluated by Prometheus's own histogram_quantile().
TEST(TwoWaysOut, ThePausePanelReadsSixAndTwentySeconds) {
  TempDir dir("pauses");
  LoopbackPrometheus stack(dir.path(), "");
  ASSERT_TRUE(stack.failure.empty()) << stack.failure;

  const std::map<std::string, double> pauses{{"obs-pause-6s", 6.0}, {"obs-pause-20s", 20.0}};
  for (const auto& [scenario, seconds] : pauses) {
    RunFigures f;
    f.scenario = scenario;
    f.lease_ttl_s = 2;
    f.workers = {"w1", "w2"};
    f.pauses_s = {{"w1", seconds}};
    f.fault_pauses_s = {{"w1", seconds}};  // the sigstop's window, as the harness measured it
    const auto out = push_metrics(parse_pushgateway_url("http://127.0.0.1:" + std::to_string(stack.pg_port)),
                                  build_registry(f, MetricsSource::kPush), scenario, "test", "n1");
    ASSERT_TRUE(out.ok) << out.error;
  }
  PrometheusApi prom(stack.prom_port);
  ASSERT_TRUE(poll_until(std::chrono::seconds(60), [&] { return prom.query("fencecheck_holder_pause_max_seconds{worker=\"w1\"}").size() == 2; }));

  const json dash = json::parse(read_file(kSource / "dashboards" / "fencecheck.json"));
  std::size_t checked = 0;
  for (const auto& panel : dash.at("panels")) {
    if (panel.at("title") != "Holder pauses vs lease TTL") continue;
    for (const auto& target : panel.at("targets")) {
      const std::string ref = target.at("refId");
      if (ref == "D") continue;  // the TTL line
      for (const auto& [scenario, seconds] : pauses) {
        for (const std::string worker : {"w1", ".*"}) {  // w2 never paused: "All" reads the same
          const auto got = prom.query(substitute(target.at("expr"), scenario, worker));
          ASSERT_EQ(got.size(), 1u) << ref << " " << scenario;
          EXPECT_NEAR(got[0].value, seconds, 0.1 * seconds) << ref << " " << scenario << " worker " << worker;
          ++checked;
        }
      }
    }
  }
  // E (longest), F (the harness's fault window), A (p50), B (p99), C (mean) x 2 pauses x 2 worker selections
  EXPECT_EQ(checked, 20u);
}

// ---------------------------------------------------------------------------------------------
// Two runs at once on one host (issue 34 item 3): a CI run and the nightly of one scenario, one
// failing and one passing, both pushed. Before, both went to one group and the one pushed last
// overwrote the other: a failure pushed first never reached Prometheus. Now each run's night is
// in the grouping key: both groups exist, min_over_time drops to 0, the alert fires naming the
// failed night; a later run deletes the groups it supersedes, never one that overlapped it.

/// The night id of the only invocation that ran under `root` (its latest-night.json).
std::string night_of(const fs::path& root) {
  const json j = json::parse(read_file(root / "latest-night.json"), nullptr, false);
  return j.is_object() ? j.value("night", "") : "";
}

TEST(TwoRuns, BothOverlappingRunsReachPrometheusAndTheFailureFires) {
  TempDir dir("tworuns");
  const fs::path d = dir.path();
  LoopbackPrometheus stack(d, "");
  ASSERT_TRUE(stack.failure.empty()) << stack.failure;
  const std::string pg = "http://127.0.0.1:" + std::to_string(stack.pg_port);
  // One scenario name, two designs: the unfenced store fails its expectation (safe), the fenced
  // one meets it.
  const std::string failing = read_file(kSource / "tests" / "observability" / "scenarios" / "unfenced-expected-safe.yaml");
  ASSERT_NE(failing.find("name: obs-unfenced-expected-safe"), std::string::npos);
  ASSERT_NE(failing.find("fencing: none"), std::string::npos);
  auto renamed = [&](std::string text) {
    return text.replace(text.find("name: obs-unfenced-expected-safe"), 32, "name: obs-two-runs");
  };
  std::string passing = renamed(failing);
  passing.replace(passing.find("fencing: none"), 13, "fencing: per-key");
  std::ofstream(d / "ci.yaml") << renamed(failing);
  std::ofstream(d / "nightly.yaml") << passing;

  Program ci("fencecheck", kFencecheck, {"run", (d / "ci.yaml").string(), "--run-root", (d / "runs-ci").string(),
                                          "--pushgateway=" + pg}, d / "ci.log");
  Program nightly("fencecheck", kFencecheck, {"run", (d / "nightly.yaml").string(), "--run-root",
                                               (d / "runs-nightly").string(), "--pushgateway=" + pg}, d / "nightly.log");
  const auto [ci_exit, ci_out] = finish(ci);
  const auto [nightly_exit, nightly_out] = finish(nightly);
  ASSERT_EQ(ci_exit, 1) << ci_out << read_file(d / "ci.log");
  ASSERT_EQ(nightly_exit, 0) << nightly_out << read_file(d / "nightly.log");
  const std::string ci_night = night_of(d / "runs-ci"), nightly_night = night_of(d / "runs-nightly");
  ASSERT_FALSE(ci_night.empty());
  ASSERT_NE(ci_night, nightly_night);

  // Both groups are on the Pushgateway, each under its own night.
  httplib::Client client("127.0.0.1", stack.pg_port);
  auto res = client.Get("/api/v1/metrics");
  ASSERT_TRUE(res && res->status == 200);
  std::map<std::string, PushedGroup> groups;
  for (auto& g : parse_pushed_groups(res->body))
    if (g.labels["scenario"] == "obs-two-runs") groups[g.labels["night"]] = g;
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_TRUE(groups.count(ci_night));
  EXPECT_TRUE(groups.count(nightly_night));
  EXPECT_EQ(groups[ci_night].labels["instance"], default_instance());

  // Prometheus sees each: the failure drops min_over_time to 0 whichever run pushed last.
  PrometheusApi prom(stack.prom_port);
  ASSERT_TRUE(poll_until(std::chrono::seconds(60), [&] {
    return prom.query("fencecheck_scenario_passed{scenario=\"obs-two-runs\"}").size() == 2;
  }));
  const auto low = prom.query("min by (scenario) (min_over_time(fencecheck_scenario_passed{scenario=\"obs-two-runs\"}[10m]))");
  ASSERT_EQ(low.size(), 1u);
  EXPECT_EQ(low[0].value, 0);
  const YAML::Node rules = YAML::LoadFile((kSource / "dashboards" / "alerts.yml").string());
  bool evaluated = false;
  for (const auto& rule : rules["groups"][0]["rules"]) {
    if (rule["alert"].as<std::string>() != "FencecheckScenarioFailed") continue;
    const auto fired = prom.query(rule["expr"].as<std::string>());
    ASSERT_EQ(fired.size(), 1u);
    EXPECT_EQ(fired[0].labels.at("scenario"), "obs-two-runs");
    EXPECT_EQ(fired[0].labels.at("night"), ci_night);
    evaluated = true;
  }
  EXPECT_TRUE(evaluated);
  // The dashboard's pass/fail panel is red for the scenario; selecting the nightly's night, green.
  const json dash = json::parse(read_file(kSource / "dashboards" / "fencecheck.json"));
  for (const auto& panel : dash.at("panels")) {
    if (panel.at("title") != "Scenario pass/fail over time") continue;
    const std::string expr = panel.at("targets").at(0).at("expr");
    const auto all = prom.query(substitute(expr, "obs-two-runs", ".*"));
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].value, 0);
    const auto one = prom.query(substitute(expr, "obs-two-runs", ".*", "push", nightly_night));
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(one[0].value, 1);
  }

  // Cleaning: a run that began before both ended overlapped them: nothing is deleted. A later
  // run deletes both, but not within the grace (15 min by default).
  const auto url = parse_pushgateway_url(pg);
  const double earliest_end = std::min(groups[ci_night].ended_s, groups[nightly_night].ended_s);
  auto kept = prune_superseded_groups(url, "obs-two-runs", default_instance(), "later", earliest_end - 1, std::chrono::seconds(0));
  EXPECT_TRUE(kept.error.empty()) << kept.error;
  EXPECT_TRUE(kept.deleted.empty());
  const double now_s = static_cast<double>(std::time(nullptr)) + 1;
  kept = prune_superseded_groups(url, "obs-two-runs", default_instance(), "later", now_s);
  EXPECT_TRUE(kept.deleted.empty()) << "within the grace";
  const auto pruned = prune_superseded_groups(url, "obs-two-runs", default_instance(), "later", now_s, std::chrono::seconds(0));
  EXPECT_TRUE(pruned.error.empty()) << pruned.error;
  EXPECT_EQ(pruned.deleted.size(), 2u);
  res = client.Get("/api/v1/metrics");
  ASSERT_TRUE(res && res->status == 200);
  for (auto& g : parse_pushed_groups(res->body)) EXPECT_NE(g.labels["scenario"], "obs-two-runs");
}

// ---------------------------------------------------------------------------------------------
// A push that fails is reported and logged; the verdict and exit code are the scenario's.

TEST(PushFailure, IsReportedAndLeavesTheVerdictAlone) {
  TempDir dir("pushfail");
  const int port = process::free_tcp_port("127.0.0.1");  // nothing listens there
  auto [code, out] = run_fencecheck({"run", (kSource / "scenarios" / "smoke" / "sigstop-past-lease.yaml").string(),
                                     "--run-root", (dir.path() / "runs").string(),
                                     "--pushgateway", "http://127.0.0.1:" + std::to_string(port)},
                                    dir.path() / "fencecheck.log");
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("metrics push FAILED for sigstop-past-lease (http://127.0.0.1:" + std::to_string(port) +
                             "/metrics/job/fencecheck/instance/"));
  EXPECT_THAT(out, HasSubstr("libcurl error 7"));
  EXPECT_THAT(out, HasSubstr(": 0 of 1 scenario(s)"));
  const fs::path run = fs::canonical(dir.path() / "runs" / "latest");
  EXPECT_THAT(read_file(run / "harness.log"), HasSubstr("pushing metrics to"));
  EXPECT_TRUE(fs::exists(run / "metrics.prom"));
}

// ---------------------------------------------------------------------------------------------
// /metrics while the run goes

/// The value of the first sample line `series` (name{labels} exactly as exposed), if any.
std::optional<double> exposed(const std::string& body, const std::string& series) {
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return std::nullopt;
}

/// Scrapes 127.0.0.1:port/metrics until `series` is exposed or `bound` passes; the last body read.
std::string scrape_until_exposed(int port, const std::string& series, std::chrono::milliseconds bound) {
  httplib::Client client("127.0.0.1", port);
  std::string body;
  poll_until(bound, [&] {
    auto res = client.Get("/metrics");
    if (!res || res->status != 200) return false;
    body = res->body;
    return exposed(body, series).has_value();
  });
  return body;
}

TEST(LiveEndpoint, ShowsTheFaultWhileTheRunIsGoing) {
  TempDir dir("live");
  const int port = process::free_tcp_port("127.0.0.1");
  Program run("fencecheck", kFencecheck,
              {"run", (kSource / "scenarios" / "smoke" / "sigstop-past-lease.yaml").string(), "--run-root",
               (dir.path() / "runs").string(), "--metrics-listen", "127.0.0.1:" + std::to_string(port)},
              dir.path() / "fencecheck.log");

  // 1. The run's history shows the fault injected (w1 is now stopped for 6 s).
  const fs::path latest = dir.path() / "runs" / "latest";
  ASSERT_TRUE(poll_until(std::chrono::seconds(90), [&] {
    std::error_code ec;
    return fs::exists(latest / "history.jsonl", ec) &&
           read_file(latest / "history.jsonl").find("\"kind\":\"fault.inject\"") != std::string::npos;
  })) << read_file(dir.path() / "fencecheck.log");

  // 2. /metrics already counts it, and the run has not ended (no verdict series yet).
  const std::string injected = R"(fencecheck_faults_injected_total{source="live",kind="sigstop",scenario="sigstop-past-lease"})";
  std::string body = scrape_until_exposed(port, injected, std::chrono::seconds(30));
  ASSERT_TRUE(exposed(body, injected)) << body;
  EXPECT_EQ(exposed(body, injected), 1.0);
  EXPECT_EQ(body.find("fencecheck_scenario_passed"), std::string::npos) << "the run had already ended";
  EXPECT_EQ(exposed(body, R"(fencecheck_lease_ttl_seconds{source="live",scenario="sigstop-past-lease"})"), 2.0);
  // Before the fault: w1 took the lock and had two writes accepted, w2 queued behind it.
  auto hw = exposed(body, R"(fencecheck_high_water_token{source="live",key="ledger",resource="store",scenario="sigstop-past-lease"})");
  ASSERT_TRUE(hw);
  EXPECT_GT(*hw, 0);
  auto issuer = exposed(body, R"(fencecheck_issuer_token{source="live",lock="fencecheck/sigstop-past-lease",scenario="sigstop-past-lease"})");
  ASSERT_TRUE(issuer);
  EXPECT_GE(*issuer, *hw);
  auto writes = exposed(body, R"(fencecheck_token_staleness_count{source="live",scenario="sigstop-past-lease"})");
  ASSERT_TRUE(writes);
  EXPECT_GE(*writes, 2);

  // 3. After the run the endpoint stays up (--metrics-linger, 30 s by default) until a scrape
  //    has read the final results; then the process ends, with the scenario's exit code.
  const std::string passed = R"(fencecheck_scenario_passed{source="live",scenario="sigstop-past-lease"})";
  body = scrape_until_exposed(port, passed, std::chrono::seconds(90));
  EXPECT_EQ(exposed(body, passed), 1.0);
  auto code = run.proc->wait_for(std::chrono::minutes(2));
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0) << run.stdout_text();
  EXPECT_THAT(read_file(dir.path() / "fencecheck.log"), HasSubstr("live metrics: final results scraped"));
}

// An anomaly found while the run goes (the live checker, live_checker.h) is in anomalies.live.jsonl
// and counted in /metrics before the run ends: w1's stale write is accepted by the unfenced store
// while w3, which holds the lock now, is stopped for 6 s, so the run is still going when it is
// scraped. At the end the checkers' own count replaces the live one (never lower).
TEST(LiveEndpoint, CountsAnAnomalyTheMomentItIsFound) {
  TempDir dir("live-anomaly");
  const int port = process::free_tcp_port("127.0.0.1");
  Program run("fencecheck", kFencecheck,
              {"run", (kSource / "tests" / "observability" / "live" / "live-anomaly.yaml").string(), "--run-root",
               (dir.path() / "runs").string(), "--metrics-listen", "127.0.0.1:" + std::to_string(port)},
              dir.path() / "fencecheck.log");
  const std::string scenario = "obs-live-anomaly";
  const std::string series =
      R"(fencecheck_anomalies_total{source="live",anomaly="stale-write-accepted",scenario=")" + scenario + R"("})";

  // 1. The run directory's anomalies.live.jsonl gets the anomaly's line.
  const fs::path latest = dir.path() / "runs" / "latest";
  std::string lines;
  ASSERT_TRUE(poll_until(std::chrono::seconds(90), [&] {
    std::error_code ec;
    if (!fs::exists(latest / "anomalies.live.jsonl", ec)) return false;
    lines = read_file(latest / "anomalies.live.jsonl");
    return lines.find('\n') != std::string::npos;
  })) << read_file(dir.path() / "fencecheck.log");

  // 2. /metrics counts it while the run still goes (no verdict series yet).
  std::string body = scrape_until_exposed(port, series, std::chrono::seconds(10));
  ASSERT_TRUE(exposed(body, series)) << body;
  EXPECT_EQ(exposed(body, series), 1.0);
  EXPECT_EQ(body.find("fencecheck_scenario_passed"), std::string::npos) << "the run had already ended";

  // The line: the anomaly, the event that proved it (w1's stale write.ok in history.jsonl), its evidence.
  const json line = json::parse(lines.substr(0, lines.find('\n')));
  EXPECT_EQ(line["anomaly"], "stale-write-accepted");
  EXPECT_EQ(line["key"], "ledger");
  EXPECT_EQ(line["clients"], json::array({"w1"}));
  const auto found_at = line["found_at"].get<std::size_t>();
  std::ifstream history(latest / "history.jsonl");
  std::string event;
  for (std::size_t i = 0; i <= found_at && std::getline(history, event); ++i) {
  }
  const json proved = json::parse(event);
  EXPECT_EQ(proved["kind"], "write.ok");
  EXPECT_EQ(proved["source"], "w1");
  EXPECT_LT(proved["token"].get<std::int64_t>(), line["tokens"].back().get<std::int64_t>());

  // 3. The checkers at the end: the scenario's expectation (stale-write-accepted) met, the final
  //    series at least the live count.
  const std::string passed = R"(fencecheck_scenario_passed{source="live",scenario=")" + scenario + R"("})";
  body = scrape_until_exposed(port, passed, std::chrono::seconds(90));
  EXPECT_EQ(exposed(body, passed), 1.0);
  ASSERT_TRUE(exposed(body, series));
  EXPECT_GE(*exposed(body, series), 1.0);
  auto code = run.proc->wait_for(std::chrono::minutes(2));
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0) << run.stdout_text();
  EXPECT_THAT(read_file(dir.path() / "fencecheck.log"), HasSubstr("anomaly found while running: stale-write-accepted"));
}

TEST(LiveEndpoint, ABadLingerIsRefusedBeforeTheRun) {
  TempDir dir("linger");
  const std::string yaml = (kSource / "scenarios" / "smoke" / "sigstop-past-lease.yaml").string();
  // A bad duration, and --metrics-linger without --metrics-listen: exit code 2 before anything runs.
  auto [bad, bad_out] = run_fencecheck({"run", yaml, "--run-root", (dir.path() / "runs").string(), "--metrics-listen",
                                        "127.0.0.1:0", "--metrics-linger", "soon"},
                                       dir.path() / "bad.log");
  EXPECT_EQ(bad, 2);
  EXPECT_THAT(read_file(dir.path() / "bad.log"), HasSubstr("--metrics-linger soon"));
  auto [alone, alone_out] =
      run_fencecheck({"run", yaml, "--run-root", (dir.path() / "runs").string(), "--metrics-linger", "5s"},
                     dir.path() / "alone.log");
  EXPECT_EQ(alone, 2);
  EXPECT_THAT(read_file(dir.path() / "alone.log") + alone_out, HasSubstr("--metrics-listen"));
  EXPECT_FALSE(fs::exists(dir.path() / "runs"));
}

}  // namespace
}  // namespace fencecheck::harness

int main(int argc, char** argv) {
  // Never let a proxy setting send a test's loopback request (or the harness's push) elsewhere.
  ::setenv("no_proxy", "127.0.0.1,localhost", 1);
  ::setenv("NO_PROXY", "127.0.0.1,localhost", 1);
  ::unsetenv("http_proxy");
  ::unsetenv("HTTP_PROXY");
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
