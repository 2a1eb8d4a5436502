// The redis lock client (workers/locks/redis/redis_lock_client.cpp) against a real redis-server 7,
// started by each test through the kind on a free loopback port (never the system service).
#include <atomic>
#include <chrono>
#include <set>
#include <stop_token>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "redis_test_util.h"

namespace fencecheck::testing {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using locks::Holding;
using locks::LockClient;
using locks::Session;

constexpr const char* kLock = "fc-test-lock";

// Three clients contend for one lock, each taking and releasing it 15 times. Every grant's token
// is recorded while the lock is held, so the record is in grant order: it must be strictly
// increasing (the INCR is in the same script as the SET NX), and no two clients may hold at once.
TEST(RedisLockClient, TokensStrictlyIncreaseAcrossThreeContendingClients) {
  EmbeddedRedisFixture redis;
  std::mutex mu;
  std::vector<std::int64_t> tokens;
  std::atomic<int> holders{0};
  std::atomic<int> overlaps{0};
  std::vector<std::jthread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      auto client = redis.client();
      for (int i = 0; i < 15; ++i) {
        const Session s = client->open_session(10s);
        const auto h = client->acquire(kLock, s, 20s, {});
        ASSERT_TRUE(h.has_value());
        if (holders.fetch_add(1) != 0) ++overlaps;
        {
          std::lock_guard lock(mu);
          tokens.push_back(h->token);
        }
        holders.fetch_sub(1);
        const auto r = client->release(kLock, *h, s);
        EXPECT_TRUE(r.existed);
        EXPECT_EQ(r.token, h->token);
        EXPECT_TRUE(client->close_session(s));
      }
    });
  }
  threads.clear();
  EXPECT_EQ(overlaps.load(), 0);
  ASSERT_EQ(tokens.size(), 45u);
  for (std::size_t i = 1; i < tokens.size(); ++i) EXPECT_LT(tokens[i - 1], tokens[i]) << "grant " << i;
  EXPECT_EQ(tokens.front(), 1);
  EXPECT_EQ(tokens.back(), 45) << "the counter moves only on a grant";
  Raw raw(redis.port());
  EXPECT_EQ(raw.cmd({"GET", std::string(kLock) + ":fence"}), "45");
}

TEST(RedisLockClient, TheKeyHoldsOwnerAndTokenWithTheSessionTtl) {
  EmbeddedRedisFixture redis;
  auto client = redis.client();
  const Session s = client->open_session(5000ms);
  EXPECT_NE(s.id, 0);
  EXPECT_GT(s.id, 0) << "a 63-bit owner value";
  EXPECT_EQ(s.ttl, 5000ms);
  EXPECT_TRUE(client->keepalive(s)) << "before any holding there is nothing to renew";
  EXPECT_EQ(client->remaining(s), std::optional(5000ms));
  const auto h = client->acquire(kLock, s, 1s, {});
  ASSERT_TRUE(h);
  EXPECT_EQ(h->lock_key, kLock);
  EXPECT_EQ(h->token, 1);
  EXPECT_FALSE(h->revision.has_value()) << "Redis has no revision";
  Raw raw(redis.port());
  EXPECT_EQ(raw.cmd({"GET", kLock}), std::to_string(s.id) + ":1");
  const auto pttl = std::stoll(raw.cmd({"PTTL", kLock}));
  EXPECT_GT(pttl, 4000);
  EXPECT_LE(pttl, 5000);
  const auto left = client->remaining(s);
  ASSERT_TRUE(left);
  EXPECT_GT(*left, 4000ms);
}

// The renewal is an owner-checked PEXPIRE, the release an owner-checked DEL: when the key is
// another holder's (here: overwritten behind the client's back, as after an expiry and a new
// grant), both refuse and leave that holder's key alone.
TEST(RedisLockClient, RenewalAndReleaseRefuseAForeignOwner) {
  EmbeddedRedisFixture redis;
  auto client = redis.client();
  const Session s = client->open_session(5s);
  const auto h = client->acquire(kLock, s, 1s, {});
  ASSERT_TRUE(h);
  EXPECT_TRUE(client->keepalive(s));
  Raw raw(redis.port());
  ASSERT_EQ(raw.cmd({"SET", kLock, "12345:99", "PX", "60000"}), "OK");
  EXPECT_FALSE(client->keepalive(s)) << "the key is another holder's";
  EXPECT_FALSE(client->remaining(s).has_value());
  const auto released = client->release(kLock, *h, s);
  EXPECT_FALSE(released.existed);
  EXPECT_EQ(released.token, std::optional<std::int64_t>(1));
  EXPECT_EQ(released.lease_id, std::optional(s.id));
  EXPECT_EQ(raw.cmd({"GET", kLock}), "12345:99") << "the foreign holder's key is untouched";
  EXPECT_GT(std::stoll(raw.cmd({"PTTL", kLock})), 50000) << "and its TTL was not renewed by us";
  EXPECT_TRUE(client->close_session(s));
  EXPECT_EQ(raw.cmd({"GET", kLock}), "12345:99") << "closing the session drops only our own key";

  // A second client releasing the first one's holding (its own session): refused as well.
  ASSERT_EQ(raw.cmd({"DEL", kLock}), "1");
  auto other = redis.client();
  const Session s2 = other->open_session(5s);
  const auto h1 = client->acquire(kLock, client->open_session(5s), 1s, {});
  ASSERT_TRUE(h1);
  EXPECT_FALSE(other->release(kLock, *h1, s2).existed);
  EXPECT_NE(raw.cmd({"GET", kLock}), "(nil)");
}

// A holder that stops renewing loses the key when its TTL runs out; a waiting holder gets it with
// a larger token, and the first one's renewal then says it is gone.
TEST(RedisLockClient, AHolderThatStopsRenewingLosesTheKeyAndTheNextTokenIsLarger) {
  EmbeddedRedisFixture redis;
  auto first = redis.client();
  auto second = redis.client();
  const Session s1 = first->open_session(300ms);
  const auto h1 = first->acquire(kLock, s1, 1s, {});
  ASSERT_TRUE(h1);
  const Session s2 = second->open_session(5s);
  const auto start = std::chrono::steady_clock::now();
  const auto h2 = second->acquire(kLock, s2, 10s, {});  // blocks until the first key expires
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(h2);
  EXPECT_GT(h2->token, h1->token);
  EXPECT_GE(waited, 200ms) << "granted only once the first holder's TTL had run out";
  EXPECT_FALSE(first->keepalive(s1)) << "the key is gone (and now another holder's)";
  EXPECT_FALSE(first->remaining(s1).has_value());
  EXPECT_FALSE(first->release(kLock, *h1, s1).existed);
  EXPECT_TRUE(second->keepalive(s2));
  EXPECT_TRUE(second->release(kLock, *h2, s2).existed);
}

// Renewals keep a short-TTL key alive past several TTLs (the watchdog).
TEST(RedisLockClient, KeepaliveRenewsTheLease) {
  EmbeddedRedisFixture redis;
  auto client = redis.client();
  const Session s = client->open_session(300ms);
  const auto h = client->acquire(kLock, s, 1s, {});
  ASSERT_TRUE(h);
  auto contender = redis.client();
  const Session c = contender->open_session(5s);
  std::atomic<bool> renewing{true};
  std::jthread renewer([&] {
    while (renewing) {
      EXPECT_TRUE(client->keepalive(s));
      std::this_thread::sleep_for(50ms);
    }
  });
  EXPECT_FALSE(contender->acquire(kLock, c, 1200ms, {}).has_value()) << "four TTLs later the key is still held";
  renewing = false;
  renewer.join();
  EXPECT_TRUE(client->release(kLock, *h, s).existed);
}

TEST(RedisLockClient, AcquireGivesUpAtItsTimeoutOrAtAStopRequest) {
  EmbeddedRedisFixture redis;
  auto holder = redis.client();
  const Session hs = holder->open_session(30s);
  ASSERT_TRUE(holder->acquire(kLock, hs, 1s, {}));
  auto client = redis.client();
  const Session s = client->open_session(5s);
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(client->acquire(kLock, s, 300ms, {}).has_value());
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 2s);

  std::stop_source stop;
  std::optional<Holding> got;
  start = std::chrono::steady_clock::now();
  std::jthread waiter([&] { got = client->acquire(kLock, s, 60s, stop.get_token()); });
  std::this_thread::sleep_for(100ms);  // let it start waiting; the assertion is on the stop below
  stop.request_stop();
  waiter.join();
  EXPECT_FALSE(got.has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "a stop request ends the wait at once";
  Raw raw(redis.port());
  EXPECT_EQ(raw.cmd({"GET", std::string(kLock) + ":fence"}), "1") << "no grant, no token taken";
}

// release_by_name is the mistake: it deletes whatever holds the lock, and says whose it was.
TEST(RedisLockClient, ReleaseByNameDeletesAnotherHoldersKeyAndSaysSo) {
  EmbeddedRedisFixture redis;
  auto owner = redis.client();
  auto other = redis.client();
  const Session so = owner->open_session(30s);
  const auto h = owner->acquire(kLock, so, 1s, {});
  ASSERT_TRUE(h);
  const Session st = other->open_session(30s);
  const auto deleted = other->release_by_name(kLock, st);
  ASSERT_EQ(deleted.size(), 1u);
  EXPECT_EQ(deleted[0].lock_key, kLock);
  EXPECT_EQ(deleted[0].token, std::optional(h->token));
  EXPECT_EQ(deleted[0].lease_id, std::optional(so.id));
  EXPECT_FALSE(deleted[0].own);
  EXPECT_TRUE(deleted[0].existed);
  Raw raw(redis.port());
  EXPECT_EQ(raw.cmd({"GET", kLock}), "(nil)");
  EXPECT_TRUE(other->release_by_name(kLock, st).empty()) << "nothing left to delete";
}

// close_session drops a key the session still holds: the clean-up after an acquire whose reply
// was lost (the worker closes the session of every failed attempt).
TEST(RedisLockClient, CloseSessionDropsTheSessionsOwnKey) {
  EmbeddedRedisFixture redis;
  auto client = redis.client();
  const Session s = client->open_session(30s);
  ASSERT_TRUE(client->acquire(kLock, s, 1s, {}));
  EXPECT_TRUE(client->close_session(s));
  Raw raw(redis.port());
  EXPECT_EQ(raw.cmd({"GET", kLock}), "(nil)");
  EXPECT_FALSE(client->close_session(s)) << "already closed";
}

// token: none is the plain Redis lock (redis-py's Lock): SET NX PX with the owner alone, no fence
// counter; a holder gets the constant 1, the same for every grant.
TEST(RedisLockClient, TokenNoneIsThePlainLockWithAConstantToken) {
  EmbeddedRedisFixture redis(nlohmann::json{{"token", "none"}});
  EXPECT_EQ(redis.instance->endpoint()["token"], "none");
  auto a = redis.client();
  auto b = redis.client();
  const Session sa = a->open_session(5s);
  const auto ha = a->acquire(kLock, sa, 1s, {});
  ASSERT_TRUE(ha);
  EXPECT_EQ(ha->token, 1);
  Raw raw(redis.port());
  EXPECT_EQ(raw.cmd({"GET", kLock}), std::to_string(sa.id));
  EXPECT_EQ(raw.cmd({"EXISTS", std::string(kLock) + ":fence"}), "0") << "no counter at all";
  EXPECT_TRUE(a->keepalive(sa));
  const auto ra = a->release(kLock, *ha, sa);
  EXPECT_TRUE(ra.existed);
  EXPECT_FALSE(ra.token.has_value()) << "the issuer has no token to tell";
  const Session sb = b->open_session(5s);
  const auto hb = b->acquire(kLock, sb, 1s, {});
  ASSERT_TRUE(hb);
  EXPECT_EQ(hb->token, ha->token) << "every holder presents the same constant";
  EXPECT_TRUE(b->release(kLock, *hb, sb).existed);
}

TEST(RedisLockClient, BadEndpointsAreInvalidArguments) {
  using nlohmann::json;
  EXPECT_THROW((void)locks::make_lock_client(json{{"kind", "redis"}}), std::invalid_argument);
  try {
    (void)locks::make_lock_client(json{{"kind", "redis"}, {"endpoints", {"http://127.0.0.1:6379"}}});
    FAIL() << "an http:// endpoint was accepted";
  } catch (const std::invalid_argument& err) {
    EXPECT_THAT(err.what(), HasSubstr("expected redis://host:port"));
  }
  try {
    (void)locks::make_lock_client(json{{"kind", "redis"}, {"endpoints", {"redis://127.0.0.1:6379"}}, {"token", "maybe"}});
    FAIL() << "token maybe was accepted";
  } catch (const std::invalid_argument& err) {
    EXPECT_THAT(err.what(), HasSubstr("\"fenced\" or \"none\""));
  }
}

TEST(RedisLockClient, AnUnreachableServerIsALockServiceError) {
  int port = 0;
  {
    EmbeddedRedisFixture redis;  // a port that was Redis's a moment ago and is closed now
    port = redis.port();
  }
  auto client = locks::make_lock_client(
      nlohmann::json{{"kind", "redis"}, {"endpoints", {"redis://127.0.0.1:" + std::to_string(port)}}});
  const Session s = client->open_session(1s);
  try {
    (void)client->acquire(kLock, s, 1s, {});
    FAIL() << "acquire against a closed port returned";
  } catch (const locks::LockServiceError& err) {
    EXPECT_THAT(err.what(), HasSubstr("redis 127.0.0.1:" + std::to_string(port)));
    EXPECT_THAT(err.what(), HasSubstr("connect"));
  }
}

}  // namespace
}  // namespace fencecheck::testing
