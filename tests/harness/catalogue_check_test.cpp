// Unit tests for the failure catalogue's checkers (checkers.h: cross-key-rejection, rejection-storm,
// foreign-release, token-regression, fenced-out, duplicate-effect, counter-drift,
// lost-acknowledged-write), their figures, progress_after_heal, the read-back's effects and
// counters, and the check context. Hand-made histories and read-backs: for each checker a run
// that must show the anomaly (with its exact evidence) and the correct design's run that must not.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/checkers.h"
#include "fencecheck/harness/expectation.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/harness/verdict_json.h"
#include "fencecheck/proto/chunk.h"
#include "fencecheck/proto/readback.h"

using namespace fencecheck;
using namespace fencecheck::harness;
using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

const std::string kLock = "fencecheck/cat";
std::string lock_key(int n) { return kLock + "/694d8a1b2c3d000" + std::to_string(n); }

/// A history with receive times 1 ms apart unless told otherwise.
struct Builder {
  History h;
  std::int64_t t = 1'000'000'000;

  std::size_t add(Event e, std::int64_t advance_ns = 1'000'000) {
    t += advance_ns;
    e.t_ns = t;
    e.src_ns = t;
    return h.add(std::move(e));
  }
  static Event ev(const std::string& source, EventKind kind) {
    Event e;
    e.source = source;
    e.kind = kind;
    return e;
  }
  std::size_t acquire_invoke(const std::string& w, std::int64_t advance_ns = 1'000'000) {
    Event e = ev(w, EventKind::kAcquireInvoke);
    e.lock = kLock;
    e.ttl_ms = 2000;
    return add(e, advance_ns);
  }
  std::size_t acquire_ok(const std::string& w, const std::string& key, std::int64_t token, std::int64_t lease,
                         std::int64_t advance_ns = 1'000'000, std::optional<std::int64_t> ttl_ms = 2000) {
    Event e = ev(w, EventKind::kAcquireOk);
    e.lock = kLock;
    e.lock_key = key;
    e.token = token;
    e.lease_id = lease;
    e.ttl_ms = ttl_ms;
    return add(e, advance_ns);
  }
  std::size_t acquire_fail(const std::string& w, std::int64_t lease) {
    Event e = ev(w, EventKind::kAcquireFail);
    e.lock = kLock;
    e.lease_id = lease;
    e.detail = "Lock returned a key that no longer exists";
    return add(e);
  }
  std::size_t grant(const std::string& key, std::int64_t token, std::int64_t lease) {
    Event e = ev("lock", EventKind::kLockGrant);
    e.lock_key = key;
    e.token = token;
    e.revision = token;
    e.lease_id = lease;
    return add(e);
  }
  std::size_t del(const std::string& key, std::int64_t token, std::optional<std::int64_t> revision) {
    Event e = ev("lock", EventKind::kLockDelete);
    e.lock_key = key;
    e.token = token;
    e.revision = revision;
    return add(e);
  }
  std::size_t release_ok(const std::string& w, const std::string& key, std::int64_t token,
                         std::optional<std::int64_t> revision, std::optional<std::int64_t> lease = std::nullopt) {
    Event e = ev(w, EventKind::kReleaseOk);
    e.lock = kLock;
    e.lock_key = key;
    e.token = token;
    e.revision = revision;
    e.lease_id = lease;
    return add(e);
  }
  std::size_t release_invoke(const std::string& w, const std::string& key, std::int64_t token) {
    Event e = ev(w, EventKind::kReleaseInvoke);
    e.lock_key = key;
    e.token = token;
    return add(e);
  }
  /// One chunk write: invoke + result. kind: write.ok / write.fail / write.info. Returns the result's index.
  std::size_t write(const std::string& w, EventKind kind, std::int64_t token, std::int64_t segment,
                    std::int64_t chunk, std::optional<std::int64_t> high_water, const std::string& key = "ledger",
                    std::int64_t advance_ns = 1'000'000) {
    Event i = ev(w, EventKind::kWriteInvoke);
    i.key = key;
    i.token = token;
    i.segment = segment;
    i.chunk = chunk;
    add(i, advance_ns);
    Event e = i;
    e.kind = kind;
    e.high_water = high_water;
    return add(e);
  }
  /// A side effect: invoke + result on "<key>.effect" for a segment (no chunk).
  std::size_t effect(const std::string& w, EventKind kind, std::int64_t token, std::int64_t segment,
                     std::optional<std::int64_t> high_water) {
    Event i = ev(w, EventKind::kWriteInvoke);
    i.key = "ledger.effect";
    i.token = token;
    i.segment = segment;
    add(i);
    Event e = i;
    e.kind = kind;
    e.high_water = high_water;
    return add(e);
  }
  /// A counter increment: invoke + result on key (no chunk), detail "counter old -> new".
  std::size_t increment(const std::string& w, EventKind kind, std::int64_t token, std::int64_t old_value,
                        std::optional<std::int64_t> high_water = std::nullopt) {
    const std::string what = "counter " + std::to_string(old_value) + " -> " + std::to_string(old_value + 1);
    Event i = ev(w, EventKind::kWriteInvoke);
    i.key = "hits";
    i.token = token;
    i.detail = what;
    add(i);
    Event e = i;
    e.kind = kind;
    e.high_water = high_water;
    return add(e);
  }
  std::size_t fault(EventKind kind, const std::string& fault, const std::string& target, std::int64_t advance_ns) {
    Event e = ev("harness", kind);
    e.fault = fault;
    e.target = target;
    return add(e, advance_ns);
  }
  std::size_t job_done(const std::string& w, std::int64_t token) {
    Event e = ev(w, EventKind::kJobDone);
    e.token = token;
    return add(e);
  }
};

AcceptedWrite logged(std::int64_t seq, const std::string& client, std::int64_t token, std::int64_t segment,
                     std::int64_t chunk, const std::string& key = "ledger") {
  return AcceptedWrite{seq, key, segment, chunk, token, client};
}

// A counter write as the read-back shows it: kind counter, the new value, no slot.
AcceptedWrite counter_logged(std::int64_t seq, const std::string& client, std::int64_t token, std::int64_t value,
                             const std::string& key) {
  return AcceptedWrite{seq, key, kNoSlot, kNoSlot, token, client, WriteKind::kCounter, value};
}

StoredChunk stored(const std::string& client, std::int64_t token, std::int64_t segment, std::int64_t chunk,
                   std::int64_t seq, const std::string& key = "ledger") {
  return StoredChunk{key, segment, chunk, token, client, seq, encode_chunk(ChunkHeader{client, token, key, segment, chunk}, 64)};
}

CheckerResult run(const Checker& c, const Builder& b, const ReadBack& rb, const CheckContext& ctx = {}) {
  CheckerResult r = c.check_with(b.h, rb, ctx);
  for (auto& a : r.anomalies) normalize(a);
  return r;
}

CheckContext context(std::optional<JobKind> kind = std::nullopt) {
  CheckContext c;
  c.lease_ttl = std::chrono::seconds(2);
  c.lock = kLock;
  c.job_kind = kind;
  return c;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// cross-key-rejection

TEST(CrossKeyRejection, AGlobalMarkRejectsAKeyThatNeverReachedIt) {
  Builder b;
  b.acquire_ok("w1", lock_key(1), 33, 7001);
  const std::size_t a0 = b.write("w1", EventKind::kWriteOk, 33, 0, 0, 33, "ledger-a");
  b.acquire_ok("w2", lock_key(2), 34, 7002);
  const std::size_t b0 = b.write("w2", EventKind::kWriteOk, 34, 0, 0, 34, "ledger-b");
  const std::size_t fail = b.write("w1", EventKind::kWriteFail, 33, 0, 1, 34, "ledger-a");
  ReadBack rb;
  rb.fencing = "global";
  rb.log = {logged(1, "w1", 33, 0, 0, "ledger-a"), logged(2, "w2", 34, 0, 0, "ledger-b")};
  rb.rejections = {RejectedWrite{"ledger-a", 0, 1, 33, "w1", 34}};
  CheckerResult r = run(CrossKeyRejectionChecker{}, b, rb);
  EXPECT_EQ(r.verdict, Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 1u);
  const Anomaly& a = r.anomalies[0];
  EXPECT_EQ(a.name, "cross-key-rejection");
  EXPECT_EQ(a.key, "ledger-a");
  EXPECT_THAT(a.tokens, ElementsAre(33, 34));
  EXPECT_THAT(a.clients, ElementsAre("w1", "w2"));
  EXPECT_THAT(a.evidence, ElementsAre(b0, fail - 1, fail));  // w2's write to ledger-b, w1's invoke and fail
  EXPECT_THAT(a.readback_seqs, ElementsAre(2));
  EXPECT_THAT(a.description, HasSubstr("which only key ledger-b reached (seq 2)"));
  EXPECT_THAT(a.description, HasSubstr("1 write.fail event(s), 1 rejection(s) recorded by the resource"));
  (void)a0;
}

TEST(CrossKeyRejection, TheKeyReachingTheMarkOnlyLaterDoesNotExplainTheRejection) {
  // After the spurious rejection, w1 re-acquires (36) and rewrites ledger-a: that later write must
  // not make the earlier rejection look like ledger-a's own mark.
  Builder b;
  b.write("w1", EventKind::kWriteOk, 33, 0, 0, 33, "ledger-a");
  const std::size_t b0 = b.write("w2", EventKind::kWriteOk, 34, 0, 0, 34, "ledger-b");
  const std::size_t fail = b.write("w1", EventKind::kWriteFail, 33, 0, 1, 34, "ledger-a");
  b.write("w1", EventKind::kWriteOk, 36, 0, 0, 36, "ledger-a");
  ReadBack rb;
  rb.log = {logged(1, "w1", 33, 0, 0, "ledger-a"), logged(2, "w2", 34, 0, 0, "ledger-b"),
            logged(3, "w1", 36, 0, 0, "ledger-a")};
  rb.rejections = {RejectedWrite{"ledger-a", 0, 1, 33, "w1", 34}};
  CheckerResult r = run(CrossKeyRejectionChecker{}, b, rb);
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_THAT(r.anomalies[0].evidence, ElementsAre(b0, fail - 1, fail));
  EXPECT_THAT(r.anomalies[0].description,
              HasSubstr("ledger-a had not accepted a token >= 34: one mark fences several keys (1 write.fail event(s), "
                        "1 rejection(s) recorded by the resource)"));
  // Known only from the resource, the same rejection cannot be ordered: ledger-a reached 36, so
  // it is not attributed.
  Builder quiet;
  EXPECT_EQ(run(CrossKeyRejectionChecker{}, quiet, rb).verdict, Verdict::kValid);
}

TEST(CrossKeyRejection, AnOwnWriteAcceptedBeforeTheRejectionWhoseReplyCameLaterExplainsIt) {
  // A fresh-clone CI run (ManyWorkers.LaunchesDoNotHoldBackAFault): the per-key store accepted
  // w40's token 33 on k0 (seq 62) and then rejected the resumed w1 against it, but w1's write.fail
  // reached the harness before w40's write.ok did; another key (k8) held 34. The mark was k0's own:
  // w40's write with 33 had been sent before the rejection came back.
  const auto history = [](bool own_write_sent_first) {
    Builder b;
    Event invoke = Builder::ev("w40", EventKind::kWriteInvoke);
    invoke.key = "k0", invoke.segment = 0, invoke.chunk = 0, invoke.token = 33;
    Event ok = invoke;
    ok.kind = EventKind::kWriteOk;
    ok.high_water = 33;
    b.write("w38", EventKind::kWriteOk, 34, 0, 0, 34, "k8");
    if (own_write_sent_first) b.add(invoke);
    b.write("w1", EventKind::kWriteFail, 2, 0, 1, 33, "k0");
    if (!own_write_sent_first) b.add(invoke);
    b.add(ok);
    return b;
  };
  ReadBack rb;
  rb.log = {logged(62, "w40", 33, 0, 0, "k0"), logged(64, "w38", 34, 0, 0, "k8")};
  rb.rejections = {RejectedWrite{"k0", 0, 1, 2, "w1", 33}};
  EXPECT_EQ(run(CrossKeyRejectionChecker{}, history(true), rb).verdict, Verdict::kValid);
  // Sent only after the rejection came back, k0's 33 cannot explain it: cross-key, as before.
  const CheckerResult late = run(CrossKeyRejectionChecker{}, history(false), rb);
  EXPECT_EQ(late.verdict, Verdict::kInvalid);
  ASSERT_EQ(late.anomalies.size(), 1u);
  EXPECT_THAT(late.anomalies[0].description, HasSubstr("which only key k8 reached"));
  // Nor does a higher own token sent before: accepted before the rejection, it would have made
  // k0's mark at least 40, not 33. The mark 33 is k8's reach (a global fence): cross-key.
  Builder higher;
  higher.write("w38", EventKind::kWriteOk, 33, 0, 0, 33, "k8");
  Event invoke = Builder::ev("w40", EventKind::kWriteInvoke);
  invoke.key = "k0", invoke.segment = 0, invoke.chunk = 0, invoke.token = 40;
  higher.add(invoke);
  higher.write("w1", EventKind::kWriteFail, 2, 0, 1, 33, "k0");
  Event ok = invoke;
  ok.kind = EventKind::kWriteOk;
  ok.high_water = 40;
  higher.add(ok);
  ReadBack global;
  global.log = {logged(62, "w38", 33, 0, 0, "k8"), logged(64, "w40", 40, 0, 0, "k0")};
  global.rejections = {RejectedWrite{"k0", 0, 1, 2, "w1", 33}};
  const CheckerResult masked = run(CrossKeyRejectionChecker{}, higher, global);
  EXPECT_EQ(masked.verdict, Verdict::kInvalid);
  ASSERT_EQ(masked.anomalies.size(), 1u);
  EXPECT_THAT(masked.anomalies[0].description, HasSubstr("which only key k8 reached"));
}

TEST(CrossKeyRejection, ARejectionByTheKeysOwnMarkIsNotCrossKey) {
  // The correct per-key store: the stale holder is rejected by ledger's own mark.
  Builder b;
  b.write("w2", EventKind::kWriteOk, 34, 0, 0, 34);
  b.write("w1", EventKind::kWriteFail, 33, 0, 1, 34);
  b.write("w3", EventKind::kWriteOk, 35, 0, 0, 35, "other");
  ReadBack rb;
  rb.log = {logged(1, "w2", 34, 0, 0), logged(2, "w3", 35, 0, 0, "other")};
  rb.rejections = {RejectedWrite{"ledger", 0, 1, 33, "w1", 34}};
  EXPECT_EQ(run(CrossKeyRejectionChecker{}, b, rb).verdict, Verdict::kValid);
}

TEST(CrossKeyRejection, AnEffectIsFencedByItsKeysMark) {
  Builder b;
  b.write("w2", EventKind::kWriteOk, 34, 0, 0, 34);
  b.effect("w1", EventKind::kWriteFail, 33, 0, 34);
  ReadBack rb;
  rb.log = {logged(1, "w2", 34, 0, 0)};
  EXPECT_EQ(run(CrossKeyRejectionChecker{}, b, rb).verdict, Verdict::kValid);
}

TEST(CrossKeyRejection, AMarkNoKeyReachedCannotBeAttributed) {
  Builder b;
  b.write("w1", EventKind::kWriteFail, 33, 0, 1, 90, "ledger-a");
  ReadBack rb;
  rb.log = {logged(1, "w2", 34, 0, 0, "ledger-b")};
  EXPECT_EQ(run(CrossKeyRejectionChecker{}, b, rb).verdict, Verdict::kValid);
}

TEST(CrossKeyRejection, ALoggedWriteTheHistoryCannotOrderExplainsTheRejection) {
  // ledger-a's 35 is in the store's log but has no write.ok (its ack was lost): the checker cannot
  // say it came after the rejection, so it explains the rejection at 34. Without it, cross-key.
  Builder b;
  b.write("w2", EventKind::kWriteOk, 34, 0, 0, 34, "ledger-b");
  b.write("w1", EventKind::kWriteFail, 33, 0, 1, 34, "ledger-a");
  ReadBack rb;
  rb.log = {logged(1, "w2", 34, 0, 0, "ledger-b"), logged(2, "w3", 35, 0, 0, "ledger-a")};
  EXPECT_EQ(run(CrossKeyRejectionChecker{}, b, rb).verdict, Verdict::kValid);
  rb.log.pop_back();
  EXPECT_EQ(run(CrossKeyRejectionChecker{}, b, rb).verdict, Verdict::kInvalid);
}

TEST(CrossKeyRejection, TheOtherKeyIsTheLowestTokenAtOrAboveTheMarkThenTheFirstByName) {
  // Mark 40: ledger-c reached 41, ledger-b 41 and 50, ledger-d 39 (below): the lowest token >= 40
  // is 41, reached by ledger-b and ledger-c; ledger-b comes first by name.
  Builder b;
  b.write("w4", EventKind::kWriteOk, 39, 0, 0, 39, "ledger-d");
  b.write("w3", EventKind::kWriteOk, 41, 0, 0, 41, "ledger-c");
  const std::size_t b41 = b.write("w2", EventKind::kWriteOk, 41, 0, 1, 41, "ledger-b");
  b.write("w5", EventKind::kWriteOk, 50, 0, 2, 50, "ledger-b");
  const std::size_t fail = b.write("w1", EventKind::kWriteFail, 33, 0, 1, 40, "ledger-a");
  ReadBack rb;
  CheckerResult r = run(CrossKeyRejectionChecker{}, b, rb);
  ASSERT_EQ(r.anomalies.size(), 1u);
  const Anomaly& a = r.anomalies[0];
  EXPECT_THAT(a.tokens, ElementsAre(33, 40, 41));
  EXPECT_THAT(a.evidence, ElementsAre(b41, fail - 1, fail));
  EXPECT_THAT(a.description, HasSubstr("which only key ledger-b reached"));
}

TEST(CrossKeyRejection, EveryRejectionOfAStormIsJudgedAgainstItsOwnPrefix) {
  // 300 rejections at marks 1000+i against ledger-a, interleaved with ledger-a's own accepted
  // writes at 1000+i right after each: every rejection came before the key reached its mark, and
  // ledger-b reached each mark first, so all 300 are cross-key (one anomaly per mark).
  Builder b;
  for (std::int64_t i = 0; i < 300; ++i) {
    b.write("w2", EventKind::kWriteOk, 1000 + i, 0, i, 1000 + i, "ledger-b");
    b.write("w1", EventKind::kWriteFail, 999, 0, i, 1000 + i, "ledger-a");
    b.write("w3", EventKind::kWriteOk, 1000 + i, 1, i, 1000 + i, "ledger-a");
  }
  ReadBack rb;
  CheckerResult r = run(CrossKeyRejectionChecker{}, b, rb);
  ASSERT_EQ(r.anomalies.size(), 300u);
  EXPECT_THAT(r.anomalies[299].tokens, ElementsAre(999, 1299));
  EXPECT_THAT(r.anomalies[299].description, HasSubstr("which only key ledger-b reached"));
}

// ---------------------------------------------------------------------------------------------
// rejection-storm

TEST(RejectionStorm, RetryingTheSameRejectedTokenIsAStorm) {
  Builder b;
  std::vector<std::size_t> fails;
  for (int i = 0; i < 3; ++i) fails.push_back(b.write("w1", EventKind::kWriteFail, 33, 0, 2, 34));
  ReadBack rb;
  for (int i = 0; i < 3; ++i) rb.rejections.push_back(RejectedWrite{"ledger", 0, 2, 33, "w1", 34});
  CheckerResult r = run(RejectionStormChecker{}, b, rb);
  EXPECT_EQ(r.verdict, Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 1u);
  const Anomaly& a = r.anomalies[0];
  EXPECT_EQ(a.name, "rejection-storm");
  EXPECT_EQ(a.key, "ledger");
  EXPECT_THAT(a.tokens, ElementsAre(33));
  EXPECT_THAT(a.clients, ElementsAre("w1"));
  EXPECT_THAT(a.evidence, ElementsAre(fails[0] - 1, fails[0], fails[1] - 1, fails[1], fails[2] - 1, fails[2]));
  EXPECT_EQ(a.description,
            "w1 had 3 writes rejected with the same token 33 (3 write.fail event(s), 3 rejection(s) recorded by the "
            "resource; key ledger, high-water 34): after a rejection a holder must stop and re-acquire, never retry "
            "the same token");
}

TEST(RejectionStorm, TheCorrectHolderIsRejectedOnceThenReacquires) {
  Builder b;
  b.write("w1", EventKind::kWriteFail, 33, 0, 2, 34);
  b.acquire_ok("w1", lock_key(3), 36, 7003);
  b.write("w1", EventKind::kWriteOk, 36, 0, 0, 36);
  b.write("w1", EventKind::kWriteFail, 36, 0, 1, 37);  // fenced again later, with the new token: once
  ReadBack rb;
  rb.rejections = {RejectedWrite{"ledger", 0, 2, 33, "w1", 34}, RejectedWrite{"ledger", 0, 1, 36, "w1", 37}};
  EXPECT_EQ(run(RejectionStormChecker{}, b, rb).verdict, Verdict::kValid);
}

TEST(RejectionStorm, TheResourcesCountAloneIsEnoughAndInvalidRequestsDoNotCount) {
  Builder b;
  b.write("w1", EventKind::kWriteFail, 33, 0, 2, 34);
  b.write("w1", EventKind::kWriteFail, 33, 0, 3, std::nullopt);  // malformed request: not a fencing rejection
  ReadBack rb;
  rb.rejections = {RejectedWrite{"ledger", 0, 2, 33, "w1", 34}, RejectedWrite{"ledger", 0, 2, 33, "w1", 34}};
  CheckerResult r = run(RejectionStormChecker{}, b, rb);
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("had 2 writes rejected with the same token 33 (1 write.fail"));
  rb.rejections.pop_back();
  EXPECT_EQ(run(RejectionStormChecker{}, b, rb).verdict, Verdict::kValid);
}

// ---------------------------------------------------------------------------------------------
// foreign-release

TEST(ForeignRelease, AReleaseByNameDeletesTheNextHoldersKeys) {
  Builder b;
  b.acquire_ok("w1", lock_key(1), 33, 7001);
  b.grant(lock_key(1), 33, 7001);
  b.grant(lock_key(2), 34, 7002);
  b.del(lock_key(1), 33, 40);  // w1's lease expired
  const std::size_t w2_acquire = b.acquire_ok("w2", lock_key(2), 34, 7002);
  const std::size_t w3_grant = b.grant(lock_key(3), 35, 7003);
  b.write("w2", EventKind::kWriteOk, 34, 0, 0, 34);
  b.write("w1", EventKind::kWriteFail, 33, 0, 2, 34);
  // w1 releases by name: one delete (revision 60) removes w2's and w3's keys.
  b.add(Builder::ev("w1", EventKind::kReleaseInvoke));
  const std::size_t rel2 = b.release_ok("w1", lock_key(2), 34, 60, 7002);
  b.release_ok("w1", lock_key(3), 35, 60, 7003);
  const std::size_t del2 = b.del(lock_key(2), 34, 60);
  const std::size_t del3 = b.del(lock_key(3), 35, 60);
  b.acquire_fail("w3", 7003);
  b.acquire_invoke("w3");
  const std::size_t w3_acquire = b.acquire_ok("w3", lock_key(4), 37, 7004);
  b.write("w2", EventKind::kWriteFail, 34, 0, 1, 37);
  ReadBack rb;
  CheckerResult r = run(ForeignReleaseChecker{}, b, rb);
  EXPECT_EQ(r.verdict, Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 2u);  // one per deleted key, not one per release.ok
  const Anomaly& a = r.anomalies[0];
  EXPECT_EQ(a.name, "foreign-release");
  EXPECT_THAT(a.clients, ElementsAre("w1", "w2", "w3"));
  EXPECT_THAT(a.tokens, ElementsAre(33, 34, 37));
  EXPECT_THAT(a.evidence, ElementsAre(2, w2_acquire, rel2, del2, w3_acquire));
  EXPECT_EQ(a.description, "w1 released the lock by deleting " + lock_key(2) +
                               " (token 34, created by w2) at revision 60: a release without an owner check; w3 then "
                               "acquired the lock (token 37) while w2 was still mid-job");
  // w3's waiting key: its owner is found through the lease of its lock.grant.
  const Anomaly& c = r.anomalies[1];
  EXPECT_THAT(c.clients, ElementsAre("w1", "w3"));
  EXPECT_THAT(c.evidence, ElementsAre(w3_grant, rel2, del3));
  EXPECT_THAT(c.description, HasSubstr("deleting " + lock_key(3) + " (token 35, created by w3)"));
}

TEST(ForeignRelease, ReleasingOnesOwnKeyIsFine) {
  Builder b;
  b.grant(lock_key(1), 33, 7001);  // without any grant the rule could not say valid (IssuerCoverage)
  b.acquire_ok("w1", lock_key(1), 33, 7001);
  b.del(lock_key(1), 33, 40);
  b.release_ok("w1", lock_key(1), 33, std::nullopt);  // already gone: nothing deleted, no revision
  b.acquire_ok("w2", lock_key(2), 34, 7002);
  b.job_done("w2", 34);
  b.release_ok("w2", lock_key(2), 34, 50);
  b.del(lock_key(2), 34, 50);
  EXPECT_EQ(run(ForeignReleaseChecker{}, b, ReadBack{}).verdict, Verdict::kValid);
}

// ZooKeeper restarted on empty data: the lock znode's sequence numbers start again, so w2's key has
// the name w1's had, with another token. w2 deleting it deletes its own key.
TEST(ForeignRelease, AKeyNameThatComesBackIsOwnedByItsToken) {
  Builder b;
  b.acquire_ok("w1", lock_key(0), 110, 7001);
  b.grant(lock_key(0), 110, 7001);
  b.del(lock_key(0), 110, std::nullopt);  // lost with the old server's data
  b.acquire_ok("w2", lock_key(0), 7, 7002);
  b.grant(lock_key(0), 7, 7002);
  b.release_ok("w2", lock_key(0), 7, 8, 7002);
  b.del(lock_key(0), 7, std::nullopt);
  EXPECT_EQ(run(ForeignReleaseChecker{}, b, ReadBack{}).verdict, Verdict::kValid);
  // The same release naming w1's token is w1's key: foreign.
  b.release_ok("w2", lock_key(0), 110, 9, 7001);
  CheckerResult r = run(ForeignReleaseChecker{}, b, ReadBack{});
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("(token 110, created by w1)"));
}

TEST(ForeignRelease, NoThirdHolderAfterTheOwnerFinished) {
  Builder b;
  b.acquire_ok("w2", lock_key(2), 34, 7002);
  b.job_done("w2", 34);
  b.release_ok("w1", lock_key(2), 34, 60, 7002);
  b.acquire_ok("w3", lock_key(3), 35, 7003);
  CheckerResult r = run(ForeignReleaseChecker{}, b, ReadBack{});
  ASSERT_EQ(r.anomalies.size(), 1u);  // still someone else's key
  EXPECT_THAT(r.anomalies[0].clients, ElementsAre("w1", "w2"));
  EXPECT_THAT(r.anomalies[0].description, ::testing::Not(HasSubstr("mid-job")));
}

// ---------------------------------------------------------------------------------------------
// token-regression

TEST(TokenRegression, ALaterGrantWithALowerTokenInRealTimeOrder) {
  Builder b;
  const std::size_t w1 = b.acquire_ok("w1", lock_key(1), 1'700'000'000'000'000'000, 7001);
  const std::size_t inv = b.acquire_invoke("w2");
  const std::size_t w2 = b.acquire_ok("w2", lock_key(2), 1'699'999'970'000'000'000, 7002);
  CheckerResult r = run(TokenRegressionChecker{}, b, ReadBack{}, context());
  EXPECT_EQ(r.verdict, Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_THAT(r.anomalies[0].evidence, ElementsAre(w1, inv, w2));
  EXPECT_THAT(r.anomalies[0].tokens, ElementsAre(1'699'999'970'000'000'000, 1'700'000'000'000'000'000));
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("w2 presented token 1699999970000000000"));
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("the tokens presented went backwards"));
  // No grant in the history: who chose the token is not known, and the issuer is not blamed.
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("whether the issuer or w2 chose token 1699999970000000000 is not known"));
}

TEST(TokenRegression, ARaceOfGrantsIsNotARegression) {
  // w2 asked before w1's grant completed: their acquire.oks may arrive in either order.
  Builder b;
  b.acquire_invoke("w2");
  b.acquire_ok("w1", lock_key(1), 34, 7001);
  b.acquire_ok("w2", lock_key(2), 33, 7002);
  ReadBack rb;
  rb.high_water = {{"ledger", 34}};
  CheckerResult r = run(TokenRegressionChecker{}, b, rb, context());
  // Only the mark-above-latest rule speaks (33 is the last acquire), not the real-time rule.
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].key, "ledger");
}

TEST(TokenRegression, TheLockServicesGrantsGoingBackwards) {
  Builder b;
  const std::size_t g40 = b.grant(lock_key(1), 40, 7001);
  b.grant(lock_key(1), 40, 7001);  // a replay of the same grant is not a grant
  const std::size_t g3 = b.grant(lock_key(2), 3, 1);
  CheckerResult r = run(TokenRegressionChecker{}, b, ReadBack{}, context());
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_THAT(r.anomalies[0].evidence, ElementsAre(g40, g3));
  EXPECT_THAT(r.anomalies[0].tokens, ElementsAre(3, 40));
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("its token counter went backwards"));
}

TEST(TokenRegression, TheStoresMarkAboveTheIssuersLatestToken) {
  Builder b;
  b.acquire_ok("w1", lock_key(1), 48, 7001);
  const std::size_t ok48 = b.write("w1", EventKind::kWriteOk, 48, 0, 0, 48);
  b.acquire_invoke("w2", 0);
  // Issued before the reset: the acquire.ok below comes from the fresh issuer.
  const std::size_t last = b.acquire_ok("w2", lock_key(9), 3, 1);
  ReadBack rb;
  rb.log = {logged(7, "w1", 48, 0, 0)};
  rb.high_water = {{"ledger", 48}};
  CheckerResult r = run(TokenRegressionChecker{}, b, rb, context());
  ASSERT_EQ(r.anomalies.size(), 2u);  // the real-time rule and the mark rule
  const Anomaly& m = r.anomalies[1];
  EXPECT_EQ(m.key, "ledger");
  EXPECT_THAT(m.tokens, ElementsAre(3, 48));
  EXPECT_THAT(m.evidence, ElementsAre(ok48, last));
  EXPECT_THAT(m.readback_seqs, ElementsAre(7));
  EXPECT_THAT(m.description, HasSubstr("high-water mark for ledger is 48, above the issuer's latest token 3"));
}

TEST(TokenRegression, TheSameTokenHandedOutTwiceIsARegression) {
  // Catalogue item 7 on a young lock service: the issuer reset gave w2 the very token w1 had
  // (create_revision 2 twice), which a store accepts (equal is not below its mark).
  Builder b;
  const std::size_t g1 = b.grant(lock_key(1), 2, 7001);
  const std::size_t w1 = b.acquire_ok("w1", lock_key(1), 2, 7001);
  b.write("w1", EventKind::kWriteOk, 2, 0, 0, 2);
  const std::size_t inv = b.acquire_invoke("w2");
  const std::size_t g2 = b.grant(lock_key(2), 2, 1);
  const std::size_t w2 = b.acquire_ok("w2", lock_key(2), 2, 1);
  b.write("w2", EventKind::kWriteOk, 2, 0, 0, 2);
  ReadBack rb;
  rb.high_water = {{"ledger", 2}};
  CheckerResult r = run(TokenRegressionChecker{}, b, rb, context());
  EXPECT_EQ(r.verdict, Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 2u);  // the real-time rule and the grant rule; the mark (2) is not above 2
  EXPECT_THAT(r.anomalies[0].evidence, ElementsAre(w1, inv, w2));
  EXPECT_THAT(r.anomalies[0].tokens, ElementsAre(2));  // one token, twice (tokens are normalized: sorted, unique)
  EXPECT_THAT(r.anomalies[0].clients, ElementsAre("w1", "w2"));
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("the same token held twice"));
  EXPECT_THAT(r.anomalies[0].description,
              HasSubstr("the lock service's own history granted " + lock_key(2) + " with token 2: the issuer handed that token out"));
  EXPECT_THAT(r.anomalies[1].evidence, ElementsAre(g1, g2));
  EXPECT_THAT(r.anomalies[1].description, HasSubstr("a reset issuer"));
}

TEST(TokenRegression, OneHoldersOwnGrantSeenTwiceIsNotReissued) {
  // The same key's grant replayed by the watch, and a holder's acquire.ok: one token, one grant.
  Builder b;
  b.grant(lock_key(1), 2, 7001);
  b.grant(lock_key(1), 2, 7001);
  b.acquire_ok("w1", lock_key(1), 2, 7001);
  b.acquire_invoke("w2");
  b.grant(lock_key(2), 3, 7002);
  b.acquire_ok("w2", lock_key(2), 3, 7002);
  EXPECT_EQ(run(TokenRegressionChecker{}, b, ReadBack{}, context()).verdict, Verdict::kValid);
}

TEST(TokenRegression, GrantsOfALockKeyedByItsOwnNameCount) {
  // redis: every holder's lock key is the lock name itself; a restart without persistence starts
  // the fence counter again.
  Builder b;
  b.grant(kLock, 101, 7001);
  const std::size_t g102 = b.grant(kLock, 102, 7002);
  const std::size_t g1 = b.grant(kLock, 1, 7003);
  b.grant("fencecheck/testing", 1, 7004);  // another lock whose name merely starts the same
  CheckerResult r = run(TokenRegressionChecker{}, b, ReadBack{}, context());
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_THAT(r.anomalies[0].evidence, ElementsAre(g102, g1));
  EXPECT_THAT(r.anomalies[0].tokens, ElementsAre(1, 102));
}

TEST(TokenRegression, IncreasingTokensAndOtherLocksAreFine) {
  Builder b;
  b.grant(lock_key(1), 33, 7001);
  b.acquire_ok("w1", lock_key(1), 33, 7001);
  b.acquire_invoke("w2");
  b.grant(lock_key(2), 34, 7002);
  b.acquire_ok("w2", lock_key(2), 34, 7002);
  Event other = Builder::ev("w3", EventKind::kAcquireOk);
  other.lock = "fencecheck/another-lock";
  other.lock_key = "fencecheck/another-lock/1";
  other.token = 5;
  b.add(other);
  ReadBack rb;
  rb.high_water = {{"ledger", 34}};
  EXPECT_EQ(run(TokenRegressionChecker{}, b, rb, context()).verdict, Verdict::kValid);
}

// ---------------------------------------------------------------------------------------------
// fenced-out

namespace {
/// The issuer reset: w1 wrote with 48, etcd restarted empty, w2's fresh tokens are all below 48.
Builder issuer_reset(std::size_t* heal = nullptr) {
  Builder b;
  b.acquire_ok("w1", lock_key(1), 48, 7001);
  b.write("w1", EventKind::kWriteOk, 48, 0, 0, 48);
  b.fault(EventKind::kFaultInject, "lock-service-restart", "lock-service", 1'000'000);
  const std::size_t h = b.fault(EventKind::kFaultHeal, "lock-service-restart", "lock-service", 1'000'000'000);
  if (heal) *heal = h;
  for (std::int64_t token = 3; token <= 9; token += 2) {
    b.acquire_invoke("w2", 200'000'000);
    b.acquire_ok("w2", lock_key(static_cast<int>(token)), token, token);
    b.write("w2", EventKind::kWriteFail, token, 0, 0, 48, "ledger", 500'000'000);
  }
  return b;
}
}  // namespace

TEST(FencedOut, FreshTokensAllRejectedAfterTheHeal) {
  std::size_t heal = 0;
  Builder b = issuer_reset(&heal);
  CheckerResult r = run(FencedOutChecker{}, b, ReadBack{}, context());
  EXPECT_EQ(r.verdict, Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 1u);
  const Anomaly& a = r.anomalies[0];
  EXPECT_EQ(a.name, "fenced-out");
  EXPECT_EQ(a.key, "ledger");
  EXPECT_THAT(a.tokens, ElementsAre(3, 5, 7, 9));
  EXPECT_THAT(a.clients, ElementsAre("w2"));
  // The heal, the first fresh acquire.ok and every rejection and acquire of the streak.
  EXPECT_EQ(a.evidence.front(), heal);
  EXPECT_EQ(a.evidence.size(), 1u + 4u + 3u + 1u);
  EXPECT_EQ(a.description,
            "after the last heal, w2's write with the freshly acquired token 3 was rejected against the high-water "
            "mark 48, and no write was accepted within 4.00 s (lease TTL 2.00 s + 2.00 s to acquire): 4 rejection(s) "
            "over 2.11 s, and none was accepted before the run ended: the holders are fenced out with healthy "
            "services");
}

TEST(FencedOut, TheCorrectHolderIsRejectedWithItsStaleTokenThenProgresses) {
  Builder b;
  b.acquire_ok("w1", lock_key(1), 33, 7001);
  b.write("w1", EventKind::kWriteOk, 33, 0, 0, 33);
  b.fault(EventKind::kFaultInject, "sigstop", "w1", 1'000'000);
  b.acquire_ok("w2", lock_key(2), 34, 7002, 2'500'000'000);
  b.write("w2", EventKind::kWriteOk, 34, 0, 0, 34);
  b.fault(EventKind::kFaultHeal, "sigstop", "w1", 2'500'000'000);
  b.write("w1", EventKind::kWriteFail, 33, 0, 1, 34);  // stale: acquired before the heal
  b.acquire_ok("w1", lock_key(3), 35, 7003);
  b.write("w1", EventKind::kWriteOk, 35, 0, 1, 35);
  EXPECT_EQ(run(FencedOutChecker{}, b, ReadBack{}, context()).verdict, Verdict::kValid);
}

TEST(FencedOut, AFreshRejectionFollowedByAnotherHoldersProgressIsFine) {
  Builder b;
  b.acquire_ok("w3", lock_key(3), 35, 7003);
  b.acquire_ok("w1", lock_key(4), 37, 7004);  // w1 took the lock over after a release by name
  b.write("w3", EventKind::kWriteFail, 35, 0, 0, 37);
  b.write("w1", EventKind::kWriteOk, 37, 0, 0, 37, "ledger", 300'000'000);
  EXPECT_EQ(run(FencedOutChecker{}, b, ReadBack{}, context()).verdict, Verdict::kValid);
}

TEST(FencedOut, ProgressThatComesTooLateStillCounts) {
  Builder b;
  b.acquire_ok("w2", lock_key(2), 5, 5);  // no fault at all: judged from the start
  b.write("w2", EventKind::kWriteFail, 5, 0, 0, 48);
  b.write("w3", EventKind::kWriteOk, 50, 0, 0, 50, "ledger", 5'000'000'000);
  CheckerResult r = run(FencedOutChecker{}, b, ReadBack{}, context());
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("from the start of the run"));
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("until a write was accepted 5.00 s later"));
}

TEST(FencedOut, TheTtlComesFromTheContextElseTheHistoryElseUnknown) {
  Builder b = issuer_reset();
  CheckContext none;  // no TTL: the workers' ttl_ms (2000) decides
  EXPECT_EQ(run(FencedOutChecker{}, b, ReadBack{}, none).verdict, Verdict::kInvalid);
  CheckContext longer = context();
  longer.lease_ttl = std::chrono::seconds(60);  // a window longer than the run: still none accepted
  EXPECT_EQ(run(FencedOutChecker{}, b, ReadBack{}, longer).verdict, Verdict::kInvalid);

  Builder quiet;
  quiet.acquire_ok("w2", lock_key(2), 5, 5, 1'000'000, std::nullopt);
  quiet.write("w2", EventKind::kWriteFail, 5, 0, 0, 48);
  CheckerResult r = run(FencedOutChecker{}, quiet, ReadBack{}, CheckContext{});
  EXPECT_EQ(r.verdict, Verdict::kUnknown);
  EXPECT_THAT(r.error, HasSubstr("no lease TTL known"));
  // The old two-argument form has no context but still decides from the history's ttl_ms.
  EXPECT_EQ(FencedOutChecker{}.check(b.h, ReadBack{}).verdict, Verdict::kInvalid);
}

// ---------------------------------------------------------------------------------------------
// duplicate-effect

namespace {
EffectRecord effect_record(const std::string& client, const std::string& id, std::int64_t token, std::int64_t seq,
                           bool applied, const std::string& mode = "unfenced") {
  return EffectRecord{"ledger", id, token, client, seq, applied, mode};
}
}  // namespace

TEST(DuplicateEffect, AStaleHolderPaysOutWhatANewerHolderPaid) {
  Builder b;
  const std::size_t w2 = b.effect("w2", EventKind::kWriteOk, 34, 0, 34);
  b.effect("w2", EventKind::kWriteOk, 34, 1, 34);
  const std::size_t w1 = b.effect("w1", EventKind::kWriteOk, 33, 0, 34);
  ReadBack rb;
  rb.effects = {effect_record("w2", "w2:seg0", 34, 5, true), effect_record("w2", "w2:seg1", 34, 8, true),
                effect_record("w1", "w1:seg0", 33, 9, true)};
  CheckerResult r = run(DuplicateEffectChecker{}, b, rb, context(JobKind::kSideEffect));
  EXPECT_EQ(r.verdict, Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 1u);
  const Anomaly& a = r.anomalies[0];
  EXPECT_EQ(a.name, "duplicate-effect");
  EXPECT_EQ(a.key, "ledger");
  EXPECT_EQ(a.segment, 0);
  EXPECT_THAT(a.tokens, ElementsAre(33, 34));
  EXPECT_THAT(a.clients, ElementsAre("w1", "w2"));
  EXPECT_THAT(a.readback_seqs, ElementsAre(5, 9));
  EXPECT_THAT(a.evidence, ElementsAre(w2, w1));
  EXPECT_EQ(a.description,
            "effect seg0 on ledger was applied 2 times: by w2 (token 34, seq 5), again by w1 (token 33, seq 9); 1 "
            "application(s) came with a token not above one that had already applied it (a stale or repeated side "
            "effect)");
}

TEST(DuplicateEffect, TheJobsOwnEffectIdFromTwoHoldersIsOneEffect) {
  // The worker sends the job's id ("seg0") whoever performs it: w2's payout, then the stale w1's.
  Builder b;
  ReadBack rb;
  rb.effects = {effect_record("w2", "seg0", 104, 4, true, "unfenced"), effect_record("w2", "seg1", 104, 7, true, "unfenced"),
                effect_record("w1", "seg0", 103, 9, true, "unfenced")};
  CheckerResult r = run(DuplicateEffectChecker{}, b, rb, context(JobKind::kSideEffect));
  EXPECT_EQ(r.verdict, Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].segment, 0);
  EXPECT_THAT(r.anomalies[0].readback_seqs, ElementsAre(4, 9));
  EXPECT_THAT(r.anomalies[0].clients, ElementsAre("w1", "w2"));
  EXPECT_THAT(r.anomalies[0].tokens, ElementsAre(103, 104));
}

TEST(DuplicateEffect, AStaleHoldersPayoutThatLandedFirstIsTheJobRedone) {
  // The pause landed after w1's payout had been applied (the request was on its way): w2 redoes
  // it with a newer token. Both applied, in increasing token order: not what fencing prevents,
  // which is why catalogue item 8 stops w1 before the payout (self_stop_at: effect).
  Builder b;
  ReadBack rb;
  rb.effects = {effect_record("w1", "seg0", 103, 3, true, "unfenced"), effect_record("w2", "seg0", 104, 6, true, "unfenced"),
                effect_record("w2", "seg1", 104, 9, true, "unfenced")};
  EXPECT_EQ(run(DuplicateEffectChecker{}, b, rb, context(JobKind::kSideEffect)).verdict, Verdict::kValid);
}

TEST(DuplicateEffect, ANewerHolderRedoingTheJobIsNotADuplicate) {
  Builder b;
  ReadBack rb;
  rb.effects = {effect_record("w1", "seg0", 33, 3, true, "fenced"), effect_record("w2", "seg0", 34, 8, true, "fenced"),
                effect_record("w1", "seg0", 33, 12, false, "fenced")};  // the stale one was refused
  EXPECT_EQ(run(DuplicateEffectChecker{}, b, rb, context(JobKind::kSideEffect)).verdict, Verdict::kValid);
}

TEST(DuplicateEffect, AnIdempotentRepeatIsIgnoredAndConverges) {
  Builder b;
  ReadBack rb;
  rb.effects = {effect_record("w2", "seg0", 34, 5, true, "idempotent"),
                effect_record("w1", "seg0", 33, 9, false, "idempotent")};
  EXPECT_EQ(run(DuplicateEffectChecker{}, b, rb, context(JobKind::kSideEffect)).verdict, Verdict::kValid);
}

TEST(DuplicateEffect, TheSameTokenTwiceIsADuplicate) {
  Builder b;
  ReadBack rb;
  rb.effects = {effect_record("w1", "seg2", 33, 5, true), effect_record("w1", "seg2", 33, 6, true)};
  CheckerResult r = run(DuplicateEffectChecker{}, b, rb);
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].segment, 2);
  EXPECT_THAT(r.anomalies[0].readback_seqs, ElementsAre(5, 6));
}

TEST(DuplicateEffect, ASideEffectJobWithoutEffectsInTheReadBackIsUnknown) {
  Builder b;
  b.effect("w1", EventKind::kWriteOk, 33, 0, 33);
  CheckerResult r = run(DuplicateEffectChecker{}, b, ReadBack{}, context(JobKind::kSideEffect));
  EXPECT_EQ(r.verdict, Verdict::kUnknown);
  EXPECT_THAT(r.error, HasSubstr("lists no effects"));
  EXPECT_EQ(run(DuplicateEffectChecker{}, b, ReadBack{}, context(JobKind::kSegments)).verdict, Verdict::kValid);
}

// ---------------------------------------------------------------------------------------------
// counter-drift

TEST(CounterDrift, LostUpdatesWithoutFencing) {
  Builder b;
  // w1 read 0 and stopped; w2 incremented 0 -> 3; w1 wrote 0 -> 1, then went on from 1.
  for (int v = 0; v < 3; ++v) b.increment("w2", EventKind::kWriteOk, 34, v, 34);
  const std::size_t stale = b.increment("w1", EventKind::kWriteOk, 33, 0, 34);
  const std::size_t w1_next = b.increment("w1", EventKind::kWriteOk, 33, 1, 34);
  ReadBack rb;
  rb.counters = {{"hits", 2}};
  rb.log = {counter_logged(1, "w2", 34, 1, "hits"), counter_logged(2, "w2", 34, 2, "hits"),
            counter_logged(3, "w2", 34, 3, "hits"), counter_logged(4, "w1", 33, 1, "hits"),
            counter_logged(5, "w1", 33, 2, "hits")};
  CheckerResult r = run(CounterDriftChecker{}, b, rb, context(JobKind::kCounter));
  EXPECT_EQ(r.verdict, Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 1u);
  const Anomaly& a = r.anomalies[0];
  EXPECT_EQ(a.name, "counter-drift");
  EXPECT_EQ(a.key, "hits");
  // The increments that wrote a value another one had written: 1 (w2's first, w1's stale) and 2.
  EXPECT_THAT(a.evidence, ElementsAre(1, 3, stale, w1_next));
  EXPECT_THAT(a.readback_seqs, ElementsAre(1, 2, 4, 5));
  EXPECT_THAT(a.tokens, ElementsAre(33, 34));
  EXPECT_EQ(a.description,
            "counter hits is 2 but 5 increment(s) were acknowledged: 3 acknowledged increment(s) lost; holders wrote "
            "the same new value twice (1, 2): read-modify-write races");
}

TEST(CounterDrift, ExactWithFencing) {
  Builder b;
  for (int v = 0; v < 3; ++v) b.increment("w2", EventKind::kWriteOk, 34, v, 34);
  b.increment("w1", EventKind::kWriteFail, 33, 0, 34);  // the stale increment is rejected
  b.increment("w1", EventKind::kWriteOk, 35, 3, 35);   // redone with a new token
  ReadBack rb;
  rb.counters = {{"hits", 4}};
  EXPECT_EQ(run(CounterDriftChecker{}, b, rb, context(JobKind::kCounter)).verdict, Verdict::kValid);
}

TEST(CounterDrift, UnknownOutcomesWidenTheRangeOnlyUpwards) {
  Builder b;
  b.increment("w1", EventKind::kWriteOk, 33, 0);
  b.increment("w1", EventKind::kWriteInfo, 33, 1);  // the reply was lost: maybe applied
  ReadBack rb;
  rb.counters = {{"hits", 2}};
  EXPECT_EQ(run(CounterDriftChecker{}, b, rb).verdict, Verdict::kValid);
  rb.counters = {{"hits", 1}};
  EXPECT_EQ(run(CounterDriftChecker{}, b, rb).verdict, Verdict::kValid);
  rb.counters = {{"hits", 3}};
  CheckerResult r = run(CounterDriftChecker{}, b, rb);
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("(and 1 had an unknown outcome): 1 increment(s) more than were sent"));
}

TEST(CounterDrift, ACounterJobWithoutCountersInTheReadBackIsUnknown) {
  Builder b;
  b.increment("w1", EventKind::kWriteOk, 33, 0);
  EXPECT_EQ(run(CounterDriftChecker{}, b, ReadBack{}, context(JobKind::kCounter)).verdict, Verdict::kUnknown);
  // Without a context, chunk-less writes with no counters read back are not counters at all.
  EXPECT_EQ(run(CounterDriftChecker{}, b, ReadBack{}).verdict, Verdict::kValid);
}

// ---------------------------------------------------------------------------------------------
// lost-acknowledged-write

TEST(LostAcknowledgedWrite, AnAcknowledgedChunkMissingFromTheLog) {
  Builder b;
  const std::size_t ok = b.write("w1", EventKind::kWriteOk, 33, 0, 0, 33);
  b.write("w1", EventKind::kWriteOk, 33, 0, 1, 33);
  ReadBack rb;
  rb.log = {logged(1, "w1", 33, 0, 1)};
  rb.chunks = {stored("w1", 33, 0, 1, 1)};
  CheckerResult r = run(LostAcknowledgedWriteChecker{}, b, rb);
  EXPECT_EQ(r.verdict, Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 1u);
  const Anomaly& a = r.anomalies[0];
  EXPECT_EQ(a.name, "lost-acknowledged-write");
  EXPECT_EQ(a.segment, 0);
  EXPECT_THAT(a.evidence, ElementsAre(ok - 1, ok));
  EXPECT_TRUE(a.readback_seqs.empty());
  EXPECT_EQ(a.description,
            "the resource acknowledged ledger segment 0 chunk 0 from w1 (token 33) but no longer shows it and nothing "
            "superseded it: the resource's log has no record of it");
}

TEST(LostAcknowledgedWrite, ASlotHoldingAnEarlierWrite) {
  Builder b;
  b.write("w1", EventKind::kWriteOk, 33, 0, 0, 33);
  const std::size_t ok = b.write("w2", EventKind::kWriteOk, 34, 0, 0, 34);
  ReadBack rb;
  rb.log = {logged(1, "w1", 33, 0, 0), logged(2, "w2", 34, 0, 0)};
  rb.chunks = {stored("w1", 33, 0, 0, 1)};  // rolled back to the older write
  CheckerResult r = run(LostAcknowledgedWriteChecker{}, b, rb);
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_THAT(r.anomalies[0].evidence, ElementsAre(ok - 1, ok));
  EXPECT_THAT(r.anomalies[0].readback_seqs, ElementsAre(1, 2));
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("its slot holds an earlier write (seq 1)"));
}

TEST(LostAcknowledgedWrite, SupersededOrStillThereIsFine) {
  Builder b;
  b.write("w1", EventKind::kWriteOk, 33, 0, 0, 33);
  b.write("w2", EventKind::kWriteOk, 34, 0, 0, 34);
  b.write("w2", EventKind::kWriteOk, 34, 0, 1, 34);
  b.increment("w2", EventKind::kWriteOk, 34, 0);  // no chunk: not a chunk write
  b.effect("w2", EventKind::kWriteOk, 34, 0, 34);
  ReadBack rb;
  rb.log = {logged(1, "w1", 33, 0, 0), logged(2, "w2", 34, 0, 0), logged(3, "w2", 34, 0, 1)};
  rb.chunks = {stored("w2", 34, 0, 0, 2), stored("w2", 34, 0, 1, 3)};
  EXPECT_EQ(run(LostAcknowledgedWriteChecker{}, b, rb).verdict, Verdict::kValid);
}

TEST(LostAcknowledgedWrite, WithoutALogTheSlotMustHoldALaterAcknowledgedWrite) {
  Builder b;
  b.write("w1", EventKind::kWriteOk, 33, 0, 0, 33);
  b.write("w2", EventKind::kWriteOk, 34, 0, 0, 34);
  ReadBack rb;
  rb.chunks = {stored("w2", 34, 0, 0, 2)};
  EXPECT_EQ(run(LostAcknowledgedWriteChecker{}, b, rb).verdict, Verdict::kValid);
  rb.chunks = {stored("w9", 30, 0, 0, 2)};  // something nobody acknowledged after
  CheckerResult r = run(LostAcknowledgedWriteChecker{}, b, rb);
  ASSERT_EQ(r.anomalies.size(), 2u);
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("its slot holds token 30 by w9"));
}

// ---------------------------------------------------------------------------------------------
// Figures, context, analyze

TEST(CatalogueFigures, RejectionsPerTokenDuplicatesAndCounters) {
  Builder b;
  b.write("w1", EventKind::kWriteFail, 33, 0, 2, 34);
  b.write("w1", EventKind::kWriteFail, 33, 0, 2, 34);
  b.write("w2", EventKind::kWriteFail, 35, 0, 0, 36);
  for (int v = 0; v < 3; ++v) b.increment("w2", EventKind::kWriteOk, 34, v, 34);
  b.increment("w2", EventKind::kWriteInfo, 34, 3);
  ReadBack rb;
  rb.rejections = {RejectedWrite{"ledger", 0, 2, 33, "w1", 34}};
  rb.effects = {effect_record("w2", "seg0", 34, 5, true), effect_record("w1", "seg0", 33, 9, true),
                effect_record("w1", "seg0", 33, 10, true), effect_record("w2", "seg1", 34, 11, false)};
  rb.counters = {{"hits", 3}};
  Figures f = compute_figures(b.h, rb, context(JobKind::kCounter));
  ASSERT_EQ(f.rejections_per_token.size(), 2u);
  EXPECT_EQ(f.rejections_per_token[0].client, "w1");
  EXPECT_EQ(f.rejections_per_token[0].token, 33);
  EXPECT_EQ(f.rejections_per_token[0].history, 2);
  EXPECT_EQ(f.rejections_per_token[0].readback, 1);
  EXPECT_EQ(f.rejections_per_token[0].count(), 2);
  EXPECT_EQ(f.rejections_per_token[1].client, "w2");
  EXPECT_EQ(f.max_rejections_per_token, 2);
  EXPECT_EQ(f.effects_applied, 3);
  EXPECT_EQ(f.duplicate_effects, 2);
  ASSERT_EQ(f.counters.size(), 1u);
  EXPECT_EQ(f.counters[0].key, "hits");
  EXPECT_EQ(f.counters[0].acknowledged, 3);
  EXPECT_EQ(f.counters[0].unknown, 1);
  EXPECT_EQ(f.counters[0].actual, 3);

  nlohmann::json j = to_json(f);
  EXPECT_EQ(j["rejections_per_token"][0],
            (nlohmann::json{{"client", "w1"}, {"token", 33}, {"history", 2}, {"readback", 1}, {"count", 2}}));
  EXPECT_EQ(j["max_rejections_per_token"], 2);
  EXPECT_EQ(j["effects_applied"], 3);
  EXPECT_EQ(j["duplicate_effects"], 2);
  EXPECT_EQ(j["counters"][0], (nlohmann::json{{"key", "hits"}, {"expected", 3}, {"unknown", 1}, {"actual", 3}}));
  EXPECT_TRUE(j["progress_after_heal"].is_null());
}

TEST(CatalogueFigures, ProgressAfterTheLastHeal) {
  Builder b;
  b.fault(EventKind::kFaultInject, "sigstop", "w1", 1'000'000);
  b.fault(EventKind::kFaultHeal, "sigstop", "w1", 5'000'000'000);
  const std::size_t heal = b.fault(EventKind::kFaultHeal, "partition", "w2", 1'000'000);
  b.write("w1", EventKind::kWriteFail, 33, 0, 2, 34);
  b.acquire_invoke("w1");
  const std::size_t ok = b.write("w1", EventKind::kWriteOk, 35, 0, 2, 35, "ledger", 1'500'000'000);
  Figures f = compute_figures(b.h, ReadBack{}, context());
  ASSERT_TRUE(f.progress_after_heal.has_value());
  const ProgressAfterHeal& p = *f.progress_after_heal;
  EXPECT_EQ(p.heal_index, heal);
  EXPECT_EQ(p.window, 4s);
  EXPECT_TRUE(p.pending);
  EXPECT_EQ(p.first_write_ok, ok);
  EXPECT_EQ(p.delay, std::chrono::nanoseconds(b.h[ok].t_ns - b.h[heal].t_ns));
  EXPECT_TRUE(p.made_progress());
  nlohmann::json j = to_json(f);
  EXPECT_EQ(j["progress_after_heal"]["heal_index"], heal);
  EXPECT_EQ(j["progress_after_heal"]["window_ns"], 4'000'000'000);
  EXPECT_EQ(j["progress_after_heal"]["made_progress"], true);
  EXPECT_EQ(j["progress_after_heal"]["first_write_ok"], ok);
}

TEST(CatalogueExpectation, ProgressAfterHealMetNotMetAndNoHeal) {
  Scenario s = parse_scenario(
      "name: t\nlease_ttl: 2s\nresource: {kind: store}\njob: {key: ledger}\nworkers: [{id: w1}]\n"
      "faults: [{kind: sigstop, target: w1, trigger: {at: 1s}, duration: 5s}]\n"
      "expect: {outcome: safe, progress_after_heal: true}\n",
      "p.yaml");
  const CheckContext ctx = CheckContext::of(s);
  // Only the liveness part: these histories have no read-back to check safety against.
  Expectation liveness = s.expect();
  liveness.outcome = Outcome::kAnomaly;  // with no anomaly listed: nothing to find
  auto met = [&](const Builder& b) { return evaluate(liveness, analyze(b.h, ReadBack{}, ctx), s); };

  Builder in_time;
  in_time.fault(EventKind::kFaultHeal, "sigstop", "w1", 1'000'000);
  in_time.write("w1", EventKind::kWriteOk, 35, 0, 0, 35, "ledger", 3'000'000'000);
  EXPECT_TRUE(met(in_time).met) << ::testing::PrintToString(met(in_time).reasons);

  Builder late;
  late.fault(EventKind::kFaultHeal, "sigstop", "w1", 1'000'000);
  late.write("w1", EventKind::kWriteOk, 35, 0, 0, 35, "ledger", 4'500'000'000);
  EXPECT_THAT(met(late).reasons,
              ElementsAre("expected a write accepted within 4.00 s of the last heal (lease TTL + one acquire), but the "
                          "first one came 4.50 s after it"));

  Builder never;
  never.fault(EventKind::kFaultHeal, "sigstop", "w1", 1'000'000);
  never.write("w1", EventKind::kWriteFail, 33, 0, 0, 34);
  EXPECT_THAT(met(never).reasons,
              ElementsAre("expected a write accepted within 4.00 s of the last heal (lease TTL + one acquire), but "
                          "none was accepted after it while workers were still trying"));

  Builder done;  // everything finished before the heal: nothing to make progress on
  done.write("w1", EventKind::kWriteOk, 33, 0, 0, 33);
  done.job_done("w1", 33);
  done.fault(EventKind::kFaultHeal, "sigstop", "w1", 1'000'000);
  EXPECT_TRUE(met(done).met);

  Builder unhealed;
  unhealed.write("w1", EventKind::kWriteOk, 33, 0, 0, 33);
  EXPECT_THAT(met(unhealed).reasons, ElementsAre("expected progress after the last heal, but no fault was healed"));
}

TEST(CatalogueExpectation, PauseToleranceCoversFreezeAndSelfStop) {
  Scenario s = parse_scenario(
      "name: t\nlease_ttl: 2s\nresource: {kind: store}\njob: {key: ledger}\n"
      "workers: [{id: w1, design: {check_lease_before_write: true, self_stop_at: check}}, {id: w2}]\n"
      "faults: [{kind: self-stop, target: w1, duration: 5s}, {kind: freeze, target: w2, trigger: {at: 1s}, duration: 4s}]\n"
      "expect: {outcome: safe, pause_tolerance: 10%}\n",
      "p.yaml");
  Builder b;
  b.fault(EventKind::kFaultInject, "self-stop", "w1", 1'000'000);
  b.fault(EventKind::kFaultHeal, "self-stop", "w1", 5'000'000'000);
  b.fault(EventKind::kFaultInject, "freeze", "w2", 1'000'000);
  b.fault(EventKind::kFaultHeal, "freeze", "w2", 4'000'000'000);
  Event p1 = Builder::ev("w1", EventKind::kPause);
  p1.duration_ns = 4'950'000'000;
  b.add(p1);
  ExpectationResult r = evaluate_expectation(s, analyze(b.h, ReadBack{}));
  EXPECT_THAT(r.reasons, ElementsAre("w2 was stopped (freeze) for 4.00 s but reported no pause"));
}

TEST(CheckContextTest, OfAScenarioAndThroughAnalyze) {
  Scenario s = parse_scenario(
      "name: ctx\nlease_ttl: 3s\nresource: {kind: store}\njob: {kind: counter, key: hits}\nworkers: [{id: w1}]\n"
      "expect: {outcome: safe}\n",
      "c.yaml");
  CheckContext c = CheckContext::of(s);
  EXPECT_EQ(c.lease_ttl, std::chrono::seconds(3));
  EXPECT_EQ(c.lock, "fencecheck/ctx");
  EXPECT_EQ(c.job_kind, JobKind::kCounter);
  EXPECT_EQ(c.acquire_allowance, kDefaultAcquireAllowance);

  // analyze() hands the context to the checkers: a counter job without counters is unknown with
  // it, and valid without it (the old overload).
  Builder b;
  b.increment("w1", EventKind::kWriteOk, 33, 0);
  Analysis with = analyze(b.h, ReadBack{}, c);
  Analysis without = analyze(b.h, ReadBack{});
  EXPECT_EQ(with.verdict, Verdict::kUnknown);
  EXPECT_EQ(without.verdict, Verdict::kValid);
  ASSERT_EQ(with.checkers.size(), 14u);
  EXPECT_EQ(with.checkers[0].name, "counter-drift");
}

// ---------------------------------------------------------------------------------------------
// The read-back's effects and counters

TEST(ReadBackJson, EffectsAndCountersRoundTripAndAreOptional) {
  ReadBack rb;
  rb.resource = "store";
  rb.fencing = "per-key";
  rb.high_water = {{"ledger", 34}};
  const nlohmann::json old_shape = to_json(rb);
  EXPECT_FALSE(old_shape.contains("effects"));  // unchanged for a read-back without them
  EXPECT_FALSE(old_shape.contains("counters"));
  EXPECT_TRUE(readback_from_json(old_shape).effects.empty());

  rb.effects = {EffectRecord{"ledger", "seg0", 34, "w2", 18, true, "fenced"},
                EffectRecord{"ledger", "w1:seg0", 33, "w1", 19, false, ""}};
  rb.counters = {{"hits", 12}};
  nlohmann::json j = to_json(rb);
  EXPECT_EQ(j["effects"][0], (nlohmann::json{{"key", "ledger"}, {"id", "seg0"}, {"token", 34}, {"client", "w2"},
                                             {"seq", 18}, {"applied", true}, {"mode", "fenced"}}));
  EXPECT_FALSE(j["effects"][1].contains("mode"));
  EXPECT_EQ(j["counters"], (nlohmann::json{{"hits", 12}}));
  ReadBack back = readback_from_json(nlohmann::json::parse(j.dump()));
  ASSERT_EQ(back.effects.size(), 2u);
  EXPECT_EQ(back.effects[0].id, "seg0");
  EXPECT_EQ(back.effects[0].seq, 18);
  EXPECT_TRUE(back.effects[0].applied);
  EXPECT_EQ(back.effects[0].mode, "fenced");
  EXPECT_FALSE(back.effects[1].applied);
  EXPECT_EQ(back.effects[1].mode, "");
  EXPECT_EQ(back.counters, (std::map<std::string, std::int64_t>{{"hits", 12}}));
}

TEST(ReadBackJson, MistypedEffectsAndCountersNameTheField) {
  auto error_of = [](const std::string& text) {
    try {
      (void)readback_from_json(nlohmann::json::parse(text));
      return std::string("no error");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
  };
  EXPECT_EQ(error_of(R"({"effects":[{"key":"k","id":"i","token":1,"client":"c","seq":1}]})"),
            "effect: missing field 'applied'");
  EXPECT_EQ(error_of(R"({"effects":[{"key":"k","id":"i","token":1,"client":"c","seq":1,"applied":"yes"}]})"),
            "effect: field 'applied' has the wrong type");
  EXPECT_EQ(error_of(R"({"effects":{}})"), "read-back: 'effects' must be an array");
  EXPECT_EQ(error_of(R"({"counters":[1]})"), "read-back: 'counters' must be an object of key -> value");
  EXPECT_EQ(error_of(R"({"counters":{"hits":"12"}})"), "read-back: counters['hits'] must be an integer");
}

// The lock name the checkers get is the one the workers used (issue 13). With run_suffix the
// workers lock "<name>/<run id>"; CheckContext::of(the run's plan) says the same name, so the
// per-lock check sees their grants. The scenario's own name, as the context held before, matched
// no acquire.ok at all and checked nothing: valid, silently. Since issue 31 the acquire.oks are
// judged per the lock name they report, so a context naming another lock finds the regression too.
TEST(TokenRegression, ChecksTheLockNameTheWorkersUsedWithARunSuffix) {
  const Scenario plan = parse_scenario(
      "name: t\nlease_ttl: 2s\nlock_service: {kind: etcd, endpoints: [\"http://127.0.0.1:2379\"], lock: fencecheck, "
      "run_suffix: true}\nresource: {kind: store}\njob: {key: k}\nworkers: [{id: w1}, {id: w2}]\nexpect: {outcome: safe}\n");
  Builder b;
  b.acquire_ok("w1", lock_key(1), 1'700'000'000'000'000'000, 7001);
  b.acquire_invoke("w2");
  b.acquire_ok("w2", lock_key(2), 1'699'999'970'000'000'000, 7002);
  const CheckContext used = CheckContext::of(plan.for_run("cat"));
  EXPECT_EQ(used.lock, kLock);
  EXPECT_EQ(run(TokenRegressionChecker{}, b, ReadBack{}, used).verdict, Verdict::kInvalid);
  const CheckContext unsuffixed = CheckContext::of(plan);
  EXPECT_EQ(unsuffixed.lock, "fencecheck");
  EXPECT_EQ(run(TokenRegressionChecker{}, b, ReadBack{}, unsuffixed).verdict, Verdict::kInvalid)
      << "acquire.oks of a lock name other than the context's are judged, not skipped";
}
