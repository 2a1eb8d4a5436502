// The streamed rules (stream_check.h): check_history_file(), reading history.jsonl(.zst) one event
// at a time, gives what run_checkers() gives on the loaded history for the same checkers, on every
// case of the checkers' golden record; the rules' state stays bounded on a long history while an
// old invoke they must still see is kept; the driver's errors.
#include "fencecheck/harness/stream_check.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "../harness/history_builder.h"
#include "fencecheck/harness/checkers.h"
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
  rule->begin(rb, ctx);
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

/// The streamed rule `name`, begun with `rb` and `ctx` (which must outlive it).
std::unique_ptr<fh::StreamRule> begun(std::string_view name, const ReadBack& rb, const fh::CheckContext& ctx) {
  auto rule = fh::make_stream_rule(name);
  if (rule) rule->begin(rb, ctx);
  return rule;
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
Event fenced_fail(const std::string& w, std::int64_t token, std::int64_t mark, const std::string& key = fh::kKey) {
  Event e = fh::Builder::ev(w, EventKind::kWriteFail);
  e.key = key;
  e.token = token;
  e.high_water = mark;
  return e;
}

Event write_invoke(const std::string& w, std::int64_t token, const std::string& key = fh::kKey) {
  Event e = fh::Builder::ev(w, EventKind::kWriteInvoke);
  e.key = key;
  e.token = token;
  return e;
}

TEST(StreamRejectionStorm, StateGrowsOnlyAFewBytesPerHoldingAndAnOldTokenStillFindsItsInvoke) {
  // Holders take turns: each holding writes 4 times with a new token and has one write fenced
  // (then it re-acquires, as it must): no storm, but each holding leaves an entry (its counts, and
  // its worker's latest invoke of that token), which a later fail of that token would need.
  fh::CheckContext ctx;
  const ReadBack rb;
  auto rule = begun("rejection-storm", rb, ctx);
  ASSERT_NE(rule, nullptr);
  std::size_t index = 0;
  const std::size_t old_invoke = index;
  rule->observe(index++, write_invoke("w0", 7));
  const std::size_t old_fail = index;
  rule->observe(index++, fenced_fail("w0", 7, 8));
  std::int64_t token = 100;
  auto holdings = [&](int n) {
    for (int h = 0; h < n; ++h) {
      const std::string w = "w" + std::to_string(h % 4);
      ++token;
      for (int k = 0; k < 4; ++k) {
        rule->observe(index++, write_invoke(w, token));
        Event ok = write_ok_event(w, token, fh::kKey, 0);
        rule->observe(index++, ok);
      }
      rule->observe(index++, write_invoke(w, token));
      rule->observe(index++, fenced_fail(w, token, token + 1));
    }
  };
  holdings(2'000);
  const std::size_t early = rule->state_bytes();
  holdings(10'000);
  const std::size_t later = rule->state_bytes();
  const std::size_t per_holding = (later - early) / 10'000;
  std::cout << "rejection-storm: " << early << " bytes after 2,000 holdings, " << later << " after 12,000 ("
            << per_holding << " bytes per holding, " << index << " events)\n";
  EXPECT_LE(per_holding, 200u);  // 124 measured (a 40-byte fail, its counts, its invoke; capacity included)
  // w0 goes back to token 7 (after 12,000 other tokens): its second fenced fail is a storm, and
  // both fails cite the invoke of token 7.
  const std::size_t again = index;
  rule->observe(index++, fenced_fail("w0", 7, 9));
  const fh::CheckerResult r = rule->finish(fh::StreamEnd{index, {}});
  ASSERT_EQ(r.anomalies.size(), 1u);
  EXPECT_EQ(r.anomalies[0].evidence, (std::vector<std::size_t>{old_invoke, old_fail, again}));
  EXPECT_EQ(r.anomalies[0].description,
            "w0 had 2 writes rejected with the same token 7 (2 write.fail event(s), 0 rejection(s) recorded by the "
            "resource; key ledger, high-water 8, 9): after a rejection a holder must stop and re-acquire, never retry "
            "the same token");
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

TEST(StreamStaleWrite, StateGrowsOnlyWithTheTokensThatRaisedAKey) {
  // 4 holders take turns on 2 keys, each holding writing 20 chunks: state per holding, not per event.
  auto rule = fh::make_stream_rule("stale-write-accepted");
  const ReadBack rb;
  rule->begin(rb, fh::CheckContext{});
  std::size_t index = 0;
  std::int64_t t = 0;
  auto holdings = [&](int from, int to) {
    for (int token = from; token < to; ++token) {
      const std::string w = "w" + std::to_string(token % 4);
      for (int c = 0; c < 20; ++c) {
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
  holdings(1, 1'001);
  const std::size_t early = rule->state_bytes();
  holdings(1'001, 11'001);  // 400,000 more events, 10,000 more tokens
  const std::size_t later = rule->state_bytes();
  EXPECT_LT(later - early, 10'000u * 64) << early << " -> " << later << " bytes";
  EXPECT_FALSE(rule->wants_another_pass());
  EXPECT_TRUE(rule->finish(fh::StreamEnd{index, {}}).anomalies.empty());
}

}  // namespace
