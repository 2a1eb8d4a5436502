// unjustified-rejection (checkers.h), the judge it shares with the figures (rejected_writes_total,
// expect.min_rejected_writes) and fenced-out's streak over a fence that refuses tokens at or above
// its mark: issue 31, item 2. Histories and read-backs built in code (tests/harness/history_builder.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "../harness/history_builder.h"  // Builder, fenced_run(), text_compare_run()
#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/checkers.h"
#include "fencecheck/harness/expectation.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/harness/stream_check.h"
#include "fencecheck/proto/event.h"

namespace fh = fencecheck::harness;
using fencecheck::AcceptedWrite;
using fencecheck::EventKind;
using fencecheck::ReadBack;
using fencecheck::RejectedWrite;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace {

/// The issue's plan: etcd (7 prior revisions), an HTTP service, 1 segment x 2 chunks, w2 starting
/// after w1's acquire.ok, no fault, expect safe with at least one rejected write.
const char* const kPlan =
    "name: text-compare\nlease_ttl: 2s\nlock_service: {kind: etcd, prior_revisions: 7}\n"
    "resource: {kind: http, url: http://127.0.0.1:18431}\njob: {key: ledger, segments: 1, chunks: 2}\n"
    "workers:\n  - {id: w1}\n  - id: w2\n    start_after: {worker: w1, event: acquire.ok}\n"
    "expect: {outcome: safe, min_rejected_writes: 1}\n";

fh::CheckContext context() {
  fh::CheckContext c;
  c.lease_ttl = std::chrono::seconds(2);
  c.lock = fh::kLock;
  return c;
}

fh::CheckerResult run(const fh::Checker& c, const fh::Builder& b, const ReadBack& rb,
                      const fh::CheckContext& ctx = context()) {
  fh::CheckerResult r = c.check_with(b.h, rb, ctx);
  for (auto& a : r.anomalies) fh::normalize(a);
  return r;
}

/// Appends to `b`: `w` is granted `granted` (lock key `lock_key`), then its write of (ledger,
/// segment 0, `chunk`) with `token` is answered with a write.fail carrying `high_water` (none: an
/// invalid request). Returns the write.fail's index.
std::size_t refusal(fh::Builder& b, const std::string& w, const std::string& lock_key, std::int64_t granted,
                    std::int64_t token, std::int64_t chunk, std::optional<std::int64_t> high_water) {
  b.acquire_ok(w, lock_key, granted, 7000 + granted);
  b.write(w, EventKind::kWriteInvoke, token, 0, chunk);
  return b.write(w, EventKind::kWriteFail, token, 0, chunk, high_water);
}

/// A run in which `w` is granted `token` and its first write is refused (refusal()); `fail` gets
/// the write.fail's index.
fh::Builder one_refusal(const std::string& w, const std::string& lock_key, std::int64_t token,
                        std::optional<std::int64_t> high_water, std::size_t* fail = nullptr) {
  fh::Builder b;
  b.run_start();
  const std::size_t at = refusal(b, w, lock_key, token, token, 0, high_water);
  if (fail) *fail = at;
  return b;
}

const fh::CheckerResult& result(const fh::Analysis& a, const std::string& name) {
  for (const auto& r : a.checkers)
    if (r.name == name) return r;
  throw std::runtime_error("no checker " + name);
}

}  // namespace

TEST(UnjustifiedRejection, TheTextComparingServicesRejectionsAboveTheMarkAreNamed) {
  const fh::TextCompareRun r = fh::text_compare_run();
  const fh::CheckerResult res = run(fh::UnjustifiedRejectionChecker{}, r.b, r.rb);
  EXPECT_EQ(res.verdict, fh::Verdict::kInvalid);
  ASSERT_EQ(res.anomalies.size(), 1u);
  const fh::Anomaly& a = res.anomalies[0];
  EXPECT_EQ(a.name, "unjustified-rejection");
  EXPECT_EQ(a.key, "ledger");
  EXPECT_EQ(a.tokens, r.w2_tokens);  // 10, 13, ..., 49
  EXPECT_EQ(r.w2_tokens.size(), 14u);
  EXPECT_THAT(a.clients, ElementsAre("w2"));
  EXPECT_EQ(a.evidence, r.w2_fails);
  EXPECT_TRUE(a.readback_seqs.empty());
  EXPECT_EQ(a.description,
            "writes to ledger were rejected although their tokens were at or above the key's high-water mark: w2's "
            "token 10 against the mark 9 its reply gave; w2's token 13 against the mark 9 its reply gave; w2's token "
            "16 against the mark 9 its reply gave; w2's token 19 against the mark 9 its reply gave; w2's token 22 "
            "against the mark 9 its reply gave; w2's token 25 against the mark 9 its reply gave; w2's token 28 "
            "against the mark 9 its reply gave; w2's token 31 against the mark 9 its reply gave; and 6 more (14 "
            "write.fail event(s), 14 rejection(s) recorded by the resource). A token equal to or above the mark must "
            "be accepted (the fencing rule: only a token below it is refused), so the resource refused writes it had "
            "to accept, and these rejections are no evidence that fencing works");
}

TEST(UnjustifiedRejection, TheIssuesRunIsInvalidTwiceAndItsRejectionsProveNoFencing) {
  const fh::TextCompareRun r = fh::text_compare_run();
  const fh::Scenario plan = fh::parse_scenario(kPlan, "text-compare.yaml");
  const fh::Analysis a = fh::analyze(r.b.h, r.rb, fh::CheckContext::of(plan));
  EXPECT_EQ(a.verdict, fh::Verdict::kInvalid);
  EXPECT_EQ(result(a, "unjustified-rejection").verdict, fh::Verdict::kInvalid);
  // w1 succeeded, w2 never had a write accepted, and nothing was injected: w2 is fenced out with
  // healthy services, from its first rejection (token 10, its acquire.ok) to the end.
  const fh::CheckerResult& out = result(a, "fenced-out");
  EXPECT_EQ(out.verdict, fh::Verdict::kInvalid);
  ASSERT_EQ(out.anomalies.size(), 1u);
  EXPECT_EQ(out.anomalies[0].tokens, r.w2_tokens);
  EXPECT_THAT(out.anomalies[0].evidence, ::testing::IsSupersetOf(r.w2_fails));
  EXPECT_THAT(out.anomalies[0].description,
              StartsWith("from the start of the run, w2's write with the freshly acquired token 10 was rejected "
                         "against the high-water mark 9, and no write was accepted within 4.00 s"));
  // The rejections are no evidence of fencing: none counts toward min_rejected_writes.
  const fh::Figures& f = a.figures;
  EXPECT_EQ(f.rejected_writes_history, 14);
  EXPECT_EQ(f.rejected_writes_unjustified_history, 14);
  EXPECT_EQ(f.rejected_writes_readback, 14);
  EXPECT_EQ(f.rejected_writes_unjustified_readback, 14);
  EXPECT_EQ(f.rejected_writes_total(), 0);
  const fh::ExpectationResult met = fh::evaluate_expectation(plan, a);
  EXPECT_FALSE(met.met);
  EXPECT_THAT(met.reasons,
              ::testing::Contains(
                  "expected at least 1 rejected write, saw 0 (write.fail events: 14 (14 at or above the mark: not "
                  "counted), the resource's rejections: 14 (14 at or above the mark: not counted)): a rejection whose "
                  "token was at or above the key's high-water mark is a broken fence refusing a write it had to "
                  "accept (unjustified-rejection), not evidence that fencing works"));
}

TEST(UnjustifiedRejection, ATokenBelowTheMarkIsAJustifiedRejectionAndCounts) {
  const fh::StoryRun r = fh::fenced_run();  // w1's 33 rejected at w2's mark 34
  EXPECT_EQ(run(fh::UnjustifiedRejectionChecker{}, r.b, r.rb).verdict, fh::Verdict::kValid);
  const fh::Figures f = fh::compute_figures(r.b.h, r.rb, context());
  EXPECT_EQ(f.rejected_writes_unjustified_history, 0);
  EXPECT_EQ(f.rejected_writes_unjustified_readback, 0);
  EXPECT_EQ(f.rejected_writes_total(), 1);
}

TEST(UnjustifiedRejection, ATokenEqualToTheMarkTheWorkerNeverHadAcceptedIsUnjustifiedAndFencesItOut) {
  // The resource's mark is 12 (from before this run: not in the log); w2 is granted 12 and its
  // first write is refused at 12. A token equal to the mark must be accepted.
  std::size_t fail = 0;
  const fh::Builder b = one_refusal("w2", fh::kKey2, 12, 12, &fail);
  ReadBack rb;
  rb.rejections = {RejectedWrite{fh::kLedgerKey, 0, 0, 12, "w2", 12}};
  rb.high_water = {{fh::kLedgerKey, 12}};
  const fh::CheckerResult r = run(fh::UnjustifiedRejectionChecker{}, b, rb);
  EXPECT_EQ(r.verdict, fh::Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_THAT(r.anomalies[0].tokens, ElementsAre(12));
  EXPECT_THAT(r.anomalies[0].evidence, ElementsAre(fail));
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("w2's token 12 against the mark 12 its reply gave"));
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("(1 write.fail event(s), 1 rejection(s) recorded by the resource)"));
  // fenced-out: no self-fencing (w2 had no write of its own accepted with 12), but a streak.
  const fh::CheckerResult out = run(fh::FencedOutChecker{}, b, rb);
  EXPECT_EQ(out.verdict, fh::Verdict::kInvalid);
  ASSERT_EQ(out.anomalies.size(), 1u);
  EXPECT_THAT(out.anomalies[0].description, HasSubstr("freshly acquired token 12"));
}

TEST(UnjustifiedRejection, AHoldersSecondWriteRefusedAtItsOwnMarkIsLeftToFencedOut) {
  // A strict "mark < token" comparison: w1's first chunk set the mark 9, its second is refused at 9.
  // fenced-out names it (self-fencing); this rule does not name it again, from the history or from
  // the resource's record; the figures count neither as a rejected write.
  fh::Builder b;
  b.run_start();
  b.acquire_ok("w1", fh::kKey1, 9, 7001);
  const std::size_t ok = b.write_ok("w1", 9, 0, 0, 9);
  b.write("w1", EventKind::kWriteInvoke, 9, 0, 1);
  const std::size_t fail = b.write("w1", EventKind::kWriteFail, 9, 0, 1, 9);
  ReadBack rb;
  rb.log = {fh::logged(1, "w1", 9, 0, 0)};
  rb.rejections = {RejectedWrite{fh::kLedgerKey, 0, 1, 9, "w1", 9}};
  rb.high_water = {{fh::kLedgerKey, 9}};
  EXPECT_EQ(run(fh::UnjustifiedRejectionChecker{}, b, rb).verdict, fh::Verdict::kValid);
  const fh::CheckerResult out = run(fh::FencedOutChecker{}, b, rb);
  ASSERT_EQ(out.anomalies.size(), 1u);
  EXPECT_THAT(out.anomalies[0].evidence, ElementsAre(ok, fail));
  const fh::Figures f = fh::compute_figures(b.h, rb, context());
  EXPECT_EQ(f.rejected_writes_unjustified_history, 1);
  EXPECT_EQ(f.rejected_writes_unjustified_readback, 1);
  EXPECT_EQ(f.rejected_writes_total(), 0);

  // The same refusal after w1 moved on to another token is no self-fencing: this rule's.
  fh::Builder later = b;
  const std::size_t stale = refusal(later, "w1", fh::kKey2, 15, 9, 1, 9);
  const fh::CheckerResult r = run(fh::UnjustifiedRejectionChecker{}, later, rb);
  EXPECT_EQ(r.verdict, fh::Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_THAT(r.anomalies[0].evidence, ElementsAre(stale));
}

TEST(UnjustifiedRejection, AMarkNoSourceGivesIsUnknownNeverValid) {
  // The reply said no mark (high_water 0, resource-http.md); no log, no record of rejections.
  fh::Builder b;
  b.run_start();
  b.acquire_ok("w1", fh::kKey1, 33, 7001);
  b.acquire_ok("w2", fh::kKey2, 34, 7002);
  b.write_ok("w2", 34, 0, 0, 0);
  b.write("w1", EventKind::kWriteInvoke, 33, 0, 1);
  const std::size_t fail = b.write("w1", EventKind::kWriteFail, 33, 0, 1, 0);
  const fh::CheckerResult unknown = run(fh::UnjustifiedRejectionChecker{}, b, ReadBack{});
  EXPECT_EQ(unknown.verdict, fh::Verdict::kUnknown);
  EXPECT_EQ(unknown.error, "1 rejection(s) with no known mark (the first: w1's write to ledger with token 33, event #" +
                               std::to_string(fail) +
                               "): the reply did not say the high-water mark, the accept log does not show the key's "
                               "highest token at or below it, and the resource's record of its rejections does not "
                               "list it, so whether the fence had to refuse it is not known");

  // The resource's record of it gives the mark 34: a justified rejection.
  ReadBack recorded;
  recorded.log = {fh::logged(1, "w2", 34, 0, 0)};
  recorded.rejections = {RejectedWrite{fh::kLedgerKey, 0, 1, 33, "w1", 34}};
  EXPECT_EQ(run(fh::UnjustifiedRejectionChecker{}, b, recorded).verdict, fh::Verdict::kValid);

  // A record of another write does not cover it.
  ReadBack other = recorded;
  other.rejections = {RejectedWrite{fh::kLedgerKey, 0, 0, 33, "w1", 34}};
  EXPECT_EQ(run(fh::UnjustifiedRejectionChecker{}, b, other).verdict, fh::Verdict::kUnknown);

  // The accept log bounds the mark: token 40 is at or above 34, the highest token ledger ever
  // accepted, so it was refused at or above the mark whatever the mark was then.
  fh::Builder above = b;
  const std::size_t fail40 = refusal(above, "w3", "fencecheck/test/694d8a1b2c3d0003", 40, 40, 0, 0);
  const fh::CheckerResult r = run(fh::UnjustifiedRejectionChecker{}, above, recorded);
  EXPECT_EQ(r.verdict, fh::Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_THAT(r.anomalies[0].evidence, ElementsAre(fail40));
  EXPECT_THAT(r.anomalies[0].readback_seqs, ElementsAre(1));
  EXPECT_THAT(r.anomalies[0].description,
              HasSubstr("w3's token 40 (its reply gave no mark), at or above 34, the highest token the accept log "
                        "shows for ledger (seq 1)"));
  const fh::Figures f = fh::compute_figures(above.h, recorded, context());
  EXPECT_EQ(f.rejected_writes_history, 2);
  EXPECT_EQ(f.rejected_writes_unjustified_history, 1);
  EXPECT_EQ(f.rejected_writes_total(), 1);
}

TEST(UnjustifiedRejection, AFreshHolderRefusedWithoutASaidMarkIsFencedOutAndItsMarkUnknown) {
  // A 409 whose reply gave no mark (high_water 0) of w2's fresh token, and no write accepted after
  // it: fenced out whatever the mark was; whether the refusal was justified is not known.
  const fh::Builder b = one_refusal("w2", fh::kKey2, 12, 0);
  const fh::CheckerResult out = run(fh::FencedOutChecker{}, b, ReadBack{});
  EXPECT_EQ(out.verdict, fh::Verdict::kInvalid);
  ASSERT_EQ(out.anomalies.size(), 1u);
  EXPECT_THAT(out.anomalies[0].description,
              StartsWith("from the start of the run, w2's write with the freshly acquired token 12 was rejected (its "
                         "reply gave no high-water mark), and no write was accepted within 4.00 s"));
  EXPECT_EQ(run(fh::UnjustifiedRejectionChecker{}, b, ReadBack{}).verdict, fh::Verdict::kUnknown);
}

TEST(UnjustifiedRejection, AnInvalidRequestIsNoRejectionAndARecordAtOrAboveItsMarkIsNamed) {
  // A 4xx other than the rejected status: write.fail without a high_water (worker.h): not judged.
  const fh::Builder b = one_refusal("w1", fh::kKey1, 33, std::nullopt);
  EXPECT_EQ(run(fh::UnjustifiedRejectionChecker{}, b, ReadBack{}).verdict, fh::Verdict::kValid);
  // The resource recorded a refusal of a black box's token 35 at its mark 34: named from the record.
  ReadBack rb;
  rb.rejections = {RejectedWrite{fh::kLedgerKey, 0, 0, 35, "w9", 34}};
  const fh::CheckerResult r = run(fh::UnjustifiedRejectionChecker{}, b, rb);
  EXPECT_EQ(r.verdict, fh::Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_THAT(r.anomalies[0].clients, ElementsAre("w9"));
  EXPECT_TRUE(r.anomalies[0].evidence.empty());
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("w9's token 35 against the mark 34 the resource recorded"));
  EXPECT_THAT(r.anomalies[0].description, HasSubstr("(0 write.fail event(s), 1 rejection(s) recorded by the resource)"));
}

TEST(UnjustifiedRejection, StreamedFromTheFileAsInMemory) {
  // check_history_file() gives what run_checkers() gives, the second pass included (a candidate at
  // a mark equal to its token).
  fh::TextCompareRun r = fh::text_compare_run();
  refusal(r.b, "w3", "fencecheck/test/694d8a1b2c3d0003", 9, 9, 0, 9);
  const fh::Checkers one = [] {
    fh::Checkers c;
    c.push_back(std::make_unique<fh::UnjustifiedRejectionChecker>());
    return c;
  }();
  const fh::CheckRun memory = fh::run_checkers(one, r.b.h, r.rb, context());
  const std::filesystem::path file =
      std::filesystem::path(::testing::TempDir()) / ("unjustified-" + std::to_string(::getpid()) + ".jsonl");
  {
    std::ofstream out(file);
    for (const auto& e : r.b.h) out << fencecheck::to_json_line(e) << "\n";
  }
  const fh::StreamCheckRun streamed = fh::check_history_file(file, r.rb, context(), {"unjustified-rejection"});
  std::filesystem::remove(file);
  ASSERT_EQ(streamed.run.results.size(), 1u);
  EXPECT_EQ(streamed.passes, 2u);
  ASSERT_EQ(memory.results.size(), 1u);
  const fh::CheckerResult& s = streamed.run.results[0];
  const fh::CheckerResult& m = memory.results[0];
  EXPECT_EQ(s.verdict, fh::Verdict::kInvalid);
  ASSERT_EQ(s.anomalies.size(), 1u);
  ASSERT_EQ(m.anomalies.size(), 1u);
  EXPECT_EQ(s.anomalies[0].evidence, m.anomalies[0].evidence);
  EXPECT_EQ(s.anomalies[0].description, m.anomalies[0].description);
  EXPECT_EQ(s.anomalies[0].tokens.size(), 15u);  // w2's 14 and w3's 9
}
