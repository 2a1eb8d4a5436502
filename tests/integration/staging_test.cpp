// Issue 34's "Done when": a team's own worker, written as a plain service loop
// (workers/examples/staging-orders/order_worker.py: python-etcd3's Lock, psycopg2 writing JSON
// shipment rows through the scenario's own write statement), against an "external" etcd and an
// "external" PostgreSQL the test starts itself on the host's loopback. Each of SIGSTOP, CPU
// throttle and a partition from the lock service (scenarios/staging/*.yaml, run as they are with
// only the endpoint, the DSN and the worker's path filled in) catches the broken design (the
// constant token 1: interleaved-segment and token-regression) and passes the correct one (the lock
// key's create_revision: a rejected write, a lease expiry during work, every checker valid but
// corrupt-chunk, which has no chunk format to check in JSON rows and says unknown).
// Root (workers run as nobody, cgroups, namespaces); skips without root, etcd, PostgreSQL or
// Debian's python3-etcd3 and python3-psycopg2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>

#include <boost/process.hpp>
#include <nlohmann/json.hpp>

#include "../postgres/pg_test_util.h"
#include "fencecheck/locks/etcd/embedded_etcd.h"
#include "run_util.h"

namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

/// The team's staging services: one etcd and one PostgreSQL for every scenario of the suite (each
/// scenario has its own lock, isolated per run by run_suffix, and its own order key).
struct Staging {
  std::unique_ptr<fencecheck::EmbeddedEtcd> etcd;
  std::unique_ptr<fencecheck::resources::ResourceInstance> pg;
  std::string skip;  // why the suite cannot run here; empty when it can
};

/// Why the suite cannot run here, or empty.
std::string missing_prerequisite() {
  if (::geteuid() != 0) return "needs root (workers run as nobody; cgroups; namespaces)";
  for (const char* p : {"etcd", "ip", "tc"})
    if (boost::process::search_path(p).empty()) return std::string("needs ") + p;
  if (std::system("/usr/bin/python3 -c 'import etcd3, psycopg2' >/dev/null 2>&1") != 0)
    return "needs Debian's python3-etcd3 and python3-psycopg2";
  return "";
}

/// Started at the first call, stopped when the test program ends (StopStaging).
Staging* g_started = nullptr;

Staging& staging() {
  static Staging st;
  if (g_started != nullptr) return st;
  g_started = &st;
  st.skip = missing_prerequisite();
  if (!st.skip.empty()) return st;
  const auto dir = fencecheck::pgtest::run_dir("staging");
  try {
    st.pg = fencecheck::pgtest::open_pg(json::object(), dir);  // its default tables and statement
  } catch (const fencecheck::resources::ResourceUnavailable& e) {
    st.skip = std::string("no PostgreSQL here: ") + e.what();
    return st;
  }
  st.etcd = std::make_unique<fencecheck::EmbeddedEtcd>();
  st.etcd->start(dir / "etcd-data", dir / "etcd.log");
  return st;
}

class StopStaging : public ::testing::Environment {
 public:
  void TearDown() override {
    if (g_started == nullptr) return;  // no test needed them
    if (g_started->pg) g_started->pg->stop();
    if (g_started->etcd) g_started->etcd->stop();
  }
};
[[maybe_unused]] const auto* const kStopStaging = ::testing::AddGlobalTestEnvironment(new StopStaging);

/// Replaces the one occurrence of `from` in `text` (failing the test when it is not there).
void replace_once(std::string& text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  ASSERT_NE(at, std::string::npos) << "the scenario no longer says " << from;
  text.replace(at, from.size(), to);
}

struct Finished {
  fctest::Result result;
  fs::path dir;
  json verdict;
  std::vector<json> history;
};

/// `fencecheck run` of scenarios/staging/<name>.yaml against the test's etcd and PostgreSQL.
Finished run_staging(const std::string& name) {
  Finished f;
  std::string yaml = fctest::slurp(fs::path(FENCECHECK_SOURCE_DIR) / "scenarios/staging" / (name + ".yaml"));
  replace_once(yaml, "endpoints: ['http://127.0.0.1:2379']", "endpoints: ['" + staging().etcd->client_url() + "']");
  replace_once(yaml, "dsn: 'host=127.0.0.1 port=5432 dbname=orders user=orders sslmode=disable'",
               "dsn: '" + staging().pg->endpoint()["dsn"].get<std::string>() + "'");
  // Each run writes order keys of its own (job.key_suffix: <key>-<run id>): the accept log keeps
  // an earlier run's rows of a key, which this run would judge as writes no holding of its
  // accounts for (unaccounted-write). So --gtest_repeat and a team's nightly run again cleanly.
  EXPECT_NE(yaml.find("key_suffix: true"), std::string::npos) << name << " must say job.key_suffix: true";
  for (int i = 0; i < 2; ++i)
    replace_once(yaml, "../../workers/", std::string(FENCECHECK_SOURCE_DIR) + "/workers/");
  auto work = fctest::fresh_dir("staging-" + name);
  std::ofstream(work / (name + ".yaml")) << yaml;
  f.result = fctest::run_fencecheck({"run", (work / (name + ".yaml")).string(), "--run-root", (work / "runs").string()}, work);
  f.dir = fctest::only_run_dir(work / "runs");
  if (f.dir.empty()) return f;
  f.verdict = json::parse(fctest::slurp(f.dir / "verdict.json"));
  f.history = fctest::read_history(f.dir / "history.jsonl");
  return f;
}

/// The run injected fault `kind` on w1 and both workers ran the order worker as written.
void expect_ran(const Finished& r, const std::string& fault) {
  ASSERT_FALSE(r.dir.empty()) << r.result.out << r.result.err;
  EXPECT_EQ(r.result.code, 0) << r.verdict["expectation"].dump() << r.result.err;
  EXPECT_TRUE(r.verdict["expectation"]["met"].get<bool>()) << r.verdict["expectation"].dump();
  bool injected = false;
  std::set<std::string> hello;
  for (const auto& e : r.history) {
    if (e.value("source", "") == "harness" && e.value("kind", "") == "fault.inject" && e.value("fault", "") == fault &&
        e.value("target", "") == "w1")
      injected = true;
    if (e.value("kind", "") == "hello") hello.insert(e.value("source", ""));
  }
  EXPECT_TRUE(injected) << "no " << fault << " on w1 in the history";
  if (fault == "partition") {  // the workers reached the test's etcd only through the lab's relay
    const std::string host = staging().etcd->client_url().substr(std::string("http://").size());
    EXPECT_NE(r.result.err.find(" -> " + host + " (lock service http://" + host), std::string::npos) << r.result.err;
  }
  EXPECT_EQ(hello, (std::set<std::string>{"w1", "w2"}));
}

void expect_broken_caught(const std::string& name, const std::string& fault) {
  if (!staging().skip.empty()) GTEST_SKIP() << staging().skip;
  const Finished r = run_staging(name);
  expect_ran(r, fault);
  if (r.dir.empty()) return;
  EXPECT_EQ(r.verdict["verdict"], "invalid");
  std::set<std::string> anomalous;
  for (const auto& c : r.verdict["checkers"])
    if (!c["anomalies"].empty()) anomalous.insert(c["name"].get<std::string>());
  EXPECT_TRUE(anomalous.count("interleaved-segment")) << r.verdict["checkers"].dump();
  EXPECT_TRUE(anomalous.count("token-regression")) << r.verdict["checkers"].dump();
}

void expect_correct_passes(const std::string& name, const std::string& fault) {
  if (!staging().skip.empty()) GTEST_SKIP() << staging().skip;
  const Finished r = run_staging(name);
  expect_ran(r, fault);
  if (r.dir.empty()) return;
  // Every checker valid but corrupt-chunk, which says unknown: the rows are the team's JSON.
  for (const auto& c : r.verdict["checkers"]) {
    EXPECT_TRUE(c["anomalies"].empty()) << c.dump();
    EXPECT_EQ(c["verdict"], c["name"] == "corrupt-chunk" ? "unknown" : "valid") << c.dump();
  }
  EXPECT_GE(r.verdict["figures"]["rejected_writes_total"].get<int>(), 1) << r.verdict["figures"].dump();
  EXPECT_GE(r.verdict["figures"]["lease_expiries_during_work"].get<int>(), 1) << r.verdict["figures"].dump();
  // The rejected write was w1's, with the fence's mark, and w1 never sent that token again.
  std::int64_t rejected = -1;
  for (const auto& e : r.history) {
    if (e.value("source", "") != "w1") continue;
    if (e.value("kind", "") == "write.fail") {
      rejected = e["token"].get<std::int64_t>();
      EXPECT_GT(e["high_water"].get<std::int64_t>(), rejected) << e.dump();
    } else if (rejected >= 0 && e.value("kind", "") == "write.invoke") {
      EXPECT_GT(e["token"].get<std::int64_t>(), rejected) << e.dump();
    }
  }
  EXPECT_GE(rejected, 0) << "w1 had no write rejected";
}

}  // namespace

TEST(Staging, SigstopCatchesTheBrokenOrderService) { expect_broken_caught("staging-orders-sigstop-broken", "sigstop"); }
TEST(Staging, SigstopPassesTheCorrectOrderService) { expect_correct_passes("staging-orders-sigstop-correct", "sigstop"); }
TEST(Staging, CpuThrottleCatchesTheBrokenOrderService) {
  expect_broken_caught("staging-orders-cpu-throttle-broken", "cpu-throttle");
}
TEST(Staging, CpuThrottlePassesTheCorrectOrderService) {
  expect_correct_passes("staging-orders-cpu-throttle-correct", "cpu-throttle");
}
TEST(Staging, PartitionFromEtcdCatchesTheBrokenOrderService) {
  expect_broken_caught("staging-orders-partition-broken", "partition");
}
TEST(Staging, PartitionFromEtcdPassesTheCorrectOrderService) {
  expect_correct_passes("staging-orders-partition-correct", "partition");
}
