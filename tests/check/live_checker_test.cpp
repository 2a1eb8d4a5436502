// LiveChecker (live_checker.h): the anomalies found while a run goes are the checkers' own, never
// a false alarm, found at the event that proves them; on every case of the checkers' golden record
// and on histories built to show each rule.
#include "fencecheck/harness/live_checker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "../harness/history_builder.h"
#include "fencecheck/harness/analysis.h"
#include "golden_cases.h"

namespace fh = fencecheck::harness;
using fencecheck::EventKind;
using fencecheck::ReadBack;

namespace {

/// The checkers' anomaly that `live` stands for: same name and key, the event that proved it among
/// the anomaly's evidence, and its stale (or regressed) token among the anomaly's tokens.
const fh::Anomaly* final_match(const fh::LiveAnomaly& live, const fh::Analysis& analysis) {
  for (const auto& checker : analysis.checkers)
    for (const auto& a : checker.anomalies)
      if (a.name == live.anomaly.name && a.key == live.anomaly.key &&
          std::binary_search(a.evidence.begin(), a.evidence.end(), live.found_at) &&
          std::includes(a.tokens.begin(), a.tokens.end(), live.anomaly.tokens.begin(), live.anomaly.tokens.begin() + 1))
        return &a;
  return nullptr;
}

std::map<std::string, std::int64_t> final_counts(const fh::Analysis& analysis) {
  std::map<std::string, std::int64_t> n;
  for (const auto& checker : analysis.checkers)
    for (const auto& a : checker.anomalies) ++n[a.name];
  return n;
}

fencecheck::Event ev(std::string source, EventKind kind, std::int64_t t_ns) {
  fencecheck::Event e;
  e.source = std::move(source);
  e.kind = kind;
  e.t_ns = t_ns;
  e.src_ns = t_ns;
  return e;
}

fencecheck::Event write_event(std::string source, EventKind kind, std::int64_t t_ns, std::int64_t token, std::int64_t chunk) {
  fencecheck::Event e = ev(std::move(source), kind, t_ns);
  e.key = "ledger";
  e.token = token;
  e.segment = 0;
  e.chunk = chunk;
  return e;
}

}  // namespace

// Every live anomaly on every case of the golden record (the report fixtures, the fuzz corpus, the
// synthetic stories and 292 seeded corruptions) is one the checkers report on the whole history,
// and per anomaly name the live count never exceeds the checkers'.
TEST(LiveChecker, EveryAnomalyItFindsTheCheckersFindOnEveryGoldenCase) {
  std::size_t judged = 0, found = 0, cases_with_live = 0;
  for (const auto& c : fencecheck::golden::all_cases()) {
    auto loaded = fencecheck::golden::load_case(c);
    if (std::holds_alternative<nlohmann::json>(loaded)) continue;  // the record's load errors
    const auto& l = std::get<fencecheck::golden::LoadedCase>(loaded);
    ++judged;
    const fh::Analysis analysis = fh::analyze(l.history, l.readback, l.context);
    const auto live = fh::live_anomalies(l.history, l.context);
    if (!live.empty()) ++cases_with_live;
    std::map<std::string, std::int64_t> live_counts;
    for (const auto& a : live) {
      ++found;
      ++live_counts[a.anomaly.name];
      EXPECT_NE(final_match(a, analysis), nullptr)
          << c.name << ": live " << a.anomaly.name << " at event " << a.found_at << " is not among the checkers' anomalies: "
          << a.anomaly.description;
      EXPECT_TRUE(std::binary_search(a.anomaly.evidence.begin(), a.anomaly.evidence.end(), a.found_at)) << c.name;
      EXPECT_EQ(a.anomaly.evidence.back(), a.found_at) << c.name << ": evidence after the event that proved it";
    }
    const auto finals = final_counts(analysis);
    for (const auto& [name, n] : live_counts) {
      const auto f = finals.find(name);
      EXPECT_LE(n, f == finals.end() ? 0 : f->second) << c.name << ": " << name;
    }
  }
  // The record's shape (tests/check/golden/checkers.jsonl): 454 cases, 62 load errors; live
  // anomalies in many of them, so the comparison above is not vacuous.
  std::cout << judged << " cases judged, " << cases_with_live << " with live anomalies, " << found << " live anomalies\n";
  EXPECT_EQ(judged, 392u);
  EXPECT_GE(cases_with_live, 40u);
  EXPECT_GE(found, 60u);
}

// The unfenced story (history_builder.h): w1 resumes after its lease expired and writes with token
// 33 after w2 wrote with 34; the store (unfenced) accepts it and its reply says the mark is 34: the
// stale write is found at that write.ok, the first of w1's late writes.
TEST(LiveChecker, FindsTheStaleWriteOfTheUnfencedStoryAtItsAcknowledgement) {
  const auto run = fh::unfenced_run();
  const auto live = fh::live_anomalies(run.b.h, fh::CheckContext{});
  ASSERT_FALSE(live.empty());
  const auto& a = live.front();
  EXPECT_EQ(a.anomaly.name, "stale-write-accepted");
  EXPECT_EQ(a.anomaly.key, "ledger");
  EXPECT_EQ(a.found_at, run.w1_late);
  EXPECT_EQ(run.b.h[a.found_at].kind, EventKind::kWriteOk);
  EXPECT_EQ(a.anomaly.tokens, (std::vector<std::int64_t>{33, 34}));
  EXPECT_EQ(a.anomaly.clients, (std::vector<std::string>{"w1"}));
  EXPECT_EQ(live.size(), 1u) << "w1's later stale writes (same token) are the same anomaly";
  // Nothing in the fenced story: the stale write there is rejected.
  EXPECT_TRUE(fh::live_anomalies(fh::fenced_run().b.h, fh::CheckContext{}).empty());
}

// Real-time order decides, not receive order: w2's write.ok with token 2 is received before w1's
// write.invoke with token 1, but happened after it (the senders' clocks): not stale. Received the
// other way round in time, it is.
TEST(LiveChecker, AWriteInvokedBeforeTheHigherAcknowledgementHappenedIsNotStale) {
  fh::History h;
  h.push_back(write_event("w2", EventKind::kWriteInvoke, 100, 2, 0));
  h.push_back(write_event("w1", EventKind::kWriteInvoke, 150, 1, 0));
  fencecheck::Event late_ok = write_event("w2", EventKind::kWriteOk, 400, 2, 0);
  late_ok.src_ns = 200;  // happened at 200, after w1's invoke at 150
  h.events.insert(h.events.begin() + 1, late_ok);  // received before w1's invoke
  h.push_back(write_event("w1", EventKind::kWriteOk, 500, 1, 0));
  EXPECT_TRUE(fh::live_anomalies(h, fh::CheckContext{}).empty());

  fh::History stale = h;
  stale.events[1].src_ns = 120;  // w2's acknowledgement happened before w1 sent its write
  const auto live = fh::live_anomalies(stale, fh::CheckContext{});
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].found_at, 3u);
  EXPECT_EQ(live[0].anomaly.evidence, (std::vector<std::size_t>{1, 2, 3}));
  const fh::Analysis analysis = fh::analyze(stale, ReadBack{}, fh::CheckContext{});
  EXPECT_NE(final_match(live[0], analysis), nullptr);
}

// One live anomaly per (key, writer, stale token), as the checker groups them: three stale chunks
// of one holding are one anomaly; a second stale token of the same writer is another.
TEST(LiveChecker, CountsOneStaleWriteAnomalyPerWriterAndToken) {
  fh::History h;
  std::int64_t t = 0;
  auto write = [&](const std::string& w, std::int64_t token, std::int64_t chunk) {
    h.push_back(write_event(w, EventKind::kWriteInvoke, t += 10, token, chunk));
    h.push_back(write_event(w, EventKind::kWriteOk, t += 10, token, chunk));
  };
  write("w2", 5, 0);
  write("w1", 3, 1);
  write("w1", 3, 2);
  write("w1", 3, 3);
  write("w1", 4, 0);
  fh::LiveChecker checker(fh::CheckContext{});
  std::vector<fh::LiveAnomaly> all;
  for (std::size_t i = 0; i < h.size(); ++i)
    for (auto& a : checker.observe(i, h[i])) all.push_back(std::move(a));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].anomaly.tokens, (std::vector<std::int64_t>{3, 5}));
  EXPECT_EQ(all[1].anomaly.tokens, (std::vector<std::int64_t>{4, 5}));
  EXPECT_EQ(checker.total(), 2);
  EXPECT_EQ(checker.counts().at("stale-write-accepted"), 2);
  const fh::Analysis analysis = fh::analyze(h, ReadBack{}, fh::CheckContext{});
  EXPECT_EQ(final_counts(analysis).at("stale-write-accepted"), 2);
}

// The resource's own reply: accepted, with a high-water mark above the token.
TEST(LiveChecker, AnAcknowledgementCarryingAHigherMarkIsAStaleWrite) {
  fh::History h;
  h.push_back(write_event("w1", EventKind::kWriteInvoke, 10, 3, 0));
  fencecheck::Event ok = write_event("w1", EventKind::kWriteOk, 20, 3, 0);
  ok.high_water = 7;
  h.push_back(ok);
  const auto live = fh::live_anomalies(h, fh::CheckContext{});
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].anomaly.name, "stale-write-accepted");
  EXPECT_EQ(live[0].anomaly.tokens, (std::vector<std::int64_t>{3, 7}));
  EXPECT_EQ(live[0].found_at, 1u);
}

// token-regression from the lock service's own grants: a replay of a grant is not a grant; a
// lower token, or the same token on another key, is; another lock's keys do not count.
TEST(LiveChecker, AGrantBelowAnEarlierGrantIsATokenRegression) {
  fh::History h;
  auto grant = [&](const std::string& key, std::int64_t token) {
    fencecheck::Event g = ev("lock", EventKind::kLockGrant, static_cast<std::int64_t>(h.size() + 1) * 10);
    g.lock_key = key;
    g.token = token;
    h.push_back(g);
  };
  grant("fencecheck/s/a", 10);
  grant("fencecheck/s/a", 10);   // replay
  grant("other/b", 3);           // another lock
  grant("fencecheck/s/b", 10);   // same token, another key: counted
  grant("fencecheck/s/c", 4);    // lower: counted
  grant("fencecheck/s/d", 11);
  fh::CheckContext context;
  context.lock = "fencecheck/s";
  const auto live = fh::live_anomalies(h, context);
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live[0].found_at, 3u);
  EXPECT_EQ(live[0].anomaly.evidence, (std::vector<std::size_t>{0, 3}));
  EXPECT_EQ(live[1].found_at, 4u);
  EXPECT_EQ(live[1].anomaly.tokens, (std::vector<std::int64_t>{4, 10}));
  const fh::Analysis analysis = fh::analyze(h, ReadBack{}, context);
  for (const auto& a : live) EXPECT_NE(final_match(a, analysis), nullptr) << a.anomaly.description;
}

// Its memory is bounded: past kFrontierLimit grants the oldest are dropped, and a grant at or below
// the highest dropped token is not judged (it may be a replay of one it no longer knows): a replay
// of the very first grant after 5,000 others is no false alarm, while a new grant below the latest
// one, above the dropped ones, still is one.
TEST(LiveChecker, ForgetsOldGrantsWithoutCallingTheirReplaysRegressions) {
  fh::LiveChecker checker(fh::CheckContext{});
  std::size_t i = 0;
  auto grant = [&](const std::string& key, std::int64_t token) {
    fencecheck::Event g = ev("lock", EventKind::kLockGrant, static_cast<std::int64_t>(i + 1) * 10);
    g.lock_key = key;
    g.token = token;
    return checker.observe(i++, g);
  };
  for (std::int64_t t = 1; t <= 5000; ++t) ASSERT_TRUE(grant("l/" + std::to_string(t), t).empty()) << t;
  EXPECT_TRUE(grant("l/1", 1).empty()) << "a replay of a dropped grant";
  EXPECT_TRUE(grant("l/4999", 4999).empty()) << "a replay of a kept grant";
  const auto regressed = grant("l/new", 4990);  // new, below 5000, above every dropped token (<= 904)
  ASSERT_EQ(regressed.size(), 1u);
  EXPECT_EQ(regressed[0].anomaly.tokens, (std::vector<std::int64_t>{4990, 5000}));
  EXPECT_EQ(checker.total(), 1);
}

// token-regression from the workers' acquire.oks: w2 asked after w1 had been granted 8 and was
// granted 5.
TEST(LiveChecker, AnAcquireAfterAHigherGrantIsATokenRegression) {
  fh::History h;
  auto acquire = [&](const std::string& w, EventKind kind, std::int64_t token) {
    fencecheck::Event e = ev(w, kind, static_cast<std::int64_t>(h.size() + 1) * 10);
    if (kind == EventKind::kAcquireOk) e.token = token;
    h.push_back(e);
  };
  acquire("w1", EventKind::kAcquireInvoke, 0);
  acquire("w1", EventKind::kAcquireOk, 8);
  acquire("w2", EventKind::kAcquireInvoke, 0);
  acquire("w2", EventKind::kAcquireOk, 5);
  const auto live = fh::live_anomalies(h, fh::CheckContext{});
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].anomaly.name, "token-regression");
  EXPECT_EQ(live[0].anomaly.evidence, (std::vector<std::size_t>{1, 2, 3}));
  EXPECT_EQ(live[0].anomaly.clients, (std::vector<std::string>{"w1", "w2"}));
  const fh::Analysis analysis = fh::analyze(h, ReadBack{}, fh::CheckContext{});
  EXPECT_NE(final_match(live[0], analysis), nullptr);
}

// The line written to anomalies.live.jsonl.
TEST(LiveChecker, ItsJsonLineNamesTheAnomalyAndItsEvidence) {
  fh::LiveAnomaly a;
  a.anomaly.name = "stale-write-accepted";
  a.anomaly.key = "ledger";
  a.anomaly.segment = 0;
  a.anomaly.tokens = {1, 2};
  a.anomaly.clients = {"w1", "w2"};
  a.anomaly.evidence = {4, 7, 9};
  a.anomaly.description = "ledger: ...";
  a.found_at = 9;
  const auto j = nlohmann::json::parse(fh::live_anomaly_json_line(a, 5123));
  EXPECT_EQ(j["anomaly"], "stale-write-accepted");
  EXPECT_EQ(j["found_at"], 9);
  EXPECT_EQ(j["t_ms"], 5123);
  EXPECT_EQ(j["key"], "ledger");
  EXPECT_EQ(j["segment"], 0);
  EXPECT_EQ(j["tokens"], nlohmann::json({1, 2}));
  EXPECT_EQ(j["clients"], nlohmann::json({"w1", "w2"}));
  EXPECT_EQ(j["evidence"], nlohmann::json({4, 7, 9}));
  EXPECT_EQ(j["description"], "ledger: ...");
}
