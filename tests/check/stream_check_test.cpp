// The streamed rules (stream_check.h): check_history_file(), reading history.jsonl(.zst) one event
// at a time, gives what run_checkers() gives on the loaded history for the same checkers, on every
// case of the checkers' golden record; the rules' state stays bounded on a long history while an
// old invoke they must still see is kept; the driver's errors.
#include "fencecheck/harness/stream_check.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "../harness/history_builder.h"
#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/checkers.h"
#include "fencecheck/harness/expectation.h"
#include "fencecheck/harness/verdict_json.h"
#include "golden_cases.h"

namespace fh = fencecheck::harness;
namespace fs = std::filesystem;
using fencecheck::Event;
using fencecheck::EventKind;
using fencecheck::ReadBack;

namespace {

fs::path write_file(const std::string& name, const std::string& text) {
  const fs::path p = fencecheck::golden::scratch_dir() / name;
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  return p;
}

fs::path write_history(const std::string& name, const fh::History& h) {
  std::string text;
  for (const Event& e : h) text += fencecheck::to_json_line(e) + "\n";
  return write_file(name, text);
}

/// The default checkers that are streamed, in their order.
fh::Checkers streamed_checkers() {
  fh::Checkers out;
  const auto names = fh::stream_rule_names();
  for (auto& c : fh::default_checkers())
    if (std::find(names.begin(), names.end(), c->name()) != names.end()) out.push_back(std::move(c));
  return out;
}

/// Every field of two results, the first difference named; "" when they agree.
std::string difference(const fh::CheckerResult& a, const fh::CheckerResult& b) {
  if (a.name != b.name) return "name " + a.name + " / " + b.name;
  if (a.verdict != b.verdict) return a.name + ": verdict " + std::string(fh::verdict_name(a.verdict)) + " / " +
                                     std::string(fh::verdict_name(b.verdict));
  if (a.error != b.error) return a.name + ": error \"" + a.error + "\" / \"" + b.error + "\"";
  if (a.evidence != b.evidence) return a.name + ": evidence sources differ";
  if (a.anomalies.size() != b.anomalies.size())
    return a.name + ": " + std::to_string(a.anomalies.size()) + " anomalies / " + std::to_string(b.anomalies.size());
  for (std::size_t i = 0; i < a.anomalies.size(); ++i) {
    const fh::Anomaly& x = a.anomalies[i];
    const fh::Anomaly& y = b.anomalies[i];
    const std::string at = a.name + " anomaly " + std::to_string(i) + ": ";
    if (x.name != y.name) return at + "name";
    if (x.description != y.description) return at + "description \"" + x.description + "\" / \"" + y.description + "\"";
    if (x.key != y.key || x.segment != y.segment) return at + "key or segment";
    if (x.tokens != y.tokens) return at + "tokens";
    if (x.clients != y.clients) return at + "clients";
    if (x.evidence != y.evidence) return at + "evidence";
    if (x.readback_seqs != y.readback_seqs) return at + "readback_seqs";
  }
  return "";
}

TEST(StreamCheck, EveryStreamedRuleGivesRunCheckersResultOnEveryGoldenCase) {
  const fh::Checkers checkers = streamed_checkers();
  ASSERT_EQ(checkers.size(), fh::stream_rule_names().size());
  std::size_t judged = 0, anomalies = 0, invalid = 0, two_passes = 0;
  std::set<std::string> names_with_anomalies;
  for (const auto& c : fencecheck::golden::all_cases()) {
    auto loaded = fencecheck::golden::load_case(c);
    if (!std::holds_alternative<fencecheck::golden::LoadedCase>(loaded)) continue;  // a load error: nothing to check
    const auto& l = std::get<fencecheck::golden::LoadedCase>(loaded);
    const fs::path file = write_file("history.jsonl", c.history);
    const fh::CheckRun memory = fh::run_checkers(checkers, l.history, l.readback, l.context);
    const fh::StreamCheckRun streamed = fh::check_history_file(file, l.readback, l.context);
    ++judged;
    if (streamed.passes > 1) ++two_passes;
    EXPECT_EQ(streamed.events, l.history.size()) << c.name;
    EXPECT_EQ(streamed.run.verdict, memory.verdict) << c.name;
    EXPECT_EQ(streamed.run.black_box_workers, memory.black_box_workers) << c.name;
    ASSERT_EQ(streamed.run.results.size(), memory.results.size()) << c.name;
    for (std::size_t i = 0; i < memory.results.size(); ++i) {
      EXPECT_EQ(difference(streamed.run.results[i], memory.results[i]), "") << c.name;
      anomalies += memory.results[i].anomalies.size();
      if (!memory.results[i].anomalies.empty()) names_with_anomalies.insert(memory.results[i].name);
    }
    if (memory.verdict == fh::Verdict::kInvalid) ++invalid;
  }
  // The record is not trivial for these rules: many cases, and each rule finds something somewhere.
  EXPECT_GT(judged, 200u);
  EXPECT_GT(invalid, 10u);
  EXPECT_GT(anomalies, 20u);
  EXPECT_EQ(names_with_anomalies.size(), checkers.size());
  std::cout << "streamed " << judged << " golden cases, " << anomalies << " anomalies of "
            << names_with_anomalies.size() << " streamed rules; " << two_passes << " read twice\n";
}

TEST(StreamCheck, ReadsACompressedHistoryTheSameWay) {
  fh::Builder b;
  b.run_start();
  b.add(fh::Builder::ev("w1", EventKind::kAcquireInvoke));
  b.acquire_ok("w1", fh::kKey1, 33, 7001);
  b.add(fh::Builder::ev("w2", EventKind::kAcquireInvoke));
  b.acquire_ok("w2", fh::kKey2, 30, 7002);  // below w1's 33, which completed before w2 asked
  const fs::path plain = write_history("regression.jsonl", b.h);
  fh::CheckContext ctx;
  ctx.lock = fh::kLock;
  const fh::StreamCheckRun p = fh::check_history_file(plain, ReadBack{}, ctx, {"token-regression"});
  ASSERT_EQ(p.run.results.size(), 1u);
  ASSERT_EQ(p.run.results[0].anomalies.size(), 1u);
  EXPECT_EQ(p.run.results[0].anomalies[0].evidence, (std::vector<std::size_t>{2, 3, 4}));
  const fh::CompressedHistory z = fh::compress_history(plain);
  ASSERT_TRUE(fs::exists(z.path));
  const fh::StreamCheckRun q = fh::check_history_file(z.path, ReadBack{}, ctx, {"token-regression"});
  EXPECT_EQ(difference(q.run.results[0], p.run.results[0]), "");
  EXPECT_EQ(q.events, 5u);
}

TEST(StreamCheck, ABadLineIsNamedByFileAndLine) {
  const fs::path p = write_file("bad.jsonl", "{\"kind\":\"run.start\",\"t_ns\":1,\"source\":\"harness\"}\n\n{\"kind\":\"write.maybe\"}\n");
  try {
    (void)fh::check_history_file(p, ReadBack{}, fh::CheckContext{});
    FAIL() << "no error";
  } catch (const fh::HistoryError& e) {
    EXPECT_EQ(e.line(), 3u);
    EXPECT_NE(std::string(e.what()).find("bad.jsonl"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)fh::check_history_file(p, ReadBack{}, fh::CheckContext{}, {"fenced-out-or-not"}), std::invalid_argument);
}

TEST(StreamCheck, AnUnavailableSourceIsNotCheckedAsRunCheckersSays) {
  fh::Builder b;
  b.run_start();
  fh::CheckContext ctx;
  ctx.evidence = fencecheck::resources::Evidence{false, false, false, false, false};  // a resource that gives nothing
  ctx.resource_kind = "http";
  const fs::path p = write_history("nothing.jsonl", b.h);
  const fh::StreamCheckRun s = fh::check_history_file(p, ReadBack{}, ctx, {"interleaved-segment"});
  ASSERT_EQ(s.run.results.size(), 1u);
  EXPECT_EQ(s.run.results[0].verdict, fh::Verdict::kUnknown);
  EXPECT_EQ(s.run.results[0].error, "needs resource.chunks, which resource kind http does not give as configured: not checked");
}

/// A steady run: `holders` workers take turns on one lock, each holding acquiring the next token.
void steady_acquires(fh::StreamRule& rule, std::size_t& index, std::int64_t& token, int rounds, int holders) {
  for (int r = 0; r < rounds; ++r)
    for (int w = 0; w < holders; ++w) {
      Event invoke = fh::Builder::ev("w" + std::to_string(w), EventKind::kAcquireInvoke);
      rule.observe(index++, invoke);
      Event ok = fh::Builder::ev("w" + std::to_string(w), EventKind::kAcquireOk);
      ok.lock = fh::kLock;
      ok.token = ++token;
      rule.observe(index++, ok);
    }
}

TEST(StreamTokenRegression, StateStaysFlatOverALongSteadyRunYetKeepsAnOldInvoke) {
  const ReadBack rb;
  fh::CheckContext ctx;
  ctx.lock = fh::kLock;
  auto rule = fh::make_stream_rule("token-regression");
  ASSERT_NE(rule, nullptr);
  const fh::PackedLog log;
  rule->begin(rb, log, ctx);
  std::size_t index = 0;
  std::int64_t token = 0;
  // w9 takes token 1000, then "late" asks while w9's token is the top...
  Event ok = fh::Builder::ev("w9", EventKind::kAcquireOk);
  ok.lock = fh::kLock;
  ok.token = 1000;
  const std::size_t top = index;
  rule->observe(index++, ok);
  const std::size_t invoke = index;
  rule->observe(index++, fh::Builder::ev("late", EventKind::kAcquireInvoke));
  token = 1000;
  // ... and is paused while 4 holders take 200,000 tokens.
  steady_acquires(*rule, index, token, 2'500, 4);
  const std::size_t early = rule->state_bytes();
  steady_acquires(*rule, index, token, 47'500, 4);
  const std::size_t later = rule->state_bytes();
  EXPECT_LT(later, early + 4096) << "state grew from " << early << " to " << later << " bytes";
  // "late" resumes with a token below w9's, which completed before it asked: still found.
  Event stale = fh::Builder::ev("late", EventKind::kAcquireOk);
  stale.lock = fh::kLock;
  stale.token = 999;
  const std::size_t x = index;
  rule->observe(index++, stale);
  const fh::CheckerResult r = rule->finish(fh::StreamEnd{index, {}});
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{top, invoke, x}));
  EXPECT_EQ(r.anomalies[0].tokens, (std::vector<std::int64_t>{999, 1000}));
}

TEST(StreamTokenRegression, WithoutPrunedRaisesAnOldInvokeStillSeesItsTop) {
  // The same shape through run_stream_rule on an in-memory history, compared with a history in
  // which nothing could have been pruned (the holders' turns removed): the same anomaly.
  auto story = [](int rounds) {
    fh::Builder b;
    b.add(fh::Builder::ev("w1", EventKind::kAcquireInvoke));
    b.acquire_ok("w1", fh::kKey1, 50, 1);
    b.add(fh::Builder::ev("late", EventKind::kAcquireInvoke));
    std::int64_t token = 50;
    for (int r = 0; r < rounds; ++r) {
      b.add(fh::Builder::ev("w2", EventKind::kAcquireInvoke));
      b.acquire_ok("w2", fh::kKey2, ++token, 2);
    }
    b.acquire_ok("late", fh::kKey1, 40, 3);
    return b.h;
  };
  fh::CheckContext ctx;
  ctx.lock = fh::kLock;
  for (int rounds : {0, 1, 10'000}) {
    const fh::History h = story(rounds);
    auto rule = fh::make_stream_rule("token-regression");
    const fh::CheckerResult r = fh::run_stream_rule(*rule, h, ReadBack{}, ctx);
    ASSERT_EQ(r.anomalies.size(), 1u) << rounds;
    EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{1, 2, h.size() - 1})) << rounds;
  }
}

/// A streamed rule with the packed log it was begun with (which must outlive it).
struct BegunRule {
  std::unique_ptr<fh::PackedLog> log;
  std::unique_ptr<fh::StreamRule> rule;
  fh::StreamRule* operator->() const { return rule.get(); }
  fh::StreamRule& operator*() const { return *rule; }
  friend bool operator==(const BegunRule& b, std::nullptr_t) { return b.rule == nullptr; }
};

/// The streamed rule `name`, begun with `rb` (its log packed) and `ctx` (which must outlive it).
BegunRule begun(std::string_view name, const ReadBack& rb, const fh::CheckContext& ctx) {
  BegunRule out{std::make_unique<fh::PackedLog>(rb.log), fh::make_stream_rule(name)};
  if (out.rule) out.rule->begin(rb, *out.log, ctx);
  return out;
}

/// A write.ok of `w` with `token` on `key` (no chunk unless given).
Event write_ok_event(const std::string& w, std::int64_t token, const std::string& key,
                     std::optional<std::int64_t> segment = std::nullopt, const std::string& detail = "") {
  Event e = fh::Builder::ev(w, EventKind::kWriteOk);
  e.key = key;
  e.token = token;
  e.segment = segment;
  e.detail = detail;
  return e;
}

TEST(StreamTokenRegression, GrantsCostAFingerprintEachAndAReplayIsJudgedExactlyInASecondPass) {
  // 20,000 grants, etcd-style (a fresh key per lease, tokens rising): each keeps an 8-byte
  // fingerprint, not its key. Then the watch replays grant 10 (not a grant, not a regression) and
  // a reset issuer grants token 3 on a new key (a regression). The replay makes the rule judge the
  // grants again in a second pass, with the exact (key, token) of the fingerprints seen twice.
  fh::CheckContext ctx;
  ctx.lock = fh::kLock;
  const ReadBack rb;
  auto key_of = [](int g) { return std::string(fh::kLock) + "/694d8a17f2e" + std::to_string(100000 + g); };
  fh::Builder b;
  for (int g = 1; g <= 2'000; ++g) b.lock_grant(key_of(g), g, 1000 + g);
  auto rule = begun("token-regression", rb, ctx);
  std::size_t fed = 0;
  auto feed = [&] {
    for (; fed < b.h.size(); ++fed) rule->observe(fed, b.h[fed]);
  };
  feed();
  const std::size_t early = rule->state_bytes();
  for (int g = 2'001; g <= 20'000; ++g) b.lock_grant(key_of(g), g, 1000 + g);
  feed();
  const std::size_t per_grant = (rule->state_bytes() - early) / 18'000;
  std::cout << "token-regression: " << per_grant << " bytes per grant\n";
  EXPECT_LE(per_grant, 24u);  // was about 100 with the keys' strings
  const std::size_t top = b.h.size() - 1;
  b.lock_grant(key_of(10), 10, 1010);  // the replay
  const std::size_t reset = b.lock_grant(key_of(0), 3, 999);
  feed();
  ASSERT_TRUE(rule->wants_another_pass());
  rule->begin_pass(2);
  for (std::size_t i = 0; i < b.h.size(); ++i) rule->observe(i, b.h[i]);
  EXPECT_FALSE(rule->wants_another_pass());
  const fh::CheckerResult r = rule->finish(fh::StreamEnd{b.h.size(), {}});
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{top, reset}));
  EXPECT_EQ(r.anomalies[0].tokens, (std::vector<std::int64_t>{3, 20'000}));
  // Without the replay, one pass, the same anomaly.
  fh::Builder c;
  for (int g = 1; g <= 20'000; ++g) c.lock_grant(key_of(g), g, 1000 + g);
  c.lock_grant(key_of(0), 3, 999);
  auto once = begun("token-regression", rb, ctx);
  for (std::size_t i = 0; i < c.h.size(); ++i) once->observe(i, c.h[i]);
  EXPECT_FALSE(once->wants_another_pass());
  const fh::CheckerResult r1 = once->finish(fh::StreamEnd{c.h.size(), {}});
  ASSERT_EQ(r1.anomalies.size(), 1u);
  EXPECT_EQ(r1.anomalies[0].description, r.anomalies[0].description);
}

TEST(StreamDuplicateEffect, StateStaysFlatOverALongRunAndALateWriteOkIsStillCited) {
  // One effect applied twice (the second with a token not above the first), among many applied once.
  ReadBack rb;
  rb.effects.push_back({"ledger", "w1:seg2", 40, "w1", 1, true, "unfenced"});
  rb.effects.push_back({"ledger", "w2:seg2", 39, "w2", 2, true, "unfenced"});
  for (int k = 0; k < 50; ++k) rb.effects.push_back({"ledger", "seg" + std::to_string(100 + k), 41 + k, "w1", 3 + k, true, "unfenced"});
  fh::CheckContext ctx;
  ctx.job_kind = fh::JobKind::kSideEffect;
  auto rule = begun("duplicate-effect", rb, ctx);
  ASSERT_NE(rule, nullptr);
  std::size_t index = 0;
  const std::size_t first = index;
  rule->observe(index++, write_ok_event("w1", 40, "ledger.effect", 2));
  rule->observe(index++, write_ok_event("w1", 40, "ledger.effect", 3));  // another segment: not this effect
  auto steady = [&](int rounds) {
    for (int r = 0; r < rounds; ++r)
      for (int w = 0; w < 4; ++w) {
        rule->observe(index++, fh::Builder::ev("w" + std::to_string(w), EventKind::kWriteInvoke));
        rule->observe(index++, write_ok_event("w" + std::to_string(w), 1000 + r, r % 2 ? "ledger.effect" : "ledger", r % 7));
      }
  };
  steady(2'500);
  const std::size_t early = rule->state_bytes();
  steady(25'000);
  const std::size_t later = rule->state_bytes();
  EXPECT_EQ(later, early) << "state grew from " << early << " to " << later << " bytes";
  const std::size_t late = index;
  rule->observe(index++, write_ok_event("w2", 39, "ledger", 2));  // w2's write.ok, long after
  const fh::CheckerResult r = rule->finish(fh::StreamEnd{index, {}});
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{first, late}));
  EXPECT_EQ(r.anomalies[0].segment, 2);
}

TEST(StreamCounterDrift, KeepsAFewBytesPerIncrementAndCitesALateDuplicateWithItsFirstWriter) {
  // Holders take turns on one counter, each incrementing it 10 times with its own token; one
  // increment is lost (the counter is one short) and two holders wrote "-> 7".
  constexpr int kIncrements = 120'000;
  ReadBack rb;
  rb.counters["hits"] = kIncrements - 1;
  fh::CheckContext ctx;
  ctx.job_kind = fh::JobKind::kCounter;
  auto rule = begun("counter-drift", rb, ctx);
  ASSERT_NE(rule, nullptr);
  std::size_t index = 0;
  std::vector<std::size_t> sevens;
  std::size_t early = 0;
  for (int k = 1; k < kIncrements; ++k) {
    const std::string w = "w" + std::to_string((k / 10) % 4);
    const std::int64_t token = 100 + k / 10;
    Event inv = fh::Builder::ev(w, EventKind::kWriteInvoke);
    inv.key = "hits";
    inv.token = token;
    rule->observe(index++, inv);
    if (k == 7) sevens.push_back(index);
    rule->observe(index++, write_ok_event(w, token, "hits", std::nullopt, "hits 6 -> " + std::to_string(k)));
    if (k == 10'000) early = rule->state_bytes();
  }
  const std::size_t later = rule->state_bytes();
  // The log of the increments is the rule's only growth: a few bytes per increment (2 here) and
  // per holding (24 for each change of client and token), doubled at most by the vectors' spare
  // capacity: less than one int64 per increment with 10 increments per holding.
  const std::size_t increments = kIncrements - 10'000, holdings = increments / 10;
  EXPECT_LE(later - early, 2 * (3 * increments + 24 * holdings)) << "from " << early << " to " << later << " bytes";
  EXPECT_LE(later - early, 8 * increments);
  std::cout << "counter-drift: " << early << " bytes after 10,000 increments, " << later << " after "
            << kIncrements - 1 << "\n";
  // A paused holder's increment, long after: it wrote 7 again.
  sevens.push_back(index);
  rule->observe(index++, write_ok_event("late", 5, "hits", std::nullopt, "hits 6 -> 7"));
  const fh::CheckerResult r = rule->finish(fh::StreamEnd{index, {}});
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].evidence, sevens);
  EXPECT_EQ(r.anomalies[0].clients, (std::vector<std::string>{"late", "w0"}));
  EXPECT_EQ(r.anomalies[0].tokens, (std::vector<std::int64_t>{5, 100}));
  EXPECT_EQ(r.anomalies[0].description,
            "counter hits is 119999 but 120000 increment(s) were acknowledged: 1 acknowledged increment(s) lost; "
            "holders wrote the same new value twice (7): read-modify-write races");
}

TEST(StreamCounterDrift, WithoutADuplicateCitesEveryWriteOkOfTheKeyDecodedExactly) {
  // Values that jump around (negative, huge, absent) and indices far apart: every write.ok is
  // cited with its own client and token, through the compact log.
  ReadBack rb;
  rb.counters["hits"] = 100;
  fh::CheckContext ctx;
  ctx.job_kind = fh::JobKind::kCounter;
  auto rule = begun("counter-drift", rb, ctx);
  ASSERT_NE(rule, nullptr);
  const std::vector<std::string> details = {"-> 5", "-> -3", "x", "-> 9223372036854775807", "-> -9223372036854775808", "-> 0", ""};
  std::vector<std::size_t> cited;
  std::size_t index = 3;
  for (std::size_t k = 0; k < details.size(); ++k) {
    Event ok = write_ok_event("w" + std::to_string(k % 3), 10 + static_cast<std::int64_t>(k / 2), "hits", std::nullopt, details[k]);
    if (k == 4) ok.token.reset();
    cited.push_back(index);
    rule->observe(index, ok);
    index += 1 + k * 1'000'003;
    rule->observe(index++, write_ok_event("w9", 99, "other", std::nullopt, "-> 5"));
  }
  const fh::CheckerResult r = rule->finish(fh::StreamEnd{index, {}});
  ASSERT_EQ(r.anomalies.size(), 2u);
  EXPECT_EQ(r.anomalies[0].key, "hits");
  EXPECT_EQ(r.anomalies[0].evidence, cited);
  EXPECT_EQ(r.anomalies[0].clients, (std::vector<std::string>{"w0", "w1", "w2"}));
  EXPECT_EQ(r.anomalies[0].tokens, (std::vector<std::int64_t>{10, 11, 12, 13}));
  EXPECT_EQ(r.anomalies[1].key, "other");
  EXPECT_EQ(r.anomalies[1].evidence.size(), details.size());
}

/// A fenced write.fail of `w` with `token` against `mark` on `key`.
Event fenced_fail(const std::string& w, std::int64_t token, std::int64_t mark, const std::string& key = fh::kLedgerKey) {
  Event e = fh::Builder::ev(w, EventKind::kWriteFail);
  e.key = key;
  e.token = token;
  e.high_water = mark;
  return e;
}

Event write_invoke(const std::string& w, std::int64_t token, const std::string& key = fh::kLedgerKey) {
  Event e = fh::Builder::ev(w, EventKind::kWriteInvoke);
  e.key = key;
  e.token = token;
  return e;
}

TEST(StreamRejectionStorm, StateGrowsOnlyAFewBytesPerHoldingAndAnOldTokenStillFindsItsInvoke) {
  // Holders take turns: each holding writes 4 times with a new token and has one write fenced
  // (then it re-acquires, as it must): no storm, but each holding leaves its fail and its counts,
  // which a later fail of that token would make a storm. The invokes a storm's fails cite are
  // found by a second pass, only when there is a storm.
  fh::CheckContext ctx;
  const ReadBack rb;
  auto rule = begun("rejection-storm", rb, ctx);
  ASSERT_NE(rule, nullptr);
  std::vector<Event> events;
  auto feed = [&](Event e) {
    rule->observe(events.size(), e);
    events.push_back(std::move(e));
  };
  const std::size_t old_invoke = events.size();
  feed(write_invoke("w0", 7));
  const std::size_t old_fail = events.size();
  feed(fenced_fail("w0", 7, 8));
  std::int64_t token = 100;
  auto holdings = [&](int n) {
    for (int h = 0; h < n; ++h) {
      const std::string w = "w" + std::to_string(h % 4);
      ++token;
      for (int k = 0; k < 4; ++k) {
        feed(write_invoke(w, token));
        feed(write_ok_event(w, token, fh::kLedgerKey, 0));
      }
      feed(write_invoke(w, token));
      feed(fenced_fail(w, token, token + 1));
    }
  };
  holdings(2'000);
  const std::size_t early = rule->state_bytes();
  holdings(10'000);
  const std::size_t later = rule->state_bytes();
  const std::size_t per_holding = (later - early) / 10'000;
  std::cout << "rejection-storm: " << early << " bytes after 2,000 holdings, " << later << " after 12,000 ("
            << per_holding << " bytes per holding, " << events.size() << " events)\n";
  EXPECT_LE(per_holding, 120u);  // 95 measured (a 40-byte fail and its counts; capacity included); 124 with the invokes
  {  // no storm: one pass
    auto clean = begun("rejection-storm", rb, ctx);
    for (std::size_t i = 0; i < events.size(); ++i) clean->observe(i, events[i]);
    EXPECT_FALSE(clean->wants_another_pass());
    EXPECT_TRUE(clean->finish(fh::StreamEnd{events.size(), {}}).anomalies.empty());
  }
  // w0 goes back to token 7 (after 12,000 other tokens): its second fenced fail is a storm, and
  // both fails cite the invoke of token 7, found by the second pass.
  const std::size_t again = events.size();
  feed(fenced_fail("w0", 7, 9));
  ASSERT_TRUE(rule->wants_another_pass());
  rule->begin_pass(2);
  for (std::size_t i = 0; i < events.size(); ++i) rule->observe(i, events[i]);
  EXPECT_LE(rule->state_bytes(), later + 1024);
  EXPECT_FALSE(rule->wants_another_pass());
  const fh::CheckerResult r = rule->finish(fh::StreamEnd{events.size(), {}});
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{old_invoke, old_fail, again}));
  EXPECT_EQ(r.anomalies[0].description,
            "w0 had 2 writes rejected with the same token 7 (2 write.fail event(s), 0 rejection(s) recorded by the "
            "resource; key ledger, high-water 8, 9): after a rejection a holder must stop and re-acquire, never retry "
            "the same token");
}

// ---------------------------------------------------------------------------------------------
// lost-acknowledged-write: what the one-pass rule decides out of order (a write.ok waiting for its
// slot's occupant's acknowledgement, the invoke it answers) gives what the in-memory rule gave.

/// A write.invoke and its write.ok; returns the ok's index.
std::size_t write_pair(fh::Builder& b, const std::string& w, std::int64_t token, std::int64_t segment,
                       std::int64_t chunk) {
  return b.write_ok(w, token, segment, chunk, token);
}

TEST(StreamLostAcknowledgedWrite, WithoutALogTheOccupantsLaterAcknowledgementSettlesAWaitingWrite) {
  fh::Builder b;
  b.run_start();
  const std::size_t w1_invoke = b.write("w1", EventKind::kWriteInvoke, 33, 0, 0);
  b.write("w2", EventKind::kWriteInvoke, 34, 0, 1);
  const std::size_t w2_ok_c1 = b.write("w2", EventKind::kWriteOk, 34, 0, 1, 34);  // occupant of chunk 1, before w3's invoke
  const std::size_t w1_ok = b.write("w1", EventKind::kWriteOk, 33, 0, 0, 33);     // waits: chunk 0's occupant w2 not acknowledged yet
  const std::size_t w3_ok = write_pair(b, "w3", 35, 0, 1);                        // lost: chunk 1's occupant acknowledged before w3's invoke
  write_pair(b, "w2", 34, 0, 0);                                                  // chunk 0's occupant: w1's write superseded
  const std::size_t w4_ok = write_pair(b, "w4", 36, 0, 2);                        // lost: chunk 2 is empty
  ReadBack rb;
  rb.chunks = {fh::stored("w2", 34, 0, 0, 1), fh::stored("w2", 34, 0, 1, 2)};
  const fh::CheckerResult r = fh::LostAcknowledgedWriteChecker{}.check_with(b.h, rb, fh::CheckContext{});
  ASSERT_EQ(r.anomalies.size(), 2u);
  EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{w3_ok - 1, w3_ok}));
  EXPECT_EQ(r.anomalies[0].description,
            "the resource acknowledged ledger segment 0 chunk 1 from w3 (token 35) but no longer shows it and nothing "
            "superseded it: its slot holds token 34 by w2, which was not acknowledged after this write was sent");
  EXPECT_EQ(r.anomalies[1].evidence, (std::vector<std::size_t>{w4_ok - 1, w4_ok}));
  EXPECT_NE(r.anomalies[1].description.find("its slot is empty"), std::string::npos);
  (void)w1_invoke, (void)w2_ok_c1, (void)w1_ok;
  // Without the occupant's late write.ok, w1's write is lost too, and comes first (write.ok order)
  // although it is decided only at the end.
  fh::History cut;
  for (std::size_t i = 0; i < b.h.size(); ++i)
    if (i != w3_ok + 2) cut.add(Event(b.h[i]));
  const fh::CheckerResult r2 = fh::LostAcknowledgedWriteChecker{}.check_with(cut, rb, fh::CheckContext{});
  ASSERT_EQ(r2.anomalies.size(), 3u);
  EXPECT_EQ(r2.anomalies[0].evidence, (std::vector<std::size_t>{w1_invoke, w1_ok}));
  EXPECT_EQ(r2.anomalies[1].evidence, (std::vector<std::size_t>{w3_ok - 1, w3_ok}));
  EXPECT_EQ(r2.anomalies[2].evidence, (std::vector<std::size_t>{w4_ok - 2, w4_ok - 1}));
  // The occupant's writer a black box: its acknowledgements are not in the history, its slot not judged.
  fh::CheckContext silent;
  silent.black_box = std::vector<std::string>{"w2"};
  const fh::CheckerResult r3 = fh::LostAcknowledgedWriteChecker{}.check_with(cut, rb, silent);
  ASSERT_EQ(r3.anomalies.size(), 1u);
  EXPECT_EQ(r3.anomalies[0].evidence, (std::vector<std::size_t>{w4_ok - 2, w4_ok - 1}));
}

TEST(StreamLostAcknowledgedWrite, WithoutALogAnOccupantAcknowledgedWhileTheWriteWasInFlightSupersedesIt) {
  fh::Builder b;
  b.write("w1", EventKind::kWriteInvoke, 33, 0, 0);
  write_pair(b, "w2", 34, 0, 0);                                  // the occupant, acknowledged after w1 sent its write
  const std::size_t ok = b.write("w1", EventKind::kWriteOk, 33, 0, 0, 33);
  ReadBack rb;
  rb.chunks = {fh::stored("w2", 34, 0, 0, 1)};
  EXPECT_EQ(fh::LostAcknowledgedWriteChecker{}.check_with(b.h, rb, fh::CheckContext{}).verdict, fh::Verdict::kValid);
  // Without its invoke, the write is ordered by its write.ok: the occupant's came before it.
  fh::History no_invoke;
  for (std::size_t i = 1; i < b.h.size(); ++i) no_invoke.add(Event(b.h[i]));
  const fh::CheckerResult r = fh::LostAcknowledgedWriteChecker{}.check_with(no_invoke, rb, fh::CheckContext{});
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{ok - 1}));
}

TEST(StreamLostAcknowledgedWrite, TheInvokeIsTheWorkersLatestWithTheTokenWhateverTheKey) {
  fh::Builder b;
  b.write("w1", EventKind::kWriteInvoke, 33, 0, 0);
  b.write("w1", EventKind::kWriteInvoke, 34, 0, 0);                          // another token: not it
  const std::size_t other_key = b.write("w1", EventKind::kWriteInvoke, 33, 5, 5, std::nullopt, "other");
  b.write("w2", EventKind::kWriteInvoke, 33, 0, 0);                          // another worker: not it
  const std::size_t ok = b.write("w1", EventKind::kWriteOk, 33, 0, 0, 33);
  ReadBack rb;
  rb.log = {fh::logged(1, "w1", 33, 0, 0), fh::logged(4, "w1", 33, 0, 0)};  // its latest seq: 4
  rb.chunks = {fh::stored("w9", 30, 0, 0, 3)};                              // an earlier write holds the slot
  const fh::CheckerResult r = fh::LostAcknowledgedWriteChecker{}.check_with(b.h, rb, fh::CheckContext{});
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{other_key, ok}));
  EXPECT_EQ(r.anomalies[0].readback_seqs, (std::vector<std::int64_t>{3, 4}));
  EXPECT_NE(r.anomalies[0].description.find("its slot holds an earlier write (seq 3)"), std::string::npos);
  // From a file: with a log the invoke is found by a second pass, for the lost write alone.
  const fh::StreamCheckRun run = fh::check_history_file(write_history("lost-ack-invoke.jsonl", b.h), rb,
                                                        fh::CheckContext{}, {"lost-acknowledged-write"});
  EXPECT_EQ(run.passes, 2u);
  ASSERT_EQ(run.run.results.size(), 1u);
  ASSERT_EQ(run.run.results[0].anomalies.size(), 1u);
  EXPECT_EQ(run.run.results[0].anomalies[0].evidence, (std::vector<std::size_t>{other_key, ok}));
}

// ---------------------------------------------------------------------------------------------
// fenced-out: what the one-pass rule learns only later (the TTL from the history, black boxes, the
// next write.ok, the last heal) gives what the in-memory rule gave.

std::size_t acquire(fh::Builder& b, const std::string& w, std::int64_t token, std::optional<std::int64_t> ttl_ms = std::nullopt) {
  Event e = fh::Builder::ev(w, EventKind::kAcquireOk);
  e.lock = fh::kLock;
  e.lock_key = fh::kLock + "/" + w;
  e.token = token;
  e.ttl_ms = ttl_ms;
  return b.add(e);
}

/// fenced-out with a 2 s lease TTL and those black-box workers.
fh::CheckerResult fenced_out(const fh::History& h, const std::vector<std::string>& black_box = {}) {
  fh::CheckContext ctx;
  ctx.lease_ttl = std::chrono::seconds(2);
  ctx.black_box = black_box;
  return fh::FencedOutChecker{}.check_with(h, ReadBack{}, ctx);
}

TEST(StreamFencedOut, AStreakUnderAnEarlySmallTtlIsNoneWhenALaterAcquireAsksForMore) {
  for (const bool longer : {false, true}) {
    fh::Builder b;
    acquire(b, "w1", 40, 1000);                          // window 1 s + 2 s
    b.write("w1", EventKind::kWriteFail, 40, 0, 0, 48);  // fresh, rejected
    b.t += 3'499'000'000;
    b.write("w2", EventKind::kWriteOk, 48, 0, 0, 48);  // 3.5 s later
    Event invoke = fh::Builder::ev("w3", EventKind::kAcquireInvoke);
    invoke.ttl_ms = longer ? 5000 : 1000;                // window 7 s: the write.ok came in time
    b.add(invoke);
    const fh::CheckerResult r = fh::FencedOutChecker{}.check_with(b.h, ReadBack{}, fh::CheckContext{});
    EXPECT_EQ(r.verdict, longer ? fh::Verdict::kValid : fh::Verdict::kInvalid) << longer;
  }
}

TEST(StreamFencedOut, TheStreakStartsAtTheFirstFreshRejectionWhoseDeadlineTheNextWriteMisses) {
  for (const bool silent : {false, true}) {
    fh::Builder b;
    acquire(b, "w1", 40);
    const std::size_t own = b.write_ok("w1", 40, 0, 0, 40);
    acquire(b, "w2", 41);
    const std::size_t w3 = acquire(b, "w3", 42);
    b.t = 10'000'000'000;
    const std::size_t a = b.write("w2", EventKind::kWriteFail, 41, 0, 0, 48);  // fresh, t 10 s: deadline 14 s, met
    const std::size_t hit1 = b.write("w1", EventKind::kWriteFail, 40, 0, 1, 40);  // self-fencing, before the streak: counts
    b.t = 5'000'000'000;                                                       // received out of order
    const std::size_t s = b.write("w3", EventKind::kWriteFail, 42, 0, 0, 48);  // fresh, t 5 s: deadline 9 s, missed
    const std::size_t hit2 = b.write("w1", EventKind::kWriteFail, 40, 0, 2, 40);  // inside the streak: only with black boxes
    const std::size_t w4 = acquire(b, "w4", 43);
    b.t = 11'000'000'000;
    const std::size_t next = b.write("w5", EventKind::kWriteOk, 50, 0, 0, 50);  // t 11 s
    const fh::CheckerResult r = fenced_out(b.h, silent ? std::vector<std::string>{"w9"} : std::vector<std::string>{});
    if (silent) {
      ASSERT_EQ(r.anomalies.size(), 1u);
      EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{own, hit1, hit2}));
      continue;
    }
    ASSERT_EQ(r.anomalies.size(), 2u);
    EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{own, hit1}));
    EXPECT_EQ(r.anomalies[1].evidence, (std::vector<std::size_t>{w3, s, w4, next}));  // w3's acquire.ok, the rejection, w4's, the write
    EXPECT_EQ(r.anomalies[1].tokens, (std::vector<std::int64_t>{42, 43}));
    EXPECT_EQ(r.anomalies[1].description,
              "from the start of the run, w3's write with the freshly acquired token 42 was rejected against the "
              "high-water mark 48, and no write was accepted within 4.00 s (lease TTL 2.00 s + 2.00 s to acquire): 1 "
              "rejection(s) over 0.00 s, until a write was accepted 6.00 s later: the holders are fenced out with "
              "healthy services");
    (void)a;
  }
}

TEST(StreamFencedOut, SelfFencingCitesTheWorkersFirstAcceptedWriteWithTheToken) {
  fh::Builder b;
  acquire(b, "w1", 33);
  const std::size_t first = b.write_ok("w1", 33, 0, 0, 33);
  b.write_ok("w1", 33, 0, 1, 33);
  const std::size_t refused = b.write("w1", EventKind::kWriteFail, 33, 0, 2, 33);
  const fh::CheckerResult r = fenced_out(b.h);
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{first, refused}));
  // From a file: the rejection is a candidate in the first pass (its triple's fingerprint was
  // accepted before), and the second finds that first write.ok.
  const fh::StreamCheckRun run = fh::check_history_file(write_history("fenced-out-self.jsonl", b.h), ReadBack{},
                                                        fh::CheckContext{}, {"fenced-out"});
  EXPECT_EQ(run.passes, 2u);
  ASSERT_EQ(run.run.results.size(), 1u);
  ASSERT_EQ(run.run.results[0].anomalies.size(), 1u);
  EXPECT_EQ(run.run.results[0].anomalies[0].evidence, (std::vector<std::size_t>{first, refused}));
}

TEST(StreamFencedOut, AWriteAcceptedRightAtTheDeadlineIsInTime) {
  for (const std::int64_t late : {0, 1}) {
    fh::Builder b;
    acquire(b, "w1", 40);
    b.write("w1", EventKind::kWriteFail, 40, 0, 0, 48);  // fresh, rejected
    b.t += 4'000'000'000 - 1'000'000 + late;             // the write.ok 4 s (+ late ns) after it
    b.write("w2", EventKind::kWriteOk, 48, 0, 0, 48);
    const fh::CheckerResult r = fenced_out(b.h);
    EXPECT_EQ(r.verdict, late ? fh::Verdict::kInvalid : fh::Verdict::kValid) << late;
  }
}

TEST(StreamFencedOut, OnlyWhatFollowsTheLastHealCountsButAReissuedTokensEarlierWriteStill) {
  fh::Builder b;
  acquire(b, "w1", 33);
  const std::size_t own = b.write_ok("w1", 33, 0, 0, 33);
  b.write("w1", EventKind::kWriteFail, 33, 0, 1, 33);  // self-fencing, but before the last heal
  acquire(b, "w2", 40);
  b.write("w2", EventKind::kWriteFail, 40, 0, 0, 48);  // fresh, and no write follows: before the last heal
  b.fault_heal("w1", 1);
  acquire(b, "w2", 41);                                // a heal, then more: the streak above is not judged
  b.fault_heal("w1", 1);
  acquire(b, "w1", 34);
  acquire(b, "w1", 33);                                // the issuer hands 33 out again
  const std::size_t hit = b.write("w1", EventKind::kWriteFail, 33, 0, 1, 33);
  const fh::CheckerResult r = fenced_out(b.h);
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{own, hit}));
}

// ---------------------------------------------------------------------------------------------
// Bounded state on long steady runs.

/// `rounds` holdings taking turns over `holders` workers, each acquiring the next token and
/// writing `chunks` chunks of a fresh segment (invoke + ok); the previous holder's stale write is
/// rejected against the new mark (a fresh rejection of its own latest token, answered in time by
/// the next holder's write). Fills `rb` with what the store holds at the end. Returns the index.
std::size_t steady_writes(fh::StreamRule* rule, ReadBack* rb, std::size_t index, std::int64_t& token, std::int64_t& t,
                          int rounds, int holders, int chunks) {
  auto feed = [&](Event e) {
    t += 1'000'000;
    e.t_ns = e.src_ns = t;
    if (rule) rule->observe(index, e);
    ++index;
  };
  for (int r = 0; r < rounds; ++r) {
    const std::string w = "w" + std::to_string(r % holders);
    const std::string before = "w" + std::to_string((r + holders - 1) % holders);
    Event ok = fh::Builder::ev(w, EventKind::kAcquireOk);
    ok.lock = fh::kLock;
    ok.token = ++token;
    ok.ttl_ms = 2000;
    feed(ok);
    for (int c = 0; c < chunks; ++c) {
      Event inv = fh::Builder::ev(w, EventKind::kWriteInvoke);
      inv.key = fh::kLedgerKey;
      inv.token = token;
      inv.segment = token;
      inv.chunk = c;
      feed(inv);
      Event done = inv;
      done.kind = EventKind::kWriteOk;
      done.high_water = token;
      feed(done);
      if (rb) {
        rb->chunks.push_back(fh::stored(w, token, token, c, static_cast<std::int64_t>(rb->chunks.size() + 1)));
        rb->log.push_back(fh::logged(static_cast<std::int64_t>(rb->log.size() + 1), w, token, token, c));
      }
      if (c == 0) {
        Event stale = fh::Builder::ev(before, EventKind::kWriteFail);
        stale.key = fh::kLedgerKey;
        stale.token = token - 1;
        stale.segment = token - 1;
        stale.chunk = chunks;
        stale.high_water = token;
        feed(stale);
      }
    }
  }
  return index;
}

TEST(StreamLostAcknowledgedWrite, StateGrowsOnlyByTheWorkersTokensOverALongSteadyRun) {
  for (const bool with_log : {true, false}) {
    // The read-back of the whole run first (the rule reads it before the history).
    ReadBack rb;
    std::int64_t token = 0, t = 0;
    const std::size_t events = steady_writes(nullptr, &rb, 0, token, t, 25'000, 4, 2);
    ASSERT_GT(events, 100'000u);
    if (!with_log) rb.log.clear();
    auto rule = fh::make_stream_rule("lost-acknowledged-write");
    ASSERT_NE(rule, nullptr);
    const fh::CheckContext context;  // outlives finish(), as StreamRule::begin asks
    const fh::PackedLog log(rb.log);
    rule->begin(rb, log, context);
    token = 0;
    t = 0;
    std::size_t index = steady_writes(rule.get(), nullptr, 0, token, t, 2'500, 4, 2);
    const std::size_t early = rule->state_bytes();
    index = steady_writes(rule.get(), nullptr, index, token, t, 22'500, 4, 2);
    const std::size_t later = rule->state_bytes();
    // Without a log, one entry per (worker, token) written with: the invoke a late write.ok is
    // judged by. With a log the invoke is only a lost write's evidence, found by a second pass:
    // nothing per holding.
    if (with_log) {
      EXPECT_EQ(later, early) << "state grew from " << early << " to " << later << " bytes";
    }
    EXPECT_LT(later, early + 22'500 * 48) << with_log << ": state grew from " << early << " to " << later << " bytes";
    std::cout << "lost-acknowledged-write " << (with_log ? "with" : "without") << " a log: " << early << " -> " << later
              << " bytes over " << index << " events, 22,500 holdings\n";
    // The run is healthy: nothing is lost.
    EXPECT_EQ(rule->finish(fh::StreamEnd{index, {}}).anomalies.size(), 0u);
  }
}

}  // namespace

namespace {

Event write_at(const std::string& w, EventKind kind, std::int64_t token, std::int64_t chunk, std::int64_t happened_ns,
               std::int64_t received_ns) {
  Event e = fh::Builder::ev(w, kind);
  e.key = "ledger";
  e.token = token;
  e.segment = 0;
  e.chunk = chunk;
  e.src_ns = happened_ns;
  e.t_ns = received_ns;
  return e;
}

TEST(StreamStaleWrite, AWriteOkReceivedLateThatHappenedBeforeAnInvokeIsJudgedInASecondPass) {
  // w2's write.ok with token 9 happened (t=150) before w1's write with token 5 was invoked
  // (t=180), but the harness received it last: judged on arrival w1's write had no higher write
  // before it; the second pass sees w2's.
  fh::History h;
  h.add(write_at("w2", EventKind::kWriteInvoke, 9, 0, 100, 100));
  h.add(write_at("w1", EventKind::kWriteInvoke, 5, 1, 180, 180));
  h.add(write_at("w1", EventKind::kWriteOk, 5, 1, 190, 190));
  h.add(write_at("w2", EventKind::kWriteOk, 9, 0, 150, 400));
  auto rule = fh::make_stream_rule("stale-write-accepted");
  fh::CheckerResult r = fh::run_stream_rule(*rule, h, ReadBack{}, fh::CheckContext{});
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{1, 2, 3}));
  EXPECT_EQ(r.anomalies[0].tokens, (std::vector<std::int64_t>{5, 9}));
  EXPECT_EQ(r.anomalies[0].clients, (std::vector<std::string>{"w1", "w2"}));
  const fh::StreamCheckRun s =
      fh::check_history_file(write_history("late.jsonl", h), ReadBack{}, fh::CheckContext{}, {"stale-write-accepted"});
  EXPECT_EQ(s.passes, 2u);
  ASSERT_EQ(s.run.results.size(), 1u);
  fh::CheckerResult settled = r;
  settled.evidence = s.run.results[0].evidence;  // the sources run_checkers lists; the rule alone lists none
  EXPECT_EQ(difference(s.run.results[0], settled), "");
  // Received in real-time order, one pass decides it.
  fh::History in_order;
  for (std::size_t i : {0, 3, 1, 2}) in_order.add(h[i]);
  const fh::StreamCheckRun one =
      fh::check_history_file(write_history("in-order.jsonl", in_order), ReadBack{}, fh::CheckContext{}, {"stale-write-accepted"});
  EXPECT_EQ(one.passes, 1u);
  ASSERT_EQ(one.run.results[0].anomalies.size(), 1u);
  EXPECT_EQ(one.run.results[0].anomalies[0].evidence, (std::vector<std::size_t>{1, 2, 3}));
}

TEST(StreamStaleWrite, OfTwoHigherWritesWithOneTokenTheEarlierInRealTimeIsCited) {
  // Two write.oks with token 9, received in the opposite of the order they happened in; the stale
  // write cites the one that happened first (the in-memory rule's tie: the earliest by time).
  fh::History h;
  h.add(write_at("w2", EventKind::kWriteOk, 9, 1, 120, 120));
  h.add(write_at("w3", EventKind::kWriteOk, 9, 2, 110, 130));
  h.add(write_at("w1", EventKind::kWriteInvoke, 5, 3, 200, 200));
  h.add(write_at("w1", EventKind::kWriteOk, 5, 3, 210, 210));
  auto rule = fh::make_stream_rule("stale-write-accepted");
  const fh::CheckerResult r = fh::run_stream_rule(*rule, h, ReadBack{}, fh::CheckContext{});
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{1, 2, 3}));
  EXPECT_EQ(r.anomalies[0].clients, (std::vector<std::string>{"w1", "w3"}));
}

TEST(StreamStaleWrite, AWorkerWithManyWritesInFlightFindsEachInvokeInASecondPass) {
  // w2's token 9 write completed first; then w1 sends 70 writes with token 5 before any reply: the
  // first 6 write ids are older than the 64 the rule keeps per worker.
  fh::History h;
  h.add(write_at("w2", EventKind::kWriteInvoke, 9, 0, 10, 10));
  h.add(write_at("w2", EventKind::kWriteOk, 9, 0, 20, 20));
  for (int c = 0; c < 70; ++c) h.add(write_at("w1", EventKind::kWriteInvoke, 5, c, 30 + c, 30 + c));
  for (int c = 0; c < 70; ++c) h.add(write_at("w1", EventKind::kWriteOk, 5, c, 200 + c, 200 + c));
  const fh::StreamCheckRun s =
      fh::check_history_file(write_history("in-flight.jsonl", h), ReadBack{}, fh::CheckContext{}, {"stale-write-accepted"});
  EXPECT_EQ(s.passes, 2u);
  ASSERT_EQ(s.run.results[0].anomalies.size(), 1u);
  const fh::Anomaly& a = s.run.results[0].anomalies[0];
  EXPECT_EQ(a.evidence.size(), 141u);  // w2's write.ok, and each of w1's 70 invokes and 70 write.oks
  EXPECT_EQ(a.evidence.front(), 1u);
  EXPECT_EQ(a.evidence.back(), h.size() - 1);
  EXPECT_NE(a.description.find("70 write.ok event(s) in the history"), std::string::npos) << a.description;
}

TEST(StreamStaleWrite, TheStaircaseIsPrunedBelowTheWritesInFlightSoStateStaysFlat) {
  // 4 holders take turns on 2 keys, each holding writing 5 chunks, one write in flight at a time:
  // below the earliest write in flight only one point per key is still needed, so the staircase
  // is pruned and the state does not grow with the tokens (it did: a 32-byte point per token).
  auto rule = fh::make_stream_rule("stale-write-accepted");
  const ReadBack rb;
  const fh::PackedLog log;
  const fh::CheckContext context;  // outlives finish(), as StreamRule::begin asks
  rule->begin(rb, log, context);
  std::size_t index = 0;
  std::int64_t t = 0;
  auto holdings = [&](int from, int to) {
    for (int token = from; token < to; ++token) {
      const std::string w = "w" + std::to_string(token % 4);
      for (int c = 0; c < 5; ++c) {
        t += 1;
        Event inv = write_at(w, EventKind::kWriteInvoke, token, c, t, t);
        inv.key = token % 2 ? "ledger" : "ledger2";
        rule->observe(index++, inv);
        t += 1;
        Event ok = write_at(w, EventKind::kWriteOk, token, c, t, t);
        ok.key = inv.key;
        rule->observe(index++, ok);
      }
    }
  };
  holdings(1, 10'001);
  const std::size_t early = rule->state_bytes();
  holdings(10'001, 50'001);  // 400,000 more events, 40,000 more tokens
  const std::size_t later = rule->state_bytes();
  std::cout << "stale-write-accepted: " << early << " -> " << later << " bytes over 40,000 more tokens\n";
  EXPECT_LT(later, early + 200'000) << "the points of 40,000 tokens would take 1.3 MB or more";
  EXPECT_FALSE(rule->wants_another_pass());
  EXPECT_TRUE(rule->finish(fh::StreamEnd{index, {}}).anomalies.empty());
}

TEST(StreamStaleWrite, ALookupBelowWhatWasPrunedIsJudgedAgainstTheWholeStaircase) {
  // w9 invokes a write with token 50 after token 100's write.oks (stale), then exits: the
  // watermark passes its invoke and the staircase is pruned below it. Its write.ok comes at the
  // end (it happened long ago): its lookup needs a dropped point, so the rule builds the whole
  // staircase again and judges every write against it: the same anomaly as when w9 stays (its
  // write in flight holds the pruning back, one pass).
  for (const bool exits : {true, false}) {
    std::vector<Event> h;
    std::int64_t t = 0;
    std::size_t top = 0, invoke = 0;
    for (int token = 1; token < 20'001; ++token) {
      const std::string w = "w" + std::to_string(token % 4);
      for (int c = 0; c < 5; ++c) {
        t += 1;
        h.push_back(write_at(w, EventKind::kWriteInvoke, token, c, t, t));
        t += 1;
        if (token == 100 && c == 0) top = h.size();
        h.push_back(write_at(w, EventKind::kWriteOk, token, c, t, t));
      }
      if (token == 100) {
        t += 1;
        invoke = h.size();
        h.push_back(write_at("w9", EventKind::kWriteInvoke, 50, 99, t, t));
        if (exits) {
          Event bye = fh::Builder::ev("harness", EventKind::kWorkerExit);
          bye.target = "w9";
          h.push_back(bye);
        }
      }
    }
    const std::size_t late = h.size();
    h.push_back(write_at("w9", EventKind::kWriteOk, 50, 99, t - 199'000 + 1, t + 1));  // happened long ago
    auto rule = fh::make_stream_rule("stale-write-accepted");
    const ReadBack rb;
    const fh::PackedLog log;
    const fh::CheckContext context;
    rule->begin(rb, log, context);
    unsigned passes = 1;
    for (std::size_t i = 0; i < h.size(); ++i) rule->observe(i, h[i]);
    for (; rule->wants_another_pass(); ++passes) {
      rule->begin_pass(passes + 1);
      for (std::size_t i = 0; i < h.size(); ++i) rule->observe(i, h[i]);
    }
    EXPECT_EQ(passes, exits ? 3u : 1u);
    const fh::CheckerResult r = rule->finish(fh::StreamEnd{h.size(), {}});
    ASSERT_EQ(r.anomalies.size(), 1u) << exits;
    EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{top, invoke, late})) << exits;
    EXPECT_EQ(r.anomalies[0].tokens, (std::vector<std::int64_t>{50, 100})) << exits;
  }
}

}  // namespace

// fenced-out's rule is not in stream_rule_names() yet (stream_check.h says why): its factory.
namespace fencecheck::harness::detail {
[[nodiscard]] std::unique_ptr<StreamRule> make_fenced_out_rule();
}  // namespace fencecheck::harness::detail

namespace {

TEST(StreamFencedOut, StateGrowsOnlyByTheAcceptedWritesOverALongSteadyRunYetFindsALateStreak) {
  fh::CheckContext ctx;
  ctx.lease_ttl = std::chrono::seconds(2);
  for (const bool context_ttl : {true, false}) {
    auto rule = fh::detail::make_fenced_out_rule();
    ASSERT_NE(rule, nullptr);
    // The read-back and the context must outlive finish() (StreamRule::begin).
    const ReadBack readback;
    const fh::PackedLog log;
    const fh::CheckContext context = context_ttl ? ctx : fh::CheckContext{};
    rule->begin(readback, log, context);
    std::int64_t token = 0, t = 0;
    std::size_t index = steady_writes(rule.get(), nullptr, 0, token, t, 2'500, 4, 2);
    const std::size_t early = rule->state_bytes();
    index = steady_writes(rule.get(), nullptr, index, token, t, 22'500, 4, 2);
    const std::size_t later = rule->state_bytes();
    ASSERT_GT(index, 100'000u);
    // One entry per (worker, key, token) with a write.ok (a re-issued token's earlier write makes
    // its rejection self-fencing): an 8-byte fingerprint in a hash set, with its slack (it was a
    // 40-byte key and an index).
    EXPECT_LT(later, early + 22'500 * 16) << context_ttl << ": state grew from " << early << " to " << later << " bytes";
    std::cout << "fenced-out (TTL from the " << (context_ttl ? "context" : "history") << "): " << early << " -> " << later
              << " bytes over " << index << " events, 22,500 holdings\n";
    // Then the holders are fenced out: a fresh token rejected and no write after it.
    Event ok = fh::Builder::ev("w0", EventKind::kAcquireOk);
    ok.token = ++token;
    ok.t_ns = t += 1'000'000;
    const std::size_t fresh = index;
    rule->observe(index++, ok);
    Event fail = fh::Builder::ev("w0", EventKind::kWriteFail);
    fail.key = fh::kLedgerKey;
    fail.token = token;
    fail.high_water = token + 100;
    fail.t_ns = t += 1'000'000;
    const std::size_t rejected = index;
    rule->observe(index++, fail);
    const fh::CheckerResult r = rule->finish(fh::StreamEnd{index, {}});
    ASSERT_EQ(r.anomalies.size(), 1u);
    EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{fresh, rejected}));
  }
}

// ---------------------------------------------------------------------------------------------
// unjustified-rejection: live state when every reply says its mark (each worker's holding, the
// names); the rejections at or above their mark are output.

TEST(StreamUnjustifiedRejection, StateStaysFlatOverALongSteadyRunYetFindsALateRejectionAboveTheMark) {
  const fh::CheckContext ctx;
  const ReadBack rb;
  auto rule = begun("unjustified-rejection", rb, ctx);
  ASSERT_NE(rule, nullptr);
  std::int64_t token = 0, t = 0;
  // Each holding's stale write is rejected below the new mark: justified, nothing kept.
  std::size_t index = steady_writes(rule.rule.get(), nullptr, 0, token, t, 2'500, 4, 2);
  const std::size_t early = rule->state_bytes();
  index = steady_writes(rule.rule.get(), nullptr, index, token, t, 22'500, 4, 2);
  const std::size_t later = rule->state_bytes();
  ASSERT_GT(index, 100'000u);
  std::cout << "unjustified-rejection: " << early << " -> " << later << " bytes over " << index
            << " events, 22,500 holdings\n";
  EXPECT_EQ(later, early);
  // Then the fence refuses a token above its mark: found, in one pass.
  Event fail = fh::Builder::ev("w0", EventKind::kWriteFail);
  fail.key = fh::kLedgerKey;
  fail.token = token + 1;
  fail.high_water = token;
  const std::size_t at = index;
  rule->observe(index++, fail);
  EXPECT_FALSE(rule->wants_another_pass());
  const fh::CheckerResult r = rule->finish(fh::StreamEnd{index, {}});
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{at}));
  EXPECT_EQ(r.anomalies[0].tokens, (std::vector<std::int64_t>{token + 1}));
}

// ---------------------------------------------------------------------------------------------
// cross-key-rejection: holdings-sized state (each key's accepted tokens, each worker's invokes per
// token), and what it decides only at the end (the other key's write.oks, read in a second pass).

/// Drives `rule` over both passes of `feed` (which calls its argument with each event in order) as
/// run_stream_rule does; `sample` is called once, after pass 1.
template <typename Feed, typename Sample>
fh::CheckerResult two_passes(fh::StreamRule& rule, Feed&& feed, Sample&& sample) {
  std::size_t events = 0;
  for (unsigned pass = 1;; ++pass) {
    if (pass > 1) rule.begin_pass(pass);
    std::size_t index = 0;
    feed([&](const Event& e) { rule.observe(index++, e); });
    events = index;
    if (pass == 1) sample();
    if (!rule.wants_another_pass()) break;
  }
  return rule.finish(fh::StreamEnd{events, {}});
}

TEST(StreamCrossKeyRejection, StateGrowsOnlyByTheKeysTokensAndAnOldWriteOkIsStillCited) {
  // Per-key fencing: holders take turns on keys "a" and "b", each holding writes 10 chunks with a
  // new token and the key's previous holder is then rejected by that key's own mark (settled at
  // once). At the very end, "y" is rejected against mark 50, which only "x" reached, at the start.
  fh::CheckContext ctx;
  const ReadBack rb;
  std::size_t early = 0, later = 0, fail_at = 0, invoke_at = 0;
  auto feed = [&](auto&& observe, int holdings, bool tail) {
    observe(write_invoke("w8", 50, "x"));
    observe(write_ok_event("w8", 50, "x"));
    std::int64_t previous[2] = {0, 0};
    std::string holder[2];
    for (int h = 0; h < holdings; ++h) {
      const std::string w = "w" + std::to_string(h % 4);
      const std::string key = h % 2 == 0 ? "a" : "b";
      const std::int64_t token = 100 + h;
      for (int c = 0; c < 10; ++c) {
        observe(write_invoke(w, token, key));
        observe(write_ok_event(w, token, key, c));
      }
      if (previous[h % 2] != 0) {
        observe(write_invoke(holder[h % 2], previous[h % 2], key));
        observe(fenced_fail(holder[h % 2], previous[h % 2], token, key));
      }
      previous[h % 2] = token;
      holder[h % 2] = w;
    }
    if (!tail) return;
    observe(write_invoke("w9", 1, "y"));
    observe(fenced_fail("w9", 1, 50, "y"));
  };
  // The same history in two runs: the state after 500 holdings, then after 5,000.
  {
    auto rule = begun("cross-key-rejection", rb, ctx);
    ASSERT_NE(rule, nullptr);
    std::size_t index = 0;
    feed([&](const Event& e) { rule->observe(index++, e); }, 500, false);
    early = rule->state_bytes();
  }
  auto rule = begun("cross-key-rejection", rb, ctx);
  std::size_t events = 0;
  const fh::CheckerResult r = two_passes(
      *rule,
      [&](auto&& observe) {
        std::size_t index = 0;
        feed([&](const Event& e) {
          if (e.kind == EventKind::kWriteInvoke && e.source == "w9") invoke_at = index;
          if (e.kind == EventKind::kWriteFail && e.source == "w9") fail_at = index;
          ++index;
          observe(e);
        }, 5'000, true);
        events = index;
      },
      [&] { later = rule->state_bytes(); });
  ASSERT_GT(events, 100'000u);
  const std::size_t per_holding = (later - early) / 4'500;
  std::cout << "cross-key-rejection: " << early << " bytes after 500 holdings, " << later << " after 5,000 ("
            << per_holding << " bytes per holding, " << events << " events)\n";
  // The key's accepted token (8 bytes) and its slack; the workers' invokes are no longer kept (a
  // group's write.fail finds its invoke in the second pass): 13 measured, 40 or so with them.
  EXPECT_LE(per_holding, 24u);
  ASSERT_EQ(r.anomalies.size(), 1u);
  const fh::Anomaly& a = r.anomalies[0];
  EXPECT_EQ(a.key, "y");
  EXPECT_EQ(a.evidence, (std::vector<std::size_t>{1, invoke_at, fail_at}));
  EXPECT_EQ(a.tokens, (std::vector<std::int64_t>{1, 50}));
  EXPECT_EQ(a.clients, (std::vector<std::string>{"w8", "w9"}));
  EXPECT_EQ(a.description,
            "writes to y (token 1) were rejected against the high-water mark 50, which only key x reached; y had not "
            "accepted a token >= 50: one mark fences several keys (1 write.fail event(s), 0 rejection(s) recorded by "
            "the resource)");
}

TEST(StreamCrossKeyRejection, TheOtherKeyMayReachTheMarkOnlyAfterTheRejection) {
  // The in-memory rule searched every key's accepted tokens over the whole run: ledger-b's 34,
  // acknowledged after ledger-a's rejection, is the mark's owner, and its write.ok is cited; a
  // rejection explained by nothing but a logged write with no write.ok waits for the end too.
  fh::Builder b;
  const std::size_t invoke = b.write("w1", EventKind::kWriteInvoke, 33, 0, 1, std::nullopt, "ledger-a");
  const std::size_t fail = b.write("w1", EventKind::kWriteFail, 33, 0, 1, 34, "ledger-a");
  const std::size_t late = b.write("w2", EventKind::kWriteOk, 34, 0, 0, 34, "ledger-b");
  ReadBack rb;
  const fh::CheckerResult r = fh::CrossKeyRejectionChecker{}.check(b.h, rb);
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{invoke, fail, late}));
  EXPECT_EQ(r.anomalies[0].clients, (std::vector<std::string>{"w1", "w2"}));
  rb.log = {fencecheck::AcceptedWrite{7, "ledger-a.effect", 0, 0, 34, "w3"}};
  EXPECT_EQ(fh::CrossKeyRejectionChecker{}.check(b.h, rb).verdict, fh::Verdict::kValid);
}

TEST(StreamCrossKeyRejection, AnAppliedEffectExplainsAWriteFailWhateverItsSeq) {
  // An applied side effect has no history index: the in-memory rule counted it at any time, so
  // ledger-a.effect's 34 (applied, seq 9, after everything) explains ledger-a's rejection at 34,
  // which the one-pass rule settles at once; refused, it explains nothing and ledger-b's 34 is cited.
  fh::Builder b;
  const std::size_t other = b.write("w2", EventKind::kWriteOk, 34, 0, 0, 34, "ledger-b");
  b.write("w1", EventKind::kWriteFail, 33, 0, 1, 34, "ledger-a");
  ReadBack rb;
  rb.effects = {fencecheck::EffectRecord{"ledger-a.effect", "seg0", 34, "w3", 9, true, "fenced"}};
  EXPECT_EQ(fh::CrossKeyRejectionChecker{}.check(b.h, rb).verdict, fh::Verdict::kValid);
  rb.effects[0].applied = false;
  const fh::CheckerResult r = fh::CrossKeyRejectionChecker{}.check(b.h, rb);
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{other, other + 1}));
}

// ---------------------------------------------------------------------------------------------
// foreign-release: what arrives after a release (the lock.delete at its revision, the owner's own
// acquire.ok, the next holder) gives what the in-memory checker gave.

/// foreign-release's result on the whole of `h`, through the in-memory adapter.
fh::CheckerResult foreign_release(const fh::History& h) {
  const auto rule = fh::make_stream_rule("foreign-release");
  return fh::run_stream_rule(*rule, h, ReadBack{}, fh::CheckContext{});
}

std::size_t release_invoke(fh::Builder& b, const std::string& w, const std::string& lock_key, std::int64_t token,
                           std::int64_t lease) {
  Event e = fh::Builder::ev(w, EventKind::kReleaseInvoke);
  e.lock_key = lock_key;
  e.token = token;
  e.lease_id = lease;
  return b.add(e);
}

TEST(StreamForeignRelease, TheThirdHolderIsTheFirstAcquireAfterTheReleaseByNotTheOwnerUnlessTheOwnerFinishedFirst) {
  // w2 releases at revision 9, which deleted w1's key a, its own key b and a key z nobody held;
  // the deletes arrive after the next two acquire.oks (the watch lags). The first acquire.ok after
  // the release is w1's own (not a third holder), the second is w3's: the third holder, unless w1
  // finished its holding (a job.done of its token, or without one) before it.
  const std::string a = "fencecheck/test/a", bkey = "fencecheck/test/b", z = "fencecheck/test/z";
  for (const std::optional<std::int64_t> done : {std::optional<std::int64_t>(), std::optional<std::int64_t>(7),
                                                 std::optional<std::int64_t>(5), std::optional<std::int64_t>(-1)}) {
    // done: none; a job.done of another token (still mid-job); of token 5; without a token (-1)
    fh::Builder b;
    const std::size_t grant = b.lock_grant(a, 5, 100);
    const std::size_t acquire = b.acquire_ok("w1", a, 5, 100);
    b.acquire_ok("w2", bkey, 6, 200);
    const std::size_t release = b.release_ok("w2", bkey, 6, 9);
    b.acquire_ok("w1", "fencecheck/test/d", 8, 100);
    if (done) b.job_done("w1", *done >= 0 ? done : std::nullopt);
    const std::size_t third = b.acquire_ok("w3", "fencecheck/test/e", 9, 300);
    const std::size_t delete_z = b.lock_delete(z, 2, 9);
    const std::size_t delete_a = b.lock_delete(a, 5, 9);
    b.lock_delete(bkey, 6, 9);
    const fh::CheckerResult r = foreign_release(b.h);
    ASSERT_EQ(r.anomalies.size(), 2u);  // a, then z (by name); b is w2's own
    const bool mid_job = !done || *done == 7;
    const std::string head = "w2 released the lock by deleting " + a +
                             " (token 5, created by w1) at revision 9: a release without an owner check";
    EXPECT_EQ(r.anomalies[0].description,
              mid_job ? head + "; w3 then acquired the lock (token 9) while w1 was still mid-job" : head);
    EXPECT_EQ(r.anomalies[0].evidence, mid_job ? (std::vector<std::size_t>{grant, acquire, release, third, delete_a})
                                               : (std::vector<std::size_t>{grant, acquire, release, delete_a}));
    EXPECT_EQ(r.anomalies[0].clients, mid_job ? (std::vector<std::string>{"w1", "w2", "w3"})
                                              : (std::vector<std::string>{"w1", "w2"}));
    EXPECT_EQ(r.anomalies[1].description, "w2 released the lock by deleting " + z +
                                              " (token 2, created by another holder) at revision 9: a release "
                                              "without an owner check");
    EXPECT_EQ(r.anomalies[1].tokens, (std::vector<std::int64_t>{2, 6}));  // the key's, the releaser's own
    EXPECT_EQ(r.anomalies[1].evidence, (std::vector<std::size_t>{release, delete_z}));
  }
}

TEST(StreamForeignRelease, AnOwnerWhoseAcquireIsReportedAfterTheReleaseIsJudgedInALaterPass) {
  // w2 releases w1's key a by name before w1's acquire.ok of it is reported; w3 acquires between
  // the two. The old checker scanned forward from the release: w3 is the third holder, unless w1
  // finished token 5 after the release, even before its acquire.ok was reported.
  const std::string a = "fencecheck/test/a";
  for (const bool done : {false, true}) {
    fh::Builder b;
    const std::size_t grant = b.lock_grant(a, 5, 100);
    const std::size_t release = b.release_ok("w2", a, 5, 9);
    if (done) release_invoke(b, "w1", a, 5, 100);
    const std::size_t third = b.acquire_ok("w3", "fencecheck/test/c", 7, 300);
    const std::size_t acquire = b.acquire_ok("w1", a, 5, 100);
    const std::size_t del = b.lock_delete(a, 5, 9);
    const fh::CheckerResult r = foreign_release(b.h);
    ASSERT_EQ(r.anomalies.size(), 1u);
    const std::string head = "w2 released the lock by deleting " + a +
                             " (token 5, created by w1) at revision 9: a release without an owner check";
    EXPECT_EQ(r.anomalies[0].description,
              done ? head : head + "; w3 then acquired the lock (token 7) while w1 was still mid-job");
    EXPECT_EQ(r.anomalies[0].evidence, done ? (std::vector<std::size_t>{grant, release, acquire, del})
                                            : (std::vector<std::size_t>{grant, release, third, acquire, del}));
    EXPECT_EQ(r.anomalies[0].tokens, done ? (std::vector<std::int64_t>{5}) : (std::vector<std::int64_t>{5, 7}));
    // Read from a file, the rule reads it three times: the marks (revision 9 is suspect: its
    // key's first acquire.ok is w1's), the suspect's records, and the scan from the release.
    const fs::path file = write_history("foreign-release-late-owner.jsonl", b.h);
    const fh::StreamCheckRun run = fh::check_history_file(file, ReadBack{}, fh::CheckContext{}, {"foreign-release"});
    EXPECT_EQ(run.passes, 3u);
    ASSERT_EQ(run.run.results.size(), 1u);
    EXPECT_EQ(run.run.results[0].anomalies.size(), 1u);
    EXPECT_EQ(run.run.results[0].anomalies[0].description, r.anomalies[0].description);
  }
}

TEST(StreamForeignRelease, StateGrowsOnlyByAMarkAndARevisionPerHoldingAndTheFirstHoldingIsStillItsKeysOwner) {
  // Holders take turns, etcd-style (a fresh key per lease): grant, acquire.ok, 10 writes, job.done,
  // release.invoke, release.ok at a revision, the lock.delete at it. Each holding leaves its mark
  // (its (key, token)'s first acquirer, as a fingerprint) and its revision settled clean: whose key
  // a later release deletes can be any holding's, and a zookeeper key name comes back. Writes leave
  // nothing, and a clean history needs no second pass.
  const fh::CheckContext ctx;
  const ReadBack rb;
  auto rule = begun("foreign-release", rb, ctx);
  ASSERT_NE(rule, nullptr);
  fh::Builder b;
  std::size_t fed = 0;
  auto feed = [&] {
    for (; fed < b.h.size(); ++fed) rule->observe(fed, b.h[fed]);
  };
  auto key_of = [](int h) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016x", 0x694d0000 + h);
    return "fencecheck/test/" + std::string(buf);
  };
  int holding = 0;
  auto holdings = [&](int n) {
    for (int k = 0; k < n; ++k, ++holding) {
      const std::string w = "w" + std::to_string(holding % 4), key = key_of(holding);
      const std::int64_t token = 100 + holding, lease = 1000 + holding;
      b.lock_grant(key, token, lease);
      b.acquire_ok(w, key, token, lease);
      for (int c = 0; c < 10; ++c) b.write_ok(w, token, 0, c, token);
      b.job_done(w, token);
      release_invoke(b, w, key, token, lease);
      b.release_ok(w, key, token, 1'000'000 + holding);
      b.lock_delete(key, token, 1'000'000 + holding);
      feed();
    }
  };
  holdings(2'000);
  const std::size_t early = rule->state_bytes();
  holdings(6'000);
  const std::size_t later = rule->state_bytes();
  const std::size_t per_holding = (later - early) / 6'000;
  for (int c = 0; c < 50'000; ++c) b.write_ok("w1", 99, 1, c, 99);
  feed();
  EXPECT_EQ(rule->state_bytes(), later);  // 100,000 writes: nothing
  std::cout << "foreign-release: " << early << " bytes after 2,000 holdings, " << later << " after 8,000 ("
            << per_holding << " bytes per holding, " << b.h.size() << " events)\n";
  EXPECT_LE(per_holding, 40u);  // was about 400 with every holding's records kept whole
  EXPECT_GT(b.h.size(), 200'000u);
  {
    auto clean = begun("foreign-release", rb, ctx);
    for (std::size_t i = 0; i < b.h.size(); ++i) clean->observe(i, b.h[i]);
    EXPECT_FALSE(clean->wants_another_pass());
    EXPECT_TRUE(clean->finish(fh::StreamEnd{b.h.size(), {}}).anomalies.empty());
  }
  // w9 deletes the first holding's key by name at a new revision: its owner is w0's first acquire.
  const std::size_t release = b.release_ok("w9", key_of(0), 100, 5'000'000);
  const std::size_t del = b.lock_delete(key_of(0), 100, 5'000'000);
  feed();
  // The revision is suspect; the passes that decide it gather that key's records alone.
  unsigned passes = 1;
  for (; rule->wants_another_pass(); ++passes) {
    rule->begin_pass(passes + 1);
    for (std::size_t i = 0; i < b.h.size(); ++i) rule->observe(i, b.h[i]);
    EXPECT_LE(rule->state_bytes(), later) << "pass " << passes + 1;
  }
  EXPECT_EQ(passes, 2u);  // the marks, then the suspect's records (w0's acquire came first: no scan)
  const fh::CheckerResult r = rule->finish(fh::StreamEnd{b.h.size(), {}});
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].description, "w9 released the lock by deleting " + key_of(0) +
                                            " (token 100, created by w0) at revision 5000000: a release without "
                                            "an owner check");
  EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{0, 1, release, del}));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The figures in one pass (analysis.h: FigureStream; compute_figures() is it over a history, and
// the golden record pins every figure).

namespace {

/// The matching the figures made before they were streamed: each inject, in order, takes the first
/// later heal of its (fault, target) that no earlier inject took. Returns inject -> heal index.
std::map<std::size_t, std::size_t> heal_of_each_inject(const fh::History& h) {
  std::map<std::size_t, std::size_t> out;
  std::set<std::size_t> used;
  for (std::size_t i = 0; i < h.size(); ++i) {
    if (h[i].kind != EventKind::kFaultInject) continue;
    for (std::size_t j = i + 1; j < h.size(); ++j)
      if (h[j].kind == EventKind::kFaultHeal && h[j].fault == h[i].fault && h[j].target == h[i].target && !used.count(j)) {
        used.insert(j);
        out[i] = j;
        break;
      }
  }
  return out;
}

}  // namespace

TEST(FigureStream, EachHealGoesToTheEarliestOpenInjectAsTheFirstUnusedLaterHealRuleSaid) {
  // Random interleavings of injects and heals over 2 faults x 3 targets, overlapping and unbalanced.
  std::uint64_t seed = 0x9e3779b97f4a7c15ULL;
  auto next = [&seed](std::uint64_t n) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    return seed % n;
  };
  std::size_t healed = 0, open = 0;
  for (int round = 0; round < 2'000; ++round) {
    fh::Builder b;
    const int events = 1 + static_cast<int>(next(24));
    for (int k = 0; k < events; ++k) {
      Event e = fh::Builder::ev("harness", next(2) ? EventKind::kFaultInject : EventKind::kFaultHeal);
      e.fault = next(2) ? "sigstop" : "partition";
      e.target = "w" + std::to_string(next(3));
      if (next(3) == 0) e.duration_ns = static_cast<std::int64_t>(next(1'000'000'000));
      b.add(e, static_cast<std::int64_t>(1 + next(5'000'000)));
    }
    const std::map<std::size_t, std::size_t> want = heal_of_each_inject(b.h);
    const fh::Figures f = fh::compute_figures(b.h, ReadBack{});
    std::size_t injects = 0;
    for (const Event& e : b.h) injects += e.kind == EventKind::kFaultInject;
    ASSERT_EQ(f.faults.size(), injects);
    for (const fh::FaultWindow& w : f.faults) {
      const auto it = want.find(w.inject_index);
      ASSERT_EQ(w.heal_index.has_value(), it != want.end()) << "round " << round << " inject " << w.inject_index;
      if (!w.heal_index) {
        ++open;
        continue;
      }
      ++healed;
      EXPECT_EQ(*w.heal_index, it->second) << "round " << round;
      const Event& heal = b.h[it->second];
      EXPECT_EQ(w.actual->count(), heal.duration_ns ? *heal.duration_ns : heal.t_ns - w.inject_t_ns);
    }
  }
  // Both outcomes occur often, so the comparison is not vacuous.
  EXPECT_GT(healed, 2'000u);
  EXPECT_GT(open, 2'000u);
}

TEST(FigureStream, ExpiryStateGrowsWithExpiriesNotHoldingsAndALateReleaseStillExplainsItsDelete) {
  // Holders take turns on 10 lock keys of their own (etcd: a key per lease): acquire.ok, grant,
  // a write, then the lock service's delete arrives BEFORE the holder's release.ok (watch order),
  // which must still explain it; every 50th holding expires instead (no release).
  const ReadBack rb;
  const fh::CheckContext context;
  const fh::PackedLog log(rb.log);
  fh::FigureStream figures(rb, log, context);
  std::size_t index = 0;
  std::int64_t t = 0;
  std::vector<Event> history;  // for the second pass
  auto feed = [&](Event e) {
    t += 1'000'000;
    e.t_ns = e.src_ns = t;
    figures.observe(index++, e);
    history.push_back(std::move(e));
  };
  std::size_t expired = 0;
  auto holdings = [&](int from, int to) {
    for (int n = from; n < to; ++n) {
      const std::int64_t token = 2 * n + 1;
      const std::string w = "w" + std::to_string(n % 8);
      const std::string key = fh::kLock + "/" + std::to_string(token);
      Event grant = fh::Builder::ev("lock", EventKind::kLockGrant);
      grant.lock_key = key, grant.token = token, grant.revision = token, grant.lease_id = token;
      feed(grant);
      Event ok = fh::Builder::ev(w, EventKind::kAcquireOk);
      ok.lock = fh::kLock, ok.lock_key = key, ok.token = token, ok.revision = token, ok.lease_id = token;
      feed(ok);
      Event write = fh::Builder::ev(w, EventKind::kWriteOk);
      write.key = fh::kLedgerKey, write.token = token, write.segment = n, write.chunk = 0, write.high_water = token;
      feed(write);
      Event del = fh::Builder::ev("lock", EventKind::kLockDelete);
      del.lock_key = key, del.token = token, del.revision = token + 1;
      feed(del);
      if (n % 50 == 49) {
        ++expired;
        continue;
      }
      Event released = fh::Builder::ev(w, EventKind::kReleaseOk);
      released.lock_key = key, released.token = token, released.revision = token + 1;
      feed(released);
    }
  };
  holdings(0, 10'000);
  const std::size_t early = figures.state_bytes();
  holdings(10'000, 30'000);
  const std::size_t later = figures.state_bytes();
  ASSERT_GT(index, 100'000u);
  // The first pass keeps a delete only until a release.ok explains it, so what stays is the
  // expiries (one in 50 holdings here, about 190 bytes each with its lock key's copy): measured 5.7
  // bytes per holding. (One pass with every holding's records, before: 240; the events themselves
  // would be over 2,000.)
  const double per_holding = static_cast<double>(later - early) / 20'000.0;
  std::cout << "figures: " << per_holding << " bytes of state per holding (" << early << " -> " << later << ")\n";
  EXPECT_LT(per_holding, 12.0) << early << " -> " << later;
  EXPECT_GT(per_holding, 0.0);
  // The candidates (the expiries) want the second pass, which gathers their holders only.
  ASSERT_TRUE(figures.wants_second_pass());
  figures.begin_second_pass();
  EXPECT_FALSE(figures.wants_second_pass());
  for (std::size_t i = 0; i < history.size(); ++i) figures.observe(i, history[i]);
  const std::size_t second = figures.state_bytes();
  std::cout << "figures: " << second << " bytes after the second pass, for " << expired << " candidates\n";
  EXPECT_LT(second, later + expired * 600) << "the second pass keeps records of the candidates' keys only";
  const fh::Figures f = figures.finish();
  ASSERT_EQ(f.expiries_during_work.size(), expired);
  const fh::LeaseExpiry& x = f.expiries_during_work.front();
  EXPECT_EQ(x.worker, "w1");  // holding 49
  EXPECT_EQ(x.token, 99);
  EXPECT_EQ(x.lock_key, fh::kLock + "/99");
  EXPECT_EQ(x.lease_id, 99);
  EXPECT_EQ(x.evidence.size(), 3u);  // grant, acquire.ok, delete
}

TEST(FigureStream, AnIssuerThatSaysExpiredIsBelievedEvenWhenAReleaseCarriedTheRevisionFirst) {
  // w1's release.ok (no release.invoke reported) carries revision 9 before the lock service's
  // delete at 9 arrives: settled as released, unless the issuer's word on the delete is "expired"
  // (delete_is_expiry), which a one-pass reader must not drop early.
  for (const std::string word : {"expired", "", "released"}) {
    fh::Builder b;
    b.acquire_ok("w1", fh::kKey1, 5, 7001);
    b.release_ok("w1", fh::kKey1, 5, 9);
    const std::size_t del = b.lock_delete(fh::kKey1, 5, 9, word);
    const fh::Figures f = fh::compute_figures(b.h, ReadBack{});
    if (word == "expired") {
      ASSERT_EQ(f.expiries_during_work.size(), 1u);
      EXPECT_EQ(f.expiries_during_work[0].evidence.back(), del);
      EXPECT_EQ(f.expiries_during_work[0].worker, "w1");
    } else {
      EXPECT_TRUE(f.expiries_during_work.empty()) << "detail '" << word << "'";
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The whole analysis from the file (analyze_history_file): verdict.json equal to analyze()'s.

TEST(AnalyzeHistoryFile, GivesAnalyzesVerdictJsonOnEveryGoldenCaseEvidenceCopiesIncluded) {
  // Every default checker is streamed, so the file's analysis is the whole of analyze().
  ASSERT_EQ(fh::stream_rule_names().size(), fh::default_checkers().size());
  std::size_t judged = 0, with_evidence = 0, evidence_events = 0, protocol_errors = 0, evidence_passes = 0, caught_all = 0;
  std::size_t second_pass_kept = 0, second_pass_read = 0;
  for (const auto& c : fencecheck::golden::all_cases()) {
    auto loaded = fencecheck::golden::load_case(c);
    if (!std::holds_alternative<fencecheck::golden::LoadedCase>(loaded)) continue;
    const auto& l = std::get<fencecheck::golden::LoadedCase>(loaded);
    const fs::path file = write_file("history.jsonl", c.history);
    const fh::Analysis memory = fh::analyze(l.history, l.readback, l.context);
    const fh::HistoryFileAnalysis streamed = fh::analyze_history_file(file, l.readback, l.context);
    ++judged;
    EXPECT_EQ(streamed.events, l.history.size()) << c.name;
    // Where the state goes: each rule's own peak, then the figures'; their sum bounds the total's peak.
    ASSERT_EQ(streamed.peak_state_by_rule.size(), fh::default_checkers().size() + 1) << c.name;
    EXPECT_EQ(streamed.peak_state_by_rule.front().first, "interleaved-segment");
    EXPECT_EQ(streamed.peak_state_by_rule.back().first, "figures");
    std::size_t sum = 0;
    for (const auto& [part, bytes] : streamed.peak_state_by_rule) sum += bytes;
    EXPECT_GE(sum, streamed.peak_state_bytes) << c.name;
    EXPECT_GT(streamed.peak_state_bytes, 0u) << c.name;
    // verdict.json of both: verdict, every checker and anomaly (descriptions too), every figure,
    // the black boxes, the protocol errors and the copied evidence events.
    const fh::ExpectationResult expectation;
    EXPECT_EQ(fh::to_json(streamed.analysis, expectation).dump(), fh::to_json(memory, expectation).dump()) << c.name;
    EXPECT_EQ(streamed.analysis.evidence_events.size(), memory.evidence_events.size()) << c.name;
    if (!memory.evidence_events.empty()) ++with_evidence;
    evidence_events += memory.evidence_events.size();
    protocol_errors += memory.protocol_errors.size();
    // The rules' passes (up to five: foreign-release's marks, its suspects' records twice, their
    // leases and the late owners' scan; stream_check_test above), plus one for the evidence when
    // there is some to copy.
    const unsigned rule_passes = streamed.passes - (streamed.evidence_pass ? 1u : 0u) -
                                 (streamed.figures_second_pass ? 1u : 0u);
    // The figures' evidence is caught as the passes go (within its budget, far above these
    // cases'): only a rule's anomaly can need a pass of its own to copy its events.
    bool anomalies = false;
    for (const auto& r : memory.checkers) anomalies = anomalies || !r.anomalies.empty();
    if (!anomalies) {
      EXPECT_FALSE(streamed.evidence_pass) << c.name;
    }
    if (streamed.evidence_pass) ++evidence_passes;
    if (!memory.evidence_events.empty() && !streamed.evidence_pass) ++caught_all;
    // The figures' second pass comes exactly when some lease expiry is a candidate: every expiry
    // is one. It runs on the holdings' events kept on the first pass when those hold all it uses,
    // else it reads the file; either way the same figures (and without the keep too).
    EXPECT_FALSE(streamed.figures_second_pass && streamed.figures_second_pass_kept) << c.name;
    if (!memory.figures.expiries_during_work.empty()) {
      EXPECT_TRUE(streamed.figures_second_pass || streamed.figures_second_pass_kept) << c.name;
    }
    if (streamed.figures_second_pass_kept) ++second_pass_kept;
    if (streamed.figures_second_pass) ++second_pass_read;
    if (streamed.figures_second_pass || streamed.figures_second_pass_kept) {
      const fh::HistoryFileAnalysis read = fh::analyze_history_file(file, l.readback, l.context, {}, {}, /*keep_holdings=*/false);
      EXPECT_FALSE(read.figures_second_pass_kept) << c.name;
      EXPECT_TRUE(read.figures_second_pass) << c.name;
      EXPECT_EQ(fh::to_json(read.analysis, expectation).dump(), fh::to_json(memory, expectation).dump()) << c.name;
    }
    EXPECT_TRUE(rule_passes >= 1u && rule_passes <= 5u) << c.name << ": " << streamed.passes;
  }
  std::cout << "analyze_history_file: " << judged << " golden cases, " << with_evidence << " with " << evidence_events
            << " evidence events copied, " << protocol_errors << " protocol errors; " << caught_all
            << " cases with evidence needed no pass to copy it, " << evidence_passes << " did; the figures' second pass ran on "
            << "the kept events in " << second_pass_kept << ", read the file in " << second_pass_read << "\n";
  EXPECT_GE(judged, 354u);
  EXPECT_GT(second_pass_kept, 20u);
  EXPECT_GT(caught_all, 50u);
  EXPECT_GT(evidence_passes, 50u);
  EXPECT_GT(with_evidence, 200u);
  EXPECT_GT(protocol_errors, 0u);
}

TEST(AnalyzeHistoryFile, TheFiguresSecondPassSkipsOnlyLinesThatCannotMatterOnRandomHoldings) {
  // The second pass parses only the lines FigureStream::second_pass_may_want keeps (their kind,
  // lock key, token or revision against the candidate expiries'). On random holdings (keys
  // shared and reused, tokens repeated, releases before and after their deletes, deletes without
  // a revision, job.dones with and without a token, the issuer's word), the figures and the
  // evidence from the file must be compute_figures()'s over the whole history.
  std::mt19937_64 rng(20261203);
  std::size_t with_expiries = 0, second_passes = 0, from_kept = 0, kept_fell_back = 0;
  for (int round = 0; round < 300; ++round) {
    fh::Builder b;
    b.run_start();
    const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
    const int holdings = 3 + pick(25);
    for (int k = 0; k < holdings; ++k) {
      const std::string w = "w" + std::to_string(pick(4));
      const std::string key = fh::kLock + "/" + std::to_string(pick(3) == 0 ? 1 : 100 + pick(12));
      const std::int64_t token = 10 + pick(30);
      const std::int64_t revision = 500 + k * 3 + pick(2);
      if (pick(4) != 0) b.lock_grant(key, token, token);
      b.acquire_ok(w, key, token, token);
      if (pick(3) == 0) b.write_ok(w, token, 0, pick(3), token);
      const int end = pick(6);
      if (end == 0) {
        b.job_done(w, pick(2) == 0 ? std::optional<std::int64_t>(token) : std::nullopt);
      }
      const std::optional<std::int64_t> rev = pick(5) == 0 ? std::nullopt : std::optional<std::int64_t>(revision);
      const std::string word = pick(5) == 0 ? "expired" : pick(6) == 0 ? "released" : "";
      if (end <= 2) {  // released: the release.ok before or after its delete
        if (pick(2) == 0) {
          b.release_ok(w, key, token, rev);
          b.lock_delete(key, token, rev, word);
        } else {
          b.lock_delete(key, token, rev, word);
          b.release_ok(w, key, token, rev);
        }
      } else if (end == 3) {
        b.lock_delete(key, token, rev, word);  // expired under its holder
      }
      if (pick(8) == 0) b.job_done(w, std::nullopt);
    }
    fs::path file = write_history("random-holdings.jsonl", b.h);
    if (round % 3 == 0) {
      // One holdings line written with its "kind" twice, "log" first (the last one wins): a line
      // the fast path refuses, so the second pass must not stop at a key's first occurrence.
      std::vector<std::size_t> holdings_lines;
      for (std::size_t i = 0; i < b.h.size(); ++i)
        if (b.h[i].kind == EventKind::kAcquireOk || b.h[i].kind == EventKind::kLockGrant ||
            b.h[i].kind == EventKind::kJobDone || b.h[i].kind == EventKind::kReleaseOk)
          holdings_lines.push_back(i);
      const std::size_t odd = holdings_lines[static_cast<std::size_t>(pick(static_cast<int>(holdings_lines.size())))];
      std::string text;
      for (std::size_t i = 0; i < b.h.size(); ++i) {
        const std::string line = fencecheck::to_json_line(b.h[i]);
        text += (i == odd ? R"({"kind":"log",)" + line.substr(1) : line) + "\n";
      }
      file = write_file("random-holdings.jsonl", text);
    }
    const fh::Analysis memory = fh::analyze(b.h, ReadBack{}, fh::CheckContext{});
    // The second pass on the file (keep_holdings off), and as a run has it: on the holdings'
    // events kept on the first pass when those hold all it uses (HoldingsKeep), else on the file.
    const fh::HistoryFileAnalysis streamed =
        fh::analyze_history_file(file, ReadBack{}, fh::CheckContext{}, {}, {}, /*keep_holdings=*/false);
    const fh::HistoryFileAnalysis kept = fh::analyze_history_file(file, ReadBack{}, fh::CheckContext{});
    const fh::ExpectationResult expectation;
    ASSERT_EQ(fh::to_json(streamed.analysis, expectation).dump(), fh::to_json(memory, expectation).dump())
        << "round " << round;
    ASSERT_EQ(fh::to_json(kept.analysis, expectation).dump(), fh::to_json(memory, expectation).dump())
        << "round " << round << " (kept events)";
    if (!memory.figures.expiries_during_work.empty()) ++with_expiries;
    if (streamed.figures_second_pass) ++second_passes;
    if (kept.figures_second_pass_kept) ++from_kept;
    if (kept.figures_second_pass) ++kept_fell_back;
  }
  // The rounds reach what the test is about: many with expiries, so with a second pass; and the
  // kept events both served (a holding dropped once over) and did not (a key, token or revision
  // of a candidate among the dropped ones: reused keys, repeated tokens).
  EXPECT_GT(with_expiries, 100u);
  EXPECT_GE(second_passes, with_expiries);
  EXPECT_GT(from_kept, 30u);
  EXPECT_GT(kept_fell_back, 30u);
}

TEST(AnalyzeHistoryFile, AKeyInsideANestedValueDoesNotHideALineFromTheSecondPass) {
  // A review's case: the job.done has no token of its own (its "token" is inside an unknown
  // key's object), so it counts for the holder's work whatever its token; the second pass's
  // filter read the nested "token" as the line's and skipped it, and a lease expiry appeared.
  const std::string text =
      R"({"t_ns":1,"source":"lock","kind":"lock.grant","lock_key":"L/1","token":10,"revision":10})"
      "\n"
      R"({"t_ns":2,"source":"w1","kind":"acquire.ok","lock_key":"L/1","token":10})"
      "\n"
      R"({"t_ns":3,"source":"w1","kind":"job.done","x":{"token":99}})"
      "\n"
      R"({"t_ns":4,"source":"lock","kind":"lock.delete","lock_key":"L/1","token":10,"revision":20})"
      "\n";
  for (const std::string nested : {R"({"token":99})", R"([{"token":99}])"}) {
    std::string t = text;
    t.replace(t.find(R"({"token":99})"), std::string(R"({"token":99})").size(), nested);
    const fs::path file = write_file("nested-token.jsonl", t);
    const fh::Analysis memory = fh::analyze(fh::load_history_jsonl(file), ReadBack{}, fh::CheckContext{});
    const fh::HistoryFileAnalysis streamed =
        fh::analyze_history_file(file, ReadBack{}, fh::CheckContext{}, {}, {}, /*keep_holdings=*/false);
    EXPECT_TRUE(memory.figures.expiries_during_work.empty()) << nested;
    const fh::ExpectationResult expectation;
    EXPECT_EQ(fh::to_json(streamed.analysis, expectation).dump(), fh::to_json(memory, expectation).dump()) << nested;
    EXPECT_TRUE(streamed.figures_second_pass) << nested;
    const fh::HistoryFileAnalysis kept = fh::analyze_history_file(file, ReadBack{}, fh::CheckContext{});
    EXPECT_EQ(fh::to_json(kept.analysis, expectation).dump(), fh::to_json(memory, expectation).dump()) << nested;
    EXPECT_TRUE(kept.figures_second_pass_kept) << nested;
  }
}

namespace {

/// analyze_history_file() of `h` with the holdings' events kept (as a run has it): the analysis
/// must be analyze()'s, and `read_file` says whether the figures' second pass must have read the
/// file (the kept events could not serve) or run on the kept ones.
void expect_kept_or_read(const fh::History& h, bool read_file, const std::string& what) {
  const fs::path file = write_history("kept.jsonl", h);
  const fh::Analysis memory = fh::analyze(h, ReadBack{}, fh::CheckContext{});
  const fh::HistoryFileAnalysis streamed = fh::analyze_history_file(file, ReadBack{}, fh::CheckContext{});
  const fh::ExpectationResult expectation;
  EXPECT_EQ(fh::to_json(streamed.analysis, expectation).dump(), fh::to_json(memory, expectation).dump()) << what;
  EXPECT_EQ(streamed.figures_second_pass, read_file) << what;
  EXPECT_EQ(streamed.figures_second_pass_kept, !read_file) << what;
}

/// A holding of `key` with `token` released at once (its delete settled by its release.ok's
/// revision): the keep drops its events.
void released_holding(fh::Builder& b, const std::string& w, const std::string& key, std::int64_t token,
                      std::int64_t revision, bool done) {
  b.acquire_ok(w, key, token, token);
  if (done) b.job_done(w, token);
  b.lock_delete(key, token, revision);
  b.release_ok(w, key, token, revision);
}

}  // namespace

TEST(AnalyzeHistoryFile, EachThingTheKeptHoldingsDroppedMakesTheSecondPassReadTheFileWhenACandidateNeedsIt) {
  // HoldingsKeep drops a holding's events once its delete is settled and writes down what it
  // dropped; a candidate expiry that needs any of it must send the second pass to the file. Each
  // history below is caught by one of those notes alone (without it the figures would differ: an
  // expiry found or lost), and beside each a control where nothing dropped is needed.
  const std::string k1 = fh::kLock + "/1", k2 = fh::kLock + "/2";
  {  // The lock key: an untokened delete of a key whose earlier holding was dropped (its holder).
    for (const bool conflict : {true, false}) {
      fh::Builder b;
      b.run_start();
      released_holding(b, "w1", conflict ? k1 : k2, 10, 100, false);
      const std::size_t d = b.lock_delete(k1, 0, std::nullopt);
      b.h.events[d].token.reset();
      expect_kept_or_read(b.h, conflict, conflict ? "key: reused" : "key: control");
    }
  }
  {  // The revision: a second delete with the revision a dropped release.ok carried (released).
    for (const bool conflict : {true, false}) {
      fh::Builder b;
      b.run_start();
      released_holding(b, "w1", k1, 10, 100, false);
      b.acquire_ok("w2", k2, 20, 20);
      b.lock_delete(k2, 20, conflict ? 100 : 200);
      expect_kept_or_read(b.h, conflict, conflict ? "revision: reused" : "revision: control");
    }
  }
  // The token and a job.done: a holding with its job.done dropped, then more holdings dropped
  // than the keep remembers for late events (4,096), then the same token again under another key,
  // whose delete is a candidate: with its token (the token note) or without (the job.done note).
  for (const bool untokened : {false, true}) {
    for (const bool conflict : {true, false}) {
      fh::Builder b;
      b.run_start();
      // The control: another token (with its job.done) beside a candidate with a token; no job.done
      // dropped beside one without (any dropped job.done with a token may be that holder's then).
      released_holding(b, "w1", k1, conflict || untokened ? 10 : 11, 100, conflict || !untokened);
      for (int n = 0; n < 4200; ++n)
        released_holding(b, "w9", fh::kLock + "/f" + std::to_string(n), 1000 + n, 10'000 + n, false);
      b.acquire_ok("w1", k2, 10, 10);
      const std::size_t d = b.lock_delete(k2, 10, 90'000);
      if (untokened) b.h.events[d].token.reset();
      expect_kept_or_read(b.h, conflict, std::string(untokened ? "job.done" : "token") + (conflict ? ": dropped" : ": control"));
    }
  }
}

TEST(AnalyzeHistoryFile, ACheckerWithoutAStreamedRuleIsNamed) {
  fh::Builder b;
  b.run_start();
  const fs::path p = write_history("one.jsonl", b.h);
  try {
    (void)fh::analyze_history_file(p, ReadBack{}, fh::CheckContext{}, {"no-such-checker"});
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-checker"), std::string::npos) << e.what();
  }
}

// stale-write-accepted reads the log per key in seq order: a log given out of seq order (a
// resource may list it so) finds the same stale write as the same log in order, with the same seqs.
TEST(StreamStaleWrite, ALogOutOfSeqOrderIsJudgedInSeqOrder) {
  auto entry = [](std::int64_t seq, std::int64_t token, std::string client) {
    return fencecheck::AcceptedWrite{seq, "ledger", 0, seq % 4, token, std::move(client)};
  };
  // In seq order: token 7 is accepted after token 9 on the same key (seq 3 after seq 2).
  ReadBack ordered;
  ordered.log = {entry(1, 5, "w1"), entry(2, 9, "w2"), entry(3, 7, "w1"), entry(4, 9, "w2")};
  ReadBack shuffled;
  shuffled.log = {entry(4, 9, "w2"), entry(3, 7, "w1"), entry(1, 5, "w1"), entry(2, 9, "w2")};
  const fh::History none;
  auto result = [&](const ReadBack& rb) {
    auto rule = fh::make_stream_rule("stale-write-accepted");
    return fh::run_stream_rule(*rule, none, rb, fh::CheckContext{});
  };
  const fh::CheckerResult a = result(ordered), b = result(shuffled);
  ASSERT_EQ(a.anomalies.size(), 1u);
  EXPECT_EQ(a.anomalies[0].tokens, (std::vector<std::int64_t>{7, 9}));
  EXPECT_EQ(a.anomalies[0].readback_seqs, (std::vector<std::int64_t>{2, 3}));
  ASSERT_EQ(b.anomalies.size(), 1u);
  EXPECT_EQ(b.anomalies[0].tokens, a.anomalies[0].tokens);
  EXPECT_EQ(b.anomalies[0].readback_seqs, a.anomalies[0].readback_seqs);
  EXPECT_EQ(b.anomalies[0].description, a.anomalies[0].description);
  // In the order given, the first entry (token 9, seq 4) would make token 7 (seq 3) stale against
  // seq 4, and token 5 (seq 1) stale too: reading in seq order is what keeps it to one.
}
