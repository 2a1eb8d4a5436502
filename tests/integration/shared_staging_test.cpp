// Two runs at once on shared staging (issue 34 item 3), end to end: two real `fencecheck run`s
// against one external etcd (started here on loopback, standing for the team's cluster). The
// second run on the same lock is refused at the start, exit 3, naming the first run's id and host,
// and starts no worker; with lock_service.run_suffix both run and both pass; a harness killed
// with SIGKILL leaves a claim that lapses by itself within its TTL.
#include <signal.h>
#include <unistd.h>

#include <future>
#include <string>

#include <gtest/gtest.h>

#include "fencecheck/locks/etcd/embedded_etcd.h"
#include "fencecheck/locks/etcd/etcd_client.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "run_util.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

/// A scenario on the external etcd at `url`, lock staging/orders, that runs for several seconds
/// (two holders, 16 chunks each at 250 ms), so a second run starts while it goes. Its claim's TTL
/// is 3 s (lock_service.claim_ttl), so a killed harness's claim lapses in seconds.
std::string scenario(const std::string& name, const std::string& url, bool run_suffix) {
  return "name: " + name + "\nlease_ttl: 2s\ntimeout: 90s\n" +
         "lock_service: {kind: etcd, endpoints: [\"" + url + "\"], lock: staging/orders, claim_ttl: 3s" +
         (run_suffix ? ", run_suffix: true" : "") + "}\n" +
         "resource: {kind: store}\n"
         "job: {key: ledger, segments: 2, chunks: 8, chunk_bytes: 64, chunk_interval: 250ms}\n"
         "workers: [{id: w1}, {id: w2, start_after: {worker: w1, event: acquire.ok}}]\n"
         "expect: {outcome: safe}\n";
}

/// The run directory under `root` once its claim.json says it holds its claim; empty if none
/// appears within 60 s (or the run ended first).
fs::path claimed_run(const fs::path& root, std::future<fctest::Result>& run) {
  fs::path found;
  fctest::wait_until([&] {
    if (run.wait_for(0s) == std::future_status::ready) return true;
    std::error_code ec;
    for (const auto& d : fs::directory_iterator(root, ec)) {
      if (d.is_symlink() || !fs::exists(d.path() / "claim.json")) continue;
      const auto j = nlohmann::json::parse(fctest::slurp(d.path() / "claim.json"), nullptr, false);
      if (!j.is_discarded() && j.value("claimed", false)) found = d.path();
    }
    return !found.empty();
  });
  return found;
}

std::string hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

class SharedStaging : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = fctest::fresh_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    etcd_.start(work_ / "etcd-data", work_ / "etcd.log");
    fs::create_directories(work_ / "a");
    fs::create_directories(work_ / "b");
  }
  std::future<fctest::Result> start(const std::string& who, bool run_suffix) {
    std::ofstream(work_ / who / "s.yaml") << scenario("orders-" + who, etcd_.client_url(), run_suffix);
    const fs::path dir = work_ / who;
    return std::async(std::launch::async, [dir] {
      return fctest::run_fencecheck({"run", "--run-root", (dir / "runs").string(), (dir / "s.yaml").string()}, dir);
    });
  }
  fs::path work_;
  fencecheck::EmbeddedEtcd etcd_;
};

TEST_F(SharedStaging, ASecondRunOnTheSameLockIsRefusedAtTheStartNamingTheFirst) {
  auto first = start("a", false);
  const fs::path a_dir = claimed_run(work_ / "a" / "runs", first);
  ASSERT_FALSE(a_dir.empty()) << "the first run never held its claim";
  const std::string a_id = a_dir.filename().string();

  auto second = start("b", false);
  const fctest::Result b = second.get();
  ASSERT_EQ(first.wait_for(0s), std::future_status::timeout) << "the runs did not overlap: the first had ended";
  EXPECT_EQ(b.code, 3) << b.out << b.err;
  const std::string said = b.out + b.err;
  EXPECT_NE(said.find("another run holds this run's lock \"staging/orders\""), std::string::npos) << said;
  EXPECT_NE(said.find("run " + a_id + " on host " + hostname()), std::string::npos) << said;
  EXPECT_NE(said.find("lock_service.run_suffix: true"), std::string::npos) << said;
  // No worker of the refused run started: its history holds no worker event.
  const fs::path b_dir = fctest::only_run_dir(work_ / "b" / "runs");
  const auto claim = nlohmann::json::parse(fctest::slurp(b_dir / "claim.json"));
  EXPECT_FALSE(claim["claimed"].get<bool>());
  if (fs::exists(b_dir / "history.jsonl"))
    for (const auto& e : fctest::read_history(b_dir / "history.jsonl"))
      EXPECT_TRUE(e.value("source", "") == "harness" || e.value("source", "") == "lock") << e.dump();

  // --skip-unavailable skips what this machine cannot do, never a run refused for a busy lock: a
  // night that did not run must not pass.
  std::ofstream(work_ / "c.yaml") << scenario("orders-c", etcd_.client_url(), false);
  const fctest::Result c = fctest::run_fencecheck(
      {"run", "--skip-unavailable", "--run-root", (work_ / "c-runs").string(), (work_ / "c.yaml").string()}, work_);
  ASSERT_EQ(first.wait_for(0s), std::future_status::timeout) << "the runs did not overlap: the first had ended";
  EXPECT_EQ(c.code, 3) << c.out << c.err;
  EXPECT_NE((c.out + c.err).find("run " + a_id + " on host"), std::string::npos) << c.out << c.err;

  const fctest::Result a = first.get();
  EXPECT_EQ(a.code, 0) << "the first run is untouched by the refused ones\n" << a.out << a.err;
  // Released at the end: nothing left in the lock service.
  EXPECT_TRUE(fencecheck::EtcdClient(etcd_.client_url()).range_prefix("fencecheck-claims/").empty());
}

TEST_F(SharedStaging, IsolatedRunsWithRunSuffixBothRunAndPass) {
  auto first = start("a", true);
  ASSERT_FALSE(claimed_run(work_ / "a" / "runs", first).empty());
  auto second = start("b", true);
  ASSERT_FALSE(claimed_run(work_ / "b" / "runs", second).empty());
  EXPECT_EQ(first.wait_for(0s), std::future_status::timeout) << "the runs did not overlap";
  const fctest::Result a = first.get(), b = second.get();
  EXPECT_EQ(a.code, 0) << a.out << a.err;
  EXPECT_EQ(b.code, 0) << b.out << b.err;
}

TEST_F(SharedStaging, AKilledHarnessesClaimLapsesWithinItsTtlAndTheNextRunStarts) {
  auto first = start("a", false);
  const fs::path a_dir = claimed_run(work_ / "a" / "runs", first);
  ASSERT_FALSE(a_dir.empty());
  const auto claim = nlohmann::json::parse(fctest::slurp(a_dir / "claim.json"));
  const pid_t harness = claim["claim"]["pid"].get<pid_t>();
  EXPECT_EQ(claim["ttl_s"], 3) << "lock_service.claim_ttl";
  EXPECT_EQ(claim["claim"]["ttl_s"], 3);
  ASSERT_EQ(::kill(harness, SIGKILL), 0);
  (void)first.get();
  const auto killed = std::chrono::steady_clock::now();
  const fencecheck::EtcdClient etcd(etcd_.client_url());
  EXPECT_FALSE(etcd.range_prefix("fencecheck-claims/").empty()) << "nobody released it: it must lapse";
  ASSERT_TRUE(fctest::wait_until([&] { return etcd.range_prefix("fencecheck-claims/").empty(); }, 30s));
  EXPECT_LE(std::chrono::steady_clock::now() - killed, 3s + 2s);
  const fctest::Result b = start("b", false).get();
  EXPECT_EQ(b.code, 0) << b.out << b.err;
}

}  // namespace
