// The ZooKeeper ensemble's scenarios (scenarios/cluster/zookeeper-*.yaml, issue 35) run as a user
// runs them, `fencecheck run`: each meets its expectation, the history names the member the fault
// hit and why (the leader `srvr` named at the fault's moment, or the member the scenario names:
// catalogue pair (d)), and nothing of the run is left. And a
// harness killed with -9 while its member fault is in effect (a member SIGSTOPped, or killed and
// waiting for its restart) leaves nothing after `fencecheck cleanup`: no ZooKeeper member, no pid
// record. Root, as every scenario test of a lock-service cluster (a scenario may use network:
// namespaces).
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_util.h"

namespace {

namespace fs = std::filesystem;
namespace bp = boost::process;
using json = nlohmann::json;

const fs::path kCluster = fs::path(FENCECHECK_SOURCE_DIR) / "scenarios" / "cluster";

/// The pids of the ZooKeeper servers (java ... QuorumPeerMain <cfg>) whose configuration lies in
/// `run_dir`, read from /proc (the test's own run only).
std::vector<int> members_of(const fs::path& run_dir) {
  std::vector<int> out;
  for (const auto& p : fs::directory_iterator("/proc")) {
    const std::string name = p.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::string cmd = fctest::slurp(p.path() / "cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find("QuorumPeerMain") != std::string::npos && cmd.find(run_dir.string()) != std::string::npos)
      out.push_back(std::stoi(name));
  }
  return out;
}

/// Whether the run's history (being written) holds an event of `kind`.
bool history_has(const fs::path& run_dir, const std::string& kind) {
  return fctest::slurp(run_dir / "history.jsonl").find("\"kind\":\"" + kind + "\"") != std::string::npos;
}

/// Whether a network namespace of the run (its name carries the run id) exists.
bool a_namespace_of(const std::string& run_id) {
  bp::ipstream out;
  bp::child c(bp::search_path("ip"), bp::args({"netns", "list"}), bp::std_out > out, bp::std_err > bp::null);
  std::string text, line;
  while (std::getline(out, line)) text += line + "\n";
  c.wait();
  return text.find(run_id) != std::string::npos;
}

/// One scenario and the member its fault must name: the leader `srvr` named (server 3 leads a
/// fresh ensemble: ZooKeeperEnsemble starts it first), or the member the scenario names.
struct Case {
  std::string name;
  std::string hit;  ///< what fault.inject's detail must hold
};

class ZooKeeperClusterScenario : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (the cluster scenarios' rule: network namespaces)";
    if (!fs::exists("/usr/share/java/zookeeper.jar")) GTEST_SKIP() << "needs Debian's zookeeper package";
  }
  fs::path scenario() const { return kCluster / (GetParam().name + ".yaml"); }
};

TEST_P(ZooKeeperClusterScenario, MeetsItsExpectationAndNamesTheLeaderItHit) {
  const fs::path work = fctest::fresh_dir("zk-cluster-" + GetParam().name);
  const fs::path runs = work / "runs";
  const auto r = fctest::run_fencecheck({"run", scenario().string(), "--run-root", runs.string()}, work);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const fs::path dir = fctest::only_run_dir(runs);
  ASSERT_FALSE(dir.empty());
  const auto history = fctest::read_history(dir / "history.jsonl");
  std::vector<json> injects, heals;
  for (const auto& e : history) {
    if (e.value("kind", "") == "fault.inject") injects.push_back(e);
    if (e.value("kind", "") == "fault.heal") heals.push_back(e);
  }
  ASSERT_EQ(injects.size(), 1u) << r.err;
  EXPECT_EQ(heals.size(), 1u);
  EXPECT_EQ(injects[0]["target"], "lock-service");
  const std::string detail = injects[0].value("detail", "");
  EXPECT_NE(detail.find(GetParam().hit), std::string::npos) << detail;
  // The reference worker says its connection string: every server (a command worker, kazoo, is
  // given the same ZOOKEEPER_HOSTS and does not say).
  for (const auto& e : history)
    if (e.value("source", "") == "w1" && e.value("kind", "") == "log") {
      const std::string d = e.value("detail", "");
      const auto at = d.find("zookeeper=");
      if (at == std::string::npos) continue;
      const auto end = d.find(' ', at);
      EXPECT_EQ(std::count(d.begin() + static_cast<long>(at), end == std::string::npos ? d.end() : d.begin() + static_cast<long>(end), ':'), 3)
          << "w1's connection string names the three servers: " << d;
    }
  EXPECT_TRUE(members_of(dir).empty()) << "a member outlived its run";
  for (int i = 1; i <= 3; ++i) EXPECT_FALSE(fs::exists(dir / ("zookeeper-" + std::to_string(i) + ".pid")));
}

TEST_P(ZooKeeperClusterScenario, KilledWithMinusNineDuringTheMemberFaultLeavesNothingAfterCleanup) {
  const fs::path work = fctest::fresh_dir("zk-cluster-kill9-" + GetParam().name);
  const fs::path runs = work / "runs";
  fs::create_directories(runs);
  bp::child harness(FENCECHECK_BIN, bp::args({"run", scenario().string(), "--run-root", runs.string()}),
                    bp::std_out > (work / "out.txt").string(), bp::std_err > (work / "err.txt").string(),
                    bp::std_in < bp::null, bp::start_dir = work.string());
  fs::path dir;
  ASSERT_TRUE(fctest::wait_until(
      [&] {
        dir = fctest::only_run_dir(runs);
        return !dir.empty() && history_has(dir, "fault.inject");
      },
      std::chrono::seconds(90)))
      << "the harness never injected its fault: " << fctest::slurp(work / "err.txt");
  // The fault is in effect and the ensemble runs (so that the checks below can fail).
  ASSERT_FALSE(members_of(dir).empty());
  ASSERT_EQ(::kill(harness.id(), SIGKILL), 0);
  harness.wait();
  // Every member ends with its harness (PR_SET_PDEATHSIG; a stopped one too: SIGKILL ends it).
  EXPECT_TRUE(fctest::wait_until([&] { return members_of(dir).empty(); }, std::chrono::seconds(20)));
  const auto r = fctest::run_fencecheck({"cleanup", dir.string()}, work);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  for (int i = 1; i <= 3; ++i)
    EXPECT_FALSE(fs::exists(dir / ("zookeeper-" + std::to_string(i) + ".pid"))) << "cleanup keeps a member's record";
  EXPECT_FALSE(a_namespace_of(dir.filename().string())) << "a namespace of the run outlived cleanup";
  const auto again = fctest::run_fencecheck({"cleanup", dir.string()}, work);
  EXPECT_EQ(again.code, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("0 entries handled"), std::string::npos) << again.out;
}

// The leader's faults name what each server's `srvr` said; pair (d) names the member the scenario
// gives (w1's server).
const char* const kLeaderWhy = "(leader: member 3: the leader at the fault's moment (member 1: follower";

INSTANTIATE_TEST_SUITE_P(Each, ZooKeeperClusterScenario,
                         ::testing::Values(Case{"zookeeper-sigstop-leader", kLeaderWhy},
                                           Case{"zookeeper-kill9-leader", kLeaderWhy},
                                           Case{"zookeeper-holder-server-partitioned-correct",
                                                "lock-service member 1 from the other members (member 1: member 1, as "
                                                "the scenario names it)"},
                                           Case{"zookeeper-holder-server-partitioned-broken",
                                                "lock-service member 1 from the other members (member 1: member 1, as "
                                                "the scenario names it)"}),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           std::string n = p.param.name;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
