// A run's claim in the user's etcd (LockServiceInstance::claim, issue 34 item 3), against a real
// etcd this test starts on loopback standing for the shared staging cluster: two runs on one lock
// or one key, the second refused naming the first; isolated runs both claim; a release frees the
// names; a claim whose renewals stop lapses within its TTL; an embedded etcd takes no claim.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fencecheck/locks/etcd/embedded_etcd.h"
#include "fencecheck/locks/etcd/etcd_client.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "temp_dir.h"

namespace fencecheck::locks {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

RunClaim claim_of(const std::string& run_id, const std::string& lock, std::vector<std::string> keys = {}) {
  RunClaim c;
  c.run_id = run_id;
  c.host = "host-of-" + run_id;
  c.pid = 100;
  c.started = "2026-12-06T03:00:00Z";
  c.scenario = "orders";
  c.lock = lock;
  if (!keys.empty()) c.resource = "postgres";
  c.keys = std::move(keys);
  return c;
}

class EtcdClaim : public ::testing::Test {
 protected:
  void SetUp() override {
    etcd_.start(dir_.path() / "etcd-data", dir_.path() / "etcd.log");
    ctx_.run_dir = dir_.path();
    ctx_.log_path = [this](const std::string& n) { return dir_.path() / (n + ".log"); };
    ctx_.run_id = "test";
  }
  std::unique_ptr<LockServiceInstance> external() {
    return find_lock_service_kind("etcd")->open({etcd_.client_url()}, nlohmann::json::object(), ctx_);
  }
  testing::TempDir dir_{"claim-etcd"};
  EmbeddedEtcd etcd_;
  LockServiceRunContext ctx_;
};

TEST_F(EtcdClaim, ASecondRunOnTheSameLockIsRefusedNamingTheFirstRunAndHost) {
  auto a = external(), b = external();
  std::string why;
  auto held = a->claim(claim_of("nightly-1", "staging/orders"), why);
  ASSERT_TRUE(held) << why;
  EXPECT_EQ(held->lost(), "");
  EXPECT_THAT(held->describe(), HasSubstr("fencecheck-claims/lock/staging/orders"));
  // The value in etcd is the claim's JSON, bound to a lease of kClaimTtl.
  const EtcdClient client(etcd_.client_url());
  const auto kv = client.range("fencecheck-claims/lock/staging/orders");
  ASSERT_TRUE(kv);
  EXPECT_EQ(RunClaim::from_json(nlohmann::json::parse(kv->value)).run_id, "nightly-1");
  ASSERT_NE(kv->lease, 0);
  EXPECT_LE(client.lease_time_to_live(kv->lease).granted_ttl, kClaimTtl);
  EXPECT_GT(client.lease_time_to_live(kv->lease).ttl, 0s);
  try {
    (void)b->claim(claim_of("ci-9", "staging/orders"), why);
    FAIL() << "the second claim on one lock was taken";
  } catch (const ClaimRefused& err) {
    EXPECT_EQ(err.name(), "lock/staging/orders");
    ASSERT_TRUE(err.holder());
    EXPECT_EQ(err.holder()->run_id, "nightly-1");
    EXPECT_THAT(err.what(), HasSubstr("run nightly-1 on host host-of-nightly-1"));
    EXPECT_THAT(err.what(), HasSubstr("lock_service.run_suffix: true"));
  }
  // Refused means nothing of the second run was left behind.
  EXPECT_EQ(client.range_prefix("fencecheck-claims/").size(), 1u);
  // Released: the lock is free for the next run at once.
  held->release();
  EXPECT_FALSE(client.range("fencecheck-claims/lock/staging/orders"));
  auto next = b->claim(claim_of("ci-9", "staging/orders"), why);
  EXPECT_TRUE(next);
}

TEST_F(EtcdClaim, AnOverlappingKeyIsRefusedAndNothingOfTheRefusedClaimIsTaken) {
  auto a = external(), b = external();
  std::string why;
  auto held = a->claim(claim_of("nightly-1", "staging/orders", {"us-1", "eu-1"}), why);
  ASSERT_TRUE(held);
  try {
    (void)b->claim(claim_of("ci-9", "staging/orders/ci-9", {"ap-1", "us-1"}), why);
    FAIL() << "a claim on an overlapping key was taken";
  } catch (const ClaimRefused& err) {
    EXPECT_EQ(err.name(), "key/postgres/us-1");
    EXPECT_THAT(err.what(), HasSubstr("resource key \"us-1\" (postgres)"));
    EXPECT_THAT(err.what(), HasSubstr("run nightly-1 on host host-of-nightly-1"));
  }
  const EtcdClient client(etcd_.client_url());
  EXPECT_FALSE(client.range("fencecheck-claims/lock/staging/orders/ci-9")) << "all or nothing";
  EXPECT_FALSE(client.range("fencecheck-claims/key/postgres/ap-1")) << "all or nothing";
}

TEST_F(EtcdClaim, IsolatedRunsBothClaim) {
  auto a = external(), b = external();
  std::string why;
  auto one = a->claim(claim_of("nightly-1", "staging/orders/nightly-1", {"nightly-1-us"}), why);
  auto two = b->claim(claim_of("ci-9", "staging/orders/ci-9", {"ci-9-us"}), why);
  EXPECT_TRUE(one);
  EXPECT_TRUE(two);
}

TEST_F(EtcdClaim, AClaimOutlivesItsTtlWhileRenewed) {
  auto a = external();
  std::string why;
  auto held = a->claim(claim_of("nightly-1", "staging/orders"), why);
  ASSERT_TRUE(held);
  const EtcdClient client(etcd_.client_url());
  // Renewed every third of the TTL: after more than a TTL the claim is still there.
  std::this_thread::sleep_for(kClaimTtl + 2s);
  EXPECT_TRUE(client.range("fencecheck-claims/lock/staging/orders"));
  EXPECT_EQ(held->lost(), "");
}

TEST_F(EtcdClaim, AKilledHoldersClaimLapsesWithinItsTtl) {
  // The holder: a child process that claims and then waits, killed with SIGKILL like a harness.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const std::string url = etcd_.client_url();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    try {
      LockServiceRunContext ctx;
      auto instance = find_lock_service_kind("etcd")->open({url}, nlohmann::json::object(), ctx);
      std::string why;
      auto held = instance->claim(claim_of("killed-1", "staging/orders"), why);
      if (held && ::write(ready[1], "c", 1) == 1)
        for (;;) ::pause();
    } catch (...) {
    }
    ::_exit(1);
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the holder did not claim";
  ::close(ready[0]);
  const EtcdClient client(url);
  ASSERT_TRUE(client.range("fencecheck-claims/lock/staging/orders"));
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ::waitpid(child, &status, 0);
  const auto killed = std::chrono::steady_clock::now();
  // Still there right after the kill (nobody released it: it lapses), gone within the TTL plus
  // etcd's 0.5 s lessor tick and a margin for a loaded machine.
  EXPECT_TRUE(client.range("fencecheck-claims/lock/staging/orders"));
  while (client.range("fencecheck-claims/lock/staging/orders") && std::chrono::steady_clock::now() - killed < kClaimTtl + 5s)
    std::this_thread::sleep_for(50ms);
  const auto lapsed = std::chrono::steady_clock::now() - killed;
  EXPECT_FALSE(client.range("fencecheck-claims/lock/staging/orders"));
  EXPECT_LE(lapsed, kClaimTtl + 2s);
  // The next run claims.
  std::string why;
  EXPECT_TRUE(external()->claim(claim_of("next", "staging/orders"), why));
}

TEST_F(EtcdClaim, AnEmbeddedEtcdTakesNoClaimAndSaysWhy) {
  LockServiceRunContext ctx = ctx_;
  ctx.run_dir = dir_.path() / "embedded-run";  // its own etcd-data, not the fixture's
  std::filesystem::create_directories(ctx.run_dir);
  auto embedded = find_lock_service_kind("etcd")->open({}, nlohmann::json::object(), ctx);
  std::string why;
  EXPECT_FALSE(embedded->claim(claim_of("r", "l"), why));
  EXPECT_EQ(why, "the etcd is embedded: no other run can reach it");
  embedded->stop();
}

TEST(NoneClaim, KindNoneCannotClaimAndSaysSo) {
  LockServiceRunContext ctx;
  auto none = find_lock_service_kind("none")->open({}, nlohmann::json::object(), ctx);
  std::string why;
  EXPECT_FALSE(none->claim(claim_of("r", "l"), why));
  EXPECT_THAT(why, HasSubstr("kind none"));
}

}  // namespace
}  // namespace fencecheck::locks
