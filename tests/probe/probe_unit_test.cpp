// fencecheck probe, in process: each rule's verdict against an in-memory resource whose fencing
// rule the test chooses (fake_resource.h); token-required against raw loopback HTTP servers; the
// probe file loader; and probe_command's exit codes through its open() seam (3 for an unreachable
// resource, 2 for a field the resource refuses), with its JSON and JUnit files.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <pugixml.hpp>

#include "../support/raw_http_server.h"
#include "../support/temp_dir.h"
#include "fake_resource.h"
#include "fencecheck/harness/probe.h"
#include "fencecheck/proto/chunk.h"

namespace fencecheck::harness {
namespace {

namespace fs = std::filesystem;
using fencecheck::testing::FakeInstance;
using fencecheck::testing::FakeResource;
using fencecheck::testing::FakeRules;
using fencecheck::testing::FakeWriter;
using fencecheck::testing::RawHttpServer;
using fencecheck::testing::TempDir;
using ::testing::HasSubstr;

ProbeOptions small_options() {
  ProbeOptions o;
  o.rounds = 10;
  o.key_prefix = "fencecheck-probe-test";
  return o;
}

ProbeWriterFactory writers_of(FakeResource& r) {
  return [&r](const nlohmann::json&, std::chrono::milliseconds) { return std::make_unique<FakeWriter>(r); };
}

/// Runs the probe on a fake with these rules; `embedded` and `evidence` as the kind would say.
struct Probed {
  FakeResource resource;
  FakeInstance instance;
  ProbeReport report;
  Probed(FakeRules rules, nlohmann::json endpoint = {{"kind", "fake"}}, bool embedded = true,
         resources::Evidence evidence = {}, ProbeOptions options = small_options())
      : resource(rules), instance(resource, std::move(endpoint)) {
    ProbeTarget t;
    t.instance = &instance;
    t.kind = "fake";
    t.design = "test";
    t.embedded = embedded;
    t.evidence = evidence;
    t.source = "fake.yaml";
    report = run_probe(t, options, writers_of(resource));
  }
  const ProbeRuleResult& rule(std::string_view name) const {
    for (const auto& r : report.rules)
      if (r.rule == name) return r;
    throw std::logic_error("no rule " + std::string(name));
  }
  std::map<std::string, std::string> verdicts() const {
    std::map<std::string, std::string> out;
    for (const auto& r : report.rules) out[r.rule] = std::string(to_string(r.verdict));
    return out;
  }
};

TEST(ProbeRules, ACorrectResourceHoldsEveryRuleTokenRequiredNeedsAUrl) {
  Probed p(FakeRules{});
  const std::map<std::string, std::string> want{{"lower-token-rejected", "holds"}, {"equal-token", "holds"},
                                                {"per-key", "holds"},              {"concurrent", "holds"},
                                                {"rejection-changes-nothing", "holds"}, {"token-required", "not-applicable"},
                                                {"survives-restart", "holds"}};
  EXPECT_EQ(p.verdicts(), want);
  EXPECT_EQ(probe_exit_code(p.report), 0);
  // The rules run in the documented order.
  ASSERT_EQ(p.report.rules.size(), 7u);
  for (std::size_t i = 0; i < 7; ++i) EXPECT_EQ(p.report.rules[i].rule, probe_rule_names()[i]);

  // lower-token-rejected: at each boundary b, token b accepted on a fresh key, then b - 1 on the
  // same key rejected citing b: 9 after 10 first.
  const auto& lower = p.rule("lower-token-rejected");
  ASSERT_EQ(lower.steps.size(), 14u);
  EXPECT_EQ(lower.steps[0].key, "fencecheck-probe-test-lower-10");
  EXPECT_EQ(lower.steps[0].token, 10);
  EXPECT_EQ(lower.steps[0].outcome, "accepted");
  EXPECT_EQ(lower.steps[1].token, 9);
  EXPECT_EQ(lower.steps[1].outcome, "rejected");
  EXPECT_EQ(lower.steps[1].high_water, 10);
  EXPECT_EQ(lower.steps[13].key, "fencecheck-probe-test-lower-9007199254740992");
  EXPECT_EQ(lower.steps[13].token, 9007199254740991);
  EXPECT_EQ(lower.evidence,
            "token b - 1 after b on a fresh key, rejected at each of 7 boundary crossings: 9 after 10, 99 after 100, "
            "999 after 1000, 9999 after 10000, 2147483647 after 2147483648, 4294967295 after 4294967296 and "
            "9007199254740991 after 9007199254740992");
  EXPECT_LE(lower.steps[0].replied_ms, lower.steps[1].sent_ms);

  // Every key written has the probe's prefix and is listed once; nothing else was written.
  std::set<std::string> written;
  for (const auto& w : p.resource.writes()) {
    EXPECT_EQ(w.key.rfind("fencecheck-probe-test-", 0), 0u) << w.key;
    written.insert(w.key);
  }
  EXPECT_EQ(written, std::set<std::string>(p.report.keys.begin(), p.report.keys.end()));
  EXPECT_EQ(p.report.keys.size(), 7u + 5u + 10u);  // 7 lower-<b>, equal a b no-change restart + 10 rounds (no url: no "token")
  EXPECT_EQ(p.resource.restarts(), 1);

  // concurrent: 10 rounds x 4 writers, every writer's first write sent; the highest token of each
  // round writes all 3 chunks.
  const auto& c = p.rule("concurrent");
  EXPECT_THAT(c.evidence, HasSubstr("10 rounds x 4 writers"));
  EXPECT_THAT(c.evidence, HasSubstr("checked: replies in real time, reply seqs, the accept log"));
  std::map<std::string, std::int64_t> top_token;
  for (const auto& w : p.resource.writes())
    if (w.key.find("-concurrent-") != std::string::npos) top_token[w.key] = std::max(top_token[w.key], w.token);
  EXPECT_EQ(top_token.size(), 10u);
  for (const auto& [key, top] : top_token) {
    const auto writes = p.resource.writes();
    EXPECT_EQ(std::count_if(writes.begin(), writes.end(), [&, key = key, top = top](const auto& w) { return w.key == key && w.token == top; }), 3)
        << key;
  }
}

TEST(ProbeRules, AResourceComparingTokensAsTextIsCaughtAtTheDigitBoundary) {
  // Issue 31, item 2: "10" < "9" as text. The old tokens (1001..1208, all four digits) never
  // crossed a digit-length boundary, so such a resource held every rule.
  FakeRules rules;
  rules.compare = FakeRules::Compare::kAsText;
  Probed p(rules);
  const auto& lower = p.rule("lower-token-rejected");
  EXPECT_EQ(lower.verdict, ProbeVerdict::kBroken) << lower.evidence;
  EXPECT_EQ(lower.anomaly, "stale-write-accepted");
  EXPECT_EQ(lower.evidence,
            "the lower token was accepted at 4 of 7 boundary crossings: 9 after 10, 99 after 100, 999 after 1000 and "
            "9999 after 10000; rejected at 2147483647 after 2147483648, 4294967295 after 4294967296 and "
            "9007199254740991 after 9007199254740992 (a resource that compares tokens as text, \"10\" < \"9\", or "
            "keeps them in too few bits)");
  EXPECT_EQ(lower.steps[1].token, 9);
  EXPECT_EQ(lower.steps[1].outcome, "accepted");
  EXPECT_EQ(lower.steps[1].note, "a lower token accepted after 10");
  // Every other rule's tokens have one length (2^53 + 1 ...): text order is number order there.
  EXPECT_EQ(p.rule("concurrent").verdict, ProbeVerdict::kHolds) << p.rule("concurrent").evidence;
  EXPECT_EQ(p.rule("equal-token").verdict, ProbeVerdict::kHolds);
  EXPECT_EQ(probe_exit_code(p.report), 1);
}

TEST(ProbeTokens, TheCrossingsAreTheFirstFourPowersOfTenAndTheBinaryBoundariesAboveTheBase) {
  EXPECT_EQ(probe_token_crossings(0), (std::vector<std::int64_t>{10, 100, 1000, 10000, std::int64_t{1} << 31,
                                                                 std::int64_t{1} << 32, std::int64_t{1} << 53}));
  // b - 1 must be above the base: 9 is not above 9.
  EXPECT_EQ(probe_token_crossings(9).front(), 100);
  EXPECT_EQ(probe_token_crossings(8).front(), 10);
  EXPECT_EQ(probe_token_crossings(5'000'000'000),
            (std::vector<std::int64_t>{10'000'000'000, 100'000'000'000, 1'000'000'000'000, 10'000'000'000'000,
                                       std::int64_t{1} << 53}));
  EXPECT_EQ(probe_token_crossings(std::int64_t{1} << 53),
            (std::vector<std::int64_t>{10'000'000'000'000'000, 100'000'000'000'000'000}));
  EXPECT_TRUE(probe_token_crossings(std::int64_t{1} << 62).empty());
}

TEST(ProbeTokens, ABaseAboveEveryBoundaryTestsOnePairAboveIt) {
  ProbeOptions o = small_options();
  o.token_base = std::int64_t{1} << 62;
  Probed p(FakeRules{}, {{"kind", "fake"}}, true, {}, o);
  const auto& lower = p.rule("lower-token-rejected");
  EXPECT_EQ(lower.verdict, ProbeVerdict::kHolds) << lower.evidence;
  ASSERT_EQ(lower.steps.size(), 2u);
  EXPECT_EQ(lower.steps[0].key, "fencecheck-probe-test-lower");
  EXPECT_EQ(lower.steps[0].token, (std::int64_t{1} << 62) + 2);
  for (const auto& w : p.resource.writes()) EXPECT_GT(w.token, std::int64_t{1} << 62) << w.key;
}

TEST(ProbeRules, ConcurrentStopsOnceARoundShowsTheRuleBroken) {
  // No fence: every round's replies show a lower token accepted after a higher one; the rounds
  // after the first that shows it are not run (a check-then-write store took 32.7 s for 50).
  FakeRules rules;
  rules.compare = FakeRules::Compare::kNone;
  ProbeOptions o = small_options();
  o.rounds = 50;
  Probed p(rules, {{"kind", "fake"}}, true, {}, o);
  const auto& c = p.rule("concurrent");
  EXPECT_EQ(c.verdict, ProbeVerdict::kBroken);
  EXPECT_THAT(c.evidence, HasSubstr(" of 50 rounds (stopped once a round showed the rule broken) x 4 writers"));
  std::set<std::string> concurrent_keys;
  for (const auto& w : p.resource.writes())
    if (w.key.find("-concurrent-") != std::string::npos) concurrent_keys.insert(w.key);
  EXPECT_LT(concurrent_keys.size(), 50u);
  EXPECT_EQ(std::count_if(p.report.keys.begin(), p.report.keys.end(),
                          [](const std::string& k) { return k.find("-concurrent-") != std::string::npos; }),
            static_cast<std::ptrdiff_t>(concurrent_keys.size()))
      << "only the rounds run are listed as written";
}

TEST(ProbeRules, AStrictComparisonFencesTheHolderOut) {
  FakeRules rules;
  rules.compare = FakeRules::Compare::kAbove;
  Probed p(rules);
  const auto& eq = p.rule("equal-token");
  EXPECT_EQ(eq.verdict, ProbeVerdict::kBroken);
  EXPECT_EQ(eq.anomaly, "fenced-out");
  ASSERT_EQ(eq.steps.size(), 2u);
  EXPECT_EQ(eq.steps[0].token, eq.steps[1].token);
  EXPECT_EQ(eq.steps[0].outcome, "accepted");
  EXPECT_EQ(eq.steps[1].outcome, "rejected");
  EXPECT_EQ(eq.steps[1].chunk, 1);
  EXPECT_EQ(p.rule("lower-token-rejected").verdict, ProbeVerdict::kHolds);
  EXPECT_EQ(p.rule("concurrent").verdict, ProbeVerdict::kHolds);
  EXPECT_EQ(probe_exit_code(p.report), 1);
}

TEST(ProbeRules, NoFenceBreaksLowerAndConcurrentAndLeavesTheRejectionRulesUnknown) {
  FakeRules rules;
  rules.compare = FakeRules::Compare::kNone;
  Probed p(rules);
  EXPECT_EQ(p.rule("lower-token-rejected").verdict, ProbeVerdict::kBroken);
  EXPECT_EQ(p.rule("lower-token-rejected").anomaly, "stale-write-accepted");
  const auto& c = p.rule("concurrent");
  EXPECT_EQ(c.verdict, ProbeVerdict::kBroken);
  EXPECT_EQ(c.anomaly, "stale-write-accepted");
  // The cited pair: a lower token accepted after a higher one on the same key.
  ASSERT_GE(c.steps.size(), 2u);
  EXPECT_EQ(c.steps[0].key, c.steps[1].key);
  EXPECT_GT(c.steps[0].token, c.steps[1].token);
  EXPECT_EQ(c.steps[1].outcome, "accepted");
  // Nothing was rejected, so there is no rejection to examine and no mark to lose: unknown.
  EXPECT_EQ(p.rule("rejection-changes-nothing").verdict, ProbeVerdict::kUnknown);
  EXPECT_EQ(p.rule("survives-restart").verdict, ProbeVerdict::kUnknown);
  EXPECT_EQ(p.resource.restarts(), 0);  // not restarted: the rule stopped before
  EXPECT_EQ(p.rule("equal-token").verdict, ProbeVerdict::kHolds);
  EXPECT_EQ(p.rule("per-key").verdict, ProbeVerdict::kHolds);
}

TEST(ProbeRules, OneMarkForEveryKeyIsCrossKeyRejection) {
  FakeRules rules;
  rules.global = true;
  Probed p(rules);
  const auto& pk = p.rule("per-key");
  EXPECT_EQ(pk.verdict, ProbeVerdict::kBroken);
  EXPECT_EQ(pk.anomaly, "cross-key-rejection");
  ASSERT_EQ(pk.steps.size(), 2u);
  EXPECT_EQ(pk.steps[0].key, "fencecheck-probe-test-per-key-a");
  EXPECT_EQ(pk.steps[1].key, "fencecheck-probe-test-per-key-b");
  EXPECT_LT(pk.steps[1].token, pk.steps[0].token);
  EXPECT_EQ(pk.steps[1].high_water, pk.steps[0].token);  // the other key's mark
  // Every other sequence uses tokens above all earlier ones: a global mark breaks only per-key.
  for (const auto& r : p.report.rules)
    if (r.rule != "per-key" && r.rule != "token-required") {
      EXPECT_EQ(r.verdict, ProbeVerdict::kHolds) << r.rule;
    }
}

TEST(ProbeRules, ARejectedWriteThatIsStoredAnywayIsCaughtByTheReadBack) {
  FakeRules rules;
  rules.store_rejected = true;
  Probed p(rules);
  const auto& nc = p.rule("rejection-changes-nothing");
  EXPECT_EQ(nc.verdict, ProbeVerdict::kBroken);
  EXPECT_THAT(nc.evidence, HasSubstr("seg 0 chunk 0 changed: token "));
  EXPECT_THAT(nc.evidence, HasSubstr("seg 0 chunk 1 appeared: token "));
  EXPECT_THAT(nc.evidence, HasSubstr("accept log 1 -> 3 entries"));
  // The replies alone look right: both lower writes were answered "rejected".
  std::size_t rejected = 0;
  for (const auto& s : nc.steps) rejected += s.op == "write" && s.outcome == "rejected";
  EXPECT_EQ(rejected, 2u);
  EXPECT_EQ(p.rule("lower-token-rejected").verdict, ProbeVerdict::kHolds);
}

TEST(ProbeRules, AMarkLostInARestartIsBroken) {
  FakeRules rules;
  rules.lose_mark_on_restart = true;
  Probed p(rules);
  const auto& rs = p.rule("survives-restart");
  EXPECT_EQ(rs.verdict, ProbeVerdict::kBroken);
  EXPECT_EQ(rs.anomaly, "stale-write-accepted");
  ASSERT_EQ(rs.steps.size(), 4u);
  EXPECT_EQ(rs.steps[1].outcome, "rejected");  // before the restart the mark held
  EXPECT_EQ(rs.steps[2].op, "restart");
  EXPECT_EQ(rs.steps[2].outcome, "ok");
  EXPECT_EQ(rs.steps[3].outcome, "accepted");
  EXPECT_LT(rs.steps[3].token, rs.steps[0].token);
  EXPECT_EQ(p.resource.restarts(), 1);
}

TEST(ProbeRules, AnExternalResourceIsNeverRestarted) {
  Probed p(FakeRules{}, {{"kind", "fake"}}, /*embedded=*/false);
  EXPECT_EQ(p.rule("survives-restart").verdict, ProbeVerdict::kNotApplicable);
  EXPECT_THAT(p.rule("survives-restart").evidence, HasSubstr("external"));
  EXPECT_TRUE(p.rule("survives-restart").steps.empty());
  EXPECT_EQ(p.resource.restarts(), 0);
  EXPECT_EQ(probe_exit_code(p.report), 0);
}

TEST(ProbeRules, AKindThatCannotRestartIsNotApplicable) {
  FakeRules rules;
  rules.restartable = false;
  Probed p(rules);
  EXPECT_EQ(p.rule("survives-restart").verdict, ProbeVerdict::kNotApplicable);
  EXPECT_THAT(p.rule("survives-restart").evidence, HasSubstr("cannot restart"));
}

TEST(ProbeRules, AReadBackThatFailsLeavesTheRulesThatNeedItUnknown) {
  FakeRules rules;
  rules.readback_fails = true;
  Probed p(rules);
  EXPECT_EQ(p.rule("rejection-changes-nothing").verdict, ProbeVerdict::kUnknown);
  EXPECT_THAT(p.rule("rejection-changes-nothing").evidence, HasSubstr("fake: the read-back does not answer"));
  EXPECT_EQ(p.rule("concurrent").verdict, ProbeVerdict::kUnknown);  // the kind claims an accept log
  EXPECT_THAT(p.rule("concurrent").evidence, HasSubstr("accept log could not be read"));
  EXPECT_EQ(probe_exit_code(p.report), 1);

  // A kind that says it has no read-back at all: not applicable, and concurrent judged on replies.
  resources::Evidence none{false, false, false, false, false};
  Probed q(rules, {{"kind", "fake"}}, true, none);
  EXPECT_EQ(q.rule("rejection-changes-nothing").verdict, ProbeVerdict::kNotApplicable);
  EXPECT_EQ(q.rule("concurrent").verdict, ProbeVerdict::kHolds);
  EXPECT_THAT(q.rule("concurrent").evidence, HasSubstr("checked: replies in real time, reply seqs)"));
}

TEST(ProbeRules, UnknownOutcomesAreNeverCountedAsHolding) {
  FakeRules rules;
  rules.unknown_outcomes = true;
  Probed p(rules);
  for (const auto& r : p.report.rules) {
    if (r.rule == "token-required") continue;
    EXPECT_EQ(r.verdict, ProbeVerdict::kUnknown) << r.rule << ": " << r.evidence;
  }
  EXPECT_THAT(p.rule("lower-token-rejected").evidence, HasSubstr("fake: no reply"));
  EXPECT_EQ(probe_exit_code(p.report), 1);
}

TEST(ProbeRules, TheSeedDecidesWhichWriterHoldsWhichToken) {
  auto plan = [](std::uint64_t seed) {
    ProbeOptions o = small_options();
    o.seed = seed;
    Probed p(FakeRules{}, {{"kind", "fake"}}, true, {}, o);
    std::map<std::pair<std::string, std::int64_t>, std::int64_t> tokens;  // (key, writer) -> token
    for (const auto& w : p.resource.writes())
      if (w.key.find("-concurrent-") != std::string::npos) tokens[{w.key, w.segment}] = w.token;
    return tokens;
  };
  const auto a = plan(7), b = plan(7), c = plan(8);
  EXPECT_EQ(a.size(), 40u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(ProbeRules, OptionsOutOfRangeAreRefused) {
  FakeResource r;
  FakeInstance inst(r);
  ProbeTarget t;
  t.instance = &inst;
  ProbeOptions o = small_options();
  o.rounds = 0;
  EXPECT_THROW((void)run_probe(t, o, writers_of(r)), std::invalid_argument);
  o = small_options();
  o.writers = 1;
  EXPECT_THROW((void)run_probe(t, o, writers_of(r)), std::invalid_argument);
  o = small_options();
  o.key_prefix = "has space";
  EXPECT_THROW((void)run_probe(t, o, writers_of(r)), std::invalid_argument);
  EXPECT_TRUE(r.writes().empty());
}

TEST(ProbeRules, AGeneratedKeyPrefixIsFreshEachTime) {
  ProbeOptions o = small_options();
  o.key_prefix.clear();
  o.rounds = 1;
  Probed a(FakeRules{}, {{"kind", "fake"}}, true, {}, o), b(FakeRules{}, {{"kind", "fake"}}, true, {}, o);
  EXPECT_THAT(a.report.options.key_prefix, ::testing::MatchesRegex("fencecheck-probe-[0-9a-f]{8}"));
  EXPECT_NE(a.report.options.key_prefix, b.report.options.key_prefix);
}

// ---------------------------------------------------------------- token-required (raw HTTP)

/// A server that answers as `status_for(request)` says, with a JSON error body.
RawHttpServer::Respond answer(std::function<int(const std::string&)> status_for) {
  return [status_for](int fd, const std::string& request, RawHttpServer&) {
    const int status = status_for(request);
    const std::string body = status >= 400 ? R"({"error":"no"})" : R"({"accepted":true})";
    RawHttpServer::send_all(fd, "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: application/json\r\nContent-Length: " +
                                    std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
  };
}

/// The request's header `name` ("" when absent).
std::string header_of(const std::string& request, const std::string& name) {
  const auto at = request.find("\r\n" + name + ": ");
  if (at == std::string::npos) return "";
  const auto start = at + 4 + name.size();
  return request.substr(start, request.find("\r\n", start) - start);
}

TEST(ProbeTokenRequired, RefusedBadTokensAndAnAcceptedControlHold) {
  // The service's own contract: a custom path and token header, both taken from the endpoint.
  RawHttpServer server(answer([](const std::string& req) {
    const std::string t = header_of(req, "X-Fence");
    return !t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; }) ? 200 : 400;
  }));
  Probed p(FakeRules{}, {{"kind", "fake"}, {"url", server.url() + "/base"}, {"method", "POST"},
                         {"path", "/w/{key}/{segment}/{chunk}"}, {"token_header", "X-Fence"}, {"writer_header", "X-Who"}});
  const auto& tr = p.rule("token-required");
  EXPECT_EQ(tr.verdict, ProbeVerdict::kHolds) << tr.evidence;
  EXPECT_EQ(tr.evidence, "refused: (none): HTTP 400, \"abc\": HTTP 400, \"-1\": HTTP 400; control token 9007199254741038: HTTP 200; nothing stored");
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[0].rfind("POST /base/w/fencecheck-probe-test-token/0/0 HTTP/1.1\r\n", 0), 0u) << reqs[0];
  EXPECT_EQ(header_of(reqs[0], "X-Fence"), "");
  EXPECT_EQ(header_of(reqs[1], "X-Fence"), "abc");
  EXPECT_EQ(header_of(reqs[2], "X-Fence"), "-1");
  EXPECT_EQ(header_of(reqs[3], "X-Fence"), "9007199254741038");  // 2^53 (the last crossing) + 46 tokens of the rules after it
  EXPECT_EQ(header_of(reqs[3], "X-Who"), "probe");
  EXPECT_EQ(reqs[3].rfind("POST /base/w/fencecheck-probe-test-token/0/3 ", 0), 0u);
}

TEST(ProbeTokenRequired, AServiceThatAcceptsAnyTokenIsBroken) {
  RawHttpServer server(answer([](const std::string&) { return 200; }));
  Probed p(FakeRules{}, {{"kind", "fake"}, {"url", server.url()}});
  const auto& tr = p.rule("token-required");
  EXPECT_EQ(tr.verdict, ProbeVerdict::kBroken);
  EXPECT_THAT(tr.evidence, HasSubstr("accepted (token (none), \"abc\", \"-1\")"));
  // The default contract (fencecheck-store's): PUT, Fencing-Token.
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[0].rfind("PUT /v1/keys/fencecheck-probe-test-token/segments/0/chunks/0 HTTP/1.1\r\n", 0), 0u) << reqs[0];
  EXPECT_EQ(header_of(reqs[1], "Fencing-Token"), "abc");
  EXPECT_EQ(header_of(reqs[1], "Fencecheck-Client"), "probe");
}

TEST(ProbeTokenRequired, RefusalsProveNothingWhenTheControlIsRefusedToo) {
  RawHttpServer server(answer([](const std::string&) { return 404; }));  // e.g. a wrong path
  Probed p(FakeRules{}, {{"kind", "fake"}, {"url", server.url()}});
  const auto& tr = p.rule("token-required");
  EXPECT_EQ(tr.verdict, ProbeVerdict::kUnknown);
  EXPECT_THAT(tr.evidence, HasSubstr("control token 9007199254741038: HTTP 404 was not accepted either"));
}

TEST(ProbeTokenRequired, AFiveHundredIsAnUnknownOutcome) {
  RawHttpServer server(answer([](const std::string& req) { return header_of(req, "Fencing-Token") == "9007199254741038" ? 200 : 500; }));
  Probed p(FakeRules{}, {{"kind", "fake"}, {"url", server.url()}});
  EXPECT_EQ(p.rule("token-required").verdict, ProbeVerdict::kUnknown);
  EXPECT_THAT(p.rule("token-required").evidence, HasSubstr("(none): HTTP 500"));
}

// ---------------------------------------------------------------- the probe file

fs::path write_file(const fs::path& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir / name) << text;
  return dir / name;
}

TEST(ProbeFile, ALoneResourceMappingIsValidatedByTheLoader) {
  TempDir dir("probe-file");
  const auto ok = load_probe_resource(write_file(dir.path(), "r.yaml", "resource:\n  kind: store\n  fencing: global\n"));
  EXPECT_EQ(ok.spec.kind, "store");
  EXPECT_EQ(ok.spec.config, (nlohmann::json{{"fencing", "global"}}));
  EXPECT_FALSE(ok.scenario.has_value());
  EXPECT_EQ(ok.spec.positions.at("fencing"), (std::pair<int, int>{3, 12}));

  try {
    (void)load_probe_resource(write_file(dir.path(), "bad.yaml", "resource:\n  kind: store\n  fencing: per_key\n"));
    FAIL() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()), (dir.path() / "bad.yaml").string() +
                                         ":3:12: resource.fencing: unknown fencing mode \"per_key\"; expected one of: "
                                         "per-key, none, global, check-then-write");
  }
}

TEST(ProbeFile, JsonKeepsItsColumns) {
  TempDir dir("probe-file");
  const std::string text = R"({"resource": {"kind": "store", "fencing": "check-then-write", "check_window": "15ms"}})";
  const auto ok = load_probe_resource(write_file(dir.path(), "r.json", text + "\n"));
  EXPECT_EQ(ok.spec.config, (nlohmann::json{{"fencing", "check-then-write"}, {"check_window", "15ms"}}));
  EXPECT_EQ(ok.spec.positions.at("check_window").second, static_cast<int>(text.find("\"15ms\"")) + 1);
  try {
    (void)load_probe_resource(write_file(dir.path(), "bad.json", R"({"resource": {"kind": "store", "fencing": "bogus"}})"));
    FAIL() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.line(), 1);
    EXPECT_EQ(e.column(), 43);  // where "bogus" is in the user's text
    EXPECT_THAT(e.message(), HasSubstr("unknown fencing mode \"bogus\""));
  }
}

TEST(ProbeFile, EveryBadFileIsAnErrorAtItsPlace) {
  TempDir dir("probe-file");
  struct Case {
    std::string text;
    int line, column;
    std::string message;
  };
  const std::vector<Case> cases{
      {"resource: {kind: store\n", 2, 1, "YAML syntax error"},
      // yaml-cpp 0.7's LoadAll loops for ever on it (yaml_documents.h): an error at the comma.
      {",\n", 1, 1, "YAML syntax error: unexpected ','"},
      {"resorce:\n  kind: store\n", 1, 1, "unknown key \"resorce\": a probe file holds only `resource:`"},
      {"", 1, 1, "the file is empty"},
      {"- resource\n", 1, 1, "expected a mapping `resource: {kind: ..., ...}`"},
      {"resource:\n  kind: stor\n", 2, 9, "unknown resource kind \"stor\"; expected one of: store, postgres, http"},
      {"resource:\n  kind: store\n  check_window: 5ms\n", 3, 17, "check_window is only for fencing check-then-write"},
      {"  resource:\n    kind: store\n    fencing: 3\n", 3, 14, "unknown fencing mode \"3\""},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    try {
      (void)load_probe_resource(write_file(dir.path(), "c" + std::to_string(i) + ".yaml", c.text));
      ADD_FAILURE() << "no error for case " << i;
    } catch (const ScenarioError& e) {
      EXPECT_EQ(e.line(), c.line) << i << ": " << e.what();
      EXPECT_EQ(e.column(), c.column) << i << ": " << e.what();
      EXPECT_THAT(e.message(), HasSubstr(c.message)) << i;
    }
  }
  EXPECT_THROW((void)load_probe_resource(dir.path() / "missing.yaml"), ScenarioError);
}

TEST(ProbeFile, AScenarioGivesItsResource) {
  const auto r = load_probe_resource(fs::path(FENCECHECK_SOURCE_DIR) / "scenarios/catalogue/03-global-high-water-broken.yaml");
  EXPECT_EQ(r.spec.kind, "store");
  EXPECT_EQ(r.spec.fencing(), "global");
  ASSERT_TRUE(r.scenario.has_value());
  EXPECT_FALSE(r.scenario->empty());
}

// ---------------------------------------------------------------- probe_command

struct Command {
  TempDir dir{"probe-cmd"};
  FakeResource resource;
  ProbeCommandOptions options;
  std::ostringstream out, err;
  int opened = 0;

  explicit Command(FakeRules rules = {}) : resource(rules) {
    options.file = write_file(dir.path(), "r.yaml", "resource:\n  kind: store\n  fencing: per-key\n");
    options.run_root = dir.path() / "runs";
    options.probe = small_options();
    options.make_writer = writers_of(resource);
  }
  /// open() gives a fake instance (healthy or not).
  void open_fake(bool healthy = true) {
    options.open = [this, healthy](const resources::ResourceKind& kind, const nlohmann::json& config,
                                   const resources::ResourceRunContext& ctx) -> std::unique_ptr<resources::ResourceInstance> {
      ++opened;
      EXPECT_EQ(kind.name(), "store");
      EXPECT_EQ(config, (nlohmann::json{{"fencing", "per-key"}}));
      EXPECT_TRUE(fs::is_directory(ctx.run_dir));
      EXPECT_EQ(ctx.run_dir.parent_path(), options.run_root);
      return std::make_unique<FakeInstance>(resource, nlohmann::json{{"kind", "fake"}}, healthy);
    };
  }
  int run() { return probe_command(options, out, err); }
  std::size_t probe_dirs() const {
    if (!fs::exists(options.run_root)) return 0;
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(options.run_root), fs::directory_iterator()));
  }
};

TEST(ProbeCommand, AResourceThatCannotBeReachedIsExitThree) {
  Command c;
  c.options.open = [](const resources::ResourceKind&, const nlohmann::json&,
                      const resources::ResourceRunContext&) -> std::unique_ptr<resources::ResourceInstance> {
    throw resources::ResourceUnavailable("http://127.0.0.1:9 does not answer (Connection refused)");
  };
  EXPECT_EQ(c.run(), 3);
  EXPECT_EQ(c.err.str(), "fencecheck probe: resource store (" + c.options.file.string() +
                             "): http://127.0.0.1:9 does not answer (Connection refused)\n");
  EXPECT_EQ(c.out.str(), "");
  EXPECT_EQ(c.probe_dirs(), 0u);  // nothing left behind
  EXPECT_TRUE(c.resource.writes().empty());
}

TEST(ProbeCommand, AResourceThatFailsItsHealthCheckIsExitThree) {
  Command c;
  c.open_fake(/*healthy=*/false);
  EXPECT_EQ(c.run(), 3);
  EXPECT_THAT(c.err.str(), HasSubstr("fake resource (in memory) does not answer its health check"));
  EXPECT_TRUE(c.resource.writes().empty());
}

TEST(ProbeCommand, AFieldTheResourceRefusesIsExitTwoAtTheField) {
  Command c;
  c.options.open = [](const resources::ResourceKind&, const nlohmann::json&,
                      const resources::ResourceRunContext&) -> std::unique_ptr<resources::ResourceInstance> {
    throw resources::ResourceConfigError("fencing", "the resource refuses it");
  };
  EXPECT_EQ(c.run(), 2);
  EXPECT_EQ(c.err.str(), c.options.file.string() + ":3:12: resource.fencing: the resource refuses it\n");
}

TEST(ProbeCommand, BadInputIsExitTwoBeforeAnythingOpens) {
  Command c;
  c.open_fake();
  c.options.file = write_file(c.dir.path(), "bad.yaml", "resource: [store]\n");
  EXPECT_EQ(c.run(), 2);
  EXPECT_THAT(c.err.str(), HasSubstr("bad.yaml:1:11: resource: expected a mapping with kind and the kind's fields"));
  EXPECT_EQ(c.opened, 0);
  Command d;
  d.open_fake();
  d.options.probe.rounds = 0;
  EXPECT_EQ(d.run(), 2);
  EXPECT_THAT(d.err.str(), HasSubstr("--rounds must be between 1 and 100000"));
  EXPECT_EQ(d.opened, 0);
}

TEST(ProbeCommand, WritesJsonAndJunitAndRemovesItsDirectoryWhenEverythingHolds) {
  Command c;
  c.open_fake();
  c.options.json_path = (c.dir.path() / "out/probe.json").string();
  c.options.junit_path = (c.dir.path() / "out/probe.xml").string();
  EXPECT_EQ(c.run(), 0) << c.err.str();
  EXPECT_EQ(c.opened, 1);
  EXPECT_EQ(c.probe_dirs(), 0u);

  std::ifstream jf(c.options.json_path);
  const auto j = nlohmann::json::parse(jf);
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["resource"]["kind"], "store");
  EXPECT_EQ(j["resource"]["design"], "per-key");
  EXPECT_EQ(j["key_prefix"], "fencecheck-probe-test");
  EXPECT_EQ(j["options"]["rounds"], 10);
  EXPECT_EQ(j["options"]["seed"], 1);
  EXPECT_EQ(j["summary"], (nlohmann::json{{"holds", 6}, {"broken", 0}, {"not_applicable", 1}, {"unknown", 0}}));
  ASSERT_EQ(j["rules"].size(), 7u);
  EXPECT_EQ(j["rules"][0]["rule"], "lower-token-rejected");
  EXPECT_EQ(j["rules"][0]["verdict"], "holds");
  EXPECT_EQ(j["rules"][0]["steps"][1]["outcome"], "rejected");
  EXPECT_EQ(j["rules"][0]["steps"][1]["token"], 9);
  EXPECT_EQ(j["rules"][0]["steps"][1]["high_water"], 10);
  EXPECT_EQ(j["rules"][5]["verdict"], "not-applicable");
  EXPECT_TRUE(j["probe_dir"].is_null());

  pugi::xml_document doc;
  ASSERT_TRUE(doc.load_file(c.options.junit_path.c_str()));
  auto suite = doc.child("testsuites").child("testsuite");
  EXPECT_STREQ(suite.attribute("name").value(), "probe");
  EXPECT_STREQ(suite.attribute("tests").value(), "7");
  EXPECT_STREQ(suite.attribute("failures").value(), "0");
  EXPECT_STREQ(suite.attribute("skipped").value(), "1");
  auto skipped = suite.find_child_by_attribute("testcase", "name", "token-required");
  EXPECT_TRUE(skipped.child("skipped"));
  EXPECT_STREQ(skipped.attribute("classname").value(), "fencecheck.probe.store");

  // The table: one row per rule, and the summary.
  EXPECT_THAT(c.out.str(), HasSubstr("\nlower-token-rejected       holds           token b - 1 after b on a fresh key, rejected at each of 7"));
  EXPECT_THAT(c.out.str(), HasSubstr("7 rules: 6 hold, 0 broken, 1 not applicable, 0 unknown; probe "));
}

TEST(ProbeCommand, ABrokenRuleIsExitOneWithItsStepsAndTheDirectoryKept) {
  FakeRules rules;
  rules.compare = FakeRules::Compare::kNone;
  Command c(rules);
  c.open_fake();
  c.options.junit_path = (c.dir.path() / "probe.xml").string();
  EXPECT_EQ(c.run(), 1);
  EXPECT_EQ(c.probe_dirs(), 1u);
  const std::string out = c.out.str();
  EXPECT_THAT(out, HasSubstr("\nlower-token-rejected: broken (stale-write-accepted)\n"));
  EXPECT_THAT(out, HasSubstr("write fencecheck-probe-test-lower-10 seg 0 chunk 1 token 9 client probe  ->  accepted"));
  EXPECT_THAT(out, HasSubstr("probe directory kept: "));

  pugi::xml_document doc;
  ASSERT_TRUE(doc.load_file(c.options.junit_path.c_str()));
  auto suite = doc.child("testsuites").child("testsuite");
  auto lower = suite.find_child_by_attribute("testcase", "name", "lower-token-rejected");
  ASSERT_TRUE(lower.child("failure"));
  EXPECT_STREQ(lower.child("failure").attribute("type").value(), "stale-write-accepted");
  EXPECT_THAT(lower.child("failure").text().get(), HasSubstr("token 9 client probe  ->  accepted"));
  auto nochange = suite.find_child_by_attribute("testcase", "name", "rejection-changes-nothing");
  EXPECT_STREQ(nochange.child("error").attribute("type").value(), "unknown");
  EXPECT_STREQ(suite.attribute("failures").value(), "2");
}

TEST(ProbeCommand, JsonOnStdoutReplacesTheTable) {
  Command c;
  c.open_fake();
  c.options.json_path = "-";
  EXPECT_EQ(c.run(), 0);
  const auto j = nlohmann::json::parse(c.out.str());
  EXPECT_EQ(j["summary"]["holds"], 6);
}

// ResourceInstance::readback_into's default (every kind that does not stream its reply: http,
// postgres, this fake): readback(), its log handed to the sink after one clear(), none kept.
TEST(ResourceInstanceDefaults, ReadBackIntoHandsTheLogOverAfterClearingTheSink) {
  FakeResource r;
  FakeInstance inst(r);
  ASSERT_EQ(r.write("k", 0, 0, 5, "w1", "a").outcome, fencecheck::WriteOutcome::kAccepted);
  ASSERT_EQ(r.write("k", 0, 1, 6, "w2", "b").outcome, fencecheck::WriteOutcome::kAccepted);
  const ReadBack whole = inst.readback();
  ASSERT_EQ(whole.log.size(), 2u);
  std::vector<fencecheck::AcceptedWrite> got = {fencecheck::AcceptedWrite{1, "stale", 0, 0, 1, "x"}};
  int clears = 0;
  const ReadBack rb = inst.readback_into(fencecheck::ReadBackLogSink{
      [&](fencecheck::AcceptedWrite&& w) { got.push_back(std::move(w)); }, [&] {
        got.clear();
        ++clears;
      }});
  EXPECT_TRUE(rb.log.empty());
  EXPECT_EQ(clears, 1);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].token, 5);
  EXPECT_EQ(got[1].client, "w2");
  EXPECT_EQ(got[1].chunk, 1);
  EXPECT_EQ(rb.high_water, whole.high_water);
  EXPECT_EQ(rb.resource, "fake");
}

}  // namespace
}  // namespace fencecheck::harness
