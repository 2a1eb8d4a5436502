// The redlock kind without servers: the majority tally that turns the masters' own changes into
// the lock's grants and deletes (workers/locks/redlock/redlock_watch.h), and the kind's fields.
#include <gtest/gtest.h>

#include "../support/fake_resource_fields.h"
#include "../../workers/locks/redlock/redlock_watch.h"
#include "fencecheck/locks/lock_service_kind.h"

namespace {

using fencecheck::Event;
using fencecheck::EventKind;
using fencecheck::locks::redlock_detail::quorum;
using fencecheck::locks::redlock_detail::RedlockTally;

Event grant(const std::string& value) {
  Event e;
  e.kind = EventKind::kLockGrant;
  e.line = value;
  return e;
}

Event del(const std::string& detail) {
  Event e;
  e.kind = EventKind::kLockDelete;
  e.detail = detail;
  return e;
}

TEST(RedlockTally, QuorumIsAMajority) {
  EXPECT_EQ(quorum(5), 3);
  EXPECT_EQ(quorum(3), 2);
  EXPECT_EQ(quorum(4), 3);
  EXPECT_EQ(quorum(1), 1);
}

TEST(RedlockTally, GrantsWhenAMajorityHoldsTheValueAndDeletesWhenItFallsBelow) {
  RedlockTally t(5, "L");
  EXPECT_TRUE(t.on_member(1, grant("v1")).empty());
  EXPECT_TRUE(t.on_member(2, grant("v1")).empty()) << "2 of 5 is no majority";
  auto out = t.on_member(3, grant("v1"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, EventKind::kLockGrant);
  EXPECT_EQ(out[0].source, "lock");
  EXPECT_EQ(out[0].lock_key, "L");
  EXPECT_EQ(out[0].detail, "granted by a majority: members 1, 2, 3 of 5");
  EXPECT_FALSE(out[0].token) << "node-redlock's random value carries no token";
  EXPECT_TRUE(t.on_member(4, grant("v1")).empty()) << "a fourth master changes nothing: already held";

  // A contender's partial acquisition is no grant.
  EXPECT_TRUE(t.on_member(5, grant("v2")).empty());
  EXPECT_TRUE(t.on_member(5, del("deleted")).empty());

  // Member 1's key expires (a clock jump): 3 of 5 still hold v1.
  EXPECT_TRUE(t.on_member(1, del("expired")).empty());
  out = t.on_member(2, del("expired"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, EventKind::kLockDelete);
  EXPECT_EQ(out[0].detail, "expired") << "the issuer's word, as delete_is_expiry reads it";
  EXPECT_FALSE(t.held());
}

TEST(RedlockTally, KleppmannsClockJumpGivesTwoGrantsWithNoReleaseBetween) {
  // Client 1 holds A, B, C (D and E unreachable for it); C's clock jumps, C expires the key;
  // client 2 acquires C, D, E. The issuer's history: grant v1, delete v1 (expired), grant v2.
  RedlockTally t(5, "L");
  for (int m : {1, 2, 3}) (void)t.on_member(m, grant("v1"));
  ASSERT_EQ(t.held(), "v1");
  auto out = t.on_member(3, del("expired"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].detail, "expired");
  EXPECT_TRUE(t.on_member(3, grant("v2")).empty());
  EXPECT_TRUE(t.on_member(4, grant("v2")).empty());
  out = t.on_member(5, grant("v2"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].detail, "granted by a majority: members 3, 4, 5 of 5");
  EXPECT_EQ(t.held(), "v2");
}

TEST(RedlockTally, ParsesTheRedisKindsOwnerAndToken) {
  RedlockTally t(3, "L");
  (void)t.on_member(1, grant("42:7"));
  auto out = t.on_member(2, grant("42:7"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].lease_id, 42);
  EXPECT_EQ(out[0].token, 7);
  out = t.on_member(2, del("deleted"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].token, 7) << "the delete carries the ended holding's token";
  EXPECT_EQ(out[0].detail, "deleted");
}

TEST(RedlockTally, AnUnreadValueNeverCountsTowardsAMajority) {
  RedlockTally t(3, "L");
  EXPECT_TRUE(t.on_member(1, grant("")).empty());
  EXPECT_TRUE(t.on_member(2, grant("")).empty());
  EXPECT_FALSE(t.held());
  EXPECT_THROW((void)t.on_member(4, grant("v")), std::out_of_range);
}

TEST(RedlockKind, FieldsAndDefaults) {
  const auto* kind = fencecheck::locks::find_lock_service_kind("redlock");
  ASSERT_NE(kind, nullptr);
  const auto config = kind->parse(fencecheck::testing::FakeFields(nlohmann::json::object()));
  EXPECT_EQ(config.value("counter", ""), "etcd");
  EXPECT_EQ(config.value("clock_drift", ""), "1%");
  EXPECT_EQ(kind->parse(fencecheck::testing::FakeFields(config)), config) << "the normalized config parses again";
  const auto none = kind->parse(fencecheck::testing::FakeFields(nlohmann::json{{"counter", "none"}, {"clock_drift", "2%"}}));
  EXPECT_EQ(none.value("counter", ""), "none");
  EXPECT_EQ(none.value("clock_drift", ""), "2%");
  EXPECT_THROW((void)kind->parse(fencecheck::testing::FakeFields(nlohmann::json{{"counter", "zookeeper"}})),
               fencecheck::testing::FieldError);
  EXPECT_EQ(kind->check_endpoint("redis://127.0.0.1:6379"), "");
  EXPECT_NE(kind->check_endpoint("http://127.0.0.1:6379"), "");
}

}  // namespace
