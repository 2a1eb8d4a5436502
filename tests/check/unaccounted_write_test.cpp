// unaccounted-write (checkers.h; issue 31, item 9): every write the resource accepted is tied to a
// holding, a writer that was granted that token. Histories built in code: the admin tool's bypass
// (issue 31's input: w1 paused past its lease, w2 on ledger, w3 on another key, and four rows of
// ledger segment 2 by `admin` with the key's mark, then with mark + 1), an expired holder's late
// accepted write (fencing's business, not this rule's), black-box workers tied through the grants
// only, a worker whose token is not the issuer's, and the streamed rule over a file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../harness/history_builder.h"
#include "fencecheck/harness/checkers.h"
#include "fencecheck/harness/stream_check.h"
#include "golden_cases.h"

namespace fh = fencecheck::harness;
using fencecheck::AcceptedWrite;
using fencecheck::Event;
using fencecheck::EventKind;
using fencecheck::ReadBack;
using fencecheck::StoredChunk;

namespace {

const std::string kOther = "other";
const std::string kKey3 = "fencecheck/test/694d8a1b2c3d0003";  // w3's lock key (token 40)

/// A run's history and read-back, built together: each write the workers' events acknowledge is in
/// the accept log and the chunks, in order.
struct BypassRun {
  fh::Builder b;
  ReadBack rb;
  std::int64_t next_seq = 1;

  void accepted(const std::string& writer, std::int64_t token, std::int64_t segment, std::int64_t chunk,
                const std::string& key = fh::kLedgerKey) {
    rb.log.push_back(AcceptedWrite{next_seq, key, segment, chunk, token, writer});
    rb.chunks.push_back(StoredChunk{key, segment, chunk, token, writer, next_seq,
                                    fencecheck::encode_chunk(fencecheck::ChunkHeader{writer, token, key, segment, chunk}, 64)});
    ++next_seq;
  }
  void written(const std::string& w, std::int64_t token, std::int64_t segment, std::int64_t chunk,
               const std::string& key = fh::kLedgerKey) {
    b.write(w, EventKind::kWriteInvoke, token, segment, chunk, std::nullopt, key);
    b.write(w, EventKind::kWriteOk, token, segment, chunk, token, key);
    accepted(w, token, segment, chunk, key);
  }
};

/// Issue 31's run: w1 (token 33) takes the lock on ledger, writes one chunk and is stopped past its
/// lease; w2 (34) writes ledger segments 0 and 1; w3 (40) writes key `other`. Every grant is in the
/// lock service's history. ledger's mark is 34.
BypassRun issue_run() {
  BypassRun r;
  r.b.run_start();
  r.b.lock_grant(fh::kKey1, 33, 7001);
  r.b.acquire_ok("w1", fh::kKey1, 33, 7001);
  r.written("w1", 33, 0, 0);
  r.b.fault_inject("w1", 6'000'000'000);
  r.b.lock_delete(fh::kKey1, 33, 35, "expired");
  r.b.lock_grant(fh::kKey2, 34, 7002);
  r.b.acquire_ok("w2", fh::kKey2, 34, 7002);
  for (std::int64_t s = 0; s < 2; ++s)
    for (std::int64_t c = 0; c < 2; ++c) r.written("w2", 34, s, c);
  r.b.lock_grant(kKey3, 40, 7003);
  r.b.acquire_ok("w3", kKey3, 40, 7003);
  r.written("w3", 40, 0, 0, kOther);
  r.b.fault_heal("w1", 6'000'000'000);
  r.b.add(fh::Builder::ev("harness", EventKind::kRunEnd));
  r.rb.resource = "postgres";
  r.rb.fencing = "per-key";
  r.rb.high_water = {{fh::kLedgerKey, 34}, {kOther, 40}};
  return r;
}

fh::CheckContext three_workers() {
  fh::CheckContext c;
  c.lock = fh::kLock;
  c.workers = {"w1", "w2", "w3"};
  return c;
}

fh::CheckerResult check(const BypassRun& r, const fh::CheckContext& c) {
  return fh::UnaccountedWriteChecker{}.check_with(r.b.h, r.rb, c);
}

/// The admin tool writes ledger segment 2, chunks 0..3, with `token`, outside the run.
void admin_writes(BypassRun& r, std::int64_t token) {
  for (std::int64_t c = 0; c < 4; ++c) r.accepted("admin", token, 2, c);
}

TEST(UnaccountedWrite, TheRunWithoutTheAdminToolIsValid) {
  const BypassRun r = issue_run();
  const fh::CheckerResult res = check(r, three_workers());
  EXPECT_EQ(res.verdict, fh::Verdict::kValid) << res.error;
  EXPECT_TRUE(res.anomalies.empty());
}

TEST(UnaccountedWrite, AnAdminToolWritingWithTheKeysMarkIsABypass) {
  BypassRun r = issue_run();
  const std::int64_t first = r.next_seq;
  admin_writes(r, 34);  // ledger's mark: w2's token, which the lock service did grant (to w2)
  const fh::CheckerResult res = check(r, three_workers());
  ASSERT_EQ(res.verdict, fh::Verdict::kInvalid);
  ASSERT_EQ(res.anomalies.size(), 1u);
  const fh::Anomaly& a = res.anomalies[0];
  EXPECT_EQ(a.name, "unaccounted-write");
  EXPECT_EQ(a.key, "ledger");
  EXPECT_EQ(a.clients, std::vector<std::string>{"admin"});
  EXPECT_EQ(a.tokens, std::vector<std::int64_t>{34});
  EXPECT_EQ(a.readback_seqs, (std::vector<std::int64_t>{first, first + 1, first + 2, first + 3}));
  EXPECT_NE(a.description.find("4 writes to ledger by admin with token 34"), std::string::npos) << a.description;
  EXPECT_NE(a.description.find("admin is no worker of the run and sent no events, and token 34 was w2's holding "
                               "(its acquire.ok)"),
            std::string::npos)
      << a.description;
  // Evidence: w2's acquire.ok and the lock service's grant of 34 (the holding admin's rows borrowed).
  ASSERT_EQ(a.evidence.size(), 2u);
  EXPECT_EQ(r.b.h[a.evidence[0]].kind, EventKind::kLockGrant);
  EXPECT_EQ(r.b.h[a.evidence[1]].kind, EventKind::kAcquireOk);
  EXPECT_EQ(r.b.h[a.evidence[1]].source, "w2");
}

TEST(UnaccountedWrite, AnAdminToolWritingWithATokenNeverGrantedIsABypass) {
  BypassRun r = issue_run();
  admin_writes(r, 35);  // mark + 1: no acquire.ok, no grant carries it
  const fh::CheckerResult res = check(r, three_workers());
  ASSERT_EQ(res.verdict, fh::Verdict::kInvalid);
  ASSERT_EQ(res.anomalies.size(), 1u);
  const fh::Anomaly& a = res.anomalies[0];
  EXPECT_EQ(a.clients, std::vector<std::string>{"admin"});
  EXPECT_EQ(a.tokens, std::vector<std::int64_t>{35});
  EXPECT_EQ(a.readback_seqs.size(), 4u);
  EXPECT_NE(a.description.find("no lock.grant carries token 35: the lock service never granted it"), std::string::npos)
      << a.description;
  EXPECT_TRUE(a.evidence.empty());  // nothing in the history is about token 35
}

TEST(UnaccountedWrite, OnlyTheChunksShowTheBypassWhenTheResourceKeepsNoLog) {
  BypassRun r = issue_run();
  admin_writes(r, 34);
  r.rb.log.clear();
  const fh::CheckerResult res = check(r, three_workers());
  ASSERT_EQ(res.verdict, fh::Verdict::kInvalid);
  ASSERT_EQ(res.anomalies.size(), 1u);
  EXPECT_EQ(res.anomalies[0].readback_seqs.size(), 4u);
}

TEST(UnaccountedWrite, AnAdminToolThatTookTheLockItselfIsAccountedForByItsGrant) {
  // An admin tool that does take the lock (its own grant, 41, which no worker holds) is no bypass,
  // whether the scenario's workers are known or not.
  BypassRun r = issue_run();
  r.b.lock_grant("fencecheck/test/694d8a1b2c3d0004", 41, 7004);
  admin_writes(r, 41);
  fh::CheckContext c = three_workers();
  EXPECT_EQ(check(r, c).verdict, fh::Verdict::kValid) << check(r, c).error;
  c.workers.clear();
  EXPECT_EQ(check(r, c).verdict, fh::Verdict::kValid) << check(r, c).error;
  // Without the scenario's workers, the mark (w2's holding) and a token no grant carries are still
  // a bypass.
  for (const std::int64_t token : {34, 35}) {
    BypassRun other = issue_run();
    admin_writes(other, token);
    EXPECT_EQ(check(other, c).verdict, fh::Verdict::kInvalid) << token;
  }
}

TEST(UnaccountedWrite, AHistoryCutShortMakesAMissingHoldingUnknownNotInvalid) {
  // w3 writes with 41, a token in no acquire.ok and no grant: invalid in the whole history...
  BypassRun r = issue_run();
  r.accepted("w3", 41, 0, 1, kOther);
  ASSERT_EQ(check(r, three_workers()).verdict, fh::Verdict::kInvalid);
  // ... unknown when the history has no run.end: its acquire.ok may be in the part cut off.
  r.b.h.events.erase(std::find_if(r.b.h.events.begin(), r.b.h.events.end(),
                                  [](const Event& e) { return e.kind == EventKind::kRunEnd; }));
  const fh::CheckerResult cut = check(r, three_workers());
  EXPECT_EQ(cut.verdict, fh::Verdict::kUnknown);
  EXPECT_NE(cut.error.find("w3 was never granted token 41 (its acquire.oks hold 40); the lock service never granted "
                           "token 41, but the history is not whole (no run.end)"),
            std::string::npos)
      << cut.error;
  // A silent writer using a speaking worker's token is a bypass however much of the history is there.
  admin_writes(r, 34);
  EXPECT_EQ(check(r, three_workers()).verdict, fh::Verdict::kInvalid);
}

TEST(UnaccountedWrite, AnExpiredHoldersLateAcceptedWriteIsNotThisAnomaly) {
  // w1's lease expired while it was stopped; after the heal its write with its own token 33 was
  // accepted (an unfenced resource): stale-write-accepted's business, not a bypass.
  const fh::StoryRun u = fh::unfenced_run();
  fh::CheckContext c;
  c.workers = {"w1", "w2"};
  const fh::CheckerResult res = fh::UnaccountedWriteChecker{}.check_with(u.b.h, u.rb, c);
  EXPECT_EQ(res.verdict, fh::Verdict::kValid) << res.error;
  // And in issue 31's run: w1, resumed, writes once more with 33, accepted.
  BypassRun r = issue_run();
  r.written("w1", 33, 0, 1);
  EXPECT_EQ(check(r, three_workers()).verdict, fh::Verdict::kValid);
}

TEST(UnaccountedWrite, AWorkerWritingWithAnotherHoldersTokenIsNamed) {
  BypassRun r = issue_run();
  r.written("w3", 34, 3, 0);  // w3 holds 40, writes with w2's 34
  const fh::CheckerResult res = check(r, three_workers());
  ASSERT_EQ(res.verdict, fh::Verdict::kInvalid);
  ASSERT_EQ(res.anomalies.size(), 1u);
  const fh::Anomaly& a = res.anomalies[0];
  EXPECT_EQ(a.clients, std::vector<std::string>{"w3"});
  EXPECT_NE(a.description.find("w3 was never granted token 34 (its acquire.oks hold 40)"), std::string::npos)
      << a.description;
  // Its own write events with 34 are cited, beside w2's acquire.ok and the grant.
  EXPECT_EQ(a.evidence.size(), 4u);
}

TEST(UnaccountedWrite, AWorkersTokenThatIsNotTheIssuersIsNamed) {
  // A kazoo worker that sends token 1 while its znode's czxid (the lock service's grant) is 5.
  fh::Builder b;
  b.run_start();
  b.lock_grant(fh::kKey1, 5, 7001);
  b.acquire_ok("w1", fh::kKey1, 1, 7001);
  b.write_ok("w1", 1, 0, 0, 1);
  b.add(fh::Builder::ev("harness", EventKind::kRunEnd));
  ReadBack rb;
  rb.log = {fh::logged(1, "w1", 1, 0, 0)};
  fh::CheckContext c;
  c.workers = {"w1"};
  const fh::CheckerResult res = fh::UnaccountedWriteChecker{}.check_with(b.h, rb, c);
  ASSERT_EQ(res.verdict, fh::Verdict::kInvalid);
  ASSERT_EQ(res.anomalies.size(), 1u);
  EXPECT_NE(res.anomalies[0].description.find("the worker's token is not the issuer's"), std::string::npos)
      << res.anomalies[0].description;
  // A grant reported without a token (a Redis grant whose value the watch could not read): the
  // grants are incomplete, and the worker's own acquire.ok accounts for its write.
  Event g = fh::Builder::ev("lock", EventKind::kLockGrant);
  g.lock_key = fh::kKey2;
  b.add(g);
  EXPECT_EQ(fh::UnaccountedWriteChecker{}.check_with(b.h, rb, c).verdict, fh::Verdict::kValid);
}

TEST(UnaccountedWrite, ABlackBoxWorkerIsTiedThroughTheGrantsOnlyAndNeverValidWithoutThem) {
  fh::CheckContext c = three_workers();
  c.workers.push_back("w4");  // w4 sends nothing: a black box
  BypassRun r = issue_run();
  r.b.lock_grant("fencecheck/test/694d8a1b2c3d0004", 41, 7004);
  r.accepted("w4", 41, 3, 0);
  EXPECT_EQ(check(r, c).verdict, fh::Verdict::kValid) << check(r, c).error;  // 41 was granted (to someone)
  r.accepted("w4", 42, 3, 1);
  const fh::CheckerResult res = check(r, c);
  ASSERT_EQ(res.verdict, fh::Verdict::kInvalid);
  ASSERT_EQ(res.anomalies.size(), 1u);
  EXPECT_EQ(res.anomalies[0].tokens, std::vector<std::int64_t>{42});
  EXPECT_NE(res.anomalies[0].description.find("no lock.grant carries token 42"), std::string::npos);
  // A black box writing with a speaking worker's token: that grant was the speaker's.
  BypassRun borrowed = issue_run();
  borrowed.accepted("w4", 40, 3, 0);
  const fh::CheckerResult b40 = check(borrowed, c);
  ASSERT_EQ(b40.verdict, fh::Verdict::kInvalid);
  EXPECT_NE(b40.anomalies.at(0).description.find("token 40 was w3's holding (its acquire.ok)"), std::string::npos)
      << b40.anomalies.at(0).description;

  // No lock.grant in the history at all: w4's writes cannot be tied.
  fh::Builder b;
  b.run_start();
  b.acquire_ok("w1", fh::kKey1, 33, 7001);
  b.write_ok("w1", 33, 0, 0, 33);
  ReadBack rb;
  rb.log = {fh::logged(1, "w1", 33, 0, 0), fh::logged(2, "w4", 41, 0, 1)};
  c.workers = {"w1", "w4"};
  const fh::CheckerResult none = fh::UnaccountedWriteChecker{}.check_with(b.h, rb, c);
  EXPECT_EQ(none.verdict, fh::Verdict::kUnknown);
  EXPECT_NE(none.error.find("w4 sent no worker-protocol events (a black box)"), std::string::npos) << none.error;
  EXPECT_NE(none.error.find("the history has no lock.grant with a token"), std::string::npos) << none.error;
}

TEST(UnaccountedWrite, AResourceThatShowsNoAcceptedWriteIsUnknown) {
  BypassRun r = issue_run();
  admin_writes(r, 35);
  fh::CheckContext c = three_workers();
  c.resource_kind = "http";
  c.evidence = fencecheck::resources::Evidence{};
  c.evidence->accept_log = false;
  c.evidence->chunks = false;
  const fh::CheckerResult res = check(r, c);
  EXPECT_EQ(res.verdict, fh::Verdict::kUnknown);
  EXPECT_NE(res.error.find("gives neither an accept log nor its chunks"), std::string::npos) << res.error;
}

TEST(UnaccountedWrite, TheStreamedRuleOverAFileSaysWhatTheCheckerSays) {
  BypassRun r = issue_run();
  admin_writes(r, 34);
  const auto path = fencecheck::golden::scratch_dir() / "unaccounted-write.jsonl";
  {
    std::ofstream out(path);
    for (const Event& e : r.b.h) out << fencecheck::to_json_line(e) << '\n';
  }
  const fh::StreamCheckRun run = fh::check_history_file(path, r.rb, three_workers(), {"unaccounted-write"});
  ASSERT_EQ(run.run.results.size(), 1u);
  const fh::CheckerResult& streamed = run.run.results[0];
  const fh::CheckerResult direct = check(r, three_workers());
  EXPECT_EQ(streamed.verdict, fh::Verdict::kInvalid);
  ASSERT_EQ(streamed.anomalies.size(), direct.anomalies.size());
  EXPECT_EQ(streamed.anomalies[0].description, direct.anomalies[0].description);
  EXPECT_EQ(streamed.anomalies[0].evidence, direct.anomalies[0].evidence);
  EXPECT_EQ(streamed.anomalies[0].readback_seqs, direct.anomalies[0].readback_seqs);
  EXPECT_EQ(run.passes, 2u);  // the second pass only to cite the evidence
}

TEST(UnaccountedWrite, TokensOutOfOrderAndFarApartAreKeptExactly) {
  // The holdings' sets keep rising tokens as distances: out-of-order ones, wide gaps, repeats and
  // more than one block of them must all be found again, and no token between them.
  fh::Builder b;
  b.run_start();
  std::vector<std::int64_t> tokens{5, std::int64_t{1} << 40, 3, std::int64_t{1} << 62, 4'000'000'000, 3};
  for (std::int64_t t = 100; t < 200; t += 3) tokens.push_back(t);  // past one block of 32
  for (const std::int64_t t : tokens) {
    b.lock_grant(fh::kKey1, t, 7001);
    b.acquire_ok("w1", fh::kKey1, t, 7001);
  }
  b.add(fh::Builder::ev("harness", EventKind::kRunEnd));
  fh::CheckContext c;
  c.workers = {"w1"};
  for (const std::int64_t t : tokens) {
    ReadBack rb;
    rb.log = {fh::logged(1, "w1", t, 0, 0)};
    EXPECT_EQ(fh::UnaccountedWriteChecker{}.check_with(b.h, rb, c).verdict, fh::Verdict::kValid) << t;
  }
  for (const std::int64_t t : {std::int64_t{4}, std::int64_t{101}, (std::int64_t{1} << 40) + 1, std::int64_t{0},
                               std::int64_t{-3}, std::int64_t{198}}) {
    ReadBack rb;
    rb.log = {fh::logged(1, "w1", t, 0, 0)};
    EXPECT_EQ(fh::UnaccountedWriteChecker{}.check_with(b.h, rb, c).verdict, fh::Verdict::kInvalid) << t;
  }
}

TEST(UnaccountedWrite, StateIsAFewBytesPerHoldingNotPerWrite) {
  // Holdings of 5 accepted writes each, tokens rising as a lock service's do: the state grows by
  // the holdings only, a few bytes each (each token is kept twice: the worker's and the grant's).
  const auto state_after = [](int holdings) {
    ReadBack rb;
    const fh::PackedLog log(rb.log);
    fh::CheckContext c;
    auto rule = fh::make_stream_rule("unaccounted-write");
    rule->begin(rb, log, c);
    fh::Builder b;
    std::size_t i = 0;
    for (int h = 0; h < holdings; ++h) {
      rule->observe(i++, b.h.events.at(b.lock_grant(fh::kKey1, 100 + h, 7000)));
      rule->observe(i++, b.h.events.at(b.acquire_ok(h % 2 ? "w1" : "w2", fh::kKey1, 100 + h, 7000)));
      for (int w = 0; w < 5; ++w) rule->observe(i++, b.h.events.at(b.write_ok(h % 2 ? "w1" : "w2", 100 + h, 0, w, 100 + h)));
      b.h.events.clear();
    }
    return rule->state_bytes();
  };
  const std::size_t small = state_after(20'000), large = state_after(40'000);
  EXPECT_GT(large, small);
  EXPECT_LT(large - small, 20'000u * 6u);  // under 6 bytes per holding (two int64s would be 16)
}

}  // namespace

namespace {

// token-regression's wording (issue 31, item 9): a worker whose acquire.ok token differs from the
// lock service's grant for its lock key is named as such, not as the issuer reissuing a token.
TEST(TokenRegressionIssuer, AWorkersTokenThatIsNotTheGrantsIsNotBlamedOnTheIssuer) {
  // Two kazoo workers each send token 1; their znodes' czxids (the grants) are 5 and 7.
  fh::Builder b;
  b.run_start();
  b.lock_grant(fh::kKey1, 5, 7001);
  b.acquire_ok("w1", fh::kKey1, 1, 7001);
  Event invoke = fh::Builder::ev("w2", EventKind::kAcquireInvoke);
  invoke.lock = fh::kLock;
  b.add(invoke);
  const std::size_t late = b.acquire_ok("w2", fh::kKey2, 1, 7002);
  const std::size_t grant = b.lock_grant(fh::kKey2, 7, 7002);  // the watch reports it after the acquire.ok
  fh::CheckContext c;
  c.lock = fh::kLock;
  const fh::CheckerResult r = fh::TokenRegressionChecker{}.check_with(b.h, ReadBack{}, c);
  ASSERT_EQ(r.verdict, fh::Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 1u);
  const fh::Anomaly& a = r.anomalies[0];
  EXPECT_EQ(a.description.find("handed out the same token twice"), std::string::npos) << a.description;
  // w2's token is said to be its own once, with the grant beside it (not twice in other words).
  EXPECT_NE(a.description.find("token 1: the token is w2's own, not one the issuer granted (the lock service granted " +
                               fh::kKey2 + " with token 7)"),
            std::string::npos)
      << a.description;
  EXPECT_EQ(a.description.find("w2's acquire.ok says"), std::string::npos) << a.description;
  EXPECT_NE(a.description.find("w1's acquire.ok says token 1 for lock key " + fh::kKey1 +
                               ", but the lock service granted that key with token 5"),
            std::string::npos)
      << a.description;
  EXPECT_NE(a.description.find("the worker's token is not the issuer's"), std::string::npos);
  EXPECT_EQ(a.tokens, (std::vector<std::int64_t>{1, 5, 7}));
  EXPECT_TRUE(std::find(a.evidence.begin(), a.evidence.end(), grant) != a.evidence.end());
  EXPECT_TRUE(std::find(a.evidence.begin(), a.evidence.end(), late) != a.evidence.end());

  // Where the grants agree with the workers' tokens, the issuer did hand out the same token twice.
  fh::Builder same;
  same.run_start();
  same.lock_grant(fh::kKey1, 1, 7001);
  same.acquire_ok("w1", fh::kKey1, 1, 7001);
  same.add(invoke);
  same.acquire_ok("w2", fh::kKey2, 1, 7002);
  same.lock_grant(fh::kKey2, 1, 7002);
  const fh::CheckerResult twice = fh::TokenRegressionChecker{}.check_with(same.h, ReadBack{}, c);
  ASSERT_EQ(twice.verdict, fh::Verdict::kInvalid);
  ASSERT_FALSE(twice.anomalies.empty());
  EXPECT_NE(twice.anomalies[0].description.find("the issuer handed that token out"), std::string::npos)
      << twice.anomalies[0].description;
}

}  // namespace
