// Unit tests for the checkers, the figures, expectations and verdict.json, on hand-made histories
// and read-backs: runs that must pass and runs that must fail, with the exact evidence.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/checkers.h"
#include "fencecheck/harness/expectation.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/harness/verdict_json.h"
#include "fencecheck/proto/chunk.h"
#include "history_builder.h"  // kLedgerKey, kLock, kKey1, kKey2, Builder, stored(), logged()

using namespace fencecheck;
using namespace fencecheck::harness;
using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

const fs::path kSmoke = fs::path(FENCECHECK_SOURCE_DIR) / "scenarios" / "smoke";

fs::path temp_path(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / "fencecheck-check-test";
  fs::create_directories(dir);
  return dir / name;
}

Scenario scenario_from(const std::string& expect_and_faults) {
  return parse_scenario(
      "name: t\nlease_ttl: 2s\nresource: {kind: store}\njob: {key: ledger}\nworkers: [{id: w1}, {id: w2}]\n" +
          expect_and_faults,
      "inline.yaml");
}

class Throwing final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "throws"; }
  [[nodiscard]] CheckerResult check(const History&, const ReadBack&) const override {
    throw std::runtime_error("read-back has no chunks table");
  }
};
class ThrowingInt final : public Checker {
 public:
  [[nodiscard]] std::string_view name() const override { return "throws-int"; }
  [[nodiscard]] CheckerResult check(const History&, const ReadBack&) const override { throw 42; }
};
class Fixed final : public Checker {
 public:
  Fixed(std::string name, Verdict v) : name_(std::move(name)), v_(v) {}
  [[nodiscard]] std::string_view name() const override { return name_; }
  [[nodiscard]] CheckerResult check(const History&, const ReadBack&) const override {
    CheckerResult r;
    r.name = name_;
    r.verdict = v_;
    if (v_ == Verdict::kInvalid) {
      Anomaly a;
      a.name = name_;
      a.description = "made up";
      a.tokens = {5, 3, 5};
      a.evidence = {9, 2, 2};
      r.anomalies.push_back(a);
    }
    return r;
  }

 private:
  std::string name_;
  Verdict v_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// History

TEST(History, SavesAndLoadsJsonLinesRoundTrip) {
  StoryRun r = fenced_run();
  fs::path p = temp_path("roundtrip.jsonl");
  save_history_jsonl(p, r.b.h);
  History back = load_history_jsonl(p);
  ASSERT_EQ(back.size(), r.b.h.size());
  for (std::size_t i = 0; i < back.size(); ++i) EXPECT_EQ(to_json_line(back[i]), to_json_line(r.b.h[i])) << i;
  EXPECT_EQ(back[r.w1_late].kind, EventKind::kWriteFail);
  EXPECT_EQ(back[r.w1_late].high_water, 34);
}

TEST(History, LoadErrorNamesFileAndLine) {
  fs::path p = temp_path("bad.jsonl");
  {
    std::ofstream out(p);
    out << R"({"t_ns":1,"source":"w1","kind":"acquire.ok","token":33})" << "\n"
        << "\n"
        << R"({"t_ns":2,"source":"w1","kind":"write.accepted"})" << "\n";
  }
  try {
    (void)load_history_jsonl(p);
    FAIL();
  } catch (const HistoryError& e) {
    EXPECT_EQ(e.line(), 3u);
    EXPECT_EQ(e.file(), p.string());
    EXPECT_EQ(std::string(e.what()), p.string() + ":3: unknown event kind 'write.accepted'");
  }
  {
    std::ofstream out(p);
    out << R"({"t_ns":1,"source":"w1","kind":"pause","duration_ns":"long"})" << "\n";
  }
  try {
    (void)load_history_jsonl(p);
    FAIL();
  } catch (const HistoryError& e) {
    EXPECT_EQ(std::string(e.what()), p.string() + ":1: field 'duration_ns' must be an integer");
  }
  try {
    (void)load_history_jsonl(temp_path("missing.jsonl"));
    FAIL();
  } catch (const HistoryError& e) {
    EXPECT_EQ(e.line(), 0u);
    EXPECT_THAT(e.what(), HasSubstr("missing.jsonl: cannot open the history"));
  }
}

TEST(History, BlankLinesDoNotShiftIndices) {
  fs::path p = temp_path("blank.jsonl");
  {
    std::ofstream out(p);
    out << "\n" << R"({"kind":"run.start"})" << "\r\n  \n" << R"({"kind":"run.end"})" << "\n";
  }
  History h = load_history_jsonl(p);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].kind, EventKind::kRunStart);
  EXPECT_EQ(h[1].kind, EventKind::kRunEnd);
}

// ---------------------------------------------------------------------------------------------
// Whole runs

TEST(FencedRun, RejectedStaleWriteNoAnomalyValid) {
  StoryRun r = fenced_run();
  Analysis a = analyze(r.b.h, r.rb);
  EXPECT_EQ(a.verdict, Verdict::kValid);
  ASSERT_EQ(a.checkers.size(), 14u);  // the catalogue's checkers find nothing in the fenced story either
  for (const auto& c : a.checkers) {
    EXPECT_EQ(c.verdict, Verdict::kValid) << c.name;
    EXPECT_TRUE(c.anomalies.empty()) << c.name;
    EXPECT_EQ(c.error, "") << c.name;
  }
  EXPECT_EQ(a.anomaly_count(), 0u);

  const Figures& f = a.figures;
  EXPECT_EQ(f.rejected_writes_history, 1);
  EXPECT_EQ(f.rejected_writes_readback, 1);
  EXPECT_EQ(f.rejected_writes_total(), 1);
  ASSERT_EQ(f.rejected_writes.size(), 1u);
  EXPECT_EQ(f.rejected_writes[0].key, "ledger");
  EXPECT_EQ(f.rejected_writes[0].client, "w1");
  EXPECT_EQ(f.rejected_writes[0].history, 1);
  EXPECT_EQ(f.rejected_writes[0].readback, 1);

  // w1's key was deleted by expiry mid-job; w2's by its own release (revision 50).
  ASSERT_EQ(f.expiries_during_work.size(), 1u);
  const LeaseExpiry& x = f.expiries_during_work[0];
  EXPECT_EQ(x.worker, "w1");
  EXPECT_EQ(x.lock, kLock);
  EXPECT_EQ(x.lock_key, kKey1);
  EXPECT_EQ(x.token, 33);
  EXPECT_EQ(x.lease_id, 7001);
  EXPECT_EQ(x.revision, 40);
  EXPECT_EQ(x.t_ns, r.b.h[r.w1_delete].t_ns);
  EXPECT_THAT(x.evidence, ElementsAre(r.w1_acquire, r.w1_grant, r.w1_delete));

  ASSERT_EQ(f.pauses.size(), 1u);
  EXPECT_EQ(f.pauses[0].worker, "w1");
  EXPECT_EQ(f.pauses[0].duration, 5950ms);
  EXPECT_EQ(f.pauses[0].index, r.w1_pause);
  EXPECT_EQ(f.pauses[0].token, 33);
  EXPECT_EQ(f.longest_pause.at("w1").duration, 5950ms);

  ASSERT_EQ(f.faults.size(), 1u);
  EXPECT_EQ(f.faults[0].fault, "sigstop");
  EXPECT_EQ(f.faults[0].target, "w1");
  EXPECT_EQ(f.faults[0].planned, Duration(6s));
  EXPECT_EQ(f.faults[0].actual, Duration(6'000'400'000));
  EXPECT_EQ(f.faults[0].inject_index, r.inject);
  EXPECT_EQ(f.faults[0].heal_index, r.heal);

  // The smoke scenario's expectation holds on this history.
  Scenario s = load_scenario(kSmoke / "sigstop-past-lease.yaml");
  ExpectationResult e = evaluate_expectation(s, a);
  EXPECT_TRUE(e.met);
  EXPECT_THAT(e.reasons, ::testing::IsEmpty());
  // ...and the unfenced one's does not: there is no anomaly to show.
  ExpectationResult u = evaluate_expectation(load_scenario(kSmoke / "sigstop-past-lease-unfenced.yaml"), a);
  EXPECT_FALSE(u.met);
  EXPECT_THAT(u.reasons, ElementsAre("expected anomaly interleaved-segment, but no checker reported it"));
}

TEST(UnfencedRun, InterleavedSegmentNamesBothTokensClientsAndWrites) {
  StoryRun r = unfenced_run();
  InterleavedSegmentChecker c;
  CheckerResult res = c.check(r.b.h, r.rb);
  EXPECT_EQ(res.name, "interleaved-segment");
  EXPECT_EQ(res.verdict, Verdict::kInvalid);
  ASSERT_EQ(res.anomalies.size(), 1u);  // segment 1 is all token 33: consistent, if stale
  const Anomaly& an = res.anomalies[0];
  EXPECT_EQ(an.name, "interleaved-segment");
  EXPECT_EQ(an.key, "ledger");
  EXPECT_EQ(an.segment, 0);
  EXPECT_THAT(an.tokens, ElementsAre(33, 34));
  EXPECT_THAT(an.clients, ElementsAre("w1", "w2"));
  // The write.ok events that wrote the current chunks: w2's s0c0 and w1's late s0c1.
  EXPECT_THAT(an.evidence, ElementsAre(r.w2_ok[0], r.w1_late));
  EXPECT_EQ(r.b.h[an.evidence[0]].kind, EventKind::kWriteOk);
  EXPECT_EQ(r.b.h[an.evidence[0]].source, "w2");
  EXPECT_EQ(r.b.h[an.evidence[1]].source, "w1");
  EXPECT_EQ(r.b.h[an.evidence[1]].chunk, 1);
  EXPECT_THAT(an.readback_seqs, ElementsAre(2, 6));
  EXPECT_EQ(an.description,
            "ledger segment 0 holds chunks written under 2 fencing tokens: chunk 1 by w1 (token 33); chunk 0 by w2 "
            "(token 34)");
}

TEST(UnfencedRun, AnalysisIsInvalidAndMeetsTheUnfencedSmokeExpectation) {
  StoryRun r = unfenced_run();
  Analysis a = analyze(r.b.h, r.rb);
  EXPECT_EQ(a.verdict, Verdict::kInvalid);
  // Worst first, ties in checker order; none of the catalogue's checkers fires on this story.
  ASSERT_EQ(a.checkers.size(), 14u);
  for (std::size_t i = 2; i < a.checkers.size(); ++i) EXPECT_EQ(a.checkers[i].verdict, Verdict::kValid) << a.checkers[i].name;
  EXPECT_EQ(a.checkers[0].name, "interleaved-segment");
  EXPECT_EQ(a.checkers[1].name, "stale-write-accepted");
  EXPECT_EQ(a.checkers[2].name, "corrupt-chunk");
  EXPECT_EQ(a.checkers[2].verdict, Verdict::kValid);
  EXPECT_EQ(a.figures.expiries_during_work.size(), 1u);
  EXPECT_EQ(a.figures.rejected_writes_total(), 0);

  ExpectationResult e = evaluate_expectation(load_scenario(kSmoke / "sigstop-past-lease-unfenced.yaml"), a);
  EXPECT_TRUE(e.met) << ::testing::PrintToString(e.reasons);
  ExpectationResult f = evaluate_expectation(load_scenario(kSmoke / "sigstop-past-lease.yaml"), a);
  EXPECT_FALSE(f.met);
  ASSERT_EQ(f.reasons.size(), 3u);
  EXPECT_THAT(f.reasons[0], HasSubstr("expected a safe run, but checker interleaved-segment found "
                                      "interleaved-segment: ledger segment 0 holds chunks written under 2"));
  EXPECT_THAT(f.reasons[1], HasSubstr("expected a safe run, but checker stale-write-accepted found "
                                      "stale-write-accepted: ledger: the resource accepted token 33 from w1"));
  EXPECT_EQ(f.reasons[2],
            "expected at least 1 rejected write, saw 0 (write.fail events: 0, the resource's rejections: 0)");
}

TEST(UnfencedRun, StaleWriteAcceptedFromLogAndHistoryMerged) {
  StoryRun r = unfenced_run();
  CheckerResult res = StaleWriteAcceptedChecker().check(r.b.h, r.rb);
  EXPECT_EQ(res.verdict, Verdict::kInvalid);
  ASSERT_EQ(res.anomalies.size(), 1u);
  const Anomaly& an = res.anomalies[0];
  EXPECT_EQ(an.key, "ledger");
  EXPECT_FALSE(an.segment.has_value());  // segments 0 and 1
  EXPECT_THAT(an.tokens, ElementsAre(33, 34));
  EXPECT_THAT(an.clients, ElementsAre("w1", "w2"));
  // Log: the stale entries 6, 7, 8 and the entry that set the high-water mark, 2.
  EXPECT_THAT(an.readback_seqs, ElementsAre(2, 6, 7, 8));
  // History: the write.ok of each stale log entry and of the entry that set the high-water mark
  // (w2's s0c0), plus, for the real-time rule, each stale write's invoke.
  std::vector<std::size_t> want{r.w2_ok[0],          r.w1_late - 1,   r.w1_late,           r.w1_late_s1[0] - 1,
                                r.w1_late_s1[0],     r.w1_late_s1[1] - 1, r.w1_late_s1[1]};
  EXPECT_EQ(an.evidence, want);
  EXPECT_EQ(an.description,
            "ledger: the resource accepted token 33 from w1 after it had already accepted a higher token (34): 3 "
            "write(s) in the resource's accept log (seq 6, 7, 8) and 3 write.ok event(s) in the history");
}

// ---------------------------------------------------------------------------------------------
// stale-write-accepted, each source alone

TEST(StaleWriteAccepted, FromTheStoreLogAlone) {
  ReadBack rb;
  rb.log = {logged(1, "w2", 34, 2, 0), logged(2, "w1", 33, 2, 1), logged(3, "w2", 35, 2, 2)};
  CheckerResult res = StaleWriteAcceptedChecker().check(History{}, rb);
  ASSERT_EQ(res.anomalies.size(), 1u);
  const Anomaly& an = res.anomalies[0];
  EXPECT_EQ(an.segment, 2);
  EXPECT_THAT(an.tokens, ElementsAre(33, 34));
  EXPECT_THAT(an.clients, ElementsAre("w1", "w2"));
  EXPECT_THAT(an.readback_seqs, ElementsAre(1, 2));
  EXPECT_TRUE(an.evidence.empty());
  EXPECT_EQ(an.description,
            "ledger: the resource accepted token 33 from w1 after it had already accepted a higher token (34): 1 "
            "write(s) in the resource's accept log (seq 2)");
}

TEST(StaleWriteAccepted, LogOrderIsBySeqAndPerKey) {
  ReadBack rb;
  // Out of order in the vector; and key "other" has its own high-water mark.
  rb.log = {logged(2, "w2", 34, 0, 0), logged(1, "w1", 33, 0, 0), AcceptedWrite{3, "other", 0, 0, 10, "w3"}};
  EXPECT_EQ(StaleWriteAcceptedChecker().check(History{}, rb).verdict, Verdict::kValid);
}

TEST(StaleWriteAccepted, FromTheHistoryInRealTimeOrder) {
  Builder b;
  std::size_t w2_ok = b.write_ok("w2", 34, 0, 0, 34);
  std::size_t w1_invoke = b.write("w1", EventKind::kWriteInvoke, 33, 0, 1);
  std::size_t w1_ok = b.write("w1", EventKind::kWriteOk, 33, 0, 1);  // no high_water in the reply
  CheckerResult res = StaleWriteAcceptedChecker().check(b.h, ReadBack{});
  ASSERT_EQ(res.anomalies.size(), 1u);
  EXPECT_THAT(res.anomalies[0].evidence, ElementsAre(w2_ok, w1_invoke, w1_ok));
  EXPECT_THAT(res.anomalies[0].tokens, ElementsAre(33, 34));
  EXPECT_THAT(res.anomalies[0].clients, ElementsAre("w1", "w2"));
  EXPECT_EQ(res.anomalies[0].segment, 0);
  EXPECT_TRUE(res.anomalies[0].readback_seqs.empty());
}

TEST(StaleWriteAccepted, AWriteAcceptedBeforeAPauseButReportedAfterIsNotStale) {
  // w1 sends its write, the store accepts it (high-water 33), w1 is stopped before it prints
  // write.ok; w2 writes with 34; w1 resumes and reports. Receive order puts 33's ok after 34's,
  // but 33 was invoked before 34 completed: concurrent, not stale.
  Builder b;
  b.write("w1", EventKind::kWriteInvoke, 33, 0, 0);
  b.write_ok("w2", 34, 0, 0, 34);
  b.write("w1", EventKind::kWriteOk, 33, 0, 0, 33);
  ReadBack rb;
  rb.log = {logged(1, "w1", 33, 0, 0), logged(2, "w2", 34, 0, 0)};
  CheckerResult res = StaleWriteAcceptedChecker().check(b.h, rb);
  EXPECT_EQ(res.verdict, Verdict::kValid);
  EXPECT_TRUE(res.anomalies.empty());
}

TEST(StaleWriteAccepted, ReceiveOrderIsNotRealTimeOrderTheSendersClockDecides) {
  // Found by 1000 workers on 2 cores (bench/scale_scenario.py 1000): w325 held token 505 and
  // wrote both its chunks before w326 (507) was granted the lock; the store's log says so (seq
  // 505, 506, then 507). But w325's channel was read late: the harness received w326's
  // write.ok 507 before w325's write.invoke of chunk 1, which receive order called stale. Each
  // event's src_ns, the worker's CLOCK_MONOTONIC when it printed it, is what happened first.
  Builder b;
  const std::size_t w2_ok = b.write_ok("w2", 34, 0, 0, 34);      // received first...
  const std::size_t w1_invoke = b.write("w1", EventKind::kWriteInvoke, 33, 0, 1);
  const std::size_t w1_ok = b.write("w1", EventKind::kWriteOk, 33, 0, 1);
  b.h.events[w1_invoke].src_ns = b.h.events[w2_ok].src_ns - 5'000'000;  // ...but w1 sent 5 ms earlier
  b.h.events[w1_ok].src_ns = b.h.events[w2_ok].src_ns - 4'000'000;      // and was answered before w2
  EXPECT_EQ(StaleWriteAcceptedChecker().check(b.h, ReadBack{}).verdict, Verdict::kValid);

  // The same receive order with w1 sending after w2's ok was printed: stale.
  b.h.events[w1_invoke].src_ns = b.h.events[w2_ok].src_ns + 1'000;
  b.h.events[w1_ok].src_ns = b.h.events[w2_ok].src_ns + 2'000;
  CheckerResult res = StaleWriteAcceptedChecker().check(b.h, ReadBack{});
  ASSERT_EQ(res.anomalies.size(), 1u);
  EXPECT_THAT(res.anomalies[0].evidence, ElementsAre(w2_ok, w1_invoke, w1_ok));

  // A sender's clock that claims an event after the harness received it is not believed: the
  // receive time stands in (here: receive order, stale).
  b.h.events[w1_invoke].src_ns = b.h.events[w1_invoke].t_ns + 1'000'000'000;
  b.h.events[w2_ok].src_ns = b.h.events[w2_ok].t_ns;
  EXPECT_EQ(StaleWriteAcceptedChecker().check(b.h, ReadBack{}).anomalies.size(), 1u);
}

TEST(StaleWriteAccepted, PipelinedWritesAreMatchedToTheirOwnInvokes) {
  // w1 has two writes in flight: chunk 0 is invoked before w2's 34 completes, chunk 1 after.
  // Each write.ok is judged by its own invoke (not the worker's latest one): chunk 0 is
  // concurrent with 34, chunk 1 is stale.
  Builder b;
  b.write("w1", EventKind::kWriteInvoke, 33, 0, 0);
  const std::size_t w2_ok = b.write_ok("w2", 34, 0, 0, 34);
  const std::size_t invoke1 = b.write("w1", EventKind::kWriteInvoke, 33, 0, 1);
  b.write("w1", EventKind::kWriteOk, 33, 0, 0);
  const std::size_t ok1 = b.write("w1", EventKind::kWriteOk, 33, 0, 1);
  CheckerResult res = StaleWriteAcceptedChecker().check(b.h, ReadBack{});
  ASSERT_EQ(res.anomalies.size(), 1u);
  EXPECT_THAT(res.anomalies[0].evidence, ElementsAre(w2_ok, invoke1, ok1));
}

TEST(StaleWriteAccepted, FromTheReplysHighWaterMark) {
  Builder b;
  b.write("w1", EventKind::kWriteInvoke, 33, 1, 3);
  std::size_t ok = b.write("w1", EventKind::kWriteOk, 33, 1, 3, 36);
  CheckerResult res = StaleWriteAcceptedChecker().check(b.h, ReadBack{});
  ASSERT_EQ(res.anomalies.size(), 1u);
  EXPECT_THAT(res.anomalies[0].evidence, ElementsAre(ok));
  EXPECT_THAT(res.anomalies[0].tokens, ElementsAre(33, 36));
  EXPECT_THAT(res.anomalies[0].clients, ElementsAre("w1"));
  EXPECT_EQ(res.anomalies[0].description,
            "ledger: the resource accepted token 33 from w1 after it had already accepted a higher token (36): 1 "
            "write.ok event(s) in the history");
}

TEST(StaleWriteAccepted, IncreasingTokensAreFine) {
  Builder b;
  b.write_ok("w1", 33, 0, 0, 33);
  b.write_ok("w2", 34, 0, 0, 34);
  b.write_ok("w1", 35, 0, 0, 35);  // w1 re-acquired with a new, higher token
  ReadBack rb;
  rb.log = {logged(1, "w1", 33, 0, 0), logged(2, "w2", 34, 0, 0), logged(3, "w1", 35, 0, 0)};
  EXPECT_EQ(StaleWriteAcceptedChecker().check(b.h, rb).verdict, Verdict::kValid);
}

// ---------------------------------------------------------------------------------------------
// corrupt-chunk and the interleaved checker's use of the chunk's own bytes

TEST(CorruptChunk, ChecksumMismatchIsReported) {
  Builder b;
  std::size_t ok = b.write_ok("w2", 34, 0, 1, 34);
  ReadBack rb;
  rb.chunks = {stored("w2", 34, 0, 0, 1), stored("w2", 34, 0, 1, 2)};
  std::string& data = rb.chunks[1].data;
  data[data.find("f=x") + 2] = 'y';  // one flipped filler byte
  CheckerResult res = CorruptChunkChecker().check(b.h, rb);
  EXPECT_EQ(res.verdict, Verdict::kInvalid);
  ASSERT_EQ(res.anomalies.size(), 1u);
  const Anomaly& an = res.anomalies[0];
  EXPECT_EQ(an.name, "corrupt-chunk");
  EXPECT_EQ(an.key, "ledger");
  EXPECT_EQ(an.segment, 0);
  EXPECT_THAT(an.tokens, ElementsAre(34));
  EXPECT_THAT(an.clients, ElementsAre("w2"));
  EXPECT_THAT(an.readback_seqs, ElementsAre(2));
  EXPECT_THAT(an.evidence, ElementsAre(ok));
  EXPECT_THAT(an.description, HasSubstr("ledger segment 0 chunk 1 (seq 2, token 34 from w2 per the store) does not "
                                        "decode: chunk checksum mismatch: stored "));
}

TEST(CorruptChunk, TornChunkIsReported) {
  ReadBack rb;
  rb.chunks = {stored("w1", 33, 0, 0, 1)};
  rb.chunks[0].data.resize(rb.chunks[0].data.size() - 5);
  CheckerResult res = CorruptChunkChecker().check(History{}, rb);
  ASSERT_EQ(res.anomalies.size(), 1u);
  EXPECT_THAT(res.anomalies[0].description, HasSubstr("does not decode: chunk has no ' crc=XXXXXXXX' trailer"));
}

TEST(CorruptChunk, SelfDescriptionDisagreeingWithTheStoreIsReported) {
  Builder b;
  std::size_t w1_ok = b.write_ok("w1", 33, 0, 1, 33);
  std::size_t w2_ok = b.write_ok("w2", 34, 0, 1, 34);
  ReadBack rb;
  // The store says w2 wrote it with 34, but the bytes are w1's, token 33.
  rb.chunks = {stored("w1", 33, 0, 1, 9)};
  rb.chunks[0].client = "w2";
  rb.chunks[0].token = 34;
  CheckerResult res = CorruptChunkChecker().check(b.h, rb);
  ASSERT_EQ(res.anomalies.size(), 1u);
  const Anomaly& an = res.anomalies[0];
  EXPECT_THAT(an.tokens, ElementsAre(33, 34));
  EXPECT_THAT(an.clients, ElementsAre("w1", "w2"));
  EXPECT_THAT(an.evidence, ElementsAre(w1_ok, w2_ok));
  EXPECT_EQ(an.description,
            "ledger segment 0 chunk 1 (seq 9, token 34 from w2 per the store) describes itself differently: its "
            "bytes say worker w1 (store: w2), token 33 (store: 34)");
}

TEST(CorruptChunk, ChunkInTheWrongSlotIsReported) {
  ReadBack rb;
  rb.chunks = {stored("w1", 33, 0, 1, 1)};
  rb.chunks[0].chunk = 2;  // the store put chunk 1's bytes in slot 2
  CheckerResult res = CorruptChunkChecker().check(History{}, rb);
  ASSERT_EQ(res.anomalies.size(), 1u);
  EXPECT_THAT(res.anomalies[0].description, HasSubstr("its bytes say chunk 1 (store: 2)"));
}

TEST(CorruptChunk, GoodChunksPass) {
  StoryRun r = fenced_run();
  CheckerResult res = CorruptChunkChecker().check(r.b.h, r.rb);
  EXPECT_EQ(res.verdict, Verdict::kValid);
  EXPECT_TRUE(res.anomalies.empty());
}

TEST(InterleavedSegment, TrustsTheChunksOwnBytesOverTheStoresMetadata) {
  Builder b;
  std::size_t w2_s0c0 = b.write_ok("w2", 34, 0, 0, 34);
  std::size_t w1_s0c1 = b.write_ok("w1", 33, 0, 1, 33);
  ReadBack rb;
  // The store claims both chunks are w2's token 34; chunk 1's bytes say w1, token 33.
  rb.chunks = {stored("w2", 34, 0, 0, 1), stored("w1", 33, 0, 1, 2)};
  rb.chunks[1].client = "w2";
  rb.chunks[1].token = 34;
  CheckerResult res = InterleavedSegmentChecker().check(b.h, rb);
  ASSERT_EQ(res.anomalies.size(), 1u);
  const Anomaly& an = res.anomalies[0];
  EXPECT_THAT(an.tokens, ElementsAre(33, 34));
  EXPECT_THAT(an.clients, ElementsAre("w1", "w2"));
  EXPECT_THAT(an.evidence, ElementsAre(w2_s0c0, w1_s0c1));
  EXPECT_THAT(an.description, HasSubstr("[chunk 1's bytes say token 33 by w1 but the store recorded token 34 by w2]"));
}

TEST(InterleavedSegment, FallsBackToMetadataForUndecodableChunks) {
  ReadBack rb;
  rb.chunks = {stored("w2", 34, 3, 0, 1), stored("w1", 33, 3, 1, 2)};
  rb.chunks[1].data = "garbage";
  CheckerResult res = InterleavedSegmentChecker().check(History{}, rb);
  ASSERT_EQ(res.anomalies.size(), 1u);
  EXPECT_EQ(res.anomalies[0].segment, 3);
  EXPECT_THAT(res.anomalies[0].tokens, ElementsAre(33, 34));
  EXPECT_THAT(res.anomalies[0].description, HasSubstr("chunk 1 does not decode (not a fencecheck chunk"));
}

TEST(InterleavedSegment, OneTokenPerSegmentIsValidEvenAcrossSegmentsAndKeys) {
  ReadBack rb;
  rb.chunks = {stored("w1", 33, 0, 0, 1), stored("w1", 33, 0, 1, 2), stored("w2", 34, 1, 0, 3),
               stored("w2", 34, 1, 1, 4)};
  StoredChunk other = stored("w3", 35, 0, 0, 5);
  other.key = "other";
  other.data = encode_chunk(ChunkHeader{"w3", 35, "other", 0, 0}, 64);
  rb.chunks.push_back(other);
  CheckerResult res = InterleavedSegmentChecker().check(History{}, rb);
  EXPECT_EQ(res.verdict, Verdict::kValid);
  EXPECT_EQ(CorruptChunkChecker().check(History{}, rb).verdict, Verdict::kValid);
}

// Issue 31 item 5: what the evidence shows, not what was left at the end. The accept log keeps
// the order; a late holder that rewrites the whole segment erases the final contents' evidence.

TEST(InterleavedSegment, TwoWritersUnderOneTokenByTurnsInTheLogAreInvalidThoughTheEndIsOneWriters) {
  // The etcdctl zombie (etcd#11456): w2's Lock returned after its key was deleted, and w2 and w3
  // both wrote under ETCD_LOCK_REV 6, by turns; w3 finished last and rewrote every chunk.
  Builder b;
  b.write_ok("w3", 6, 0, 0, 6);
  const std::size_t w2_c0 = b.write_ok("w2", 6, 0, 0, 6);
  ReadBack rb;
  rb.chunks = {stored("w3", 6, 0, 0, 5), stored("w3", 6, 0, 1, 6)};
  rb.log = {logged(1, "w3", 6, 0, 0), logged(2, "w2", 6, 0, 0), logged(3, "w2", 6, 0, 1), logged(4, "w3", 6, 0, 1),
            logged(5, "w3", 6, 0, 0), logged(6, "w3", 6, 0, 1)};
  const CheckerResult res = InterleavedSegmentChecker().check(b.h, rb);
  ASSERT_EQ(res.verdict, Verdict::kInvalid);
  ASSERT_EQ(res.anomalies.size(), 1u);
  const Anomaly& an = res.anomalies[0];
  EXPECT_EQ(an.key, "ledger");
  EXPECT_EQ(an.segment, 0);
  EXPECT_THAT(an.tokens, ElementsAre(6));
  EXPECT_THAT(an.clients, ElementsAre("w2", "w3"));
  // w3's last write before w2's (seq 1), w2's first (seq 2), w3's return (seq 4).
  EXPECT_THAT(an.readback_seqs, ElementsAre(1, 2, 4));
  EXPECT_THAT(an.evidence, ::testing::Contains(w2_c0));
  EXPECT_THAT(an.description, HasSubstr("the accept log shows two holdings writing it by turns: w3 (token 6) wrote "
                                        "chunk 0 at seq 1, then w2 (token 6) chunk 0 at seq 2, then w3 (token 6) again "
                                        "chunk 1 at seq 4 (two writers under one token"));
  // The final contents alone (no accept log) show one writer: the log is what proves it.
  ReadBack no_log = rb;
  no_log.log.clear();
  EXPECT_EQ(InterleavedSegmentChecker().check(b.h, no_log).verdict, Verdict::kValid);
}

TEST(InterleavedSegment, AHandoverInTheLogIsValidAndAReturnAfterItIsNot) {
  // w1 (33) writes chunks 0-1, w2 (34) takes over and rewrites the segment: a handover.
  ReadBack rb;
  rb.chunks = {stored("w2", 34, 0, 0, 3), stored("w2", 34, 0, 1, 4)};
  rb.log = {logged(1, "w1", 33, 0, 0), logged(2, "w1", 33, 0, 1), logged(3, "w2", 34, 0, 0), logged(4, "w2", 34, 0, 1),
            logged(5, "w1", 33, 1, 0)};  // w1 again, but in another segment: still a handover in segment 0
  EXPECT_EQ(InterleavedSegmentChecker().check(History{}, rb).verdict, Verdict::kValid);
  // The unfenced store takes w1's stale chunk 1 after w2's, and w2 then rewrites it: the end is
  // all w2's, the log shows w1, w2, w1.
  rb.log = {logged(1, "w1", 33, 0, 0), logged(2, "w2", 34, 0, 0), logged(3, "w1", 33, 0, 1), logged(4, "w2", 34, 0, 1)};
  const CheckerResult res = InterleavedSegmentChecker().check(History{}, rb);
  ASSERT_EQ(res.anomalies.size(), 1u);
  EXPECT_THAT(res.anomalies[0].tokens, ElementsAre(33, 34));
  EXPECT_THAT(res.anomalies[0].readback_seqs, ElementsAre(1, 2, 3));
  EXPECT_THAT(res.anomalies[0].description, ::testing::Not(HasSubstr("one token")));
  // A segment the final contents already flag is reported once, from the contents.
  rb.chunks = {stored("w1", 33, 0, 0, 1), stored("w2", 34, 0, 1, 4)};
  const CheckerResult both = InterleavedSegmentChecker().check(History{}, rb);
  ASSERT_EQ(both.anomalies.size(), 1u);
  EXPECT_THAT(both.anomalies[0].description, HasSubstr("holds chunks written under 2 fencing tokens"));
}

// ---------------------------------------------------------------------------------------------
// Figures: lease expiries during work

TEST(Expiries, ExpiryAndReleaseAreToldApartByRevision) {
  Builder b;
  b.acquire_ok("w1", kKey1, 33, 7001);
  b.acquire_ok("w2", kKey2, 34, 7002);
  // w1 releases late: etcd's delete of an already-gone key reports the current revision (41),
  // which is not the revision of the delete of w1's key (40).
  std::size_t d1 = b.lock_delete(kKey1, 33, 40);
  b.release_ok("w1", kKey1, 33, 41);
  b.release_ok("w2", kKey2, 34, 42);
  b.lock_delete(kKey2, 34, 42);
  Figures f = compute_figures(b.h, ReadBack{});
  ASSERT_EQ(f.expiries_during_work.size(), 1u);
  EXPECT_EQ(f.expiries_during_work[0].worker, "w1");
  EXPECT_EQ(f.expiries_during_work[0].token, 33);
  EXPECT_EQ(f.expiries_during_work[0].lease_id, 7001);
  EXPECT_THAT(f.expiries_during_work[0].evidence, ElementsAre(0u, d1));
}

TEST(Expiries, AReleaseFromAnyWorkerWithTheSameRevisionExplainsTheDelete) {
  Builder b;
  b.acquire_ok("w1", kKey1, 33, 7001);
  b.release_ok("w9", "fencecheck/test/other", 99, 40);  // reported revision is what matches
  b.lock_delete(kKey1, 33, 40);
  EXPECT_TRUE(compute_figures(b.h, ReadBack{}).expiries_during_work.empty());
}

// ZooKeeper's history has no revision on a delete, and tells an expiry from a release itself; the
// holder that resumes after its session expired still reports release.ok (its znode was already
// gone) with the same lock_key and token.
TEST(Expiries, TheIssuersOwnWordOutranksAReleaseMatchedByKeyAndToken) {
  Builder b;
  b.acquire_ok("w1", kKey1, 33, 7001);
  b.acquire_ok("w2", kKey2, 34, 7002);
  const std::size_t d1 = b.lock_delete(kKey1, 33, std::nullopt, "expired");
  b.release_ok("w1", kKey1, 33, std::nullopt);  // nothing deleted: the key was already gone
  b.lock_delete(kKey2, 34, std::nullopt, "released");  // w2 closed its session: no release.ok
  Figures f = compute_figures(b.h, ReadBack{});
  ASSERT_EQ(f.expiries_during_work.size(), 1u);
  EXPECT_EQ(f.expiries_during_work[0].worker, "w1");
  EXPECT_THAT(f.expiries_during_work[0].evidence, ElementsAre(0u, d1));
  // Without the issuer's word the old rule stands: the matching release explains the delete.
  Builder c;
  c.acquire_ok("w1", kKey1, 33, 7001);
  c.lock_delete(kKey1, 33, std::nullopt);
  c.release_ok("w1", kKey1, 33, std::nullopt);
  EXPECT_TRUE(compute_figures(c.h, ReadBack{}).expiries_during_work.empty());
}

TEST(Expiries, ExpiryAfterJobDoneIsNotCounted) {
  Builder b;
  b.acquire_ok("w1", kKey1, 33, 7001);
  b.job_done("w1", 33);
  b.lock_delete(kKey1, 33, 40);  // the lease expired after the work was done (no release)
  b.acquire_ok("w2", kKey2, 34, 7002);
  b.job_done("w2", 35);           // a job.done for another token does not cover token 34
  std::size_t d2 = b.lock_delete(kKey2, 34, 41);
  Figures f = compute_figures(b.h, ReadBack{});
  ASSERT_EQ(f.expiries_during_work.size(), 1u);
  EXPECT_EQ(f.expiries_during_work[0].worker, "w2");
  EXPECT_EQ(f.expiries_during_work[0].evidence.back(), d2);
}

TEST(Expiries, JobDoneAfterTheDeleteDoesNotExcuseIt) {
  Builder b;
  b.acquire_ok("w1", kKey1, 33, 7001);
  b.lock_delete(kKey1, 33, 40);
  b.job_done("w1", 33);  // w1 finished, but its lock was gone while it worked
  EXPECT_EQ(compute_figures(b.h, ReadBack{}).expiries_during_work.size(), 1u);
}

TEST(Expiries, AnUnlockWhoseReplyWasLostIsTheHoldersReleaseNotAnExpiry) {
  // Mid-job (no job.done), w1 asks to release (e.g. after an unknown write outcome); etcd deletes
  // its key, but the reply is lost: release.fail, no release.ok carries the delete's revision.
  auto invoke = [](Builder& b, const std::string& w, const std::string& key, std::int64_t token, std::int64_t src_ns) {
    Event e = Builder::ev(w, EventKind::kReleaseInvoke);
    e.lock_key = key;
    e.token = token;
    b.t += 1'000'000;
    e.t_ns = b.t;
    e.src_ns = src_ns;  // the worker's own stamp (0: none)
    return b.h.add(std::move(e));
  };
  Builder b;
  b.acquire_ok("w1", kKey1, 33, 7001);
  invoke(b, "w1", kKey1, 33, b.t + 500'000);  // sent 0.5 ms after the previous event, received 1 ms after
  b.lock_delete(kKey1, 33, 40);
  Event failed = Builder::ev("w1", EventKind::kReleaseFail);
  failed.lock_key = kKey1;
  failed.token = 33;
  b.add(failed);
  EXPECT_TRUE(compute_figures(b.h, ReadBack{}).expiries_during_work.empty());

  // The worker's line may arrive after the watch's delete: its own stamp says it asked first.
  Builder late;
  late.acquire_ok("w1", kKey1, 33, 7001);
  late.lock_delete(kKey1, 33, 40);
  invoke(late, "w1", kKey1, 33, late.t - 500'000);  // sent 0.5 ms before the delete was seen
  EXPECT_TRUE(compute_figures(late.h, ReadBack{}).expiries_during_work.empty());

  // A release asked for after the key was already gone (the lease had expired while the holder
  // worked, e.g. stopped past its TTL) does not excuse the expiry; nor does another token's.
  Builder expired;
  expired.acquire_ok("w1", kKey1, 33, 7001);
  expired.lock_delete(kKey1, 33, 40);
  invoke(expired, "w1", kKey1, 33, expired.t + 2'000'000'000);
  invoke(expired, "w1", kKey1, 32, 1);
  EXPECT_EQ(compute_figures(expired.h, ReadBack{}).expiries_during_work.size(), 1u);
  Builder unstamped;  // without a stamp: history order
  unstamped.acquire_ok("w1", kKey1, 33, 7001);
  unstamped.lock_delete(kKey1, 33, 40);
  invoke(unstamped, "w1", kKey1, 33, 0);
  EXPECT_EQ(compute_figures(unstamped.h, ReadBack{}).expiries_during_work.size(), 1u);
}

TEST(Expiries, ABlackBoxsHoldingThatTheIssuerExpiredIsCounted) {
  // Issue 31 item 6: two workers that send no event; the lock service's own history is all there
  // is. kKey1 (token 33) holds the lock, kKey2 (token 34) waits behind it.
  CheckContext two;
  two.workers = {"w1", "w2"};
  const auto history = [](const std::string& holder_word, const std::string& waiter_word) {
    Builder b;
    b.lock_grant(kKey1, 33, 7001);
    b.lock_grant(kKey2, 34, 7002);
    b.lock_delete(kKey2, 34, 40, waiter_word);  // the waiter's lease expired: not during work
    b.lock_delete(kKey1, 33, 41, holder_word);
    return b;
  };
  Builder b = history("expired", "expired");
  Figures f = compute_figures(b.h, ReadBack{}, two);
  ASSERT_EQ(f.expiries_during_work.size(), 1u);
  EXPECT_EQ(f.expiries_during_work[0].lock_key, kKey1);
  EXPECT_EQ(f.expiries_during_work[0].token, 33);
  EXPECT_EQ(f.expiries_during_work[0].worker, "");  // two black boxes ran: the issuer does not say which
  EXPECT_THAT(f.expiries_during_work[0].evidence, ElementsAre(0u, 3u));

  EXPECT_EQ(f.expiries_undecided, 0);

  // Without the issuer's word (etcd) a black box's delete may be its own release: not counted, but
  // undecided, so the figure is a lower bound (shown as not measured), never a complete 0. The
  // waiter's delete is no holding's and is not undecided either.
  f = compute_figures(history("", "").h, ReadBack{}, two);
  EXPECT_TRUE(f.expiries_during_work.empty());
  EXPECT_EQ(f.expiries_undecided, 1);
  // The issuer's "released" (ZooKeeper) or a client's DEL (Redis's "deleted") decides: no expiry.
  for (const std::string word : {"released", "deleted"}) {
    f = compute_figures(history(word, "").h, ReadBack{}, two);
    EXPECT_TRUE(f.expiries_during_work.empty()) << word;
    EXPECT_EQ(f.expiries_undecided, 0) << word;
  }
  // Nor when no worker of the scenario is a black box (the holder would have said acquire.ok).
  EXPECT_TRUE(compute_figures(history("expired", "expired").h, ReadBack{}).expiries_during_work.empty());
  EXPECT_EQ(compute_figures(history("", "").h, ReadBack{}).expiries_undecided, 0);

  // One black box still running when the key expired (w2 had exited): it is named.
  Builder one = history("expired", "");
  Event exit = Builder::ev("harness", EventKind::kWorkerExit);
  exit.target = "w2";
  one.h.events.insert(one.h.events.begin() + 2, exit);
  one.h.events[2].t_ns = one.h.events[1].t_ns + 1;
  f = compute_figures(one.h, ReadBack{}, two);
  ASSERT_EQ(f.expiries_during_work.size(), 1u);
  EXPECT_EQ(f.expiries_during_work[0].worker, "w1");

  // Every black box had ended: the lease outlived its holder, no work was cut short.
  Builder gone = history("expired", "");
  for (const std::string w : {"w1", "w2"}) {
    Event e = Builder::ev("harness", EventKind::kWorkerExit);
    e.target = w;
    gone.h.events.insert(gone.h.events.begin() + 2, e);
    gone.h.events[2].t_ns = gone.h.events[1].t_ns + 1;
  }
  EXPECT_TRUE(compute_figures(gone.h, ReadBack{}, two).expiries_during_work.empty());

  // A waiter promoted when the holder released, then expired (stopped while queued): the lock
  // service's history cannot say that its holder ever learned of the grant, so it is not counted.
  Builder promoted;
  promoted.lock_grant(kKey1, 33, 7001);
  promoted.lock_grant(kKey2, 34, 7002);
  promoted.lock_delete(kKey1, 33, 40);  // w1 released (no word)
  promoted.lock_delete(kKey2, 34, 41, "expired");
  f = compute_figures(promoted.h, ReadBack{}, two);
  EXPECT_TRUE(f.expiries_during_work.empty());
  EXPECT_EQ(f.expiries_undecided, 1);  // w1's delete, without a word: its release or its expiry
  // The next key granted once the lock was free held it from its grant: counted.
  promoted.lock_grant(kKey1 + "-again", 50, 7003);
  promoted.lock_delete(kKey1 + "-again", 50, 52, "expired");
  EXPECT_EQ(compute_figures(promoted.h, ReadBack{}, two).expiries_during_work.size(), 1u);

  // A worker that speaks is no black box: its delete without an acquire.ok is nobody's holding.
  Builder speaking = history("expired", "");
  speaking.add(Builder::ev("w1", EventKind::kAcquireInvoke));
  speaking.add(Builder::ev("w2", EventKind::kAcquireInvoke));
  EXPECT_TRUE(compute_figures(speaking.h, ReadBack{}, two).expiries_during_work.empty());
}

TEST(Expiries, AWaitersKeyDeletedBeforeItsAcquireIsNoExpiryDuringWork) {
  // Issue 31 item 9 (etcd's RWMutex, etcd#16221): w2 queued; its lease expired while it waited and
  // etcd deleted its key (revision 40); 6 s later its Lock returned anyway (acquire.ok revision 45).
  // It had not started work when its lease expired.
  Builder b;
  b.acquire_ok("w1", kKey1, 33, 7001);
  b.lock_delete(kKey2, 34, 40);
  const std::size_t late = b.acquire_ok("w2", kKey2, 34, 7002);
  b.h.events[late].revision = 45;
  EXPECT_TRUE(compute_figures(b.h, ReadBack{}).expiries_during_work.empty());
  // The same order of receipt with the acquire first in etcd's order (revision 35 < 40: the watch
  // lagged behind the worker's reply) is an expiry during work, as before.
  b.h.events[late].revision = 35;
  const Figures f = compute_figures(b.h, ReadBack{});
  ASSERT_EQ(f.expiries_during_work.size(), 1u);
  EXPECT_EQ(f.expiries_during_work[0].worker, "w2");
  EXPECT_EQ(f.expiries_during_work[0].token, 34);
}

TEST(Expiries, ADeleteNobodyHeldIsNotCounted) {
  Builder b;
  b.acquire_ok("w1", kKey1, 33, 7001);
  b.lock_delete(kKey1, 32, 40);                     // same key, other create_revision
  b.lock_delete("fencecheck/test/stranger", 5, 41);  // never acquired by a worker
  EXPECT_TRUE(compute_figures(b.h, ReadBack{}).expiries_during_work.empty());
}

TEST(Expiries, DeleteWithoutRevisionFallsBackToLockKeyAndToken) {
  Builder b;
  b.acquire_ok("w1", kKey1, 33, 7001);
  b.release_ok("w1", kKey1, 33, 40);
  b.lock_delete(kKey1, 33, std::nullopt);
  b.acquire_ok("w2", kKey2, 34, 7002);
  b.lock_delete(kKey2, 34, std::nullopt);
  Figures f = compute_figures(b.h, ReadBack{});
  ASSERT_EQ(f.expiries_during_work.size(), 1u);
  EXPECT_EQ(f.expiries_during_work[0].worker, "w2");
  EXPECT_FALSE(f.expiries_during_work[0].revision.has_value());
}

// Without revisions (redis: every holder's lock key is the lock name), a holder that comes back
// after its key expired still reports release.ok with its token ("already gone"): that release
// was asked for after the delete, so it does not explain it.
TEST(Expiries, WithoutRevisionsAReleaseAskedForAfterTheDeleteDoesNotExplainIt) {
  Builder b;
  auto release = [&b](const std::string& w, std::int64_t token) {
    for (EventKind kind : {EventKind::kReleaseInvoke, EventKind::kReleaseOk}) {
      Event e = Builder::ev(w, kind);
      e.lock_key = kLock;
      e.token = token;
      b.add(e);
    }
  };
  b.acquire_ok("w1", kLock, 1, 7001);
  const std::size_t expired = b.lock_delete(kLock, 1, std::nullopt);
  b.acquire_ok("w2", kLock, 2, 7002);
  release("w1", 1);  // w1 resumes: its key is long gone
  release("w2", 2);   // no job.done: only its release explains the delete below
  b.lock_delete(kLock, 2, std::nullopt);
  Figures f = compute_figures(b.h, ReadBack{});
  ASSERT_EQ(f.expiries_during_work.size(), 1u);
  EXPECT_EQ(f.expiries_during_work[0].worker, "w1");
  EXPECT_EQ(f.expiries_during_work[0].token, 1);
  EXPECT_EQ(f.expiries_during_work[0].evidence.back(), expired);
}

// ---------------------------------------------------------------------------------------------
// Figures: pauses, rejections, faults

TEST(Figures, PausesLongestPerWorker) {
  Builder b;
  b.pause("w1", 300'000'000);
  std::size_t longest = b.pause("w1", 6'010'000'000, 33);
  b.pause("w2", 120'000'000);
  b.pause("w1", 1'000'000'000);
  Figures f = compute_figures(b.h, ReadBack{});
  ASSERT_EQ(f.pauses.size(), 4u);
  EXPECT_EQ(f.longest_pause.size(), 2u);
  EXPECT_EQ(f.longest_pause.at("w1").duration, Duration(6'010'000'000));
  EXPECT_EQ(f.longest_pause.at("w1").index, longest);
  EXPECT_EQ(f.longest_pause.at("w2").duration, 120ms);
}

TEST(Figures, AnInvalidRequestIsNoRejectedWrite) {
  // A write.fail without a high_water is an invalid request (an HTTP 400 or 422, not the fence's
  // 409): nothing was fenced, so it proves nothing about fencing and min_rejected_writes ignores it.
  Builder b;
  b.write("w1", EventKind::kWriteFail, 33, 0, 0);      // invalid request
  b.write("w1", EventKind::kWriteFail, 33, 0, 1, 0);   // fenced, the reply did not say the mark
  b.write("w2", EventKind::kWriteFail, 30, 0, 0, 34);  // fenced below mark 34
  const Figures f = compute_figures(b.h, ReadBack{});
  EXPECT_EQ(f.rejected_writes_history, 2);
  EXPECT_EQ(f.invalid_requests_history, 1);
  EXPECT_EQ(f.rejected_writes_total(), 2);
  ASSERT_EQ(f.rejected_writes.size(), 2u);
  EXPECT_EQ(f.rejected_writes[0].client, "w1");
  EXPECT_EQ(f.rejected_writes[0].history, 1);
  Builder only_invalid;
  only_invalid.write("w1", EventKind::kWriteFail, 33, 0, 0);
  EXPECT_EQ(compute_figures(only_invalid.h, ReadBack{}).rejected_writes_total(), 0);
}

TEST(Figures, RejectedWritesPerKeyAndClientFromBothSources) {
  Builder b;
  b.write("w1", EventKind::kWriteFail, 33, 1, 0, 34);
  b.write("w1", EventKind::kWriteFail, 33, 1, 0, 34, "other");
  b.write("w3", EventKind::kWriteFail, 30, 0, 0, 34);
  ReadBack rb;
  rb.rejections = {RejectedWrite{"ledger", 1, 0, 33, "w1", 34}, RejectedWrite{"ledger", 1, 1, 33, "w1", 34},
                   RejectedWrite{"other", 1, 0, 33, "w1", 34}, RejectedWrite{"ledger", 0, 0, 33, "w2", 40}};
  Figures f = compute_figures(b.h, rb);
  EXPECT_EQ(f.rejected_writes_history, 3);
  EXPECT_EQ(f.rejected_writes_readback, 4);
  EXPECT_EQ(f.rejected_writes_total(), 4);
  ASSERT_EQ(f.rejected_writes.size(), 4u);
  auto row = [&](std::size_t i) {
    const auto& r = f.rejected_writes[i];
    return r.key + "/" + r.client + ":" + std::to_string(r.history) + "/" + std::to_string(r.readback);
  };
  EXPECT_EQ(row(0), "ledger/w1:1/2");
  EXPECT_EQ(row(1), "ledger/w2:0/1");
  EXPECT_EQ(row(2), "ledger/w3:1/0");
  EXPECT_EQ(row(3), "other/w1:1/1");
}

TEST(Figures, FaultsPairInjectWithHeal) {
  Builder b;
  std::size_t i1 = b.fault_inject("w1", 2'000'000'000);
  std::size_t i2 = b.fault_inject("w2", 3'000'000'000);
  std::size_t h2 = b.fault_heal("w2", 3'000'100'000);
  std::size_t h1 = b.fault_heal("w1", std::nullopt, 2'000'000'000);  // no duration: t_ns difference
  std::size_t i3 = b.fault_inject("w1", 1'000'000'000);               // never healed
  Figures f = compute_figures(b.h, ReadBack{});
  ASSERT_EQ(f.faults.size(), 3u);
  EXPECT_EQ(f.faults[0].inject_index, i1);
  EXPECT_EQ(f.faults[0].heal_index, h1);
  EXPECT_EQ(f.faults[0].actual, Duration(b.h[h1].t_ns - b.h[i1].t_ns));
  EXPECT_EQ(f.faults[1].inject_index, i2);
  EXPECT_EQ(f.faults[1].heal_index, h2);
  EXPECT_EQ(f.faults[1].actual, Duration(3'000'100'000));
  EXPECT_EQ(f.faults[1].planned, Duration(3s));
  EXPECT_EQ(f.faults[2].inject_index, i3);
  EXPECT_FALSE(f.faults[2].heal_index.has_value());
  EXPECT_FALSE(f.faults[2].actual.has_value());
}

TEST(Figures, UnknownOutcomesAreResolvedFromTheReadBack) {
  Builder b;
  b.write("w1", EventKind::kWriteInvoke, 33, 0, 2);
  const std::size_t applied = b.write("w1", EventKind::kWriteInfo, 33, 0, 2);   // in the accept log
  const std::size_t refused = b.write("w1", EventKind::kWriteInfo, 33, 1, 0);   // in the rejections
  const std::size_t lost = b.write("w1", EventKind::kWriteInfo, 33, 1, 1);      // in neither
  const std::size_t other = b.write("w2", EventKind::kWriteInfo, 33, 0, 2);     // another writer: not w1's entry
  Event inc = Builder::ev("w1", EventKind::kWriteInfo);                         // a counter increment
  inc.key = "hits";
  inc.token = 33;
  const std::size_t counter = b.add(inc);
  ReadBack rb;
  rb.log = {logged(3, "w1", 33, 0, 2), logged(4, "w2", 34, 0, 2)};
  rb.chunks = {stored("w2", 34, 0, 2, 4)};  // superseded since: the log still shows it
  rb.rejections = {RejectedWrite{"ledger", 1, 0, 33, "w1", 34}};
  Figures f = compute_figures(b.h, rb);
  ASSERT_EQ(f.unknown_outcomes.size(), 5u);
  using R = UnknownOutcome::Resolution;
  const auto& u = f.unknown_outcomes;
  EXPECT_EQ(u[0].index, applied);
  EXPECT_EQ(u[0].resolution, R::kApplied);
  EXPECT_EQ(u[0].seq, 3);
  EXPECT_EQ(u[0].note, "the resource accepted segment 0 chunk 2 with token 33 (seq 3) although w1 never learned it did");
  EXPECT_EQ(u[1].index, refused);
  EXPECT_EQ(u[1].resolution, R::kRejected);
  EXPECT_EQ(u[1].note, "the resource refused segment 1 chunk 0 with token 33 (high-water mark 34)");
  EXPECT_EQ(u[2].index, lost);
  EXPECT_EQ(u[2].resolution, R::kNotApplied);
  EXPECT_EQ(u[2].note, "the resource neither accepted nor refused segment 1 chunk 1 with token 33: the request never reached it");
  EXPECT_EQ(u[3].index, other);
  EXPECT_EQ(u[3].resolution, R::kNotApplied);
  EXPECT_EQ(u[4].index, counter);
  EXPECT_EQ(u[4].resolution, R::kUnresolved);
  EXPECT_EQ(resolution_name(R::kNotApplied), "not-applied");

  // A resource without an accept log: the slot tells while it still holds the write, else nothing can.
  CheckContext no_log;
  no_log.evidence = resources::Evidence{true, false, true, true, false};
  ReadBack slots;
  slots.chunks = {stored("w1", 33, 0, 2, 0)};
  Figures g = compute_figures(b.h, slots, no_log);
  EXPECT_EQ(g.unknown_outcomes[0].resolution, R::kApplied);
  EXPECT_EQ(g.unknown_outcomes[2].resolution, R::kUnresolved);
  EXPECT_EQ(g.unknown_outcomes[2].note, "the resource keeps no accept log and the slot holds another write: cannot tell "
                                        "whether segment 1 chunk 1 with token 33 was applied");
}

TEST(Analyze, AnAcknowledgementLostAfterTheWriteAppliedIsJudgedByWhatTheResourceHolds) {
  // w1's write 0/1 reaches the store and is applied, its reply is lost (write.info); w1 gives up
  // its holding, w2 rewrites the segment with a higher token. Valid: the store's order is fenced
  // and consistent, and no acknowledged write is missing. The figure names the applied write.
  Builder b;
  b.lock_grant(kKey1, 33, 1);
  b.acquire_ok("w1", kKey1, 33, 1);
  b.write_ok("w1", 33, 0, 0, 33);
  b.write("w1", EventKind::kWriteInvoke, 33, 0, 1);
  const std::size_t info = b.write("w1", EventKind::kWriteInfo, 33, 0, 1);
  b.release_ok("w1", kKey1, 33, 35);
  b.lock_delete(kKey1, 33, 35);
  b.lock_grant(kKey2, 34, 2);
  b.acquire_ok("w2", kKey2, 34, 2);
  b.write_ok("w2", 34, 0, 0, 34);
  b.write_ok("w2", 34, 0, 1, 34);
  b.job_done("w2", 34);
  ReadBack rb;
  rb.resource = "store";
  rb.fencing = "per-key";
  rb.log = {logged(1, "w1", 33, 0, 0), logged(2, "w1", 33, 0, 1), logged(3, "w2", 34, 0, 0), logged(4, "w2", 34, 0, 1)};
  rb.chunks = {stored("w2", 34, 0, 0, 3), stored("w2", 34, 0, 1, 4)};
  rb.high_water = {{kLedgerKey, 34}};
  const Analysis a = analyze(b.h, rb);
  EXPECT_EQ(a.verdict, Verdict::kValid);
  EXPECT_EQ(a.anomaly_count(), 0u);
  ASSERT_EQ(a.figures.unknown_outcomes.size(), 1u);
  EXPECT_EQ(a.figures.unknown_outcomes[0].resolution, UnknownOutcome::Resolution::kApplied);
  EXPECT_EQ(a.figures.unknown_outcomes[0].seq, 2);
  EXPECT_EQ(a.evidence_events.count(info), 1u);
  const nlohmann::json j = to_json(a.figures)["unknown_outcomes"][0];
  EXPECT_EQ(j["resolution"], "applied");
  EXPECT_EQ(j["index"], info);
  EXPECT_EQ(j["worker"], "w1");
}

// ---------------------------------------------------------------------------------------------
// run_checkers: exceptions and combining

TEST(RunCheckers, AThrowingCheckerIsUnknownWithItsMessage) {
  Checkers cs;
  cs.push_back(std::make_unique<Fixed>("ok", Verdict::kValid));
  cs.push_back(std::make_unique<Throwing>());
  cs.push_back(std::make_unique<ThrowingInt>());
  CheckRun run = run_checkers(cs, History{}, ReadBack{});
  EXPECT_EQ(run.verdict, Verdict::kUnknown);
  ASSERT_EQ(run.results.size(), 3u);
  EXPECT_EQ(run.results[0].name, "throws");
  EXPECT_EQ(run.results[0].verdict, Verdict::kUnknown);
  EXPECT_EQ(run.results[0].error, "read-back has no chunks table");
  EXPECT_EQ(run.results[1].name, "throws-int");
  EXPECT_EQ(run.results[1].error, "the checker threw a non-standard exception");
  EXPECT_EQ(run.results[2].name, "ok");
  EXPECT_EQ(run.results[2].verdict, Verdict::kValid);
}

TEST(RunCheckers, CombineTakesTheWorst) {
  EXPECT_EQ(combine(Verdict::kValid, Verdict::kValid), Verdict::kValid);
  EXPECT_EQ(combine(Verdict::kValid, Verdict::kUnknown), Verdict::kUnknown);
  EXPECT_EQ(combine(Verdict::kUnknown, Verdict::kInvalid), Verdict::kInvalid);
  EXPECT_EQ(combine(Verdict::kInvalid, Verdict::kValid), Verdict::kInvalid);

  Checkers cs;
  cs.push_back(std::make_unique<Throwing>());
  cs.push_back(std::make_unique<Fixed>("valid", Verdict::kValid));
  cs.push_back(std::make_unique<Fixed>("bad", Verdict::kInvalid));
  CheckRun run = run_checkers(cs, History{}, ReadBack{});
  EXPECT_EQ(run.verdict, Verdict::kInvalid);
  ASSERT_EQ(run.results.size(), 3u);
  EXPECT_EQ(run.results[0].name, "bad");
  EXPECT_EQ(run.results[1].name, "throws");
  EXPECT_EQ(run.results[2].name, "valid");
  // Anomalies come back normalised (sorted, unique).
  EXPECT_THAT(run.results[0].anomalies[0].tokens, ElementsAre(3, 5));
  EXPECT_THAT(run.results[0].anomalies[0].evidence, ElementsAre(2u, 9u));
}

TEST(RunCheckers, NoCheckersIsUnknownNotValid) {
  EXPECT_EQ(run_checkers(Checkers{}, History{}, ReadBack{}).verdict, Verdict::kUnknown);
}

TEST(RunCheckers, VerdictNames) {
  EXPECT_EQ(verdict_name(Verdict::kValid), "valid");
  EXPECT_EQ(verdict_name(Verdict::kInvalid), "invalid");
  EXPECT_EQ(verdict_name(Verdict::kUnknown), "unknown");
  EXPECT_EQ(verdict_from_name("invalid"), Verdict::kInvalid);
  EXPECT_FALSE(verdict_from_name("ok").has_value());
}

TEST(RunCheckers, DefaultCheckersInOrder) {
  Checkers cs = default_checkers();
  std::vector<std::string> names;
  for (const auto& c : cs) names.emplace_back(c->name());
  EXPECT_EQ(names, (std::vector<std::string>{"interleaved-segment", "corrupt-chunk", "stale-write-accepted",
                                             "cross-key-rejection", "rejection-storm", "foreign-release",
                                             "token-regression", "fenced-out", "duplicate-effect", "counter-drift",
                                             "lost-acknowledged-write", "unaccounted-write", "unjustified-rejection",
                                             "ungranted-holding"}));
  // Every anomaly a scenario may expect has a checker of its name.
  for (const auto& anomaly : known_anomalies())
    EXPECT_NE(std::find(names.begin(), names.end(), anomaly), names.end()) << anomaly;
}

// ---------------------------------------------------------------------------------------------
// Expectations: one reason per failure mode

TEST(Expectation, SafeButUnknownNeverCountsAsSafe) {
  StoryRun r = fenced_run();
  Checkers cs;
  cs.push_back(std::make_unique<InterleavedSegmentChecker>());
  cs.push_back(std::make_unique<Throwing>());
  Analysis a = analyze(r.b.h, r.rb, cs);
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  ExpectationResult e = evaluate_expectation(scenario_from("expect: {outcome: safe}\n"), a);
  EXPECT_FALSE(e.met);
  EXPECT_THAT(e.reasons, ElementsAre("expected a safe run, but the verdict is unknown: checker throws could not "
                                     "decide (read-back has no chunks table), and an unknown verdict never counts "
                                     "as safe"));
}

TEST(Expectation, AnAcceptedUnknownMeetsSafeButOnlyThatCheckersAndTheVerdictStaysUnknown) {
  // lock_service kind none: the checkers that need the issuer's history say unknown; the user
  // accepts exactly those (expect.accept_unknown). Another unknown, or an invalid, still fails.
  Builder b;
  b.lock_grant(kKey1, 33, 7001);
  b.acquire_ok("w1", kKey1, 33, 7001);
  b.write_ok("w1", 33, 0, 0, 33);
  ReadBack rb;
  rb.chunks = {stored("w1", 33, 0, 0, 1)};
  rb.log = {logged(1, "w1", 33, 0, 0)};
  rb.high_water["ledger"] = 33;
  Analysis a = analyze(b.h, rb);
  // Make two checkers unknown, as kind none would.
  for (auto& r : a.checkers)
    if (r.name == "foreign-release" || r.name == "token-regression") {
      r.verdict = Verdict::kUnknown;
      r.error = "the scenario's lock service is kind none: no issuer history";
    }
  a.verdict = Verdict::kUnknown;
  const ExpectationResult both = evaluate_expectation(
      scenario_from("expect: {outcome: safe, accept_unknown: [foreign-release, token-regression]}\n"), a);
  EXPECT_TRUE(both.met);
  EXPECT_TRUE(both.reasons.empty());
  EXPECT_EQ(a.verdict, Verdict::kUnknown);  // the expectation does not change the verdict
  const ExpectationResult one =
      evaluate_expectation(scenario_from("expect: {outcome: safe, accept_unknown: [foreign-release]}\n"), a);
  EXPECT_FALSE(one.met);
  EXPECT_THAT(one.reasons, ElementsAre("expected a safe run, but the verdict is unknown: checker token-regression could "
                                       "not decide (the scenario's lock service is kind none: no issuer history), and "
                                       "an unknown verdict never counts as safe"));
  // An anomaly is never accepted.
  for (auto& r : a.checkers)
    if (r.name == "interleaved-segment") {
      r.verdict = Verdict::kInvalid;
      r.anomalies.push_back(Anomaly{"interleaved-segment", "planted", "ledger", 0, {33}, {"w1"}, {}, {}});
    }
  a.verdict = Verdict::kInvalid;
  EXPECT_FALSE(evaluate_expectation(
                   scenario_from("expect: {outcome: safe, accept_unknown: [foreign-release, token-regression]}\n"), a)
                   .met);
}

TEST(Expectation, SafeButInvalidNamesEachAnomaly) {
  StoryRun r = unfenced_run();
  Checkers cs;
  cs.push_back(std::make_unique<InterleavedSegmentChecker>());
  Analysis a = analyze(r.b.h, r.rb, cs);
  ExpectationResult e = evaluate_expectation(scenario_from("expect: {outcome: safe}\n"), a);
  EXPECT_FALSE(e.met);
  EXPECT_THAT(e.reasons,
              ElementsAre("expected a safe run, but checker interleaved-segment found interleaved-segment: ledger "
                          "segment 0 holds chunks written under 2 fencing tokens: chunk 1 by w1 (token 33); chunk 0 "
                          "by w2 (token 34)"));
}

TEST(Expectation, ExpectedAnomalyMissingSaysWhy) {
  StoryRun r = fenced_run();
  Checkers cs;
  cs.push_back(std::make_unique<InterleavedSegmentChecker>());
  cs.push_back(std::make_unique<Throwing>());
  Analysis a = analyze(r.b.h, r.rb, cs);
  ExpectationResult e = evaluate_expectation(
      scenario_from("expect: {outcome: anomaly, anomalies: [interleaved-segment, duplicate-effect]}\n"), a);
  EXPECT_FALSE(e.met);
  EXPECT_THAT(e.reasons,
              ElementsAre("expected anomaly interleaved-segment, but no checker reported it",
                          "expected anomaly duplicate-effect, but no checker reported it (no checker named "
                          "duplicate-effect ran)"));
}

TEST(Expectation, ExpectedAnomalyWhoseCheckerFailed) {
  class FailingInterleaved final : public Checker {
   public:
    [[nodiscard]] std::string_view name() const override { return "interleaved-segment"; }
    [[nodiscard]] CheckerResult check(const History&, const ReadBack&) const override {
      throw std::invalid_argument("chunk 3 has no data");
    }
  };
  Checkers cs;
  cs.push_back(std::make_unique<FailingInterleaved>());
  Analysis a = analyze(History{}, ReadBack{}, cs);
  ExpectationResult e =
      evaluate_expectation(scenario_from("expect: {outcome: anomaly, anomalies: [interleaved-segment]}\n"), a);
  EXPECT_THAT(e.reasons, ElementsAre("expected anomaly interleaved-segment, but no checker reported it (checker "
                                     "interleaved-segment could not decide: chunk 3 has no data)"));
}

TEST(Expectation, TooFewRejectedWritesAndExpiries) {
  Builder b;
  b.lock_grant(kKey1, 33, 7001);
  b.acquire_ok("w1", kKey1, 33, 7001);
  b.release_ok("w1", kKey1, 33, 40);
  b.lock_delete(kKey1, 33, 40);
  Analysis a = analyze(b.h, ReadBack{});
  ExpectationResult e = evaluate_expectation(
      scenario_from("expect: {outcome: safe, min_rejected_writes: 1, min_expiries_during_work: 2}\n"), a);
  EXPECT_FALSE(e.met);
  EXPECT_THAT(e.reasons,
              ElementsAre("expected at least 1 rejected write, saw 0 (write.fail events: 0, the resource's "
                          "rejections: 0)",
                          "expected at least 2 lease expiries during work, saw 0"));
  ExpectationResult one = evaluate_expectation(scenario_from("expect: {outcome: safe, min_expiries_during_work: 1}\n"), a);
  EXPECT_THAT(one.reasons, ElementsAre("expected at least 1 lease expiry during work, saw 0"));
}

TEST(Expectation, PauseOutsideTolerance) {
  Builder b;
  b.fault_inject("w1", 6'000'000'000);
  b.fault_heal("w1", 6'000'000'000, 6'000'000'000);
  b.pause("w1", 5'410'000'000, 33);
  Analysis a = analyze(b.h, ReadBack{});
  const std::string faults = "faults: [{kind: sigstop, target: w1, trigger: {at: 1s}, duration: 6s}]\n";
  ExpectationResult tight = evaluate_expectation(scenario_from(faults + "expect: {outcome: safe, pause_tolerance: 5%}\n"), a);
  EXPECT_FALSE(tight.met);
  EXPECT_THAT(tight.reasons, ElementsAre("w1's longest measured pause 5.41 s is 9.8% off the injected 6.00 s "
                                         "(tolerance 5%)"));
  ExpectationResult loose =
      evaluate_expectation(scenario_from(faults + "expect: {outcome: safe, pause_tolerance: 10%}\n"), a);
  EXPECT_TRUE(loose.met) << ::testing::PrintToString(loose.reasons);
}

TEST(Expectation, PauseToleranceUsesTheActualInjectedDuration) {
  Builder b;
  b.fault_inject("w1", 6'000'000'000);
  b.fault_heal("w1", 7'000'000'000, 7'000'000'000);  // the harness healed it late
  b.pause("w1", 6'950'000'000);
  Analysis a = analyze(b.h, ReadBack{});
  ExpectationResult e = evaluate_expectation(
      scenario_from("faults: [{kind: sigstop, target: w1, trigger: {at: 1s}, duration: 6s}]\n"
                    "expect: {outcome: safe, pause_tolerance: 1%}\n"),
      a);
  EXPECT_TRUE(e.met) << ::testing::PrintToString(e.reasons);
}

TEST(Expectation, PausedWorkerThatReportedNoPauseOrWasNeverStopped) {
  Builder b;
  b.fault_inject("w1", 6'000'000'000);
  b.fault_heal("w1", 6'000'000'000, 6'000'000'000);
  b.pause("w2", 100'000'000);
  Analysis a = analyze(b.h, ReadBack{});
  ExpectationResult e = evaluate_expectation(
      scenario_from("faults:\n"
                    "  - {kind: sigstop, target: w1, trigger: {at: 1s}, duration: 6s}\n"
                    "  - {kind: sigstop, target: w2, trigger: {worker: w1, event: job.done}, duration: 3s}\n"
                    "expect: {outcome: safe, pause_tolerance: 10%}\n"),
      a);
  EXPECT_FALSE(e.met);
  EXPECT_THAT(e.reasons,
              ElementsAre("w1 was stopped (sigstop) for 6.00 s but reported no pause",
                          "the sigstop fault on w2 was planned but never injected, so its pause cannot be compared "
                          "with the injected duration"));
}

TEST(Expectation, EvaluateWithAnExplicitExpectationMatches) {
  StoryRun r = fenced_run();
  Analysis a = analyze(r.b.h, r.rb);
  Scenario s = load_scenario(kSmoke / "sigstop-past-lease.yaml");
  ExpectationResult x = evaluate(s.expect(), a, s);
  ExpectationResult y = evaluate_expectation(s, a);
  EXPECT_EQ(x.met, y.met);
  EXPECT_EQ(x.reasons, y.reasons);
}

// ---------------------------------------------------------------------------------------------
// verdict.json

TEST(VerdictJson, StandsAloneWithEvidenceEventsAndFigures) {
  StoryRun r = unfenced_run();
  Analysis a = analyze(r.b.h, r.rb);
  Scenario s = load_scenario(kSmoke / "sigstop-past-lease-unfenced.yaml");
  ExpectationResult e = evaluate_expectation(s, a);
  nlohmann::json j = to_json(a, e);

  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["verdict"], "invalid");
  EXPECT_EQ(j["expectation"]["met"], true);
  EXPECT_EQ(j["expectation"]["reasons"], nlohmann::json::array());
  ASSERT_EQ(j["checkers"].size(), 14u);
  const auto& c0 = j["checkers"][0];
  EXPECT_EQ(c0["name"], "interleaved-segment");
  EXPECT_EQ(c0["verdict"], "invalid");
  EXPECT_EQ(c0["error"], "");
  ASSERT_EQ(c0["anomalies"].size(), 1u);
  const auto& an = c0["anomalies"][0];
  EXPECT_EQ(an["name"], "interleaved-segment");
  EXPECT_EQ(an["key"], "ledger");
  EXPECT_EQ(an["segment"], 0);
  EXPECT_EQ(an["tokens"], (nlohmann::json{33, 34}));
  EXPECT_EQ(an["clients"], (nlohmann::json{"w1", "w2"}));
  EXPECT_EQ(an["evidence"], (nlohmann::json{r.w2_ok[0], r.w1_late}));
  EXPECT_EQ(an["readback_seqs"], (nlohmann::json{2, 6}));
  ASSERT_EQ(an["evidence_events"].size(), 2u);
  EXPECT_EQ(an["evidence_events"][0]["index"], r.w2_ok[0]);
  EXPECT_EQ(an["evidence_events"][0]["kind"], "write.ok");
  EXPECT_EQ(an["evidence_events"][0]["source"], "w2");
  EXPECT_EQ(an["evidence_events"][0]["token"], 34);
  EXPECT_EQ(an["evidence_events"][1]["index"], r.w1_late);
  EXPECT_EQ(an["evidence_events"][1]["source"], "w1");
  EXPECT_EQ(an["evidence_events"][1]["chunk"], 1);
  EXPECT_EQ(j["checkers"][2]["name"], "corrupt-chunk");
  EXPECT_EQ(j["checkers"][2]["verdict"], "valid");
  EXPECT_EQ(j["checkers"][2]["anomalies"], nlohmann::json::array());

  const auto& f = j["figures"];
  EXPECT_EQ(f["lease_expiries_during_work"], 1);
  EXPECT_EQ(f["expiries_during_work"][0]["worker"], "w1");
  EXPECT_EQ(f["expiries_during_work"][0]["lock_key"], kKey1);
  EXPECT_EQ(f["expiries_during_work"][0]["token"], 33);
  EXPECT_EQ(f["expiries_during_work"][0]["lease_id"], 7001);
  EXPECT_EQ(f["expiries_during_work"][0]["revision"], 40);
  EXPECT_EQ(f["expiries_during_work"][0]["evidence"], (nlohmann::json{r.w1_acquire, r.w1_grant, r.w1_delete}));
  EXPECT_EQ(f["pauses"][0]["duration_ns"], 5'980'000'000);
  EXPECT_EQ(f["longest_pause_ns"]["w1"], 5'980'000'000);
  EXPECT_EQ(f["rejected_writes_total"], 0);
  EXPECT_EQ(f["rejected_writes"], nlohmann::json::array());
  EXPECT_EQ(f["faults"][0]["planned_ns"], 6'000'000'000);
  EXPECT_EQ(f["faults"][0]["actual_ns"], 6'000'400'000);
  EXPECT_EQ(f["faults"][0]["heal_index"], r.heal);

  // Every cited event is in the document's own list, once, in index order.
  std::vector<std::size_t> listed;
  for (const auto& ev : j["evidence_events"]) listed.push_back(ev["index"].get<std::size_t>());
  EXPECT_TRUE(std::is_sorted(listed.begin(), listed.end()));
  for (std::size_t i : {r.w2_ok[0], r.w1_late, r.w1_delete, r.inject, r.heal, r.w1_pause})
    EXPECT_NE(std::find(listed.begin(), listed.end(), i), listed.end()) << i;
  EXPECT_EQ(j["evidence_events"][0]["kind"], std::string(kind_name(r.b.h[listed[0]].kind)));

  // The history-taking form gives the same document.
  EXPECT_EQ(verdict_to_json(a, e, r.b.h), j);
  // It round-trips through text.
  EXPECT_EQ(nlohmann::json::parse(j.dump()), j);
}

TEST(VerdictJson, UnknownCheckerErrorAndNullsForMissingValues) {
  Builder b;
  b.fault_inject("w1", 1'000'000'000);  // never healed
  Checkers cs;
  cs.push_back(std::make_unique<Throwing>());
  Analysis a = analyze(b.h, ReadBack{}, cs);
  nlohmann::json j = to_json(a, ExpectationResult{false, {"because"}});
  EXPECT_EQ(j["verdict"], "unknown");
  EXPECT_EQ(j["checkers"][0]["error"], "read-back has no chunks table");
  EXPECT_EQ(j["expectation"]["met"], false);
  EXPECT_EQ(j["expectation"]["reasons"], (nlohmann::json{"because"}));
  EXPECT_TRUE(j["figures"]["faults"][0]["heal_index"].is_null());
  EXPECT_TRUE(j["figures"]["faults"][0]["actual_ns"].is_null());
  EXPECT_TRUE(j["figures"]["faults"][0]["heal_t_ns"].is_null());
}

// ---- Evidence: what the resource kind can give decides what can be checked -------------------

namespace {
CheckContext without_readback_evidence() {
  CheckContext c;
  c.resource_kind = "http";
  c.evidence = resources::Evidence{false, false, false, false, false};  // an HTTP service with no read-back
  return c;
}
}  // namespace

TEST(Evidence, ACheckerLackingRequiredEvidenceIsUnknownNeverValid) {
  StoryRun r = fenced_run();
  ReadBack empty;  // such a resource returns nothing to read back
  empty.resource = "http";
  Analysis a = analyze(r.b.h, empty, without_readback_evidence());
  EXPECT_EQ(a.verdict, Verdict::kUnknown);  // the fenced story, yet "valid" would claim what nobody saw
  for (const auto& c : a.checkers) {
    if (c.name == "interleaved-segment" || c.name == "corrupt-chunk" || c.name == "lost-acknowledged-write") {
      EXPECT_EQ(c.verdict, Verdict::kUnknown) << c.name;
      EXPECT_THAT(c.error, HasSubstr("needs resource.chunks, which resource kind http does not give")) << c.name;
      EXPECT_TRUE(c.evidence.empty()) << c.name;
    } else if (c.name == "unaccounted-write") {  // no accepted write to tie to a holding
      EXPECT_EQ(c.verdict, Verdict::kUnknown);
      EXPECT_THAT(c.error, HasSubstr("resource kind http gives neither an accept log nor its chunks"));
    } else {
      EXPECT_EQ(c.verdict, Verdict::kValid) << c.name << ": " << c.error;
    }
  }
  ExpectationResult e = evaluate_expectation(load_scenario(kSmoke / "sigstop-past-lease.yaml"), a);
  EXPECT_FALSE(e.met);
}

TEST(Evidence, StaleWriteAcceptedWithoutAnAcceptLogIsJudgedFromTheHistory) {
  StoryRun r = unfenced_run();
  ReadBack empty;
  empty.resource = "http";
  Analysis a = analyze(r.b.h, empty, without_readback_evidence());
  EXPECT_EQ(a.verdict, Verdict::kInvalid);
  const CheckerResult* stale = nullptr;
  for (const auto& c : a.checkers)
    if (c.name == "stale-write-accepted") stale = &c;
  ASSERT_NE(stale, nullptr);
  EXPECT_EQ(stale->verdict, Verdict::kInvalid);
  EXPECT_THAT(stale->evidence, ElementsAre("worker-events"));  // the workers' own events
  ASSERT_EQ(stale->anomalies.size(), 1u);
  EXPECT_THAT(stale->anomalies[0].tokens, ElementsAre(33, 34));
  EXPECT_TRUE(stale->anomalies[0].readback_seqs.empty());  // no log: only the history's events
  EXPECT_FALSE(stale->anomalies[0].evidence.empty());
}

TEST(Evidence, EveryResultNamesTheSourcesItRead) {
  StoryRun r = unfenced_run();
  CheckContext c;
  c.resource_kind = "store";
  c.evidence = resources::Evidence{};  // the store gives everything
  Analysis a = analyze(r.b.h, r.rb, c);
  for (const auto& res : a.checkers) {
    EXPECT_FALSE(res.evidence.empty()) << res.name;
    if (res.name == "interleaved-segment") {
      EXPECT_THAT(res.evidence, ElementsAre("resource.chunks", "resource.accept-log", "worker-events"));
    }
    if (res.name == "stale-write-accepted") {
      EXPECT_THAT(res.evidence, ElementsAre("resource.accept-log", "worker-events"));
    }
  }
  const nlohmann::json j = to_json(a, ExpectationResult{});
  bool found = false;
  for (const auto& cj : j["checkers"])
    if (cj["name"] == "stale-write-accepted") {
      found = true;
      EXPECT_EQ(cj["evidence"], (nlohmann::json{"resource.accept-log", "worker-events"}));
    }
  EXPECT_TRUE(found);
}

TEST(Evidence, AScenariosContextCarriesItsResourceKindsEvidence) {
  Scenario s = load_scenario(kSmoke / "sigstop-past-lease.yaml");
  CheckContext c = CheckContext::of(s);
  EXPECT_EQ(c.resource_kind, "store");
  ASSERT_TRUE(c.evidence.has_value());
  EXPECT_TRUE(c.evidence->accept_log);
  EXPECT_TRUE(c.evidence->chunks);
}

// ---- fenced-out: a resource that rejects its holder's own second write (strict comparison) ---

TEST(FencedOut, ARejectionAgainstTheHoldersOwnMarkIsSelfFencing) {
  Builder b;
  b.run_start();
  b.acquire_ok("w1", kKey1, 33, 7001);
  const std::size_t first = b.write_ok("w1", 33, 0, 0, 33);
  b.write("w1", EventKind::kWriteInvoke, 33, 0, 1);
  const std::size_t refused = b.write("w1", EventKind::kWriteFail, 33, 0, 1, 33);  // mark 33 == its own token
  b.acquire_ok("w1", kKey2, 34, 7002);
  b.write_ok("w1", 34, 0, 0, 34);  // progress at the chunk level hides nothing: the segment never ends
  b.write("w1", EventKind::kWriteInvoke, 34, 0, 1);
  const std::size_t refused2 = b.write("w1", EventKind::kWriteFail, 34, 0, 1, 34);
  CheckContext c;
  c.lease_ttl = 2s;
  CheckerResult r = FencedOutChecker().check_with(b.h, ReadBack{}, c);
  EXPECT_EQ(r.verdict, Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 1u);  // one per worker
  const Anomaly& a = r.anomalies[0];
  EXPECT_EQ(a.name, "fenced-out");
  EXPECT_EQ(a.key, kLedgerKey);
  EXPECT_THAT(a.tokens, ElementsAre(33, 34));
  EXPECT_THAT(a.clients, ElementsAre("w1"));
  EXPECT_THAT(a.evidence, ElementsAre(first, refused, refused2));
  EXPECT_THAT(a.description, HasSubstr("its own accepted write with the same token had set"));
}

TEST(FencedOut, AnEqualMarkSetByAnotherHolderIsNotSelfFencing) {
  Builder b;
  b.run_start();
  b.acquire_ok("w1", kKey1, 33, 7001);
  b.write("w1", EventKind::kWriteInvoke, 33, 0, 0);
  b.write("w1", EventKind::kWriteFail, 33, 0, 0, 33);  // w1 never had 33 accepted itself
  b.acquire_ok("w1", kKey2, 34, 7002);
  b.write_ok("w1", 34, 0, 0, 34);
  CheckContext c;
  c.lease_ttl = 2s;
  CheckerResult r = FencedOutChecker().check_with(b.h, ReadBack{}, c);
  EXPECT_EQ(r.verdict, Verdict::kValid);
}

// A client library that hands out no token (python-etcd3's Lock): a naive holder sends the same
// constant as every other holder, the per-key fence accepts an equal token, and a paused holder's
// late chunk lands in the next holder's segment. One token, two writers: two holdings, and the
// chunks' own bytes say who wrote them (workers/examples/python-etcd3, the broken design).
TEST(InterleavedSegment, TwoWritersUnderOneTokenAreTwoHoldings) {
  ReadBack rb;
  rb.chunks = {stored("w2", 1, 0, 0, 1), stored("w2", 1, 0, 1, 2), stored("w1", 1, 0, 2, 3), stored("w2", 1, 1, 0, 4)};
  const CheckerResult res = InterleavedSegmentChecker{}.check(History{}, rb);
  EXPECT_EQ(res.verdict, Verdict::kInvalid);
  ASSERT_EQ(res.anomalies.size(), 1u);  // segment 1 is w2's alone
  const Anomaly& an = res.anomalies[0];
  EXPECT_EQ(an.segment, 0);
  EXPECT_THAT(an.tokens, ElementsAre(1));
  EXPECT_THAT(an.clients, ElementsAre("w1", "w2"));
  EXPECT_THAT(an.readback_seqs, ElementsAre(1, 2, 3));
  EXPECT_EQ(an.description,
            "ledger segment 0 holds chunks written under one fencing token by 2 writers (two holders presented the "
            "same token): chunk 2 by w1 (token 1); chunks 0, 1 by w2 (token 1)");
}
