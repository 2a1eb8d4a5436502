// A run's claim (lock_service_kind.h, RunClaim; issue 34 item 3): its value, its names and the
// refusal sentence. No server.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fencecheck/locks/lock_service_kind.h"

namespace fencecheck::locks {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

RunClaim nightly() {
  RunClaim c;
  c.run_id = "orders-20261206T030000Z";
  c.host = "ci-7.example";
  c.pid = 4242;
  c.started = "2026-12-06T03:00:00Z";
  c.scenario = "orders";
  c.lock = "staging/orders";
  c.resource = "postgres";
  c.keys = {"us-1", "eu-1"};
  c.ttl = std::chrono::seconds(7);
  return c;
}

TEST(RunClaim, ItsValueIsTheDocumentedJsonAndReadsBack) {
  const RunClaim c = nightly();
  const nlohmann::json j = c.to_json();
  EXPECT_EQ(j, nlohmann::json::parse(R"({"run_id":"orders-20261206T030000Z","host":"ci-7.example","pid":4242,
      "started":"2026-12-06T03:00:00Z","scenario":"orders","lock":"staging/orders","resource":"postgres",
      "keys":["us-1","eu-1"],"ttl_s":7})"));
  const RunClaim back = RunClaim::from_json(j);
  EXPECT_EQ(back.to_json(), j);
  EXPECT_EQ(back.ttl, std::chrono::seconds(7));
}

TEST(RunClaim, AnotherVersionsValueKeepsWhatItCanRead) {
  const RunClaim c = RunClaim::from_json(nlohmann::json::parse(R"({"run_id":"r1","host":7,"keys":["a",3]})"));
  EXPECT_EQ(c.run_id, "r1");
  EXPECT_EQ(c.host, "");
  EXPECT_THAT(c.keys, ElementsAre("a"));
  EXPECT_EQ(c.ttl, kClaimTtl) << "a claim without ttl_s (an older version's) lapses within the default";
  EXPECT_EQ(RunClaim::from_json(nlohmann::json::parse(R"({"ttl_s":0})")).ttl, kClaimTtl);
  EXPECT_EQ(RunClaim::from_json("not an object").run_id, "");
}

TEST(RunClaim, NamesAreTheLockThenEachKeySortedOnceScopedByTheResourceKind) {
  RunClaim c = nightly();
  c.keys = {"us-1", "eu-1", "us-1"};
  EXPECT_THAT(c.names(), ElementsAre("lock/staging/orders", "key/postgres/eu-1", "key/postgres/us-1"));
  c.keys.clear();
  EXPECT_THAT(c.names(), ElementsAre("lock/staging/orders"));
}

TEST(ClaimRefusal, ALockNamesTheHoldersRunAndHostAndHowToIsolate) {
  RunClaim mine = nightly();
  mine.run_id = "orders-ci";
  mine.ttl = std::chrono::seconds(20);  // the holder's TTL (7 s) is the one that says when it lapses
  const std::string m = claim_refusal_message(mine, "lock/staging/orders", nightly(), "etcd http://10.0.0.5:2379");
  EXPECT_EQ(m,
            "another run holds this run's lock \"staging/orders\" in the lock service etcd http://10.0.0.5:2379: run "
            "orders-20261206T030000Z on host ci-7.example (pid 4242), scenario orders, started 2026-12-06T03:00:00Z. "
            "Two runs on one lock or one key judge each other's writes, so this run did not start. Wait for that run "
            "to end (a killed harness's claim lapses within 7 s), or isolate this run: lock_service.run_suffix: true "
            "gives it a lock name of its own (\"staging/orders/<run id>\")");
}

TEST(ClaimRefusal, AKeyNamesTheKeyAndSaysToUseKeysOfItsOwn) {
  const std::string m = claim_refusal_message(nightly(), "key/postgres/us-1", nightly(), "redis redis://h:6379");
  EXPECT_THAT(m, HasSubstr("this run's resource key \"us-1\" (postgres) in the lock service redis redis://h:6379: run "
                           "orders-20261206T030000Z on host ci-7.example"));
  EXPECT_THAT(m, HasSubstr("give it resource keys of its own (job.key, workers[].key)"));
  EXPECT_THAT(m, ::testing::Not(HasSubstr("run_suffix")));
}

TEST(ClaimRefusal, AnUnreadableHolderIsSaidAsSuch) {
  const std::string m = claim_refusal_message(nightly(), "lock/staging/orders", std::nullopt, "etcd http://h:1");
  EXPECT_THAT(m, HasSubstr(": a run whose claim could not be read back. "));
}

TEST(ClaimRefusal, IsTheEnvironmentsExit3Type) {
  const ClaimRefused err("lock/x", nightly(), "msg");
  const LockServiceUnavailable& base = err;
  EXPECT_STREQ(base.what(), "msg");
  EXPECT_EQ(err.name(), "lock/x");
  ASSERT_TRUE(err.holder());
  EXPECT_EQ(err.holder()->host, "ci-7.example");
}

}  // namespace
}  // namespace fencecheck::locks
