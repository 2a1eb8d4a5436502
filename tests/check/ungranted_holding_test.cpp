// ungranted-holding (checkers.h) and the issuer coverage of foreign-release and token-regression
// (issue 31, items 1 and 3) on histories built in code: a holding the lock service never granted
// is invalid, judged by the lock service's revisions and not by the order events reached the
// harness; a holding the history cannot match is unknown, never valid.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "fencecheck/harness/checkers.h"
#include "fencecheck/harness/packed_log.h"
#include "fencecheck/harness/stream_check.h"
#include "../harness/history_builder.h"  // Builder, kLock, kKey1, kKey2

namespace fencecheck::harness {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kKey3 = kLock + "/694d8a1b2c3d0003";  // w3's lock key

CheckContext context(const std::string& lock = kLock) {
  CheckContext c;
  c.lease_ttl = std::chrono::seconds(2);
  c.lock = lock;
  return c;
}

/// An acquire.ok with the given revision (the reference worker's: the Lock reply's header).
std::size_t acquire_at(Builder& b, const std::string& w, const std::string& key, std::int64_t token,
                       std::optional<std::int64_t> revision, const std::string& lock = kLock, std::int64_t lease = 7000) {
  Event e = Builder::ev(w, EventKind::kAcquireOk);
  e.lock = lock;
  e.lock_key = key;
  e.token = token;
  e.revision = revision;
  e.lease_id = lease;
  return b.add(e);
}

/// An acquire.ok as `etcdctl lock`'s worker sends it (workers/examples/shell-etcdctl/job.sh): the
/// token is ETCD_LOCK_REV (the Lock reply's header revision), and there is no revision field.
std::size_t etcdctl_acquire(Builder& b, const std::string& w, const std::string& key, std::int64_t token,
                            std::int64_t lease) {
  return acquire_at(b, w, key, token, std::nullopt, kLock, lease);
}

CheckerResult ungranted(const Builder& b, const CheckContext& ctx = context()) {
  return UngrantedHoldingChecker{}.check_with(b.h, ReadBack{}, ctx);
}

/// The zombie of etcd#11456 through `etcdctl lock` (issue 31, item 1): three workers queue on the
/// lock; w2, SIGSTOPped while queued, loses its lease, and etcd deletes its waiter key (revision
/// 5) while w1 still holds; w1 releases (6), w3 takes the lock; when w2 is continued, etcd 3.4's
/// Lock returns to it anyway, and w2 sends acquire.ok for the key deleted before, both w2 and w3
/// writing under ETCD_LOCK_REV 6.
struct Zombie {
  Builder b;
  std::size_t grant2 = 0, delete2 = 0, w2_acquire = 0, w3_acquire = 0;
};
Zombie zombie(std::int64_t w2_token = 6) {
  Zombie z;
  Builder& b = z.b;
  b.lock_grant(kKey1, 2, 7001);
  etcdctl_acquire(b, "w1", kKey1, 2, 7001);
  z.grant2 = b.lock_grant(kKey2, 3, 7002);
  b.lock_grant(kKey3, 4, 7003);
  b.write_ok("w1", 2, 0, 0, 2);
  z.delete2 = b.lock_delete(kKey2, 3, 5);  // w2's lease expired while it waited behind w1
  b.lock_delete(kKey1, 2, 6);              // w1's release
  b.release_ok("w1", kKey1, 2, 6);
  z.w3_acquire = etcdctl_acquire(b, "w3", kKey3, 6, 7003);
  b.write_ok("w3", 6, 1, 0, 6);
  z.w2_acquire = etcdctl_acquire(b, "w2", kKey2, w2_token, 7002);
  if (w2_token == 6) b.write_ok("w2", 6, 1, 1, 6);
  b.lock_delete(kKey3, 4, 7);
  return z;
}

TEST(UngrantedHolding, AZombieWhoseWaiterKeyExpiredWhileQueuedIsInvalid) {
  Zombie z = zombie();
  // A write rejected at the mark 6: w3 (the rightful holder) wrote with 6 as well, so the mark
  // may be w3's; it is not laid at w2's door.
  z.b.write("w1", EventKind::kWriteFail, 2, 0, 1, 6);
  const CheckerResult r = ungranted(z.b);
  EXPECT_EQ(r.verdict, Verdict::kInvalid) << r.error;
  ASSERT_EQ(r.anomalies.size(), 1u) << "w1 and w3 held keys the lock service granted them";
  const Anomaly& a = r.anomalies[0];
  EXPECT_EQ(a.name, "ungranted-holding");
  EXPECT_THAT(a.clients, ElementsAre("w2"));
  EXPECT_THAT(a.tokens, ElementsAre(3, 6));  // the key's create_revision, the token w2 presented
  EXPECT_THAT(a.evidence, ElementsAre(z.grant2, z.delete2, z.w2_acquire));
  EXPECT_THAT(a.description, HasSubstr("w2's acquire.ok of " + kKey2));
  EXPECT_THAT(a.description, HasSubstr("deleted it at revision 5"));
  EXPECT_THAT(a.description, HasSubstr("a queued waiter that never held the lock"));
  EXPECT_THAT(a.description, ::testing::Not(HasSubstr("rejected"))) << "w3 wrote with token 6 too: no rejection is w2's";
}

TEST(UngrantedHolding, ARightfulHolderFencedByTheZombiesTokenIsNamedToo) {
  // The zombie w2 presents a later revision (9) than the rightful holder w3's token (6): its
  // accepted write raises the mark to 9 and w3's next write is rejected against it.
  Zombie z = zombie(9);
  Builder& b = z.b;
  const std::size_t zombie_ok = b.write_ok("w2", 9, 1, 0, 9);
  const std::size_t fenced = b.write("w3", EventKind::kWriteFail, 6, 1, 1, 9);
  const CheckerResult r = ungranted(b);
  ASSERT_EQ(r.anomalies.size(), 1u) << r.error;
  const Anomaly& a = r.anomalies[0];
  EXPECT_THAT(a.clients, ElementsAre("w2", "w3"));
  EXPECT_THAT(a.evidence, ElementsAre(z.grant2, z.delete2, z.w2_acquire, zombie_ok, fenced));
  EXPECT_THAT(a.description, HasSubstr("the resource then rejected 1 write(s) of the rightful holders against the mark 9 "
                                       "that w2's writes set (the first: w3's write of ledger with token 6"));
}

TEST(UngrantedHolding, TheZombiesAcquireReportedBeforeTheDeleteIsJudgedTheSame) {
  // The harness may receive w2's acquire.ok before the watch delivers the delete of its key: the
  // lock service's order (w2's key deleted while w1's older key existed) decides, not receipt.
  Builder b;
  b.lock_grant(kKey1, 2, 7001);
  etcdctl_acquire(b, "w1", kKey1, 2, 7001);
  b.lock_grant(kKey2, 3, 7002);
  const std::size_t acquire = etcdctl_acquire(b, "w2", kKey2, 6, 7002);
  b.lock_delete(kKey2, 3, 5);
  b.lock_delete(kKey1, 2, 6);
  const CheckerResult r = ungranted(b);
  EXPECT_EQ(r.verdict, Verdict::kInvalid) << r.error;
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_THAT(r.anomalies[0].evidence, ::testing::Contains(acquire));
}

TEST(UngrantedHolding, AnAcquireRevisionAtOrAfterItsKeysDeleteIsInvalidWhateverTheReceiveOrder) {
  // The acquire.ok says w1 held the key at revision 9; the lock service deleted it at revision 8,
  // a delete the harness received only after the acquire.ok.
  Builder b;
  const std::size_t g = b.lock_grant(kKey1, 7, 7001);
  const std::size_t acquire = acquire_at(b, "w1", kKey1, 7, 9);
  const std::size_t d = b.lock_delete(kKey1, 7, 8);
  const CheckerResult r = ungranted(b);
  EXPECT_EQ(r.verdict, Verdict::kInvalid) << r.error;
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_THAT(r.anomalies[0].evidence, ElementsAre(g, acquire, d));
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("at or before the acquire's own revision 9"));
}

TEST(UngrantedHolding, AnAcquireReceivedAfterItsKeysDeleteIsPlacedByItsRevisionElseUnknown) {
  // The key was the holder's (the only key), then deleted; the worker's acquire.ok reached the
  // harness after the delete. With a revision (7, before the delete's 8) it is matched; without
  // one nothing places it in the lock service's order.
  for (const std::optional<std::int64_t> revision : {std::optional<std::int64_t>(7), std::optional<std::int64_t>()}) {
    Builder b;
    b.lock_grant(kKey1, 7, 7001);
    b.lock_delete(kKey1, 7, 8);
    acquire_at(b, "w1", kKey1, 7, revision);
    const CheckerResult r = ungranted(b);
    if (revision) {
      EXPECT_EQ(r.verdict, Verdict::kValid) << r.error;
    } else {
      EXPECT_EQ(r.verdict, Verdict::kUnknown);
      EXPECT_THAT(r.error, HasSubstr("came after the lock service deleted " + kKey1));
    }
  }
}

TEST(UngrantedHolding, AKeyNeverGrantedWhileTheWatchCoveredTheLockIsInvalid) {
  Builder b;
  b.lock_grant(kKey1, 7, 7001);
  acquire_at(b, "w1", kKey1, 7, 7);
  const std::size_t ghost = acquire_at(b, "w2", kKey2, 8, 8);
  b.lock_delete(kKey1, 7, 9);
  const CheckerResult r = ungranted(b);
  EXPECT_EQ(r.verdict, Verdict::kInvalid) << r.error;
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_THAT(r.anomalies[0].evidence, ElementsAre(ghost));
  EXPECT_THAT(r.anomalies[0].clients, ElementsAre("w2"));
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("never granted " + kKey2));
}

TEST(UngrantedHolding, AKeyNeverGrantedInAHistoryWithoutDeleteRevisionsIsUnknown) {
  // ZooKeeper's deletes carry no revision: its listing-based watch can miss a short-lived child,
  // so a key it never reported is not proof that the key never existed.
  Builder b;
  b.lock_grant(kKey1, 7, 7001);
  acquire_at(b, "w1", kKey1, 7, std::nullopt);
  acquire_at(b, "w2", kKey2, 8, std::nullopt);
  b.lock_delete(kKey1, 7, std::nullopt);
  const CheckerResult r = ungranted(b);
  EXPECT_EQ(r.verdict, Verdict::kUnknown);
  EXPECT_THAT(r.error, HasSubstr("no grant of " + kKey2));
}

TEST(UngrantedHolding, TheReasonNamesTheFirstThreeHoldingsItCannotMatchAndCountsTheRest) {
  Builder b;
  b.lock_grant(kKey1, 7, 7001);
  b.lock_delete(kKey1, 7, std::nullopt);
  for (int w = 2; w <= 6; ++w) acquire_at(b, "w" + std::to_string(w), kLock + "/k" + std::to_string(w), w, std::nullopt);
  const CheckerResult r = ungranted(b);
  EXPECT_EQ(r.verdict, Verdict::kUnknown);
  EXPECT_THAT(r.error, HasSubstr("w4's acquire.ok"));
  EXPECT_THAT(r.error, ::testing::Not(HasSubstr("w5's acquire.ok")));
  EXPECT_THAT(r.error, HasSubstr("and 2 more the history cannot match: unknown, never valid"));
}

TEST(UngrantedHolding, PythonEtcd3sLayoutTheLockNameItselfIsMatched) {
  // python-etcd3 keeps lock N at the key "/locks/N" itself, granted again for each holder.
  const std::string lock = "/locks/orders/leader";
  Builder b;
  b.lock_grant(lock, 7, 7001);
  acquire_at(b, "w1", lock, 7, 7, lock);
  b.lock_delete(lock, 7, 9);
  b.lock_grant(lock, 10, 7002);
  acquire_at(b, "w2", lock, 10, 10, lock);
  b.lock_delete(lock, 10, 12);
  const CheckerResult r = ungranted(b, context(lock));
  EXPECT_EQ(r.verdict, Verdict::kValid) << r.error;
  EXPECT_TRUE(r.anomalies.empty());
}

TEST(UngrantedHolding, AKeyOutsideTheWatchedLockIsUnknownNamingTheKey) {
  // "/locks/orders/leaderx" shares the prefix but is another lock's key: the watch did not cover it.
  const std::string lock = "/locks/orders/leader";
  Builder b;
  b.lock_grant(lock, 7, 7001);
  acquire_at(b, "w1", lock, 7, 7, lock);
  acquire_at(b, "w2", lock + "x", 8, 8, lock);
  const CheckerResult r = ungranted(b, context(lock));
  EXPECT_EQ(r.verdict, Verdict::kUnknown);
  EXPECT_THAT(r.error, HasSubstr("names the lock key /locks/orders/leaderx, outside the lock /locks/orders/leader"));
}

TEST(UngrantedHolding, AGrantTheAcquireCannotBeTiedToIsUnknown) {
  // The key granted twice; the acquire.ok, after both, has no revision and the token and lease
  // of neither.
  Builder b;
  b.lock_grant(kKey1, 7, 7001);
  b.lock_delete(kKey1, 7, 8);
  b.lock_grant(kKey1, 9, 7002);
  b.lock_delete(kKey1, 9, 10);
  etcdctl_acquire(b, "w1", kKey1, 12, 7003);
  const CheckerResult r = ungranted(b);
  EXPECT_EQ(r.verdict, Verdict::kUnknown);
  EXPECT_THAT(r.error, HasSubstr("granted " + kKey1 + " 2 times"));
}

TEST(UngrantedHolding, AGrantIsTiedToTheAcquireBySessionWhenTheTokenIsTheWorkersOwn) {
  // Redis's plain lock: every holder presents the constant token 1, and the key (the lock name
  // itself) is granted once per holding, to the holder's session (lease_id: the Redis owner).
  Builder b;
  b.lock_grant(kLock, 101, 5001);
  b.lock_delete(kLock, 101, std::nullopt);
  b.lock_grant(kLock, 102, 5002);
  acquire_at(b, "w1", kLock, 1, std::nullopt, kLock, 5001);  // reported late: after its delete
  acquire_at(b, "w2", kLock, 1, std::nullopt, kLock, 5002);
  b.lock_delete(kLock, 102, std::nullopt);
  const CheckerResult r = ungranted(b);
  EXPECT_EQ(r.verdict, Verdict::kUnknown) << "w1's acquire.ok came after its grant's delete, with no revision";
  EXPECT_THAT(r.error, HasSubstr("w1's acquire.ok"));
  EXPECT_THAT(r.error, ::testing::Not(HasSubstr("w2's acquire.ok"))) << "w2's is tied to the grant to its session";
}

/// Issue 31, item 3: the workers held a lock the watch never saw (python-etcd3's "/locks/N" beside
/// a watch on "<lock>/" before the watch covered the name itself): no lock event at all.
Builder holdings_without_lock_events() {
  Builder b;
  b.run_start();
  acquire_at(b, "w1", "/locks/orders/leader", 41, std::nullopt, "orders/leader");
  b.write_ok("w1", 41, 0, 0, 41);
  b.release_ok("w1", "/locks/orders/leader", 41, std::nullopt);
  acquire_at(b, "w2", "/locks/orders/leader", 43, std::nullopt, "orders/leader");
  b.write_ok("w2", 43, 0, 1, 43);
  return b;
}

TEST(IssuerCoverage, WorkersHoldingWhileTheWatchSawNoGrantIsNeverValid) {
  const Builder b = holdings_without_lock_events();
  ReadBack rb;
  rb.high_water = {{kLedgerKey, 43}};
  const CheckContext ctx = context("/locks/orders/leader");
  const CheckerResult u = UngrantedHoldingChecker{}.check_with(b.h, rb, ctx);
  EXPECT_EQ(u.verdict, Verdict::kUnknown);
  EXPECT_THAT(u.error, HasSubstr("has no lock.grant or lock.delete at all"));
  EXPECT_THAT(u.error, HasSubstr("w1 held /locks/orders/leader with token 41"));
  for (const CheckerResult& r : {ForeignReleaseChecker{}.check_with(b.h, rb, ctx),
                                 TokenRegressionChecker{}.check_with(b.h, rb, ctx)}) {
    EXPECT_EQ(r.verdict, Verdict::kUnknown) << r.name;
    EXPECT_THAT(r.error, HasSubstr("the lock service's history has no lock.grant")) << r.name;
  }
}

TEST(IssuerCoverage, OneGrantInTheHistoryLetsTheIssuerRulesSayValid) {
  Builder b = holdings_without_lock_events();
  b.lock_grant("/locks/orders/leader", 43, 7002);
  const CheckContext ctx = context("/locks/orders/leader");
  EXPECT_EQ(ForeignReleaseChecker{}.check_with(b.h, ReadBack{}, ctx).verdict, Verdict::kValid);
  EXPECT_EQ(TokenRegressionChecker{}.check_with(b.h, ReadBack{}, ctx).verdict, Verdict::kValid);
}

TEST(TokenRegression, AcquiresOfAnotherLockNameAreJudgedNotSkipped) {
  // The workers report the lock as "orders/leader" (python-etcd3's name), the scenario calls it
  // "/locks/orders/leader": their acquire.oks are judged among themselves.
  Builder b;
  b.lock_grant("/locks/orders/leader", 41, 7001);
  const std::size_t first = acquire_at(b, "w1", "/locks/orders/leader", 41, 41, "orders/leader");
  const std::size_t invoke = b.add(Builder::ev("w2", EventKind::kAcquireInvoke));
  const std::size_t second = acquire_at(b, "w2", "/locks/orders/leader", 41, 44, "orders/leader");
  const CheckerResult r = TokenRegressionChecker{}.check_with(b.h, ReadBack{}, context("/locks/orders/leader"));
  EXPECT_EQ(r.verdict, Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_THAT(r.anomalies[0].evidence, ElementsAre(first, invoke, second));
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("w2 presented token 41 for the lock orders/leader"));
  EXPECT_THAT(r.anomalies[0].description,
              HasSubstr("the lock service's own history granted /locks/orders/leader with token 41: the issuer "
                        "handed that token out"));
}

TEST(TokenRegression, ATokenTheWorkerInventedIsCalledTheWorkersNotTheIssuers) {
  // etcdctl's broken worker sends token 1 whatever the lock service granted (workers/examples/
  // shell-etcdctl, --broken): the regression is the worker's.
  Builder b;
  b.lock_grant(kKey1, 5, 7001);
  etcdctl_acquire(b, "w1", kKey1, 1, 7001);
  b.lock_delete(kKey1, 5, 6);
  b.add(Builder::ev("w2", EventKind::kAcquireInvoke));
  b.lock_grant(kKey2, 7, 7002);
  etcdctl_acquire(b, "w2", kKey2, 1, 7002);
  const CheckerResult r = TokenRegressionChecker{}.check_with(b.h, ReadBack{}, context());
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("w2 presented token 1"));
  EXPECT_THAT(r.anomalies[0].description,
              HasSubstr("no grant in the lock service's history gives " + kKey2 +
                        " token 1: the token is w2's own, not one the issuer granted"));
  EXPECT_THAT(r.anomalies[0].description, ::testing::Not(HasSubstr("the issuer handed")));
}

TEST(UngrantedHolding, StateStaysFlatOverALongRunAndOnlyAZombieAsksForASecondPass) {
  // 20,000 holdings, etcd-style (a fresh key per lease, tokens rising, the acquire.ok between its
  // key's grant and delete): the rule keeps what is live, not what was held. Then a zombie: a key
  // deleted while queued, held afterwards.
  auto key_of = [](int g) { return kLock + "/694d8a17f2e" + std::to_string(100000 + g); };
  Builder b;
  const ReadBack rb;
  const PackedLog log;
  const CheckContext ctx = context();
  auto rule = make_stream_rule("ungranted-holding");
  ASSERT_NE(rule, nullptr);
  rule->begin(rb, log, ctx);
  std::size_t fed = 0;
  auto feed = [&] {
    for (; fed < b.h.size(); ++fed) rule->observe(fed, b.h[fed]);
  };
  auto holdings = [&](int from, int to) {
    for (int g = from; g <= to; ++g) {
      b.lock_grant(key_of(g), 2 * g, 1000 + g);
      acquire_at(b, "w" + std::to_string(g % 7), key_of(g), 2 * g, 2 * g);
      b.lock_delete(key_of(g), 2 * g, 2 * g + 1);
    }
    feed();
  };
  holdings(1, 2'000);
  const std::size_t early = rule->state_bytes();
  holdings(2'001, 20'000);
  const std::size_t later = rule->state_bytes();
  EXPECT_LE(later, early + 256) << "18,000 more holdings grew the state from " << early << " to " << later;
  // The zombie: key 0 granted while key 20,001 holds, deleted (lease expired) while queued, then
  // its worker reports the holding.
  b.lock_grant(key_of(20'001), 40'002, 1);
  const std::size_t grant = b.lock_grant(key_of(0), 40'003, 2);
  const std::size_t expiry = b.lock_delete(key_of(0), 40'003, 40'004);
  b.lock_delete(key_of(20'001), 40'002, 40'005);
  const std::size_t zombie = etcdctl_acquire(b, "w9", key_of(0), 40'005, 2);
  feed();
  unsigned passes = 1;
  while (rule->wants_another_pass()) {
    rule->begin_pass(++passes);
    for (std::size_t i = 0; i < b.h.size(); ++i) rule->observe(i, b.h[i]);
  }
  EXPECT_EQ(passes, 3u) << "the suspect key's pass, then the zombie's writes' pass";
  const CheckerResult r = rule->finish(StreamEnd{b.h.size(), {}});
  ASSERT_EQ(r.anomalies.size(), 1u) << r.error;
  EXPECT_THAT(r.anomalies[0].evidence, ElementsAre(grant, expiry, zombie));
  // Without the zombie: one pass, valid.
  auto clean = make_stream_rule("ungranted-holding");
  clean->begin(rb, log, ctx);
  for (std::size_t i = 0; i < grant - 1; ++i) clean->observe(i, b.h[i]);
  EXPECT_FALSE(clean->wants_another_pass());
  EXPECT_EQ(clean->finish(StreamEnd{grant - 1, {}}).verdict, Verdict::kValid);
}

}  // namespace
}  // namespace fencecheck::harness
