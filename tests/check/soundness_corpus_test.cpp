// The soundness corpus (issue 31, "Keeping it sound"): for each rule, a real run's history and
// read-back (the fenced smoke run, tests/report/fixtures/sigstop-past-lease) mutated so that "valid"
// would be wrong, asserted to come out invalid (a violation the mutation planted) or unknown (the
// evidence the rule needs was taken away). The unmutated run is the control: every checker valid.
//
// A rule whose check is removed, or whose coverage condition is dropped, fails here: each test
// names the one rule it aims at and asserts that rule's own verdict, not only the combined one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <fstream>
#include <iterator>
#include <variant>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/proto/chunk.h"
#include "golden_cases.h"

namespace {

using namespace fencecheck;
using namespace fencecheck::harness;
namespace fs = std::filesystem;

const fs::path kFixture = fs::path(FENCECHECK_SOURCE_DIR) / "tests" / "report" / "fixtures" / "sigstop-past-lease";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The real run, loaded as the checkers take it (its own scenario.json gives the context).
golden::LoadedCase real_run() {
  golden::Case c{"soundness/sigstop-past-lease", slurp(kFixture / "history.jsonl"), slurp(kFixture / "readback.json"),
                 {golden::ScenarioSource::Kind::kJsonFile, (kFixture / "scenario.json").string()}};
  auto loaded = golden::load_case(c);
  if (auto* err = std::get_if<nlohmann::json>(&loaded)) throw std::runtime_error("fixture: " + err->dump());
  return std::get<golden::LoadedCase>(std::move(loaded));
}

const CheckerResult& result(const Analysis& a, std::string_view name) {
  for (const auto& r : a.checkers)
    if (r.name == name) return r;
  throw std::runtime_error("no checker " + std::string(name));
}

bool has_anomaly(const Analysis& a, std::string_view checker) {
  const auto& r = result(a, checker);
  return std::any_of(r.anomalies.begin(), r.anomalies.end(), [&](const Anomaly& an) { return an.name == checker; });
}

/// The index of the first event matching `pred` (throws when there is none: the fixture changed).
std::size_t find_event(const History& h, const std::function<bool(const Event&)>& pred) {
  for (std::size_t i = 0; i < h.size(); ++i)
    if (pred(h[i])) return i;
  throw std::runtime_error("no such event in the fixture");
}

Analysis judge(const golden::LoadedCase& run) { return analyze(run.history, run.readback, run.context); }

/// Expects `checker` invalid with its own anomaly, and the run invalid.
void expect_invalid(const Analysis& a, std::string_view checker) {
  const auto& r = result(a, checker);
  EXPECT_EQ(r.verdict, Verdict::kInvalid) << checker << ": " << r.error;
  EXPECT_TRUE(has_anomaly(a, checker)) << checker;
  EXPECT_EQ(a.verdict, Verdict::kInvalid);
}

}  // namespace

TEST(SoundnessCorpus, TheRealRunUnmutatedIsValidByEveryChecker) {
  const Analysis a = judge(real_run());
  for (const auto& r : a.checkers) EXPECT_EQ(r.verdict, Verdict::kValid) << r.name << ": " << r.error;
  EXPECT_EQ(a.verdict, Verdict::kValid);
}

TEST(SoundnessCorpus, InterleavedSegmentAChunkRewrittenByAnotherHolding) {
  auto run = real_run();
  for (auto& c : run.readback.chunks)
    if (c.segment == 1 && c.chunk == 2) {  // w1's token 6 chunk becomes w2's token 3
      c.client = "w2";
      c.token = 3;
      c.data = encode_chunk(ChunkHeader{"w2", 3, c.key, 1, 2}, c.data.size());
    }
  expect_invalid(judge(run), "interleaved-segment");
}

TEST(SoundnessCorpus, InterleavedSegmentHoldingsByTurnsInTheAcceptLogOnly) {
  // The final contents stay w1's; the log gains w2's write to segment 2 between two of w1's.
  auto run = real_run();
  auto& log = run.readback.log;
  const auto at = std::find_if(log.begin(), log.end(), [](const AcceptedWrite& w) { return w.token == 6 && w.segment == 2 && w.chunk == 1; });
  ASSERT_NE(at, log.end());
  AcceptedWrite intruder = *at;
  intruder.client = "w2";
  intruder.token = 3;
  log.insert(at, intruder);
  for (std::size_t i = 0; i < log.size(); ++i) log[i].seq = static_cast<std::int64_t>(i + 1);
  expect_invalid(judge(run), "interleaved-segment");
}

TEST(SoundnessCorpus, CorruptChunkAFlippedByte) {
  auto run = real_run();
  run.readback.chunks.at(3).data.back() ^= 0x01;
  expect_invalid(judge(run), "corrupt-chunk");
}

TEST(SoundnessCorpus, StaleWriteAcceptedTheOldTokenAfterTheNewOne) {
  auto run = real_run();
  const std::int64_t seq = run.readback.log.back().seq + 1;
  run.readback.log.push_back(AcceptedWrite{seq, "ledger", 0, 2, 2, "w1"});  // w1's token 2 after token 6
  expect_invalid(judge(run), "stale-write-accepted");
}

TEST(SoundnessCorpus, LostAcknowledgedWriteAChunkTheResourceNoLongerHolds) {
  auto run = real_run();
  auto& chunks = run.readback.chunks;
  chunks.erase(std::remove_if(chunks.begin(), chunks.end(), [](const StoredChunk& c) { return c.segment == 2 && c.chunk == 3; }),
               chunks.end());
  expect_invalid(judge(run), "lost-acknowledged-write");
}

TEST(SoundnessCorpus, RejectionStormTheRejectedTokenSentAgain) {
  auto run = real_run();
  auto& ev = run.history.events;
  const std::size_t fail = find_event(run.history, [](const Event& e) { return e.kind == EventKind::kWriteFail; });
  const Event invoke = ev[fail - 1], again = ev[fail];
  ev.insert(ev.begin() + static_cast<std::ptrdiff_t>(fail) + 1, {invoke, again});
  expect_invalid(judge(run), "rejection-storm");
}

TEST(SoundnessCorpus, TokenRegressionAMarkAboveEveryTokenIssued) {
  auto run = real_run();
  run.readback.high_water["ledger"] = 99;
  expect_invalid(judge(run), "token-regression");
}

TEST(SoundnessCorpus, ForeignReleaseW1DeletesW2sKey) {
  auto run = real_run();
  auto& ev = run.history.events;
  // w2's own release.ok is gone; w1 says it released w2's key, at the delete's revision.
  const std::size_t w2_release = find_event(run.history, [](const Event& e) { return e.source == "w2" && e.kind == EventKind::kReleaseOk; });
  Event forged = ev[w2_release];
  forged.source = "w1";
  forged.lease_id.reset();
  ev[w2_release] = forged;
  expect_invalid(judge(run), "foreign-release");
}

TEST(SoundnessCorpus, FencedOutAHoldersSecondWriteRejectedAtItsOwnMark) {
  auto run = real_run();
  auto& ev = run.history.events;
  // w1's token 6: its first write is accepted (mark 6), its second rejected against mark 6.
  const std::size_t first = find_event(run.history, [](const Event& e) {
    return e.source == "w1" && e.kind == EventKind::kWriteOk && e.token == 6 && e.segment == 0 && e.chunk == 0;
  });
  const std::size_t second = find_event(run.history, [](const Event& e) {
    return e.source == "w1" && e.kind == EventKind::kWriteOk && e.token == 6 && e.segment == 0 && e.chunk == 1;
  });
  ASSERT_GT(second, first);
  ev[second].kind = EventKind::kWriteFail;
  ev[second].high_water = 6;
  ev[second].detail = "rejected: token 6 not above the mark 6";
  expect_invalid(judge(run), "fenced-out");
}

TEST(SoundnessCorpus, UnaccountedWriteAnAdminRowAtTheMark) {
  auto run = real_run();
  const std::int64_t seq = run.readback.log.back().seq + 1;
  run.readback.log.push_back(AcceptedWrite{seq, "ledger", 1, 0, 6, "admin"});
  expect_invalid(judge(run), "unaccounted-write");
}

TEST(SoundnessCorpus, ASilentWorkerIsNeverJudgedValidByARuleThatNeedsItsEvents) {
  // Coverage: w2's own events gone (a black box). A rule that judges from the workers' events
  // cannot say valid about it; the run cannot be valid.
  auto run = real_run();
  auto& ev = run.history.events;
  ev.erase(std::remove_if(ev.begin(), ev.end(), [](const Event& e) { return e.source == "w2"; }), ev.end());
  const Analysis a = judge(run);
  EXPECT_THAT(a.black_box_workers, ::testing::ElementsAre("w2"));
  for (const char* name : {"fenced-out", "foreign-release"}) EXPECT_EQ(result(a, name).verdict, Verdict::kUnknown) << name;
  EXPECT_NE(a.verdict, Verdict::kValid);
}

TEST(SoundnessCorpus, UnjustifiedRejectionARefusalAboveTheMark) {
  // w1's write with token 2 was refused against mark 3; here the reply says mark 1: a token above
  // the mark refused, which proves the fence broken, not working.
  auto run = real_run();
  const std::size_t fail = find_event(run.history, [](const Event& e) { return e.kind == EventKind::kWriteFail; });
  run.history.events[fail].high_water = 1;
  auto& rejections = run.readback.rejections;
  for (auto& r : rejections) r.high_water = 1;
  expect_invalid(judge(run), "unjustified-rejection");
}

TEST(SoundnessCorpus, UngrantedHoldingAKeyTheLockServiceNeverCreated) {
  // w2 reports a holding of a lock key that the lock service's history never shows (every lock
  // event carries a revision, and the watch covered the lock): a holder the issuer never granted.
  auto run = real_run();
  auto& ev = run.history.events;
  const std::size_t acquire = find_event(run.history, [](const Event& e) {
    return e.source == "w2" && e.kind == EventKind::kAcquireOk;
  });
  ev[acquire].lock_key = ev[acquire].lock_key + "f";
  const Analysis a = judge(run);
  EXPECT_EQ(result(a, "ungranted-holding").verdict, Verdict::kInvalid) << result(a, "ungranted-holding").error;
  EXPECT_TRUE(has_anomaly(a, "ungranted-holding"));
}

TEST(SoundnessCorpus, TheIssuersCheckersSayUnknownWhenTheWatchSawNothing) {
  // Coverage: every lock-service event gone (a lock the watch did not cover: python-etcd3's
  // /locks/N under the old watch). The workers held the lock; nothing matched their holdings.
  auto run = real_run();
  auto& ev = run.history.events;
  ev.erase(std::remove_if(ev.begin(), ev.end(), [](const Event& e) { return e.source == "lock"; }), ev.end());
  const Analysis a = judge(run);
  for (const char* name : {"ungranted-holding", "foreign-release", "token-regression"})
    EXPECT_EQ(result(a, name).verdict, Verdict::kUnknown) << name << ": " << result(a, name).error;
  EXPECT_NE(a.verdict, Verdict::kValid);
}
