// The ZooKeeper ensemble's scenarios (scenarios/cluster/zookeeper-*.yaml, issue 35) run as a user
// runs them, `fencecheck run`: each meets its expectation, the history names the member the fault
// hit and why (the leader `srvr` named at the fault's moment), and nothing of the run is left. And a
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

class ZooKeeperClusterScenario : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (the cluster scenarios' rule: network namespaces)";
    if (!fs::exists("/usr/share/java/zookeeper.jar")) GTEST_SKIP() << "needs Debian's zookeeper package";
  }
  fs::path scenario() const { return kCluster / (GetParam() + ".yaml"); }
};

TEST_P(ZooKeeperClusterScenario, MeetsItsExpectationAndNamesTheLeaderItHit) {
  const fs::path work = fctest::fresh_dir("zk-cluster-" + GetParam());
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
  // Server 3 leads a fresh ensemble (ZooKeeperEnsemble starts it first), and `srvr` says so.
  const std::string detail = injects[0].value("detail", "");
  EXPECT_NE(detail.find("lock-service member 3"), std::string::npos) << detail;
  EXPECT_NE(detail.find("(leader: member 3: the leader at the fault's moment (member 1: follower"), std::string::npos)
      << detail;
  EXPECT_NE(detail.find("member 3: leader"), std::string::npos) << detail;
  // Workers were given every server.
  bool three = false;
  for (const auto& e : history)
    if (e.value("source", "") == "w1" && e.value("kind", "") == "log") {
      const std::string d = e.value("detail", "");
      const auto at = d.find("zookeeper=");
      if (at != std::string::npos) three = std::count(d.begin() + static_cast<long>(at), d.end(), ':') == 3;
    }
  EXPECT_TRUE(three) << "w1's connection string names the three servers";
  EXPECT_TRUE(members_of(dir).empty()) << "a member outlived its run";
  for (int i = 1; i <= 3; ++i) EXPECT_FALSE(fs::exists(dir / ("zookeeper-" + std::to_string(i) + ".pid")));
}

TEST_P(ZooKeeperClusterScenario, KilledWithMinusNineDuringTheMemberFaultLeavesNothingAfterCleanup) {
  const fs::path work = fctest::fresh_dir("zk-cluster-kill9-" + GetParam());
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
  const auto again = fctest::run_fencecheck({"cleanup", dir.string()}, work);
  EXPECT_EQ(again.code, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("0 entries handled"), std::string::npos) << again.out;
}

INSTANTIATE_TEST_SUITE_P(Each, ZooKeeperClusterScenario,
                         ::testing::Values("zookeeper-sigstop-leader", "zookeeper-kill9-leader"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n = p.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
