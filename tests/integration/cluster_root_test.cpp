// The cluster scenarios (scenarios/cluster/, issue 35) run as a user runs them, `fencecheck run`,
// each meeting its expectation, with the member it hit and why recorded in the history; and the
// harness killed with -9 during each member fault leaves nothing after `fencecheck cleanup`: no
// etcd member, no stopped process, no namespace of the run. Root (network namespaces for the
// partition, and the same rule for all); serial (three etcd members and two workers per run on
// the 2 cores).
// Redlock's masters under network: namespaces (scenarios/redlock/c-masters-partitioned-*): each
// master runs in a namespace of its own at an address of its own (the history's member lines, and
// the kernel's word: the process's /proc/<pid>/ns/net), and the partition of a minority is
// injected and healed in the history and the ledger (a harness killed with -9 during such a
// partition: fault_kinds_test's KillNineDuringFault.partition_redlock_minority).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_util.h"

namespace {

namespace fs = std::filesystem;
namespace bp = boost::process;
using json = nlohmann::json;

const fs::path kScenarios = fs::path(FENCECHECK_SOURCE_DIR) / "scenarios" / "cluster";

/// The output of a short command (`ip netns list`, `pgrep -f`); "" when it fails.
std::string output_of(const std::vector<std::string>& argv) {
  bp::ipstream out;
  bp::child c(bp::search_path(argv.front()), bp::args(std::vector<std::string>(argv.begin() + 1, argv.end())),
              bp::std_out > out, bp::std_err > bp::null, bp::std_in < bp::null);
  std::string text, line;
  while (std::getline(out, line)) text += line + "\n";
  c.wait();
  return text;
}

/// Whether any process (other than pgrep) names `needle` on its command line: an etcd member's
/// --data-dir is under the run directory.
bool a_process_names(const std::string& needle) { return !output_of({"pgrep", "-f", needle}).empty(); }

/// Whether a network namespace of the run (its name carries the run id) exists.
bool a_namespace_of(const std::string& run_id) {
  return output_of({"ip", "netns", "list"}).find(run_id) != std::string::npos;
}

/// The harness's fault.inject events.
std::vector<json> injects(const std::vector<json>& history) {
  std::vector<json> out;
  for (const auto& e : history)
    if (e.value("kind", "") == "fault.inject") out.push_back(e);
  return out;
}

class ClusterScenario : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    if (output_of({"which", "etcd"}).empty()) GTEST_SKIP() << "needs etcd (Debian's etcd-server)";
  }
};

TEST_P(ClusterScenario, MeetsItsExpectationAndRecordsWhichMemberWhy) {
  const fs::path work = fctest::fresh_dir("cluster-" + GetParam());
  const fs::path runs = work / "runs";
  const auto r = fctest::run_fencecheck({"run", (kScenarios / (GetParam() + ".yaml")).string(), "--run-root", runs.string()}, work);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const fs::path dir = fctest::only_run_dir(runs);
  ASSERT_FALSE(dir.empty());
  const auto history = fctest::read_history(dir / "history.jsonl");
  const auto in = injects(history);
  ASSERT_EQ(in.size(), 1u) << r.err;
  EXPECT_EQ(in[0]["target"], "lock-service");
  // The member hit and how it was chosen: the leader, as the members' status named it then.
  const std::string detail = in[0].value("detail", "");
  EXPECT_NE(detail.find("lock-service member 1"), std::string::npos) << detail;
  EXPECT_NE(detail.find("(leader: member 1: the leader at the fault's moment (member 1's status: leader member 1"),
            std::string::npos)
      << detail;
  EXPECT_TRUE(std::any_of(history.begin(), history.end(), [](const json& e) { return e.value("kind", "") == "fault.heal"; }));
  if (GetParam() == "etcd-kill9-leader") {
    // w1's client found its member refusing connections and moved on, keeping its lease: its
    // history says it moved, and has no lease.lost.
    const auto w1 = [](const json& e, const char* kind) { return e.value("source", "") == "w1" && e.value("kind", "") == kind; };
    EXPECT_TRUE(std::any_of(history.begin(), history.end(), [&](const json& e) {
      return w1(e, "log") && e.value("detail", "").rfind("lock service failover: etcd member ", 0) == 0;
    }));
    EXPECT_FALSE(std::any_of(history.begin(), history.end(), [&](const json& e) { return w1(e, "lease.lost"); }));
  }
  // Nothing of the run is left: no member, no namespace.
  EXPECT_FALSE(a_process_names(dir.string()));
  EXPECT_FALSE(a_namespace_of(dir.filename().string()));
}

TEST_P(ClusterScenario, KilledWithMinusNineDuringTheMemberFaultLeavesNothingAfterCleanup) {
  const fs::path work = fctest::fresh_dir("cluster-kill9-" + GetParam());
  const fs::path runs = work / "runs";
  bp::child harness = fctest::start_run(kScenarios / (GetParam() + ".yaml"), runs, work);
  fs::path dir;
  ASSERT_TRUE(fctest::wait_for_run_event(runs, "fault.inject", &dir))
      << "the harness never injected its fault: " << fctest::slurp(work / "err.txt");
  // The fault is in effect and the cluster runs (so the checks below can fail).
  ASSERT_TRUE(a_process_names(dir.string()));
  const bool lab = fctest::slurp(kScenarios / (GetParam() + ".yaml")).find("network: namespaces") != std::string::npos;
  if (lab) ASSERT_TRUE(a_namespace_of(dir.filename().string()));
  ASSERT_EQ(::kill(harness.id(), SIGKILL), 0);
  harness.wait();
  // Every member ends with its harness (PR_SET_PDEATHSIG; a stopped one too: SIGKILL ends it).
  EXPECT_TRUE(fctest::wait_until([&] { return !a_process_names(dir.string()); }, std::chrono::seconds(20)))
      << output_of({"pgrep", "-af", dir.string()});
  const auto r = fctest::run_fencecheck({"cleanup", dir.string()}, work);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_FALSE(a_namespace_of(dir.filename().string()));
  const auto again = fctest::run_fencecheck({"cleanup", dir.string()}, work);
  EXPECT_NE(again.out.find("0 entries handled"), std::string::npos) << again.out;
}

// A fault schedule aimed at members (scenarios/cluster/etcd-schedule-members.yaml, ~21 s): met,
// and each of its schedule.jsonl lines with a member target names the members it hit and why,
// as the fault.inject event of the history does.
TEST(ClusterSchedule, EachMemberFaultNamesTheMembersItHit) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (as the other cluster runs)";
  if (output_of({"which", "etcd"}).empty()) GTEST_SKIP() << "needs etcd (Debian's etcd-server)";
  const fs::path work = fctest::fresh_dir("cluster-schedule");
  const fs::path runs = work / "runs";
  const auto r = fctest::run_fencecheck({"run", (kScenarios / "etcd-schedule-members.yaml").string(), "--run-root", runs.string()}, work);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const fs::path dir = fctest::only_run_dir(runs);
  ASSERT_FALSE(dir.empty());
  const auto lines = fctest::read_history(dir / "schedule.jsonl");  // JSON lines too
  const auto in = injects(fctest::read_history(dir / "history.jsonl"));
  int on_members = 0;
  std::set<std::string> rules;
  for (const auto& l : lines) {
    if (l.contains("skipped")) continue;
    rules.insert(l.value("rule", ""));
    if (l.value("rule", "").rfind("lock-service ", 0) != 0) continue;
    ++on_members;
    EXPECT_EQ(l["target"], "lock-service") << l.dump();
    ASSERT_TRUE(l.contains("members") && l["members"].size() == 1u) << l.dump();
    const int member = l["members"][0].get<int>();
    EXPECT_GE(member, 1);
    EXPECT_LE(member, 3);
    const std::string role = l["rule"] == "lock-service leader" ? "the leader at the fault's moment" : "the lowest-numbered follower";
    EXPECT_EQ(l.value("members_why", "").rfind("member " + std::to_string(member) + ": " + role, 0), 0u) << l.dump();
    // Its fault.inject: the same member, the same reason.
    EXPECT_TRUE(std::any_of(in.begin(), in.end(), [&](const json& e) {
      return e.value("detail", "").rfind("lock-service member " + std::to_string(member) + " ", 0) == 0 &&
             e.value("detail", "").find(l.value("members_why", "")) != std::string::npos;
    })) << l.dump();
  }
  EXPECT_GE(on_members, 4) << "the seed's plan aims most faults at members";
  EXPECT_TRUE(rules.count("lock-service leader") && rules.count("lock-service follower")) << "rules seen: " << rules.size();
  EXPECT_FALSE(a_process_names(dir.string()));
}

INSTANTIATE_TEST_SUITE_P(Each, ClusterScenario,
                         ::testing::Values("etcd-sigstop-leader", "etcd-kill9-leader", "etcd-leader-partitioned-fenced",
                                           "etcd-leader-partitioned-unfenced", "etcd-leader-isolated-fenced"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n = p.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// ---- Redlock's masters, each in a namespace of its own (issue 35) -------------------------------

const fs::path kRedlock = fs::path(FENCECHECK_SOURCE_DIR) / "scenarios" / "redlock";

/// One member as the history's start lines name it ("lock-service member 2: redis://10.213.0.7:6379,
/// address 10.213.0.7, network namespace fc-<run>-lock-service-2, pid 1234").
struct MemberLine {
  int index = 0;
  std::string endpoint, address, netns;
  pid_t pid = 0;
};

std::vector<MemberLine> member_lines(const std::vector<json>& history) {
  static const std::regex re(
      "^lock-service member ([0-9]+): ([^ ]+), address ([0-9.]+), network namespace ([^ ,]+), pid ([0-9]+)$");
  std::vector<MemberLine> out;
  for (const auto& e : history) {
    std::smatch m;
    const std::string detail = e.value("detail", "");
    if (e.value("kind", "") == "log" && e.value("target", "") == "lock-service" && std::regex_match(detail, m, re))
      out.push_back({std::stoi(m[1]), m[2], m[3], m[4], static_cast<pid_t>(std::stoi(m[5]))});
  }
  return out;
}

/// Whether process `pid` runs in network namespace `netns` (ip-netns(8): /run/netns/<name> is a
/// bind mount of the namespace, whose inode /proc/<pid>/ns/net names: "net:[<inode>]").
bool in_namespace(pid_t pid, const std::string& netns) {
  struct stat st {};
  if (::stat(("/run/netns/" + netns).c_str(), &st) != 0) return false;
  std::error_code ec;
  const fs::path link = fs::read_symlink(fs::path("/proc") / std::to_string(pid) / "ns" / "net", ec);
  return !ec && link.string() == "net:[" + std::to_string(st.st_ino) + "]";
}

/// The ledger's lines with op `op` ("inject", "heal").
std::vector<json> ledger_lines(const fs::path& dir, const std::string& op) {
  std::vector<json> out;
  std::ifstream in(dir / "faults.ledger");
  for (std::string line; std::getline(in, line);) {
    auto e = json::parse(line, nullptr, false);
    if (!e.is_discarded() && e.value("op", "") == op) out.push_back(e);
  }
  return out;
}

class RedlockMasters : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    for (const char* tool : {"etcd", "redis-server", "node"})
      if (output_of({"which", tool}).empty()) GTEST_SKIP() << "needs " << tool;
    if (!fs::exists(fs::path(FENCECHECK_SOURCE_DIR) / "workers/examples/redlock-node/node_modules/redlock"))
      GTEST_SKIP() << "the Node.js redlock example is not installed (scripts/install-deps.sh node)";
  }
};

TEST_F(RedlockMasters, EachInANamespaceOfItsOwnAndAMinorityPartitionedThenHealed) {
  const fs::path work = fctest::fresh_dir("redlock-masters-partitioned");
  const fs::path runs = work / "runs";
  bp::child harness = fctest::start_run(kRedlock / "c-masters-partitioned-correct.yaml", runs, work);
  fs::path dir;
  const bool injected = fctest::wait_for_run_event(runs, "fault.inject", &dir);
  EXPECT_TRUE(injected) << fctest::slurp(work / "err.txt");
  const std::string run_id = dir.filename().string();
  // While the partition is in effect: five masters, each in its own namespace at its own address,
  // as the history says and as the kernel says of each process. (Checked without stopping the
  // test: the harness must end on its own, or it would leave its lab behind.)
  const auto members = injected ? member_lines(fctest::read_history(dir / "history.jsonl")) : std::vector<MemberLine>{};
  EXPECT_EQ(members.size(), 5u);
  std::set<std::string> addresses, namespaces;
  for (const auto& m : members) {
    EXPECT_EQ(m.netns, "fc-" + run_id + "-lock-service-" + std::to_string(m.index));
    EXPECT_EQ(m.endpoint, "redis://" + m.address + ":6379");
    EXPECT_TRUE(in_namespace(m.pid, m.netns)) << "member " << m.index << " (pid " << m.pid << ") is not in " << m.netns;
    addresses.insert(m.address);
    namespaces.insert(m.netns);
  }
  EXPECT_EQ(addresses.size(), members.size());
  EXPECT_EQ(namespaces.size(), members.size());

  harness.wait();
  EXPECT_EQ(harness.exit_code(), 0) << fctest::slurp(work / "out.txt") << fctest::slurp(work / "err.txt");
  ASSERT_TRUE(injected);
  const auto history = fctest::read_history(dir / "history.jsonl");
  std::vector<json> partition;
  for (const auto& e : history)
    if (e.value("fault", "") == "partition" && (e["kind"] == "fault.inject" || e["kind"] == "fault.heal"))
      partition.push_back(e);
  ASSERT_EQ(partition.size(), 2u);
  EXPECT_EQ(partition[0]["kind"], "fault.inject");
  EXPECT_EQ(partition[1]["kind"], "fault.heal");
  EXPECT_EQ(partition[0]["target"], "lock-service");
  const std::string detail = partition[0].value("detail", "");
  EXPECT_NE(detail.find("lock-service members 1, 2 full"), std::string::npos) << detail;
  EXPECT_NE(detail.find("minority"), std::string::npos) << detail;
  // The ledger: one partition record with a part per master hit (the filters on that master's
  // bridge port, in the hub), healed.
  std::vector<json> recorded;
  for (const auto& e : ledger_lines(dir, "inject"))
    if (e.value("kind", "") == "partition") recorded.push_back(e);
  ASSERT_EQ(recorded.size(), 1u);
  EXPECT_EQ(recorded[0]["target"], "lock-service members 1, 2 full");
  ASSERT_EQ(recorded[0]["parts"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const json& part = recorded[0]["parts"][static_cast<std::size_t>(i)];
    EXPECT_EQ(part["target"], "lock-service-" + std::to_string(i + 1));
    EXPECT_EQ(part["netns"], "fc-" + run_id + "-hub");
    EXPECT_EQ(part["spec"], "full");
  }
  const auto heals = ledger_lines(dir, "heal");
  EXPECT_TRUE(std::any_of(heals.begin(), heals.end(), [&](const json& h) { return h["id"] == recorded[0]["id"]; }));
  EXPECT_FALSE(a_process_names(dir.string()));
  EXPECT_FALSE(a_namespace_of(run_id));
}

}  // namespace
