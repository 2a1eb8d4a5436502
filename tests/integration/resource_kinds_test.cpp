// The resource axis end to end: kind http pointed at a fencecheck-store must give the same
// verdicts as kind store on every smoke scenario and every host-network fault scenario (the store
// is the reference implementation of the HTTP contract, docs/resource-http.md), and a resource
// field only the resource can refuse stops the run before anything starts (exit 2, at the field).
//
// Each http run gets a fencecheck-store of its own, started here on 127.0.0.1:0 with the fencing
// mode of the scenario's store (per-key, or none for the -unfenced twins), because the store's
// marks outlive a run and every run's tokens start low again (a fresh embedded etcd).
// The partition scenarios are not here: they need root (network namespaces); relay_root_test.cpp
// runs a partition against an http service on the host's loopback, reached through the lab's relay.
#include <unistd.h>

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "fencecheck/harness/scenario.h"
#include "run_util.h"

namespace {

using namespace fencecheck::harness;
namespace fs = std::filesystem;
namespace bp = boost::process;

const fs::path kScenarios = fs::path(FENCECHECK_SOURCE_DIR) / "scenarios";

struct Outcome {
  std::string verdict;
  std::set<std::string> anomalies;
  bool met = false;
  std::vector<std::string> reasons;
};

Outcome run(const fs::path& scenario_file, const fs::path& work) {
  fs::create_directories(work);
  const fs::path root = work / "runs";
  const fctest::Result r = fctest::run_fencecheck({"run", "--run-root", root.string(), scenario_file.string()}, work);
  const fs::path dir = fctest::only_run_dir(root);
  Outcome o;
  if (dir.empty()) {
    o.reasons.push_back("no run directory; exit " + std::to_string(r.code) + ": " + r.err);
    return o;
  }
  const nlohmann::json v = nlohmann::json::parse(fctest::slurp(dir / "verdict.json"));
  o.verdict = v.at("verdict");
  o.met = v.at("expectation").at("met");
  for (const auto& reason : v.at("expectation").at("reasons")) o.reasons.push_back(reason);
  for (const auto& c : v.at("checkers"))
    for (const auto& a : c.at("anomalies")) o.anomalies.insert(a.at("name").get<std::string>());
  return o;
}

class HttpKindAgainstTheStore : public ::testing::TestWithParam<std::string> {};

TEST_P(HttpKindAgainstTheStore, GivesTheSameVerdictAsKindStore) {
  const fs::path file = kScenarios / GetParam();
  if (GetParam().rfind("faults/", 0) == 0 && ::geteuid() != 0) GTEST_SKIP() << "cgroup faults need root";
  const Scenario sc = load_scenario(file);
  const fs::path work = fctest::fresh_dir("http-vs-store-" + sc.name());

  const Outcome store = run(file, work / "store");
  ASSERT_TRUE(store.met) << ::testing::PrintToString(store.reasons);

  // The same plan, with its resource replaced by kind http at a store of the same fencing mode.
  fctest::StoreProcess service(FENCECHECK_STORE_BIN, work / "service-data", sc.resource().fencing());
  ASSERT_FALSE(service.url().empty()) << "fencecheck-store did not announce its address";
  nlohmann::json plan = to_json(sc);
  plan["resource"] = {{"kind", "http"}, {"url", service.url()}};
  plan.erase("source");
  const fs::path http_file = work / (sc.name() + "-http.yaml");
  std::ofstream(http_file) << plan.dump(2) << "\n";  // JSON is YAML
  const Outcome http = run(http_file, work / "http");

  EXPECT_TRUE(http.met) << ::testing::PrintToString(http.reasons);
  EXPECT_EQ(http.verdict, store.verdict);
  EXPECT_EQ(http.anomalies, store.anomalies);
}

// A stop (SIGSTOP) and a starvation (cgroup CPU quota), each fenced and unfenced. The freeze pair
// is left out: to the resource a frozen holder is a stopped one (its late write after the pause),
// and the pair cost CI about 30 s; fault_kinds_integration_test runs it against kind store.
INSTANTIATE_TEST_SUITE_P(SmokeAndFaults, HttpKindAgainstTheStore,
                         ::testing::Values("smoke/sigstop-past-lease.yaml", "smoke/sigstop-past-lease-unfenced.yaml",
                                           "faults/throttle-past-lease.yaml", "faults/throttle-past-lease-unfenced.yaml"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string n = param.param;
                           for (char& c : n)
                             if (c == '/' || c == '-' || c == '.') c = '_';
                           return n;
                         });

TEST(ResourceConfig, AStatementTheDatabaseRefusesStopsTheRunAtItsField) {
  const fs::path work = fctest::fresh_dir("pg-config-error");
  const fs::path file = work / "bad.yaml";
  std::ofstream(file) << "name: pg-bad-table\n"
                         "lease_ttl: 2s\n"
                         "resource:\n"
                         "  kind: postgres\n"
                         "  write: |\n"
                         "    UPDATE no_such_table SET token = $token WHERE key = $key\n"
                         "job: {key: ledger, segments: 1, chunks: 1}\n"
                         "workers: [{id: w1}]\n"
                         "expect: {outcome: safe}\n";
  const fctest::Result r = fctest::run_fencecheck({"run", "--run-root", (work / "runs").string(), file.string()}, work);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find(file.string() + ":5:10: resource.write: "), std::string::npos) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("no_such_table"), std::string::npos) << r.out << r.err;
}

}  // namespace
