// A run's claim in the user's lock service (LockServiceInstance::claim, issue 34 item 3), for each
// kind that can claim (etcd, redis, zookeeper), against a real server this test starts through the kind (its embedded
// server on loopback, standing for the team's shared staging service; the runs connect to it as
// the user's endpoint): two runs on one lock or one key, the second refused naming the first;
// isolated runs both claim; a release frees the names; a renewed claim outlives its TTL; a killed
// holder's claim lapses within it; an embedded service and kind none take no claim.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fencecheck/locks/etcd/etcd_client.h"
#include "fencecheck/locks/lock_service_kind.h"
#include "temp_dir.h"

namespace fencecheck::locks {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

/// The claims' TTL here: short, so that the lapse and the renewal past a TTL take seconds, not
/// tens of them (a run sets it with lock_service.claim_ttl; kClaimTtl, 10 s, by default).
constexpr std::chrono::seconds kTtl{3};

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
  c.ttl = kTtl;
  return c;
}

/// The ClaimRefused a claim throws, or nullopt when it was taken (then released).
std::optional<ClaimRefused> refusal(LockServiceInstance& service, const RunClaim& claim) {
  std::string why;
  try {
    auto held = service.claim(claim, why);
    if (!held) throw std::logic_error("no claim taken: " + why);
    return std::nullopt;
  } catch (const ClaimRefused& err) {
    return err;
  }
}

/// One kind's server, started embedded in a temporary run directory; external() connects to it as
/// the user's endpoint, as a run on shared staging does.
class Claim : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ctx_.run_dir = dir_.path();
    ctx_.log_path = [this](const std::string& n) { return dir_.path() / (n + ".log"); };
    ctx_.run_id = "server";
    ctx_.lock = "staging/orders";
    // ZooKeeper grants sessions of 2..20 ticks: a tick of 1 s lets it grant kTtl (3 s); a
    // default server (tickTime 2 s) would round it up to 4 s.
    const nlohmann::json config = GetParam() == "zookeeper" ? nlohmann::json{{"tick_time", "1000ms"}} : nlohmann::json::object();
    server_ = find_lock_service_kind(GetParam())->open({}, config, ctx_);
  }
  void TearDown() override { server_->stop(); }
  [[nodiscard]] std::string endpoint() const { return server_->endpoints_text(); }
  [[nodiscard]] std::unique_ptr<LockServiceInstance> external() const {
    LockServiceRunContext ctx;
    ctx.lock = "staging/orders";
    return find_lock_service_kind(GetParam())->open({endpoint()}, nlohmann::json::object(), ctx);
  }
  testing::TempDir dir_{"claim"};
  LockServiceRunContext ctx_;
  std::unique_ptr<LockServiceInstance> server_;
};

TEST_P(Claim, ASecondRunOnTheSameLockIsRefusedNamingTheFirstRunAndHost) {
  auto a = external(), b = external();
  std::string why;
  auto held = a->claim(claim_of("nightly-1", "staging/orders"), why);
  ASSERT_TRUE(held) << why;
  EXPECT_EQ(held->lost(), "");
  // The name in the kind's own spelling (a znode name cannot hold '/').
  EXPECT_THAT(held->describe(), HasSubstr(GetParam() == "zookeeper" ? "/fencecheck-claims/lock%2Fstaging%2Forders"
                                                                    : "lock/staging/orders"));
  const auto refused = refusal(*b, claim_of("ci-9", "staging/orders"));
  ASSERT_TRUE(refused) << "the second claim on one lock was taken";
  EXPECT_EQ(refused->name(), "lock/staging/orders");
  ASSERT_TRUE(refused->holder());
  EXPECT_EQ(refused->holder()->run_id, "nightly-1");
  EXPECT_THAT(refused->what(), HasSubstr("run nightly-1 on host host-of-nightly-1 (pid 100)"));
  EXPECT_THAT(refused->what(), HasSubstr("lock_service.run_suffix: true"));
  // How soon the holder's claim lapses is the holder's TTL, read back from its claim.
  EXPECT_EQ(refused->holder()->ttl, kTtl);
  EXPECT_THAT(refused->what(), HasSubstr("a killed harness's claim lapses within 3 s"));
  // Released: the lock is free for the next run at once.
  held->release();
  EXPECT_EQ(held->lost(), "");
  EXPECT_FALSE(refusal(*b, claim_of("ci-9", "staging/orders")));
}

TEST_P(Claim, AnOverlappingKeyIsRefusedAndNothingOfTheRefusedClaimIsTaken) {
  auto a = external(), b = external();
  std::string why;
  auto held = a->claim(claim_of("nightly-1", "staging/orders", {"us-1", "eu-1"}), why);
  ASSERT_TRUE(held);
  const auto refused = refusal(*b, claim_of("ci-9", "staging/orders/ci-9", {"ap-1", "us-1"}));
  ASSERT_TRUE(refused) << "a claim on an overlapping key was taken";
  EXPECT_EQ(refused->name(), "key/postgres/us-1");
  EXPECT_THAT(refused->what(), HasSubstr("resource key \"us-1\" (postgres)"));
  EXPECT_THAT(refused->what(), HasSubstr("run nightly-1 on host host-of-nightly-1"));
  EXPECT_THAT(refused->what(), HasSubstr("job.key, workers[].key"));
  // All or nothing: the refused run's lock and its other key stay free.
  EXPECT_FALSE(refusal(*b, claim_of("third", "staging/orders/ci-9", {"ap-1"})));
}

TEST_P(Claim, IsolatedRunsBothClaim) {
  auto a = external(), b = external();
  std::string why;
  auto one = a->claim(claim_of("nightly-1", "staging/orders/nightly-1", {"nightly-1-us"}), why);
  auto two = b->claim(claim_of("ci-9", "staging/orders/ci-9", {"ci-9-us"}), why);
  EXPECT_TRUE(one);
  EXPECT_TRUE(two);
}

TEST_P(Claim, ARenewedClaimOutlivesItsTtl) {
  auto a = external(), b = external();
  std::string why;
  auto held = a->claim(claim_of("nightly-1", "staging/orders"), why);
  ASSERT_TRUE(held);
  // Renewed every third of the TTL: after more than a TTL it still refuses a second run.
  std::this_thread::sleep_for(kTtl + 2s);
  EXPECT_TRUE(refusal(*b, claim_of("ci-9", "staging/orders")));
  EXPECT_EQ(held->lost(), "");
}

TEST_P(Claim, AKilledHoldersClaimLapsesWithinItsTtl) {
  // The holder: a child process that claims and then waits, killed with SIGKILL like a harness.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const std::string url = endpoint(), kind = GetParam();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    try {
      LockServiceRunContext ctx;
      auto instance = find_lock_service_kind(kind)->open({url}, nlohmann::json::object(), ctx);
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
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ::waitpid(child, &status, 0);
  const auto killed = std::chrono::steady_clock::now();
  auto next = external();
  // Still held right after the kill (nobody released it: it lapses), free within the TTL plus a
  // margin (etcd's lessor checks every 0.5 s) on a loaded machine.
  const auto first = refusal(*next, claim_of("next", "staging/orders"));
  ASSERT_TRUE(first) << "the killed holder's claim was gone at once";
  EXPECT_EQ(first->holder()->run_id, "killed-1");
  while (refusal(*next, claim_of("next", "staging/orders")) && std::chrono::steady_clock::now() - killed < kTtl + 5s)
    std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(refusal(*next, claim_of("next", "staging/orders")));
  EXPECT_LE(std::chrono::steady_clock::now() - killed, kTtl + 2s);
}

TEST_P(Claim, AnEmbeddedServiceTakesNoClaimAndSaysWhy) {
  std::string why;
  EXPECT_FALSE(server_->claim(claim_of("r", "l"), why));
  EXPECT_EQ(why, "the " + GetParam() + " is embedded: no other run can reach it");
}

INSTANTIATE_TEST_SUITE_P(Kinds, Claim, ::testing::Values("etcd", "redis", "zookeeper"),
                         [](const auto& info) { return info.param; });

TEST(EtcdClaim, TheValueIsTheClaimsJsonUnderFencecheckClaimsOnALeaseOfTheClaimTtl) {
  testing::TempDir dir("claim-etcd");
  LockServiceRunContext ctx;
  ctx.run_dir = dir.path();
  ctx.log_path = [&](const std::string& n) { return dir.path() / (n + ".log"); };
  auto server = find_lock_service_kind("etcd")->open({}, nlohmann::json::object(), ctx);
  auto user = find_lock_service_kind("etcd")->open({server->endpoints_text()}, nlohmann::json::object(), ctx);
  std::string why;
  auto held = user->claim(claim_of("nightly-1", "staging/orders", {"us-1"}), why);
  ASSERT_TRUE(held);
  const EtcdClient client(server->endpoints_text());
  const auto kvs = client.range_prefix("fencecheck-claims/");
  ASSERT_EQ(kvs.size(), 2u);
  EXPECT_EQ(kvs[0].key, "fencecheck-claims/key/postgres/us-1");
  EXPECT_EQ(kvs[1].key, "fencecheck-claims/lock/staging/orders");
  EXPECT_EQ(nlohmann::json::parse(kvs[1].value), claim_of("nightly-1", "staging/orders", {"us-1"}).to_json());
  ASSERT_NE(kvs[1].lease, 0);
  EXPECT_EQ(kvs[0].lease, kvs[1].lease) << "one lease: the claim lapses as a whole";
  EXPECT_EQ(client.lease_time_to_live(kvs[1].lease).granted_ttl, kTtl);
  held->release();
  EXPECT_TRUE(client.range_prefix("fencecheck-claims/").empty());
  server->stop();
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
