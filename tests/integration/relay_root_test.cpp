// Partitions against the user's own services (issue 34 item 1; docs/architecture.md, "Relays"):
// the test starts an "external" etcd and an "external" PostgreSQL itself, on the host's loopback
// and in a network namespace standing for another host (the test's own veth to it), and runs
// partition scenarios with `network: namespaces` against them through `fencecheck run`. The
// workers reach them only through the harness's relays in the lab: a partition from the lock
// service makes etcd expire the holder's lease while it keeps writing (lease_expiries_during_work
// >= 1, its stale writes rejected by the fenced store), which cannot happen if the workers' traffic
// went around the lab; a replies-only partition from an HTTP service lets w1's write through the
// relay and loses only the reply. Root (namespaces); each test skips when not root or without
// etcd / ip.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>

#include <boost/process.hpp>
#include <nlohmann/json.hpp>

#include "../postgres/pg_test_util.h"
#include "fencecheck/locks/etcd/embedded_etcd.h"
#include "run_util.h"

namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

json read_json(const fs::path& p) { return json::parse(fctest::slurp(p)); }

bool have(const char* program) { return !boost::process::search_path(program).empty(); }

int sh(const std::string& command) { return std::system(command.c_str()); }

/// One finished `fencecheck run` of `yaml`.
struct Finished {
  fctest::Result result;
  fs::path dir;
  json verdict;
  std::vector<json> history;
};

Finished run_scenario(const std::string& name, const std::string& yaml) {
  Finished f;
  auto work = fctest::fresh_dir("relay-" + name);
  std::ofstream(work / "s.yaml") << yaml;
  f.result = fctest::run_fencecheck({"run", (work / "s.yaml").string(), "--run-root", (work / "runs").string()}, work);
  f.dir = fctest::only_run_dir(work / "runs");
  if (f.dir.empty()) return f;
  f.verdict = read_json(f.dir / "verdict.json");
  f.history = fctest::read_history(f.dir / "history.jsonl");
  return f;
}

/// scenarios/faults/partition-from-lock-service.yaml against the lock service at `endpoint`.
std::string partition_from_lock_service(const std::string& endpoint, const std::string& fencing) {
  return "name: relay-partition-from-lock-service\nseed: 42\nlease_ttl: 2s\ntimeout: 60s\n"
         "lock_service: {kind: etcd, endpoints: ['" + endpoint + "'], run_suffix: true}\n"
         "resource: {kind: store, fencing: " + fencing + "}\n"
         "network: namespaces\n"
         "job: {key: ledger, segments: 3, chunks: 4, chunk_bytes: 256, chunk_interval: 500ms}\n"
         "workers:\n  - id: w1\n  - id: w2\n    start_after: {worker: w1, event: acquire.ok}\n"
         "faults:\n  - {kind: partition, target: w1, trigger: {worker: w1, event: write.ok, count: 2}, duration: 5s, "
         "from: lock-service}\n"
         "expect:\n  outcome: " +
         std::string(fencing == "none" ? "anomaly\n  anomalies: [stale-write-accepted]" : "safe\n  min_rejected_writes: 1") +
         "\n  min_expiries_during_work: 1\n";
}

std::set<std::string> anomalous_checkers(const json& verdict) {
  std::set<std::string> out;
  for (const auto& c : verdict["checkers"])
    if (!c["anomalies"].empty()) out.insert(c["name"].get<std::string>());
  return out;
}

/// Skips unless the machine can make namespaces and run etcd.
#define REQUIRE_ROOT_AND(program)                                                    \
  do {                                                                               \
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";         \
    if (!have("ip") || !have("tc")) GTEST_SKIP() << "needs iproute2's ip and tc";    \
    if (!have(program)) GTEST_SKIP() << "needs " << program;                         \
  } while (0)

/// The partitioned holder's lease expired while it worked (the partition cut its keepalives to
/// the user's etcd, which the workers reach only through the relay), and the run logged the relay.
void expect_partition_took_effect(const Finished& r, const std::string& relayed_to) {
  ASSERT_FALSE(r.dir.empty()) << r.result.out << r.result.err;
  EXPECT_EQ(r.result.code, 0) << r.result.out << r.result.err;
  EXPECT_TRUE(r.verdict["expectation"]["met"].get<bool>()) << r.verdict["expectation"].dump();
  EXPECT_GE(r.verdict["figures"]["lease_expiries_during_work"].get<int>(), 1) << r.verdict["figures"].dump();
  EXPECT_NE((r.result.out + r.result.err).find("relay 10.213.0.2:"), std::string::npos) << r.result.err;
  EXPECT_NE((r.result.out + r.result.err).find(" -> " + relayed_to + " (lock service http://" + relayed_to + ";"),
            std::string::npos)
      << r.result.err;
  bool partitioned = false;
  for (const auto& e : r.history)
    if (e.value("source", "") == "harness" && e.value("kind", "") == "fault.inject" &&
        e.value("detail", "").find("partition") != std::string::npos)
      partitioned = true;
  EXPECT_TRUE(partitioned);
}

TEST(RelayRoot, AnEtcdOnTheHostsLoopbackIsPartitionedFromTheWorkersAndFencingHolds) {
  REQUIRE_ROOT_AND("etcd");
  fencecheck::EmbeddedEtcd etcd;  // "the user's": on 127.0.0.1, outside every namespace
  const auto data = fctest::fresh_dir("relay-loopback-etcd");
  etcd.start(data / "d", data / "etcd.log");
  const std::string endpoint = etcd.client_url();
  const std::string hostport = endpoint.substr(std::string("http://").size());
  auto r = run_scenario("etcd-loopback", partition_from_lock_service(endpoint, "per-key"));
  expect_partition_took_effect(r, hostport);
  EXPECT_EQ(r.verdict["verdict"], "valid");
  EXPECT_TRUE(anomalous_checkers(r.verdict).empty()) << r.verdict["checkers"].dump();
  EXPECT_GE(r.verdict["figures"]["rejected_writes_total"].get<int>(), 1);
  // Workers were told the relay, not the user's address (their own namespace has no route to it).
  const std::string args = fctest::slurp(r.dir / "scenario.json");
  EXPECT_NE(args.find(endpoint), std::string::npos);  // the scenario names the user's endpoint
  EXPECT_TRUE(etcd.running());                        // and the user's etcd is untouched
}

TEST(RelayRoot, WithoutFencingThePartitionedHoldersStaleWriteIsCaught) {
  REQUIRE_ROOT_AND("etcd");
  fencecheck::EmbeddedEtcd etcd;
  const auto data = fctest::fresh_dir("relay-unfenced-etcd");
  etcd.start(data / "d", data / "etcd.log");
  const std::string hostport = etcd.client_url().substr(std::string("http://").size());
  auto r = run_scenario("etcd-unfenced", partition_from_lock_service(etcd.client_url(), "none"));
  expect_partition_took_effect(r, hostport);
  EXPECT_EQ(r.verdict["verdict"], "invalid");
  EXPECT_EQ(anomalous_checkers(r.verdict).count("stale-write-accepted"), 1u) << r.verdict["checkers"].dump();
}

/// A namespace standing for another host on the LAN: fc-relay-<pid>, linked to the host by the
/// test's own veth (tstrl<pid>a on the host: no "fc" name, which the kill -9 tests running alongside
/// would take for a link fencecheck left; 10.214.<n>.1 on the host, .2 inside), removed again at the end.
class OtherHost {
 public:
  OtherHost() : name_("fc-relay-" + std::to_string(::getpid())), link_("tstrl" + std::to_string(::getpid() % 100000)) {
    const std::string n = std::to_string(::getpid() % 250);
    host_ip_ = "10.214." + n + ".1";
    ip_ = "10.214." + n + ".2";
    ok_ = sh("ip netns add " + name_) == 0 &&
          sh("ip link add " + link_ + "a type veth peer name " + link_ + "b netns " + name_) == 0 &&
          sh("ip addr add " + host_ip_ + "/30 dev " + link_ + "a") == 0 && sh("ip link set " + link_ + "a up") == 0 &&
          sh("ip -n " + name_ + " addr add " + ip_ + "/30 dev " + link_ + "b") == 0 &&
          sh("ip -n " + name_ + " link set " + link_ + "b up") == 0 && sh("ip -n " + name_ + " link set lo up") == 0;
  }
  ~OtherHost() {
    sh("ip link del " + link_ + "a 2>/dev/null");
    sh("ip netns del " + name_ + " 2>/dev/null");
  }
  [[nodiscard]] bool ok() const { return ok_; }
  [[nodiscard]] const std::string& netns() const { return name_; }
  [[nodiscard]] const std::string& ip() const { return ip_; }

 private:
  std::string name_, link_, host_ip_, ip_;
  bool ok_ = false;
};

TEST(RelayRoot, AnEtcdOnAnotherHostIsReachedThroughTheRelayAndPartitioned) {
  REQUIRE_ROOT_AND("etcd");
  OtherHost other;
  ASSERT_TRUE(other.ok()) << "could not make the other host's namespace";
  const auto data = fctest::fresh_dir("relay-other-etcd");
  const std::string url = "http://" + other.ip() + ":2379";
  boost::process::child etcd(boost::process::search_path("ip"),
                             boost::process::args({"netns", "exec", other.netns(), "etcd", "--name", "other",
                                                   "--data-dir", (data / "d").string(), "--listen-client-urls", url,
                                                   "--advertise-client-urls", url, "--listen-peer-urls",
                                                   "http://" + other.ip() + ":2380", "--initial-advertise-peer-urls",
                                                   "http://" + other.ip() + ":2380", "--initial-cluster",
                                                   "other=http://" + other.ip() + ":2380"}),
                             boost::process::std_out > (data / "etcd.log").string(),
                             boost::process::std_err > (data / "etcd.err").string());
  ASSERT_TRUE(fctest::wait_until([&] { return sh("curl -sf " + url + "/health >/dev/null 2>&1") == 0; },
                                 std::chrono::seconds(20)))
      << fctest::slurp(data / "etcd.err");
  auto r = run_scenario("etcd-other-host", partition_from_lock_service(url, "per-key"));
  expect_partition_took_effect(r, other.ip() + ":2379");
  EXPECT_EQ(r.verdict["verdict"], "valid");
  ::kill(etcd.id(), SIGTERM);
  etcd.wait();
}

/// scenarios/postgres/partition-from-resource.yaml's story against the user's resource at
/// `resource` (a flow mapping), cut for 6 s in `direction` after w1's 2nd write; expected safe.
std::string partition_from_resource(const std::string& name, const std::string& resource, const std::string& direction) {
  return "name: " + name + "\nseed: 42\nlease_ttl: 2s\ntimeout: 90s\nresource: " + resource +
         "\nnetwork: namespaces\n"
         "job: {key: ledger, segments: 3, chunks: 4, chunk_bytes: 256, chunk_interval: 200ms}\n"
         "workers:\n  - id: w1\n  - id: w2\n    start_after: {worker: w1, event: acquire.ok}\n"
         "faults:\n  - {kind: partition, target: w1, trigger: {worker: w1, event: write.ok, count: 2}, duration: 6s, "
         "from: resource, direction: " + direction + "}\n"
         "expect: {outcome: safe, progress_after_heal: true}\n";
}

/// The run met its expectation, relayed the resource from the lab's resource address, and the
/// cut took effect on the relayed path: w1's write during the partition got no reply. Returns
/// w1's write.info events.
std::vector<json> expect_resource_partition_took_effect(const Finished& r) {
  std::vector<json> infos;
  EXPECT_FALSE(r.dir.empty()) << r.result.out << r.result.err;
  EXPECT_EQ(r.result.code, 0) << r.result.out << r.result.err;
  if (r.dir.empty()) return infos;
  EXPECT_TRUE(r.verdict["expectation"]["met"].get<bool>()) << r.verdict["expectation"].dump();
  EXPECT_EQ(r.verdict["verdict"], "valid");
  EXPECT_NE(r.result.err.find("relay 10.213.0.3:"), std::string::npos) << r.result.err;
  for (const auto& e : r.history)
    if (e.value("source", "") == "w1" && e.value("kind", "") == "write.info") infos.push_back(e);
  EXPECT_GE(infos.size(), 1u);
  if (!infos.empty()) EXPECT_NE(infos[0].value("detail", "").find("no reply"), std::string::npos) << infos[0].dump();
  return infos;
}

TEST(RelayRoot, APostgresOnTheHostsLoopbackIsPartitionedFromTheWorkers) {
  REQUIRE_ROOT_AND("etcd");
  namespace pgt = fencecheck::pgtest;
  std::unique_ptr<fencecheck::resources::ResourceInstance> pg;
  const auto dir = pgt::run_dir("relay");
  try {
    pg = pgt::open_pg(json::object(), dir);  // "the user's" database, on 127.0.0.1
  } catch (const fencecheck::resources::ResourceUnavailable& e) {
    GTEST_SKIP() << "no PostgreSQL here: " << e.what();
  }
  const std::string dsn = pg->endpoint()["dsn"].get<std::string>();
  auto r = run_scenario("pg-loopback", partition_from_resource("relay-pg-partition-from-resource",
                                                               "{kind: postgres, dsn: '" + dsn + "'}", "both"));
  (void)expect_resource_partition_took_effect(r);
  pg->stop();
}

TEST(RelayRoot, APostgresOnAnotherHostIsReachedThroughTheRelayAndPartitioned) {
  REQUIRE_ROOT_AND("etcd");
  namespace pgt = fencecheck::pgtest;
  OtherHost other;
  ASSERT_TRUE(other.ok()) << "could not make the other host's namespace";
  // The database starts inside the other host's namespace (its postmaster is forked by this
  // thread while it is there) and listens on that host's address only.
  const auto dir = pgt::run_dir("relay-other");
  auto ctx = pgt::context(dir);
  ctx.host = other.ip();
  ctx.port = 5432;
  std::unique_ptr<fencecheck::resources::ResourceInstance> pg;
  {
    const int home = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    const int there = ::open(("/var/run/netns/" + other.netns()).c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_TRUE(home >= 0 && there >= 0 && ::setns(there, CLONE_NEWNET) == 0);
    try {
      pg = pgt::kind().open(pgt::kind().parse(pgt::FakeFields(json::object())), ctx);
    } catch (const fencecheck::resources::ResourceUnavailable& e) {
      (void)::setns(home, CLONE_NEWNET);
      GTEST_SKIP() << "no PostgreSQL here: " << e.what();
    }
    ASSERT_EQ(::setns(home, CLONE_NEWNET), 0);
    ::close(home);
    ::close(there);
  }
  const std::string dsn = pg->endpoint()["dsn"].get<std::string>();
  ASSERT_NE(dsn.find("host=" + other.ip()), std::string::npos) << dsn;
  auto r = run_scenario("pg-other-host", partition_from_resource("relay-pg-other-host",
                                                                 "{kind: postgres, dsn: '" + dsn + "'}", "both"));
  (void)expect_resource_partition_took_effect(r);
  EXPECT_NE(r.result.err.find(" -> " + other.ip() + ":5432 (resource postgres;"), std::string::npos) << r.result.err;
  pg->stop();
}

TEST(RelayRoot, AnHttpServiceOnTheHostsLoopbackLosesOnlyItsRepliesToTheHolder) {
  REQUIRE_ROOT_AND("etcd");
  const auto work = fctest::fresh_dir("relay-http-service");
  fctest::StoreProcess service(FENCECHECK_STORE_BIN, work / "service-data", "per-key");  // "the user's"
  ASSERT_FALSE(service.url().empty());
  auto r = run_scenario("http-loopback", partition_from_resource("relay-http-partition-replies-from-resource",
                                                                 "{kind: http, url: '" + service.url() + "'}", "replies"));
  // One way only, on the relayed path: w1's write reached the user's service and was applied
  // (its accept log has it), but the reply never came back to w1.
  const auto infos = expect_resource_partition_took_effect(r);
  ASSERT_GE(infos.size(), 1u);
  const json& unknown = r.verdict["figures"]["unknown_outcomes"];
  ASSERT_GE(unknown.size(), 1u) << r.verdict["figures"].dump();
  EXPECT_EQ(unknown[0]["resolution"], "applied") << unknown.dump();
}

}  // namespace
