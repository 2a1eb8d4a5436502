// Unit tests for judging workers that send no events (black boxes) and histories with protocol
// errors (issue 13): which checkers judge a silent worker from the lock service and the resource,
// which say unknown naming it, that none reports what missing events merely hide, and that a
// line that broke the worker protocol leaves the expectation unmet.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/checkers.h"
#include "fencecheck/harness/expectation.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/harness/history_index.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/harness/verdict_json.h"
#include "fencecheck/proto/chunk.h"
#include "history_builder.h"  // kLedgerKey, kLock, kKey1, kKey2, Builder, stored(), logged()

using namespace fencecheck;
using namespace fencecheck::harness;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Contains;
using ::testing::Not;

namespace {

/// The silent workers' sentence for checkers that need the workers' own events.
const std::string kBothSilent =
    "w1 and w2 each sent no worker-protocol events (black boxes), and this checker judges from the workers' own "
    "events (worker-events), so w1 and w2 were not judged: unknown, never valid";
const std::string kW2Silent =
    "w2 sent no worker-protocol events (a black box), and this checker judges from the workers' own events "
    "(worker-events), so w2 was not judged: unknown, never valid";

/// A harness event about `target` (a log line, a worker's exit, run.start / run.end).
std::size_t harness_event(Builder& b, EventKind kind, const std::string& target = {}, const std::string& detail = {}) {
  Event e = Builder::ev("harness", kind);
  e.target = target;
  e.detail = detail;
  return b.add(e);
}

std::size_t protocol_error(Builder& b, const std::string& w, std::int64_t line_no, const std::string& detail,
                           const std::string& line) {
  Event e = Builder::ev("harness", EventKind::kProtocolError);
  e.target = w;
  e.line_no = line_no;
  e.detail = detail;
  e.line = line;
  return b.add(e);
}

/// A counter increment's write.ok (no chunk): new value `value`.
std::size_t increment(Builder& b, const std::string& w, std::int64_t token, std::int64_t value) {
  Event e = Builder::ev(w, EventKind::kWriteOk);
  e.key = kLedgerKey;
  e.token = token;
  e.segment = value;
  e.high_water = token;
  return b.add(e);
}

Scenario scenario(const std::string& expect, const std::string& job = "{key: ledger, segments: 1, chunks: 2}") {
  return parse_scenario("name: bb\nlease_ttl: 2s\nlock_service: {kind: etcd, lock: " + kLock +
                            "}\nresource: {kind: store}\njob: " + job + "\nworkers: [{id: w1}, {id: w2}]\n" + expect,
                        "inline.yaml");
}

const CheckerResult& result(const Analysis& a, const std::string& name) {
  for (const auto& c : a.checkers)
    if (c.name == name) return c;
  throw std::runtime_error("no checker " + name);
}

std::map<std::string, std::string> verdicts(const Analysis& a) {
  std::map<std::string, std::string> out;
  for (const auto& c : a.checkers) out[c.name] = std::string(verdict_name(c.verdict));
  return out;
}

/// The black-box story: neither worker says anything. The lock service saw w1's key (token 33)
/// created, w2's (34) queued, w1's lease expire while the harness had w1 stopped, and w2's key
/// deleted at the end; both workers exited. The store's read-back tells the rest.
Builder black_box_history() {
  Builder b;
  harness_event(b, EventKind::kRunStart, "", "bb");
  harness_event(b, EventKind::kLog, "w1", "started worker w1 (pid 101)");
  b.lock_grant(kKey1, 33, 7001);
  harness_event(b, EventKind::kLog, "w2", "started worker w2 (pid 102)");
  b.lock_grant(kKey2, 34, 7002);
  b.fault_inject("w1", 6'000'000'000);
  b.lock_delete(kKey1, 33, 40);  // w1's lease expired while it was stopped
  b.lock_delete(kKey2, 34, 50);  // w2 released (or its lease expired: nobody can tell)
  harness_event(b, EventKind::kWorkerExit, "w2", "exit 0");
  b.fault_heal("w1", 6'000'000'000);
  harness_event(b, EventKind::kWorkerExit, "w1", "exit 0");
  harness_event(b, EventKind::kRunEnd, "", "done");
  return b;
}

/// A clean read-back of the black-box story: w1 wrote chunk 0 with 33, w2 then wrote both chunks
/// with 34, and the store refused w1's late chunk 1 with 33.
ReadBack clean_readback() {
  ReadBack rb;
  rb.resource = "store";
  rb.fencing = "per-key";
  rb.chunks = {stored("w2", 34, 0, 0, 2), stored("w2", 34, 0, 1, 3)};
  rb.log = {logged(1, "w1", 33, 0, 0), logged(2, "w2", 34, 0, 0), logged(3, "w2", 34, 0, 1)};
  rb.rejections = {RejectedWrite{kLedgerKey, 0, 1, 33, "w1", 34}};
  rb.high_water = {{kLedgerKey, 34}};
  return rb;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Who is a black box

TEST(BlackBoxWorkers, AWorkerWithoutWorkerProtocolEventsIsABlackBoxHelloAndLogDoNotCount) {
  Builder b;
  b.run_start();
  Event hello = Builder::ev("w2", EventKind::kHello);
  hello.protocol = 1;
  b.add(hello);
  b.add(Builder::ev("w2", EventKind::kLog));
  harness_event(b, EventKind::kWorkerExit, "w2", "exit 0");  // the harness's event about w2, not w2's own
  b.lock_grant(kKey1, 33, 7001);
  const std::size_t acquire = b.acquire_ok("w1", kKey1, 33, 7001);
  const std::vector<std::string> workers{"w3", "w1", "w2"};
  EXPECT_THAT(black_box_workers(b.h, workers), ElementsAre("w2", "w3"));
  const HistoryIndex index(b.h);
  EXPECT_THAT(black_box_workers(b.h, workers, &index), ElementsAre("w2", "w3"));
  EXPECT_THAT(black_box_workers(b.h, std::vector<std::string>{}), IsEmpty());  // nobody listed: nobody judged a black box
  // A worker that never ran did nothing to judge.
  harness_event(b, EventKind::kLog, "w3", "w3 never started: w1 ended before its job.done #1");
  EXPECT_THAT(black_box_workers(b.h, workers), ElementsAre("w2"));
  EXPECT_THAT(black_box_workers(b.h, workers, &index), ElementsAre("w2"));  // a stale index is not used
  const HistoryIndex fresh(b.h);
  EXPECT_THAT(black_box_workers(b.h, workers, &fresh), ElementsAre("w2"));
  CheckContext c = CheckContext::of(scenario("expect: {outcome: safe}\n"));
  EXPECT_THAT(c.workers, ElementsAre("w1", "w2"));
  EXPECT_THAT(black_box_workers(b.h, c), ElementsAre("w2"));
  EXPECT_TRUE(is_worker_protocol_event(b.h[acquire]));
  EXPECT_FALSE(is_worker_protocol_event(hello));
}

// ---------------------------------------------------------------------------------------------
// A run of black boxes: judged from the lock service and the resource

TEST(BlackBoxRun, AStaleWriteInTheAcceptLogIsInvalidFromTheLogAlone) {
  Builder b = black_box_history();
  ReadBack rb = clean_readback();
  // The store did not fence: after w2's 34 it accepted w1's late chunk 1 with 33.
  rb.chunks = {stored("w2", 34, 0, 0, 2), stored("w1", 33, 0, 1, 4)};
  rb.log.push_back(logged(4, "w1", 33, 0, 1));
  rb.rejections.clear();
  Scenario s = scenario("expect: {outcome: anomaly, anomalies: [stale-write-accepted]}\n");
  const Analysis a = analyze(b.h, rb, CheckContext::of(s));

  EXPECT_EQ(a.verdict, Verdict::kInvalid);
  EXPECT_THAT(a.black_box_workers, ElementsAre("w1", "w2"));
  const CheckerResult& stale = result(a, "stale-write-accepted");
  EXPECT_EQ(stale.verdict, Verdict::kInvalid);
  EXPECT_THAT(stale.evidence, ElementsAre("resource.accept-log"));  // no worker events to read
  ASSERT_EQ(stale.anomalies.size(), 1u);
  const Anomaly& an = stale.anomalies[0];
  EXPECT_EQ(an.key, "ledger");
  EXPECT_THAT(an.tokens, ElementsAre(33, 34));
  EXPECT_THAT(an.clients, ElementsAre("w1", "w2"));
  EXPECT_THAT(an.readback_seqs, ElementsAre(2, 4));  // w2's first 34, then w1's 33
  EXPECT_THAT(an.evidence, IsEmpty());               // no write.ok to cite
  EXPECT_EQ(an.description,
            "ledger: the resource accepted token 33 from w1 after it had already accepted a higher token (34): 1 "
            "write(s) in the resource's accept log (seq 4)");
  // The chunks show the interleaving too, from their own bytes.
  EXPECT_EQ(result(a, "interleaved-segment").verdict, Verdict::kInvalid);
  EXPECT_THAT(result(a, "interleaved-segment").evidence, ElementsAre("resource.chunks", "resource.accept-log"));
  // What needs the workers' own events is unknown, naming them.
  for (const char* name : {"foreign-release", "fenced-out", "counter-drift", "lost-acknowledged-write"}) {
    EXPECT_EQ(result(a, name).verdict, Verdict::kUnknown) << name;
    EXPECT_EQ(result(a, name).error, kBothSilent) << name;
  }
  const ExpectationResult e = evaluate_expectation(s, a);
  EXPECT_TRUE(e.met) << ::testing::PrintToString(e.reasons);
}

TEST(BlackBoxRun, ACleanAcceptLogIsValidWhileCheckersNeedingWorkerEventsAreUnknown) {
  Builder b = black_box_history();
  const ReadBack rb = clean_readback();
  Scenario s = scenario("expect: {outcome: safe}\n");
  const Analysis a = analyze(b.h, rb, CheckContext::of(s));

  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  EXPECT_THAT(a.black_box_workers, ElementsAre("w1", "w2"));
  EXPECT_EQ(verdicts(a), (std::map<std::string, std::string>{{"interleaved-segment", "valid"},
                                                             {"corrupt-chunk", "valid"},
                                                             {"stale-write-accepted", "valid"},
                                                             {"cross-key-rejection", "valid"},
                                                             {"rejection-storm", "valid"},
                                                             {"foreign-release", "unknown"},
                                                             {"token-regression", "valid"},
                                                             {"fenced-out", "unknown"},
                                                             {"duplicate-effect", "valid"},
                                                             {"counter-drift", "unknown"},
                                                             {"lost-acknowledged-write", "unknown"},
                                                             {"unaccounted-write", "valid"},
                                                             {"unjustified-rejection", "valid"},
                                                             {"ungranted-holding", "unknown"}}));
  EXPECT_THAT(result(a, "stale-write-accepted").evidence, ElementsAre("resource.accept-log"));
  // A black box's rejections are judged by the marks the resource recorded with them.
  EXPECT_THAT(result(a, "unjustified-rejection").evidence, ElementsAre("resource.rejections", "resource.accept-log"));
  EXPECT_THAT(result(a, "rejection-storm").evidence, ElementsAre("resource.rejections"));
  EXPECT_THAT(result(a, "cross-key-rejection").evidence, ElementsAre("resource.rejections", "resource.accept-log"));
  EXPECT_THAT(result(a, "token-regression").evidence, ElementsAre("lock-service", "resource.high-water"));
  EXPECT_THAT(result(a, "fenced-out").evidence, ElementsAre("history"));
  for (const char* name : {"foreign-release", "fenced-out", "counter-drift", "lost-acknowledged-write", "ungranted-holding"})
    EXPECT_EQ(result(a, name).error, kBothSilent) << name;
  EXPECT_EQ(result(a, "stale-write-accepted").error, "");

  // Never "safe": one reason for the five checkers the silent workers stopped.
  const ExpectationResult e = evaluate_expectation(s, a);
  EXPECT_FALSE(e.met);
  EXPECT_THAT(e.reasons, ElementsAre("expected a safe run, but the verdict is unknown: checkers foreign-release, "
                                     "fenced-out, counter-drift, lost-acknowledged-write and ungranted-holding could "
                                     "not decide (" +
                                     kBothSilent + "), and an unknown verdict never counts as safe"));

  // verdict.json names them and each checker's sources.
  const nlohmann::json j = verdict_to_json(a, e, b.h);
  EXPECT_EQ(j["black_box_workers"], (nlohmann::json{"w1", "w2"}));
  EXPECT_EQ(j["protocol_errors"], nlohmann::json::array());
  for (const auto& c : j["checkers"]) {
    if (c["name"] == "stale-write-accepted") {
      EXPECT_EQ(c["evidence"], (nlohmann::json{"resource.accept-log"}));
    }
  }
}

TEST(BlackBoxRun, WithoutAnAcceptLogStaleWriteAcceptedCannotJudgeThemEither) {
  Builder b = black_box_history();
  ReadBack rb = clean_readback();
  rb.log.clear();
  CheckContext c = CheckContext::of(scenario("expect: {outcome: safe}\n"));
  c.evidence->accept_log = false;
  c.resource_kind = "postgres";
  const Analysis a = analyze(b.h, rb, c);
  const CheckerResult& stale = result(a, "stale-write-accepted");
  EXPECT_EQ(stale.verdict, Verdict::kUnknown);
  EXPECT_EQ(stale.error,
            "w1 and w2 each sent no worker-protocol events (black boxes), and resource kind postgres does not give "
            "resource.accept-log, from which this checker would judge them: unknown, never valid");
  EXPECT_THAT(stale.evidence, IsEmpty());
}

TEST(BlackBoxRun, TheExpectationsFiguresSayWhatABlackBoxCannotShow) {
  Builder b = black_box_history();
  Scenario s = scenario(
      "faults: [{kind: sigstop, target: w1, trigger: {at: 1s}, duration: 6s}]\n"
      "expect: {outcome: safe, min_expiries_during_work: 1, pause_tolerance: 10%, progress_after_heal: true}\n");
  const Analysis a = analyze(b.h, clean_readback(), CheckContext::of(s));
  const ExpectationResult e = evaluate_expectation(s, a);
  EXPECT_FALSE(e.met);
  EXPECT_THAT(e.reasons,
              ::testing::Contains(
                  "expected at least 1 lease expiry during work, saw 0 (w1 and w2 are black boxes: without their "
                  "acquire.ok and release.ok events, their leases' expiries cannot be told from their releases; the "
                  "lock service gave no word for 1 delete of a holding while one ran, so the figure is not measured)"));
  EXPECT_EQ(a.figures.expiries_undecided, 1);  // the etcd-like history's delete carries no word
  EXPECT_THAT(e.reasons, ::testing::Contains("w1 was stopped (sigstop) for 6.00 s but reported no pause (it is a black "
                                             "box: it sends no events, so its own measure of the pause is missing)"));
  EXPECT_THAT(e.reasons, ::testing::Contains("expected a write accepted within 4.00 s of the last heal, but progress "
                                             "cannot be judged: w1 and w2 are black boxes (no write.ok or write.invoke "
                                             "events to show it)"));
}

// ---------------------------------------------------------------------------------------------
// A mixed run: w1 speaks, w2 is silent

TEST(MixedRun, TheSpeakingWorkerIsJudgedAndTheSilentOneNamed) {
  Builder b;
  b.run_start();
  b.lock_grant(kKey1, 33, 7001);
  b.lock_grant(kKey2, 34, 7002);  // w2's key, queued: created before w1 even reports its acquire
  b.acquire_ok("w1", kKey1, 33, 7001);
  b.write_ok("w1", 33, 0, 0, 33);
  b.fault_inject("w1", 6'000'000'000);
  b.lock_delete(kKey1, 33, 40);
  b.fault_heal("w1", 6'000'000'000);
  b.write("w1", EventKind::kWriteInvoke, 33, 0, 1);
  b.write("w1", EventKind::kWriteFail, 33, 0, 1, 34);
  harness_event(b, EventKind::kWorkerExit, "w1", "exit 1");
  b.lock_delete(kKey2, 34, 50);
  harness_event(b, EventKind::kWorkerExit, "w2", "exit 0");
  harness_event(b, EventKind::kRunEnd, "", "done");
  Scenario s = scenario("expect: {outcome: safe}\n");
  const Analysis a = analyze(b.h, clean_readback(), CheckContext::of(s));

  EXPECT_THAT(a.black_box_workers, ElementsAre("w2"));
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  // The mark (34, set by silent w2) is above w1's token, but not above the lock service's latest
  // grant: no token-regression.
  EXPECT_EQ(result(a, "token-regression").verdict, Verdict::kValid);
  EXPECT_EQ(result(a, "stale-write-accepted").verdict, Verdict::kValid);
  EXPECT_THAT(result(a, "stale-write-accepted").evidence, ElementsAre("resource.accept-log", "worker-events"));
  // w1's acknowledged chunk 0 was superseded (log seq 1 < the slot's seq 2): nothing lost, but w2
  // could not be judged.
  const CheckerResult& lost = result(a, "lost-acknowledged-write");
  EXPECT_EQ(lost.verdict, Verdict::kUnknown);
  EXPECT_EQ(lost.error, kW2Silent);
  EXPECT_EQ(result(a, "fenced-out").error, kW2Silent);
  EXPECT_EQ(result(a, "foreign-release").error, kW2Silent);
}

TEST(MixedRun, AnAnomalyProvenFromTheSpeakingWorkerStaysInvalid) {
  Builder b;
  b.lock_grant(kKey1, 33, 7001);
  b.acquire_ok("w1", kKey1, 33, 7001);
  b.write_ok("w1", 33, 0, 0, 33);
  const std::size_t ok = b.write_ok("w1", 33, 0, 1, 33);  // acknowledged, then gone
  ReadBack rb;
  rb.chunks = {stored("w1", 33, 0, 0, 1)};
  rb.log = {logged(1, "w1", 33, 0, 0)};
  rb.high_water = {{kLedgerKey, 33}};
  const Analysis a = analyze(b.h, rb, CheckContext::of(scenario("expect: {outcome: safe}\n")));
  EXPECT_THAT(a.black_box_workers, ElementsAre("w2"));
  const CheckerResult& lost = result(a, "lost-acknowledged-write");
  EXPECT_EQ(lost.verdict, Verdict::kInvalid);
  EXPECT_EQ(lost.error, "");
  ASSERT_EQ(lost.anomalies.size(), 1u);
  EXPECT_THAT(lost.anomalies[0].evidence, ElementsAre(ok - 1, ok));
  EXPECT_EQ(a.verdict, Verdict::kInvalid);
}

TEST(MixedRun, WithoutALogASlotASilentWorkerHoldsIsNotALostWrite) {
  Builder b;
  b.lock_grant(kKey1, 33, 7001);
  b.acquire_ok("w1", kKey1, 33, 7001);
  b.write_ok("w1", 33, 0, 0, 33);
  b.lock_grant(kKey2, 34, 7002);
  ReadBack rb;
  rb.chunks = {stored("w2", 34, 0, 0, 2)};  // silent w2 rewrote it (legitimately, with a newer token)
  CheckContext c = CheckContext::of(scenario("expect: {outcome: safe}\n"));
  c.evidence->accept_log = false;
  const Analysis a = analyze(b.h, rb, c);
  const CheckerResult& lost = result(a, "lost-acknowledged-write");
  EXPECT_EQ(lost.verdict, Verdict::kUnknown);
  EXPECT_THAT(lost.anomalies, IsEmpty());
  EXPECT_EQ(lost.error, kW2Silent);
  // The same history where w2 is not listed in the plan: w1's write is lost (nothing acknowledged
  // the slot's content after it).
  CheckContext unlisted = c;
  unlisted.workers = {"w1"};
  EXPECT_EQ(result(analyze(b.h, rb, unlisted), "lost-acknowledged-write").verdict, Verdict::kInvalid);
}

TEST(MixedRun, ACounterAboveTheAcknowledgedIncrementsProvesNothingWithASilentWorker) {
  Builder b;
  b.acquire_ok("w1", kKey1, 33, 7001);
  for (int i = 0; i < 5; ++i) increment(b, "w1", 33, i + 1);
  ReadBack rb;
  rb.counters = {{kLedgerKey, 10}};  // w2's five increments too
  Scenario s = scenario("expect: {outcome: safe}\n", "{kind: counter, key: ledger, increments: 5}");
  const Analysis above = analyze(b.h, rb, CheckContext::of(s));
  EXPECT_EQ(result(above, "counter-drift").verdict, Verdict::kUnknown);
  EXPECT_EQ(result(above, "counter-drift").error, kW2Silent);
  rb.counters = {{kLedgerKey, 3}};  // below w1's own acknowledged increments: lost, whoever else wrote
  const Analysis below = analyze(b.h, rb, CheckContext::of(s));
  EXPECT_EQ(result(below, "counter-drift").verdict, Verdict::kInvalid);
}

TEST(MixedRun, AFencedOutStreakIsNotJudgedWhenASilentWorkerMayHaveMadeProgress) {
  Builder b;
  b.fault_inject("w1", 6'000'000'000);
  b.fault_heal("w1", 6'000'000'000);
  b.acquire_ok("w1", kKey1, 35, 7001);  // a fresh token after the heal
  b.write("w1", EventKind::kWriteInvoke, 35, 0, 0);
  b.write("w1", EventKind::kWriteFail, 35, 0, 0, 36);  // silent w2 holds 36 and writes
  b.t += 10'000'000'000;
  harness_event(b, EventKind::kRunEnd, "", "done");
  Scenario s = scenario("expect: {outcome: safe}\n");
  const Analysis a = analyze(b.h, ReadBack{}, CheckContext::of(s));
  EXPECT_EQ(result(a, "fenced-out").verdict, Verdict::kUnknown);
  EXPECT_EQ(result(a, "fenced-out").error, kW2Silent);
  CheckContext unlisted = CheckContext::of(s);
  unlisted.workers = {"w1"};  // the same history, everyone speaking: fenced out
  EXPECT_EQ(result(analyze(b.h, ReadBack{}, unlisted), "fenced-out").verdict, Verdict::kInvalid);
}

TEST(BlackBoxRun, TheIssuersGrantsStillShowATokenRegression) {
  Builder b;
  b.lock_grant(kKey1, 48, 7001);
  b.lock_grant(kKey2, 3, 1);  // a reset issuer
  ReadBack rb;
  rb.high_water = {{kLedgerKey, 48}};
  const Analysis a = analyze(b.h, rb, CheckContext::of(scenario("expect: {outcome: safe}\n")));
  const CheckerResult& r = result(a, "token-regression");
  EXPECT_EQ(r.verdict, Verdict::kInvalid);
  ASSERT_EQ(r.anomalies.size(), 2u);  // the grants going backwards, and the mark above the latest grant
  EXPECT_THAT(r.anomalies[1].description,
              HasSubstr("high-water mark for ledger is 48, above the issuer's latest token 3 (the lock service's "
                        "grant of " + kKey2 + ")"));
}

// ---------------------------------------------------------------------------------------------
// Protocol errors

TEST(ProtocolErrors, ACleanRunWithAProtocolErrorIsUnknownAndNotMetNamingTheWorkerAndLine) {
  Builder b;
  b.lock_grant(kKey1, 33, 7001);
  b.acquire_ok("w1", kKey1, 33, 7001);
  b.write_ok("w1", 33, 0, 0, 33);
  const std::size_t pe = protocol_error(b, "w1", 7, "w1 line 7: write.ok has no field 'token'",
                                          R"({"kind":"write.ok","key":"ledger","segment":0,"chunk":1})");
  b.lock_grant(kKey2, 34, 7002);
  b.acquire_ok("w2", kKey2, 34, 7002);
  ReadBack rb;
  rb.chunks = {stored("w1", 33, 0, 0, 1)};
  rb.log = {logged(1, "w1", 33, 0, 0)};
  rb.high_water = {{kLedgerKey, 33}};
  Scenario s = scenario("expect: {outcome: safe}\n");
  const Analysis a = analyze(b.h, rb, CheckContext::of(s));
  for (const auto& c : a.checkers) EXPECT_EQ(c.verdict, Verdict::kValid) << c.name << ": " << c.error;
  EXPECT_EQ(a.verdict, Verdict::kUnknown);  // every checker valid, yet the protocol error leaves it unknown
  ASSERT_EQ(a.protocol_errors.size(), 1u);
  EXPECT_EQ(a.protocol_errors[0].worker, "w1");
  EXPECT_EQ(a.protocol_errors[0].line_no, 7);
  EXPECT_EQ(a.protocol_errors[0].index, pe);
  EXPECT_EQ(a.protocol_errors[0].line, R"({"kind":"write.ok","key":"ledger","segment":0,"chunk":1})");
  EXPECT_EQ(a.evidence_events.count(pe), 1u);

  const ExpectationResult e = evaluate_expectation(s, a);
  EXPECT_FALSE(e.met);
  EXPECT_THAT(e.reasons, ElementsAre("w1's event line 7 broke the worker protocol: write.ok has no field 'token' "
                                     "\xE2\x80\x94 the run cannot be judged safe"));

  const nlohmann::json j = verdict_to_json(a, e, b.h);
  ASSERT_EQ(j["protocol_errors"].size(), 1u);
  EXPECT_EQ(j["protocol_errors"][0]["worker"], "w1");
  EXPECT_EQ(j["protocol_errors"][0]["line_no"], 7);
  EXPECT_EQ(j["protocol_errors"][0]["index"], pe);
  EXPECT_EQ(j["protocol_errors"][0]["line"], R"({"kind":"write.ok","key":"ledger","segment":0,"chunk":1})");
  EXPECT_EQ(j["protocol_errors"][0]["reason"], e.reasons[0]);
  EXPECT_EQ(j["verdict"], "unknown");
  EXPECT_EQ(j["expectation"]["met"], false);
}

TEST(ProtocolErrors, AnExpectedAnomalyFoundDoesNotMakeUpForIt) {
  // The unfenced story's read-back: a stale write accepted, as expected; but w2's line 12 broke
  // the protocol.
  Builder b;
  b.lock_grant(kKey1, 33, 7001);
  b.acquire_ok("w1", kKey1, 33, 7001);
  b.write_ok("w1", 33, 0, 0, 33);
  b.lock_grant(kKey2, 34, 7002);
  b.acquire_ok("w2", kKey2, 34, 7002);
  b.write_ok("w2", 34, 0, 0, 34);
  b.write_ok("w1", 33, 0, 1, 34);  // stale, accepted
  protocol_error(b, "w2", 12, "line 12 of w2: field 'token' is \"34\", not an integer",
                   R"({"kind":"write.ok","token":"34"})");
  ReadBack rb;
  rb.chunks = {stored("w2", 34, 0, 0, 2), stored("w1", 33, 0, 1, 3)};
  rb.log = {logged(1, "w1", 33, 0, 0), logged(2, "w2", 34, 0, 0), logged(3, "w1", 33, 0, 1)};
  rb.high_water = {{kLedgerKey, 34}};
  Scenario s = scenario("expect: {outcome: anomaly, anomalies: [stale-write-accepted]}\n");
  const Analysis a = analyze(b.h, rb, CheckContext::of(s));
  EXPECT_EQ(a.verdict, Verdict::kInvalid);  // the anomaly is proven: invalid stays (worse than unknown)
  EXPECT_FALSE(a.anomalies_named("stale-write-accepted").empty());
  const ExpectationResult e = evaluate_expectation(s, a);
  EXPECT_FALSE(e.met);
  EXPECT_THAT(e.reasons, ElementsAre("w2's event line 12 broke the worker protocol: field 'token' is \"34\", not an "
                                     "integer \xE2\x80\x94 the run cannot be judged safe"));
}

TEST(ProtocolErrors, TheReasonKeepsADetailThatDoesNotStartWithTheWorkerAndLine) {
  ProtocolError pe{"w1", 3, "unknown kind \"write.done\": not a worker-protocol event", "{}", 0};
  EXPECT_EQ(protocol_error_reason(pe), "w1's event line 3 broke the worker protocol: unknown kind \"write.done\": not "
                                       "a worker-protocol event \xE2\x80\x94 the run cannot be judged safe");
  ProtocolError bare{"", std::nullopt, "", "", 0};
  EXPECT_EQ(protocol_error_reason(bare),
            "a worker's event broke the worker protocol \xE2\x80\x94 the run cannot be judged safe");
}

// ---------------------------------------------------------------------------------------------
// lock_service: {kind: none} (issue 31, item 7): no issuer history

namespace {

/// The story as a run of kind none sees it: no lock.* events (nothing watched), judged with the
/// scenario's context of kind none.
Analysis analyze_without_issuer(const StoryRun& r) {
  History h;
  for (const Event& e : r.b.h)
    if (e.source != "lock") h.add(e);
  Scenario s = parse_scenario("name: nolock\nlease_ttl: 2s\nlock_service: {kind: none, lock: " + kLock +
                                  "}\nresource: {kind: store}\njob: {key: ledger, segments: 2, chunks: 2}\n"
                                  "workers: [{id: w1, command: [/bin/true]}, {id: w2, command: [/bin/true]}]\n"
                                  "expect: {outcome: safe}\n",
                              "none.yaml");
  const CheckContext ctx = CheckContext::of(s);
  EXPECT_EQ(ctx.lock_service_kind, "none");
  return analyze(h, r.rb, ctx);
}

}  // namespace

TEST(LockServiceNone, TheIssuersCheckersAreUnknownWhereTheyWouldSayValid) {
  const StoryRun r = fenced_run();
  // With the issuer's history (etcd): both judge, valid.
  Scenario etcd = scenario("expect: {outcome: safe}\n", "{key: ledger, segments: 2, chunks: 2}");
  const Analysis with_issuer = analyze(r.b.h, r.rb, CheckContext::of(etcd));
  EXPECT_EQ(result(with_issuer, "foreign-release").verdict, Verdict::kValid);
  EXPECT_EQ(result(with_issuer, "token-regression").verdict, Verdict::kValid);

  const Analysis a = analyze_without_issuer(r);
  for (const char* name : {"foreign-release", "token-regression"}) {
    const CheckerResult& c = result(a, name);
    EXPECT_EQ(c.verdict, Verdict::kUnknown) << name;
    EXPECT_EQ(c.error, "the scenario's lock service is kind none: no issuer history") << name;
    EXPECT_THAT(c.evidence, Not(Contains(std::string(kEvidenceLockService)))) << name;
  }
  // The rest judge from the workers and the resource.
  for (const char* name : {"interleaved-segment", "stale-write-accepted", "lost-acknowledged-write", "corrupt-chunk"})
    EXPECT_EQ(result(a, name).verdict, Verdict::kValid) << name;
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
}

TEST(LockServiceNone, AnAnomalyTheWorkersAndTheResourceProveStaysInvalid) {
  const Analysis a = analyze_without_issuer(unfenced_run());
  EXPECT_EQ(result(a, "stale-write-accepted").verdict, Verdict::kInvalid);
  EXPECT_EQ(result(a, "interleaved-segment").verdict, Verdict::kInvalid);
  EXPECT_EQ(a.verdict, Verdict::kInvalid);
}
